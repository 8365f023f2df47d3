"""Layer ops that PyTorch records as one node and that have no module of their own: addmm and
the core losses, nll_loss, nll_loss2d, mse_loss, binary_cross_entropy and
binary_cross_entropy_with_logits (`AddmmBackward0`, `NllLossBackward0` ...); and the helpers
the layer-op modules (conv, pooling, normalization, embedding, layers, loss) share.

Kernels are NumPy; derivatives are written with fusegrad ops, so they can be differentiated
again. `reduction` is ATen's enum (`REDUCTION_ENUM`): 0 none, 1 mean, 2 sum.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dtype import COMPLEX as _COMPLEX
from .._thread_state import active as _active
from . import _flop_formulas as flop_formulas
from . import _gemm, _native
from . import _onnx as _ox
from ._util import (
    F32,
    F64,
    FORMAT_ORDERS,
    HALF,
    Spec,
    c_contiguous,
    cj,
    contiguous_strides,
    dense_strides,
    inplace_result_check,
    not_implemented_for,
    numpy_backward,
    rand_array,
    saved_array,
    wrap_grad,
)

# (grad mode as the activations read it: their module imports it from autograd's records)
from .activation import is_grad_enabled, no_grad
from .activation_backward import first_order_kernel
from .linalg import (
    _col_major,
    _mm_kernel,
    integer_coefficients,
    mm,
    mm_mat1_backward,
    mm_mat2_backward,
    no_bool_product,
)
from .rearrange import channels_last, channels_last_3d, contiguous_format
from .registry import OpDef, Sample, inplace_variant, register
from .scalar import div_scalar
from .views import _expand_shape


def _register_multi(name: str, nondiff_outputs: tuple = (), optional: tuple = (),
                    **fields) -> OpDef:
    """`register` with non-differentiable outputs and optional tensor arguments."""
    return register(name, nondiff_outputs=nondiff_outputs, optional_tensor_args=optional,
                    **fields)


def _call(op, *args):
    from .._dispatch import call

    return call(op, *args)


def recording() -> bool:
    """Whether a derivative runs with grad mode on (a gradient taken with create_graph, or a
    trace of one): then a loss's derivative records PyTorch's backward op, whose own node
    (`MseLossBackwardBackward0`, ...) double backward shows."""
    return is_grad_enabled()


def loss_backward_meta(g, x, t, *rest):
    """A loss backward op's result: the input and target broadcast (the gradient's shape),
    in the promoted dtype of the gradient and the input."""
    from ._util import broadcast_shapes

    return Spec(broadcast_shapes(tuple(x.shape), tuple(t.shape)),
                _dtype.result_type(g, x))


def sum_to_grad(v, reduction: int):
    """`v` (of the loss input's shape) as the gradient of a loss's `grad_output`: itself for
    an unreduced loss, else its sum (a mean's division is the caller's)."""
    return v if reduction == 0 else v.sum()


def _const(a: np.ndarray, like=None):
    """A tensor (no history) wrapping a NumPy array computed for a derivative; a meta tensor
    of its shape and dtype when `like` (the op's input) is on the meta device."""
    from .._tensor import Tensor

    if like is not None and like.is_meta:
        from .. import _meta

        return _meta.make(a.shape, _dtype.from_numpy_dtype(a.dtype))
    if _active.modes:
        from .. import _creation

        if _creation._traces_factories():
            # A tracer (AOT autograd) keeps it as a graph constant, as a factory's result:
            # made from the op's sizes and arguments (which the trace is exact for), it is
            # the same on every run. (Where it was computed from values, a fake tensor's
            # missing data failed before.)
            array = np.ascontiguousarray(a)
            return _creation._factory(array.shape, _dtype.from_numpy_dtype(array.dtype),
                                      False, lambda np_dtype: array)
    return Tensor._make(np.ascontiguousarray(a))


def _work(a: np.ndarray) -> np.ndarray:
    """Half types are computed in float32, as PyTorch's CPU kernels do."""
    return a.astype(F32) if a.dtype in HALF else a


def tensor_in_format(t, fmt: str | None):
    """Tensor `t` (None stays None) laid out in memory format `fmt`: itself when it is so
    already, else a copy recorded as `clone` (derivatives written in tensor ops, which
    double backward and traced graphs run, lay their results out as the kernels'
    `in_format`). None leaves `t` as its ops made it (contiguous, for the layers' ops)."""
    if t is None or fmt is None or tuple(t.stride()) == dense_strides(tuple(t.shape),
                                                                       FORMAT_ORDERS[fmt]):
        return t
    return t.clone(memory_format=channels_last if fmt == "channels_last" else channels_last_3d)


def tensor_contiguous(t):
    """Tensor `t` (None stays None) with row-major strides, those of its size-1 dims too:
    itself when it has them, else a copy recorded as `clone` (the tensor-op form of
    `in_format(a, None)`)."""
    if t is None or tuple(t.stride()) == contiguous_strides(tuple(t.shape)):
        return t
    return t.clone(memory_format=contiguous_format)


# ---------------------------------------------------------------- addmm


def _legacy(x) -> str:
    return (_dtype.FROM_NP[x.dtype] if isinstance(x, np.ndarray) else x.dtype).legacy


def _check_addmm(bias, m1, m2) -> None:
    # the bias is compared first, as PyTorch does (which message shows when both differ)
    if _legacy(bias) != _legacy(m2):
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {_legacy(bias)} "
                           f"and {_legacy(m2)}")
    if _legacy(m1) != _legacy(m2):
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_legacy(m1)} and "
                           f"{_legacy(m2)}")


def _addmm_kernel(bias, m1, m2, beta=1, alpha=1):
    dt = m1.dtype
    if not (bias.dtype == dt == m2.dtype):
        _check_addmm(bias, m1, m2)
    if dt.kind in "iu":
        beta, alpha = integer_coefficients(dt, beta, alpha)
    if alpha == 1 and beta == 1 and bias.ndim == 1 and (dt is F32 or dt is F64) and \
            bias.shape[0] == m2.shape[-1]:
        # A linear layer's row of biases, added by each piece of the product (_gemm)
        return _gemm.matmul(m1, m2, bias=np.ascontiguousarray(bias))
    if len(m1.shape) == 2 and len(m2.shape) == 2:
        no_bool_product("addmm_impl_cpu_", m1, (m1.shape[0], m2.shape[1]), m1.shape[1])
    prod = _gemm.matmul(_work(m1), _work(m2))  # our intra-op threads, not BLAS threads
    if alpha != 1:
        prod = prod * alpha
    # The product is a fresh array: add a float bias of its row's (or its own) shape into it
    # rather than allocating another result.
    if prod.dtype.kind == "f" and bias.ndim and bias.shape == prod.shape[-bias.ndim:]:
        prod += _work(bias) if beta == 1 else _work(bias) * beta
        return prod.astype(dt, copy=False)
    if bias.shape != prod.shape:  # the bias must expand to the product (PyTorch's error)
        _expand_shape(tuple(bias.shape), prod.shape, _dtype.from_numpy_dtype(bias.dtype))
    out = prod + (_work(bias) if beta == 1 else _work(bias) * beta)
    return out.astype(dt, copy=False)


