"""Eager fidelity against torch 2.13: the CUDA typed classes of a CPU build
(`torch.cuda.FloatTensor`: `isinstance`, construction errors, `Tensor.type` and
`set_default_tensor_type` with them), `Tensor.type`'s parameters, `rot90`'s strides (an odd
number of quarter turns is a transposed layout), PyTorch's parser's messages for ints given
as floats (`x.tril(1.5)`, `F.glu(dim=1.5)`, pooling sizes, `split(x, 1.5)`), values no
longer truncated (`unsafe_split(x, 1.5)`, `matrix_power(x, 1.5)`, `max_pool2d(x, (2, 1.5))`),
`meshgrid` of a 2-D tensor, a float `ignore_index` (once a search through every int64),
and the shared `"<kernel>" not implemented for '<Dtype>'` text
of special and fft."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle import outcome

import fusegrad

LIBS = (torch, fusegrad)


def _outcome(lib, f):
    """What `f(lib)` gives, in comparable form: a tensor's dtype, shape, strides, grad_fn name
    and values (as float64); a tuple's items; another value's repr with the library's name
    replaced; or the error's type and message."""
    return outcome(lambda: f(lib), _described)


def _described(r):
    if isinstance(r, (tuple, list)):
        return tuple(_described(x) for x in r)
    if isinstance(r, (torch.Tensor, fusegrad.Tensor)):
        fn = r.grad_fn
        wide = torch.float64 if isinstance(r, torch.Tensor) else fusegrad.float64
        return ("tensor", str(r.dtype).replace("fusegrad", "torch"), tuple(r.shape),
                tuple(r.stride()), None if fn is None else type(fn).__name__,
                np.asarray(r.detach().to(wide).numpy()))
    return ("value", repr(r).replace("fusegrad", "torch"))


def _equal(a, b) -> bool:
    if isinstance(a, tuple) and a and a[0] == "tensor":
        return isinstance(b, tuple) and b[:5] == a[:5] and a[5].shape == b[5].shape and \
            np.allclose(a[5], b[5], rtol=1e-6, atol=1e-6, equal_nan=True)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and a and \
            a[0] not in ("error", "value"):
        return all(_equal(x, y) for x, y in zip(a, b))
    return a == b


def _same(f) -> None:
    got = [_outcome(lib, f) for lib in LIBS]
    assert _equal(got[0], got[1]), got


def _cases(text: str) -> list:
    return [line.strip() for line in text.strip().splitlines()]


# ---------------------------------------------------------------- CUDA typed classes

CUDA_TYPES = _cases("""
L.cuda.FloatTensor
L.cuda.FloatTensor.__module__
L.cuda.FloatTensor.__name__
L.cuda.FloatTensor.is_cuda
L.cuda.FloatTensor.is_sparse
L.cuda.FloatTensor.layout
L.FloatTensor.layout
L.FloatTensor.is_cuda
[L.cuda.DoubleTensor.dtype, L.cuda.HalfTensor.dtype, L.cuda.BFloat16Tensor.dtype]
[L.cuda.LongTensor.dtype, L.cuda.IntTensor.dtype, L.cuda.ShortTensor.dtype]
[L.cuda.CharTensor.dtype, L.cuda.ByteTensor.dtype, L.cuda.BoolTensor.dtype]
sorted(n for n in dir(L.cuda) if n.endswith("Tensor"))
isinstance(L.ones(2), L.cuda.FloatTensor)
isinstance(L.ones(2), L.FloatTensor)
L.cuda.FloatTensor == L.FloatTensor
issubclass(L.cuda.FloatTensor, L.Tensor)
L.cuda.FloatTensor(2)
L.cuda.FloatTensor()
L.cuda.FloatTensor([1, 2])
L.cuda.LongTensor(2, 3)
L.cuda.BoolTensor(device="cuda")
L.cuda.FloatTensor(L.ones(2))
L.cuda.FloatTensor(2, foo=1)
L.ones(2).type("torch.cuda.FloatTensor")
L.ones(2).type(L.cuda.FloatTensor)
L.ones(2).type("torch.cuda.Foo")
L.ones(2).type("torch.cuda.sparse.FloatTensor")
L.ones(2).type(dtype="torch.cuda.FloatTensor", non_blocking=True)
L.set_default_tensor_type(L.cuda.FloatTensor)
L.set_default_tensor_type(L.cuda.LongTensor)
L.set_default_tensor_type("torch.cuda.FloatTensor")
""")


