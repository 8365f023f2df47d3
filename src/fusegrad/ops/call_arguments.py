"""How a public call reads as the ATen call of a composite, in the arguments PyTorch's schema
names: a factory's frame as make_fx records its call (`read_*`, `aten.zeros.default([3],
device = device(type='cpu'), pin_memory = False)`), and a layer's call as export keeps it whole
(`write_*`, `aten.linear.default(x, p_fc_weight, p_fc_bias)`). Each composite's record in
`ops/surface.py` (`ATEN_CALLS`) names its reader or writer.
"""

from __future__ import annotations

from typing import Any

from .. import _dtype
from .._creation import _check_device, _like_order
from .._device import cpu as _cpu
from .._shapes import FORMAT_ORDERS

# ---------------------------------------------------------------- make_fx: a factory's call
#
# Each reader takes the frame locals of the public factory the program called and gives the
# call PyTorch's factory hands its ATen op: (packet.overload, arguments, keyword arguments),
# or None where no one ATen call stands for it.


def _options(dtype=None, device=None, memory_format=None) -> dict:
    """The keyword part PyTorch's factories hand their ATen op: a dtype given, the device
    (the CPU when none was given), `pin_memory=False`, a memory format given."""
    out = {} if dtype is None else {"dtype": _dtype.as_dtype(dtype)}
    if device is not _SKIP:
        out["device"] = device or _cpu
    out["pin_memory"] = False
    if memory_format is not None:
        out["memory_format"] = memory_format
    return out


_SKIP = object()  # (`_options`: the op takes no device, a `*_like`'s is its input's)


def read_sized(name: str):
    def read(v: dict):
        return name, [list(v["shape"])], _options(v["dtype"], v["dev"])
    return read


def read_empty(v: dict):
    fmt = v["memory_format"]
    if getattr(fmt, "name", None) in FORMAT_ORDERS:
        return None  # (made in another memory order: a permute of a factory's result)
    return "empty.memory_format", [list(v["shape"])], _options(
        v["dtype"], _check_device(v["device"]), fmt)


def read_full(v: dict):
    return "full.default", [list(v["shape"]), v["fill_value"]], _options(v["dtype"], v["dev"])


def read_arange(v: dict):
    start, end, step = v["vals"]
    floats = any(isinstance(x, float) for x in (start, end, step))
    inferred = _dtype.defaults.float if floats else _dtype.int64
    dtype = None if v["dtype"] is inferred else v["dtype"]
    if start == 0 and step == 1 and start.__class__ is int and step.__class__ is int:
        return "arange.default", [end], _options(dtype, v["dev"])
    if step == 1 and step.__class__ is int:
        return "arange.start", [start, end], _options(dtype, v["dev"])
    return "arange.start_step", [start, end, step], _options(dtype, v["dev"])


def read_eye(v: dict):
    n, m = v["n"], v["m"]
    if m == n:
        return "eye.default", [n], _options(v["dtype"], v["dev"])
    return "eye.m", [n, m], _options(v["dtype"], v["dev"])


def read_random(name: str):
    def read(v: dict):
        if v["generator"] is not None:
            return None  # (a graph draws from the default generator)
        return name, [list(v["shape"])], _options(v["dtype"], v["dev"])
    return read


def read_randint(v: dict):
    if v["generator"] is not None:
        return None
    options = _options(v["dtype"], v["dev"])
    if v["size"] is None:  # (`randint(high, size)`: its high came where low is)
        return "randint.default", [v["high"], list(v["shape"])], options
    return "randint.low", [v["low"], v["high"], list(v["shape"])], options


def read_randperm(v: dict):
    if v["generator"] is not None:
        return None
    dtype = None if v["dtype"] is _dtype.int64 else v["dtype"]
    return "randperm.default", [v["n"]], _options(dtype, v["dev"])


def _like_options(v: dict) -> dict | None:
    """A `*_like` call's keyword part, None where its result is made in another memory
    order than row-major (a permute of a factory's result, which no one call stands for)."""
    fmt = v["memory_format"]
    if _like_order(v["input"], fmt) is not None:
        return None
    if getattr(fmt, "name", None) == "preserve_format":
        fmt = None
    return _options(v["dtype"], _SKIP, fmt)


def read_like(v: dict):
    options = _like_options(v)
    if options is None or v["args"] or any(v["kwargs"].values()):
        return None  # (only `pin_memory=False` may be among the other keywords)
    return v["fn"].__name__ + "_like.default", [v["input"]], options


def read_full_like(v: dict):
    options = _like_options(v)
    return None if options is None else (
        "full_like.default", [v["input"], v["fill_value"]], options)


def read_random_like(name: str):
    def read(v: dict):
        options = _like_options(v)
        if options is None or v["generator"] is not None:
            return None
        return name, [v["input"]], options
    return read


def read_new(v: dict):
    if v["layout"] is not None:
        return None
    options = _options(v["dtype"], _check_device(v["device"]) or _SKIP)
    return f"new_{v['fn'].__name__}.default", [v["self"], list(v["shape"])], options


def read_new_full(v: dict):
    options = _options(v["dtype"], _check_device(v["device"]) or _SKIP)
    return "new_full.default", [v["self"], list(v["shape"]), v["fill_value"]], options


LITERAL = ("lift_fresh_copy.default", None, None)  # (a literal: its constant, copied)


def read_literal(v: dict):
    return LITERAL


# ---------------------------------------------------------------- export: a layer's call
#
# Each writer takes the arguments of a call of the layer's functional (`F.linear(x, w, b)`)
# and gives (packet.overload, the schema's arguments), or None where it cannot write it.


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


def write_linear(input, weight, bias=None):
    return "linear.default", [input, weight] + ([] if bias is None else [bias])


def write_conv(n: int):
    def write(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        if isinstance(padding, str):  # (`conv2d.padding`, not written here)
            return None
        args = [input, weight, bias, _ntuple(stride, n), _ntuple(padding, n),
                _ntuple(dilation, n), groups]
        return f"conv{n}d.default", _trimmed(args, [None, [1] * n, [0] * n, [1] * n, 1])
    return write


def write_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = _ntuple(normalized_shape, 1)
    return "layer_norm.default", [input, shape, weight, bias, eps, False]


def write_dropout(input, p=0.5, training=True, inplace=False):
    if inplace:
        return None
    return "dropout.default", [input, p, training]


def write_batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
                     momentum=0.1, eps=1e-5):
    return "batch_norm.default", [input, weight, bias, running_mean, running_var, training,
                                  momentum, eps, False]
