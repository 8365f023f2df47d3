"""`fusegrad.ops.aten`: a printable, callable handle for every registry entry.

As `torch.ops.aten`, the namespace has one packet per op name (`aten.mul`) with one attribute
per overload (`aten.mul.Tensor`, `aten.mul.Scalar`; `default` for an entry named without an
overload, `aten.relu.default`). An overload is what registry-level FX graphs use as a
`call_function` target: it prints as `fusegrad.ops.aten.mul.Tensor` in generated code, its
node is named after the op (`mul`, `mul_1`), and calling it runs the entry through dispatch.
The namespace is built from `REGISTRY` on first use of each name, so it never lists ops itself.
"""

from __future__ import annotations

import inspect

from .registry import REGISTRY, OpDef

EMPTY = inspect.Parameter.empty  # (a parameter without default)


def _same(a, b) -> bool:
    """Whether values `a` and `b` are one argument (a bool is no int; a tuple is a list)."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# PyTorch's parameters and defaults where the kernel's do not tell them: the activations whose
# kernels take `*params` (named as torch's schemas name them, each default the value the
# functional layer passes for an argument left out, the schema's: `softplus`'s ints 1 and 20)
# and `hardtanh`, whose schema's defaults are the ints -1 and 1 (`F.hardtanh`'s floats
# `-1.0`, `1.0` are then written out, as PyTorch's graphs write them).
_ELU = (("alpha", 1), ("scale", 1), ("input_scale", 1))
_SCHEMA_PARAMETERS = {
    "gelu": (("approximate", "none"),),
    "softplus": (("beta", 1), ("threshold", 20)),
    "leaky_relu": (("negative_slope", 0.01),),
    "leaky_relu_": (("negative_slope", 0.01),),
    "elu": _ELU,
    "elu_": _ELU,
    "hardtanh": (("lo", -1), ("hi", 1)),
    "hardtanh_": (("lo", -1), ("hi", 1)),
}


def parameters(op: OpDef) -> list:
    """The positional parameters of `op`'s kernel as (name, default or `EMPTY`) pairs,
    defaults kept only where the meta function has the same one or takes `*args` (both run
    on a call that leaves the argument out). A kernel taking `*args` is named by its meta function's
    parameters, with the meta function's defaults; `_SCHEMA_PARAMETERS` names those of a kernel
    taking `*params` and gives torch's defaults over the kernel's."""
    try:
        kernel = inspect.signature(op.kernel).parameters
        meta = inspect.signature(op.meta).parameters
    except (TypeError, ValueError):
        return []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    schema = _SCHEMA_PARAMETERS.get(op.name, ())
    out = []
    for name, p in kernel.items():
        if p.kind not in positional:
            if p.kind == p.VAR_POSITIONAL and all(q.kind != q.VAR_POSITIONAL
                                                  for q in meta.values()):
                named = [(q, m.default) for q, m in meta.items() if m.kind in positional]
                out += named[len(out):]
            elif p.kind == p.VAR_POSITIONAL:
                out += schema
            break
        m = meta.get(name)
        if m is None and any(q.kind == q.VAR_POSITIONAL for q in meta.values()):
            m = p  # (a meta function taking `*args` reads what it is given)
        same = m is not None and p.default is not p.empty and _same(m.default, p.default)
        out.append((name, p.default if same else EMPTY))
    if schema:  # (torch's defaults over the kernel's)
        given = dict(schema)
        out = [(name, given.get(name, default)) for name, default in out]
    return out


def _with_keywords(op: OpDef, args: tuple, kwargs: dict) -> tuple:
    """`args` and `kwargs` of a call of `op` as its kernel's positional arguments (the
    parameters skipped between them take their defaults)."""
    params = parameters(op)
    names = [name for name, _ in params]
    unknown = [k for k in kwargs if k not in names[len(args):]]
    if unknown:  # (PyTorch's message then prints the schema, which the registry has not)
        raise RuntimeError(f"Unknown keyword argument '{unknown[0]}' for operator "
                           f"'aten::{_split(op.name)[0]}'.")
    last = max(names.index(k) for k in kwargs)
    out = list(args)
    for name, default in params[len(args):last + 1]:
        if name in kwargs:
            out.append(kwargs[name])
        elif default is EMPTY:
            raise TypeError(f"aten.{op.name}() missing argument '{name}'")
        else:
            out.append(default)
    return tuple(out)


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

    def __call__(self, *args, **kwargs):
        """Run the entry, as `dispatch.call(op, *args)`; keyword arguments (make_fx's graphs
        pass those PyTorch's schema takes by keyword only) name the kernel's parameters."""
        from .._dispatch import call

        if kwargs:
            args = _with_keywords(self.op, args, kwargs)
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
        return (_overload_of_handle, (self.__name__, self._overloadname))


class OpOverloadPacket:
    """All overloads of one op name (`aten.mul`); each overload is an attribute."""

    def __init__(self, name: str, overloads: dict[str, OpDef], handles: dict | None = None):
        self.__name__ = name
        # (`handles`: overloads made already, the factories' that are no registry entries)
        self._overloads = handles or {ov: OpOverload(op, name, ov)
                                      for ov, op in overloads.items()}
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


# PyTorch's comparisons with a number have overloads of their own (`gt.Scalar`), which its
# graphs record for `x > 0`; the registry's `.Tensor` entries take the number, so those
# overloads are handles of the `.Tensor` entries.
_SCALAR_OVERLOADS = frozenset(("eq", "ne", "lt", "le", "gt", "ge"))


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
            if name in _SCALAR_OVERLOADS and "Tensor" in overloads:
                overloads.setdefault("Scalar", overloads["Tensor"])
            handles = None
            if not overloads:
                from .call_handles import call_overloads

                handles = call_overloads(name)
            if not overloads and not handles:
                raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}'")
            packet = packets[name] = OpOverloadPacket(name, overloads, handles)
        return packet

    def __dir__(self) -> list[str]:
        from .call_handles import packets

        return sorted({_split(k)[0] for k in REGISTRY} | packets())


aten = _AtenNamespace()


def overload_of(op: OpDef) -> OpOverload:
    """The `fusegrad.ops.aten` handle of registry entry `op`."""
    packet, overload = _split(op.name)
    return getattr(getattr(aten, packet), overload)


def _overload_of_name(name: str) -> OpOverload:
    return overload_of(REGISTRY[name])


def _overload_of_handle(packet: str, overload: str) -> OpOverload:
    return getattr(getattr(aten, packet), overload)


def as_opdef(target) -> OpDef | None:
    """The registry entry behind `target` (an OpDef, an OpOverload, or a one-overload packet)."""
    if isinstance(target, OpDef):
        return target
    if isinstance(target, OpOverload):
        return target.op
    if isinstance(target, OpOverloadPacket) and len(target._overloads) == 1:
        return next(iter(target._overloads.values())).op
    return None
