"""NumPy's OpenBLAS thread count, read and set through the library's own functions.

OpenBLAS runs a large GEMM on its own pthreads, and after each such call those threads
busy-wait for the next one (about 0.1 s, yielding between checks) rather than sleep. Beside
fusegrad's intra-op pool that is one thread too many per core: on two cores the BLAS spinner,
the calling thread and a pool thread take turns, and a LeNet-5 step took twice as long with
two threads as with one. So fusegrad runs its GEMMs with OpenBLAS held to one thread and
splits a large GEMM over its own threads (`_gemm.matmul`): one set of helper threads, as
PyTorch's OpenMP pool serves both its BLAS and its kernels, and no BLAS thread spins.

The library is found among the loaded shared objects (NumPy's wheels bundle it as
`scipy_openblas`); with another BLAS (MKL, Accelerate) `available()` is False and GEMMs keep
the BLAS's own threading.
"""

from __future__ import annotations

import os

# OpenBLAS itself runs a GEMM of at most this many multiply-adds (M * N * K) on the calling
# thread (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD): such a call wakes no BLAS thread.
SERIAL_MNK = 65536 * 4


class _Lib:
    loaded = False
    get = None
    set = None
    corename = None
    # Per dtype character ("f", "d"): (address of CBLAS's GEMM, whether its integers are
    # 64-bit), for the GEMM pieces run in C (`native/gemm.c`).
    gemms: dict = {}


_lib = _Lib()

_NAMES = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
          ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
          ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
          ("openblas_get_num_threads", "openblas_set_num_threads"))
# CBLAS GEMMs whose integer width the name tells: NumPy's wheels bundle scipy-openblas64
# (64-bit integers, the `64_` suffix); scipy-openblas32 has no suffix. A plain
# `cblas_sgemm` may take either width, so it is not used.
_GEMM_NAMES = (("scipy_cblas_{}gemm64_", True), ("cblas_{}gemm64_", True),
               ("scipy_cblas_{}gemm", False))


def _openblas_paths() -> list[str]:
    """Paths of the loaded shared objects whose name mentions OpenBLAS (Linux)."""
    try:
        with open("/proc/self/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    paths = []
    for line in lines:
        parts = line.split(maxsplit=5)  # address, perms, offset, device, inode, path
        path = parts[5] if len(parts) == 6 else ""
        name = os.path.basename(path).lower()
        if "openblas" in name and ".so" in name and path not in paths:
            paths.append(path)
    return paths


def _load() -> None:
    _lib.loaded = True
    import ctypes  # on the first large GEMM, not at import

    import numpy  # noqa: F401  (NumPy loads its BLAS; fusegrad has imported it already)

    for path in _openblas_paths():
        try:
            dll = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, set_name in _NAMES:
            get, put = getattr(dll, get_name, None), getattr(dll, set_name, None)
            if get is not None and put is not None:
                get.restype = ctypes.c_int
                get.argtypes = []
                put.restype = None
                put.argtypes = [ctypes.c_int]
                _lib.get, _lib.set = get, put
                core = getattr(dll, get_name.replace("num_threads", "corename"), None)
                if core is not None:
                    core.restype = ctypes.c_char_p
                    core.argtypes = []
                    _lib.corename = core
                _find_gemms(dll)
                return


def _find_gemms(dll) -> None:
    import ctypes

    for kind in "fd":
        letter = "s" if kind == "f" else "d"
        for pattern, wide in _GEMM_NAMES:
            fn = getattr(dll, pattern.format(letter), None)
            if fn is not None:
                _lib.gemms[kind] = (ctypes.cast(fn, ctypes.c_void_p).value, wide)
                break


def available() -> bool:
    """Whether NumPy's BLAS is an OpenBLAS whose thread count can be set."""
    if not _lib.loaded:
        _load()
    return _lib.set is not None


def get_threads() -> int:
    """OpenBLAS's current thread count (call only when `available()`)."""
    return int(_lib.get())


def set_threads(n: int) -> None:
    """Set OpenBLAS's thread count (call only when `available()`)."""
    _lib.set(int(n))


def core_name() -> str | None:
    """The kernel family OpenBLAS chose for this CPU (`Haswell`, `SkylakeX`, ...; the
    `OPENBLAS_CORETYPE` environment variable, read when NumPy loads, overrides its choice),
    or None without a settable OpenBLAS."""
    if not available() or _lib.corename is None:
        return None
    return _lib.corename().decode()


def gemm(kind: str) -> tuple[int, bool] | None:
    """(address, 64-bit integers?) of the settable OpenBLAS's CBLAS GEMM for dtype
    character `kind` ("f" float32, "d" float64), or None."""
    if not available():
        return None
    return _lib.gemms.get(kind)
