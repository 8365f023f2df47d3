"""Result layouts against PyTorch: strides of op results on permuted inputs, memory formats.

A result's strides are visible to programs (`stride()`, `is_contiguous()`, and whether `view`
works), so eager results take PyTorch's layout: elementwise ops follow their operands' memory
order, most other kernels make contiguous results (softmax, cumsum, masked_fill, cat of
transposed tensors, conv_transpose with output_padding), `*_like` factories and `clone` keep
the input's order, and `channels_last` lays channels innermost. Compiled code gives its
outputs eager's layouts from the registry's `result_order` facts, checked here too.
"""

from __future__ import annotations

import os
import sys
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad import _dispatch  # noqa: E402
from fusegrad._fake import FakeTensor  # noqa: E402
from fusegrad.compiler.codegen.layout import with_eager_layout  # noqa: E402
from fusegrad.ops import REGISTRY  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from test_ops_registry import _call_torch, _to_torch  # noqa: E402

# Ops whose eager layout on a permuted input still differs from PyTorch's, each with the
# reason. All but the first group are results PyTorch leaves non-contiguous (following the
# input, or LAPACK's column-major order) where fusegrad's are contiguous: code that works
# with PyTorch's layout also works with these.
LAYOUT_DIFFERS = {
    # Broadcasting binary ops on their one-float-dtype fast path (the NumPy ufunc, which
    # dispatch's recorders call themselves): PyTorch's iterator orders dims of operands that
    # disagree differently from NumPy's order "K" (both results non-contiguous).
    "add.Tensor", "atan2", "copysign.Tensor", "div.Tensor", "eq.Tensor", "fmax", "fmin",
    "ge.Tensor", "gt.Tensor", "hypot", "le.Tensor", "logaddexp", "logaddexp2", "lt.Tensor",
    "maximum", "minimum", "mul.Tensor", "ne.Tensor", "pow.Tensor_Tensor", "sub.Tensor",
    # `2 ** x`: PyTorch's result is contiguous; the ufunc fast path keeps the operand order.
    "pow.Scalar",
    # PyTorch follows the input's layout; fusegrad's kernels make contiguous results.
    "addr", "argsort", "complex", "igamma", "igammac", "polar",
    "polygamma", "special_zeta", "special_zeta.other_scalar",
    "special_zeta.self_scalar", "angle", "rot90", "sort", "kron",
    # An index tensor laid out transposed: PyTorch's result follows the index's order.
    "index.Tensor",
    # LAPACK results: column-major in PyTorch.
    "cholesky", "cholesky_inverse", "cholesky_solve", "linalg_lu_solve",
    "linalg_solve_triangular", "_fft_c2c", "_fft_r2c", "_fft_c2r",
}

# Ops whose eager result layout on permuted inputs compiled code does not predict: a result
# whose shape differs from its operands' (glu halves a dim, an FFT of a transposed input)
# where eager keeps the operands' order of dims; `addcmul`/`addcdiv` whose eager kernel makes a
# broadcast result contiguous; `polygamma`, whose order operand is a number; the binary
# kernels off the ufunc fast path whose eager result follows PyTorch's iterator over
# operands of conflicting orders (`ops/_util.iterator_ordered`), where compiled code predicts
# NumPy's order "K" (`compiler/codegen/layout.py` knows `binary_kernel`'s only).
PREDICTION_DIFFERS = {"_fft_c2c", "_fft_c2r", "_fft_r2c", "addcdiv", "addcmul", "glu",
                      "polygamma", "div.Tensor_mode", "floor_divide", "fmod.Tensor",
                      "heaviside", "nextafter", "remainder.Tensor"}


def _fortran(x):
    """`x` as a fusegrad and a torch tensor laid out with its dims reversed in memory."""
    if isinstance(x, np.ndarray):
        if x.ndim >= 2:
            rev = np.ascontiguousarray(x.T)
            dims = tuple(range(x.ndim - 1, -1, -1))
            return fusegrad.from_numpy(rev).permute(*dims), torch.from_numpy(rev).permute(*dims)
        return fusegrad.from_numpy(x.copy()), torch.from_numpy(x.copy())
    if isinstance(x, list):
        pairs = [_fortran(v) for v in x]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return x, _to_torch(x, False)


