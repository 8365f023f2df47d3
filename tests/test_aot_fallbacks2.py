"""Common programs AOT autograd used to leave to eager execution, now traced: tensor literals
(`tensor`, `as_tensor`), writes through index tensors and boolean masks, constants made by
derivatives (average pooling), cross_entropy with label smoothing, and an intermediate's view
returned beside its detached alias. Each runs under `aot_eager` (equal to eager fusegrad to
the bit) and `inductor` (within 1e-6), with no fallback, and is called again with other
values (another mask, another target, inputs written between calls) so that nothing the
first call read is kept in the graph.

No torch here: the 3.12/3.13 runs use this file too.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from compile_support import CAPTURES  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.nn.functional as F  # noqa: E402
from fusegrad._inductor.compile_fx import compile_fx  # noqa: E402
from fusegrad.compiler.aot.api import aot_eager  # noqa: E402

BACKENDS = {"aot_eager": aot_eager, "inductor": compile_fx}


class Backend:
    """An AOT backend keeping its runners, to tell whether a graph ran eagerly."""

    def __init__(self, name: str):
        self.inner = BACKENDS[name]
        self.runners = []

    def __call__(self, gm, example_inputs):
        runner = self.inner(gm, example_inputs)
        self.runners.append(runner)
        return runner

    def check_traced(self) -> None:
        """Every graph was traced (none fell back to eager execution), and there was one."""
        assert [r.fallback_reason for r in self.runners] == [None] * len(self.runners)
        assert (len(self.runners) > 0) == CAPTURES


@pytest.fixture(params=sorted(BACKENDS))
def backend(request):
    return request.param


def _same(got, want, name: str, exact: bool = True) -> None:
    """Bit for bit under aot_eager, within 1e-6 under inductor (its kernels may reorder);
    within 1e-12 (float64) under aot_eager where not `exact`."""
    if got is None or want is None:
        assert got is None and want is None
        return
    g, w = np.asarray(got.detach().numpy()), np.asarray(want.detach().numpy())
    assert g.shape == w.shape and g.dtype == w.dtype
    if name == "aot_eager" and exact:
        assert np.array_equal(g, w, equal_nan=True), (g, w)
    elif name == "aot_eager":
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _check(fn, name: str, make_args, calls: int = 2, grad: bool = True,
           exact_grads: bool = True) -> Backend:
    """Run `fn` compiled and eagerly on fresh copies of `make_args(call)` for each call;
    outputs and the gradients of the float inputs (of the outputs' sum) must agree."""
    b = Backend(name)
    compiled = fusegrad.compile(fn, backend=b)
    for call in range(calls):
        results = []
        for f in (compiled, fn):
            args = make_args(call)
            out = f(*args)
            outs = out if isinstance(out, tuple) else (out,)
            if grad:
                total = sum(o.float().sum() for o in outs if o.requires_grad)
                total.backward()
            results.append((outs, [a.grad for a in args if isinstance(a, fusegrad.Tensor)]))
        (outs_c, grads_c), (outs_e, grads_e) = results
        assert len(outs_c) == len(outs_e)
        for a, e in zip(outs_c, outs_e):
            assert a.requires_grad == e.requires_grad
            _same(a, e, name)
        for a, e in zip(grads_c, grads_e):
            _same(a, e, name, exact_grads)
    b.check_traced()
    return b


# ------------------------------------------------------------------ tensor literals


def _literals(x):
    c = fusegrad.tensor([1.0, 2.0, 3.0])
    k = fusegrad.tensor([[1, 2, 3]])  # int64
    d = fusegrad.as_tensor([0.5, 1.5, 2.5], dtype=fusegrad.float32)
    return (x * c + fusegrad.tensor(3.0)) * k + d, fusegrad.tensor(2.5) * x.sum()


def test_tensor_literals_are_graph_constants(backend):
    _check(_literals, backend, lambda call: (
        fusegrad.tensor(_rand(2, 3, seed=call), requires_grad=True),), calls=3)


def _writes_a_literal(x):
    c = fusegrad.tensor([1.0, 2.0, 3.0])
    c.add_(x)  # each call starts from the literal again
    c[0] = 7.0
    return c * 2, fusegrad.tensor([4.0, 5.0])  # a returned literal: a new tensor per call


def test_literal_written_in_place_and_returned(backend):
    b = Backend(backend)
    compiled = fusegrad.compile(_writes_a_literal, backend=b)
    x = fusegrad.tensor(_rand(3), requires_grad=True)
    first = compiled(x)
    first[1].mul_(100.0)  # the caller's write must not reach the next call's result
    second = compiled(x)
    want = _writes_a_literal(x)
    for a, e in zip(second, want):
        _same(a, e, backend)
    b.check_traced()


_GLOBAL = [1.0, 2.0]


def _reads_a_global_list(x):
    return x * fusegrad.tensor(_GLOBAL)


def test_literal_from_a_changed_global_list(backend):
    b = Backend(backend)
    compiled = fusegrad.compile(_reads_a_global_list, backend=b)
    x = fusegrad.tensor(_rand(2), requires_grad=True)
    try:
        _same(compiled(x), _reads_a_global_list(x), backend)
        _GLOBAL[1] = -3.0
        _same(compiled(x), _reads_a_global_list(x), backend)
    finally:
        _GLOBAL[1] = 2.0
    b.check_traced()


# ------------------------------------------------------------------ index writes


def _index_write(x, idx):
    y = x * 2
    y[idx] = 5.0
    return y


def test_index_write_with_another_index_each_call(backend):
    _check(_index_write, backend, lambda call: (
        fusegrad.tensor(_rand(4, 3, seed=call), requires_grad=True),
        fusegrad.tensor([[0, 2], [3, 1]][call])))


def _index_write_tensor(x, idx, v):
    y = x * 2
    y[idx] = v
    return y


def test_index_write_of_a_tensor_with_grad(backend):
    _check(_index_write_tensor, backend, lambda call: (
        fusegrad.tensor(_rand(4, 3, seed=call), requires_grad=True),
        fusegrad.tensor([[0, 2], [3, 1]][call]),
        fusegrad.tensor(_rand(2, 3, seed=10 + call), requires_grad=True)))


def _list_write(x):
    y = x * 2
    y[[0, 2]] = fusegrad.tensor([1.0, 2.0, 3.0])
    return y


def test_list_index_write(backend):
    _check(_list_write, backend, lambda call: (
        fusegrad.tensor(_rand(4, 3, seed=call), requires_grad=True),))


def _mask_write(x):
    y = x * 2
    y[y > 1.0] = 0.0
    return y


def test_mask_write_without_grad_with_other_masks(backend):
    # The mask is computed in the graph: a second call with other values masks others.
    _check(_mask_write, backend, lambda call: (fusegrad.tensor(_rand(5, 4, seed=call)),),
           calls=3, grad=False)


def _mask_input_write(x, mask):
    y = x + 1
    y[mask] = -1.0
    return y


def test_mask_input_written_between_calls(backend):
    b = Backend(backend)
    compiled = fusegrad.compile(_mask_input_write, backend=b)
    x = fusegrad.tensor(_rand(6))
    mask = fusegrad.tensor([True, False, True, False, False, True])
    for step in range(3):
        _same(compiled(x, mask), _mask_input_write(x, mask), backend)
        mask[step] = not bool(mask[step])  # the same tensor, other values
        x.add_(1.0)
    b.check_traced()


def test_mask_write_with_grad(backend):
    """index_put's derivative skips the values' gradient when they need none (`g[mask]`
    has a data-dependent shape a traced backward cannot make)."""
    _check(_mask_write, backend, lambda call: (
        fusegrad.tensor(_rand(5, 4, seed=call), requires_grad=True),))


# ------------------------------------------------------------------ derivative constants


def _pools(x):
    return (F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
            F.adaptive_avg_pool2d(x, (3, 2)), F.adaptive_avg_pool2d(x, 1))


def test_pooling_backward_constants(backend):
    _check(_pools, backend, lambda call: (
        fusegrad.tensor(_rand(2, 3, 7, 6, seed=call), requires_grad=True),))


def test_pooling_backward_constants_float64_new_shape(backend):
    _check(_pools, backend, lambda call: (fusegrad.tensor(
        _rand(1, 2, 5 + call, 9, seed=call, dtype=np.float64), requires_grad=True),))


# ------------------------------------------------------------------ label smoothing


def _targets(call: int) -> np.ndarray:
    return np.array([[0, 1, 3, -100, 2, 1], [-100, -100, 3, 0, 2, 2]][call])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_label_smoothing(backend, reduction, weighted):
    # Gradients within 1e-12, not to the bit: log_softmax's eager backward is a C kernel,
    # its traced backward (no values to run it on) the formula, which can differ in the
    # last bit (ops/reductions._log_softmax_derivative; not this file's programs).
    w = fusegrad.tensor(np.array([0.5, 1.0, 2.0, 1.5])) if weighted else None

    def loss(x, t):
        return F.cross_entropy(x, t, weight=w, label_smoothing=0.1, reduction=reduction)

    # The second call ignores other positions (and more of them): another mean's divisor.
    _check(loss, backend, lambda call: (
        fusegrad.tensor(_rand(6, 4, seed=call, dtype=np.float64), requires_grad=True),
        fusegrad.tensor(_targets(call))), exact_grads=False)


def test_cross_entropy_label_smoothing_probabilities(backend):
    def loss(x, p):
        return F.cross_entropy(x, p, label_smoothing=0.2)

    _check(loss, backend, lambda call: (
        fusegrad.tensor(_rand(3, 5, seed=call, dtype=np.float64), requires_grad=True),
        fusegrad.tensor(_rand(3, 5, seed=20 + call, dtype=np.float64)).softmax(1)),
        exact_grads=False)


# ------------------------------------------------------------------ detached outputs


def _view_and_detached(x):
    y = x * 2
    return y[0], y.detach()


def _detached_and_view(x):
    y = x.sin()
    return y.detach()[1], y.t()


@pytest.mark.parametrize("fn", [_view_and_detached, _detached_and_view])
@pytest.mark.parametrize("grad", [True, False])
def test_view_and_detached_alias_of_an_intermediate(backend, fn, grad):
    _check(fn, backend, lambda call: (
        fusegrad.tensor(_rand(3, 3, seed=call), requires_grad=grad),), grad=grad)


def test_detached_output_shares_memory_as_eager(backend):
    b = Backend(backend)
    compiled = fusegrad.compile(_view_and_detached, backend=b)
    results = []
    for f in (compiled, _view_and_detached):
        x = fusegrad.tensor(_rand(3, 4), requires_grad=True)
        row, det = f(x)
        assert not det.requires_grad and det.grad_fn is None and row.requires_grad
        det[0, 1] = 100.0  # eager: the row shows it (both share the intermediate's memory)
        row.sum().backward()
        results.append((row.detach().clone(), det.clone(), x.grad))
    for a, e in zip(results[0], results[1]):
        _same(a, e, backend)
    b.check_traced()


def _exp_view_and_detached(x):
    y = x.exp()  # its backward reads y
    return y.detach(), y[0]


def test_write_into_detached_output_then_backward_raises_as_eager(backend):
    b = Backend(backend)
    compiled = fusegrad.compile(_exp_view_and_detached, backend=b)
    for f in (compiled, _exp_view_and_detached):
        x = fusegrad.tensor(_rand(2, 3), requires_grad=True)
        det, row = f(x)
        det.mul_(2.0)  # the intermediate's version moves on: y's saved value is stale
        assert row._version == det._version == 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            row.sum().backward()
    b.check_traced()


# ------------------------------------------------------------------ embedding bag


def test_embedding_bag_inference_and_training_traced(backend):
    # Its backward's bags and scales are computed by dispatched ops from the indices and
    # offsets (`ops/layers._eb_save`): the training trace records them too.
    bag = fusegrad.nn.EmbeddingBag(10, 3, mode="mean")
    inputs = [fusegrad.tensor([1, 2, 4, 5, 4, 3, 2, 9]), fusegrad.tensor([0, 4])]
    other = [fusegrad.tensor([7, 7, 0, 1, 1, 3]), fusegrad.tensor([0, 1])]

    def fn(i, o):
        return bag(i, o)

    with fusegrad.no_grad():
        b = Backend(backend)
        compiled = fusegrad.compile(fn, backend=b)
        for args in (inputs, other):
            _same(compiled(*args), fn(*args), backend)
        b.check_traced()
    b = Backend(backend)
    compiled = fusegrad.compile(fn, backend=b)
    for args in (inputs, other):
        got = compiled(*args)
        got.sum().backward()
        g1 = bag.weight.grad.clone()
        bag.weight.grad = None
        fn(*args).sum().backward()
        _same(g1, bag.weight.grad, backend)
        bag.weight.grad = None
    b.check_traced()


# ------------------------------------------------------------------ affine_grid


def _affine_grid(theta):
    return fusegrad.nn.functional.affine_grid(theta, (2, 1, 5, 4), align_corners=False) * 1.5


def test_affine_grid_backward_traces(backend):
    """The backward's base grid is a graph constant (it was NumPy data: a fallback)."""
    _check(_affine_grid, backend, lambda call: (
        fusegrad.tensor(_rand(2, 2, 3, seed=call), requires_grad=True),))


# ------------------------------------------------------------------ windows, unfold


def _windowed(x):
    return x * fusegrad.hann_window(8)


def test_window_function_traces(backend):
    """A window is a factory's constant (it was made from NumPy outside dispatch)."""
    _check(_windowed, backend, lambda call: (
        fusegrad.tensor(_rand(8, seed=call), requires_grad=True),))


def _frames_summed(x):
    return x.unfold(-1, 16, 4).sum(-1)


def test_unfold_backward_traces(backend):
    """unfold's backward index is made by factories and ops (it was a NumPy array)."""
    _check(_frames_summed, backend, lambda call: (
        fusegrad.tensor(_rand(2, 40, seed=call), requires_grad=True),))