def _addmm_meta(bias, m1, m2, beta=1, alpha=1):
    _check_addmm(bias, m1, m2)
    if len(m1.shape) != 2 or len(m2.shape) != 2:
        which, nd = ("mat1", len(m1.shape)) if len(m1.shape) != 2 else ("mat2", len(m2.shape))
        raise RuntimeError(f"{which} must be a matrix, got {nd}-D tensor")
    if m1.shape[1] != m2.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({m1.shape[0]}x{m1.shape[1]} and "
            f"{m2.shape[0]}x{m2.shape[1]})")
    return Spec((m1.shape[0], m2.shape[1]), _dtype.result_type(m1, m2))


def _addmm_derivative(g, m1, m2, beta, alpha, mask=(True, True)):
    # `mask`: which of mat1 and mat2 required grad when the node was recorded (the other's
    # gradient, the input's for a network's first layer, is a GEMM nobody would read), and
    # where recorded, whether each was laid out column-major. A matrix is saved only where
    # the other's gradient reads it, as PyTorch saves it.
    if g._dtype.category == _COMPLEX:  # a complex product: the conjugate partners and scales
        m1 = cj(m1) if m1 is not None else None
        m2 = cj(m2) if m2 is not None else None
        beta, alpha = cj(beta), cj(alpha)
    gb = g if beta == 1 else g * beta
    layouts = mask[3:] if len(mask) > 3 else (None, None)
    g1 = mm_mat1_backward(g, m1, m2, layouts[0]) if m2 is not None and mask[0] else None
    g2 = mm_mat2_backward(g, m1, m2, layouts[1]) if m1 is not None and mask[1] else None
    if alpha != 1:
        g1 = g1 * alpha if g1 is not None else None
        g2 = g2 * alpha if g2 is not None else None
    return (gb, g1, g2, None, None)


def _addmm_on_arrays(g, m1, m2, beta, alpha, mask=(True, True)):
    """`_addmm_derivative` on arrays (`OpDef.on_arrays`): the same products by mm's kernel,
    for a float32/float64 `addmm` with beta and alpha 1 (a linear layer); None otherwise.
    `mask[2]`, where given, says the bias's gradient is summed to a smaller shape (a new
    array): else it is a copy of `g`, as an entry must be."""
    if beta != 1 or alpha != 1:
        return None
    dt = g.dtype
    g1 = g2 = None
    if mask[0]:  # mm_mat1_backward / mm_mat2_backward, step for step
        a2 = saved_array(m2, dt)
        if a2 is None:
            return None
        g1 = _mm_kernel(a2, g.T).T if mask[3] else _mm_kernel(g, a2.T)
    if mask[1]:
        a1 = saved_array(m1, dt)
        if a1 is None:
            return None
        g2 = _mm_kernel(g.T, a1).T if mask[4] else _mm_kernel(a1.T, g)
    return (g if len(mask) > 2 and mask[2] else g.copy(), g1, g2, None, None)


_addmm_derivative.on_arrays = _addmm_on_arrays


def _addmm_save(out, b, m1, m2, beta=1, alpha=1):
    """Each matrix where the other requires grad (its gradient reads it), the scales, then
    whether each matrix requires grad, whether the bias's gradient is summed to a smaller
    shape (as a bias of fewer dimensions always is: read off the ranks, as a comparison of
    sizes would guard on a symbolic batch) and whether each matrix that requires grad is
    laid out column-major (its gradient is laid out as it is)."""
    r1, r2 = m1._rg, m2._rg
    return (m1 if r2 else None, m2 if r1 else None, beta, alpha,
            (r1, r2, b.dim() < 2, r1 and _col_major(m1), r2 and _col_major(m2)))


def _addmm_decomposition(bias, m1, m2, beta=1, alpha=1):
    """alpha * (m1 @ m2) + beta * bias; beta 0 ignores the bias (NaN included), as ATen."""
    out = _call(mm, m1, m2)
    if alpha != 1:
        out = out * alpha
    if beta == 0:
        return out
    return out + (bias if beta == 1 else bias * beta)


def _addmm_samples(rng, dt):
    return [Sample((rand_array(rng, b, dt), rand_array(rng, (3, 4), dt),
                    rand_array(rng, (4, 5), dt)), name=str(b)) for b in ((5,), (3, 5), (1, 5))]


def _addmm_onnx(b, inputs, args, kwargs, opset):
    """Gemm(mat1, mat2, self, alpha, beta); a folded `t(weight)` is read as the weight with
    transB=1, so its initializer keeps the state_dict name."""
    bias, m1, m2 = inputs[:3]
    beta, alpha = (list(args[3:5]) + [1, 1][len(args) - 3:])[:2]
    trans_b = None
    if getattr(m2, "transpose_of", None) is not None:
        m2, trans_b = m2.transpose_of, 1
    return b.emit("Gemm", [m1, m2, bias], alpha=float(alpha), beta=float(beta),
                  transB=trans_b)


addmm = register(
    "addmm", autocast="lower", kernel=_addmm_kernel, meta=_addmm_meta, node="AddmmBackward0",
    flops=flop_formulas.product_of(1, False),
    forward_ad="added_product",
    derivative=_addmm_derivative,
    save=_addmm_save,
    samples=_addmm_samples, onnx=_addmm_onnx, public="addmm",
    decomposition=_addmm_decomposition,
    saved_names=("mat1", "mat2", "beta", "alpha", ""))


def _addmm_inplace_samples(rng, dt):
    return [Sample((rand_array(rng, (3, 5), dt), rand_array(rng, (3, 4), dt),
                    rand_array(rng, (4, 5), dt)) + extra, name=str(extra))
            for extra in ((), (0.5, 2.0), (0.0, 1.0))]


addmm_ = inplace_variant(addmm, "addmm_", samples=_addmm_inplace_samples)
inplace_result_check(addmm_, lambda s, m1, m2, *rest: (
    (m1.shape[0], m2.shape[1]) if len(m1.shape) == 2 and len(m2.shape) == 2 and
    m1.shape[1] == m2.shape[0] else None))