def _fake(a):
    if isinstance(a, fusegrad.Tensor):
        return FakeTensor.from_tensor(a)
    if isinstance(a, list):
        return [_fake(v) for v in a]
    return a


def _same_layout(shape, a, b) -> bool:
    return all(n <= 1 or s == t for n, s, t in zip(shape, a, b))


def _cases(known: set):
    """Each op's float32 samples with a tensor of two or more dims and no keywords (the ops
    in `known`, whose differences are listed above, left out)."""
    rng = np.random.default_rng(0)
    out = []
    for name, op in sorted(REGISTRY.items()):
        if op.samples is None or op.view or op.inplace or op.metadata_only or op.random or \
                name in known:
            continue
        samples = [s for s in op.samples(rng, np.float32) if not s.kwargs and any(
            isinstance(a, np.ndarray) and a.ndim >= 2 for a in s.args)]
        if samples:
            out.append(pytest.param(name, samples, id=name))
    return out


def _results(name, samples):
    """(op, fusegrad args, fusegrad result, torch result) for each sample that runs on
    reversed layouts and gives one tensor of two or more elements."""
    op = REGISTRY[name]
    for sample in samples:
        pairs = [_fortran(a) for a in sample.args]
        fg_args = [p[0] for p in pairs]
        try:
            got = _dispatch.call(op, *fg_args)
            want = _call_torch(name, [p[1] for p in pairs])
        except Exception:  # noqa: BLE001, S112  (samples meant for other layouts or dtypes)
            continue
        if isinstance(got, fusegrad.Tensor) and isinstance(want, torch.Tensor) and \
                want.numel() > 1:
            yield op, fg_args, got, want


@pytest.mark.parametrize("name,samples", _cases(LAYOUT_DIFFERS))
def test_eager_layout_as_torch(name, samples):
    for _, _, got, want in _results(name, samples):
        shape = tuple(want.shape)
        assert _same_layout(shape, got.stride(), want.stride()), (got.stride(), want.stride())
        assert got.is_contiguous() == want.is_contiguous()


@pytest.mark.parametrize("name,samples", _cases(PREDICTION_DIFFERS))
def test_compiled_layout_as_eager(name, samples):
    """The layout compiled code gives an op's result (from the registry's `result_order`)
    is eager's."""
    for op, args, got, _ in _results(name, samples):
        fakes = [_fake(a) for a in args]
        try:
            predicted = with_eager_layout(op, fakes, FakeTensor._compute(op, tuple(fakes)))
        except Exception:  # noqa: BLE001, S112  (no meta for these arguments)
            continue
        assert _same_layout(tuple(got.shape), predicted.stride(), got.stride()), \
            (predicted.stride(), got.stride())


# ---------------------------------------------------------------- memory formats and *_like


def _pair(fn):
    return fn(torch), fn(fusegrad)


def _layouts_agree(fn):
    want, got = _pair(fn)
    for w, g in zip(want if isinstance(want, tuple) else (want,),
                    got if isinstance(got, tuple) else (got,)):
        assert tuple(g.shape) == tuple(w.shape)
        assert _same_layout(tuple(w.shape), g.stride(), w.stride()), (g.stride(), w.stride())
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-6, atol=0)


