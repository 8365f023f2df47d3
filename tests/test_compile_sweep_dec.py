"""Compiled programs against PyTorch eager, for what a sweep of real programs found:

1. Layout queries (`stride()`, `is_contiguous()`) of a tensor computed from non-contiguous
   tensors (a transpose, a channels_last input): eager keeps the operands' layout, and the
   compiled function answers as eager (the query breaks the graph when only running the ops
   says), so code that checks `is_contiguous()` before `.view()` runs.
2. `is_contiguous(memory_format=...)` and `stride(dim=...)` keep their keyword arguments.

Graphs run through `Counter` (the run's FUSEGRAD_TEST_BACKEND), and the backends named here.
"""

import numpy as np
import pytest
import torch
from compile_support import Counter

import fusegrad

BACKENDS = [None, "aot_eager", "inductor"]  # None: the run's backend through Counter


def compiled(fn, backend, **kwargs):
    fusegrad._dynamo.reset()
    return fusegrad.compile(fn, backend=Counter() if backend is None else backend, **kwargs)


def _array(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def _plain(v):
    """Tensors as arrays (with their strides), containers element-wise, the rest as is."""
    if isinstance(v, (torch.Tensor, fusegrad.Tensor)):
        return ("tensor", tuple(v.shape), tuple(v.stride()), v.detach().numpy().tolist())
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return v


def _check(prog, make, backend, **kwargs):
    """`prog(T, *make(T))` compiled with fusegrad equals PyTorch's eager result (values,
    strides and Python answers alike), on two calls."""
    want = _plain(prog(torch, *make(torch)))
    f = compiled(lambda *a: prog(fusegrad, *a), backend, **kwargs)
    for _ in range(2):
        _assert_same(_plain(f(*make(fusegrad))), want)


def _assert_same(got, want) -> None:
    """Equal structure, strides and Python values; tensor values within float32's last bits
    (the generated code may sum in another order)."""
    if isinstance(want, tuple) and want and want[0] == "tensor":
        assert got[:3] == want[:3]
        np.testing.assert_allclose(got[3], want[3], rtol=1e-5, atol=1e-5)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_same(g, w)
    else:
        assert got == want


def _channels_last(T):
    x = T.tensor(_array(2, 3, 5, 5)).to(memory_format=T.channels_last)
    return (x,)


def _matrix(T):
    return (T.tensor(_array(3, 4)),)


LAYOUT_PROGS = {
    "cl_is_contiguous_kw": (lambda T, x: (x.is_contiguous(memory_format=T.channels_last),
                                          x.is_contiguous()), _channels_last),
    "cl_pointwise_strides": (lambda T, x: ((x + 1).stride(), x.relu().stride(),
                                           (x * x.sum()).stride()), _channels_last),
    "cl_pointwise_is_contiguous": (
        lambda T, x: ((x.sin() * 2).is_contiguous(),
                      (x.sin() * 2).is_contiguous(memory_format=T.channels_last)),
        _channels_last),
    "cl_stride_dim_kw": (lambda T, x: ((x * 2).stride(dim=1), x.stride(dim=-1)),
                         _channels_last),
    "transpose_then_pointwise": (lambda T, x: ((x.t() * 2).stride(),
                                               (x.t() * 2).is_contiguous()), _matrix),
    "contiguous_intermediate": (lambda T, x: ((x * 2).is_contiguous(), (x + 1).stride(),
                                              x.t().stride()), _matrix),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(LAYOUT_PROGS))
def test_layout_queries_answer_as_eager(name, backend):
    prog, make = LAYOUT_PROGS[name]
    _check(prog, make, backend)


def _contiguous_before_view(T, q):
    # The pattern of attention code: make the transposed product contiguous when it is not,
    # then view it (a view of the non-contiguous product raises).
    y = q.transpose(1, 2) * 0.5
    if not y.is_contiguous():
        y = y.contiguous()
    return y.view(2, -1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_is_contiguous_guards_a_view(backend):
    _check(_contiguous_before_view, lambda T: (T.tensor(_array(2, 3, 4)),), backend)


def _conv_channels_last(T, x):
    conv = T.nn.Conv2d(3, 4, 3)
    with T.no_grad():
        conv.weight.copy_(T.tensor(_array(4, 3, 3, 3, seed=1)))
        conv.bias.zero_()
    y = conv(x)
    return y, y.is_contiguous(memory_format=T.channels_last), (y.relu() + 1).stride()


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_channels_last_layout(backend):
    want = _conv_channels_last(torch, *_channels_last(torch))
    f = compiled(lambda x: _conv_channels_last(fusegrad, x), backend)
    got = f(*_channels_last(fusegrad))
    assert got[1:] == want[1:]
    assert tuple(got[0].stride()) == tuple(want[0].stride())
    np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_contiguous_graph_keeps_one_graph():
    # Queries of tensors computed from contiguous tensors only are answered while capturing:
    # no break.
    counter = Counter()
    fusegrad._dynamo.reset()

    def f(x):
        y = x * 2
        if y.is_contiguous():
            y = y + 1
        return y.view(-1), y.stride()

    out, stride = fusegrad.compile(f, backend=counter)(fusegrad.ones(3, 4))
    assert counter.graphs == 1 and stride == (4, 1)
    assert out.tolist() == [3.0] * 12


def _linear_one_token(T, h):
    # A decoding step's linear layer on one token: the output's dims of size 1 keep eager's
    # strides (a view of the matrix product).
    lin = T.nn.Linear(8, 10)
    with T.no_grad():
        lin.weight.copy_(T.tensor(_array(10, 8, seed=2)))
        lin.bias.copy_(T.tensor(_array(10, seed=3)))
        out = lin(h)
    return out, out[:, -1].stride()


def _view_size_one(T, x):
    y = x * 2
    return y.view(1, 1, 10), y.view(1, 1, 10).stride(), x.view(2, 1, 5).stride(), \
        y.view(1, 10, 1) + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog,shape", [(_linear_one_token, (1, 1, 8)),
                                        (_view_size_one, (10,))])
