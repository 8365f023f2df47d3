"""Compiled kernels: fusegrad's generated C beside torch.compile (default inductor), one run.

- the 10M-element chain `(sin(x)*exp(-x*x)+0.5*x)/(1+abs(x))`;
- row softmax on 4096x4096 (`exp(x - amax) / sum(exp(x - amax))`);
- LayerNorm over the rows of 4096x4096 (no affine; torch.compile of `F.layer_norm`);
- compiled training steps (forward + cross-entropy + backward + SGD with momentum) of the
  MLP 784-1024-1024-10 (batch 256), LeNet-5 (batch 64) and ResNet-18 (3x32x32, batch 32) of
  benchmarks/train_step.py and a 2-layer GPT (nanoGPT's shape from tests/model_zoo.py:
  d=128, 4 heads, sequence 64, vocabulary 256, batch 16), each model through
  `fusegrad.compile` (the default backend: AOT autograd, then generated C) beside
  `torch.compile` of its torch twin with the same initial weights; the number of graphs
  each library captured is printed beside (fusegrad's should not exceed torch's);
- compile latency in a fresh process (the first compiled call less one eager call, imports
  excluded): the 10M chain with an empty cache and again with the cache the first process
  left (FUSEGRAD_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR), and the first compiled training step
  of LeNet-5 (batch 64) with an empty cache.

The kernels' side is a registry-level graph compiled by `fusegrad.compiler.codegen.
compile_graph`. Times are the best of `--repeat` calls after a warm-up, alternating the two
libraries; the ratio is fusegrad's time over torch.compile's. Also checks that NaN/Inf inputs
give eager's results, and that the compiled training steps give the same losses as eager.

Each figure is measured with 1 and with 2 threads (`--threads 1,2`: one process per count,
OMP_NUM_THREADS set before NumPy and torch load; torch.set_num_threads too).

Run: `python benchmarks/compiled.py` (add `--quick` for a short run, `--only train` for the
training steps, `--only latency` for the compile latencies, `--threads 1`; `--kernels` adds,
after each training figure, the time of each of fusegrad's kernels and extern calls in the
compiled forward and backward graphs).
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


def _classifier(case):
    """(fusegrad model, torch model, fusegrad inputs, torch inputs, loss) of a
    train_step.Case: cross-entropy of the model's logits."""
    from train_step import build_model, inputs, load_arrays, state_arrays

    fg_model, th_model = build_model(case, "fusegrad"), build_model(case, "torch")
    load_arrays(th_model, state_arrays(fg_model))
    x, y = inputs(case)

    def loss(lib, model, x, y):
        return lib.nn.functional.cross_entropy(model(x), y)

    return (fg_model, th_model, (fusegrad.from_numpy(x), fusegrad.from_numpy(y)),
            (torch.from_numpy(x), torch.from_numpy(y)), loss)


GPT_SHAPE = dict(block_size=64, vocab_size=256, n_layer=2, n_head=4, n_embd=128,
                 dropout=0.0, bias=True)


def _gpt(batch: int = 16):
    """The 2-layer GPT (nanoGPT's model of tests/model_zoo.py) in both libraries, equal
    weights; its loss is the model's own cross-entropy over next tokens."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "tests"))
    from model_zoo import GPTConfig, definitions

    torch.manual_seed(0)
    th_model = definitions(torch).GPT(GPTConfig(**GPT_SHAPE))
    fg_model = definitions(fusegrad).GPT(GPTConfig(**GPT_SHAPE))
    fg_model.load_state_dict({k: fusegrad.tensor(v.detach().numpy().copy())
                              for k, v in th_model.state_dict().items()})
    rng = np.random.default_rng(0)
    idx = rng.integers(0, GPT_SHAPE["vocab_size"], (batch, GPT_SHAPE["block_size"]))
    targets = np.roll(idx, -1, axis=1)

    def loss(lib, model, idx, targets):
        return model(idx, targets)[1]

    return (fg_model, th_model, (fusegrad.from_numpy(idx), fusegrad.from_numpy(targets)),
            (torch.from_numpy(idx), torch.from_numpy(targets)), loss)


def _train_step(lib, model, inputs, loss_of):
    """One SGD-with-momentum training step of `model` per call; returns the loss."""
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()

    def step():
        opt.zero_grad()
        loss = loss_of(lib, model, *inputs)
        loss.backward()
        opt.step()
        return loss

    return step


def counting_backend(lib):
    """(backend, count): the library's inductor backend, counting the graphs it gets."""
    if lib is fusegrad:
        from fusegrad._inductor import compile_fx
    else:
        from torch._inductor.compile_fx import compile_fx
    count = [0]

    def backend(gm, example_inputs):
        count[0] += 1
        return compile_fx(gm, example_inputs)

    return backend, count


