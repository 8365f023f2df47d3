"""The kernels of the special functions: erf and erfc in C, the others imported at their
first call.

`erf` and `erfc` run the C kernels of `native/math.c` on float32 and float64 arrays (one
vectorised pass, shared between threads; float32 with the generated code's functions,
`_mathlib.py`). NumPy has no erf, and the NumPy versions below took ~75 ns a value. Without a
C compiler they fall back to the kernels below.

The gamma family, the error functions and the Bessel `i0`/`i1` come from SciPy's `special`
when SciPy is installed (exact to the last bit) and from `_special_numpy` otherwise; the
Hurwitz zeta, `ndtri`, the scaled and the `j` Bessel functions and `xlog1py` always come from
`_bessel_zeta_numpy`.

Decision: none of these modules is imported with fusegrad. Importing SciPy's `special` takes
100-250 ms (SciPy 1.17: it loads its array-API layer), three times the rest of
`import fusegrad`, and the NumPy versions are ~1,000 lines of kernels few programs call.
Each kernel is a `LazyKernel` that imports its module at its first call and then calls the
function it found directly (one Python call more per use).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from . import _native


def _scipy_or_numpy() -> ModuleType:
    try:
        from scipy import special
    except ImportError:  # pragma: no cover - depends on the environment
        from . import _special_numpy as special
    return special


def _numpy_bessel_zeta() -> ModuleType:
    from . import _bessel_zeta_numpy

    return _bessel_zeta_numpy


class LazyKernel:
    """A function of a module that is imported when the function is first called."""

    __slots__ = ("_load", "_fn", "__name__")

    def __init__(self, load, name: str) -> None:
        self._load = load
        self._fn = None
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        fn = self._fn
        if fn is None:
            fn = self._fn = getattr(self._load(), self.__name__)
        return fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<kernel {self.__name__} (imported at its first call)>"


_erf = LazyKernel(_scipy_or_numpy, "erf")
_erfc = LazyKernel(_scipy_or_numpy, "erfc")
erfcx = LazyKernel(_scipy_or_numpy, "erfcx")
erfinv = LazyKernel(_scipy_or_numpy, "erfinv")
gammaln = LazyKernel(_scipy_or_numpy, "gammaln")
psi = LazyKernel(_scipy_or_numpy, "psi")
polygamma = LazyKernel(_scipy_or_numpy, "polygamma")
i0 = LazyKernel(_scipy_or_numpy, "i0")
i1 = LazyKernel(_scipy_or_numpy, "i1")

zeta = LazyKernel(_numpy_bessel_zeta, "zeta")
ndtri = LazyKernel(_numpy_bessel_zeta, "ndtri")
i0e = LazyKernel(_numpy_bessel_zeta, "i0e")
i1e = LazyKernel(_numpy_bessel_zeta, "i1e")
j0 = LazyKernel(_numpy_bessel_zeta, "j0")
j1 = LazyKernel(_numpy_bessel_zeta, "j1")
spherical_j0 = LazyKernel(_numpy_bessel_zeta, "spherical_j0")
xlog1py = LazyKernel(_numpy_bessel_zeta, "xlog1py")


# ---------------------------------------------------------------- in C


def _in_c_or(name: str, fallback: LazyKernel):
    """Kernel `name` in C on float32/float64 arrays, `fallback` for anything else."""

    def kernel(x):
        if x.__class__ is np.ndarray:
            out = _native.elementwise("math", name, (x,))
            if out is not None:
                return out
        return fallback(x)

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


# The error function and its complement 1 - erf(x) (computed without cancellation), with
# SciPy's ufuncs' conventions (float dtypes kept).
erf = _in_c_or("erf", _erf)
erfc = _in_c_or("erfc", _erfc)