def test_size_one_dims_strides_as_eager(prog, shape, backend):
    _check(prog, lambda T: (T.tensor(_array(*shape)),), backend)


def test_dynamo_config_imports_as_a_module():
    # `import torch._dynamo.config` then a setting changed through it, as programs write.
    import importlib

    cfg = importlib.import_module("fusegrad._dynamo.config")
    assert cfg is fusegrad._dynamo.config
    assert importlib.import_module("torch._dynamo.config").cache_size_limit == \
        cfg.cache_size_limit
    before = cfg.cache_size_limit
    try:
        cfg.cache_size_limit = 2
        assert fusegrad._dynamo.config.recompile_limit == 2
    finally:
        cfg.cache_size_limit = before


@pytest.mark.parametrize("backend", BACKENDS)
def test_deepcopy_of_a_compiled_module(backend):
    # `copy.deepcopy(torch.compile(model))` (an EMA or a frozen copy of a compiled model): a
    # compiled copy of the module whose parameters no longer follow the original's.
    import copy

    def run(T, compiled):
        lin = T.nn.Linear(2, 2)
        with T.no_grad():
            lin.weight.copy_(T.tensor(_array(2, 2, seed=4)))
            lin.bias.copy_(T.tensor(_array(2, seed=5)))
        cm = compiled(lin)
        x = T.tensor(_array(1, 2, seed=6))
        first = cm(x)
        twin = copy.deepcopy(cm)
        with T.no_grad():
            lin.weight.zero_()
        return first, cm(x), twin(x), type(twin).__name__, twin._orig_mod is lin

    def torch_compiled(m):
        return torch.compile(m, backend="eager")

    fusegrad._dynamo.reset()
    want = _plain(run(torch, torch_compiled))
    got = _plain(run(fusegrad, lambda m: fusegrad.compile(
        m, backend=Counter() if backend is None else backend)))
    _assert_same(got, want)