@pytest.mark.parametrize("case", CUDA_TYPES)
def test_cuda_typed_classes_as_a_cpu_build_has_them(case):
    _same(eval("lambda L: " + case))


TYPE_CALLS = _cases("""
L.ones(2).type()
L.ones(2).type("torch.DoubleTensor")
L.ones(2).type("torch.DoubleTensor", True)
L.ones(2).type(L.IntTensor, non_blocking=True)
L.ones(2).type(L.float64, False, memory_format=L.contiguous_format)
L.ones(2).long().type(L.Tensor)
L.ones(2).type("torch.ComplexFloatTensor").dtype
L.ones(2).type("torch.sparse.FloatTensor")
L.ones(2).type("torch.FooTensor")
L.ones(2).type("torch.cuda")
L.ones(2).type("cuda.FloatTensor")
L.ones(2).type(3)
L.ones(2).type([1])
L.ones(2).type(L.strided)
L.ones(2).type(float)
L.ones(2).type(object)
L.ones(2).type(L.Size)
L.ones(2).type(L.float64, non_blocking=1)
L.ones(2).type(L.float64, 1)
L.ones(2).type(L.float64, True, 3)
L.ones(2).type(L.float64, False, non_blocking=False)
L.ones(2).type(L.float64, dtype=L.float16)
L.ones(2).type(L.float64, async_=True)
L.set_default_tensor_type("torch.LongTensor")
L.set_default_tensor_type(L.float64)
L.set_default_tensor_type(3)
(L.set_default_tensor_type("torch.DoubleTensor"), L.get_default_dtype(), \
L.set_default_tensor_type(L.FloatTensor), L.get_default_dtype())
""")


@pytest.mark.parametrize("case", TYPE_CALLS)
def test_tensor_type_arguments(case):
    _same(eval("lambda L: " + case))


def test_cuda_typed_class_repr_names_its_module():
    assert repr(fusegrad.cuda.FloatTensor) == "<class 'fusegrad.cuda.FloatTensor'>"
    assert repr(torch.cuda.FloatTensor) == "<class 'torch.cuda.FloatTensor'>"


# ---------------------------------------------------------------- rot90's layout

ROT90 = _cases("""
[L.rot90(L.arange(24.).reshape(2, 3, 4), k, d) for k in range(-3, 6) \
for d in [(0, 1), (1, 2), (2, 0), (-1, 0)]]
[L.rot90(L.arange(24.).reshape(2, 3, 4).transpose(0, 2), k, (0, 2)) for k in range(4)]
[L.rot90(L.arange(24.).reshape(2, 3, 4)[:, ::2], k, (0, 2)) for k in range(4)]
[L.rot90(L.arange(24.).reshape(2, 3, 4).permute(1, 2, 0), k, (0, 2)) for k in range(4)]
[L.rot90(L.arange(24.).reshape(2, 3, 4)[:, :, ::2].transpose(0, 1), k, (0, 2)) \
for k in range(4)]
[L.rot90(L.arange(6.).reshape(2, 3).requires_grad_(), k) for k in range(4)]
[L.autograd.grad((L.rot90(x, k) * L.rot90(x, k).detach().exp()).sum(), x) for k in range(4) \
for x in [L.arange(6.).reshape(2, 3).requires_grad_()]]
L.rot90(L.zeros(1, 3), 1)
L.rot90(L.ones(2, 2, dtype=L.bool), 3)
L.ones(2, 3).rot90(1, [1, 0])
""")


@pytest.mark.parametrize("case", ROT90)
def test_rot90_values_strides_and_gradients(case):
    _same(eval("lambda L: " + case))


def test_rot90_never_aliases_its_input():
    x = fusegrad.arange(6.).reshape(2, 3)
    r = fusegrad.rot90(x, 0)
    r.add_(1)
    assert fusegrad.equal(x, fusegrad.arange(6.).reshape(2, 3))


