"""Compiled kernels: fusegrad's generated C beside torch.compile (default inductor), one run.

- the 10M-element chain `(sin(x)*exp(-x*x)+0.5*x)/(1+abs(x))`;
- row softmax on 4096x4096 (`exp(x - amax) / sum(exp(x - amax))`);
- LayerNorm over the rows of 4096x4096 (no affine; torch.compile of `F.layer_norm`);
- compiled training steps (forward + cross-entropy + backward + SGD with momentum) of the
  MLP 784-1024-1024-10 (batch 256) and LeNet-5 (batch 64) of benchmarks/train_step.py,
  each model through `fusegrad.compile` (the default backend: AOT autograd, then generated C)
  beside `torch.compile` of its torch twin with the same initial weights.

The kernels' side is a registry-level graph compiled by `fusegrad.compiler.codegen.
compile_graph`. Times are the best of `--repeat` calls after a warm-up, alternating the two
libraries; the ratio is fusegrad's time over torch.compile's. Also checks that NaN/Inf inputs
give eager's results, and that the compiled training steps give the same losses as eager.

Run: `OMP_NUM_THREADS=1 python benchmarks/compiled.py` (add `--quick` for a short run,
`--only train` for the training steps).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # train_step's models

import numpy as np  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad import fx  # noqa: E402
from fusegrad._dispatch import call  # noqa: E402
from fusegrad.compiler.codegen import compile_graph  # noqa: E402
from fusegrad.ops import REGISTRY  # noqa: E402


class _Handle:
    def __init__(self, op):
        self.op = op
        self.__name__ = op.name.replace(".", "_")

    def __call__(self, *args):
        return call(self.op, *args)


def _graph(build):
    g = fx.Graph()
    x = g.placeholder("x")

    def op(name, *args):
        return g.call_function(_Handle(REGISTRY[name]), args)

    g.output((build(op, x),))
    return fx.GraphModule(fusegrad.nn.Module(), g)


def chain_graph(op, x):
    """The chain as registry ops."""
    s = op("sin", x)
    e = op("exp", op("neg", op("mul.Tensor", x, x)))
    num = op("add.Tensor", op("mul.Tensor", s, e), op("mul.Tensor", x, 0.5))
    return op("div.Tensor", num, op("add.Tensor", op("abs", x), 1))


def softmax_graph(op, x):
    """Row softmax as registry ops."""
    e = op("exp", op("sub.Tensor", x, op("amax", x, [1], True)))
    return op("div.Tensor", e, op("sum.dim_IntList", e, [1], True))


def layer_norm_graph(op, x):
    """LayerNorm over rows (no affine) as registry ops."""
    d = op("sub.Tensor", x, op("mean.dim", x, [1], True))
    var = op("mean.dim", op("mul.Tensor", d, d), [1], True)
    return op("mul.Tensor", d, op("rsqrt", op("add.Tensor", var, 1e-5)))


def layer_norm_torch(x):
    return torch.nn.functional.layer_norm(x, x.shape[1:], eps=1e-5)


def chain_torch(x):
    return (torch.sin(x) * torch.exp(-x * x) + 0.5 * x) / (1 + torch.abs(x))


def softmax_torch(x):
    e = torch.exp(x - torch.amax(x, 1, keepdim=True))
    return e / e.sum(1, keepdim=True)


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure(name, build, torch_fn, shape, repeat):
    """(fusegrad s, torch.compile s) and a correctness check."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal(shape).astype(np.float32)
    xf, xt = fusegrad.from_numpy(data), torch.from_numpy(data)
    compiled = compile_graph(_graph(build), [xf])
    tc = torch.compile(torch_fn)
    compiled(xf)
    tc(xt)
    fg_times, tc_times = [], []
    for _ in range(repeat):
        fg_times.append(_best(lambda: compiled(xf), 1))
        tc_times.append(_best(lambda: tc(xt), 1))
    got = compiled(xf)[0].numpy()
    np.testing.assert_allclose(got, torch_fn(xt).numpy(), rtol=2e-5, atol=2e-5)
    special = data.copy().reshape(-1)
    special[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, 3e38]
    special = special.reshape(shape)
    sf = fusegrad.from_numpy(special)
    eager = _graph(build)
    want = _eager(eager, sf)
    got = compiled(sf)[0].numpy()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, equal_nan=True)
    return min(fg_times), min(tc_times)


