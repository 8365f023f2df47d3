"""Linear algebra: mm, bmm, mv, dot, matmul (a composite over them), outer, addmm, baddbmm,
addmv, tensordot and einsum (`torch.linalg` is the `fusegrad.linalg` package).
"""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from .. import _autocast, _dtype
from .._autocast import active as _autocast_active
from .._dispatch import call, call2
from .._scalar_conversion import not_implemented_for
from .._shapes import iterator_layout
from .._tensor import Tensor
from ..ops import linalg as L
from ..ops import pointwise as P
from ..ops import shape as S
from ..ops._util import wrap_dim
from .pointwise import add, mul
from .reduction import sum
from .shape import _prod, diagonal, permute, reshape, unsqueeze

# ---------------------------------------------------------------- linear algebra


def mm(input, mat2, *, out=None):
    """Matrix product of two 2-D tensors."""
    return call(L.mm, input, mat2)


def bmm(input, mat2, *, out=None):
    """Batched matrix product of two 3-D tensors."""
    return call(L.bmm, input, mat2)


def mv(input, vec, *, out=None):
    """Matrix-vector product."""
    return call(L.mv, input, vec)


def dot(input, tensor, *, out=None):
    """Dot product of two 1-D tensors (PyTorch names the second `tensor`)."""
    return call(L.dot, input, tensor)


def matmul(input, other, *, out=None):
    """Matrix product with PyTorch's rules for 1-D, 2-D and batched operands."""
    if input.__class__ is Tensor and other.__class__ is Tensor and \
            input._data.ndim == 2 and other._data.ndim == 2:
        return call2(L.mm, input, other)  # the common case, `a @ b` of two matrices
    if _autocast_active():  # autocast casts matmul's operands (mm's own casts did above)
        return _autocast.call_composite(matmul, "lower", (input, other), {})
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        from .._dispatch import handle_function

        return handle_function(matmul, (input, other), {})
    da, db = input.ndim, other.ndim
    if da == 0 or db == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return dot(input, other)
    if da == 2 and db == 1:
        return mv(input, other)
    if da == 1 and db == 2:
        return call(S.squeeze_inplace, mm(input.unsqueeze(0), other), 0)
    if da == 2 and db == 2:
        return mm(input, other)
    if da >= 3 and db <= 2:
        # Fold the batch into the rows: one mm (or mv) over a 2-D view.
        lead = tuple(input.shape[:-1])
        folded = reshape(input, (_prod(lead), input.shape[-1]))  # (not -1: k may be 0)
        if db == 1:
            return call(S.unsafe_view, mv(folded, other), lead)
        return call(S.unsafe_view, mm(folded, other), lead + (other.shape[-1],))
    if da <= 2 and db >= 3:
        if input.shape[-1] != other.shape[-2]:
            raise RuntimeError(
                "Expected size for first two dimensions of batch2 tensor to be: "
                f"[{_prod(other.shape[:-2])}, {input.shape[-1]}] but got: "
                f"[{_prod(other.shape[:-2])}, {other.shape[-2]}].")
        if da == 1:
            return matmul(other.mT, input)
        return matmul(other.mT, input.mT).mT.contiguous()
    # Batched: broadcast the batch dims, flatten them, one bmm.
    from ..ops._util import broadcast_shapes

    a = input.unsqueeze(0) if da == 1 else input
    b = other.unsqueeze(-1) if db == 1 else other
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    n, k = a.shape[-2], a.shape[-1]
    k2, m = b.shape[-2], b.shape[-1]
    if k != k2:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: "
            f"[{_prod(batch)}, {k}] but got: [{_prod(batch)}, {k2}].")
    # (not -1: a 0x0 matrix batch has no elements to infer the batch size from)
    a3 = reshape(a.expand(batch + (n, k)), (_prod(batch), n, k))
    b3 = reshape(b.expand(batch + (k, m)), (_prod(batch), k, m))
    shape = batch + ((n,) if da > 1 else ()) + ((m,) if db > 1 else ())
    return call(S.unsafe_view, bmm(a3, b3), shape)


# `a @ b` of two plain matrices, run in the protocol wrapper's own frame (`_exact_source`).
matmul.plain_path = ("self.__class__ is Tensor and other.__class__ is Tensor and "
                     "self._data.ndim == 2 and other._data.ndim == 2",
                     "call2(mm, self, other)", {"Tensor": Tensor, "call2": call2, "mm": L.mm})
matmul.matrix_op = L.mm  # Tensor's `__matmul__` gets mm's recorder written in, for matrices

