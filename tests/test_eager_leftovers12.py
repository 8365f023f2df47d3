"""Eager fidelity against torch 2.13: PyTorch's `"<kernel>" not implemented for '<Dtype>'`
message (spelled by one helper for every op), the argument parser's messages for keyword and
positional forms (`x.topk(k=1.5)`, `softmax(x, dim=None)`, `select_copy(x, 0, 1.5)`, an int
parameter given a float), `t @ numpy_array` (NumPy's `__rmatmul__`, as in PyTorch) and
`numpy_array @ t` (a TypeError), ctc_loss given length tensors made inside compiled code (a
graph break, as torch takes, instead of AOT autograd falling back), and a sweep of common
functions (einsum, tensordot, kron, cdist, histc, bincount, bucketize/searchsorted,
unique, diff with prepend/append, cumsum/cumprod with dtype, logcumsumexp, nan_to_num, lerp,
addcmul/addcdiv, baddbmm, index_fill, masked_scatter, take_along_dim, roll, rot90,
narrow_copy, unflatten, repeat_interleave, meshgrid, ...): values, dtypes, shapes, strides,
grad_fn names, gradients and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle import outcome

import fusegrad
from fusegrad._scalar_conversion import not_implemented_for

LIBS = (torch, fusegrad)


def _outcome(lib, f):
    """What `f(lib)` gives, in comparable form: a tensor's values (as float64, NaN and inf
    kept), dtype, shape, strides, requires_grad and grad_fn name; a tuple's items; a number;
    or the error's type and message."""
    return outcome(lambda: f(lib), _described)


def _described(r):
    if isinstance(r, (tuple, list)):
        return tuple(_described(x) for x in r)
    if isinstance(r, (torch.Tensor, fusegrad.Tensor)):
        fn = r.grad_fn
        values = r.detach()
        if values.is_complex():
            values = (torch.view_as_real(values) if isinstance(r, torch.Tensor)
                      else fusegrad.view_as_real(values))
        wide = torch.float64 if isinstance(r, torch.Tensor) else fusegrad.float64
        return ("tensor", str(r.dtype).replace("fusegrad", "torch"), tuple(r.shape),
                tuple(r.stride()), r.requires_grad, None if fn is None else type(fn).__name__,
                np.asarray(values.to(wide).numpy()))
    if type(r).__name__ == "Size":
        return ("value", tuple(r))
    return ("value", r)


def _equal(a, b, rtol: float = 1e-5) -> bool:
    if isinstance(a, tuple) and a and a[0] == "tensor":
        if not isinstance(b, tuple) or not b or b[0] != "tensor" or a[:6] != b[:6]:
            return False
        return np.allclose(a[6], b[6], rtol=rtol, atol=1e-6, equal_nan=True)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and a and \
            a[0] not in ("error", "value"):
        return all(_equal(x, y, rtol) for x, y in zip(a, b))
    return a == b


def _same(f, rtol: float = 1e-5) -> None:
    got = [_outcome(lib, f) for lib in LIBS]
    assert _equal(got[0], got[1], rtol), got


# Fresh inputs for each call (the first three require grad).
def X(L):
    return L.tensor([[0.5, -1.25, 2.0], [3.5, 0.0, -0.75]], requires_grad=True)


def Y(L):
    return L.tensor([[1.5, 0.25, -2.0], [0.5, 1.0, 0.75]], requires_grad=True)


def B(L):
    return L.tensor([[[1.0, 2.0], [3.0, 4.0]], [[0.5, -1.0], [2.0, 0.0]]], requires_grad=True)


def V(L):
    return L.tensor([0.1, 2.5, -1.0, 3.0])


def IV(L):
    return L.tensor([1, 3, 0, 3, 2])


def _grads(f, *inputs):
    """`f(*inputs)`, then the gradients of its sum with respect to each input."""
    out = f(*inputs)
    out.sum().backward()
    return (out, *(t.grad for t in inputs))


# ---------------------------------------------------------------- "not implemented for"

# Kernels without a form for a dtype, raised through the one helper from many op modules.
NOT_IMPLEMENTED = {
    "abs bool": lambda L: L.abs(L.tensor([True])),
    "trace bool": lambda L: L.trace(L.ones(2, 2, dtype=L.bool)),
    "bincount float": lambda L: L.bincount(L.tensor([1.0])),
    "histc int": lambda L: L.histc(L.tensor([1, 2]), bins=2),
    "logcumsumexp int": lambda L: L.logcumsumexp(L.tensor([1, 2]), 0),
    "cumsum dtype bool": lambda L: L.cumsum(L.tensor([1, 2]), 0, dtype=L.bool),
    "frac int": lambda L: L.frac(L.tensor([1, 2])),
    "bitwise_not float": lambda L: L.bitwise_not(L.tensor([1.0])),
    "bitwise_and float": lambda L: L.bitwise_and(L.tensor([1.0]), L.tensor([1.0])),
    "clamp bool": lambda L: L.clamp(L.tensor([True]), 0, 1),
    "pow bool": lambda L: L.pow(L.tensor([True]), L.tensor([True])),
    "lu int": lambda L: L.linalg.lu_factor(L.ones(2, 2, dtype=L.int64)),
    "eigh int": lambda L: L.linalg.eigh(L.ones(2, 2, dtype=L.int64)),
    "cummax complex": lambda L: L.cummax(L.tensor([1 + 1j]), 0),
    "sort bool kthvalue": lambda L: L.kthvalue(L.tensor([True, False]), 1),
    "leaky_relu int": lambda L: L.nn.functional.leaky_relu(L.tensor([1, 2])),
    "gelu int": lambda L: L.nn.functional.gelu(L.tensor([1, 2])),
    "erfinv int": lambda L: L.special.erfinv(L.tensor([1, 2])) if L is torch
    else L.erfinv(L.tensor([1, 2])),
    "lt complex": lambda L: L.tensor([1j]) < L.tensor([2j]),
    "rms_norm int": lambda L: L.nn.functional.rms_norm(L.ones(2, 2, dtype=L.int64), (2,)),
    "threshold bool": lambda L: L.nn.functional.threshold(L.tensor([True]), 0.5, 0.0),
    "repeat_interleave float": lambda L: L.repeat_interleave(L.tensor([1.0, 2.0])),
    "repeat_interleave byte": lambda L: L.repeat_interleave(
        L.ones(2), L.tensor([1, 2], dtype=L.uint8)),
    "dot bool tensordot": lambda L: L.tensordot(L.ones(2, dtype=L.bool),
                                                L.ones(2, dtype=L.bool), 1),
    "randint-like random_ bool": lambda L: L.empty(2, dtype=L.complex64).random_(),
}


