"""Input mutation, aliasing and the eager fallback of AOT autograd, against eager execution:
writes into inputs (directly and through views) are written back once, outputs that are
inputs, views of inputs or repeated alias as in eager mode, and whatever AOT cannot trace runs
eagerly with its reason logged."""

from __future__ import annotations

import numpy as np
import pytest
from aot_models import close, compiler_logs

import fusegrad
from fusegrad import _dispatch
from fusegrad._functorch.aot_autograd import aot_function
from fusegrad.compiler.aot.api import nop


def _pair(*arrays, grad=()):
    """Two independent copies of the inputs: one for the compiled run, one for eager."""
    def make():
        return [fusegrad.tensor(a, requires_grad=i in grad) for i, a in enumerate(arrays)]
    return make(), make()


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class _Graphs:
    """A compiler that keeps the graphs it is given."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def test_input_add_is_written_back_once_at_the_end():
    def f(x, y):
        x.add_(1)
        return x * y

    graphs = _Graphs()
    compiled = aot_function(f, graphs)
    (xc, yc), (xe, ye) = _pair(_rand(3), _rand(3, seed=1), grad=(1,))
    vc, ve = xc._version, xe._version
    out, ref = compiled(xc, yc), f(xe, ye)
    assert compiled.fallback_reason is None
    assert close(out, ref, 0) and close(xc, xe, 0)
    assert xc._version > vc and xe._version > ve
    fw = graphs.graphs[0].code
    assert fw.count("fusegrad.ops.aten.copy_.default(primals_1, add)") == 1
    assert "add_" not in fw  # functionalized: the write is an out-of-place add
    out.sum().backward()
    ref.sum().backward()
    assert close(yc.grad, ye.grad, 0)  # the backward reads the updated x


def test_trace_errors_fall_back_so_eager_raises_its_own_error_where_eager_does():
    def f(x, w):
        y = w * x       # the gradient of w needs x as it is here ...
        x.mul_(3)       # ... and it changes: eager fails in backward, so must this
        return y + x

    compiled = aot_function(f, nop)
    (xc, wc), (xe, we) = _pair(_rand(4), _rand(4, seed=1), grad=(1,))
    out, ref = compiled(xc, wc), f(xe, we)
    assert "modified by an inplace operation" in compiled.fallback_reason
    assert close(out, ref, 1e-6) and close(xc, xe, 0)
    with pytest.raises(RuntimeError) as ours:
        out.sum().backward()
    with pytest.raises(RuntimeError) as eager:
        ref.sum().backward()
    assert str(ours.value) == str(eager.value)


def test_write_through_a_view_of_an_input():
    def f(x, s, w):
        x[0].mul_(2)           # select view
        x[:, 1:].add_(s)       # slice view
        x.t()[2].sub_(1)       # a view of a view
        return (x * w).sum()

    compiled = aot_function(f, nop)
    (xc, sc, wc), (xe, se, we) = _pair(_rand(3, 3), _rand(1, seed=2), _rand(3, seed=3),
                                       grad=(2,))
    out, ref = compiled(xc, sc, wc), f(xe, se, we)
    assert compiled.fallback_reason is None
    assert close(out, ref, 1e-6) and close(xc, xe, 0)
    out.backward()
    ref.backward()
    assert close(wc.grad, we.grad, 1e-5)


def test_write_of_a_value_that_requires_grad_into_an_input():
    def f(x, s):
        x[:, 1:].add_(s)       # x now has history: eager makes it require grad
        return x.sum()

    compiled = aot_function(f, nop)
    (xc, sc), (xe, se) = _pair(_rand(3, 3), _rand(1, seed=2), grad=(1,))
    out, ref = compiled(xc, sc), f(xe, se)
    assert compiled.fallback_reason is None
    assert xc.requires_grad and xe.requires_grad and not xc.is_leaf
    assert type(xc.grad_fn).__name__ == "CompiledFunctionBackward"
    assert close(out, ref, 1e-6) and close(xc, xe, 0)
    (out + (xc * xc).sum()).backward()
    (ref + (xe * xe).sum()).backward()
    assert close(sc.grad, se.grad, 1e-5)


def test_views_of_an_intermediate_see_writes_through_other_views():
    def f(x):
        y = x * 1.5
        a = y[0]
        b = y.t()
        a.add_(10)             # seen through b and y
        return b.sum(1), y

    compiled = aot_function(f, nop)
    (xc,), (xe,) = _pair(_rand(2, 3), grad=(0,))
    out, ref = compiled(xc), f(xe)
    assert compiled.fallback_reason is None
    assert all(close(o, r, 1e-6) for o, r in zip(out, ref))
    (out[0].sum() + (out[1] * 2).sum()).backward()
    (ref[0].sum() + (ref[1] * 2).sum()).backward()
    assert close(xc.grad, xe.grad, 1e-6)


def test_returning_a_view_of_an_input_aliases_it():
    def f(x):
        return x.view(-1)[1:]

    compiled = aot_function(f, nop)
    (xc,), (xe,) = _pair(_rand(2, 3), grad=(0,))
    out, ref = compiled(xc), f(xe)
    assert compiled.fallback_reason is None
    assert out._base is xc and ref._base is xe
    assert type(out.grad_fn).__name__ == type(ref.grad_fn).__name__
    (out * 3).sum().backward()
    (ref * 3).sum().backward()
    assert close(xc.grad, xe.grad, 0)
    (xc2,), (xe2,) = _pair(_rand(2, 3, seed=3))
    o2, r2 = compiled(xc2), f(xe2)
    o2.add_(100)               # a write into the output is a write into the input
    r2.add_(100)
    assert close(xc2, xe2, 0)


def test_returning_an_input_and_the_same_tensor_twice():
    def f(x, y):
        z = (x * y).sin()
        return z, y, z

    compiled = aot_function(f, nop)
    (xc, yc), (xe, ye) = _pair(_rand(3), _rand(3, seed=1), grad=(0,))
    out, ref = compiled(xc, yc), f(xe, ye)
    assert compiled.fallback_reason is None
    assert out[1] is yc and ref[1] is ye
    assert out[0] is out[2] and ref[0] is ref[2]
    assert type(out[0].grad_fn).__name__ == "CompiledFunctionBackward"
    (out[0] + 2 * out[2]).sum().backward()
    (ref[0] + 2 * ref[2]).sum().backward()
    assert close(xc.grad, xe.grad, 1e-6)


def test_mutated_input_is_also_returned():
    def f(buf, x):
        buf.add_(x.detach())
        return buf, x * 2

    compiled = aot_function(f, nop)
    (bc, xc), (be, xe) = _pair(_rand(3), _rand(3, seed=4), grad=(1,))
    out, ref = compiled(bc, xc), f(be, xe)
    assert compiled.fallback_reason is None
    assert out[0] is bc and close(bc, be, 0) and close(out[1], ref[1], 0)


# ---------------------------------------------------------------- the eager fallback


@pytest.fixture
def break_logs():
    with compiler_logs(graph_breaks=True) as messages:
        yield messages


class LoggingTensor(fusegrad.Tensor):
    """A tensor subclass with its own compute: records each op, then runs it on plain data."""

    __slots__ = ()
    _plain = False
    ops: list = []

    @classmethod
    def _compute(cls, op, args):
        cls.ops.append(op.name)
        plain = [fusegrad.Tensor._make(a._data, a._dtype) if isinstance(a, fusegrad.Tensor)
                 else a for a in args]
        with fusegrad.no_grad():
            out = _dispatch.call(op, *plain)
        return cls._make(out._data, out._dtype)


def _hooked(x):
    y = x * 2
    y.register_hook(lambda g: g * 3)
    return (y * y).sum()


def _retained(x):
    y = x.exp()
    y.retain_grad()
    return y.sum()


_FALLBACKS = {
    "boolean mask": (lambda x: x[x > 0].sum() * 2, "DataDependentOutputError"),
    "item": (lambda x: x * x.sum().item(), "DataDependentOutputException"),
    "nonzero": (lambda x: x.nonzero().float().sum() + x.sum(), "DataDependentOutputError"),
    "hook on an intermediate": (_hooked, "hook"),
    "retain_grad on an intermediate": (_retained, "retain_grad"),
    "random factory": (lambda x: x + fusegrad.randn(3), None),
    "write into an input that requires grad": (lambda x: x.mul(1).add_(1) + x,
                                               None),
}


@pytest.mark.parametrize("case", list(_FALLBACKS))
def test_untraceable_programs_run_eagerly_with_the_reason_logged(case, break_logs):
    fn, reason = _FALLBACKS[case]
    compiled = aot_function(fn, nop)
    arr = _rand(3, seed=7)
    xc, xe = (fusegrad.tensor(arr, requires_grad=True) for _ in range(2))
    fusegrad.manual_seed(0)
    out = compiled(xc)
    fusegrad.manual_seed(0)
    ref = fn(xe)
    if reason is None:  # traceable after all (the write is into an intermediate)
        assert compiled.fallback_reason is None
    else:
        assert reason in compiled.fallback_reason
        assert any(reason in m and "runs eagerly" in m for m in break_logs)
        assert type(out.grad_fn).__name__ != "CompiledFunctionBackward"
    assert close(out, ref, 1e-6)
    out.sum().backward()
    ref.sum().backward()
    assert close(xc.grad, xe.grad, 1e-6)


def test_dropout_is_traced_and_draws_as_eager_does():
    """Dropout's mask is a registry op (bernoulli_) in the graph: the compiled function draws
    from the default generator as eager does, so one seed gives eager's mask."""
    fn = lambda x: fusegrad.nn.functional.dropout(x, 0.5) * 2  # noqa: E731
    compiled = aot_function(fn, nop)
    x = fusegrad.randn(64, requires_grad=True)
    fusegrad.manual_seed(3)
    out = compiled(x)
    assert compiled.fallback_reason is None
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    fusegrad.manual_seed(3)
    ref = fn(x)
    assert close(out, ref, 0)
    fusegrad.manual_seed(4)
    assert not close(compiled(x), ref, 0)  # a fresh draw, not a constant mask
    out.sum().backward()
    assert close(x.grad, (ref != 0).float() * 4, 0)