# ---------------------------------------------------------------- more linear algebra


def outer(input, vec2, *, out=None):
    """Outer product of two vectors (recorded as a broadcast multiply, as in PyTorch)."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {input.ndim}-D"
                           if input.ndim != 1 else
                           f"outer: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    return call(P.mul, reshape(input, (-1, 1)), vec2)


def ger(input, vec2, *, out=None):
    """`outer` under its older name (a function of its own: PyTorch's messages name it)."""
    return outer(input, vec2)


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat1 @ mat2)."""
    from ..ops import nn as _nn_ops

    return call(_nn_ops.addmm, input, mat1, mat2, beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (batch1 @ batch2), batched."""
    return call(L.baddbmm, input, batch1, batch2, beta, alpha)


def _addmv_check(input, mat, vec, beta, alpha) -> None:
    """PyTorch's addmv checks: a vector (or a number's 0-d tensor) plus a matrix times a
    vector, the input of the product's size (or of one element)."""
    if not all(isinstance(t, Tensor) for t in (input, mat, vec)):
        return  # (the argument parser's errors come from the operations below)
    if not (mat.dim() == 2 and vec.dim() == 1 and input.dim() <= 1):
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.dim()}, {mat.dim()}, "
                           f"{vec.dim()}")
    if mat.shape[1] != vec.shape[0] or (mat.shape[0] != input.numel() and input.numel() != 1):
        first = input.shape[0] if input.dim() else input.numel()
        raise RuntimeError(f"size mismatch, got input ({first}), mat ({mat.shape[0]}x"
                           f"{mat.shape[1]}), vec ({vec.shape[0]})")
    if not (input.dtype is mat.dtype is vec.dtype):
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{input.dtype.legacy}, {mat.dtype.legacy}, and {vec.dtype.legacy}")
    if not mat.dtype.is_complex and any(isinstance(c, complex) for c in (beta, alpha)):
        # (PyTorch names the C++ type the coefficient converts to: int64_t for Long)
        cpp = "int64_t" if mat.dtype is _dtype.int64 else mat.dtype.cpp
        raise RuntimeError(f"value cannot be converted to type {cpp} without overflow")


