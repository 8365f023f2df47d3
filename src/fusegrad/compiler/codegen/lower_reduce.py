"""Lowering's reductions: `ReductionOps`, reductions as computations with loop nests of their
own, and the ops built of them (mean, var, softmax)."""

from __future__ import annotations

from ... import _dtype
from .ir import IInt, Op, Pointwise, Reduction, is_float, numel
from .lower_pointwise import SUPPORTED, NotLowered, _wrap, body_at, is_tensor
from .lower_views import ViewOps


class ReductionOps(ViewOps):
    """The expression builder's reductions (keepdim results are views of their buffers)."""

    # ------------------------------------------------------------ reductions

    def reduce(self, kind: str, x, dims=None, keepdim: bool = False, dtype=None) -> Pointwise:
        """Reduce `x` over `dims` (all when None or empty) with `kind` (sum prod max min
        argmax argmin); the result is computed by its own loop nest."""
        if not is_tensor(x):
            raise NotLowered("reduction of a number")
        nd = len(x.shape)
        if isinstance(dims, int):
            dims = (dims,)
        axes = sorted({_wrap(d, max(nd, 1)) for d in dims}) if dims else list(range(nd))
        if nd == 0:
            axes = []
        acc = dtype or x.dtype
        if kind in ("sum", "prod") and dtype is None and not is_float(x.dtype):
            acc = _dtype.int64
        if kind in ("argmax", "argmin"):
            acc = _dtype.int64
            if dims is not None and not isinstance(dims, (list, tuple)):
                dims = (dims,)
        if acc not in SUPPORTED or x.dtype not in SUPPORTED:
            raise NotLowered(f"dtype {acc!r} has no C type")
        kept = [d for d in range(nd) if d not in axes]
        out_shape = tuple(x.shape[d] for d in kept)
        red_shape = tuple(x.shape[d] for d in axes)
        value_dtype = acc if kind in ("sum", "prod") else x.dtype
        if kind in ("max", "min", "argmax", "argmin") and not numel(red_shape):
            raise NotLowered("max of nothing")  # eager raises its error

        def fn(index, rindex):
            full = [None] * nd
            for d, i in zip(kept, index):
                full[d] = i
            for d, r in zip(axes, rindex):
                full[d] = r
            e = body_at(x, tuple(full))
            return e if x.dtype is value_dtype else Op("cast", (e,), value_dtype)

        red = Reduction(out_shape, red_shape, kind, acc, fn)
        buf = self.graph.add_computation(red)
        if not keepdim:
            return buf
        shape = tuple(1 if d in axes else x.shape[d] for d in range(nd))
        return self.view_index(buf, shape, lambda idx: tuple(idx[d] for d in kept))

    def scatter(self, a, dim, index, src, accumulate: bool = False):
        """`a.scatter(dim, index, src)` (`scatter_add` with `accumulate`) as a kernel of
        its own (`scatter.py`): along the last dim, an index and source of one shape."""
        from .scatter import lower_scatter

        return lower_scatter(self.graph, a, dim, index, src, accumulate)

    def mean(self, x, dims=None, keepdim: bool = False, dtype=None):
        """The mean over `dims` (all when None or empty): a sum, then one division."""
        dt = dtype or x.dtype
        total = self.reduce("sum", x, dims, keepdim, dt)
        return self.to(self.truediv(total, self.count(x, dims)), dt)

    def var(self, x, dims=None, correction=None, keepdim: bool = False, sqrt: bool = False):
        """Variance (two passes: the mean, then the sum of squared deviations, so no
        cancellation as in E[x^2] - E[x]^2) divided by `count - correction` (1 when None);
        its square root with `sqrt`. Both reductions run in one loop nest per row."""
        return self.var_mean(x, dims, correction, keepdim, sqrt)[0]

    def var_mean(self, x, dims=None, correction=None, keepdim: bool = False,
                 sqrt: bool = False, wide: bool = False) -> tuple:
        """(var or std, mean) as `var`, the mean being its first pass. With `wide` (the
        var_mean ops), float32 and half inputs are computed in float64 and rounded once, as
        eager's (PyTorch's Welford pass) are; `var` alone stays in float32 as its kernel."""
        if not is_float(x.dtype):
            raise NotLowered("var of an integer tensor")
        if wide and x.dtype is not _dtype.float64:
            v, m = self.var_mean(self.to(x, _dtype.float64), dims, correction, keepdim, sqrt)
            return self.to(v, x.dtype), self.to(m, x.dtype)
        dims = dims if dims else None
        n = self.count(x, dims)
        if n == 0:
            raise NotLowered("var of an empty tensor")
        mean = self.truediv(self.reduce("sum", x, dims, True), n)
        d = self.sub(x, mean)
        ss = self.reduce("sum", self.mul(d, d), dims, keepdim)
        out = self.truediv(ss, max(n - (1.0 if correction is None else correction), 0))
        nd = len(x.shape)
        axes = {_wrap(a, max(nd, 1)) for a in ([dims] if isinstance(dims, int) else dims)} \
            if dims is not None else set(range(nd))
        mean = self._welford_mean(x, mean, dims, axes)
        if not keepdim:
            kept = [a for a in range(nd) if a not in axes]
            mean = self.view_index(mean, tuple(x.shape[a] for a in kept), lambda idx: tuple(
                idx[kept.index(a)] if a in kept else IInt(0) for a in range(nd)))
        return (self.unary("sqrt", out) if sqrt else out), mean

    def _welford_mean(self, x, mean, dims, axes):
        """var_mean's mean as eager's (PyTorch's Welford pass): NaN where a row holds an
        infinity anywhere but at its very end (x - x is NaN exactly for inf and NaN)."""
        z = self.sub(x, x)
        bad = self.reduce("sum", self.where(self.compare("ne", z, z), 1.0, 0.0), dims, True)
        last = self.view_index(x, mean.shape, lambda idx: tuple(
            IInt(x.shape[a] - 1) if a in axes else idx[a] for a in range(len(x.shape))))
        zl = self.sub(last, last)
        ends = self.where(self.compare("ne", zl, zl), 1.0, 0.0)  # 1 where the last is bad
        keep = self.compare("eq", bad, ends)  # no bad element, or only the last one
        return self.where(keep, mean, float("nan"))

    def softmax(self, x, dim: int, log: bool = False):
        """softmax (or log_softmax) along `dim`: max, sum of exp, then the division."""
        if not is_float(x.dtype) or not len(x.shape) or not numel(x.shape):
            raise NotLowered("softmax of a 0-d, empty or integer tensor")
        shifted = self.sub(x, self.reduce("max", x, (dim,), True))
        total = self.reduce("sum", self.unary("exp", shifted), (dim,), True)
        if log:
            return self.sub(shifted, self.unary("log", total))
        return self.truediv(self.unary("exp", shifted), total)

    def count(self, x, dims=None) -> int:
        """How many elements a reduction of `x` over `dims` combines."""
        nd = len(x.shape)
        if isinstance(dims, int):
            dims = (dims,)
        axes = {_wrap(d, max(nd, 1)) for d in dims} if dims else set(range(nd))
        return numel([x.shape[d] for d in axes if d < nd])