@pytest.mark.parametrize("case", sorted(NOT_IMPLEMENTED))
def test_not_implemented_messages(case):
    """PyTorch's NotImplementedError naming the kernel and the dtype, word for word."""
    _same(NOT_IMPLEMENTED[case])


@pytest.mark.parametrize("dt,legacy", [
    (np.dtype(np.int64), "Long"), (np.dtype(np.bool_), "Bool"), (fusegrad.bfloat16, "BFloat16"),
    (fusegrad.float16, "Half"), (fusegrad.complex64, "ComplexFloat"), ("Bool", "Bool")])
def test_not_implemented_for_spelling(dt, legacy):
    """The helper takes NumPy's dtypes, ours and a legacy name, and spells torch's text (the
    bool one checked against torch's own error)."""
    e = not_implemented_for("abs_cpu", dt)
    assert isinstance(e, NotImplementedError)
    assert str(e) == f"\"abs_cpu\" not implemented for '{legacy}'"
    if legacy == "Bool":
        with pytest.raises(NotImplementedError) as raised:
            torch.abs(torch.tensor([True]))
        assert str(raised.value) == str(e)


# ---------------------------------------------------------------- keyword and positional


ARGUMENTS = {
    "topk k= method": lambda L: L.ones(2, 3).topk(k=1.5),
    "topk k method": lambda L: L.ones(2, 3).topk(1.5),
    "topk k= function": lambda L: L.topk(L.ones(2, 3), k=1.5),
    "topk k function": lambda L: L.topk(L.ones(2, 3), 1.5),
    "topk dim=": lambda L: L.ones(2, 3).topk(1, dim=1.5),
    "topk dim": lambda L: L.topk(L.ones(2, 3), 1, 1.5),
    "topk dim=None": lambda L: L.topk(L.ones(2, 3), 1, dim=None),
    "topk k None": lambda L: L.ones(2, 3).topk(None),
    "topk largest int": lambda L: L.topk(L.ones(2, 3), 1, 1, 1),
    "topk largest= int": lambda L: L.topk(L.ones(2, 3), 1, largest=1),
    "topk list input": lambda L: L.topk([1.0, 2.0], 1),
    "topk works": lambda L: L.topk(L.arange(6.0).reshape(2, 3), 2, 0, False, True),
    "topk method keywords": lambda L: L.arange(6.0).reshape(2, 3).topk(
        k=2, dim=0, largest=False),
    "topk axis": lambda L: L.arange(6.0).reshape(2, 3).topk(2, axis=0),
    "topk tensor k": lambda L: L.topk(L.arange(6.0), L.tensor(2)),
    "topk unknown keyword": lambda L: L.topk(L.ones(3), 2, foo=1),
    "topk too many": lambda L: L.topk(L.ones(3), 2, 0, True, True, 5),
    "softmax dim=None": lambda L: L.softmax(L.ones(2, 3), dim=None),
    "softmax None": lambda L: L.softmax(L.ones(2, 3), None),
    "softmax method dim=None": lambda L: L.ones(2, 3).softmax(dim=None),
    "softmax method None": lambda L: L.ones(2, 3).softmax(None),
    "softmax dim float": lambda L: L.ones(2, 3).softmax(1.5),
    "softmax dim= float": lambda L: L.ones(2, 3).softmax(dim=1.5),
    "softmax missing": lambda L: L.ones(2, 3).softmax(),
    "softmax dtype": lambda L: L.softmax(L.ones(2, 3, requires_grad=True), 1, L.float64),
    "softmax dtype=": lambda L: L.ones(2, 3).softmax(dim=0, dtype=L.float64),
    "softmax tensor dim": lambda L: L.ones(2, 3).softmax(L.tensor(1)),
    "softmax list input": lambda L: L.softmax([1.0, 2.0], 0),
    "log_softmax dim=None": lambda L: L.log_softmax(L.ones(2, 3), dim=None),
    "log_softmax method": lambda L: L.tensor([[1.0, 2.0]], requires_grad=True).log_softmax(-1),
    "select_copy float": lambda L: L.select_copy(L.ones(2, 3), 0, 1.5),
    "select_copy index= float": lambda L: L.select_copy(L.ones(2, 3), 0, index=1.5),
    "select_copy keywords": lambda L: L.select_copy(L.arange(6.0).reshape(2, 3), dim=1,
                                                    index=2),
    "select_copy grad": lambda L: L.select_copy(L.ones(2, 3, requires_grad=True), 1, -1),
    "select_copy tensor index": lambda L: L.select_copy(L.ones(2, 3), 1, L.tensor(2)),
    "select_copy missing": lambda L: L.select_copy(L.ones(2, 3), 1),
    "select float": lambda L: L.select(L.ones(2, 3), 0, 1.5),
    "select index= float": lambda L: L.select(L.ones(2, 3), 0, index=1.5),
    "select tensor index": lambda L: L.select(L.arange(6.0).reshape(2, 3), 0, L.tensor(1)),
    "tril float": lambda L: L.tril(L.ones(3, 3), 1.5),
    "tril diagonal= float": lambda L: L.tril(L.ones(3, 3), diagonal=1.5),
    "triu float": lambda L: L.triu(L.ones(3, 3), 0.5),
    "tril tensor diagonal": lambda L: L.tril(L.ones(3, 3), L.tensor(1)),
    "chunk float": lambda L: L.chunk(L.ones(4), 1.5),
    "chunk chunks= float": lambda L: L.chunk(L.ones(4), chunks=1.5),
    "triu_indices offset= float": lambda L: L.triu_indices(3, 3, offset=1.5),
    "tril_indices row float": lambda L: L.tril_indices(3.5, 3),
    "diff n= float": lambda L: L.diff(L.ones(4), n=1.5),
    "diff n float": lambda L: L.diff(L.ones(4), 1.5),
    "cat tensors= int": lambda L: L.cat(tensors=5),
    "cat int": lambda L: L.cat(5),
    "stack tensors= tensor": lambda L: L.stack(tensors=L.ones(2)),
    "stack tensor": lambda L: L.stack(L.ones(2)),
    "linear weight=None": lambda L: L.nn.functional.linear(L.ones(2, 3), weight=None),
    "linear None weight": lambda L: L.nn.functional.linear(L.ones(2, 3), None),
    "functional softmax dim= float": lambda L: L.nn.functional.softmax(L.ones(2, 3), dim=1.5),
    "one_hot num_classes= float": lambda L: L.nn.functional.one_hot(L.tensor([1]),
                                                                     num_classes=2.5),
    "one_hot float": lambda L: L.nn.functional.one_hot(L.tensor([1]), 2.5),
    "pixel_shuffle float": lambda L: L.nn.functional.pixel_shuffle(L.ones(1, 4, 2, 2), 1.5),
    "pixel_unshuffle float": lambda L: L.nn.functional.pixel_unshuffle(
        L.ones(1, 1, 4, 4), downscale_factor=1.5),
    "pad float first": lambda L: L.nn.functional.pad(L.ones(2, 3), (1.5, 1)),
    "pad float later": lambda L: L.nn.functional.pad(L.ones(2, 3), (1, 2, 3, 0.5)),
    "pad= float later": lambda L: L.nn.functional.pad(L.ones(2, 3), pad=(1, 1.5)),
    "pad= float first": lambda L: L.nn.functional.pad(L.ones(2, 3), pad=(1.5, 1)),
    "pad tensor amount": lambda L: L.nn.functional.pad(L.ones(2, 3), (1, L.tensor(1))),
    "embedding padding_idx= float": lambda L: L.nn.functional.embedding(
        L.tensor([1]), L.ones(3, 2), padding_idx=1.5),
    "embedding padding_idx float": lambda L: L.nn.functional.embedding(
        L.tensor([1]), L.ones(3, 2), -0.5),
    "channel_shuffle float": lambda L: L.nn.functional.channel_shuffle(L.ones(1, 4, 2), 1.5),
    "channel_shuffle groups= float 2-d": lambda L: L.nn.functional.channel_shuffle(
        L.ones(4, 2), groups=1.5),
    "vander N float": lambda L: L.vander(L.ones(3), 1.5),
    "vander N= float": lambda L: L.vander(L.ones(3), N=1.5),
    "rot90 k float": lambda L: L.rot90(L.ones(2, 3), 1.5),
    "rot90 k= float": lambda L: L.rot90(L.ones(2, 3), k=1.5),
    "eye n float": lambda L: L.eye(1.5),
    "eye n= float": lambda L: L.eye(n=1.5),
}