def test_write_into_a_non_leaf_input_that_requires_grad():
    def f(x):
        x.mul_(2)
        return x.sin()

    compiled = aot_function(f, nop)
    base_c, base_e = (fusegrad.tensor(_rand(3), requires_grad=True) for _ in range(2))
    xc, xe = base_c * 1, base_e * 1
    out, ref = compiled(xc), f(xe)
    assert compiled.fallback_reason is None
    assert close(out, ref, 1e-6) and close(xc, xe, 0)
    assert type(xc.grad_fn).__name__ == "CompiledFunctionBackward"
    (out.sum() + (xc * 3).sum()).backward()   # through the output and the written input
    (ref.sum() + (xe * 3).sum()).backward()
    assert close(base_c.grad, base_e.grad, 1e-6)


def test_write_into_a_leaf_that_requires_grad_fails_as_eager(break_logs):
    def f(x):
        x.mul_(2)
        return x.sin()

    compiled = aot_function(f, nop)
    with pytest.raises(RuntimeError) as ours:
        compiled(fusegrad.tensor(_rand(3), requires_grad=True))
    with pytest.raises(RuntimeError) as eager:
        f(fusegrad.tensor(_rand(3), requires_grad=True))
    assert str(ours.value) == str(eager.value)
    assert "leaf that requires grad" in compiled.fallback_reason