def measure_training(setup, repeat: int) -> tuple:
    """(fusegrad s, torch.compile s, fusegrad graphs, torch graphs) per training step of the
    model `setup()` builds, both compiled; checks the compiled fusegrad steps' losses
    against eager steps of a copy of the model."""
    import copy

    fg_model, th_model, fg_in, th_in, loss_of = setup()
    eager_model = copy.deepcopy(fg_model)
    fg_backend, fg_graphs = counting_backend(fusegrad)
    th_backend, th_graphs = counting_backend(torch)
    fg_step = _train_step(fusegrad, fusegrad.compile(fg_model, backend=fg_backend), fg_in,
                          loss_of)
    eager_step = _train_step(fusegrad, eager_model, fg_in, loss_of)
    tc_step = _train_step(torch, torch.compile(th_model, backend=th_backend), th_in, loss_of)
    first = [float(fg_step().detach()), float(fg_step().detach())]
    tc_step()
    want = [float(eager_step().detach()), float(eager_step().detach())]
    np.testing.assert_allclose(first, want, rtol=1e-4)
    fg_times, tc_times = [], []
    for _ in range(repeat):
        fg_times.append(_best(fg_step, 1))
        tc_times.append(_best(tc_step, 1))
    return min(fg_times), min(tc_times), fg_graphs[0], th_graphs[0]


def kernel_times(setup, repeat: int, top: int = 12) -> None:
    """Print where a compiled fusegrad training step's time goes: per compiled graph
    (forward, backward) its whole call and its largest kernels and extern calls, mean
    milliseconds per step over `repeat` steps after two warm-up steps."""
    import collections

    from fusegrad.compiler.codegen import wrapper

    spent: dict = collections.defaultdict(float)
    load = wrapper.load
    loaded = [0]  # graphs in the order they were compiled: the forward first

    def timed(fn, name):
        def run(*args):
            t = time.perf_counter()
            out = fn(*args)
            spent[name] += time.perf_counter() - t
            return out
        return run

    def timed_load(art, libs):
        call = load(art, libs)
        graph = f"graph {loaded[0]}"
        loaded[0] += 1
        spent[f"{graph}: whole call"] = 0.0
        for name in list(call.scope):
            if name.startswith(("cpp_fused", "_extern")):
                call.scope[name] = timed(call.scope[name], f"{graph}: {name}")
        return timed(call, f"{graph}: whole call")

    wrapper.load = timed_load
    try:
        fg_model, _, fg_in, _, loss_of = setup()
        step = _train_step(fusegrad, fusegrad.compile(fg_model), fg_in, loss_of)
        step()
        step()
        spent.clear()
        for _ in range(repeat):
            step()
    finally:
        wrapper.load = load
    for graph in sorted({k.split(":")[0] for k in spent}):
        rows = sorted(((v, k) for k, v in spent.items() if k.startswith(graph + ":")),
                      reverse=True)
        for v, k in rows[:top + 1]:
            print(f"  {k:64s} {v / repeat * 1e3:8.3f} ms", flush=True)


_LATENCY_CHILD = """
import os, sys, time
sys.path.insert(0, {bench!r})
lib_name, kind = sys.argv[1], sys.argv[2]
import numpy as np
import compiled as bench
lib = bench.fusegrad if lib_name == "fusegrad" else bench.torch
lib.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
if kind == "chain":
    data = np.random.default_rng(0).standard_normal(10_000_000).astype(np.float32)
    x = lib.from_numpy(data)
    fn = bench.chain_torch if lib is bench.torch else bench.chain_fusegrad
    fn(x)  # warm-up: page faults and lazily loaded kernels count for neither side
    t = time.perf_counter(); fn(x); eager = time.perf_counter() - t
    compiled = lib.compile(fn)
    t = time.perf_counter(); compiled(x); first = time.perf_counter() - t
    t = time.perf_counter(); compiled(x); second = time.perf_counter() - t
else:
    import copy
    from train_step import CASES
    fg_model, th_model, fg_in, th_in, loss_of = bench._classifier(CASES[1])
    model, inputs = (fg_model, fg_in) if lib is bench.fusegrad else (th_model, th_in)
    eager_step = bench._train_step(lib, copy.deepcopy(model), inputs, loss_of)
    eager_step()
    t = time.perf_counter(); eager_step(); eager = time.perf_counter() - t
    step = bench._train_step(lib, lib.compile(model), inputs, loss_of)
    t = time.perf_counter(); step(); first = time.perf_counter() - t
    t = time.perf_counter(); step(); second = time.perf_counter() - t
print(first - eager, first - second)
"""