def _one_op_addmv(input, mat, vec, beta, alpha) -> bool:
    """Whether PyTorch's one `addmv` op (AddmvBackward0) computes this call here: tensors of
    one floating or complex dtype and real coefficients (or complex tensors). The other
    calls (integer or mixed dtypes, whose promotion and checks `mv` and `add` give) are
    computed as the sum of those."""
    if not (isinstance(input, Tensor) and isinstance(mat, Tensor) and isinstance(vec, Tensor)):
        return False
    dt = mat.dtype
    if input.dtype is not dt or vec.dtype is not dt or not (dt.is_floating_point or
                                                              dt.is_complex):
        return False
    return dt.is_complex or not any(isinstance(c, complex) or (
        isinstance(c, Tensor)) for c in (beta, alpha))


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat @ vec)."""
    _addmv_check(input, mat, vec, beta, alpha)
    if _one_op_addmv(input, mat, vec, beta, alpha):
        return call(L.addmv, input, mat, vec, beta, alpha)
    prod = mv(mat, vec)
    if not (prod.dtype.is_floating_point or prod.dtype.is_complex):
        beta, alpha = L.integer_coefficients(prod.dtype.np, beta, alpha)
    return add(input * beta if beta != 1 else input, prod * alpha if alpha != 1 else prod)


def tensordot(a, b, dims=2, out=None):
    """Sum over the paired dims of `a` and `b` (the last `dims` of a, first of b)."""
    if isinstance(dims, Tensor) and not dims.ndim:  # a 0-d integer tensor is a count
        dims = dims.__index__()
    if isinstance(dims, numbers.Integral):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da = list(range(-dims, 0))  # counted from the end, as PyTorch's
        db = list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, numbers.Integral) else list(da)
        db = [db] if isinstance(db, numbers.Integral) else list(db)
    if isinstance(da, Tensor):
        da = da.tolist()
    given = list(zip(da, db))  # the dims as given name them in the error, as PyTorch's
    da = [wrap_dim(d, a.ndim) for d in da]
    db = [wrap_dim(d, b.ndim) for d in db]
    for x, y, (gx, gy) in zip(da, db, given):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[x]} in dim "
                f"{gx} and second has size {b.shape[y]} in dim {gy}")
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = _prod([a.shape[d] for d in da])
    if not fa and not fb and a.dtype is _dtype.bool_ and k:
        # A full contraction is PyTorch's dot, which has no bool kernel.
        raise not_implemented_for("dot", "Bool")
    left = reshape(permute(a, fa + da), (_prod([a.shape[d] for d in fa]), k))
    right = reshape(permute(b, db + fb), (k, _prod([b.shape[d] for d in fb])))
    return reshape(mm(left, right), tuple(a.shape[d] for d in fa) + tuple(
        b.shape[d] for d in fb))


def _subscripts(sublist) -> str:
    """An einsum sublist (`[0, 1]`, `[Ellipsis, 2]`) as equation letters."""
    letters = []
    for i in sublist:
        if i is Ellipsis:
            letters.append("...")
            continue
        i = int(i)
        if not 0 <= i < 52:
            raise ValueError("einsum(): subscript in subscript list is not within the valid "
                             "range [0, 52)")
        letters.append(chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26))
    return "".join(letters)


def _sublist_form(args: tuple) -> tuple[str, tuple]:
    """`einsum(op1, sublist1, op2, sublist2, ..., [out_sublist])` as an equation and its
    operands."""
    out = None
    if len(args) % 2:
        *args, out = args
    operands = tuple(args[0::2])
    equation = ",".join(_subscripts(s) for s in args[1::2])
    if out is not None:
        equation += "->" + _subscripts(out)
    return equation, operands


def einsum(equation, *operands):
    """Einstein summation, contracting operands pairwise with batched matrix products."""
    if isinstance(equation, Tensor):  # the sublist form
        equation, operands = _sublist_form((equation, *operands))
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    _einsum_check(equation, operands)
    eq = equation.replace(" ", "")
    lhs, arrow, out_spec = eq.partition("->")
    specs = lhs.split(",")
    width = _max_ellipsis(specs, operands)
    specs = [_expand_ellipsis(s, t.ndim, width) for s, t in zip(specs, operands)]
    if not arrow:
        counts = {}
        for s in specs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        ell = _ELLIPSIS_LETTERS[:width]
        out_spec = ell + "".join(sorted(c for c, n in counts.items()
                                        if n == 1 and c not in ell))
    else:
        out_spec = _expand_ellipsis(out_spec, None, width)
    terms = [_einsum_prepare(t, s) for t, s in zip(operands, specs)]
    # PyTorch aligns every operand to one order of letters: the output's, then the others
    # in their character order; the products' layouts follow it.
    letters = out_spec + "".join(sorted({c for _, s in terms for c in s} - set(out_spec)))
    t, s = terms[0]
    if len(terms) == 1:
        # One operand: put the kept letters first, in output order (a permute, as PyTorch
        # records even when it is the identity), then sum the others.
        order = [s.index(c) for c in out_spec] + [i for i, c in enumerate(s) if c not in out_spec]
        t = permute(t, order)
        s = "".join(s[i] for i in order)
    contracted = False
    for k in range(1, len(terms)):
        later = "".join(x for _, x in terms[k + 1:])
        t, s, contracted = _einsum_pair(t, s, terms[k][0], terms[k][1], out_spec + later,
                                        letters, len(terms) == 2)
    # Sum what the output does not keep, then order the remaining letters.
    drop = [i for i, c in enumerate(s) if c not in out_spec]
    if drop and len(terms) > 1 and builtins.all(t.shape[i] == 1 for i in drop):
        # What pairs leave unsummed has size 1: viewed away, as PyTorch does (no promotion).
        t = reshape(t, tuple(n for i, n in enumerate(t.shape) if i not in drop))
        s = "".join(c for c in s if c in out_spec)
    elif drop:
        t = sum(t, drop)
        s = "".join(c for c in s if c in out_spec)
    if s != out_spec:
        t = permute(t, [s.index(c) for c in out_spec])
        if contracted:
            # PyTorch views its last product's permuted result to the output's shape (what
            # drops its summed dims of size 1): the output's node is a view's
            t = reshape(t, t.shape)
    return t


def _einsum_subscripts(text: str, start: int, where: str) -> list:
    """The subscripts of one operand's (or the output's) part of an einsum equation, with
    "..." kept as one entry; `start` is the part's index in the equation, for messages."""
    out: list = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == ".":
            if text[i:i + 3] != "...":
                raise RuntimeError(f"einsum(): found '.' for {where} that is not part of any "
                                   "ellipsis" + (" (...)" if where == "output" else ""))
            if "..." in out:
                raise RuntimeError("einsum(): found '.' for output but an ellipsis (...) was "
                                   "already found" if where == "output" else
                                   f"einsum(): found '.' for {where} for which an ellipsis was "
                                   "already found")
            out.append("...")
            i += 3
            continue
        if not (c.isascii() and c.isalpha()) and c != " ":
            raise RuntimeError(f"einsum(): invalid subscript given at index {start + i} in the "
                               "equation string, subscripts must be in [a-zA-Z]")
        if c != " ":
            out.append(c)
        i += 1
    return out


