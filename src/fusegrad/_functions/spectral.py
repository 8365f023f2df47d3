"""Short-time Fourier transforms: `stft` and its inverse `istft`, composites of the pad,
strided-view, product and FFT ops (`_fft_r2c`, `_fft_c2c`, `_fft_c2r`), so autograd runs
through them and graphs show the nodes PyTorch records.

`stft` frames the (optionally centre-padded) signal with `as_strided`, multiplies each frame
by the window zero-padded to `n_fft`, transforms the frames and puts frequencies before
frames. `istft` inverts each frame, multiplies it by the window again, overlap-adds the
frames (`index_add`) and divides by the overlap-add of the squared window, after checking
that this envelope has no zero inside the kept part (the NOLA condition).

Argument checks run in PyTorch's order with PyTorch's messages, most of them prefixed by a
description of the call (`stft(torch.FloatTensor[80], n_fft=16, ...) : `). The warnings
PyTorch gives once per process (no window, `return_complex=False`) are given once too,
naming the caller's line.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._creation import ones, tensor, zeros
from .._dispatch import call
from .._tensor import Tensor
from .._torch_function import warn_once_at
from ..ops import fft as F
from ..ops import padding as PD
from ..ops._util import size_str
from .complex import view_as_complex, view_as_real

_STFT_NO_WINDOW = (
    "A window was not provided. A rectangular window will be applied,which is known to cause "
    "spectral leakage. Other windows such as torch.hann_window or torch.hamming_window are "
    "recommended to reduce spectral leakage.To suppress this warning and use a rectangular "
    "window, explicitly set `window=torch.ones(n_fft, device=<device>)`.")
_ISTFT_NO_WINDOW = (
    "A window was not provided. A rectangular window will be applied.Please provide the same "
    "window used by stft to make the inversion lossless.To suppress this warning and use a "
    "rectangular window, explicitly set `window=torch.ones(n_fft, device=<device>)`.")
_RETURN_REAL = (
    "stft with return_complex=False is deprecated. In a future pytorch release, stft will "
    "return complex tensors for all inputs, and return_complex=False will raise an error.\n"
    "Note: you can still call torch.view_as_real on the complex output to recover the old "
    "return format.")
_ONESIDED_COMPLEX = "Cannot have onesided output if window or input is complex"
# The smallest window envelope istft divides by: below it the inversion is refused.
_NOLA_MIN = 1e-11


def _quarter(n: int) -> int:
    """`n / 4` as C++ divides integers (towards zero): the default hop length."""
    return int(n / 4)


def _flag(value) -> str:
    """An optional bool as PyTorch's call descriptions print it: None, 0 or 1."""
    return "None" if value is None else str(int(bool(value)))


def _window_str(window) -> str:
    return "None" if window is None else f"{window.type()}{{{size_str(window.shape)}}}"


def _real_dtype(dt):
    return dt.to_real() if dt.category == _dtype.COMPLEX else dt


def _padded_window(window, win_length: int, n_fft: int, dtype, with_copy: bool):
    """The window (ones when None) zero-padded on both sides to `n_fft` points, the extra
    point of an odd difference on the right. `with_copy` writes it into zeros (stft's
    `CopySlices` node), otherwise pads it (istft's `ConstantPadNdBackward0`)."""
    if window is None:
        window = ones(win_length, dtype=dtype)
    if win_length == n_fft:
        return window
    left = (n_fft - win_length) // 2
    if not with_copy:
        return call(PD.constant_pad_nd, window, [left, n_fft - win_length - left], 0)
    padded = zeros(n_fft, dtype=window.dtype)
    padded.narrow(0, left, win_length).copy_(window)
    return padded


def _check_fft_dtype(x: Tensor) -> None:
    """PyTorch's CPU transforms take single and double precision only."""
    if x.dtype.itemsize < (4 if x.dtype.category == _dtype.FLOAT else 8):
        real = _real_dtype(x.dtype)
        raise RuntimeError(f"MKL FFT doesn't support tensors of type: {real.legacy}")


def _overlap_add(frames: Tensor, length: int, hop: int) -> Tensor:
    """Sum frames (batch, count, size) into signals (batch, length), frame `t` starting at
    `t * hop`: the adjoint of framing, as one differentiable `index_add`."""
    batch, count, size = frames.shape
    index = (np.arange(count)[:, None] * hop + np.arange(size)[None, :]).reshape(-1)
    out = zeros((batch, length), dtype=frames.dtype)
    return out.index_add(1, tensor(index), frames.reshape(batch, count * size))