def test_tensor_subclass_input_runs_eagerly(break_logs):
    def f(x):
        return (x * 2).sum()

    compiled = aot_function(f, nop)
    LoggingTensor.ops.clear()
    out = compiled(LoggingTensor._make(_rand(3), fusegrad.float32))
    assert "tensor subclass" in compiled.fallback_reason
    assert LoggingTensor.ops == ["mul.Tensor", "sum"]  # ran eagerly, with its own compute
    assert close(out, (fusegrad.tensor(_rand(3)) * 2).sum(), 1e-6)


# ---------------------------------------------------------------- what tracing relies on


def test_in_place_op_reading_its_old_value_differentiates_with_that_value():
    def f(x, w):
        y = x * 1
        y.mul_(w)       # the gradient of w is y as it was before the write
        return (y * y).sum()

    compiled = aot_function(f, nop)
    (xc, wc), (xe, we) = _pair(_rand(3), _rand(3, seed=1), grad=(0, 1))
    out, ref = compiled(xc, wc), f(xe, we)
    assert compiled.fallback_reason is None
    out.backward()
    ref.backward()
    assert close(wc.grad, we.grad, 1e-6) and close(xc.grad, xe.grad, 1e-6)


def test_outputs_without_gradient_get_traced_zeros():
    def f(x):
        a, b = x.split([2, 3])
        return a.exp() * 2  # `b` gets no gradient: the engine makes zeros for it

    compiled = aot_function(f, nop)
    (xc,), (xe,) = _pair(_rand(5), grad=(0,))
    out, ref = compiled(xc), f(xe)
    assert compiled.fallback_reason is None
    out.sum().backward()
    ref.sum().backward()
    assert close(xc.grad, xe.grad, 1e-6)