# ---------------------------------------------------------------- losses

def _reduce(a: np.ndarray, reduction: int):
    if reduction == 1:
        if not a.size:  # the mean of nothing: NaN (without NumPy's warning)
            return np.full((), np.nan, a.dtype)
        return a.mean()
    if reduction == 2:
        return a.sum()
    return a


def reduced(loss, reduction: int):
    """A loss tensor reduced as ATen's `reduction` enum says, in fusegrad ops (for
    decompositions)."""
    if reduction == 1:
        return loss.sum() / loss.numel()
    return loss.sum() if reduction == 2 else loss


def _nll_pick(x, t, weight, ignore_index):
    """(picked log-probabilities, per-element weights) for (N, C, *) `x` and (N, *) `t`."""
    c = x.shape[1]
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    if valid.any():
        bad = safe[(safe < 0) | (safe >= c)]
        if bad.size:
            raise IndexError(f"Target {int(bad.flat[0])} is out of bounds.")
    picked = np.take_along_axis(x, safe[:, None], 1)[:, 0]
    wt = (weight[safe] if weight is not None else np.ones(safe.shape, x.dtype)) * valid
    return picked, wt.astype(x.dtype, copy=False)


_INT64 = np.dtype(np.int64)
_INT64_RANGE = range(-(1 << 63), 1 << 63)
_NLL_SIGNATURES = {"nll_rows": "pppiii", "nll_reduced_rows": "ppppiiii",  # argument codes
                   "nll_reduced_grad_rows": "ppddiiii"}


def _nll_function(name: str, data: np.ndarray, t: np.ndarray, ignore_index: int):
    """C kernel `name` of nll_loss's common case (`native/pointwise.c`) for C-contiguous
    float32/float64 `data` and int64 class indices `t`, or None where it does not apply.
    Each checks the targets in the same pass and returns -1 when every one is a class in
    [0, c) other than `ignore_index`, else the row of the first that is not (its caller
    then takes the general path: an output is partly written)."""
    # (an int first: `in` a range tests anything else by iterating over its 2**64 values)
    if t.dtype != _INT64 or not t.flags.c_contiguous or not data.flags.c_contiguous or \
            ignore_index.__class__ is not int or ignore_index not in _INT64_RANGE:
        return None
    return _native.typed("pointwise", name, data.dtype, _NLL_SIGNATURES[name], "i")




def _nll_gather(x: np.ndarray, t: np.ndarray, ignore_index: int,
                losses: np.ndarray) -> bool | None:
    """losses[i] = -x[i, t[i]] in C: True when done, False for a target it leaves to the
    general path, None where the kernel does not apply (`_nll_function`)."""
    fn = _nll_function("nll_rows", x, t, ignore_index)
    if fn is None:
        return None
    n, c = x.shape
    if t.shape[0] != n or losses.shape[0] != n:  # (the meta names a batch size mismatch)
        return None
    address = _native.address
    return fn(address(x), address(t), address(losses), n, c, ignore_index) < 0


def _nll_reduced(x: np.ndarray, t: np.ndarray, reduction: int, ignore_index: int):
    """(loss, total weight) of a reduced nll_loss without class weights over 2-D `x`, both
    from one C call (the losses' `_cascade_sum`, then divided by their count for
    "mean"), as 0-d arrays; None where the C kernel does not apply or a target is out of
    range or ignored (the general path then masks or reports it)."""
    fn = _nll_function("nll_reduced_rows", x, t, ignore_index)
    if fn is None:
        return None
    n, c = x.shape
    if t.shape[0] != n:  # (the meta names a batch size mismatch)
        return None
    # (Two arrays of their own: each tensor's storage holds its one value, as PyTorch's.)
    loss, total = np.empty((), x.dtype), np.empty((), x.dtype)
    address = _native.address
    if fn(address(x), address(t), address(loss), address(total), n, c, ignore_index,
          reduction == 1) >= 0:
        return None
    return loss, total


def _nll_reduced_grad(g: np.ndarray, shape: tuple, t: np.ndarray, reduction: int,
                      ignore_index: int, total: np.ndarray) -> np.ndarray | None:
    """The input gradient of a reduced nll_loss without class weights from its loss's 0-d
    gradient `g` and total weight `total` (both of the gradient's dtype), in one C call;
    None where `_nll_reduced` would be."""
    gi = np.empty(shape, g.dtype)
    fn = _nll_function("nll_reduced_grad_rows", gi, t, ignore_index)
    if fn is None or shape[0] != t.shape[0]:
        return None
    address = _native.address
    # (Both values exact as doubles: each dtype's values are.)
    if fn(address(gi), address(t), float(g), float(total), shape[0], shape[1], ignore_index,
          reduction == 1) >= 0:
        return None
    return gi


_CASCADE_STEP = 16  # PyTorch's nll_loss sums in levels of 16 terms


def _work_dtype(dt) -> np.dtype:
    """The dtype `_cascade_sum` adds in: float64's own, float32 for the others (a half
    dtype's partial sums are rounded back to it after each step)."""
    return F64 if dt == F64 else F32


def _sequential_sums(rows: np.ndarray, dt) -> np.ndarray:
    """Each row of `rows` summed left to right, every partial sum rounded to `dt`, in
    `_work_dtype(dt)`: all rows at once, one column at a time."""
    wd = _work_dtype(dt)
    acc = np.zeros(rows.shape[:-1], wd)
    for i in range(rows.shape[-1]):
        acc = (acc + rows[..., i]).astype(dt).astype(wd)
    return acc


def _level_split(values: np.ndarray, ends: np.ndarray, dt):
    """One level of `_cascade_sum`: `values` in order, `ends` marking those after which the
    level's partial sum moves up. Returns (the sums moved up, what the level keeps)."""
    n_up = int(ends.sum())
    group = np.cumsum(ends) - ends  # the group each value belongs to (the last: n_up)
    start = np.searchsorted(group, np.arange(n_up + 1))
    slot = np.arange(values.size) - start[group]
    width = int(slot.max()) + 1 if values.size else 1
    table = np.zeros((n_up + 1, width), _work_dtype(dt))
    table[group, slot] = values
    sums = _sequential_sums(table, dt)
    return sums[:n_up], sums[n_up]