# Sizes a method used to truncate (`x.reshape(2, 3.0)` was a 2 x 3 view): a TypeError now,
# as in PyTorch (whose method messages quote the position its parser saw).
FLOAT_SIZES = {
    "reshape": lambda L: L.arange(6).reshape(2, 3.0),
    "view": lambda L: L.arange(6).view(2, 3.0),
    "expand": lambda L: L.arange(6).expand(1.5, 6),
    "tile": lambda L: L.arange(6).tile((1.5,)),
    "permute": lambda L: L.ones(2, 3).permute(0, 1.0),
    "view_copy": lambda L: L.view_copy(L.arange(6), (2, 3.0)),
}


@pytest.mark.parametrize("case", sorted(FLOAT_SIZES))
def test_float_sizes_refused(case):
    """A float among the sizes is a TypeError in both, never a truncated size."""
    for lib in LIBS:
        with pytest.raises(TypeError):
            FLOAT_SIZES[case](lib)


@pytest.mark.parametrize("case", sorted(ARGUMENTS))
def test_argument_messages(case):
    """PyTorch's parser's messages (a position named only for an argument given by position),
    and the results where the call is valid."""
    _same(ARGUMENTS[case])


# ---------------------------------------------------------------- @ with a NumPy array


MATMUL_NUMPY = {
    "float32": lambda L: L.arange(6.0).reshape(2, 3) @ np.ones((3, 2), np.float32),
    "float64 promotes": lambda L: L.arange(6.0).reshape(2, 3) @ np.ones((3, 2)),
    "int64 promotes": lambda L: L.arange(6.0).reshape(2, 3) @ np.ones((3, 2), np.int64),
    "vector": lambda L: L.arange(6.0).reshape(2, 3) @ np.ones(3),
    "integer tensor": lambda L: L.arange(6).reshape(2, 3) @ np.ones((3, 1), np.int32),
    "array @ tensor": lambda L: np.ones((2, 2), np.float32) @ L.ones(2, 3),
    "requires grad": lambda L: L.ones(2, 3, requires_grad=True) @ np.ones((3, 2)),
    "__matmul__": lambda L: L.ones(2, 3).__matmul__(np.ones((3, 2))),
    "__rmatmul__": lambda L: L.ones(2, 3).__rmatmul__(np.ones((2, 2))),
    "function refuses": lambda L: L.matmul(L.ones(2, 3), np.ones((3, 2))),
}