class _CodedError(Exception):
    """An exception whose __init__ takes more than the message it passes on."""

    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


def _raises_coded(T, x):
    y = x * 2
    raise _CodedError(f"bad size {y.shape[0]}", 7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_uncaught_exception_with_its_own_init(backend):
    # An exception class of another __init__ signature, raised out of the compiled function:
    # the same class, message and attributes as eager, on every call.
    f = compiled(lambda x: _raises_coded(fusegrad, x), backend)
    for _ in range(2):
        with pytest.raises(_CodedError) as info:
            f(fusegrad.ones(3))
        assert str(info.value) == "bad size 3" and info.value.code == 7


_GLOBAL_SCALE = 5


def _scope_reads(T, x):
    k = 3
    y = x * k

    def inner():
        return k + 1

    loc = locals()
    return (y, sorted(loc), loc["k"], loc["y"], inner(), sorted(dir()),
            globals()["_GLOBAL_SCALE"], sorted(vars()))


def _frame_name(T, x):
    import sys

    return x + 1, sys._getframe().f_code.co_name


def _callee_locals(x, scale=2):
    y = x * scale
    return dict(locals())


def _inlined_locals(T, x):
    d = _callee_locals(x + 1)
    return sorted(d), d["y"], d["scale"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog", [_scope_reads, _frame_name, _inlined_locals])
def test_frame_reads_answer_as_eager(prog, backend):
    # locals(), vars(), dir(), globals() and sys._getframe() read the program's frame, never
    # the compiler's.
    _check(prog, lambda T: (T.tensor(_array(2)),), backend)


@pytest.mark.parametrize("disable", [False, True])
@pytest.mark.parametrize("value", [3, "abc"])
def test_compile_of_a_non_callable(value, disable):
    # PyTorch's error type and text, with disable=True too.
    with pytest.raises(AssertionError) as want:
        torch.compile(value, disable=disable)
    with pytest.raises(AssertionError) as got:
        fusegrad.compile(value, disable=disable)
    assert str(got.value) == str(want.value)


def test_layout_queries_keep_dynamic_sizes_symbolic():
    # With dynamic sizes the queries neither break the graph nor specialise the sizes: one
    # graph serves every size.
    counter = Counter()
    fusegrad._dynamo.reset()

    def f(x):
        y = x * 2
        if y.is_contiguous():
            y = y + 1
        return y.sum(), y.stride(), y.unsqueeze(0).is_contiguous()

    cf = fusegrad.compile(f, backend=counter, dynamic=True)
    for n in (3, 5, 7):
        total, stride, contiguous = cf(fusegrad.ones(n, 4))
        assert (float(total), stride, contiguous) == (12.0 * n, (4, 1), True)
    assert counter.graphs == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_property_runs_once_per_call(backend):
    """A module's property (code with effects: a parametrization's power iteration, a
    counter) is traced into the graph, not also read for a guard: it runs once per call,
    and spectral norm's vector follows eager's."""
    calls = []

    class WithProperty(fusegrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = fusegrad.nn.Parameter(fusegrad.ones(3))

        @property
        def weight(self):
            calls.append(1)
            return self.w * 2

        def forward(self, x):
            return x * self.weight

    module = compiled(WithProperty(), backend)
    for _ in range(3):
        out = module(fusegrad.ones(3))
    assert len(calls) == 3
    assert out.tolist() == [2.0, 2.0, 2.0]

    def spectral():
        fusegrad.manual_seed(0)
        return fusegrad.nn.utils.parametrizations.spectral_norm(fusegrad.nn.Linear(4, 3))

    eager, model = spectral(), spectral()
    run = compiled(model, backend)
    x = fusegrad.randn(5, 4)
    for _ in range(3):
        a, b = eager(x), run(x)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(eager.parametrizations.weight[0]._u.numpy(),
                               model.parametrizations.weight[0]._u.numpy(), rtol=1e-6)