def _cascade_sum(values: np.ndarray, positions: np.ndarray, n: int, dt):
    """The sum of `values` (the terms of samples at `positions` of a batch of `n`) as
    PyTorch's CPU nll_loss forms it for float dtype `dt` (found by experiment against
    torch 2.13, every batch size to 5,000 equal): partial sums in levels held in `dt`;
    level j's moves up to level j + 1 after each term whose position is a multiple of
    16 ** (j + 1) (the first term alone goes to the top), and the levels are added lowest
    first at the end. The C kernel `nll_reduced_rows` (`native/pointwise.c`) is the same."""
    wd = _work_dtype(dt)
    values = values.astype(dt).astype(wd)
    levels = 1
    while _CASCADE_STEP ** levels < n:
        levels += 1
    kept = []
    for j in range(levels):
        ends = positions % (_CASCADE_STEP ** (j + 1)) == 0
        up, keep = _level_split(values, ends, dt)
        kept.append(keep)
        values, positions = up, positions[ends]
    kept.append(_sequential_sums(values, dt) if values.size else wd.type(0))
    total = wd.type(0)
    for part in kept:
        total = wd.type(total + part).astype(dt).astype(wd)
    return total


def _cascade_nll_reduced(losses: np.ndarray, wt, valid, reduction: int, dt):
    """(loss, total weight) of a reduced nll_loss over a batch of float dtype `dt`, as
    PyTorch's kernel forms them: `_cascade_sum` of the per-sample terms (and class weights
    `wt`, None without) of the samples `valid` marks (None: all); without class weights the
    total is their count in `dt`. A mean divides in `_work_dtype(dt)` and rounds once."""
    n = losses.shape[0]
    positions = np.arange(n) if valid is None else np.flatnonzero(valid)
    terms = losses if valid is None else losses[positions]
    loss = _cascade_sum(terms, positions, n, dt)
    wd = _work_dtype(dt)
    if wt is None:
        total = wd.type(np.asarray(positions.size, dt))
    else:
        total = _cascade_sum(wt[positions], positions, n, dt)
    with np.errstate(invalid="ignore", divide="ignore"):  # every sample ignored: NaN
        out = loss / total if reduction == 1 else loss
    return np.asarray(out).astype(dt), np.asarray(total).astype(dt)


def _all_classes(t: np.ndarray, c: int, ignore_index: int) -> bool:
    """Whether target `t` (1-D integers) holds class indices in [0, `c`) only and can hold no
    `ignore_index`: then no mask and no bounds check is needed (the common case, a batch of
    labels: two reductions instead of a dozen NumPy calls)."""
    if t.ndim != 1 or not t.size or t.dtype.kind not in "iu":
        return False
    lo, hi = int(t.min()), int(t.max())
    return 0 <= lo and hi < c and not lo <= ignore_index <= hi


def _nll_target_check(t, two_d: bool) -> None:
    """nll_loss's checks of the target (array or fake): one class index per sample, held
    in int64 or uint8."""
    if not two_d and len(t.shape) > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    name = _legacy(t)
    if name != "Long" and name != "Byte":
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {name}")


def _nll_weight_check(shape: tuple, weight, two_d: bool) -> None:
    """PyTorch's error for a class weight (an array or tensor) that is not one value per
    class (the size of the input's last dim; its dim 1 for the 2-D form)."""
    ws = tuple(weight.shape)
    numel = int(np.prod(ws)) if ws else 1
    if two_d:
        if numel != shape[1]:
            raise RuntimeError("weight tensor should be defined either for all or no classes")
        return
    c = shape[-1]
    if len(ws) > 1 or numel != c:
        raise RuntimeError(f"weight tensor should be defined either for all {c} classes or no "
                           f"classes but got weight tensor of shape: {list(ws)}")


def _nll_dtype_check(x, weight, two_d: bool) -> None:
    """PyTorch's kernel's dtype errors, after the size and target checks: an input that is
    not floating has no kernel, and class weights must share the input's dtype (an empty
    batch too)."""
    name = _legacy(x)
    if np.dtype(x.dtype if isinstance(x, np.ndarray) else x.dtype.np).kind in "biuc":
        kernel = "nll_loss2d_forward_out_frame" if two_d else "nll_loss_out_frame"
        raise not_implemented_for(kernel, name)
    if weight is not None and _legacy(weight) != name:
        raise RuntimeError(f"expected scalar type {name} but found {_legacy(weight)}")


def _nll2d_size_check(shape: tuple, ts: tuple) -> None:
    """The 2-D form's target: one class index per position of the input's maps."""
    if len(ts) != 3 or ts[0] != shape[0] or ts[1:] != shape[2:]:
        raise RuntimeError(f"size mismatch (got input: {list(shape)} , target: {list(ts)}")


def _nll_kernel(x, t, weight, reduction, ignore_index, two_d=False):
    if weight is not None:
        _nll_weight_check(x.shape, weight, two_d)
    if t.dtype is not _INT64 or t.ndim != 1:  # (a batch of int64 labels passes at once)
        _nll_target_check(t, two_d)
    if weight is not None or x.dtype.kind not in "f":  # (float input, no weight: nothing)
        if two_d:
            _nll2d_size_check(x.shape, t.shape)
        _nll_dtype_check(x, weight, two_d)
    if reduction and weight is None and x.ndim == 2 and t.ndim == 1 and t.size:
        # A batch's mean or sum without class weights (a classifier's loss), whole in C.
        reduced = _nll_reduced(x, t, reduction, ignore_index)
        if reduced is not None:
            return reduced
    one = x.ndim == 1
    xw = _work(x)[None] if one else _work(x)
    tt = t[None] if one else t
    common = weight is None and not one and xw.ndim == 2 and tt.ndim == 1 and tt.size
    if common:
        # Every weight is one: `-picked * wt` is `-picked` and their sum the count, exactly.
        losses = np.empty(tt.shape, xw.dtype)
        common = _nll_gather(xw, tt, ignore_index, losses)
        if common is None and _all_classes(tt, xw.shape[1], ignore_index):
            common = True
            losses = -xw[np.arange(tt.shape[0]), tt]
    if common:
        total = xw.dtype.type(tt.shape[0])
    else:
        picked, wt = _nll_pick(xw, tt, None if weight is None else _work(weight),
                               ignore_index)
        # (an ignored target's loss is 0 whatever its input, a NaN too, as PyTorch skips it)
        losses = np.where(tt != ignore_index, -picked * wt, xw.dtype.type(0))
        total = wt.sum()
    if reduction == 0:
        if one:  # a single sample reports its weight; a batch reports 0
            return losses[0].astype(x.dtype), np.asarray(total).astype(x.dtype)
        return losses.astype(x.dtype, copy=False), np.zeros((), x.dtype)
    # PyTorch sums a batch's terms (its maps' too, in C order) in levels held in its dtype
    return _cascade_nll_reduced(losses.reshape(-1), None if weight is None else
                                wt.reshape(-1), None if common else
                                (tt != ignore_index).reshape(-1), reduction, x.dtype)


