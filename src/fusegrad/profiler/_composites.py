"""The events of composite functions: `aten::linear` around the `aten::addmm` it runs.

PyTorch's profiler shows a composite function (`F.linear`, `torch.matmul`, `F.conv2d`,
`Tensor.reshape`) as an event of its own, the ops its body runs nested inside. fusegrad's
composites are Python functions over registry ops, which dispatch reports one by one; while a
profiler records, each composite that `ops.surface.PROFILED_AS` names is swapped for a
function that opens its events around the call. The swap happens inside the protocol wrapper
(its own globals hold the function it calls), so every name bound to the public function sees
it; methods without a wrapper are swapped on `Tensor`. Outside profiling nothing is swapped,
so the calls cost what they always do.
"""

from __future__ import annotations

import sys
import threading

from .. import _dispatch
from .._tensor import Tensor
from ..ops.surface import PROFILED_AS

_LOCK = threading.Lock()
_ACTIVE = [0]  # recorders running (any thread): the swap is made by the first, undone by the last
_UNDO: list = []  # (restore function) for each swap made


def _namespace(label: str):
    if label == "torch":
        return sys.modules["fusegrad"]
    if label == "torch.Tensor":
        return Tensor
    return sys.modules.get("fusegrad." + label.partition(".")[2])  # loaded ones only


def _profiled(fn, names: tuple[str, ...]):
    """`fn`, opening the events `names` (nested, outermost first) around each call made
    while this thread's profiler records."""
    from ._recorder import Recorder, _shape_of

    def profiled(*args, **kwargs):
        recorder = _dispatch.observer()
        # Not profiling on this thread, or inside the same composite spelled another way
        # (`F.softmax` calls `Tensor.softmax`): no event of its own.
        if not isinstance(recorder, Recorder) or (
                recorder._open and recorder._open[-1].name == names[-1]):
            return fn(*args, **kwargs)
        shapes = [_shape_of(a) for a in args] if recorder.record_shapes else None
        events = [recorder.begin(name, shapes) for name in names]
        try:
            return fn(*args, **kwargs)
        finally:
            for event in reversed(events):
                recorder.end(event)

    profiled.__name__ = getattr(fn, "__name__", "profiled")
    profiled.__wrapped__ = fn
    return profiled


def _swap(namespace, name: str, names: tuple[str, ...]) -> None:
    owner = namespace.__dict__ if isinstance(namespace, type) else vars(namespace)
    obj = owner.get(name)
    if obj is None:
        return
    scope = getattr(obj, "__globals__", None)
    info = getattr(obj, "_torch_function_info", None)
    if info is not None and scope is not None and scope.get("info") is info:
        # A protocol wrapper with globals of its own: what it calls is swapped inside it.
        saved = {k: scope[k] for k in ("fn", "fn0") if k in scope}
        for key, value in saved.items():
            scope[key] = _profiled(value, names)
        _UNDO.append(lambda scope=scope, saved=saved: scope.update(saved))
    elif isinstance(namespace, type):
        setattr(namespace, name, _profiled(obj, names))
        _UNDO.append(lambda: setattr(namespace, name, obj))


def start() -> None:
    """A recorder starts: make the swaps if it is the only one."""
    with _LOCK:
        _ACTIVE[0] += 1
        if _ACTIVE[0] > 1:
            return
        # Its layers are what profiles are mostly of; loaded now, so its functions are
        # swapped even when the profiled code is the first to use them.
        from ..nn import functional  # noqa: F401
        for label, table in PROFILED_AS.items():
            namespace = _namespace(label)
            if namespace is not None:
                for name, names in table.items():
                    _swap(namespace, name, names)


def stop() -> None:
    """A recorder stops: undo the swaps once no other runs."""
    with _LOCK:
        _ACTIVE[0] -= 1
        if _ACTIVE[0] > 0:
            return
        while _UNDO:
            _UNDO.pop()()


def swapped() -> int:
    """How many swaps are in place (for tests)."""
    return len(_UNDO)
