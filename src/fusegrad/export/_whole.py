"""The layers `export` keeps whole, as torch.export's graphs keep them before
`run_decompositions`: `F.linear`, `F.conv1d`/`conv2d`/`conv3d`, `F.layer_norm`, `F.dropout`
and `F.batch_norm` each become one node (`aten.linear.default(x, p_fc_weight, p_fc_bias)`)
instead of the registry ops they are made of (`t`, `addmm`).

While export traces, `kept_whole(tracer)` replaces those functions of `fusegrad.nn.functional`
(which the modules call through the module) with wrappers that hand the call, written with
PyTorch's schema's arguments, to `Tracer.record_whole`. A call the wrapper cannot write
(`padding="same"`, an in-place dropout) or one made in another thread runs as before. The
handles run the functional again (`ops.call_handles`), so a saved, loaded or decomposed
program computes what the module computes.
"""

from __future__ import annotations

import threading
from typing import Any

from ..nn import functional as F
from ..ops.call_handles import register


def _ntuple(v: Any, n: int) -> list:
    return [v] * n if isinstance(v, int) else list(v)


def _trimmed(args: list, defaults: list) -> list:
    """`args` without the trailing ones equal to their defaults (`defaults` aligned with the
    end of `args`), as PyTorch's graphs leave them out."""
    args = list(args)
    start = len(args) - len(defaults)
    while len(args) > start:
        default = defaults[len(args) - 1 - start]
        if type(args[-1]) is not type(default) or args[-1] != default:
            break
        args.pop()
    return args


def _linear(input, weight, bias=None):
    return "linear.default", [input, weight] + ([] if bias is None else [bias])


def _conv(n: int):
    def write(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        if isinstance(padding, str):  # (`conv2d.padding`, not written here)
            return None
        args = [input, weight, bias, _ntuple(stride, n), _ntuple(padding, n),
                _ntuple(dilation, n), groups]
        return f"conv{n}d.default", _trimmed(args, [None, [1] * n, [0] * n, [1] * n, 1])
    return write


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = _ntuple(normalized_shape, 1)
    return "layer_norm.default", [input, shape, weight, bias, eps, False]


def _dropout(input, p=0.5, training=True, inplace=False):
    if inplace:
        return None
    return "dropout.default", [input, p, training]


def _batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    return "batch_norm.default", [input, weight, bias, running_mean, running_var, training,
                                  momentum, eps, False]


# functional name -> how a call reads as PyTorch's ATen call (None: not kept whole)
_WRITERS = {
    "linear": _linear,
    "conv1d": _conv(1),
    "conv2d": _conv(2),
    "conv3d": _conv(3),
    "layer_norm": _layer_norm,
    "dropout": _dropout,
    "batch_norm": _batch_norm,
}


def _run_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                    cudnn_enabled=False):
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def _run_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5,
                    cudnn_enable=False):
    return F.layer_norm(input, tuple(normalized_shape), weight, bias, eps)


register("linear.default", lambda input, weight, bias=None: F.linear(input, weight, bias))
for _n in (1, 2, 3):
    register(f"conv{_n}d.default", lambda *args, _name=f"conv{_n}d": getattr(F, _name)(*args))
register("layer_norm.default", _run_layer_norm)
register("dropout.default", lambda input, p, train: F.dropout(input, p, train), draws=True)
register("batch_norm.default", _run_batch_norm)


class kept_whole:  # noqa: N801 (a context manager, named as what it does)
    """While it is entered, the layers of `_WRITERS` called in this thread under `tracer`
    are recorded whole (`Tracer.record_whole`)."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.thread = threading.get_ident()
        self.saved: dict = {}

    def _wrap(self, name: str, original):
        from ..ops.overloads import _overload_of_handle

        write, tracer, thread = _WRITERS[name], self.tracer, self.thread

        def wrapper(*args, **kwargs):
            from .._thread_state import local

            if threading.get_ident() != thread or tracer not in (local.modes or ()):
                return original(*args, **kwargs)
            try:
                call = write(*args, **kwargs)
            except TypeError:  # (the original's own error)
                return original(*args, **kwargs)
            if call is None:
                return original(*args, **kwargs)
            key, written = call
            return tracer.record_whole(_overload_of_handle(*key.split(".")), tuple(written),
                                       {}, lambda: original(*args, **kwargs))

        wrapper.__name__ = wrapper.__qualname__ = name
        wrapper.__wrapped__ = original
        return wrapper

    def __enter__(self) -> kept_whole:
        for name in _WRITERS:
            original = getattr(F, name)
            self.saved[name] = original
            setattr(F, name, self._wrap(name, original))
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self.saved.items():
            setattr(F, name, original)