def _pad_signal(x: Tensor, half: int, mode: str) -> Tensor:
    """`x` (batch, channel, time) padded by `half` points at both ends of time in `mode`, as
    `nn.functional.pad(x, [half, half], mode)` pads it (the ops it runs, called here)."""
    if mode == "constant":
        return call(PD.constant_pad_nd, x, [half, half], 0)
    if mode == "reflect":
        return call(PD.reflection_pad1d, x, [half, half])
    if mode == "replicate":
        return call(PD.replication_pad1d, x, [half, half])
    if mode == "circular":
        from ..nn._functional_extra import pad_circular

        return pad_circular(x, [half, half])
    raise NotImplementedError(f"Unrecognised padding mode {mode}")


def stft(input: Tensor, n_fft: int, hop_length: int | None = None,
         win_length: int | None = None, window: Tensor | None = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None, align_to_window: bool | None = None) -> Tensor:
    """Short-time Fourier transform of a signal (L,) or a batch (B, L): complex
    (B?, n_fft // 2 + 1 or n_fft, frames), or its real view (..., 2) with
    `return_complex=False`. `center` pads `n_fft // 2` points on both sides (`pad_mode`);
    the window (default ones, with a warning) of `win_length` points is centred in `n_fft`;
    `normalized` scales by `n_fft ** -0.5`; `onesided` (the default for real input and
    window) keeps the non-negative frequencies. `align_to_window` (with `center=False`
    only) starts each frame's window at the frame's first sample."""
    if align_to_window is not None and center:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    if center:
        # Padded as a 3-D (batch, channel, time) tensor, as nn.functional.pad's 1-D modes want.
        signal_dim = input.dim()
        extended = [1] * (3 - signal_dim) + list(input.size())
        half = int(n_fft // 2)
        input = _pad_signal(input.view(extended), half, pad_mode)
        input = input.view(input.shape[-signal_dim:])
    return _stft(input, n_fft, hop_length, win_length, window, normalized, onesided,
                 return_complex, align_to_window)


def _stft(input, n_fft, hop_length, win_length, window, normalized, onesided,
          return_complex, align_to_window):
    """stft below its Python layer (PyTorch's `_VF.stft`): checks, framing, transform."""
    if window is None:
        warn_once_at(3, _STFT_NO_WINDOW)
    if return_complex is None:
        if not (input.is_complex() or (window is not None and window.is_complex())):
            raise RuntimeError(
                "stft requires the return_complex parameter be given for real inputs, and "
                "will further require that return_complex=True in a future PyTorch release.")
    elif not return_complex:
        warn_once_at(3, _RETURN_REAL)
    hop = _quarter(n_fft) if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    where = (f"stft({input.type()}{size_str(input.shape)}, n_fft={n_fft}, hop_length={hop}, "
             f"win_length={win}, window={_window_str(window)}, normalized={int(normalized)}, "
             f"onesided={_flag(onesided)}, return_complex={_flag(return_complex)}, "
             f"align_to_window={_flag(align_to_window)}) : ")
    if input.dtype.category < _dtype.FLOAT:
        raise RuntimeError(where + "expected a tensor of floating point or complex values")
    if input.dim() not in (1, 2):
        raise RuntimeError(where + "expected a 1D or 2D tensor")
    batched = input.dim() == 2
    if not batched:
        input = input.unsqueeze(0)
    length = input.shape[1]
    if n_fft <= 0 or n_fft > length:
        # PyTorch's message names the window length where it means n_fft.
        raise RuntimeError(where + f"expected 0 < n_fft < {length}, but got n_fft={win}")
    if hop <= 0:
        raise RuntimeError(where + f"expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(where + f"expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise RuntimeError(where + f"expected a 1D window tensor of size equal to win_length="
                           f"{win}, but got window with size {size_str(window.shape)}")
    complex_fft = input.is_complex() or (window is not None and window.is_complex())
    onesided = not complex_fft if onesided is None else bool(onesided)
    if onesided and complex_fft:
        raise RuntimeError(_ONESIDED_COMPLEX)
    if window is not None or win < n_fft:
        window = _padded_window(window, win, n_fft, _real_dtype(input.dtype), True)
    if align_to_window and win < n_fft:
        # Each frame's window starts at the frame's first sample: shift the signal right by
        # the window's offset inside n_fft (the padded window is zero over the shift).
        left = (n_fft - win) // 2
        input = call(PD.constant_pad_nd, input, [left, n_fft - win - left], 0)
        length = input.shape[1]
    count = 1 + (length - n_fft) // hop
    step = input.stride(1)
    frames = input.as_strided((input.shape[0], count, n_fft), (input.stride(0), hop * step, step))
    if window is not None:
        frames = frames * window
    _check_fft_dtype(frames)
    norm = 1 if normalized else 0  # 1: by 1 / sqrt(n_fft); 0: unscaled
    if complex_fft:
        out = call(F.fft_c2c, frames, [2], norm, True)
    else:
        out = call(F.fft_r2c, frames, [2], norm, onesided)
    # In place, as PyTorch (its graph shows TransposeBackward1 and SqueezeBackward4).
    out.transpose_(1, 2)
    if not batched:
        out.squeeze_(0)
    return out if return_complex or return_complex is None else view_as_real(out)


def istft(input: Tensor, n_fft: int, hop_length: int | None = None,
          win_length: int | None = None, window: Tensor | None = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:
    """Inverse of `stft`: the signal (B?, L) whose transform is the complex `input`
    (B?, frequencies, frames), by inverse transforms of the frames, overlap-add with the
    window and division by the overlap-add of the squared window (which must not vanish:
    PyTorch's NOLA check). `length` crops or zero-pads the result; `onesided` defaults to
    whether the frequencies are fewer than `n_fft`; `return_complex` keeps a complex signal
    (two-sided input only)."""
    if window is None:
        warn_once_at(2, _ISTFT_NO_WINDOW)
    hop = _quarter(n_fft) if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor matching the output "
                           "from stft with return_complex=True.")
    where = (f"istft(CPU{input.dtype.legacy}Type{size_str(input.shape)}, n_fft={n_fft}, "
             f"hop_length={hop}, win_length={win}, window={_window_str(window)}, "
             f"center={int(center)}, normalized={int(normalized)}, onesided={_flag(onesided)}, "
             f"length={length}, return_complex={int(return_complex)})")
    real = view_as_real(input)
    count = real.size(-2)
    freqs = real.size(-3)
    expected = n_fft + hop * (count - 1)
    if real.numel() == 0:
        raise RuntimeError(where + " : input tensor cannot be empty.")
    if real.dim() not in (3, 4):
        raise RuntimeError(where + f" : expected a tensor with 3 or 4 dimensions, but got "
                           f"{real.dim()}")
    batched = real.dim() == 4
    if not batched:
        real = real.unsqueeze(0)
    spectra = view_as_complex(real.transpose(1, 2))  # (batch, frames, frequencies)
    onesided = freqs != n_fft if onesided is None else bool(onesided)
    if onesided:
        if n_fft // 2 + 1 != freqs:
            raise RuntimeError(where + " : expected the frequency dimension (3rd to the last) "
                               "of the input tensor to match n_fft / 2 + 1 when onesided=True, "
                               f"but got {freqs}")
    elif n_fft != freqs:
        raise RuntimeError(where + " : expected the frequency dimension (3rd to the last) of "
                           f"the input tensor to match n_fft when onesided=False, but got {freqs}")
    if not 0 < hop <= win:
        raise RuntimeError(where + " : expected 0 < hop_length <= win_length")
    if not 0 < win <= n_fft:
        raise RuntimeError(where + " : expected 0 < win_length <= n_fft")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise RuntimeError(where + " : Invalid window shape. window has to be 1D and length of "
                           "`win_length`")
    window = _padded_window(window, win, n_fft, _real_dtype(input.dtype), False)
    norm = 1 if normalized else 2  # 1: by 1 / sqrt(n_fft); 2: by 1 / n_fft
    if return_complex:
        if onesided:
            raise RuntimeError(_ONESIDED_COMPLEX)
        frames = call(F.fft_c2c, spectra, [2], norm, False)
    else:
        if window.is_complex():
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not onesided:  # a real signal's spectrum is Hermitian: its first half suffices
            spectra = spectra.narrow(-1, 0, n_fft // 2 + 1)
        frames = call(F.fft_c2r, spectra, [2], norm, n_fft)
    signal = _overlap_add(frames * window.view(1, 1, n_fft), expected, hop)
    envelope = _overlap_add(window.pow(2).expand(1, count, n_fft), expected, hop)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = expected - n_fft // 2 if center else expected
    kept = min(end, expected) - start  # narrow, not [:, start:end]: a slice even when whole
    signal = signal.narrow(1, start, kept)
    envelope = envelope.narrow(1, start, kept)
    if envelope.abs().min().item() < _NOLA_MIN:
        # PyTorch's message prints the failed condition, a 0-d bool tensor.
        raise RuntimeError(where + " window overlap add min: 1\n[ CPUBoolType{} ]")
    signal = signal / envelope
    if not batched:
        signal = signal.squeeze(0)
    if end > expected:
        signal = call(PD.constant_pad_nd, signal, [0, end - expected], 0)
    return signal


__all__ = ["stft", "istft"]