def test_rot90_fake_strides_are_eager_strides():
    from fusegrad._fake import FakeTensorMode

    x = fusegrad.arange(24.).reshape(2, 3, 4)
    for src in (x, x.transpose(0, 2), x[:, ::2]):
        for k in range(4):
            expected = fusegrad.rot90(src, k, (0, 2))
            with FakeTensorMode() as mode:
                fake = fusegrad.rot90(mode.from_tensor(src), k, (0, 2))
            assert fake.stride() == expected.stride(), (k, src.stride())


def test_rot90_compiled_matches_eager_layout():
    x = fusegrad.arange(24.).reshape(2, 3, 4).transpose(0, 2)
    for k in (1, 2):
        compiled = fusegrad.compile(lambda t, k=k: fusegrad.rot90(t, k, (0, 2)))
        got, expected = compiled(x), fusegrad.rot90(x, k, (0, 2))
        assert fusegrad.equal(got, expected) and got.stride() == expected.stride()


def test_rot90_of_an_empty_tensor_keeps_the_transposed_strides():
    _same(lambda L: L.rot90(L.zeros(0, 3), 1))


# ---------------------------------------------------------------- ints given as floats

INT_ARGUMENTS = _cases("""
L.ones(3, 3).tril(1.5)
L.ones(3, 3).triu(1.5)
L.ones(3, 3).tril_(1.5)
L.ones(3, 3).triu_(1.5)
L.ones(3, 3).tril("a")
L.ones(3, 3).tril(True)
L.ones(3, 3).tril(None)
L.ones(3, 3).tril(L.tensor(1.0))
L.ones(3, 3).tril(L.tensor(1))
L.ones(3, 3).triu_(-1)
L.tril(L.ones(3, 3), 1.5)
L.tril(L.ones(3, 3), diagonal=1.5)
L.triu(L.ones(3, 3), True)
L.tril(L.ones(3, 3), None)
L.ones(3, 3).fill_diagonal_(2, 1.5)
L.ones(3, 3).fill_diagonal_(2, True)
L.nn.functional.glu(L.ones(4, 4), 1.5)
L.nn.functional.glu(L.ones(4, 4), dim=1.5)
L.nn.functional.glu(L.ones(4, 4), True)
L.nn.functional.glu(L.ones(4, 4), None)
L.nn.functional.glu(L.ones(4, 4), dim=-1)
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 1.5)
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), kernel_size=1.5)
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 2, 1.5)
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 2, 1, 0.5)
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 2, 1, 0, 1.5)
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 1.5, return_indices=True)
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), (2, 1.5))
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), (2.0, 2))
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), [2, True])
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), True)
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), "a")
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), None)
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), L.tensor(2))
L.nn.functional.max_pool1d(L.ones(1, 1, 4), 1.5)
L.nn.functional.max_pool1d(L.ones(1, 1, 4), (1.5,))
L.nn.functional.max_pool1d(L.ones(1, 1, 4), 1.5, return_indices=True)
L.nn.functional.max_pool3d(L.ones(1, 1, 4, 4, 4), 1.5)
L.nn.functional.avg_pool1d(L.ones(1, 1, 4), 1.5)
L.nn.functional.avg_pool1d(L.ones(1, 1, 4), 2, 1.5)
L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4), 1.5)
L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4), 2, (1, 1.5))
L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4), 2, 1, 0.5)
L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4), [2], [1], [0])
L.nn.functional.avg_pool3d(L.ones(1, 1, 4, 4, 4), 1.5)
L.split(L.ones(4), 1.5)
L.split(L.ones(4), [1.5, 2.5])
L.split(L.ones(4), [1, 3])
L.ones(4).split(1.5)
L.ones(4).split([2, 1.5])
L.split_with_sizes_copy(L.ones(3, 3), [1.5, 1.5])
L.split_with_sizes_copy(L.ones(3, 3), [1, 2])
L.matrix_power(L.ones(3, 3), 1.5)
L.ones(3, 3).matrix_power(2)
L.ones(3, 3).sum_to_size(1, 3)
L.ones(3, 3).unsafe_split(2)
L.ones(3, 3).size(1.5)
L.ones(3, 3).size(True)
L.ones(3, 3).size(L.tensor(1))
L.ones(3, 3).size(-1)
L.ones(3, 3).stride(1.5)
L.ones(3, 3).stride(-1)
L.ones(3, 3).transpose_(0, 1.5)
L.ones(3, 3).transpose_(1.5, 0)
L.ones(3, 3).unfold(0, 1.5, 1)
L.ones(3, 3).unfold(1.5, 1, 1)
L.ones(3, 3).unfold(0, 2, 1)
L.ones(3, 3).unsqueeze_(1.5)
L.ones(3, 3).unsqueeze_(-1)
L.ones(3, 3).cumsum_(1.5)
L.ones(3, 3).cumsum_(1)
L.ones(3, 3).diag(1.5)
L.diag(L.ones(3, 3), 1.5)
L.ones(3).diag(1)
L.ones(3, 3).narrow_copy(0, 0, 1.5)
L.narrow_copy(L.ones(3, 3), 0, 0.5, 1)
L.ones(3, 3).narrow_copy(0, L.tensor(1), 1)
L.ones(3, 3).histc(1.5)
L.histc(L.ones(3, 3), 1.5)
L.ones(3, 3).histc(3)
L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0, 1]), ignore_index=1.5)
L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0, 1]), ignore_index=True)
L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0, 1]), ignore_index=None)
L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0., 1.]), ignore_index=1.5)
L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0, 1]), ignore_index=1.5, label_smoothing=2.0)
L.nn.functional.cross_entropy(L.ones(2, 3), L.tensor([0, 1]), ignore_index=1)
L.nn.functional.nll_loss(L.ones(2, 3), L.tensor([0, 1]), ignore_index=1.5)
L.nn.functional.nll_loss(L.ones(2, 3, 2), L.zeros(2, 2, dtype=L.long), ignore_index=1.5)
L.nn.functional.nll_loss(L.ones(2, 3), L.tensor([0, 1]), ignore_index=L.tensor(1))
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), 2, ceil_mode=1)
L.nn.functional.max_pool3d(L.ones(1, 1, 4, 4, 4), 2, ceil_mode=0)
L.nn.functional.max_pool2d(L.ones(1, 1, 5, 5), 2, ceil_mode=True, return_indices=True)
L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4), 2, divisor_override=1.5)
L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4), 2, divisor_override=True)
L.nn.functional.avg_pool2d(L.ones(1, 1, 4, 4), 2, divisor_override=3)
L.nn.functional.avg_pool3d(L.ones(1, 1, 4, 4, 4), 2, divisor_override=2.5)
L.nn.functional.conv1d(L.ones(1, 1, 3), L.ones(1, 1, 2), dilation=(1,))
L.nn.functional.conv2d(L.ones(1, 1, 3, 3), L.ones(1, 1, 2, 2), stride=L.tensor(1))
L.nn.functional.max_pool2d(L.ones(1, 1, 4, 4), L.tensor(2.))
L.nn.functional.glu(L.ones(4, 4), L.tensor(1.))
L.ones(3, 3).unfold(0, L.tensor(2), 1)
L.ones(3, 3).histc(L.tensor(2))
L.ones(3, 3).repeat_interleave(2, 1)
L.ones(3, 3).repeat_interleave(L.tensor(2))
L.ones(3, 3).resize_(1.5)
L.ones(3, 3).resize_(2, 1.5)
L.ones(3, 3).resize_((1.5,))
L.ones(3, 3).resize_(size=(2, 1.5))
L.ones(3, 3).resize_([2, 2])
L.ones(3, 3).resize_(L.Size([2, 2]))
L.ones(3, 3).resize_(L.tensor(2), 2)
L.ones(3, 3).resize_(4)
L.ones(3, 3).resize_(())
L.ones(3, 3).resize_()
""")