def _nll_meta(x, t, weight, reduction, ignore_index, two_d=False):
    shape = tuple(x.shape)
    ts = tuple(t.shape)
    if not two_d:
        if len(shape) not in (1, 2):
            raise ValueError(f"Expected 2 or more dimensions (got {len(shape)})")
        if len(shape) == 2 and ts[0] != shape[0]:
            raise ValueError(f"Expected input batch_size ({shape[0]}) to match target "
                             f"batch_size ({ts[0]}).")
    if weight is not None:
        _nll_weight_check(shape, weight, two_d)
    _nll_target_check(t, two_d)
    if two_d:
        _nll2d_size_check(shape, ts)
    _nll_dtype_check(x, weight, two_d)
    out = (ts if len(shape) > 1 else ()) if reduction == 0 else ()
    return [Spec(out, x.dtype), Spec((), x.dtype)]


def _nll_save(out, x, t, weight, reduction, ignore_index):
    # (the input itself only for a gradient taken with create_graph: its backward op's edge)
    return (x.shape, t, weight, reduction, ignore_index, out[1], x)


def _nll_derivative(grads, shape, t, weight, reduction, ignore_index, total, x=None):
    g = grads[0] if isinstance(grads, list) else grads
    if x is not None and is_grad_enabled():
        # create_graph: PyTorch's `nll_loss_backward` (`nll_loss2d_backward`) op, whose node
        # connects the gradient to the input (its second derivative there is zero)
        op = nll_loss2d_backward if len(shape) == 4 and t.dim() == 3 else nll_loss_backward
        return (_call(op, g, x, t, weight, reduction, ignore_index, total), None, None, None,
                None)
    return (_nll_first_order(g, shape, t, weight, reduction, ignore_index, total), None, None,
            None, None)


def _nll_first_order(g, shape, t, weight, reduction, ignore_index, total):
    """nll_loss's input gradient: -w[t] * grad at each target position (scatter), zero for
    ignored targets."""
    if numpy_backward(g, weight, total) and t._plain and t._data is not None:
        # The same steps on the arrays: a dozen dispatched ops cost ~130 us a call.
        gi = _nll_grad_array(g._data, shape, t._data, None if weight is None else
                             weight._data, reduction, ignore_index, total._data)
        return wrap_grad(gi)
    one = len(shape) == 1
    if one:
        t, g = t.unsqueeze(0), g.unsqueeze(0) if reduction == 0 else g
    if t.dtype is not _dtype.int64:  # uint8 targets: gather and scatter take int64 indices
        t = t.long()
    valid = t != ignore_index
    safe = t * valid
    w = valid.to(g.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe.reshape(-1)).reshape(tuple(safe.shape))
    if reduction == 1:  # every target ignored: the mask is zero, and so is the gradient
        # (PyTorch divides the gradient by the total first: one rounding in a half dtype)
        g = g / (total + (total == 0).to(total.dtype)).detach()
    vals = -(g * w) if reduction == 0 else -(w * g)
    full = (shape[0] if not one else 1,) + tuple(shape[1:] if not one else shape)
    gi = g.new_zeros(full).scatter(1, safe.unsqueeze(1), vals.unsqueeze(1))
    return gi.squeeze(0) if one else gi


def _nll_on_arrays(grads, shape, t, weight, reduction, ignore_index, total, x=None):
    """`_nll_derivative` on arrays (`OpDef.on_arrays`; `grads`: the outputs' gradient
    arrays), or None where a saved value is not a plain tensor's array."""
    g = grads[0]
    tot = saved_array(total, g.dtype)
    w = None if weight is None else saved_array(weight, g.dtype)
    target = t._data if t._plain else None
    if tot is None or (w is None and weight is not None) or target.__class__ is not np.ndarray:
        return None
    return (_nll_grad_array(g, shape, target, w, reduction, ignore_index, tot), None, None,
            None, None)


_nll_derivative.on_arrays = _nll_on_arrays


def _nll_grad_array(g, shape, t, weight, reduction, ignore_index, total):
    """`_nll_derivative`'s input gradient on arrays, step for step (the same bits)."""
    one = len(shape) == 1
    if weight is None and not one and reduction and len(shape) == 2 and t.ndim == 1 and \
            t.size:
        # Every weight is one: the same steps on a single value, stored at each target. On
        # NumPy scalars where the gradient is one (a reduced loss's): the arithmetic of 0-d
        # arrays at a tenth of the cost (a total of 0, every target ignored, divides by 1).
        if g.ndim == 0 and total.dtype == g.dtype:
            gi = _nll_reduced_grad(g, shape, t, reduction, ignore_index, total)
            if gi is not None:
                return gi
            unit = g.dtype.type(1)
            tot = total[()]
            value = -(g[()] / (tot if tot else unit) if reduction == 1 else g[()])
        else:
            value = -(g / (total + (total == 0).astype(total.dtype)) if reduction == 1 else g)
        if _all_classes(t, shape[1], ignore_index):
            gi = np.zeros(shape, g.dtype)
            gi[np.arange(shape[0]), t] = value
            return gi
    if one:
        t = t[None]
        if reduction == 0:
            g = g[None]
    t = t.astype(np.int64, copy=False)
    valid = t != ignore_index
    safe = t * valid
    w = valid.astype(g.dtype)
    if weight is not None:
        w = w * weight[safe.reshape(-1)].reshape(safe.shape)
    if reduction == 1:  # (the gradient divided by the total first, as PyTorch's)
        g = g / (total + (total == 0).astype(total.dtype))
    vals = -(g * w) if reduction == 0 else -(w * g)
    if not valid.all():
        # PyTorch writes nothing at an ignored target: +0, where -(w * g) is -0 there
        vals = np.where(valid, np.broadcast_to(vals, safe.shape), g.dtype.type(0))
    full = (shape[0] if not one else 1,) + tuple(shape[1:] if not one else shape)
    gi = np.zeros(full, g.dtype)
    np.put_along_axis(gi, safe[:, None], np.broadcast_to(vals, safe.shape)[:, None], 1)
    return gi[0] if one else gi


def _nll_decomposition(x, t, weight=None, reduction=1, ignore_index=-100):
    """-x[i, t[i], ...] * weight[t[i]], zero where t is ignore_index; (N, C, *) and (C,)."""
    one = x.dim() == 1
    if one:
        x, t = x.unsqueeze(0), t.unsqueeze(0)
    valid = t != ignore_index
    safe = t.where(valid, 0)
    w = valid.to(x.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe.reshape(-1)).reshape(tuple(safe.shape))
    losses = -(x.gather(1, safe.unsqueeze(1)).squeeze(1) * w)
    total = w.sum()
    if reduction == 0:  # a single sample reports its weight; a batch reports 0
        return (losses.squeeze(0), total) if one else (losses, x.new_zeros(()))
    return (losses.sum() / total if reduction == 1 else losses.sum()), total


