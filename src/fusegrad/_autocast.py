"""Autocast: the per-thread state behind `fusegrad.autocast`, and the casts it makes.

PyTorch keeps, per thread, which device types have autocast on, the dtype each autocasts to,
whether casts of weights are cached and how deeply autocast contexts nest. The same state
lives in `_thread_state.local` here, so a new thread starts with autocast off.

Only CPU autocast changes what ops do (every tensor is a CPU tensor). While it is on, a marker
sits on the thread's dispatch-mode stack: ops then leave dispatch's fast path for the slow
one, whose first step is `dispatch` below, so an eager op pays nothing for autocast while it
is off. `dispatch` casts the op's floating arguments as the op's registry entry says
(`OpDef.autocast`) and runs the op again with autocast set aside (its own casts and the op
itself are not autocast again, as PyTorch excludes its autocast keys inside them), so the
casts are ordinary `_to_copy` calls with `ToCopyBackward0` nodes. Public functions that are
not registry entries but that PyTorch autocasts as a whole (`linear`, `conv2d`, the losses)
apply the same rule at their entry (`composite`, `call_composite`).

Policies (PyTorch's CPU autocast lists, learned from its CPU build):

- "lower": floating arguments other than float64 are cast to the autocast dtype;
- "fp32": floating arguments other than float64 are cast to float32;
- "promote": floating arguments other than float64 are cast to the widest of them (float32
  if any is float32, else the autocast dtype; another half type is an error).

The weight cache: a float32 leaf that requires grad (a parameter) cast to the autocast dtype
is cast once per outermost autocast region and the cast reused, so a weight used twice has
one `ToCopyBackward0`; leaving the outermost region empties the cache.
"""

from __future__ import annotations

import functools
import weakref

from . import _dtype, _thread_state
from ._thread_state import active as _active
from ._thread_state import local as _local
from ._thread_state import set_grad_enabled
from ._warn import warning_stacklevel

# Device types PyTorch knows (its error lists them), and the default autocast dtype of those
# that have autocast.
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                "privateuseone")
DEFAULT_DTYPES = {
    "cpu": _dtype.bfloat16, "cuda": _dtype.float16, "xpu": _dtype.float16,
    "mps": _dtype.float16, "hpu": _dtype.bfloat16, "xla": _dtype.bfloat16,
    "ipu": _dtype.float16, "mtia": _dtype.float16, "maia": _dtype.bfloat16,
    "privateuseone": _dtype.float16,
}
POLICIES = ("lower", "fp32", "promote")


