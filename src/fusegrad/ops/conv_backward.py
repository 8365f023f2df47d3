"""`convolution_backward`: a convolution's input, weight and bias gradients as one op
(`ConvolutionBackwardBackward0` for double backward), as PyTorch records it.

Traced backward graphs (AOT autograd, make_fx) hold this node where a convolution's gradient
is taken, not the im2col / matmul / col2im ops the derivative is built from: the code
generator runs it as one extern call of the NumPy fast path eager's backward takes, instead
of materialising the layout copies between those ops.

One difference from PyTorch: an output `output_mask` leaves out is a zero tensor of its
shape (not computed, and cheap: calloc'd pages), where PyTorch returns None; the registry's
multi-output ops return tensors only.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from . import _flop_formulas as flop_formulas
from ._util import F32, F64, HALF, Spec, format_strides, rand_array
from .nn import _register_multi
from .registry import Sample


def _bias_size(w, transposed: bool, groups: int) -> int:
    from .conv import _bias_size as size

    return size(w, transposed, groups)


def _conv_kernel(g, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                 groups, output_mask):
    from .._tensor import Tensor
    from ..autograd.grad_mode import no_grad
    from .conv import (
        _conv_backward_arrays,
        _conv_backward_composite,
        _conv_derivative_nd,
        _grad_layouts,
        _onednn_half,
    )

    need_x, need_w, need_b = (bool(m) for m in output_mask)
    if x.ndim > 4:  # volumes: the gradients written as convolutions
        with no_grad():
            gi, gw, gb = (None if t is None else t._data for t in _conv_derivative_nd(
                Tensor._make(g), Tensor._make(x), Tensor._make(w), need_b, list(stride),
                list(padding), list(dilation), transposed, groups, (need_x, need_w))[:3])
    elif not transposed and all(a.dtype in (F32, F64) for a in (g, x, w)) and \
            g.dtype == x.dtype == w.dtype:
        gi, gw, gb = _conv_backward_arrays(g, x, w, need_x, need_w, need_b, stride, padding,
                                           dilation, groups)
    elif not transposed and g.dtype in HALF and g.dtype == x.dtype == w.dtype and \
            _onednn_half(_dtype.from_numpy_dtype(g.dtype).name):
        # PyTorch's oneDNN kernels accumulate a half type in float32 and round each
        # gradient once (the composite below rounds the input gradient's columns first).
        gi, gw, gb = (None if a is None else a.astype(g.dtype) for a in _conv_backward_arrays(
            g.astype(F32), x.astype(F32), w.astype(F32), need_x, need_w, need_b, stride,
            padding, dilation, groups))
    else:
        with no_grad():
            gi, gw, gb = (None if t is None else t._data for t in _conv_backward_composite(
                Tensor._make(g), Tensor._make(x), Tensor._make(w), need_b, stride, padding,
                dilation, transposed, groups, (need_x, need_w)))
    gi, gw = _grad_layouts(gi, gw, x, w, stride, dilation, transposed, output_padding, groups)
    dt = g.dtype
    return (gi if need_x else np.zeros(x.shape, dt), gw if need_w else np.zeros(w.shape, dt),
            gb if need_b else np.zeros(tuple(bias_sizes or (_bias_size(w, transposed,
                                                                       groups),)), dt))


def _conv_meta(g, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
               groups, output_mask):
    from .conv import _conv_layouts

    dt = _dtype.result_type(g, x, w)
    nb = tuple(bias_sizes) if bias_sizes else (_bias_size(w, transposed, groups),)
    gi_fmt, gw_fmt, keep = _conv_layouts(x, w, stride, dilation, groups, transposed,
                                         output_padding)
    return [Spec(tuple(x.shape), dt, format_strides(tuple(x.shape), gi_fmt)),
            Spec(tuple(w.shape), dt, keep or format_strides(tuple(w.shape), gw_fmt)),
            Spec(nb, dt)]


def _grads(g, x, w, stride, padding, dilation, transposed, groups, mask) -> tuple:
    """(gi, gw) of a convolution written in fusegrad ops (differentiable again): the 1-d/2-d
    composite, or for volumes the gradients as convolutions."""
    from .conv import _conv_backward_composite, _conv_derivative_nd

    if x.dim() > 4:
        return _conv_derivative_nd(g, x, w, False, list(stride), list(padding), list(dilation),
                                   transposed, groups, mask)[:2]
    return _conv_backward_composite(g, x, w, False, stride, padding, dilation, transposed,
                                    groups, mask)[:2]


def _derivative(grads, g, x, w, stride, padding, dilation, transposed, output_padding,
                groups):
    """Cotangents (ggi, ggw, ggb) of (gi, gw, gb) -> gradients of (g, x, w). Each output is
    bilinear: gi in (g, w), gw in (g, x), gb linear in g."""
    from .conv import convolution
    from .nn import _call

    ggi, ggw, ggb = (list(grads) + [None] * 3)[:3]
    dg = dx = dw = None
    if ggi is not None:  # gi = the input gradient of conv(., w) at g
        dg = _call(convolution, ggi, w, None, stride, padding, dilation, transposed,
                   output_padding, groups)
        dw = _grads(g, ggi, w, stride, padding, dilation, transposed, groups,
                    (False, True))[1]
    if ggw is not None:  # gw = the weight gradient of conv(x, .) at g
        t = _call(convolution, x, ggw, None, stride, padding, dilation, transposed,
                  output_padding, groups)
        dg = t if dg is None else dg + t
        dx = _grads(g, x, ggw, stride, padding, dilation, transposed, groups,
                    (True, False))[0]
    if ggb is not None:
        t = ggb.reshape((1, -1) + (1,) * (g.dim() - 2)).expand(g.shape)
        dg = t if dg is None else dg + t
    return (dg, dx, dw) + (None,) * 8


def _save(out, g, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
          groups, output_mask):
    return (g, x, w, stride, padding, dilation, transposed, output_padding, groups)


def _samples(rng, dt):
    """The convolution's samples, each with a random output gradient (every output asked
    for: PyTorch's None for one left out is a zero tensor here)."""
    from .conv import _conv_kernel as conv_forward
    from .conv import _conv_samples

    out = []
    for s in _conv_samples(rng, dt):
        x, w, b, st, p, d, t, op, groups = s.args
        y = conv_forward(x, w, b, st, p, d, t, op, groups)
        g = rand_array(rng, y.shape, dt)
        bias_sizes = [y.shape[1]] if b is not None else None
        mask = [True, True, True]
        out.append(Sample((g, x, w, bias_sizes, st, p, d, t, op, groups, mask),
                          name=f"{s.name} mask={mask}"))
    return out


convolution_backward = _register_multi(
    "convolution_backward", kernel=_conv_kernel, meta=_conv_meta,
    flops=flop_formulas.convolution_backward_call,
    node="ConvolutionBackwardBackward0", derivative=_derivative, save=_save,
    samples=_samples, public="convolution_backward", tolerance={"float32": 1e-4},
    saved_names=("grad_output", "input", "weight", "stride", "padding", "dilation",
                 "transposed", "output_padding", "groups"))