def _eager(gm, x):
    env = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = x
        elif n.op == "call_function":
            args = tuple(env.get(a, a) if isinstance(a, fx.Node) else a for a in n.args)
            env[n] = n.target(*args)
        elif n.op == "output":
            return env[n.args[0][0]].numpy()
    return None


def measure_training(case, repeat: int) -> tuple:
    """(fusegrad s, torch.compile s, fusegrad first-step s, torch first-step s) per training
    step of `case` (a train_step.Case), both models compiled; checks the compiled fusegrad
    steps' losses against eager steps of a copy of the model."""
    import copy

    from train_step import copy_weights, make_step, torch_twin

    import fusegrad.models as fm
    from fusegrad.models import resnet, simple

    fusegrad.manual_seed(0)
    fg_model, th_model = case.build(fm, {"simple": torch_twin(simple),
                                         "resnet": torch_twin(resnet)})
    copy_weights(fg_model, th_model)
    eager_model = copy.deepcopy(fg_model)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((case.batch, *case.input_shape)).astype(np.float32)
    y = rng.integers(0, 10, case.batch)
    xf, yf = fusegrad.from_numpy(x), fusegrad.from_numpy(y)
    fg_step = make_step(fusegrad, fusegrad.compile(fg_model), xf, yf)
    eager_step = make_step(fusegrad, eager_model, xf, yf)
    tc_step = make_step(torch, torch.compile(th_model), torch.from_numpy(x),
                        torch.from_numpy(y))
    t = time.perf_counter()
    first = [float(fg_step())]
    fg_first = time.perf_counter() - t
    t = time.perf_counter()
    tc_step()
    tc_first = time.perf_counter() - t
    first.append(float(fg_step()))
    want = [float(eager_step()), float(eager_step())]
    np.testing.assert_allclose(first, want, rtol=1e-4)
    fg_times, tc_times = [], []
    for _ in range(repeat):
        fg_times.append(_best(fg_step, 1))
        tc_times.append(_best(tc_step, 1))
    return min(fg_times), min(tc_times), fg_first, tc_first


def main() -> None:
    """Print each figure with its ratio to torch.compile."""
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="", help="run the figures whose name contains this")
    args = p.parse_args()
    repeat = 3 if args.quick else 10
    print(f"threads: {os.environ.get('OMP_NUM_THREADS')} (fusegrad and torch), "
          f"torch {torch.__version__}")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    for name, build, tfn, shape in (
            ("chain 10M", chain_graph, chain_torch, (10_000_000,)),
            ("softmax 4096x4096", softmax_graph, softmax_torch, (4096, 4096)),
            ("layer norm 4096x4096", layer_norm_graph, layer_norm_torch, (4096, 4096))):
        if args.only not in name:
            continue
        fg, tc = measure(name, build, tfn, shape, repeat)
        print(f"{name:20s} fusegrad {fg * 1e3:8.2f} ms   torch.compile {tc * 1e3:8.2f} ms   "
              f"ratio {fg / tc:5.2f}x   (NaN/Inf inputs: eager's results)")
    from train_step import CASES

    for case in CASES[:2]:
        name = f"train {case.name} b{case.batch}"
        if args.only not in name:
            continue
        fg, tc, fg_first, tc_first = measure_training(case, repeat)
        print(f"{name:20s} fusegrad {fg * 1e3:8.2f} ms   torch.compile {tc * 1e3:8.2f} ms   "
              f"ratio {fg / tc:5.2f}x   (first step: fusegrad {fg_first:.2f} s, "
              f"torch.compile {tc_first:.2f} s; losses equal eager's)")


if __name__ == "__main__":
    main()