@pytest.mark.parametrize("case", INT_ARGUMENTS)
def test_int_arguments_as_pytorchs_parser_reads_them(case):
    _same(eval("lambda L: " + case))


# Values once truncated to ints (a wrong answer): now refused, if in Python's words where
# the method runs without the protocol's wrapper, which words PyTorch's message.
TRUNCATED_BEFORE = _cases("""
L.unsafe_split(L.ones(3, 3), 1.5)
L.unsafe_chunk(L.ones(3, 3), 1.5)
L.ones(3, 3).unsafe_split(1.5)
L.ones(3, 3).unsafe_chunk(1.5)
L.ones(3, 3).matrix_power(1.5)
L.ones(3, 3).sum_to_size(1.5)
L.ones(3, 3).split_with_sizes([1.5, 1.5])
L.split_with_sizes(L.ones(3, 3), [1.5, 1.5])
L.unsafe_split_with_sizes(L.ones(3, 3), [1.5, 1.5])
L.ones(3, 3).repeat_interleave(1.5)
L.repeat_interleave(L.ones(3, 3), 2.5, 0)
L.nn.functional.conv1d(L.ones(1, 1, 3), L.ones(1, 1, 2), dilation=(1.5,))
L.nn.functional.conv2d(L.ones(1, 1, 3, 3), L.ones(1, 1, 2, 2), padding=(0, 0.5))
""")