def _einsum_check(equation: str, operands: tuple) -> None:
    """PyTorch's checks of an einsum equation against its operands, with its messages: the
    characters, the number of operands, each operand's rank, the output's subscripts and
    that the sizes a subscript (or the ellipsis) stands for broadcast."""
    lhs, arrow, rhs = equation.partition("->")
    specs, start = [], 0
    for k, part in enumerate(lhs.split(",")):
        specs.append(_einsum_subscripts(part, start, f"operand {k}"))
        start += len(part) + 1
    output = _einsum_subscripts(rhs, len(lhs) + 2, "output") if arrow else None
    if len(specs) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                           "equation" if len(operands) > len(specs) else
                           "einsum(): fewer operands were provided than specified in the "
                           "equation")
    for k, (spec, t) in enumerate(zip(specs, operands)):
        letters = len(spec) - ("..." in spec)
        if "..." not in spec and letters != t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({letters}) "
                               f"does not match the number of dimensions ({t.ndim}) for "
                               f"operand {k} and no ellipsis was given")
        if letters > t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({letters}) "
                               f"is more than the number of dimensions ({t.ndim}) for "
                               f"operand {k}")
    for i, c in enumerate(output or ()):
        if c != "..." and c in output[:i]:
            raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the "
                               "output")
        if c != "..." and not any(c in spec for spec in specs):
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                               "equation for any input operand")
    sizes: dict = {}
    ellipsis: list = []  # the broadcast sizes the ellipsis stands for, last dim last
    for k, (spec, t) in enumerate(zip(specs, operands)):
        shape = tuple(t.shape)
        letters = len(spec) - ("..." in spec)
        dim, own = 0, {}
        for c in spec:
            if c == "...":
                span = shape[dim:dim + len(shape) - letters]
                dim += len(span)
                pad = len(span) - len(ellipsis)
                if pad > 0:
                    ellipsis[:0] = [1] * pad
                for j, n in enumerate(span):
                    i = len(ellipsis) - len(span) + j
                    if n != ellipsis[i] and 1 not in (n, ellipsis[i]):
                        raise RuntimeError(
                            f"einsum(): dimension {j} covered by ellipsis in operand {k}has "
                            f"size {n} which does not broadcast with previously seen ellipsis "
                            f"with size {ellipsis[i]} for the respective dimension")
                    ellipsis[i] = builtins.max(n, ellipsis[i])
                continue
            n = shape[dim]
            dim += 1
            if c in own and own[c] != n:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but "
                                   f"the sizes don't match, {n} != {own[c]}")
            own[c] = n
            seen = sizes.get(c)
            if seen is not None and n != seen and 1 not in (n, seen):
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {k} which "
                                   f"does not broadcast with previously seen size {seen}")
            sizes[c] = n if seen is None or seen == 1 else seen


def _max_ellipsis(specs, operands):
    n = 0
    for s, t in zip(specs, operands):
        if "..." in s:
            n = builtins.max(n, t.ndim - (len(s) - 3))
    return n


_ELLIPSIS_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _expand_ellipsis(spec, ndim, width):
    if "..." not in spec:
        return spec
    k = width if ndim is None else ndim - (len(spec) - 3)
    return spec.replace("...", _ELLIPSIS_LETTERS[width - k:width])


def _einsum_prepare(t, s):
    """Take diagonals of repeated letters in one operand."""
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i = s.index(c)
        j = s.index(c, i + 1)
        t = diagonal(t, 0, i, j)
        s = s[:i] + s[i + 1:j] + s[j + 1:] + c
    return t, s


def _aligned(t, s: str, letters: list):
    """Operand `t` (its dims lettered `s`) with a dim for each of `letters`, in their order:
    as PyTorch aligns it, a size-1 dim (stride 1) appended for each letter it lacks, then
    permuted."""
    for c in letters:
        if c not in s:
            t = unsqueeze(t, t.ndim)
            s += c
    return permute(t, [s.index(c) for c in letters])