@pytest.mark.parametrize("case", sorted(MATMUL_NUMPY))
def test_matmul_with_numpy_arrays(case):
    """`t @ array` is NumPy's product wrapped back into a tensor; `array @ t` a TypeError."""
    _same(MATMUL_NUMPY[case])


# ---------------------------------------------------------------- ctc_loss under compile


def test_ctc_loss_with_tensor_lengths_breaks_the_graph():
    """Length tensors made inside compiled code: capture breaks the graph at ctc_loss (torch
    takes a 'Dynamic shape operator' break there), so no graph falls back from AOT autograd,
    and values and gradients are eager's."""
    from fusegrad.compiler import logs

    rng = np.random.default_rng(3)
    data = rng.standard_normal((6, 2, 4)).astype(np.float32)
    targets = [[1, 2, 0], [1, 2, 3]]

    def fn(lib, lp, t):
        loss = lib.nn.functional.ctc_loss(lp.log_softmax(2), t, lib.tensor([6, 5]),
                                          lib.tensor([2, 3]), reduction="mean")
        return loss * 2

    want = []
    for lib in (torch, fusegrad):
        lp = lib.tensor(data, requires_grad=True)
        out = fn(lib, lp, lib.tensor(targets))
        out.backward()
        want.append((out.item(), lp.grad.numpy().copy()))
    np.testing.assert_allclose(want[1][0], want[0][0], rtol=1e-5)
    np.testing.assert_allclose(want[1][1], want[0][1], rtol=1e-4, atol=1e-6)

    seen, emit = [], logs.emit

    def record(kind, message):
        if kind == "graph_breaks":
            seen.append(message)
        emit(kind, message)

    for backend in ("aot_eager", "inductor"):
        fusegrad._dynamo.reset()
        seen.clear()
        logs.emit = record
        try:
            lp = fusegrad.tensor(data, requires_grad=True)
            out = fusegrad.compile(lambda a, t: fn(fusegrad, a, t), backend=backend)(
                lp, fusegrad.tensor(targets))
            out.backward()
        finally:
            logs.emit = emit
        assert not [m for m in seen if m.startswith(("AOT autograd", "inductor:"))], seen
        assert any("ctc_loss" in m for m in seen), seen
        np.testing.assert_allclose(out.item(), want[0][0], rtol=1e-5)
        np.testing.assert_allclose(lp.grad.numpy(), want[0][1], rtol=1e-4, atol=1e-6)


def test_ctc_loss_fake_lengths_are_data_dependent():
    """Under a fake mode, length tensors have no values to read: a data-dependent error (the
    graph break capture takes), never a wrong size."""
    from fusegrad._fake import DataDependentOutputError, FakeTensorMode

    lp = fusegrad.randn(6, 2, 4).log_softmax(2)
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(lp)
        with pytest.raises(DataDependentOutputError):
            fusegrad.nn.functional.ctc_loss(fake, fusegrad.tensor([[1, 2], [1, 2]]),
                                            fusegrad.tensor([6, 5]), fusegrad.tensor([2, 2]))


# ---------------------------------------------------------------- a sweep