@pytest.mark.parametrize("case", TRUNCATED_BEFORE)
def test_floats_for_ints_are_refused_not_truncated(case):
    f = eval("lambda L: " + case)
    for lib in LIBS:
        with pytest.raises(TypeError):
            f(lib)


def test_tril_method_keyword_diagonal_message():
    _same(lambda L: L.ones(3, 3).tril(diagonal=1.5))


def test_unsafe_split_float_message():
    _same(lambda L: L.unsafe_split(L.ones(3, 3), 1.5))


def test_prod_all_keyword_message():
    _same(lambda L: L.prod(input=L.ones(2), dim=1.5))


# ---------------------------------------------------------------- meshgrid

MESHGRID = _cases("""
L.meshgrid(L.ones(2, 2), indexing="ij")
L.meshgrid(L.ones(2), L.ones(2, 2), indexing="ij")
L.meshgrid(L.tensor([[1.5, -2], [3, 4]]), indexing="ij")
L.meshgrid(L.tensor([[10, 2], [3, 4]]), indexing="ij")
L.meshgrid(L.ones(1, 2, 2), indexing="ij")
L.meshgrid(L.ones(2, 2, 2), indexing="ij")
L.meshgrid(L.zeros(2, 0), indexing="ij")
L.meshgrid(L.ones(()), indexing="ij")
L.meshgrid(L.ones(2), L.ones(3), indexing="xy")
""")


@pytest.mark.parametrize("case", MESHGRID)
def test_meshgrid_takes_0d_and_1d_tensors_only(case):
    _same(eval("lambda L: " + case))


# ---------------------------------------------------------------- kernels without a dtype

NOT_IMPLEMENTED = _cases("""
L.special.i1e(L.ones(2, dtype=L.float16))
L.special.i1e(L.ones(2, dtype=L.complex64))
L.special.bessel_j0(L.ones(2, dtype=L.float16))
L.special.airy_ai(L.ones(2, dtype=L.bfloat16))
L.special.chebyshev_polynomial_t(L.ones(2, dtype=L.float16), 2)
L.special.hermite_polynomial_h(L.ones(2, dtype=L.bfloat16), L.ones(2, dtype=L.bfloat16))
L.fft.fftfreq(4, dtype=L.complex64)
L.fft.rfftfreq(4, dtype=L.complex128)
L.round(L.ones(2, dtype=L.complex64))
L.amax(L.ones(2, dtype=L.complex64))
L.erf(L.ones(2, dtype=L.complex128))
L.ones(2, dtype=L.complex64).median()
L.ones(2, dtype=L.complex64).floor()
L.nn.functional.gelu(L.ones(2, dtype=L.complex64))
""")


@pytest.mark.parametrize("case", NOT_IMPLEMENTED)
def test_kernel_without_a_dtype_message(case):
    _same(eval("lambda L: " + case))
