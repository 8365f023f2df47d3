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

# split_with_sizes whose pieces are independent tensors (no view bookkeeping), as unsafe_split
unsafe_split_with_sizes = copy_variant(REGISTRY["split_with_sizes"], "unsafe_split_with_sizes",
                                       node="UnsafeSplitWithSizesBackward0")

# `detach_copy`: `detach`'s values in new memory. PyTorch gives it no derivative, so an input
# that requires grad gives a result with a NotImplemented node (raising in backward), not a
# result detached from the graph.
detach_copy = register(
    "detach_copy", kernel=lambda a: np.array(a, copy=True, order="C"),
    meta=lambda a: Spec(tuple(a.shape), a.dtype), node="NotImplemented",
    derivative=not_implemented_derivative("detach_copy"), gradcheck=False,
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),)) for s in ((3, 4), ())],
    result_order="contiguous")
