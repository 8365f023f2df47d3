"""`fusegrad.ops.aten` handles of calls PyTorch's graphs record that are no registry entries:
the factories (`aten.zeros.default`, `aten.arange.start`, `aten.lift_fresh_copy.default`, ...),
which compute nothing from tensors a graph could lower, and the layers export keeps whole
(`aten.linear.default`, `aten.conv2d.default`, `aten.batch_norm.default`: composites of
registry ops, registered by `fusegrad.export`, the layer above that defines them). make_fx
and export record them where the traced program made that call, as torch's do, and a graph
holding one runs it by calling the public function with the arguments PyTorch's schema names
(`zeros.default([3], device = device(type='cpu'), pin_memory = False)` is
`zeros((3,), device=cpu)`).
"""

from __future__ import annotations

from .. import _creation


def _options(kw: dict) -> dict:
    """The public factory's keywords for the schema's keyword-only options (`pin_memory`
    and `layout` are accepted and have no effect on the CPU)."""
    return {k: v for k, v in kw.items() if k in ("dtype", "device", "memory_format",
                                                   "requires_grad", "generator")}


def _sized(fn):
    return lambda size, **kw: fn(tuple(size), **_options(kw))


def _like(fn):
    return lambda self, *args, **kw: fn(self, *args, **_options(kw))


def _new(name):
    def call(self, size, *args, **kw):
        return getattr(self, name)(tuple(size), *args, **_options(kw))
    return call


def _scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    from .. import _dtype

    return _creation.full((), s, dtype=dtype or _dtype.defaults.float, device=device)


# "packet.overload" -> what a call of the handle runs.
CALLS = {
    "zeros.default": _sized(_creation.zeros),
    "ones.default": _sized(_creation.ones),
    "empty.memory_format": _sized(_creation.empty),
    "full.default": lambda size, fill_value, **kw: _creation.full(tuple(size), fill_value,
                                                                  **_options(kw)),
    "arange.default": lambda end, **kw: _creation.arange(end, **_options(kw)),
    "arange.start": lambda start, end, **kw: _creation.arange(start, end, **_options(kw)),
    "arange.start_step": lambda start, end, step, **kw: _creation.arange(start, end, step,
                                                                         **_options(kw)),
    "eye.default": lambda n, **kw: _creation.eye(n, **_options(kw)),
    "eye.m": lambda n, m, **kw: _creation.eye(n, m, **_options(kw)),
    "rand.default": _sized(_creation.rand),
    "randn.default": _sized(_creation.randn),
    "zeros_like.default": _like(_creation.zeros_like),
    "ones_like.default": _like(_creation.ones_like),
    "empty_like.default": _like(_creation.empty_like),
    "full_like.default": _like(_creation.full_like),
    "rand_like.default": _like(_creation.rand_like),
    "randn_like.default": _like(_creation.randn_like),
    "new_zeros.default": _new("new_zeros"),
    "new_ones.default": _new("new_ones"),
    "new_empty.default": _new("new_empty"),
    "new_full.default": _new("new_full"),
    "scalar_tensor.default": _scalar_tensor,
    # (a tensor literal's constant, copied so each run makes a tensor of its own)
    "lift_fresh_copy.default": _creation.lift_fresh_copy,
    # (an alias without history, made outside dispatch: `detach()`, `.data`)
    "detach.default": lambda self: self.detach(),
}
RANDOM = {"rand", "randn", "rand_like", "randn_like"}


def register(key: str, fn, draws: bool = False) -> None:
    """Make `fusegrad.ops.aten.<key>` ("packet.overload") a handle running `fn`; `draws`:
    it draws random numbers (dead-code elimination keeps it)."""
    CALLS[key] = fn
    if draws:
        RANDOM.add(key.partition(".")[0])


class CallOverload:
    """A call as a graph target, printed and named as torch's `OpOverload`."""

    __slots__ = ("_call", "__name__", "__qualname__", "_overloadname", "_fx_path", "draws")
    __module__ = "fusegrad.ops"

    def __init__(self, packet: str, overload: str):
        self._call = CALLS[f"{packet}.{overload}"]
        self.__name__ = packet
        self.__qualname__ = f"aten.{packet}.{overload}"
        self._overloadname = overload
        self._fx_path = f"fusegrad.ops.aten.{packet}.{overload}"
        # (a random draw: dead-code elimination keeps it, as a registry op that draws)
        self.draws = packet in RANDOM

    def __call__(self, *args, **kwargs):
        """Run the call on the arguments as PyTorch's schema names them."""
        return self._call(*args, **kwargs)

    def name(self) -> str:
        """ATen's spelling: `aten::zeros`, `aten::arange.start`."""
        if self._overloadname == "default":
            return f"aten::{self.__name__}"
        return f"aten::{self.__name__}.{self._overloadname}"

    def __repr__(self) -> str:
        return self.__qualname__

    __str__ = __repr__

    def __reduce__(self):
        return (handle, (f"{self.__name__}.{self._overloadname}",))


_HANDLES: dict[str, CallOverload] = {}


def handle(key: str) -> CallOverload:
    """The one handle of `key` ("packet.overload", a key of `CALLS`)."""
    made = _HANDLES.get(key)
    if made is None:
        made = _HANDLES[key] = CallOverload(*key.split("."))
    return made


def call_overloads(packet: str) -> dict[str, CallOverload]:
    """The handles of `packet` by overload name (empty: no such call)."""
    return {key.partition(".")[2]: handle(key)
            for key in CALLS if key.partition(".")[0] == packet}


def packets() -> set[str]:
    """The calls' packet names."""
    return {key.partition(".")[0] for key in CALLS}