MEMORY_FORMAT_PROGRAMS = {
    "contiguous_cl": lambda t: t.arange(120.).reshape(2, 3, 4, 5).contiguous(
        memory_format=t.channels_last),
    "to_cl": lambda t: t.arange(120.).reshape(2, 3, 4, 5).to(memory_format=t.channels_last),
    "to_dtype_cl": lambda t: t.arange(120.).reshape(2, 3, 4, 5).to(
        t.float64, memory_format=t.channels_last),
    "clone_cl": lambda t: t.arange(120.).reshape(2, 3, 4, 5).clone(
        memory_format=t.channels_last),
    "cl3d": lambda t: t.arange(720.).reshape(2, 3, 4, 5, 6).contiguous(
        memory_format=t.channels_last_3d),
    "empty_cl": lambda t: t.empty(2, 3, 4, 5, memory_format=t.channels_last).zero_(),
    "cl_then_elementwise": lambda t: t.arange(120.).reshape(2, 3, 4, 5).contiguous(
        memory_format=t.channels_last).relu() + 1,
    "cl_back_to_contiguous": lambda t: t.arange(120.).reshape(2, 3, 4, 5).contiguous(
        memory_format=t.channels_last).contiguous(),
    "cl_to_double": lambda t: t.ones(2, 3, 4, 5).contiguous(
        memory_format=t.channels_last).double(),
    "zeros_like_transposed": lambda t: t.zeros_like(t.arange(12.).reshape(3, 4).t()),
    "empty_like_cl": lambda t: t.empty_like(t.ones(2, 3, 4, 5).contiguous(
        memory_format=t.channels_last)).zero_(),
    "empty_like_sliced": lambda t: t.empty_like(t.arange(12.).reshape(3, 4).t()[:, ::2]).zero_(),
    "empty_like_expanded": lambda t: t.empty_like(
        t.arange(12.).reshape(3, 4).t().expand(2, 4, 3)).zero_(),
    "ones_like_contiguous_format": lambda t: t.ones_like(
        t.arange(12.).reshape(3, 4).t(), memory_format=t.contiguous_format),
    "full_like_transposed": lambda t: t.full_like(t.arange(12.).reshape(3, 4).t(), 2.0),
    "clone_of_slice": lambda t: t.arange(12.).reshape(3, 4).t().narrow(0, 1, 2).clone(),
    "conv_transpose_output_padding": lambda t: t.nn.functional.conv_transpose2d(
        t.ones(2, 3, 5, 5), t.ones(3, 4, 3, 3), stride=2, padding=1, output_padding=1),
    "conv_transpose1d_output_padding": lambda t: t.nn.functional.conv_transpose1d(
        t.ones(2, 3, 7), t.ones(3, 4, 3), stride=2, padding=1, output_padding=1),
    "softmax_transposed": lambda t: t.arange(12.).reshape(3, 4).t().softmax(-1),
    "cumsum_transposed": lambda t: t.arange(12.).reshape(3, 4).t().cumsum(-1),
    "masked_fill_transposed": lambda t: t.arange(12.).reshape(3, 4).t().masked_fill(
        t.arange(12.).reshape(3, 4).t() > 5, 0.0),
    "cat_transposed": lambda t: t.cat([t.arange(12.).reshape(3, 4).t()] * 2),
    "stack_transposed": lambda t: t.stack([t.arange(12.).reshape(3, 4).t()] * 2),
    "pad_transposed": lambda t: t.nn.functional.pad(t.arange(12.).reshape(3, 4).t(), (1, 1)),
    "index_columns": lambda t: t.arange(12.).reshape(3, 4)[:, [0, 2]],
    "repeat_transposed": lambda t: t.arange(12.).reshape(3, 4).t().repeat(1, 1),
    "avg_pool_reversed": lambda t: t.nn.functional.avg_pool2d(
        t.arange(96.).reshape(2, 3, 4, 4).permute(3, 2, 1, 0), 2),
    "avg_pool_cl": lambda t: t.nn.functional.avg_pool2d(
        t.arange(96.).reshape(2, 4, 4, 3).permute(0, 3, 1, 2), 2),
}


@pytest.mark.parametrize("name", sorted(MEMORY_FORMAT_PROGRAMS))
def test_layout_programs_as_torch(name):
    _layouts_agree(MEMORY_FORMAT_PROGRAMS[name])


