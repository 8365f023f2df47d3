"""The window functions of `torch.signal.windows`, computed with fusegrad's ops in the
requested dtype (float32 by default), so that `requires_grad=True` gives a window with a
history, as PyTorch's does.

`sym=True` gives the symmetric window of M points (for filter design); `sym=False` the
periodic one: the symmetric window of M + 1 points without its last (for spectral analysis).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ... import _dtype
from ..._tensor import Tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _check(name: str, M: int, dtype, layout) -> object:  # noqa: N803
    """PyTorch's checks of the window length, dtype and layout; the dtype to compute in."""
    import fusegrad

    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and layout != fusegrad.strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    dtype = dtype or _dtype.get_default_dtype()
    if dtype not in (fusegrad.float32, fusegrad.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return dtype


def _trivial(M: int, dtype, device, requires_grad: bool) -> Tensor | None:  # noqa: N803
    """The windows of length 0 and 1 (empty and [1])."""
    import fusegrad

    if M == 0:
        return fusegrad.empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)
    if M == 1:
        return fusegrad.ones((1,), dtype=dtype, device=device, requires_grad=requires_grad)
    return None


def _positions(M: int, start: float, step: float, dtype, device,  # noqa: N803
               requires_grad: bool) -> Tensor:
    """start, start + step, ... (M values) in `dtype`, the leaf the window is computed from."""
    import fusegrad

    return fusegrad.linspace(start, start + (M - 1) * step, M, dtype=dtype, device=device,
                             requires_grad=requires_grad)


def exponential(M: int, *, center: float | None = None, tau: float = 1.0,  # noqa: N803
                sym: bool = True, dtype=None, layout=None, device=None,
                requires_grad: bool = False) -> Tensor:
    """exp(-|n - center| / tau); `center` defaults to the middle, (M - 1) / 2, and may only
    be given for a periodic window."""
    import fusegrad

    dtype = _check("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _trivial(M, dtype, device, requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    k = _positions(M, -center / tau, 1 / tau, dtype, device, requires_grad)
    return fusegrad.exp(-fusegrad.abs(k))


def cosine(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,  # noqa: N803
           requires_grad: bool = False) -> Tensor:
    """sin(pi (n + 1/2) / M) (over M + 1 points for a periodic window)."""
    import fusegrad

    dtype = _check("cosine", M, dtype, layout)
    trivial = _trivial(M, dtype, device, requires_grad)
    if trivial is not None:
        return trivial
    start = 0.5
    constant = math.pi / (M + 1 if not sym and M > 1 else M)
    k = _positions(M, start * constant, constant, dtype, device, requires_grad)
    return fusegrad.sin(k)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None,  # noqa: N803
             layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """exp(-((n - (M - 1) / 2) / std)^2 / 2)."""
    import fusegrad

    dtype = _check("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _trivial(M, dtype, device, requires_grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    k = _positions(M, start * constant, constant, dtype, device, requires_grad)
    return fusegrad.exp(-k ** 2)


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None,  # noqa: N803
           layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)."""
    import fusegrad

    dtype = _check("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    trivial = _trivial(M, dtype, device, requires_grad)
    if trivial is not None:
        return trivial
    if not sym:
        M = M + 1  # noqa: N806
    beta_t = fusegrad.tensor(beta, dtype=dtype, device=device)
    start, end = -beta, beta
    k = fusegrad.linspace(start, end, M, dtype=dtype, device=device,
                          requires_grad=requires_grad)
    window = fusegrad.i0(fusegrad.sqrt(beta_t * beta_t - k ** 2)) / fusegrad.i0(beta_t)
    return window[:-1] if not sym else window


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,  # noqa: N803
             requires_grad: bool = False) -> Tensor:
    """1 - |2n / (M - 1) - 1|: a triangle peaking at the middle."""
    import fusegrad

    dtype = _check("bartlett", M, dtype, layout)
    trivial = _trivial(M, dtype, device, requires_grad)
    if trivial is not None:
        return trivial
    step = 2 / (M if not sym else M - 1)
    k = _positions(M, -1.0, step, dtype, device, requires_grad)
    return 1 - fusegrad.abs(k)


def general_cosine(M, *, a: Iterable, sym: bool = True, dtype=None,  # noqa: N803
                   layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """sum_i (-1)^i a_i cos(2 pi i n / (M - 1))."""
    return _general_cosine("general_cosine", M, a, sym, dtype, layout, device, requires_grad)


def _general_cosine(name: str, M, a, sym, dtype, layout, device,  # noqa: N803
                    requires_grad) -> Tensor:
    import fusegrad

    dtype = _check(name, M, dtype, layout)
    trivial = _trivial(M, dtype, device, requires_grad)
    if trivial is not None:
        return trivial
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    constant = 2 * math.pi / (M if not sym else M - 1)
    k = _positions(M, 0.0, constant, dtype, device, requires_grad)
    coefficients = fusegrad.tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype,
                                   device=device)
    orders = fusegrad.arange(len(a), dtype=dtype, device=device)
    terms = coefficients.unsqueeze(-1) * fusegrad.cos(orders.unsqueeze(-1) * k)
    return terms.sum(0)


def general_hamming(M, *, alpha: float = 0.54, sym: bool = True, dtype=None,  # noqa: N803
                    layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return _general_cosine("general_cosine", M, [alpha, 1.0 - alpha], sym, dtype, layout,
                           device, requires_grad)


def hamming(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,  # noqa: N803
            requires_grad: bool = False) -> Tensor:
    """The Hamming window: general_hamming with alpha = 0.54."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,  # noqa: N803
         requires_grad: bool = False) -> Tensor:
    """The Hann window: general_hamming with alpha = 0.5."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,  # noqa: N803
             requires_grad: bool = False) -> Tensor:
    """The Blackman window: general cosine with coefficients 0.42, 0.5, 0.08."""
    return _general_cosine("blackman", M, [0.42, 0.5, 0.08], sym, dtype, layout, device,
                           requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,  # noqa: N803
            requires_grad: bool = False) -> Tensor:
    """Nuttall's minimum 4-term Blackman-Harris window."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)
