"""Wrong answers differential fuzzing of `fusegrad.compile` found (compiled against eager
fusegrad, over several calls): programs the compiled graph ran to a value where eager raises,
or that changed an input's autograd flags which the compiled call left as they were.

Each program runs eagerly and compiled on fresh inputs; results, errors (type and text) and
the inputs' state afterwards must be equal. No torch here: the 3.12/3.13 runs use this file.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad

BACKENDS = ["aot_eager", "inductor"]  # (capture alone, the eager backend, was right)


def _run(fn, make_args):
    """fn(*make_args()) as (value or None, (error type, text) or None, the args after)."""
    args = make_args()
    try:
        out = fn(*args)
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return None, (type(e), str(e)), args
    return out, None, args


def _state(t):
    """What a caller can see of tensor `t`: values, geometry and autograd flags."""
    return (t.detach().numpy().tolist(), tuple(t.shape), t.dtype, t.requires_grad,
            t.grad_fn is None, t.is_leaf)


def _compare(fn, make_args, backend, calls: int = 2) -> None:
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(fn, backend=backend)
    for _ in range(calls):
        ref, ref_err, ref_args = _run(fn, make_args)
        got, got_err, got_args = _run(compiled, make_args)
        assert got_err == ref_err
        if ref_err is None:
            refs = ref if isinstance(ref, tuple) else (ref,)
            gots = got if isinstance(got, tuple) else (got,)
            assert [_state(t) for t in gots] == [_state(t) for t in refs]
        assert [_state(t) for t in got_args] == [_state(t) for t in ref_args]


# ---------------------------------------------------------------- writes eager refuses


def _write_unbind_output(x):
    a = x.clone()
    a.unbind(0)[0].mul_(2)
    return a


def _write_split_outputs(x):
    a = x * 1
    for v in a.split(1):
        v.add_(1)
    return a


def _write_no_grad_view(x):
    a = x * 2
    with fusegrad.no_grad():
        v = a[0]
    v.mul_(2)  # a view made under no_grad, written with grad mode on
    return a


def _write_no_grad_unbind_view(x):
    a = x * 2
    with fusegrad.no_grad():
        v = a.unbind(0)[1]
    v.mul_(2)
    return a


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_write_unbind_output, _write_split_outputs, _write_no_grad_view,
                                _write_no_grad_unbind_view])
def test_refused_view_writes_raise_eagers_error(fn, backend):
    # The functionalized graph computed a value (the write applied) where eager refuses the
    # write: the trace skipped eager's pre-write checks, which a dispatch mode never runs.
    _compare(fn, lambda: (fusegrad.ones(3, 2, requires_grad=True),), backend)
    # Without autograd recording the same writes are allowed, and computed.
    _compare(fn, lambda: (fusegrad.arange(6.0).reshape(3, 2),), backend)


# ---------------------------------------------------------------- an input's autograd flags


def _detach_input(x):
    x.detach_()
    return x * 2


def _detach_input_returned(x):
    x.detach_()
    return x


def _detach_then_add(x, y):
    x.detach_()
    return x + y


@pytest.mark.parametrize("backend", BACKENDS)
def test_detach_inplace_of_an_input(backend):
    # The graph left the caller's `x` requiring grad (and the returned `x` too).
    _compare(_detach_input, lambda: (fusegrad.ones(3, requires_grad=True),), backend)
    _compare(_detach_input_returned, lambda: (fusegrad.ones(3, requires_grad=True),), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_detach_inplace_of_a_non_leaf_input(backend):
    def make():
        base = fusegrad.tensor([1.0, -2.0, 3.0], requires_grad=True)
        return base * 1, fusegrad.ones(3, requires_grad=True)

    _compare(_detach_then_add, make, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_input_gets_no_gradient(backend):
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(_detach_then_add, backend=backend)
    for fn in (_detach_then_add, compiled, compiled):
        x = fusegrad.ones(3, requires_grad=True)
        y = fusegrad.full((3,), 2.0, requires_grad=True)
        fn(x, y).sum().backward()
        assert not x.requires_grad and x.grad is None
        np.testing.assert_array_equal(y.grad.numpy(), np.ones(3, np.float32))


# ---------------------------------------------------------------- code generation


def _as_strided_of_transpose(x):
    a = x.t()
    return a.as_strided((2, 2), (1, 2)) + 0


def _as_strided_of_slice(x):
    return x[1:].as_strided((2, 2), (1, 2)) * 1


# (as_strided's extern got a contiguous copy of a view, a transpose or a slice of a
# non-contiguous input, not its storage, and read other elements than eager; a graph with
# as_strided now runs as FX code)
@pytest.mark.parametrize("fn", [_as_strided_of_transpose, _as_strided_of_slice])
def test_as_strided_of_a_view_inductor(fn):
    def make():
        x = fusegrad.arange(20.0).reshape(4, 5)
        return (x if fn is _as_strided_of_transpose else x.t(),)

    _compare(fn, make, "inductor")



def _read_as_strided_then_write(x):
    a = x.as_strided((2, 2), (1, 2)) * 1
    x.add_(3.0)
    return a


# (as_strided's extern returned a view of the input's buffer, and the kernel reading it ran
# after the write-back of the input: it saw the written values)
def test_as_strided_read_before_an_input_write_inductor():
    _compare(_read_as_strided_then_write, lambda: (fusegrad.arange(16.0).reshape(4, 4),),
             "inductor")


# ---------------------------------------------------------------- autograd


def _constant_and_result(x):
    return fusegrad.ones(2), x * 2


# (An in-place op on output 1 of a node with several outputs, here the compiled node, set
# the tensor's output number to 0 before its node's edges were made: the gradient went to
# output 0, and x got None; eager `std_mean`'s mean too, below.)
@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_write_into_second_output_keeps_its_gradient(backend):
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(_constant_and_result, backend=backend)
    grads = []
    for fn in (_constant_and_result, compiled):
        x = fusegrad.ones(3, requires_grad=True)
        out = fn(x)[1]
        out.add_(1)
        out.sum().backward()
        grads.append(None if x.grad is None else x.grad.tolist())
    assert grads[1] == grads[0]


def test_in_place_write_into_second_output_of_an_eager_op():
    x = fusegrad.tensor([1.0, 2.0, 4.0], requires_grad=True)
    _, mean = fusegrad.std_mean(x)
    mean.add_(1)
    mean.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1 / 3] * 3, rtol=1e-6)


# ---------------------------------------------------------------- aot_function's signature


def _matmul_and_factory(x, w):
    return x @ w, fusegrad.ones(2) + x.sum()


def _aot_results(fn, args):
    return [(t.dtype, t.detach().numpy().astype(np.float64).tolist()) for t in fn(*args)]


def test_aot_function_traces_again_under_autocast():
    from fusegrad._functorch.aot_autograd import aot_function

    # A trace holds autocast's casts: one made outside autocast computed float32 inside it.
    compiled = aot_function(_matmul_and_factory, lambda gm, example: gm.forward)
    args = (fusegrad.tensor([[1.0, 2.0], [3.0, 4.0]]), fusegrad.tensor([[0.5, 1.0], [2.0, 1.5]]))
    for autocast in (False, True, False):
        with fusegrad.autocast("cpu", dtype=fusegrad.bfloat16, enabled=autocast):
            assert _aot_results(compiled, args) == _aot_results(_matmul_and_factory, args)


def test_aot_function_traces_again_for_another_default_dtype():
    from fusegrad._functorch.aot_autograd import aot_function

    # The factory's constant kept the dtype of the first trace's default.
    compiled = aot_function(_matmul_and_factory, lambda gm, example: gm.forward)
    args = (fusegrad.eye(2, dtype=fusegrad.float64), fusegrad.ones(2, 2, dtype=fusegrad.float64))
    try:
        for default in (fusegrad.float32, fusegrad.float64, fusegrad.float32):
            fusegrad.set_default_dtype(default)
            assert _aot_results(compiled, args) == _aot_results(_matmul_and_factory, args)
    finally:
        fusegrad.set_default_dtype(fusegrad.float32)


def _float_readers(x, s):
    # C-level readers of a float (no method of the float is called) and divmod.
    return (x + math.isnan(s) + math.isinf(s) + math.copysign(1.0, s) + s.is_integer()
            + divmod(s, 1.0)[0] + math.modf(s)[1])


def test_aot_function_float_input_read_by_c_functions():
    from fusegrad._functorch.aot_autograd import aot_function

    # One trace served every float: what math.isnan & co. read was kept from the first.
    compiled = aot_function(_float_readers, lambda gm, example: gm.forward)
    x = fusegrad.tensor([1.0, -2.0])
    for s in (0.5, float("nan"), 2.0, -0.75, float("inf"), -0.0, 3.25, 0.375):
        np.testing.assert_array_equal(compiled(x, s).numpy(), _float_readers(x, s).numpy())


# ---------------------------------------------------------------- grad modes and outputs


def _no_grad_view_of_intermediate(x):
    a = x * 1.5
    with fusegrad.no_grad():
        v = a[0]
    return v, a * 2


def _no_grad_view_of_input(x):
    with fusegrad.no_grad():
        v = x.t()
    return v, x * 2


def _view_then_grad_off(x):
    a = x * 1.5
    v = a[0]
    fusegrad.set_grad_enabled(False)  # (left off: the views are made before)
    return v, a * 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_no_grad_view_of_intermediate, _no_grad_view_of_input,
                                _view_then_grad_off])
def test_output_views_keep_the_grad_mode_they_were_made_in(fn, backend):
    # A view made under no_grad requires grad with no history (no gradient reaches x
    # through it); the compiled node gave it history. A view made with grad mode on, in a
    # program that leaves it off, was rebuilt with grad mode off (no history).
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(fn, backend=backend)
    seen = []
    for f in (fn, compiled):
        x = fusegrad.ones(2, 2, requires_grad=True)
        try:
            outs = f(x)
        finally:
            fusegrad.set_grad_enabled(True)
        first = outs[0]
        state = [(t.requires_grad, t.grad_fn is None, t.is_leaf) for t in outs]
        if first.grad_fn is not None:
            first.sum().backward()
        seen.append((state, None if x.grad is None else x.grad.tolist()))
    assert seen[1] == seen[0]


def _raise_after_grad_off(x):
    fusegrad.set_grad_enabled(False)
    y = x * 2
    raise ValueError(f"boom {y.shape[0]}")


def _raise_in_no_grad_block(x):
    with fusegrad.no_grad():
        y = x * 2
        raise ValueError(f"boom {y.shape[0]}")


def _raise_in_enable_grad_after_grad_off(x):
    fusegrad.set_grad_enabled(False)
    with fusegrad.enable_grad():
        y = x * 2
        raise ValueError(f"boom {y.shape[0]}")


def _graph_raises_in_no_grad_block(x):
    with fusegrad.no_grad():
        y = x * 2
        return y.index_select(0, fusegrad.tensor([5]))  # out of range when the graph runs


def _break_raises_in_no_grad_block(x):
    with fusegrad.no_grad():
        y = x * 2
        int(f"x{y.shape[0]}")


def _break_raises_after_grad_off(x):
    fusegrad.set_grad_enabled(False)
    y = x * 2
    int(f"x{y.shape[0]}")


def _grad_on_inside_no_grad_then_raise(x):
    with fusegrad.no_grad():
        fusegrad.set_grad_enabled(True)
        y = x * 2
        raise ValueError(f"boom {y.shape[0]}")


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [
    _raise_after_grad_off, _raise_in_no_grad_block, _raise_in_enable_grad_after_grad_off,
    _graph_raises_in_no_grad_block, _break_raises_in_no_grad_block,
    _break_raises_after_grad_off, _grad_on_inside_no_grad_then_raise],
    ids=lambda f: f.__name__)
def test_grad_mode_after_an_error_is_eagers(fn, backend):
    """A mode set without a block stays set after the error; blocks the error leaves restore
    theirs (a graph that raised inside a block it entered restores the mode it began in)."""
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(fn, backend=backend)
    modes = []
    for f in (fn, compiled):
        try:
            with pytest.raises((ValueError, IndexError, RuntimeError)):
                f(fusegrad.ones(3, requires_grad=True))
            modes.append(fusegrad.is_grad_enabled())
        finally:
            fusegrad.set_grad_enabled(True)
    assert modes[1] == modes[0]


# ----------------------------------------------------------------- p.grad, tensor-keyed state


def _grad_read(p):
    return p.grad * 2


def _grad_maybe(p, x):
    if p.grad is None:
        return x + 1
    return x * p.grad


def _grad_in_place(p):
    p.grad.mul_(0.5)
    return p.grad.sum()


@pytest.mark.parametrize("backend", BACKENDS + ["eager"])
@pytest.mark.parametrize("fn", [_grad_read, _grad_maybe, _grad_in_place],
                         ids=lambda f: f.__name__)
def test_reading_an_input_gradient_is_recorded(fn, backend):
    """`p.grad` of an input leaf is an input of the graph (None guarded), as Dynamo reads
    it: values and the gradient's in-place updates as eager's, over calls with and without
    a gradient."""
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(fn, backend=backend)
    for step in range(3):
        args = []
        for _ in range(2):
            p = fusegrad.ones(2, requires_grad=True)
            if step or fn is not _grad_maybe:
                p.grad = fusegrad.full((2,), step + 1.0)
            args.append((p, fusegrad.ones(2))[:2 if fn is _grad_maybe else 1])
        want, got = fn(*args[0]), compiled(*args[1])
        assert got.tolist() == want.tolist()
        assert args[1][0].grad.tolist() == args[0][0].grad.tolist() if args[0][0].grad \
            is not None else args[1][0].grad is None
    fusegrad._dynamo.reset()
    p = fusegrad.ones(2, requires_grad=True)
    p.grad = fusegrad.ones(2)
    explained = fusegrad._dynamo.explain(fn)(*((p, fusegrad.ones(2)) if fn is _grad_maybe
                                              else (p,)))
    assert explained.break_reasons == []


def test_tensor_keyed_mapping_never_gets_a_fake_key():
    """`state[p]` of a defaultdict keyed by an input tensor: the real tensor's item (read
    through both sources); a missing key's item is made for the real key, as eagerly - the
    capture once made an item keyed by its fake tensor in the user's dict."""
    import collections

    state = collections.defaultdict(dict)

    def step(p, x):
        state[p]["k"] = x * 2
        return x + len(state[p])

    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(step, backend="eager")
    p, x = fusegrad.ones(2), fusegrad.ones(2)
    for _ in range(3):
        out = compiled(p, x)
        assert out.tolist() == [2.0, 2.0]
        assert list(state) == [p] and state[p]["k"].tolist() == [2.0, 2.0]


