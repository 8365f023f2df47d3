"""Wrong answers and errors a third differential fuzzing of `fusegrad.compile` found, in
AOT functionalization of in-place writes (compiled against eager fusegrad, over several
calls): the layout a written tensor keeps, eager's refusals of in-place writes.

Each program runs eagerly and compiled on fresh inputs; results (values, geometry, autograd
flags), errors (type and text) and the inputs afterwards must be equal. No torch here: the
3.12/3.13 runs use this file.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad

BACKENDS = ["eager", "aot_eager", "inductor"]


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
    return (t.detach().numpy().tolist(), tuple(t.shape), tuple(t.stride()), t.dtype,
            t.requires_grad, t.grad_fn is None)


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


def _square_and_index():
    y = fusegrad.arange(16.0).view(4, 4)
    i = fusegrad.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [1, 1, 0, 0], [2, 3, 3, 2]])
    return y, i


# ------------------------------------------- the layout of a tensor written in place


def _scatter_through_transpose_then_as_strided(y, i):
    v = y.t()
    v.scatter_(1, i, v * 10)  # (out-of-place scatter is contiguous; `v` stays transposed)
    return y.as_strided((2, 3), (4, 1), 1) + 0


def _scatter_through_transpose_then_view(y, i):
    v = y.t()
    v.scatter_(1, i, v * 10)
    return y[:, ::2].view(-1)


def _index_put_into_transposed_input(y, i):
    y.index_put_((i[0],), y[0] * 3, accumulate=True)
    return y.as_strided((3,), (1,)) * 1, y.view(-1) if y.is_contiguous() else y.reshape(-1)


def _cumsum_of_transposed_intermediate(y, i):
    a = y.t().clone()
    a.cumsum_(1)
    return a.as_strided((2, 2), (1, 4)) + 0, a


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_scatter_through_transpose_then_as_strided,
                                _scatter_through_transpose_then_view,
                                _cumsum_of_transposed_intermediate])
def test_written_tensor_keeps_its_layout(fn, backend):
    # The written tensor's node was the out-of-place op's contiguous result, and its base's
    # the transpose of that: `as_strided` read other elements, `view` failed.
    _compare(fn, _square_and_index, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_written_transposed_input_keeps_its_layout(backend):
    def make_args():
        y, i = _square_and_index()
        return y.t(), i

    _compare(_index_put_into_transposed_input, make_args, backend)


def _masked_fill_then_scale(y, m):
    y.masked_fill_(m, -1.0)  # (out of place, masked_fill is contiguous)
    return y * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_written_strided_input_keeps_its_memory_order(backend):
    # A transposed input with gaps: the value written back kept row-major order, so the
    # result computed from it had other strides than eager's.
    def make_args():
        y = fusegrad.arange(40.0).view(8, 5).t()[1:, ::2]
        return y, (fusegrad.arange(16).view(4, 4) % 3) == 0

    _compare(_masked_fill_then_scale, make_args, backend)


# ------------------------------------------- in-place writes eager refuses


def _scatter_reading_its_transpose(y, i):
    y.t().scatter_(1, i, y)
    return y + 1


def _add_of_own_transpose(y, i):
    v = y.detach()
    v.t().add_(v)
    return v * 2


def _add_of_overlapping_rows(y, i):
    y[1:].add_(y[:-1])
    return y * 2


def _copy_of_disjoint_rows(y, i):
    y[:2].copy_(y[2:])  # (disjoint memory: allowed)
    return y * 2


def _addcmul_into_diagonal(y, i):
    y.diagonal().addcmul_(y, y, value=0.1)  # (broadcasts to [4, 4])
    return y * 2


def _add_into_row_broadcasting(y, i):
    y[0].add_(i.float())
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_scatter_reading_its_transpose, _add_of_own_transpose,
                                _add_of_overlapping_rows, _copy_of_disjoint_rows,
                                _addcmul_into_diagonal, _add_into_row_broadcasting])
def test_in_place_write_eager_refuses(fn, backend):
    # The functional graph computed a value where eager's kernel raises: an operand that
    # shares part of the written memory, a result larger than the written tensor.
    _compare(fn, _square_and_index, backend)


# ------------------------------------------- a detached alias given history


def _detached_input_alias_written_with_grad(x, y):
    v = y.detach()
    v.add_(x)  # (v now requires grad, with history; y does not)
    return v


def _detached_intermediate_alias_written_with_grad(x, y):
    a = y * 2
    v = a.detach()
    v.mul_(x)
    return v, a


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_detached_input_alias_written_with_grad,
                                _detached_intermediate_alias_written_with_grad])
def test_detached_alias_written_with_history(fn, backend):
    # The output was rebuilt after the graph as `y.detach()`: no history, no gradient.
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(fn, backend=backend)
    for _ in range(2):
        got = []
        for f in (fn, compiled):
            x = fusegrad.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
            y = fusegrad.tensor([[0.5, -1.0], [2.0, 0.0]])
            out = f(x, y)
            outs = out if isinstance(out, tuple) else (out,)
            if outs[0].requires_grad:
                outs[0].sum().backward()
            got.append(([_state(o) for o in outs], _state(y),
                        None if x.grad is None else x.grad.tolist()))
        assert got[1] == got[0]


# ------------------------------------------- random draws of a transposed operand


def _bernoulli_of_transposed(y):
    return fusegrad.bernoulli(fusegrad.sigmoid(y.t()))


def _bernoulli_method_of_transposed(y):
    return (y.t() * 0.5 + 0.5).clamp(0, 1).bernoulli()


def _bernoulli_into_transposed(y):
    return (y.t() * 1).bernoulli_(fusegrad.sigmoid(y.t()))


def _dropout_of_transposed(y):
    return fusegrad.nn.functional.dropout(y.t() * 2, 0.5, training=True)


def _uniform_into_transposed(y):
    return (y.t() * 1).uniform_()


def _poisson_of_transposed(y):
    return fusegrad.poisson(y.t().abs() * 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_bernoulli_of_transposed, _bernoulli_method_of_transposed,
                                _bernoulli_into_transposed, _dropout_of_transposed,
                                _uniform_into_transposed, _poisson_of_transposed])
def test_random_draws_of_transposed_operand(fn, backend):
    # The generated code drew every random op along its first operand's memory order;
    # `bernoulli(p)` draws along the logical order (and `bernoulli_(p)` got its operand
    # transposed, not `p`): the same seed gave another sample, or an error.
    def make_args():
        fusegrad.manual_seed(3)
        return (fusegrad.arange(20.0).view(4, 5) / 16 - 0.5,)

    _compare(fn, make_args, backend)


# ------------------------------------------- a buffer written with history, called again


class _WithBuffer(fusegrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", fusegrad.zeros(1))

    def forward(self, x, z):
        self.buf.copy_(z.reshape(-1)[:1])  # (the buffer takes z's history)
        return x * x, self.buf * 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_buffer_written_with_history_then_called_again(backend):
    # The second call's node has an edge to the buffer's history, the first call's node,
    # whose saved values the first backward freed: a backward reaching it with no gradient
    # at all read them ("backward through the graph a second time"); eager's nodes pass
    # nothing on.
    results = []
    for compiled in (False, True):
        fusegrad._dynamo.reset()
        fusegrad.manual_seed(0)
        m = _WithBuffer()
        f = fusegrad.compile(m, backend=backend) if compiled else m
        got = []
        for k in range(3):
            x = fusegrad.full((2, 2), 1.0 + k, requires_grad=True)
            z = fusegrad.full((2, 2), 2.0 + k, requires_grad=True)
            try:
                a, b = f(x, z)
                a.sum().backward()
                got.append((a.tolist(), b.tolist(), x.grad.tolist(), z.grad,
                            m.buf.requires_grad))
            except RuntimeError as e:
                got.append(str(e))
        results.append(got)
    assert results[1] == results[0]


# ------------------------------------------- backwards through the outputs one at a time


def _backward_inside_then_return_another(x, z):
    v = z * 2
    (z * x).sum().backward()  # (a graph break: the node before it makes both values)
    return v


def _output_of_a_node_saving_nothing(x, z):
    v = z + 1
    if v.sum() > -100:  # (a graph break: v alone leaves its node, which saves nothing)
        (v * x).sum().backward()
    return v


def _outputs_sharing_a_saved_node(x, z):
    a = (x * z).exp()
    return a * 2, a * 3


def _loss_and_what_it_is_made_of(x, z):
    h = (x * z).tanh()
    return h.pow(2).sum(), h  # (h's history is the loss's: freed by the loss's backward)


def _outputs_apart(x, z):
    return (x * z).exp(), z.sin() * x.detach()


def _backwards(fn, compiled: bool, backend: str, retain: bool) -> list:
    """Each output's sum backpropagated in turn (after the program's own backward)."""
    f = fusegrad.compile(fn, backend=backend) if compiled else fn
    x = fusegrad.tensor([[1.0, 2.0], [0.5, -1.0]], requires_grad=True)
    z = fusegrad.tensor([[0.3, -0.2], [1.5, 0.1]], requires_grad=True)
    got = []
    try:
        out = f(x, z)
        for o in out if isinstance(out, tuple) else (out,) * 2:
            o.sum().backward(retain_graph=retain)
            got.append((np.round(x.grad.numpy(), 5).tolist(),
                        np.round(z.grad.numpy(), 5).tolist()))
    except RuntimeError as e:
        got.append(str(e))
    return got


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("retain", [False, True])
@pytest.mark.parametrize("fn", [_backward_inside_then_return_another,
                                _output_of_a_node_saving_nothing, _outputs_sharing_a_saved_node,
                                _loss_and_what_it_is_made_of, _outputs_apart])
def test_backwards_through_outputs_one_at_a_time(fn, retain, backend):
    # One compiled node makes all the outputs; its first backward freed what it saved, so
    # a second backward through another output raised where eager's separate histories
    # allow it. Where eager's histories share a node that saved values (or one output is
    # backpropagated twice) eager raises, and so must the compiled program.
    fusegrad._dynamo.reset()
    assert _backwards(fn, True, backend, retain) == _backwards(fn, False, backend, retain)


# ------------------------------------------- layouts of binary ops of two dtypes


def _two_dtypes_of_other_orders(y, z):
    return y * z, z + y, (y + 1) - z.float(), y.int() * z, y.t() + z


@pytest.mark.parametrize("backend", BACKENDS)
def test_binary_op_of_two_dtypes_follows_the_first_operand(backend):
    # Off its one-dtype fast path, eager's binary kernel lays its result out as
    # TensorIterator (the first operand's order where the operands' orders conflict); the
    # generated code took NumPy's order, row-major there.
    def make_args():
        y = fusegrad.arange(16.0).view(4, 4).t()
        return y, fusegrad.linspace(-1.0, 1.0, 16, dtype=fusegrad.float64).view(4, 4)

    _compare(_two_dtypes_of_other_orders, make_args, backend)


# ------------------------------------------- a gradient taken inside the graph


def _grad_through_an_earlier_graph(x):
    v1 = x + 0
    v2 = v1 * v1 + v1.norm(dim=0, keepdim=True)
    if v2.sum() > -100:  # (a graph break: v2 enters the next graph with its history)
        (gx,) = fusegrad.autograd.grad((v2 * x).sum(), x)
    return gx


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_inside_the_graph_goes_past_its_inputs(backend):
    # `autograd.grad` traced into the second graph stopped at its input v2 (a leaf there),
    # missing the gradient through v2's history: d(v2 * x)/dx came out as v2.
    _compare(_grad_through_an_earlier_graph,
             lambda: (fusegrad.tensor([[1.0, 2.0], [3.0, -4.0]], requires_grad=True),),
             backend)
