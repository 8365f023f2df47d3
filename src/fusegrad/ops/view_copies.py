"""The copying forms of the view ops (`permute_copy`, `select_copy.int`, ...): ATen's
`*_copy` variants, which give the view's values in new memory and the view's gradient."""

from __future__ import annotations

import numpy as np

from ._util import Spec, rand_array
from .arithmetic import not_implemented_derivative
from .registry import REGISTRY, Sample, copy_variant, register
from .views import infer_size, numel

# view op -> its copying form, by ATen's overload names
_VIEWS = {
    "permute": "permute_copy", "t": "t_copy", "view": "view_copy", "alias": "alias_copy",
    "expand": "expand_copy", "select.int": "select_copy.int", "slice.Tensor": "slice_copy.Tensor",
    "unfold": "unfold_copy", "diagonal": "diagonal_copy", "split.Tensor": "split_copy.Tensor",
    "split_with_sizes": "split_with_sizes_copy", "unbind.int": "unbind_copy.int",
    "squeeze": "squeeze_copy", "squeeze.dim": "squeeze_copy.dim",
    "squeeze.dims": "squeeze_copy.dims", "unsqueeze": "unsqueeze_copy",
    "transpose.int": "transpose_copy.int", "as_strided": "as_strided_copy",
}

COPIES = {copy: copy_variant(REGISTRY[view], copy) for view, copy in _VIEWS.items()}


def _view_copy_kernel(a, shape):
    """ATen's `view_copy`: the view's values in new contiguous memory, or, where no view of
    `a` has that shape (a transposed input), `a.reshape(shape)`'s: it never refuses."""
    return np.array(np.reshape(a, infer_size(shape, a.size)), copy=True, order="C")


def _view_copy_meta(a, shape):
    return Spec(infer_size(shape, numel(a.shape)), a.dtype)


COPIES["view_copy"].kernel = _view_copy_kernel
COPIES["view_copy"].meta = _view_copy_meta

# split_with_sizes whose pieces are independent tensors (no view bookkeeping), as unsafe_split:
# in the input's memory with its strides, as PyTorch's pieces are, but no view op
_SPLIT_WITH_SIZES = REGISTRY["split_with_sizes"]


def _unsafe_split_with_sizes_meta(a, split_sizes, dim=0):
    return [Spec(s.shape, s.dtype, s.strides)
            for s in _SPLIT_WITH_SIZES.meta(a, split_sizes, dim)]


unsafe_split_with_sizes = register(
    "unsafe_split_with_sizes", kernel=_SPLIT_WITH_SIZES.kernel,
    meta=_unsafe_split_with_sizes_meta, derivative=_SPLIT_WITH_SIZES.derivative,
    save=_SPLIT_WITH_SIZES.save, node="UnsafeSplitWithSizesBackward0",
    samples=_SPLIT_WITH_SIZES.samples, list_arg=_SPLIT_WITH_SIZES.list_arg,
    nondiff_args=_SPLIT_WITH_SIZES.nondiff_args)

# `detach_copy`: `detach`'s values in new memory. PyTorch gives it no derivative, so an input
# that requires grad gives a result with a NotImplemented node (raising in backward), not a
# result detached from the graph.
detach_copy = register(
    "detach_copy", kernel=lambda a: np.array(a, copy=True, order="C"),
    meta=lambda a: Spec(tuple(a.shape), a.dtype), node="NotImplemented",
    derivative=not_implemented_derivative("detach_copy"), gradcheck=False,
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),)) for s in ((3, 4), ())],
    result_order="contiguous")