def _nll_samples(rng, dt):
    out = []
    for shape in ((4, 3), (3,)):
        t = rng.integers(0, 3, shape[:1] if len(shape) == 2 else ())
        for red in (0, 1, 2):
            for ig in (-100, 1):
                out.append(Sample((rand_array(rng, shape, dt), t, None, red, ig),
                                  name=f"{shape} red={red} ig={ig}"))
    return out


nll_loss = _register_multi(
    "nll_loss_forward", (1,), kernel=_nll_kernel, meta=_nll_meta, node="NllLossBackward0",
    derivative=_nll_derivative, save=_nll_save, samples=_nll_samples, public="nll_loss",
    decomposition=_nll_decomposition, onnx=_ox.nll_loss,
    nondiff_args=(1, 2), gradcheck=False,
    saved_names=("", "target", "weight", "reduction", "ignore_index", "total_weight", "self"))


def _nll_backward_kernel(g, x, t, weight, reduction, ignore_index, total):
    # (grad mode off: the first derivative's own path, so the bits are the same)
    with no_grad():
        return _nll_first_order(wrap_grad(g), tuple(x.shape), wrap_grad(t),
                                wrap_grad(weight), reduction, ignore_index,
                                wrap_grad(np.asarray(total)))._data


def _nll_backward_meta(g, x, t, weight, reduction, ignore_index, total):
    return Spec(tuple(x.shape), g.dtype)


def _nll_backward_derivative(forward):
    """The derivative of `nll_loss_backward` (`forward`: the loss op it differentiates):
    the loss of the incoming gradient for `grad_output`, zeros for `self` (the loss is
    linear in its input), as PyTorch's."""

    def derivative(gg, g, x, t, weight, reduction, ignore_index):
        gg_out = _call(forward, gg, t, weight, reduction, ignore_index)[0]
        return (gg_out, gg.new_zeros(tuple(gg.shape)), None, None, None, None, None)

    return derivative


def _nll_backward_samples(forward_samples):
    def samples(rng, dt):
        out = []
        for s in forward_samples(rng, dt):
            x, t, w, red, ig = s.args
            loss, total = _nll_kernel(x, t, w, red, ig, x.ndim == 4)
            out.append(Sample((rand_array(rng, np.shape(loss), dt), x, t, w, red, ig, total),
                              name=s.name))
        return out

    return samples


def _register_nll_backward(name: str, node: str, forward, forward_samples) -> OpDef:
    return register(
        name, kernel=_nll_backward_kernel, meta=_nll_backward_meta, node=node,
        derivative=_nll_backward_derivative(forward),
        save=lambda out, g, x, t, weight, reduction, ignore_index, total: (
            g, x, t, weight, reduction, ignore_index),
        nondiff_args=(2, 3, 6), optional_tensor_args=(3,), gradcheck=False,
        # (a core op: its input gradient, zeros, has no decomposition that would give it)
        samples=_nll_backward_samples(forward_samples),
        saved_names=("", "self", "target", "weight", "reduction", "ignore_index"))


nll_loss_backward = _register_nll_backward("nll_loss_backward", "NllLossBackwardBackward0",
                                           nll_loss, _nll_samples)


def _nll2d_kernel(x, t, weight, reduction, ignore_index):
    return _nll_kernel(x, t, weight, reduction, ignore_index, True)


nll_loss2d = _register_multi(
    "nll_loss2d_forward", (1,), kernel=_nll2d_kernel,
    meta=lambda x, t, w, r, i: _nll_meta(x, t, w, r, i, True), node="NllLoss2DBackward0",
    derivative=_nll_derivative, save=_nll_save, public="nll_loss2d", nondiff_args=(1, 2),
    decomposition=_nll_decomposition, onnx=_ox.nll_loss,
    gradcheck=False,
    samples=lambda rng, dt: _nll2d_samples(rng, dt),
    saved_names=("", "target", "weight", "reduction", "ignore_index", "total_weight", "self"))


def _nll2d_samples(rng, dt):
    return [Sample((rand_array(rng, (2, 3, 4, 5), dt), rng.integers(0, 3, (2, 4, 5)), None, r,
                    -100), name=f"red={r}") for r in (0, 1, 2)]


nll_loss2d_backward = _register_nll_backward(
    "nll_loss2d_backward", "NllLoss2DBackwardBackward0", nll_loss2d, _nll2d_samples)


def _mse_kernel(x, t, reduction=1):
    dt = float_loss_dtype(x, t, "mse").np
    d = _work(x) - _work(t)
    if dt in HALF:
        # PyTorch's kernel rounds the difference and its square to the half dtype; the
        # reduction adds those in float32 and rounds the sum (or the mean) once
        d = d.astype(dt).astype(F32)
        sq = (d * d).astype(dt)
        if reduction == 0 or not d.size:
            return np.asarray(_reduce(sq, reduction)).astype(dt, copy=False)
        total = sq.astype(F32).sum()
        return np.asarray(total / np.float32(d.size) if reduction == 1 else total).astype(dt)
    return np.asarray(_reduce(d * d, reduction)).astype(dt, copy=False)


def _loss_meta(x, t, *rest, reduction_pos=0):
    reduction = rest[reduction_pos] if len(rest) > reduction_pos else 1
    from ._util import broadcast_shapes

    shape = broadcast_shapes(tuple(x.shape), tuple(t.shape))
    return Spec(shape if reduction == 0 else (), _dtype.result_type(x, t))


def float_loss_dtype(x, t, kernel: str):
    """The result dtype of a pointwise loss of `x` and `t` (arrays or fakes), PyTorch's
    promotion; its CPU kernel (`kernel`_cpu) exists for floating dtypes only."""
    dt = _dtype.result_type(x, t)
    if dt.category != _dtype.FLOAT:
        raise not_implemented_for(f"{kernel}_cpu", dt)
    return dt


def float_loss_meta(kernel: str, check=None):
    """`_loss_meta` for a loss defined on floating dtypes only (`check(x, t)` adds more)."""

    def meta(x, t, *rest):
        float_loss_dtype(x, t, kernel)
        if check is not None:
            check(x, t)
        return _loss_meta(x, t, *rest)

    return meta


def _scale(g, reduction, n):
    return g / n if reduction == 1 else g


def numeric_target(x, t):
    """Target `t` in a loss's derivative: a bool target as 0 and 1 of `x`'s dtype (PyTorch's
    backward takes one, where a bool tensor refuses `-`)."""
    return t.to(x.dtype) if t.dtype is _dtype.bool_ else t


