"""Programs from a fifth differential fuzzing of `fusegrad.compile` (dynamic shapes, grad
and autocast regions, integer and bool tensors, reductions, module state changed between
calls), each compiled on the three backends against the same program run eagerly over
several calls: values, geometry, dtypes, autograd flags, gradients, errors (type and text),
the grad mode afterwards and the inputs (and module state) afterwards must be equal.

No torch here: the 3.12/3.13 runs use this file.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad
import fusegrad.nn as nn

BACKENDS = ["eager", "aot_eager", "inductor"]
# (the reductions over size-1 dimensions with a correction warn, eagerly and compiled alike)
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0")


def _state(t):
    """What a caller can see of tensor `t` but its values: geometry (a stride of a size-1
    dimension tells nothing) and autograd flags."""
    strides = tuple(s if n != 1 else None for s, n in zip(t.stride(), t.shape))
    return (tuple(t.shape), strides, t.dtype, t.requires_grad, t.grad_fn is None)


def _same(got: list, ref: list) -> None:
    """Tensors and numbers `got` as `ref`: tensors' geometry and flags exactly, values to
    rounding (a fused kernel may round once where eager's two ops round twice)."""
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        if not isinstance(r, fusegrad.Tensor):
            assert type(g) is type(r) and g == r
            continue
        assert _state(g) == _state(r)
        tol = 2e-2 if r.dtype in (fusegrad.bfloat16, fusegrad.float16) else 1e-5
        np.testing.assert_allclose(g.detach().float().numpy() if tol > 1e-5 else
                                   g.detach().numpy(),
                                   r.detach().float().numpy() if tol > 1e-5 else
                                   r.detach().numpy(), rtol=tol, atol=tol)


def _flat(out) -> list:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _run(fn, args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return None, (type(e), str(e))


def _backward(out, args) -> list:
    """The inputs' gradients after a backward through every float output needing grad."""
    outs = [o for o in _flat(out) if isinstance(o, fusegrad.Tensor) and o.requires_grad]
    if outs:
        sum(((o.double() * (i + 1.5)).sum() for i, o in enumerate(outs))).backward()
    return [a.grad for a in args if isinstance(a, fusegrad.Tensor) and a.requires_grad]


def _compare(fn, make_args, backend, calls: int = 3, outer=None, **compile_kw) -> None:
    """`fn` compiled on `backend` against `fn` run eagerly, each call on fresh arguments
    (`make_args(call)`), under the context `outer` when given."""
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(fn, backend=backend, **compile_kw)
    for call in range(calls):
        ref_args, got_args = make_args(call), make_args(call)
        results = []
        for f, args in ((fn, ref_args), (compiled, got_args)):
            try:
                if outer is not None:
                    with outer():
                        out, err = _run(f, args)
                else:
                    out, err = _run(f, args)
                results.append((out, err, fusegrad.is_grad_enabled()))
            finally:
                fusegrad.set_grad_enabled(True)
        (ref, ref_err, ref_mode), (got, got_err, got_mode) = results
        assert got_err == ref_err and got_mode == ref_mode
        _same(_flat(got), _flat(ref))
        _same(_flat(got_args), _flat(ref_args))
        if ref_err is None:
            _same(_backward(got, got_args), _backward(ref, ref_args))


# -------------------------------------------------------------- sizes changing per call


def _size_arithmetic(x, b):
    n, m = x.shape
    y = x[: n // 2 + 1] * 2
    y = y.narrow(0, y.shape[0] // 3, y.shape[0] - y.shape[0] // 3)
    y = y.reshape(y.shape[1], y.shape[0]).t() + fusegrad.arange(m, dtype=x.dtype) * 0
    y = fusegrad.cat([y, y[: y.shape[0] // 2]], 0) * b
    y = y.new_zeros(y.shape[0] + 1, m)[1:] + y.cumsum(0)
    z = x[:, None, :].expand(n, 2, m).reshape(n * 2, m) / max(n, 1)
    return y, z.flatten()[: z.numel() // 2 * 2].view(-1, 2), y.shape[0] * 3, n // 2


def _size_make(sizes, broadcast):
    def make(call):
        n, m = sizes[call], 3
        x = ((fusegrad.arange(float(n * m)).view(n, m) * 1.7).sin() * 3).round() / 2
        b = broadcast(call, m)
        return [x.requires_grad_(), b]
    return make


_BROADCASTS = {
    "row_then_one": lambda call, m: (fusegrad.arange(1.0, m + 1.0).view(1, m) if call % 2
                                     else fusegrad.full((1, 1), 3.0)),
    "scalar": lambda call, m: fusegrad.tensor(1.5 + call),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("broadcast", sorted(_BROADCASTS))
@pytest.mark.parametrize("dynamic", [None, True])
def test_size_arithmetic_over_changing_sizes(dynamic, broadcast, backend):
    sizes = [4, 6, 0, 1, 5]
    _compare(_size_arithmetic, _size_make(sizes, _BROADCASTS[broadcast]), backend,
             calls=len(sizes), dynamic=dynamic)


def _marked(x):
    y = x[: x.shape[0] // 2] + x.sum(0)
    return y.softmax(0), fusegrad.zeros(x.shape[0], 1) + x.var(1, keepdim=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mark_dynamic_sizes(backend):
    sizes = [4, 6, 3]

    def make(call):
        x = fusegrad.arange(float(sizes[call] * 3)).view(-1, 3).cos().requires_grad_()
        fusegrad._dynamo.mark_dynamic(x, 0)
        return [x]

    _compare(_marked, make, backend)


# ---------------------------------------------------- grad and autocast regions inside


def _regions(x, w, w2, flag):
    y = x * 1
    with fusegrad.no_grad():
        z = y.sin()
    y = y + z
    with fusegrad.set_grad_enabled(flag):
        y = y.cos() * w
    with fusegrad.no_grad():
        with fusegrad.enable_grad():
            y = y * w
    with fusegrad.autocast("cpu", dtype=fusegrad.bfloat16, enabled=flag):
        y = y @ w2
    y = y.float()
    d = y.detach().requires_grad_()
    return y * d, d, y.requires_grad, fusegrad.is_grad_enabled()


def _grad_mode_left_changed(x, w, flag):
    fusegrad.set_grad_enabled(flag)
    return x * w, fusegrad.is_autocast_enabled("cpu")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("outer", [None, fusegrad.no_grad])
def test_grad_and_autocast_regions(outer, backend):
    flags = [False, True, True, False]

    def make(call):
        x = (fusegrad.arange(12.0).view(3, 4) / 5 - 1).requires_grad_()
        w = (fusegrad.arange(4.0) / 3 + 0.5).requires_grad_()
        w2 = fusegrad.arange(16.0).view(4, 4) / 10 - 0.3
        return [x, w, w2, flags[call]]

    _compare(_regions, make, backend, calls=4, outer=outer)
    _compare(_grad_mode_left_changed, lambda call: make(call)[:2] + [flags[call]], backend,
             calls=4, outer=outer)


# --------------------------------------------------------------- integer and bool tensors


def _integers(i, j, z):
    b = i > j
    q = i // j + i % j + fusegrad.remainder(i, -3) + (-i) % 4 + (i // -2)
    s = (i << 2) + (i >> 1) + (i ^ j) + fusegrad.div(i, j, rounding_mode="trunc")
    f = z.masked_fill(i < 0, 0.5) + fusegrad.where(b, z, i)
    g = z.gather(1, z.topk(2, 1).indices).sum(1, keepdim=True) * z
    g = g + z.gather(1, i.argmax(1, keepdim=True))
    acc = z.clone().index_put_((i.abs() % 3, j.abs() % 4), z[0, 0] + 1, accumulate=True)
    cnt = i.new_zeros(5).index_put_((i.abs().flatten() % 5,), fusegrad.ones_like(
        i.flatten()), accumulate=True)
    return q, s, f, g, acc, cnt, b.sum(), b.sum(1), (i > 0).long().cumsum(1), i.clamp(min=0.5)


def _data_dependent(i, j, z):
    return z[i > 0] * 2, fusegrad.nonzero(i > j), z[(i < 0).any(1)], (i < 0).nonzero(
        as_tuple=True)[1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("fn", "dtype"), [(_integers, "int64"), (_data_dependent, "int32")])
def test_integer_and_bool_tensors(fn, dtype, backend):
    rows = [3, 3, 2, 5]

    def make(call):
        k = rows[call] * 4
        i = (fusegrad.arange(k) * 7 % 19 - 9).to(getattr(fusegrad, dtype)).view(-1, 4)
        j = fusegrad.tensor([-3, -2, -1, 1, 2, 3, 5] * 4)[call:call + k].view(-1, 4)
        z = (fusegrad.arange(float(k)) * 0.37 + call).sin().view(-1, 4).requires_grad_()
        return [i, j, z]

    _compare(fn, make, backend, calls=len(rows))


# ------------------------------------------------------------------------- reductions


def _reductions(z, w, i):
    return (z.sum((0, 2), keepdim=True), z.mean(1, dtype=fusegrad.float64),
            z.cumsum(1, dtype=fusegrad.float64), z.cumprod(-1), z.logcumsumexp(0),
            z.var(1, correction=0), z.std(2, correction=2, keepdim=True),
            fusegrad.var_mean(z, (-1, 0), correction=1)[0], z.norm(p=1, dim=1),
            fusegrad.linalg.vector_norm(z, ord=float("inf"), dim=2),
            fusegrad.linalg.vector_norm(z, ord=3, dim=(0, 2), keepdim=True),
            z.softmax(0), z.log_softmax(1, dtype=fusegrad.float64), z + w, z * i,
            i.sum(1), i.prod(2), i.cumsum(0), i.float().mean(0), z.logsumexp(1),
            z.sum(-1, dtype=fusegrad.float16))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32")])
def test_reductions_over_sizes_with_zero_and_one(dtypes, backend):
    shapes = [(3, 4, 5), (3, 0, 5), (1, 4, 1)]

    def make(call):
        shape = shapes[call]
        k = int(np.prod(shape))
        z = (fusegrad.arange(float(k)) * 0.91).sin().to(getattr(fusegrad, dtypes[0]))
        w = (fusegrad.arange(float(k)) * 0.3).cos().abs().to(getattr(fusegrad, dtypes[1]))
        i = fusegrad.arange(k) % 7 - 3
        return [z.view(shape).requires_grad_(), w.view(shape), i.view(shape)]

    _compare(_reductions, make, backend)


# ------------------------------------------------------- module state between calls


class _Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.k, self.flag, self.n = 1.5, True, 2

    def forward(self, x):
        y = x * self.k
        if self.flag:
            y = y.relu()
        for _ in range(self.n):
            y = y + 0.5
        return y


def _net():
    fusegrad.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Dropout(0.4), _Scale(),
                         nn.Linear(3, 3), nn.BatchNorm1d(3, momentum=None))


def _change(net, call):
    """What changes between calls: the training flag, Python attributes, a parameter."""
    net.train(call % 2 == 0)
    net[3].k = [1.5, 2.0, 3, -1.0][call]
    net[3].flag = call != 2
    net[3].n = call
    if call == 3:
        fusegrad.manual_seed(5)
        net[4].weight = nn.Parameter(fusegrad.randn(3, 3))
        net[2].p = 0.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["module", "function"])
def test_module_state_changed_between_calls(how, backend):
    fusegrad._dynamo.reset()
    ref, mod = _net(), _net()
    compiled = fusegrad.compile(mod if how == "module" else (lambda x: mod(x)),
                                backend=backend)
    for call in range(4):
        _change(ref, call)
        _change(mod, call)
        outs, grads = [], []
        for net, f in ((ref, ref), (mod, compiled)):
            x = ((fusegrad.arange(15.0) * 1.3 + call).sin() * 2).view(5, 3).requires_grad_()
            fusegrad.manual_seed(7 + call)  # dropout: the same random numbers
            out = f(x)
            (out * fusegrad.arange(1.0, 16.0).view(5, 3)).sum().backward()
            outs.append(out)
            grads.append([x.grad] + [p.grad for p in net.parameters()])
            net.zero_grad()
        _same([outs[1]], [outs[0]])
        _same(grads[1], grads[0])
        sr, sm = ref.state_dict(), mod.state_dict()
        assert list(sr) == list(sm)
        _same(list(sm.values()), list(sr.values()))