def _einsum_pair(a, sa, b, sb, out_spec, order: str, only_pair: bool = False):
    """Contract two operands: letters in both and kept are batch dims, letters in both and not
    kept are summed by a bmm; the others stay free. `order`: the einsum's order of letters;
    `only_pair`: the einsum's only two operands. Returns the product, its letters and whether
    a bmm made it."""
    # Sum letters that appear only in one operand and not in the output early.
    for t_name in ("a", "b"):
        t, s, other = (a, sa, sb) if t_name == "a" else (b, sb, sa)
        # (A size-1 letter stays, to be viewed away at the end: a sum would promote integers.)
        drop = [i for i, c in enumerate(s)
                if c not in other and c not in out_spec and t.shape[i] != 1]
        if drop:
            # (summed in the einsum's order of letters, as PyTorch sums its aligned operands:
            # the sum's row-major result is laid out in that order)
            aligned = sorted(range(len(s)), key=lambda i: order.index(s[i]))
            if aligned != list(range(len(s))):
                t = permute(t, aligned)
                s = "".join(s[i] for i in aligned)
                drop = [i for i, c in enumerate(s)
                        if c not in other and c not in out_spec and t.shape[i] != 1]
            t = sum(t, drop)
            s = "".join(c for i, c in enumerate(s) if i not in drop)
        if t_name == "a":
            a, sa = t, s
        else:
            b, sb = t, s
    # A summed letter of size 1 in one operand is no contraction (PyTorch's rule): the other
    # operand is summed over it and the pair multiplied there, broadcast, so operands of
    # different dtypes meet in a product (which promotes) rather than a bmm (which refuses).
    for c in [c for c in sa if c in sb and c not in out_spec]:
        na, nb_ = a.shape[sa.index(c)], b.shape[sb.index(c)]
        if na != 1 and nb_ == 1:
            a = sum(a, sa.index(c), True)
        elif nb_ != 1 and na == 1:
            b = sum(b, sb.index(c), True)
    batch = [c for c in sa if c in sb and (
        c in out_spec or a.shape[sa.index(c)] == 1 or b.shape[sb.index(c)] == 1)]
    contract = [c for c in sa if c in sb and c not in batch]
    fa = [c for c in sa if c not in sb]
    fb = [c for c in sb if c not in sa]
    size = {}
    for t, s in ((a, sa), (b, sb)):
        for i, c in enumerate(s):
            # (a size of 1 broadcasts against the other operand's; 0 does not become 1)
            size[c] = t.shape[i] if size.get(c, 1) == 1 else size[c]
    letters = sorted(set(sa) | set(sb), key=order.index)
    if not contract:  # nothing to sum: a broadcast product (PyTorch records a mul) of the
        # operands aligned to the einsum's order, whose iterator lays the result out
        a, b = _aligned(a, sa, letters), _aligned(b, sb, letters)
        r = mul(a, b)
        if r._data.__class__ is np.ndarray:  # (eager: the product kept NumPy's order)
            r._data = iterator_layout(r._data, a._data, b._data)
        return r, "".join(letters), False
    # PyTorch's product lays out the kept dims by their sizes, each group in the einsum's
    # order: those of a size above 1 in both (batch), in the left operand only, the rest
    # (right); a size-1 dim of one operand is left out of its matrices. Where every right
    # dim comes before every left one in that order, the operands change places, so that
    # the product is laid out as the order asks (`ij,jk->ki` is contiguous).
    def wide(t, s, c):
        return c in s and t.shape[s.index(c)] != 1

    kept = [c for c in letters if c not in contract]
    batch = [c for c in kept if wide(a, sa, c) and wide(b, sb, c)]
    fa = [c for c in kept if c not in batch and wide(a, sa, c)]
    fb = [c for c in kept if c not in batch and c not in fa]
    if only_pair and fa and fb and order.index(fb[-1]) < order.index(fa[0]):
        a, sa, b, sb = b, sb, a, sa
        fa = [c for c in kept if c not in batch and wide(a, sa, c)]
        fb = [c for c in kept if c not in batch and c not in fa]
    rest_a = [c for c in sa if c not in batch + fa + contract]
    rest_b = [c for c in sb if c not in batch + contract + fb]
    a = permute(a, [sa.index(c) for c in batch + fa + contract + rest_a])
    b = permute(b, [sb.index(c) for c in batch + contract + fb if c in sb] +
                [sb.index(c) for c in rest_b])
    nb = _prod([size[c] for c in batch])
    m = _prod([size[c] for c in fa])
    k = _prod([size[c] for c in contract])
    n = _prod([size[c] for c in fb])
    r = bmm(reshape(a, (nb, m, k)), reshape(b, (nb, k, n)))
    r = reshape(r, tuple(size[c] for c in batch + fa + fb))
    return r, "".join(batch + fa + fb), True
