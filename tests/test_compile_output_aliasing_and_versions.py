"""Compiled outputs keep eager's memory semantics: an output that is no view owns its memory
(`y * 1` is not `y`), a saved output written in place before backward raises eager's
version-counter error, `y.detach()` beside `y` is a detached alias (not `y` itself), outputs
have eager's strides, and an in-place op whose result type cannot be written into an
integer tensor raises eager's error without writing the input.

Each graph runs through `Counter` (the run's FUSEGRAD_TEST_BACKEND), and the backends named
here where the default backend or AOT is the point of the test."""

import numpy as np
import pytest
import torch
from compile_support import Counter

import fusegrad

BACKENDS = [None, "aot_eager", "inductor"]  # None: the run's backend through Counter


def compiled(fn, backend):
    fusegrad._dynamo.reset()
    return fusegrad.compile(fn, backend=Counter() if backend is None else backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["mul1", "mul1.0", "pow1", "mul_method", "div1", "sub0"])
def test_output_equal_to_another_output_owns_its_memory(backend, op):
    second = {"mul1": lambda y: y * 1, "mul1.0": lambda y: y * 1.0, "pow1": lambda y: y ** 1,
              "mul_method": lambda y: y.mul(1), "div1": lambda y: y / 1,
              "sub0": lambda y: y - 0}[op]

    def f(x):
        y = x.exp()
        return y, second(y)

    results = []
    for fn in (f, compiled(f, backend)):
        y, z = fn(fusegrad.tensor([0.5, 1.0]))
        assert y is not z and y.data_ptr() != z.data_ptr()
        y.zero_()
        results.append(z.tolist())
    assert results[0] == pytest.approx(results[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_sum_times_one_is_not_the_sum(backend):
    def f(x):
        s = x.sum(0)
        return s, s * 1

    s, t = compiled(f, backend)(fusegrad.ones(3, 2))
    s.zero_()
    assert t.tolist() == [3.0, 3.0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", ["exp", "sigmoid", "tanh"])
def test_saved_output_written_in_place_raises_as_eager(backend, fn):
    def f(x):
        return getattr(x, fn)()

    for lib, g in ((fusegrad, f), (fusegrad, compiled(f, backend)), (torch, f)):
        x = lib.tensor([0.5, 1.0], requires_grad=True)
        y = g(x)
        with lib.no_grad():
            y.mul_(0)
        # The node's name differs (CompiledFunction, as PyTorch's compiled node): the rest
        # of eager's message is the same.
        with pytest.raises(RuntimeError, match=r"modified by an inplace operation: "
                           r"\[torch.FloatTensor \[2\]\], which is output 0 of \w+, is at "
                           "version 1; expected version 0 instead"):
            y.sum().backward()


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_and_its_detach_are_distinct_aliases(backend):
    def g(x):
        y = x * 2
        return y, y.detach()

    seen = []
    for fn in (g, compiled(g, backend)):
        x = fusegrad.ones(2, requires_grad=True)
        a, b = fn(x)
        assert a is not b and a.requires_grad and not b.requires_grad
        assert a.data_ptr() == b.data_ptr() and b._base is None
        b.add_(1)  # the alias shares memory with `a`
        assert a.tolist() == [3.0, 3.0]
        a.sum().backward()
        seen.append(x.grad.tolist())
    assert seen[0] == seen[1] == [2.0, 2.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_detach_returned_before_its_source(backend):
    def g(x):
        y = x * 2
        return y.detach(), y

    x = fusegrad.ones(2, requires_grad=True)
    b, a = compiled(g, backend)(x)
    assert a is not b and a.requires_grad and not b.requires_grad
    assert a.data_ptr() == b.data_ptr()
    a.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def _permuted(lib):
    return lib.arange(6.0).reshape(2, 3).t()


LAYOUT_PROGRAMS = {
    "mul": lambda x: x * 2,
    "clone": lambda x: (x * 2).clone(),
    "contiguous": lambda x: (x * 2).contiguous(),
    "input_clone": lambda x: x.clone(),
    "input_contiguous": lambda x: x.contiguous(),
    "exp": lambda x: x.exp(),
    "add_broadcast": lambda x: x + x[:, :1],
    "softmax": lambda x: (x * 2).softmax(-1),
    "t_of_intermediate": lambda x: (x * 2).t(),
    "column_of_intermediate": lambda x: (x * 2)[:, 1],
    "diagonal_of_intermediate": lambda x: (x * 2)[:2].diagonal(),
    "to_float64": lambda x: (x * 2).to(fusegrad.float64 if isinstance(x, fusegrad.Tensor)
                                       else torch.float64),
    "sum": lambda x: (x * 2).sum(0),
    "matmul": lambda x: (x * 2) @ x.t(),
    "cumsum": lambda x: (x * 2).cumsum(0),  # an extern's result, copied into eager's layout
    "lgamma": lambda x: (x + 1).lgamma(),
    "log_softmax": lambda x: (x * 2).log_softmax(0),  # decomposed: contiguous as eager's
    "masked_fill": lambda x: (x * 2).masked_fill(x > 2, 0.0),
    "sigmoid_3d": lambda x: x.reshape(1, 3, 2).permute(2, 0, 1).sigmoid(),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(LAYOUT_PROGRAMS))
def test_output_strides_follow_eager(backend, name):
    f = LAYOUT_PROGRAMS[name]
    want = f(_permuted(fusegrad))
    got = compiled(f, backend)(_permuted(fusegrad))
    assert tuple(got.stride()) == tuple(want.stride())
    assert got.storage_offset() == want.storage_offset()
    assert got.is_contiguous() == want.is_contiguous()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    if name not in ("column_of_intermediate", "diagonal_of_intermediate", "t_of_intermediate"):
        assert tuple(want.stride()) == tuple(f(_permuted(torch)).stride())


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_of_output_raises_as_eager(backend):
    f = LAYOUT_PROGRAMS["mul"]
    with pytest.raises(RuntimeError):
        f(_permuted(fusegrad)).view(-1)
    with pytest.raises(RuntimeError):
        compiled(f, backend)(_permuted(fusegrad)).view(-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_strides_under_training(backend):
    def f(x):
        return (x * 2).exp()

    x = _permuted(fusegrad).requires_grad_()
    y = compiled(f, backend)(x)
    assert tuple(y.stride()) == tuple(f(x).stride()) == (1, 3)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * x.detach().numpy()), rtol=1e-5)


INT_INPLACE = {
    "add_float": lambda x: x.add_(1.7),
    "iadd_float": lambda x: x.__iadd__(0.5),
    "div_": lambda x: x.div_(2),
    "mul_float": lambda x: x.mul_(0.5),
    "sigmoid_": lambda x: x.sigmoid_(),
    "sqrt_": lambda x: x.sqrt_(),
    "clamp_float": lambda x: x.clamp_(0.5, 1.5),
    "bool_add_": lambda x: (x > 0).add_(1),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(INT_INPLACE))
def test_float_result_into_integer_tensor_raises_as_eager(backend, name):
    op = INT_INPLACE[name]

    def h(x):
        op(x)
        return x

    messages = []
    for lib, fn in ((fusegrad, h), (fusegrad, compiled(h, backend)), (torch, h)):
        x = lib.tensor([1, 2, 3])
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type") \
                as e:
            fn(x)
        assert x.tolist() == [1, 2, 3]  # the input is not written
        messages.append(str(e.value))
    assert messages[0] == messages[1]  # (torch words a few of them differently)


@pytest.mark.parametrize("backend", BACKENDS)
def test_allowed_inplace_casts_still_compile(backend):
    def h(x, y):
        x.add_(y)
        return x

    x = fusegrad.tensor([1, 2, 3], dtype=fusegrad.int32)
    out = compiled(h, backend)(x, fusegrad.tensor([1, 2, 3]))
    assert out.dtype == fusegrad.int32 and out.tolist() == [2, 4, 6]