SWEEP = {
    # einsum
    "einsum mm": lambda L: L.einsum("ij,kj->ik", X(L), Y(L)),
    "einsum sum": lambda L: L.einsum("ij->", X(L)),
    "einsum diagonal": lambda L: L.einsum("ii->i", L.arange(9.0).reshape(3, 3)),
    "einsum dot": lambda L: L.einsum("i,i", V(L), V(L)),
    "einsum ellipsis": lambda L: L.einsum("...j,...j->...", X(L), Y(L)),
    "einsum batch": lambda L: L.einsum("bij,bjk->bik", B(L), B(L)),
    "einsum list": lambda L: L.einsum("ij,jk", [X(L), Y(L).T]),
    "einsum spaces": lambda L: L.einsum("i j -> j i", X(L)),
    "einsum operands short": lambda L: L.einsum("ij,kj->ik", X(L)),
    "einsum unknown output": lambda L: L.einsum("ij,kj->ikl", X(L), Y(L)),
    "einsum size mismatch": lambda L: L.einsum("ij,jk->ik", X(L), Y(L)),
    "einsum grads": lambda L: _grads(lambda a, b: L.einsum("ij,kj->ik", a, b), X(L), Y(L)),
    # tensordot, kron
    "tensordot lists": lambda L: L.tensordot(X(L), Y(L), dims=([1], [1])),
    "tensordot int": lambda L: L.tensordot(X(L), Y(L), dims=2),
    "tensordot 0": lambda L: L.tensordot(X(L), Y(L), dims=0),
    "tensordot 3-d": lambda L: L.tensordot(B(L), B(L), dims=([1, 2], [2, 1])),
    "tensordot mismatch": lambda L: L.tensordot(X(L), Y(L), dims=([1], [0])),
    "tensordot negative": lambda L: L.tensordot(X(L), Y(L), dims=-1),
    "tensordot grads": lambda L: _grads(lambda a, b: L.tensordot(a, b, dims=([1], [1])),
                                        X(L), Y(L)),
    "kron": lambda L: L.kron(X(L), Y(L)),
    "kron ranks": lambda L: L.kron(X(L), V(L)),
    "kron ints": lambda L: L.kron(L.tensor([1, 2]), L.tensor([[1], [2]])),
    "kron grads": lambda L: _grads(L.kron, X(L), Y(L)),
    # cdist
    "cdist": lambda L: L.cdist(X(L), Y(L)),
    "cdist p1": lambda L: L.cdist(X(L), Y(L), p=1),
    "cdist p0": lambda L: L.cdist(X(L), Y(L), p=0),
    "cdist inf": lambda L: L.cdist(X(L), Y(L), p=float("inf")),
    "cdist batched": lambda L: L.cdist(B(L), B(L)),
    "cdist grads": lambda L: _grads(L.cdist, X(L), Y(L)),
    "cdist negative p": lambda L: L.cdist(X(L), Y(L), p=-1),
    "cdist columns": lambda L: L.cdist(X(L), Y(L)[:, :2]),
    "cdist ints": lambda L: L.cdist(L.ones(2, 2, dtype=L.int64), L.ones(2, 2, dtype=L.int64)),
    # histc, bincount
    "histc": lambda L: L.histc(V(L), bins=4),
    "histc range": lambda L: L.histc(V(L), bins=4, min=0, max=2),
    "histc float64": lambda L: L.histc(V(L).double(), bins=3),
    "histc no bins": lambda L: L.histc(V(L), bins=0),
    "histc max below min": lambda L: L.histc(V(L), bins=4, min=3, max=1),
    "bincount": lambda L: L.bincount(IV(L)),
    "bincount minlength": lambda L: L.bincount(IV(L), minlength=7),
    "bincount weights": lambda L: L.bincount(IV(L), weights=L.tensor([0.5, 1, 2, 1, 3.0])),
    "bincount float64 weights": lambda L: L.bincount(
        IV(L), weights=L.tensor([0.5, 1, 2, 1, 3.0], dtype=L.float64)),
    "bincount negative": lambda L: L.bincount(L.tensor([-1, 2])),
    "bincount 2-d": lambda L: L.bincount(IV(L).reshape(5, 1)),
    "bincount empty": lambda L: L.bincount(L.tensor([], dtype=L.long)),
    "bincount minlength -1": lambda L: L.bincount(IV(L), minlength=-1),
    "bincount minlength -1 2-d": lambda L: L.bincount(L.tensor([[1]]), minlength=-1),
    "bincount minlength -1 weights": lambda L: L.bincount(L.tensor([1]), L.ones(2),
                                                          minlength=-1),
    # bucketize, searchsorted
    "bucketize": lambda L: L.bucketize(V(L), L.tensor([0.0, 1.0, 2.5])),
    "bucketize right": lambda L: L.bucketize(V(L), L.tensor([0.0, 1.0, 2.5]), right=True),
    "bucketize int32": lambda L: L.bucketize(V(L), L.tensor([0.0, 1.0, 2.5]), out_int32=True),
    "bucketize scalar right": lambda L: L.bucketize(2.5, L.tensor([0.0, 1.0, 2.5]),
                                                    right=True),
    "searchsorted": lambda L: L.searchsorted(L.tensor([0.0, 1.0, 2.5]), V(L)),
    "searchsorted right": lambda L: L.searchsorted(L.tensor([0.0, 1.0, 2.5]), V(L),
                                                   right=True),
    "searchsorted side": lambda L: L.searchsorted(L.tensor([0.0, 1.0, 2.5]), V(L),
                                                  side="right"),
    "searchsorted side conflict": lambda L: L.searchsorted(L.tensor([0.0, 1.0, 2.5]), V(L),
                                                           side="left", right=True),
    "searchsorted rows": lambda L: L.searchsorted(L.tensor([[0.0, 1, 2.5], [1, 2, 3]]),
                                                  L.tensor([[0.5, 2.5], [2.0, 3.0]])),
    "searchsorted sorter": lambda L: L.searchsorted(L.tensor([2.5, 0.0, 1.0]), V(L),
                                                    sorter=L.tensor([1, 2, 0])),
    "searchsorted bad side": lambda L: L.searchsorted(L.tensor([0.0, 1.0]), V(L), side="mid"),
    # unique
    "unique": lambda L: L.unique(IV(L)),
    "unique inverse": lambda L: L.unique(IV(L), return_inverse=True),
    "unique counts": lambda L: L.unique(IV(L), return_counts=True),
    "unique both": lambda L: L.unique(IV(L), return_inverse=True, return_counts=True),
    "unique dim 0": lambda L: L.unique(L.tensor([[1, 2], [1, 2], [0, 1]]), dim=0,
                                       return_inverse=True, return_counts=True),
    "unique dim 1 strides": lambda L: L.unique(L.tensor([[1, 2], [1, 2], [0, 1]]), dim=1,
                                               return_counts=True),
    "unique 3-d dim 1": lambda L: L.unique(L.tensor([[[1, 2], [1, 2], [0, 1]]] * 2), dim=1,
                                           return_inverse=True),
    "unique 3-d dim 2": lambda L: L.unique(L.tensor([[[1, 2], [1, 2], [0, 1]]] * 2), dim=2),
    "unique_consecutive dim 1": lambda L: L.unique_consecutive(
        L.tensor([[[1, 2], [1, 2], [0, 1]]] * 2), dim=1),
    "unique bad dim": lambda L: L.unique(L.tensor([[1, 2], [1, 2]]), dim=2),
    "unique method": lambda L: IV(L).unique(return_counts=True),
    "unique nan": lambda L: L.unique(L.tensor([2.0, float("nan"), 1.0, float("nan")])),
    "unique_consecutive": lambda L: L.unique_consecutive(
        L.tensor([1, 1, 2, 2, 3, 1]), return_inverse=True, return_counts=True),
    # diff
    "diff prepend": lambda L: L.diff(V(L), prepend=L.tensor([0.0])),
    "diff append": lambda L: L.diff(V(L), append=L.tensor([1.0, 2.0])),
    "diff n=2 both": lambda L: L.diff(V(L), n=2, prepend=L.tensor([0.0]),
                                      append=L.tensor([9.0])),
    "diff dim 0 prepend": lambda L: L.diff(X(L), dim=0, prepend=Y(L)),
    "diff grads": lambda L: _grads(lambda a, b: L.diff(a, dim=1, prepend=b), X(L), Y(L)),
    "diff n=0": lambda L: L.diff(V(L), n=0),
    "diff n=-1": lambda L: L.diff(V(L), n=-1),
    "diff n=-1 bad dim": lambda L: L.diff(L.ones(3), n=-1, dim=5),
    "diff 0-d": lambda L: L.diff(L.tensor(1.0)),
    "diff bool": lambda L: L.diff(L.tensor([True, False, True])),
    "diff prepend sizes": lambda L: L.diff(L.ones(2, 3), dim=1, prepend=L.zeros(3, 1)),
    "diff append sizes": lambda L: L.diff(L.ones(2, 3), dim=1, append=L.zeros(3, 1)),
    "diff prepend rank": lambda L: L.diff(L.ones(2, 3), dim=1, prepend=L.zeros(3)),
    "diff prepend 0-d": lambda L: L.diff(L.ones(3), prepend=L.tensor(2.0)),
    "diff dim 0 sizes": lambda L: L.diff(L.ones(2, 3), dim=0, prepend=L.zeros(1, 2)),
    "diff bad dim prepend": lambda L: L.diff(L.ones(2, 3), dim=7, prepend=L.zeros(2, 1)),
    "diff prepend long": lambda L: L.diff(L.ones(2, 3), dim=1,
                                          prepend=L.zeros(2, 1, dtype=L.long)),
    # cumulative ops
    "cumsum int": lambda L: L.cumsum(IV(L), 0),
    "cumsum int dtype": lambda L: L.cumsum(IV(L), 0, dtype=L.float32),
    "cumsum float64": lambda L: L.cumsum(V(L), 0, dtype=L.float64),
    "cumsum bool": lambda L: L.cumsum(L.tensor([True, True]), 0),
    "cumsum int32": lambda L: L.cumsum(V(L), 0, dtype=L.int32),
    "cumprod dtype": lambda L: L.cumprod(IV(L), 0, dtype=L.float64),
    "cumprod int64": lambda L: L.cumprod(V(L), 0, dtype=L.int64),
    "cumsum grads": lambda L: _grads(lambda a: L.cumsum(a, 1, dtype=L.float64), X(L)),
    "cumprod grads": lambda L: _grads(lambda a: L.cumprod(a, 1), X(L)),
    "cumprod dtype grads": lambda L: _grads(lambda a: L.cumprod(a, 0, dtype=L.float64), Y(L)),
    "logcumsumexp": lambda L: L.logcumsumexp(V(L), 0),
    "logcumsumexp grads": lambda L: _grads(lambda a: L.logcumsumexp(a, 1), X(L)),
    "logcumsumexp inf": lambda L: L.logcumsumexp(L.tensor([-float("inf"), 0, float("inf")]), 0),
    # nan_to_num, lerp, addcmul, addcdiv, baddbmm
    "nan_to_num": lambda L: L.nan_to_num(L.tensor([float("nan"), float("inf"), -float("inf")])),
    "nan_to_num values": lambda L: L.nan_to_num(
        L.tensor([float("nan"), float("inf"), -float("inf"), 1.0]), nan=2.0, posinf=3.0,
        neginf=-4.0),
    "nan_to_num half": lambda L: L.nan_to_num(L.tensor([float("nan"), float("inf")]).half()),
    "nan_to_num int": lambda L: L.nan_to_num(IV(L)),
    "nan_to_num grads": lambda L: _grads(lambda a: L.nan_to_num(a * float("inf")), X(L)),
    "lerp tensor weight": lambda L: L.lerp(V(L), V(L) * 2, L.tensor([0.0, 0.5, 1.0, 2.0])),
    "lerp broadcast weight": lambda L: L.lerp(X(L), Y(L), L.tensor([0.25, 0.5, 0.75])),
    "lerp grads": lambda L: _grads(
        lambda a, b, w: L.lerp(a, b, w), X(L), Y(L),
        L.tensor([0.25, 0.5, 0.75], requires_grad=True)),
    "lerp float64 weight": lambda L: L.lerp(X(L), Y(L), L.tensor(0.5, dtype=L.float64)),
    "lerp dtypes": lambda L: L.lerp(X(L), Y(L).double(), 0.5),
    "lerp ints": lambda L: L.lerp(IV(L), IV(L), 0.5),
    "addcmul": lambda L: L.addcmul(X(L), X(L), Y(L), value=2),
    "addcmul grads": lambda L: _grads(lambda a, b: L.addcmul(a, a, b, value=2), X(L), Y(L)),
    "addcmul int value float": lambda L: L.addcmul(IV(L), IV(L), IV(L), value=0.5),
    "addcdiv": lambda L: L.addcdiv(X(L), X(L), Y(L), value=0.5),
    "addcdiv grads": lambda L: _grads(lambda a, b: L.addcdiv(a, a, b, value=0.5), X(L), Y(L)),
    "addcdiv ints": lambda L: L.addcdiv(IV(L), IV(L), IV(L)),
    "baddbmm": lambda L: L.baddbmm(B(L), B(L), B(L), beta=0.5, alpha=2),
    "baddbmm beta 0 nan": lambda L: L.baddbmm(L.full((2, 2, 2), float("nan")), B(L), B(L),
                                              beta=0),
    "baddbmm grads": lambda L: _grads(lambda a: L.baddbmm(a, a, a, beta=0.5, alpha=2), B(L)),
    "baddbmm broadcast": lambda L: L.baddbmm(B(L)[0], B(L), B(L)),
    "baddbmm mismatch": lambda L: L.baddbmm(B(L), B(L), B(L)[:, :1]),
    "addbmm": lambda L: L.addbmm(X(L)[:, :2], B(L), B(L), beta=0.5),
    # index_fill, masked_scatter, take_along_dim
    "index_fill": lambda L: L.index_fill(X(L).detach(), 1, L.tensor([0, 2]), -1.0),
    "index_fill tensor value": lambda L: L.index_fill(X(L).detach(), 0, L.tensor([1]),
                                                      L.tensor(7.0)),
    "index_fill grads": lambda L: _grads(lambda a: L.index_fill(a, 1, L.tensor([0, 2]), -1.0),
                                         X(L)),
    "index_fill float index": lambda L: L.index_fill(X(L).detach(), 1, L.tensor([0.0]), 1.0),
    "index_fill out of range": lambda L: L.index_fill(X(L).detach(), 1, L.tensor([5]), 1.0),
    "index_fill int float value": lambda L: L.index_fill(IV(L), 0, L.tensor([0]), 2.5),
    "index_fill 1-d value": lambda L: L.index_fill(X(L).detach(), 1, L.tensor([0]),
                                                   L.tensor([1.0])),
    "masked_scatter": lambda L: L.masked_scatter(X(L).detach(), X(L).detach() > 0,
                                                 L.arange(6.0).reshape(2, 3)),
    "masked_scatter grads": lambda L: _grads(
        lambda a, b: L.masked_scatter(a, a.detach() > 0, b), X(L), Y(L)),
    "masked_scatter short source": lambda L: L.masked_scatter(
        V(L), L.tensor([True, False, True, False]), L.tensor([9.0])),
    "masked_scatter int mask": lambda L: L.masked_scatter(
        V(L), L.tensor([1, 0, 1, 0]), L.tensor([9.0, 8.0])),
    "masked_scatter dtype": lambda L: L.masked_scatter(
        V(L), L.tensor([True, False, True, False]), L.tensor([9.0, 8.0]).double()),
    "take_along_dim": lambda L: L.take_along_dim(X(L), L.tensor([[0, 2], [1, 1]]), dim=1),
    "take_along_dim flat": lambda L: L.take_along_dim(X(L), L.tensor([0, 5])),
    "take_along_dim broadcast": lambda L: L.take_along_dim(X(L), L.tensor([[0, 2]]), dim=1),
    "take_along_dim grads": lambda L: _grads(
        lambda a: L.take_along_dim(a, L.tensor([[0, 2], [1, 1]]), dim=1), X(L)),
    "take_along_dim float index": lambda L: L.take_along_dim(X(L), L.tensor([[0.0]]), dim=1),
    "take_along_dim bad dim": lambda L: L.take_along_dim(X(L), L.tensor([[0]]), dim=2),
    # roll, rot90 (values), narrow_copy, unflatten
    "roll dims": lambda L: L.roll(X(L), shifts=(1, 2), dims=(0, 1)),
    "roll same dim twice": lambda L: L.roll(X(L), shifts=(1, -1), dims=(1, 1)),
    "roll flat": lambda L: L.roll(X(L), 4),
    "roll grads": lambda L: _grads(lambda a: L.roll(a, shifts=(1, 2), dims=(0, 1)), X(L)),
    "roll mismatch": lambda L: L.roll(X(L), shifts=(1,), dims=(0, 1)),
    "roll two shifts no dims": lambda L: L.roll(X(L), shifts=(1, 2)),
    "roll no shifts": lambda L: L.roll(L.ones(2, 3), (), ()),
    "roll three shifts": lambda L: L.roll(L.ones(2, 3), (1, 2, 3), (0, 1)),
    "roll bad dim": lambda L: L.roll(X(L), 1, dims=2),
    "rot90 k=2": lambda L: L.rot90(X(L), 2),
    "rot90 same dims": lambda L: L.rot90(X(L), 1, [0, 0]),
    "rot90 one dim": lambda L: L.rot90(X(L), 1, [0]),
    "rot90 1-d": lambda L: L.rot90(V(L)),
    "rot90 values": lambda L: L.rot90(X(L), 5, [1, 0]).detach().contiguous(),
    "narrow_copy": lambda L: L.narrow_copy(X(L), 1, 1, 2),
    "narrow_copy negative start": lambda L: L.narrow_copy(X(L), 0, -1, 1),
    "narrow_copy grads": lambda L: _grads(lambda a: L.narrow_copy(a, 1, 1, 2), X(L)),
    "narrow_copy too long": lambda L: L.narrow_copy(X(L), 1, 2, 2),
    "narrow_copy dim past rank": lambda L: L.narrow_copy(X(L), 2, 0, 1),
    "narrow_copy dim far past": lambda L: L.narrow_copy(L.ones(2, 3), 5, 0, 1),
    "narrow_copy negative dim": lambda L: L.narrow_copy(L.ones(2, 3), -3, 0, 1),
    "narrow_copy 0-d": lambda L: L.narrow_copy(L.tensor(1.0), 0, 0, 1),
    "unflatten": lambda L: X(L).unflatten(1, (3, 1)),
    "unflatten infer": lambda L: X(L).unflatten(1, (-1, 1)),
    "unflatten function": lambda L: L.unflatten(X(L), 0, (2, 1)),
    "unflatten grads": lambda L: _grads(lambda a: a.unflatten(1, (3, 1)), X(L)),
    "unflatten bad sizes": lambda L: X(L).unflatten(1, (2, 2)),
    "unflatten empty": lambda L: X(L).unflatten(1, ()),
    "unflatten bad dim": lambda L: X(L).unflatten(2, (3, 1)),
    # repeat_interleave
    "repeat_interleave tensor": lambda L: L.repeat_interleave(V(L), L.tensor([1, 0, 2, 1])),
    "repeat_interleave dim 0": lambda L: L.repeat_interleave(X(L), L.tensor([2, 1]), dim=0),
    "repeat_interleave int": lambda L: L.repeat_interleave(X(L), 2, dim=1),
    "repeat_interleave counts": lambda L: L.repeat_interleave(L.tensor([2, 1, 3])),
    "repeat_interleave counts int32": lambda L: L.repeat_interleave(
        L.tensor([1, 2], dtype=L.int32)),
    "repeat_interleave int32 repeats": lambda L: L.repeat_interleave(
        X(L), L.tensor([1, 2], dtype=L.int32), dim=0),
    "repeat_interleave one count": lambda L: L.repeat_interleave(X(L), L.tensor([2]), dim=0),
    "repeat_interleave output_size": lambda L: L.repeat_interleave(
        X(L), L.tensor([2, 1]), dim=0, output_size=3),
    "repeat_interleave grads": lambda L: _grads(
        lambda a: L.repeat_interleave(a, L.tensor([2, 1]), dim=0), X(L)),
    "repeat_interleave size": lambda L: L.repeat_interleave(X(L), L.tensor([1, 2, 3]), dim=0),
    "repeat_interleave negative": lambda L: L.repeat_interleave(X(L), L.tensor([-1, 2]), 0),
    "repeat_interleave 2-d repeats": lambda L: L.repeat_interleave(
        L.ones(2, 3), L.tensor([[1, 2]]), dim=0),
    "repeat_interleave 2-d counts": lambda L: L.repeat_interleave(L.tensor([[1, 2]])),
    "repeat_interleave 0-d counts": lambda L: L.repeat_interleave(L.tensor(3)),
    "repeat_interleave bool repeats": lambda L: L.repeat_interleave(
        L.ones(2), L.tensor([True, False])),
    # meshgrid, cartesian_prod
    "meshgrid dtypes": lambda L: L.meshgrid(V(L)[:2], IV(L)[:2], indexing="ij"),
    "meshgrid float64": lambda L: L.meshgrid(V(L)[:2], V(L)[:2].double(), indexing="ij"),
    "meshgrid empty": lambda L: L.meshgrid(indexing="ij"),
    "meshgrid xy": lambda L: L.meshgrid([V(L)[:2], V(L)[:3]], indexing="xy"),
    "cartesian_prod dtypes": lambda L: L.cartesian_prod(V(L)[:2], IV(L)[:2]),
    "cartesian_prod": lambda L: L.cartesian_prod(V(L)[:2], V(L)[:3]),
    # more of the commonly used ones
    "where scalars": lambda L: L.where(X(L) > 0, 1.0, L.tensor(2, dtype=L.int64)),
    "where grads": lambda L: _grads(lambda a, b: L.where(a > 0, a, b), X(L), Y(L)),
    "clamp tensor bounds": lambda L: L.clamp(X(L), min=L.tensor([0.0, 0.5, 1.0]),
                                             max=L.tensor(1.5)),
    "trapezoid x": lambda L: L.trapezoid(X(L), L.tensor([0.0, 1.0, 3.0])),
    "cross grads": lambda L: _grads(lambda a, b: L.cross(a, b, dim=1), X(L), Y(L)),
    "cummax grads": lambda L: _grads(lambda a: L.cummax(a, 1)[0], X(L)),
    "vander": lambda L: L.vander(V(L)[:3], N=2, increasing=True),
    "scatter_reduce mean": lambda L: L.scatter_reduce(
        V(L), 0, L.tensor([0, 1, 0, 1]), L.tensor([1.0, 2, 3, 4]), "mean",
        include_self=False),
    "scatter_reduce prod grads": lambda L: _grads(
        lambda a, b: L.scatter_reduce(a, 1, L.tensor([[0, 1, 0], [1, 1, 0]]), b, "prod"),
        X(L), Y(L)),
    "index_add alpha grads": lambda L: _grads(
        lambda a, b: L.index_add(a, 1, L.tensor([0, 0, 2]), b, alpha=2), X(L), Y(L)),
    "quantile midpoint": lambda L: L.quantile(V(L), L.tensor([0.25, 0.75]),
                                              interpolation="midpoint"),
    "quantile out of range": lambda L: L.quantile(V(L), 1.5),
    "histogram density": lambda L: L.histogram(V(L), bins=L.tensor([0.0, 1.0, 4.0]),
                                               density=True),
    "isin invert": lambda L: L.isin(IV(L), L.tensor([3, 0]), invert=True),
    "sort stable descending": lambda L: L.sort(L.tensor([2, 1, 2, 0]), stable=True,
                                               descending=True),
    "pad reflect grads": lambda L: _grads(
        lambda a: L.nn.functional.pad(a, (1, 2), mode="reflect"), X(L)),
    "tensor_split tensor": lambda L: L.tensor_split(X(L), L.tensor([1]), dim=1),
    "tensor_split 2-d indices": lambda L: L.tensor_split(X(L), L.tensor([[1]]), dim=1),
    "tensor_split float indices": lambda L: L.tensor_split(X(L), L.tensor([1.0]), dim=1),
    "tensor_split int32 indices": lambda L: L.tensor_split(
        X(L), L.tensor([1], dtype=L.int32), dim=1),
    "tensor_split 2-d float indices": lambda L: L.tensor_split(X(L), L.tensor([[1.0]]), 1),
    "tensor_split 0-d count": lambda L: L.tensor_split(X(L), L.tensor(2), dim=1),
    "tensor_split 0-d input": lambda L: L.tensor_split(L.tensor(1.0), 2),
    "tensor_split 0-d input indices": lambda L: L.tensor_split(L.tensor(1.0), L.tensor([1])),
    "logit eps": lambda L: L.logit(L.tensor([0.2, 0.9]), eps=0.25),
    "frexp": lambda L: L.frexp(V(L)),
    "float_power": lambda L: L.float_power(IV(L), 2),
    "remainder negative": lambda L: L.remainder(-IV(L), 2.5),
}


@pytest.mark.parametrize("case", sorted(SWEEP))
def test_sweep(case):
    """torch's values, dtypes, shapes, strides, grad_fn names, gradients and errors."""
    _same(SWEEP[case])