def test_views_of_contiguous_results_work_as_torch():
    """Code PyTorch runs: `view` after ops whose results PyTorch makes contiguous."""
    for lib in (torch, fusegrad):
        x = lib.arange(12.).reshape(3, 4).t()
        x.softmax(-1).view(-1)
        lib.nn.functional.conv_transpose2d(
            lib.ones(1, 2, 3, 3), lib.ones(2, 2, 3, 3), stride=2, padding=1,
            output_padding=1).view(-1)
        lib.cat([x, x]).view(-1)


@pytest.mark.parametrize("fmt", ["channels_last", "channels_last_3d", "contiguous_format"])
@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5), (2, 3, 1, 1), (2, 3, 4, 5, 6)])
def test_is_contiguous_in_memory_formats(fmt, shape):
    for make in (lambda t: t.ones(shape), lambda t: t.ones(shape).transpose(0, -1),
                 lambda t: t.ones(shape).movedim(1, -1).contiguous().movedim(-1, 1)):
        want, got = _pair(lambda t, m=make: m(t).is_contiguous(memory_format=getattr(t, fmt)))
        assert got == want


def test_memory_format_rank_errors_as_torch():
    for call in (lambda t: t.ones(2, 3, 4).contiguous(memory_format=t.channels_last),
                 lambda t: t.empty(2, 3, memory_format=t.channels_last),
                 lambda t: t.ones(2, 3, 4).clone(memory_format=t.channels_last_3d),
                 lambda t: t.ones(2, 3, 4).to(memory_format=t.channels_last)):
        with pytest.raises(RuntimeError) as want:
            call(torch)
        with pytest.raises(RuntimeError) as got:
            call(fusegrad)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("name", ["rand_like", "randn_like", "randint_like", "dropout"])
def test_random_like_fills_in_memory_order_as_torch(name):
    """The same seed gives the same values at the same places of a permuted tensor."""
    def draw(t):
        x = t.arange(24.).reshape(2, 3, 4).permute(2, 0, 1)
        t.manual_seed(3)
        if name == "randint_like":
            return t.randint_like(x, 100)
        if name == "dropout":
            return t.nn.functional.dropout(x, 0.5)
        return getattr(t, name)(x)

    _layouts_agree(draw)


def test_numpy_array_copies_and_asarray_shares():
    t = fusegrad.zeros(3)
    a = np.array(t)
    a[0] = 1.0
    assert t.tolist() == [0.0, 0.0, 0.0]
    np.asarray(t)[1] = 2.0
    assert t.tolist() == [0.0, 2.0, 0.0]


def test_from_numpy_of_a_read_only_array_warns_and_writes_as_torch():
    def write(t):
        a = np.arange(3.0)
        a.setflags(write=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x = t.from_numpy(a)
        x[0] = 5.0
        return x.tolist(), [str(w.message).split(" (Triggered")[0] for w in caught]

    want, got = _pair(write)
    assert got == want


def test_factory_argument_forms_as_torch():
    for call in (lambda t: t.full((2,), t.tensor(3)), lambda t: t.full((2,), t.tensor(True)),
                 lambda t: t.full((2,), t.tensor(2.5, dtype=t.float64)),
                 lambda t: t.arange(end=3), lambda t: t.tensor(range(3))):
        want, got = _pair(call)
        assert got.dtype.is_floating_point == want.dtype.is_floating_point
        assert str(got.dtype) == str(want.dtype)
        assert got.tolist() == want.tolist()


def test_module_to_channels_last_as_torch():
    """`model.to(memory_format=torch.channels_last)`: 4-D parameters take the format (values
    unchanged, so the outputs are the same), others stay."""
    def build(t):
        t.manual_seed(0)
        m = t.nn.Sequential(t.nn.Conv2d(3, 4, 3), t.nn.BatchNorm2d(4), t.nn.Flatten(),
                            t.nn.Linear(64, 2))
        return m.to(memory_format=t.channels_last)

    want, got = _pair(build)
    for w, g in zip(want.parameters(), got.parameters()):
        assert tuple(g.stride()) == tuple(w.stride())
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(got(fusegrad.from_numpy(x)).detach().numpy(),
                               want(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
