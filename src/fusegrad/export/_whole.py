"""The layers `export` keeps whole, as torch.export's graphs keep them before
`run_decompositions`: `F.linear`, `F.conv1d`/`conv2d`/`conv3d`, `F.layer_norm`, `F.dropout`
and `F.batch_norm` each become one node (`aten.linear.default(x, p_fc_weight, p_fc_bias)`)
instead of the registry ops they are made of (`t`, `addmm`).

While export traces, `kept_whole(tracer)` replaces those functions of `fusegrad.nn.functional`
(which the modules call through the module) with wrappers that hand the call, written with
PyTorch's schema's arguments, to `Tracer.record_whole`. A call the wrapper cannot write
(`padding="same"`, an in-place dropout) or one made in another thread runs as before. Which
layers and how their calls are written is each composite's record (`ops/surface.py`'s
`ATEN_CALLS`); the handles run ATen's spelling of the layer (`fusegrad.batch_norm`,
`nn.functional.linear`: `ops.call_handles`), so a saved, loaded or decomposed program computes
what the module computes.
"""

from __future__ import annotations

import threading
from typing import Any

from ..nn import functional as F
from ..ops.surface import ATEN_CALLS


def _writers() -> dict:
    """The layers export keeps whole: functional name -> how a call reads as PyTorch's ATen
    call (the composite's record, `ops/surface.py`'s `ATEN_CALLS`)."""
    return {name: record.write for name, record in ATEN_CALLS.items() if record.write}


class kept_whole:  # noqa: N801 (a context manager, named as what it does)
    """While it is entered, the layers `_writers` names, called in this thread under `tracer`
    are recorded whole (`Tracer.record_whole`)."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.thread = threading.get_ident()
        self.saved: dict = {}

    def _wrap(self, name: str, original):
        from ..ops.overloads import _overload_of_handle

        write, tracer, thread = _writers()[name], self.tracer, self.thread

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
        for name in _writers():
            original = getattr(F, name)
            self.saved[name] = original
            setattr(F, name, self._wrap(name, original))
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self.saved.items():
            setattr(F, name, original)