def chain_fusegrad(x):
    """The chain in fusegrad (the function fusegrad.compile captures)."""
    return (fusegrad.sin(x) * fusegrad.exp(-x * x) + 0.5 * x) / (1 + fusegrad.abs(x))


def compile_latency(lib: str, kind: str, cache_dir: str) -> tuple:
    """Seconds of the first compiled call over one eager call (after an eager warm-up
    call), and over the second compiled call, in a fresh process whose compiler caches
    live in `cache_dir`."""
    import subprocess

    env = dict(os.environ, FUSEGRAD_CACHE_DIR=os.path.join(cache_dir, "fusegrad"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"))
    code = _LATENCY_CHILD.format(bench=os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code, lib, kind], env=env,
                         capture_output=True, text=True, check=True, timeout=900)
    return tuple(float(v) for v in out.stdout.strip().splitlines()[-1].split())


def latencies() -> None:
    """Print the compile latencies, fusegrad beside torch.compile."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="fg-latency-") as tmp:
        rows = {}
        for lib in ("fusegrad", "torch"):
            cold = compile_latency(lib, "chain", os.path.join(tmp, "chain"))
            warm = compile_latency(lib, "chain", os.path.join(tmp, "chain"))
            lenet = compile_latency(lib, "lenet", os.path.join(tmp, "lenet"))
            rows[lib] = (cold, warm, lenet)
    for i, name in enumerate(("latency chain cold", "latency chain warm",
                              "latency LeNet-5 step")):
        (fg, fg2), (tc, tc2) = rows["fusegrad"][i], rows["torch"][i]
        print(f"{name:24s} fusegrad {fg:8.2f} s    torch.compile {tc:8.2f} s    "
              f"ratio {fg / tc:5.2f}x   (first compiled call less the second: fusegrad "
              f"{fg2:.2f} s, torch.compile {tc2:.2f} s)", flush=True)


def run(args) -> None:
    """Every figure at the thread count of this process."""
    repeat = 3 if args.quick else 10
    print(f"threads: {os.environ.get('OMP_NUM_THREADS')} (fusegrad and torch), "
          f"torch {torch.__version__}", flush=True)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    for name, build, tfn, shape in (
            ("chain 10M", chain_graph, chain_torch, (10_000_000,)),
            ("softmax 4096x4096", softmax_graph, softmax_torch, (4096, 4096)),
            ("layer norm 4096x4096", layer_norm_graph, layer_norm_torch, (4096, 4096))):
        if args.only not in name:
            continue
        fg, tc = measure(name, build, tfn, shape, repeat)
        print(f"{name:24s} fusegrad {fg * 1e3:8.2f} ms   torch.compile {tc * 1e3:8.2f} ms   "
              f"ratio {fg / tc:5.2f}x   (NaN/Inf inputs: eager's results)", flush=True)
    from train_step import CASES

    setups = [(f"train {c.name.split(' ')[0]} b{c.batch}", lambda c=c: _classifier(c))
              for c in CASES] + [("train GPT-2L d128 b16", _gpt)]
    for name, setup in setups:
        if args.only not in name:
            continue
        fg, tc, fg_graphs, tc_graphs = measure_training(setup, repeat)
        print(f"{name:24s} fusegrad {fg * 1e3:8.2f} ms   torch.compile {tc * 1e3:8.2f} ms   "
              f"ratio {fg / tc:5.2f}x   (graphs: fusegrad {fg_graphs}, torch.compile "
              f"{tc_graphs}; losses equal eager's)", flush=True)
        if args.kernels:
            kernel_times(setup, repeat)
    if args.only in "latency":
        latencies()


def main() -> None:
    """Print each figure with its ratio to torch.compile, per thread count."""
    import subprocess

    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="", help="run the figures whose name contains this")
    p.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    p.add_argument("--kernels", action="store_true",
                   help="after each training figure, fusegrad's time per kernel and extern")
    args = p.parse_args()
    counts = [t.strip() for t in args.threads.split(",") if t.strip()]
    if counts == [os.environ.get("OMP_NUM_THREADS")]:
        run(args)
        return
    for t in counts:
        argv = [sys.executable, os.path.abspath(__file__), "--threads", t, "--only", args.only]
        argv += ["--quick"] if args.quick else []
        subprocess.run(argv + (["--kernels"] if args.kernels else []), check=True,
                       env=dict(os.environ, OMP_NUM_THREADS=t))


if __name__ == "__main__":
    main()