class _Marker:
    """On the dispatch-mode stack while CPU autocast is on: sends ops to the slow path."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<autocast>"


MARKER = _Marker()


# ---------------------------------------------------------------- state


def _device_type(device_type, fn: str, position: int = 1) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"{fn}(): argument 'device_type' (position {position}) must be str, "
                        f"not {type(device_type).__name__}")
    if device_type not in DEVICE_TYPES:
        raise RuntimeError(
            "Expected one of " + ", ".join(DEVICE_TYPES) + " device type at start of device "
            f"string: {device_type}")
    return device_type


def _with_autocast(device_type: str) -> str:
    if device_type not in DEFAULT_DTYPES:
        raise RuntimeError("unknown device type for autocast in "
                           "get_autocast_dispatch_key_from_device_type")
    return device_type


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast exists for `device_type` (cpu, cuda, xpu, mps, hpu, ...)."""
    return _device_type(device_type, "_is_autocast_available") in DEFAULT_DTYPES


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether autocast is on for `device_type` in this thread (without an argument: CUDA's,
    as in PyTorch)."""
    device_type = _with_autocast(_device_type(device_type, "is_autocast_enabled"))
    return device_type in _local.autocast_enabled


def set_autocast_enabled(device_type, enabled=None) -> None:
    """Turn autocast for `device_type` on or off in this thread (`set_autocast_enabled(flag)`
    alone is CUDA's switch, as in PyTorch)."""
    if enabled is None:
        if not isinstance(device_type, bool):
            raise TypeError("set_autocast_enabled(): argument 'enabled' (position 1) must be "
                            f"bool, not {type(device_type).__name__}")
        device_type, enabled = "cuda", device_type
    device_type = _with_autocast(_device_type(device_type, "set_autocast_enabled"))
    if not isinstance(enabled, bool):
        raise TypeError("set_autocast_enabled(): argument 'enabled' (position 2) must be "
                        f"bool, not {type(enabled).__name__}")
    on = _local.autocast_enabled
    if (device_type in on) is enabled:
        return
    _local.autocast_enabled = on | {device_type} if enabled else on - {device_type}
    if device_type == "cpu":
        _sync_cpu()


def get_autocast_dtype(device_type: str):
    """The dtype autocast casts to on `device_type` in this thread."""
    device_type = _device_type(device_type, "get_autocast_dtype")
    dtypes = _local.autocast_dtypes
    if dtypes is not None and device_type in dtypes:
        return dtypes[device_type]
    if device_type not in DEFAULT_DTYPES:
        raise RuntimeError("unsupported scalarType")
    return DEFAULT_DTYPES[device_type]


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype autocast casts to on `device_type` in this thread."""
    device_type = _device_type(device_type, "set_autocast_dtype")
    if not isinstance(dtype, _dtype.dtype):
        raise TypeError("set_autocast_dtype(): argument 'dtype' (position 2) must be "
                        f"torch.dtype, not {type(dtype).__name__}")
    dtypes = dict(_local.autocast_dtypes or {})
    dtypes[device_type] = dtype
    _local.autocast_dtypes = dtypes
    if device_type == "cpu":
        _sync_cpu()


def _sync_cpu() -> None:
    """Keep `local.autocast` and the marker on the mode stack in step with the CPU state."""
    on = "cpu" in _local.autocast_enabled
    had = _local.autocast is not None
    if on:
        if not had:
            _thread_state.push("modes", MARKER)
        _local.autocast = get_autocast_dtype("cpu")
    elif had:
        _local.autocast = None
        _thread_state.pop("modes", MARKER)


def is_autocast_cache_enabled() -> bool:
    """Whether autocast caches the casts of weights in this thread."""
    return _local.autocast_cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn the autocast weight cache on or off in this thread."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool (got {type(enabled).__name__})")
    _local.autocast_cache_enabled = enabled


def clear_autocast_cache() -> None:
    """Forget the cached casts of this thread."""
    _local.autocast_cache = None


def autocast_increment_nesting() -> int:
    """One autocast context deeper; returns the new depth."""
    _local.autocast_nesting += 1
    return _local.autocast_nesting


def autocast_decrement_nesting() -> int:
    """One autocast context less deep; returns the new depth."""
    _local.autocast_nesting -= 1
    return _local.autocast_nesting


def _deprecated(old: str, new: str, fn):
    # PyTorch names a setter's argument in the message: `set_autocast_cpu_dtype(dtype)`
    arg = new[new.index(", ") + 2:-1] if ", " in new else ""

    def wrapper(*args):
        import warnings

        warnings.warn(f"torch.{old}({arg}) is deprecated. Please use torch.{new} instead.",
                      DeprecationWarning, stacklevel=warning_stacklevel(2))
        return fn(*args)

    wrapper.__name__ = wrapper.__qualname__ = old
    wrapper.__doc__ = f"Deprecated spelling of `{new}`."
    return wrapper


is_autocast_cpu_enabled = _deprecated(
    "is_autocast_cpu_enabled", "is_autocast_enabled('cpu')",
    lambda: is_autocast_enabled("cpu"))
set_autocast_cpu_enabled = _deprecated(
    "set_autocast_cpu_enabled", "set_autocast_enabled('cpu', enabled)",
    lambda enabled: set_autocast_enabled("cpu", enabled))
get_autocast_cpu_dtype = _deprecated(
    "get_autocast_cpu_dtype", "get_autocast_dtype('cpu')", lambda: get_autocast_dtype("cpu"))
set_autocast_cpu_dtype = _deprecated(
    "set_autocast_cpu_dtype", "set_autocast_dtype('cpu', dtype)",
    lambda dtype: set_autocast_dtype("cpu", dtype))
get_autocast_gpu_dtype = _deprecated(
    "get_autocast_gpu_dtype", "get_autocast_dtype('cuda')", lambda: get_autocast_dtype("cuda"))
set_autocast_gpu_dtype = _deprecated(
    "set_autocast_gpu_dtype", "set_autocast_dtype('cuda', dtype)",
    lambda dtype: set_autocast_dtype("cuda", dtype))


def _device_spellings(device: str) -> dict:
    """The deprecated per-device spellings of one autocast device (`is_autocast_ipu_enabled`,
    ...), by name."""
    return {
        f"is_autocast_{device}_enabled": _deprecated(
            f"is_autocast_{device}_enabled", f"is_autocast_enabled('{device}')",
            lambda: is_autocast_enabled(device)),
        f"set_autocast_{device}_enabled": _deprecated(
            f"set_autocast_{device}_enabled", f"set_autocast_enabled('{device}', enabled)",
            lambda enabled: set_autocast_enabled(device, enabled)),
        f"get_autocast_{device}_dtype": _deprecated(
            f"get_autocast_{device}_dtype", f"get_autocast_dtype('{device}')",
            lambda: get_autocast_dtype(device)),
        f"set_autocast_{device}_dtype": _deprecated(
            f"set_autocast_{device}_dtype", f"set_autocast_dtype('{device}', dtype)",
            lambda dtype: set_autocast_dtype(device, dtype)),
    }


DEVICE_SPELLINGS = {**_device_spellings("ipu"), **_device_spellings("xla")}


# ---------------------------------------------------------------- casts


def _eligible(t) -> bool:
    """A tensor autocast may cast: floating, not float64 (which it leaves alone), and on
    the CPU (CPU autocast leaves meta tensors alone)."""
    from ._tensor import Tensor

    return isinstance(t, Tensor) and t._dtype.category == _dtype.FLOAT and \
        t._dtype is not _dtype.float64 and not t.is_meta


def _cast(t, dtype, lower):
    """`t` cast to `dtype` (recorded as `ToCopyBackward0`); a weight's cast to the autocast
    dtype `lower` comes from the cache while it is on."""
    if t._dtype is dtype:
        return t
    if dtype is lower and _local.autocast_cache_enabled and t._dtype is _dtype.float32 and \
            t._rg and t._grad_fn is None and t._base is None and not _local.inference:
        cache = _local.autocast_cache
        if cache is None:
            cache = _local.autocast_cache = {}
        hit = cache.get(id(t))
        if hit is not None and hit[0]() is t and hit[1]._dtype is dtype:
            return hit[1]
        # Made with grad on, as PyTorch's cache makes it: a cast first made under no_grad
        # and reused by a later forward with grad must still carry the weight's gradient.
        if _local.grad_mode:
            out = t.to(dtype)
        else:
            set_grad_enabled(True)
            try:
                out = t.to(dtype)
            finally:
                set_grad_enabled(False)
        cache[id(t)] = (weakref.ref(t), out)
        return out
    return t.to(dtype)


def _target(policy: str, tensors, lower):
    if policy == "lower":
        return lower
    if policy == "fp32":
        return _dtype.float32
    # The widest of the floating types met, as PyTorch's `prioritize`: float64 tensors are
    # ignored (left as they are), float32 wins, and the lower type alone stays; another
    # half type beside the lower one is an error only without a float32 among them.
    widest = lower
    for t in tensors:
        dt = t._dtype
        if dt is _dtype.float64:
            continue
        if widest is _dtype.float32 or dt is _dtype.float32:
            widest = _dtype.float32
        elif dt is not lower:
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return widest


def cast_args(policy: str, args, lower):
    """`args` with their eligible tensors (in lists too) cast as `policy` says."""
    tensors = []
    for a in args:
        if a.__class__ is list or a.__class__ is tuple:
            tensors += [t for t in a if _eligible(t)]
        elif _eligible(a):
            tensors.append(a)
    if not tensors:
        return args
    dtype = _target(policy, tensors, lower)
    # Last argument first, as PyTorch's autocast wrappers cast (its C++ compiler evaluates
    # the call's arguments right to left; a list's tensors in order): the casts' nodes, so
    # the order in which backward reaches the weights' gradients (the bias before the
    # weight of a linear layer), are PyTorch's.
    out = []
    for a in reversed(args):
        if a.__class__ is list or a.__class__ is tuple:
            a = a.__class__([_cast(t, dtype, lower) if _eligible(t) else t for t in a])
        elif _eligible(a):
            a = _cast(a, dtype, lower)
        out.append(a)
    out.reverse()
    return tuple(out)


class _SetAside:
    """Autocast set aside in this thread while its own calls run (PyTorch excludes its
    autocast keys there): the marker leaves the mode stack, `local.autocast` is None."""

    __slots__ = ("modes", "dtype")

    def __enter__(self):
        local = _local
        self.modes = modes = local.modes
        self.dtype = local.autocast
        # The process-wide count stays as it is: it may run high, never low.
        local.modes = tuple([m for m in modes if m is not MARKER])
        local.autocast = None
        return self.dtype

    def __exit__(self, *exc) -> None:
        _local.modes = self.modes
        _local.autocast = self.dtype


def set_aside() -> _SetAside:
    """A context in which CPU autocast does nothing in this thread (entered while it is off:
    nothing to set aside). PyTorch's `out=` overloads have no autocast kernels: `mm(a, b,
    out=o)` under autocast runs in its inputs' dtype, so `out=` calls run in one."""
    return _SetAside()


def dispatch(op, args, call):
    """Run registry op `op` under CPU autocast: cast as its policy says, then run it with
    `call` (dispatch's, which calls this: autocast sits below dispatch)."""
    with _SetAside() as lower:
        policy = op.autocast
        if policy is not None:
            args = cast_args(policy, args, lower)
        return call(op, *args)


def call_composite(fn, policy: str, args: tuple, kwargs: dict):
    """Run public function `fn` as PyTorch autocasts it as a whole: its tensor arguments cast
    as `policy` says, its body without autocast."""
    with _SetAside() as lower:
        if kwargs:  # (keyword arguments follow the positional ones: they are cast first)
            names = list(kwargs)
            values = cast_args(policy, tuple(kwargs.values()), lower)
            kwargs = dict(zip(names, values))
        args = cast_args(policy, args, lower)
        return fn(*args, **kwargs)


def composite(policy: str):
    """Decorate a public function that PyTorch autocasts as a whole (not a registry entry):
    under CPU autocast its tensor arguments are cast as `policy` says. Off, the wrapper costs
    one test of a process-wide count."""
    if policy not in POLICIES:
        raise ValueError(f"unknown autocast policy {policy!r}")

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if _active.modes and _local.autocast is not None:
                return call_composite(fn, policy, args, kwargs)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def active() -> bool:
    """Whether CPU autocast applies to ops in this thread now (a cheap test for composites
    that check inline rather than through `composite`)."""
    return bool(_active.modes) and _local.autocast is not None
