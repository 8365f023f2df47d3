"""`fusegrad.ops.aten`: a printable, callable handle for every registry entry.

As `torch.ops.aten`, the namespace has one packet per op name (`aten.mul`) with one attribute
per overload (`aten.mul.Tensor`, `aten.mul.Scalar`; `default` for an entry named without an
overload, `aten.relu.default`). An overload is what registry-level FX graphs use as a
`call_function` target: it prints as `fusegrad.ops.aten.mul.Tensor` in generated code, its
node is named after the op (`mul`, `mul_1`), and calling it runs the entry through dispatch.
The namespace is built from `REGISTRY` on first use of each name, so it never lists ops itself.
"""

from __future__ import annotations

from .registry import REGISTRY, OpDef


class OpOverload:
    """One registry entry as a callable graph target (torch's `OpOverload`)."""

    __slots__ = ("op", "__name__", "__qualname__", "_overloadname", "_fx_path")
    __module__ = "fusegrad.ops"

    def __init__(self, op: OpDef, packet: str, overload: str):
        self.op = op
        # FX names a node after `__name__` (`mul`, `mul_1`), as PyTorch's graphs do.
        self.__name__ = packet
        self.__qualname__ = f"aten.{packet}.{overload}"
        self._overloadname = overload
        self._fx_path = f"fusegrad.ops.aten.{packet}.{overload}"

    def __call__(self, *args):
        """Run the entry on positional arguments, as `dispatch.call(op, *args)`."""
        from .._dispatch import call

        return call(self.op, *args)

    def name(self) -> str:
        """ATen's spelling: `aten::mul.Tensor`."""
        if self._overloadname == "default":
            return f"aten::{self.__name__}"
        return f"aten::{self.__name__}.{self._overloadname}"

    @property
    def overloadpacket(self) -> OpOverloadPacket:
        """The packet holding this overload (`aten.mul` for `aten.mul.Tensor`)."""
        return getattr(aten, self.__name__)

    def __repr__(self) -> str:
        return self.__qualname__

    __str__ = __repr__

    def __reduce__(self):
        return (_overload_of_name, (self.op.name,))


class OpOverloadPacket:
    """All overloads of one op name (`aten.mul`); each overload is an attribute."""

    def __init__(self, name: str, overloads: dict[str, OpDef]):
        self.__name__ = name
        self._overloads = {ov: OpOverload(op, name, ov) for ov, op in overloads.items()}
        for ov, handle in self._overloads.items():
            setattr(self, ov, handle)

    def overloads(self) -> list[str]:
        """Names of the overloads (`['Tensor', 'Scalar']`)."""
        return list(self._overloads)

    def __call__(self, *args):
        """Run the only overload (ambiguous calls must name one, e.g. `aten.mul.Tensor`)."""
        if len(self._overloads) != 1:
            raise RuntimeError(f"aten.{self.__name__} has overloads {self.overloads()}; "
                               "call one of them")
        return next(iter(self._overloads.values()))(*args)

    def __repr__(self) -> str:
        return f"aten.{self.__name__}"


def _split(name: str) -> tuple[str, str]:
    packet, _, overload = name.partition(".")
    return packet, overload or "default"


class _AtenNamespace:
    """`fusegrad.ops.aten`: packets made from the registry on first access."""

    def __init__(self):
        self._packets: dict[str, OpOverloadPacket] = {}

    def __getattr__(self, name: str) -> OpOverloadPacket:
        if name.startswith("__"):
            raise AttributeError(name)
        packets = self.__dict__["_packets"]
        packet = packets.get(name)
        if packet is None:
            overloads = {}
            for key, op in REGISTRY.items():
                p, ov = _split(key)
                if p == name:
                    overloads[ov] = op
            if not overloads:
                raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}'")
            packet = packets[name] = OpOverloadPacket(name, overloads)
        return packet

    def __dir__(self) -> list[str]:
        return sorted({_split(k)[0] for k in REGISTRY})


aten = _AtenNamespace()


def overload_of(op: OpDef) -> OpOverload:
    """The `fusegrad.ops.aten` handle of registry entry `op`."""
    packet, overload = _split(op.name)
    return getattr(getattr(aten, packet), overload)


def _overload_of_name(name: str) -> OpOverload:
    return overload_of(REGISTRY[name])


def as_opdef(target) -> OpDef | None:
    """The registry entry behind `target` (an OpDef, an OpOverload, or a one-overload packet)."""
    if isinstance(target, OpDef):
        return target
    if isinstance(target, OpOverload):
        return target.op
    if isinstance(target, OpOverloadPacket) and len(target._overloads) == 1:
        return next(iter(target._overloads.values())).op
    return None