def loss_difference(x, t):
    """`x - t` in a loss's derivative (`numeric_target`)."""
    return x - numeric_target(x, t)


def _mse_derivative(g, x, t, reduction):
    if is_grad_enabled():  # create_graph: PyTorch's op, the target's with its roles swapped
        return (_call(mse_loss_backward, g, x, t, reduction),
                _call(mse_loss_backward, g, t, x, reduction), None)
    # (contiguous, as PyTorch's kernel writes it, whatever the operands' layout)
    gx = _mse_first_order(g, x, t, reduction).contiguous()
    return (gx, -gx, None)


def _mse_first_order(g, x, t, reduction):
    d = loss_difference(x, t) * 2
    return _scale(g, reduction, max(x.numel(), t.numel(), 1)) * d


def _mse_backward_derivative(gg, g, x, t, reduction):
    n = max(x.numel(), t.numel(), 1)
    gg_out = sum_to_grad(gg * loss_difference(x, t) * 2, reduction)
    gx = gg * (_scale(g, reduction, n) * 2)
    return (gg_out / n if reduction == 1 else gg_out, gx, -gx, None)


def _loss_backward_samples(samples, rng, dt, reduction_at: int = -1):
    """Samples of a loss's backward op from the loss's: a gradient of the loss's shape
    (the reduction at `reduction_at` of the loss's arguments) first."""
    out = []
    for s in samples:
        x, t = s.args[0], s.args[1]
        red = s.args[reduction_at]
        shape = np.broadcast_shapes(np.shape(x), np.shape(t)) if red == 0 else ()
        out.append(Sample((rand_array(rng, shape, dt),) + tuple(s.args), name=s.name))
    return out


def _loss_samples(rng, dt, domain=None, extra=()):
    out = []
    for shape in ((3, 4), (5,), ()):
        for red in (0, 1, 2):
            out.append(Sample((rand_array(rng, shape, dt, domain),
                               rand_array(rng, shape, dt, domain)) + extra + (red,),
                              name=f"{shape} red={red}"))
    return out


mse_loss = register(
    "mse_loss", autocast="fp32",
    kernel=_mse_kernel, meta=float_loss_meta("mse"), node="MseLossBackward0",
    derivative=_mse_derivative, save=lambda out, x, t, reduction=1: (x, t, reduction),
    samples=_loss_samples, public="mse_loss",
    decomposition=lambda x, t, reduction=1: reduced((x - t) * (x - t), reduction),
    saved_names=("self", "target", "reduction"), result_order="operands",
    onnx=_ox.mse_loss)
mse_loss_backward = register(
    # (PyTorch's kernel writes into a contiguous zeros_like of the input, whatever its layout)
    "mse_loss_backward", kernel=c_contiguous(first_order_kernel(_mse_first_order)),
    meta=loss_backward_meta, node="MseLossBackwardBackward0", derivative=_mse_backward_derivative,
    save=lambda out, g, x, t, reduction: (g, x, t, reduction),
    samples=lambda rng, dt: _loss_backward_samples(_loss_samples(rng, dt), rng, dt),
    decomposition=_mse_first_order, saved_names=("grad_output", "self", "target", "reduction"),
    result_order="contiguous")


def _check_bce_target(x, t) -> None:
    """binary_cross_entropy's target has the input's dtype (PyTorch's kernel checks it)."""
    if _legacy(t) != _legacy(x):
        raise RuntimeError(f"Found dtype {_legacy(t)} but expected {_legacy(x)}")


def _bce_kernel(x, t, weight=None, reduction=1):
    _check_bce_target(x, t)
    dt = x.dtype
    xw, tw = _work(x), _work(t)
    if ((xw < 0) | (xw > 1)).any():
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = -(tw * np.maximum(np.log(xw), -100) + (1 - tw) * np.maximum(np.log1p(-xw), -100))
    if weight is not None:
        loss = loss * _work(weight)
    return np.asarray(_reduce(loss, reduction)).astype(dt, copy=False)


def _bce_meta(x, t, weight=None, reduction=1):
    if tuple(x.shape) != tuple(t.shape):
        raise ValueError(f"Using a target size ({_torch_size(t.shape)}) that is different to "
                         f"the input size ({_torch_size(x.shape)}) is deprecated. Please "
                         "ensure they have the same size.")
    _check_bce_target(x, t)
    return Spec(tuple(x.shape) if reduction == 0 else (), x.dtype)


def _torch_size(shape) -> str:
    return f"torch.Size({list(shape)})"


def _bce_first_order(g, x, t, weight, reduction):
    # The input's gradient in PyTorch's order (each step rounds in a half type): the
    # gradient times (x - t) over x (1 - x), then the weight, then the mean's 1 / n.
    gx = g * (x - t) / ((1 - x) * x).clamp(min=1e-12)
    if weight is not None:
        gx = gx * weight
    if reduction == 1:
        gx = gx / max(x.numel(), 1)
    return gx


def _bce_derivative(g, x, t, weight, reduction):
    n = max(x.numel(), 1)
    if is_grad_enabled():  # create_graph: PyTorch's op, BinaryCrossEntropyBackwardBackward0
        gx = _call(binary_cross_entropy_backward, g, x, t, weight, reduction)
    else:
        gx = _bce_first_order(g, x, t, weight, reduction)
    g = _scale(g, reduction, n)
    if weight is not None:
        g = g * weight
    # (the target's gradient is the unclamped -logit(x): infinite at 0 and 1, as PyTorch's)
    gt = g * ((1 - x).log() - x.log())
    return (gx, gt, None, None)


def _bce_decomposition(x, t, weight=None, reduction=1):
    loss = -(t * x.log().clamp(min=-100) + (-t + 1) * (-x).log1p().clamp(min=-100))
    return reduced(loss if weight is None else loss * weight, reduction)


binary_cross_entropy = register(
    "binary_cross_entropy", autocast="fp32", kernel=_bce_kernel, meta=_bce_meta,
    node="BinaryCrossEntropyBackward0", derivative=_bce_derivative,
    save=lambda out, x, t, weight=None, reduction=1: (x, t, weight, reduction),
    nondiff_args=(2,), decomposition=_bce_decomposition,
    samples=lambda rng, dt: [
        Sample((s.args[0], s.args[1], None, s.args[2]), name=s.name)
        for s in _loss_samples(rng, dt, (0.05, 0.95))],
    public="binary_cross_entropy", result_order="operands",
    saved_names=("self", "target", "weight", "reduction"))


