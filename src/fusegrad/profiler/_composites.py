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


# Factories: fusegrad builds their tensors without registry ops, so nothing would show a
# call. PyTorch shows each as an event of its own (`aten::zeros` around its `aten::empty`
# and `aten::zero_`); the outer event is the call's. A chain of single nested events is
# spelled out (`aten::empty_like` runs only `aten::empty_strided`).
_FACTORIES: dict[str, dict[str, tuple[str, ...]]] = {
    "torch": {
        "ones": ("aten::ones",), "zeros": ("aten::zeros",), "empty": ("aten::empty",),
        "full": ("aten::full",), "rand": ("aten::rand",), "randn": ("aten::randn",),
        "randint": ("aten::randint",), "randperm": ("aten::randperm",),
        "normal": ("aten::normal",), "arange": ("aten::arange",), "eye": ("aten::eye",),
        "linspace": ("aten::linspace",), "logspace": ("aten::logspace",),
        "scalar_tensor": ("aten::scalar_tensor",),
        "ones_like": ("aten::ones_like",), "zeros_like": ("aten::zeros_like",),
        "full_like": ("aten::full_like",), "rand_like": ("aten::rand_like",),
        "randn_like": ("aten::randn_like",), "randint_like": ("aten::randint_like",),
        "empty_like": ("aten::empty_like", "aten::empty_strided"),
    },
    "torch.Tensor": {
        "new_zeros": ("aten::new_zeros",), "new_ones": ("aten::new_ones",),
        "new_full": ("aten::new_full",), "new_empty": ("aten::new_empty", "aten::empty"),
    },
}


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
        if recorder.with_flops and names[0] == "aten::conv2d":
            events[0].flops = _conv2d_flops(args, kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            for event in reversed(events):
                recorder.end(event)

    profiled.__name__ = getattr(fn, "__name__", "profiled")
    profiled.__wrapped__ = fn
    return profiled


def _conv2d_flops(args: tuple, kwargs: dict) -> int:
    """`F.conv2d(input, weight, bias, stride, padding, dilation, groups)`'s FLOPs."""
    from ._flops import conv2d_flops
    from ._recorder import _shape_of

    names = ("input", "weight", "bias", "stride", "padding", "dilation")
    given = dict(zip(names, args, strict=False))
    given.update((k, v) for k, v in kwargs.items() if k in names)
    if "input" not in given or "weight" not in given:
        return 0
    return conv2d_flops(_shape_of(given["input"]), _shape_of(given["weight"]),
                        given.get("stride", 1), given.get("padding", 0),
                        given.get("dilation", 1))


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
        for tables in (PROFILED_AS, _FACTORIES):
            for label, table in tables.items():
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
