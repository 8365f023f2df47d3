"""`fusegrad.ops.aten` handles of the ATen calls of composites: the calls PyTorch's graphs
record where no registry op stands for the call. The factories (`aten.zeros.default`,
`aten.arange.start`, `aten.lift_fresh_copy.default`) compute nothing from tensors a graph could
lower, and export keeps some layers whole (`aten.linear.default`, `aten.conv2d.default`,
`aten.batch_norm.default`, composites of registry ops). Which composite has which calls, and
how a public call reads as one (`ops/call_arguments.py`), is the composite's record in
`ops/surface.py` (`ATEN_CALLS`). A handle runs the composite's public function on the
arguments PyTorch's schema names (`zeros.default([3], pin_memory = False)` is
`fusegrad.zeros([3], pin_memory=False)`; a method's tensor comes first:
`new_zeros.default(x, [3])`), and `traced_call` finds the factory call a program made, for
make_fx.
"""

from __future__ import annotations

import sys

from .. import _creation
from .surface import ATEN_CALLS, RANDOM, has_flag


def traced_call() -> tuple | None:
    """The factory call the program made that is making a tensor now, as PyTorch's make_fx
    records it: (overload name, arguments, keyword arguments), `lift_fresh_copy` with None
    for a literal (`tensor([1., 2.])`), or None where no one ATen call stands for it.

    Called by a tracer from inside the factories' common path; the outermost of the public
    factories on the stack is the program's call (`zeros_like` makes its tensor through
    `zeros`). Reading the frames costs the tracer only: the factories' eager path passes
    nothing extra."""
    readers = _readers()
    here = vars(_creation)
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals is not here:
        frame = frame.f_back
    outer = None
    while frame is not None and frame.f_globals is here:
        if frame.f_code in readers:
            outer = frame
        frame = frame.f_back
    if outer is None:
        return None
    return readers[outer.f_code](outer.f_locals)


_READERS: dict = {}


def _readers() -> dict:
    """The readers of `ATEN_CALLS` by the code of the public factory they read."""
    if not _READERS:
        for name, record in ATEN_CALLS.items():
            if record.read is not None:
                fn = getattr(_creation, name)
                _READERS[getattr(fn, "__func__", fn).__code__] = record.read
    return _READERS


# ---------------------------------------------------------------- the handles


def _public(packet: str):
    """What a call of `packet`'s handle runs: the composite's own function where its record
    names one, else its public function, found by name in the `fusegrad` namespace,
    `fusegrad.nn.functional` (`linear`) or as a Tensor method (`new_zeros`), the tensor
    first. Found when first called: the namespace is the layer above, loaded by then."""
    run = ATEN_CALLS[packet].run
    if run is not None:
        return run
    namespace = sys.modules["fusegrad"]  # (by name, not imported: the public layer is above)
    fn = getattr(namespace, packet, None) or getattr(namespace.nn.functional, packet, None)
    return fn if fn is not None else getattr(namespace.Tensor, packet)


class CallOverload:
    """A call as a graph target, printed and named as torch's `OpOverload`."""

    __slots__ = ("_run", "__name__", "__qualname__", "_overloadname", "_fx_path", "draws")
    __module__ = "fusegrad.ops"

    def __init__(self, packet: str, overload: str):
        self._run = None
        self.__name__ = packet
        self.__qualname__ = f"aten.{packet}.{overload}"
        self._overloadname = overload
        self._fx_path = f"fusegrad.ops.aten.{packet}.{overload}"
        # (a random draw: dead-code elimination keeps it, as a registry op that draws)
        self.draws = has_flag(packet, RANDOM)

    def __call__(self, *args, **kwargs):
        """Run the call on the arguments as PyTorch's schema names them."""
        if self._run is None:
            self._run = _public(self.__name__)
        return self._run(*args, **kwargs)

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


def is_call(key: str) -> bool:
    """Whether `key` ("packet.overload") is the ATen call of a composite."""
    packet, _, overload = key.partition(".")
    record = ATEN_CALLS.get(packet)
    return record is not None and overload in record.overloads


def handle(key: str) -> CallOverload:
    """The one handle of `key` ("packet.overload", an ATen call of a composite)."""
    made = _HANDLES.get(key)
    if made is None:
        if not is_call(key):
            raise KeyError(key)
        made = _HANDLES[key] = CallOverload(*key.split("."))
    return made


def call_overloads(packet: str) -> dict[str, CallOverload]:
    """The handles of `packet` by overload name (empty: no composite has such calls)."""
    record = ATEN_CALLS.get(packet)
    if record is None:
        return {}
    return {overload: handle(f"{packet}.{overload}") for overload in record.overloads}


def packets() -> set[str]:
    """The names of the composites with ATen calls."""
    return {name for name, record in ATEN_CALLS.items() if record.overloads}