def test_make_fx_real_mode_traces_gradients_summed_by_the_engine():
    from fusegrad.fx.experimental.proxy_tensor import make_fx

    def grad_of(x):
        return fusegrad.autograd.grad((x * x + x.sin()).sum(), x)[0]

    gm = make_fx(grad_of)(fusegrad.randn(4, requires_grad=True))
    x = fusegrad.randn(4, requires_grad=True)
    assert close(gm(x), grad_of(x), 1e-6)  # not the values seen while tracing


def test_training_batch_norm_is_functional_with_a_copy_epilogue():
    """The running statistics are outputs of `_native_batch_norm_legit_functional` (which
    writes nothing, as PyTorch's) copied into the buffers at the end of the forward graph;
    values and buffers as eager's."""
    import copy

    from fusegrad._functorch.aot_autograd import aot_module_simplified
    from fusegrad.compiler.aot.api import nop

    nn = fusegrad.nn
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU()).train()
    eager = copy.deepcopy(model)
    graphs = []
    x = fusegrad.randn(4, 2, 5, 5)
    compiled = aot_module_simplified(model, [x], lambda gm, ex: graphs.append(gm) or gm.forward,
                                     nop)
    nodes = [n for n in graphs[0].graph.nodes if n.op == "call_function"]
    names = [getattr(n.target, "op", None) and n.target.op.name for n in nodes]
    assert "_native_batch_norm_legit_functional" in names and "native_batch_norm" not in names
    writes = [n for n in nodes if getattr(n.target, "op", None) is not None
              and n.target.op.inplace]
    assert [n.target.op.name for n in writes] == ["copy_"] * 3  # mean, var, batches tracked
    assert all(n.args[0].op == "placeholder" for n in writes)
    for _ in range(2):
        out, ref = compiled(x), eager(x)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6,
                                   atol=1e-6)
        out.sum().backward()
        ref.sum().backward()
    for (k, b), c in zip(model.named_buffers(), eager.buffers()):
        np.testing.assert_allclose(b.numpy(), c.numpy(), rtol=1e-6, atol=1e-7, err_msg=k)
    # The op itself leaves its running-statistics arguments alone.
    rm, rv = fusegrad.zeros(3), fusegrad.ones(3)
    outs = fusegrad.ops.aten._native_batch_norm_legit_functional.default(
        fusegrad.randn(4, 3, 5, 5), None, None, rm, rv, True, 0.1, 1e-5)
    assert rm.eq(0).all() and rv.eq(1).all() and not outs[3].eq(0).all()


def test_a_stale_version_counter_id_does_not_alias_another_tensor():
    # The tracer files tensors by id(version counter); a filed tensor's counter may be
    # swapped for its base's later and the old one's id reused by a new tensor's counter.
    # That tensor is no alias of the filed one (a recurrent net's saved tanh read the step's
    # input projection in its backward).
    from fusegrad.compiler.aot.tracing import Tracer

    tracer = Tracer(fake=False)
    filed = fusegrad.randn(4)
    node = tracer.graph.placeholder("filed")
    tracer._set(filed, node)
    other = fusegrad.randn(4)
    tracer._by_vc[id(other._vc)] = [filed]  # the stale entry, as a reused id leaves it
    tracer._by_data[id(other._data)] = filed
    assert tracer._unknown(other) is not node


def test_recurrent_input_gradients_match_eager_at_every_length():
    fusegrad.manual_seed(0)
    rnn = fusegrad.nn.RNN(3, 4)

    def f(x):
        return rnn(x)[0].sum(0)

    compiled = fusegrad.compile(f, backend="aot_eager", dynamic=False)
    for length in (9, 18, 27, 29):
        x = fusegrad.randn(length, 1, 3)
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        f(x1).sum().backward()
        compiled(x2).sum().backward()
        assert close(x2.grad, x1.grad, 1e-6)