_WEIGHT = fusegrad.nn.Parameter(fusegrad.ones(2))


def _grad_on_with_detached_weight(t):
    fusegrad.set_grad_enabled(True)
    return t * _WEIGHT.detach()


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_switched_on_keeps_a_detach(backend):
    """Called under no_grad, a program switching grad on multiplies by a detached weight:
    the result records nothing (the inference graph, which keeps no `detach`, recorded a
    MulBackward0 through the weight)."""
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(_grad_on_with_detached_weight, backend=backend)
    try:
        for f in (_grad_on_with_detached_weight, compiled):
            with fusegrad.no_grad():
                out = f(fusegrad.ones(2))
            assert (out.requires_grad, out.grad_fn) == (False, None)
    finally:
        fusegrad.set_grad_enabled(True)


def _batch_norm_stats_of_one_base(x, stats):
    return fusegrad.nn.functional.batch_norm(x, stats[0], stats[1], training=True,
                                             momentum=0.5) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_running_statistics_viewing_one_base_both_update(backend):
    """Training batch norm whose running mean and variance are two rows of one tensor:
    both rows get their new values (the variance's write-back replayed the old mean)."""
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(_batch_norm_stats_of_one_base, backend=backend)
    x = fusegrad.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype("float32"))
    stats = [fusegrad.stack([fusegrad.zeros(3), fusegrad.ones(3)]) for _ in range(2)]
    for _ in range(2):
        want = _batch_norm_stats_of_one_base(x, stats[0])
        got = compiled(x, stats[1])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        np.testing.assert_allclose(stats[1].numpy(), stats[0].numpy(), rtol=1e-6)