def _bce_backward_derivative(gg, g, x, t, weight, reduction):
    n = max(x.numel(), 1)
    eps = 1e-12
    # d/dx of (x - t) / (x (1 - x)) is (x^2 - 2 x t + t) / (x (1 - x))^2, its denominator
    # kept off zero as PyTorch's formula does; d/dt is -1 / (x (1 - x))
    gx = gg * g * ((x * x - x * t * 2 + t) / ((x + eps) ** 2 * ((1 - x) + eps) ** 2))
    gt = -(gg * g) / ((1 - x) * x).clamp(min=eps)
    gg_out = gg * (x - t) / ((1 - x) * x).clamp(min=eps)
    if weight is not None:
        gx, gt, gg_out = gx * weight, gt * weight, gg_out * weight
    if reduction == 1:
        gx, gt = gx / n, gt / n
    gg_out = sum_to_grad(gg_out, reduction)
    return (gg_out / n if reduction == 1 else gg_out, gx, gt, None, None)


def _bce_backward_samples(rng, dt):
    out = []
    for s in _loss_samples(rng, dt, (0.05, 0.95)):
        x, t, red = s.args
        shape = np.shape(x) if red == 0 else ()
        out.append(Sample((rand_array(rng, shape, dt), x, t, None, red), name=s.name))
    return out


binary_cross_entropy_backward = register(
    "binary_cross_entropy_backward", kernel=first_order_kernel(_bce_first_order),
    meta=loss_backward_meta, node="BinaryCrossEntropyBackwardBackward0",
    derivative=_bce_backward_derivative,
    save=lambda out, g, x, t, weight=None, reduction=1: (g, x, t, weight, reduction),
    nondiff_args=(3,), optional_tensor_args=(3,), samples=_bce_backward_samples,
    decomposition=_bce_first_order,
    saved_names=("grad_output", "self", "target", "weight", "reduction"),
    result_order="operands")


def _softplus_neg(x):
    """log(1 + exp(-x)), stably."""
    return np.maximum(-x, 0) + np.log1p(np.exp(-np.abs(x)))


def _bcel_dtype(x, t):
    """binary_cross_entropy_with_logits' result dtype: the target's (PyTorch's kernel writes
    into a tensor of the target's type), which must be a float type."""
    target = _dtype.FROM_NP[t.dtype] if isinstance(t, np.ndarray) else t.dtype
    if target is _dtype.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if not target.is_floating_point:
        raise RuntimeError(f"result type {_legacy(x)} can't be cast to the desired output "
                           f"type {target.legacy}")
    return target


def _half_bcel(xw, tw, sp, weight, pos_weight, reduction: int, dt):
    """binary_cross_entropy_with_logits of a half type as PyTorch's composite computes it,
    each step rounded to `dt`: log_sigmoid(x) (times 1 + (pos_weight - 1) t), subtracted
    from (1 - t) x, times the weight; then the reduction (accumulated in float32)."""
    def r(v):
        return np.asarray(v, F32).astype(dt).astype(F32)

    log_sigmoid = r(-sp)
    if pos_weight is not None:
        log_sigmoid = r(log_sigmoid * r(r(r(_work(pos_weight) - 1) * tw) + 1))
    loss = r(r(r(1 - tw) * xw) - log_sigmoid)
    if weight is not None:
        loss = r(loss * _work(weight))
    return np.asarray(_reduce(loss, reduction)).astype(dt, copy=False)


def _bcel_kernel(x, t, weight=None, pos_weight=None, reduction=1):
    dt = _bcel_dtype(x, t).np
    xw, tw = _work(x), _work(t)
    sp = _softplus_neg(xw)
    if dt in HALF:
        return _half_bcel(xw, tw, sp, weight, pos_weight, reduction, dt)
    if pos_weight is not None:
        loss = (1 - tw) * xw + (1 + (_work(pos_weight) - 1) * tw) * sp
    else:
        loss = (1 - tw) * xw + sp
    if weight is not None:
        loss = loss * _work(weight)
    return np.asarray(_reduce(loss, reduction)).astype(dt, copy=False)


def _bcel_derivative(g, x, t, weight, pos_weight, reduction):
    n = max(x.numel(), 1)
    sig = x.sigmoid()
    # The input's gradient in PyTorch's order (each step rounds in a half type): with
    # p = pos_weight * t, ((p + 1 - t) sig - p) (or sig - t) times the gradient, then the
    # weight, then the mean's 1 / n.
    if pos_weight is not None:
        pt = pos_weight * t
        gx = (((pt + 1) - t) * sig - pt) * g
    else:
        gx = (sig - t) * g
    if weight is not None:
        gx = gx * weight
    if reduction == 1:
        # (a number: PyTorch's `div.Scalar`, DivBackward1 under create_graph)
        gx = _call(div_scalar, gx, n)
    g = _scale(g, reduction, n)
    if weight is not None:
        g = g * weight
    if pos_weight is not None:
        sp = (-x).clamp(min=0) + ((-x.abs()).exp() + 1).log()
        gt = g * ((pos_weight - 1) * sp - x)
    else:
        gt = -g * x
    return (gx, gt, None, None, None)


def _bcel_decomposition(x, t, weight=None, pos_weight=None, reduction=1):
    # log(1 + exp(-x)) as max(-x, 0) + log1p(exp(-|x|)): no overflow for large |x|
    softplus_neg = (-x).clamp(min=0) + (-x.abs()).exp().log1p()
    if pos_weight is not None:
        softplus_neg = softplus_neg * ((pos_weight - 1) * t + 1)
    loss = (-t + 1) * x + softplus_neg
    return reduced(loss if weight is None else loss * weight, reduction)


binary_cross_entropy_with_logits = register(
    "binary_cross_entropy_with_logits", autocast="fp32", kernel=_bcel_kernel,
    meta=lambda x, t, w=None, pw=None, reduction=1: Spec(
        _loss_meta(x, t, reduction).shape, _bcel_dtype(x, t)),
    node="BinaryCrossEntropyWithLogitsBackward0", derivative=_bcel_derivative,
    save=lambda out, x, t, weight=None, pos_weight=None, reduction=1: (
        x, t, weight, pos_weight, reduction),
    nondiff_args=(2, 3), decomposition=_bcel_decomposition,
    samples=lambda rng, dt: [
        Sample((s.args[0], rand_array(rng, np.shape(s.args[0]), dt, (0.0, 1.0)), None, None,
                s.args[2]), name=s.name) for s in _loss_samples(rng, dt)],
    public="binary_cross_entropy_with_logits", result_order="operands",
    onnx=_ox.bce_with_logits)

REDUCTION_ENUM = {"none": 0, "mean": 1, "sum": 2}

