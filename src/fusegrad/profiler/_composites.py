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
from ..ops.surface import PROFILED_AS, PROFILED_FACTORIES

_LOCK = threading.Lock()
_ACTIVE = [0]  # recorders running (any thread): the swap is made by the first, undone by the last
_UNDO: list = []  # (restore function) for each swap made


def _namespace(label: str):
    if label == "torch":
        return sys.modules["fusegrad"]
    if label == "torch.Tensor":
        return Tensor
    return sys.modules.get("fusegrad." + label.partition(".")[2])  # loaded ones only


def _profiled(fn, names: tuple[str, ...], factory: bool = False):
    """`fn`, opening the events `names` (nested, outermost first) around each call made
    while this thread's profiler records (a `factory`'s shapes as `_factory_shapes`)."""
    from ._recorder import Recorder

    def profiled(*args, **kwargs):
        recorder = _dispatch.observer()
        # Not profiling on this thread, or inside the same composite spelled another way
        # (`F.softmax` calls `Tensor.softmax`): no event of its own.
        if not isinstance(recorder, Recorder) or (
                recorder._open and recorder._open[-1].name == names[-1]):
            return fn(*args, **kwargs)
        shapes = None
        if recorder.record_shapes:
            shapes = (_factory_shapes(fn, names[0], args, kwargs) if factory
                      else _input_shapes(fn, names[0], args, kwargs))
        # (the events a factory runs inside take no tensor: as many entries, all empty)
        events = [recorder.begin(name, shapes if k == 0 or shapes is None or not factory
                                 else [[] for _ in shapes])
                  for k, name in enumerate(names)]
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


_SIGNATURES: dict = {}  # fn -> its signature (None: none to read)
# Python parameters that are no schema argument: where the result goes, autograd's flag,
# NumPy's spelling of `dim`.
_NOT_IN_SCHEMA = frozenset({"out", "requires_grad", "axis"})


def _signature(fn):
    import inspect

    sig = _SIGNATURES.get(fn, inspect)
    if sig is inspect:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        _SIGNATURES[fn] = sig
    return sig


def _schema_params(sig) -> list:
    """The parameters of `sig` that stand for schema arguments."""
    return [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD
            and p.name not in _NOT_IN_SCHEMA and not p.name.startswith("_")]


# The schemas of the composites whose Python parameters are not ATen's, by event: the
# parameter giving each schema argument in order ("a|b": whichever the function has; None:
# one the Python function does not take, always its default).
_SCHEMAS: dict[str, tuple] = {
    "aten::batch_norm": ("input", "weight", "bias", "running_mean", "running_var",
                         "training", "momentum", "eps", None),
    "aten::instance_norm": ("input", "weight", "bias", "running_mean", "running_var",
                            "use_input_stats", "momentum", "eps", None),
    "aten::layer_norm": ("input", "normalized_shape", "weight", "bias", "eps", None),
    "aten::group_norm": ("input", "num_groups", "weight", "bias", "eps", None),
    "aten::dropout": ("input", "p", "training|train"),
    "aten::cross_entropy_loss": ("input", "target", "weight", "reduction", "ignore_index",
                                 "label_smoothing"),
    "aten::nll_loss_nd": ("input", "target", "weight", "reduction", "ignore_index"),
    "aten::embedding": ("weight", "input", "padding_idx", "scale_grad_by_freq", "sparse"),
    # (functions parsing `*args, **kwargs` as PyTorch's overloads: by position, then name)
    "aten::softmax": ("input", "dim", "dtype"),
    "aten::log_softmax": ("input", "dim", "dtype"),
}
for _d in (1, 2, 3):  # max_pool{1,2,3}d: no return_indices in the schema
    _SCHEMAS[f"aten::max_pool{_d}d"] = ("input", "kernel_size", "stride", "padding",
                                        "dilation", "ceil_mode")


def _input_shapes(fn, event: str, args: tuple, kwargs: dict) -> list:
    """`record_shapes`' list for a composite's call, as PyTorch's for its schema: one entry
    per schema argument (a tensor's shape, else `[]`, also for one left to its default):
    the function's parameters (`*sizes` one entry, keyword-only ones after them left out),
    or `_SCHEMAS`' order. `Tensor.to` as its dtype or device overload."""
    from ._recorder import _shape_of

    if event == "aten::to" and args:  # to.dtype(self, dtype, non_blocking, copy, format)
        by_device = len(args) > 1 and isinstance(args[1], str | type(args[0].device)) or \
            "device" in kwargs
        return [_shape_of(args[0])] + [[] for _ in range(5 if by_device else 4)]
    sig = _signature(fn)
    schema = _SCHEMAS.get(event)
    if sig is None or any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        if schema is None:
            return [_shape_of(a) for a in args]
        # (no parameters to bind: the schema's arguments by position, then by keyword)
        return [_shape_of(args[i] if i < len(args) else next(
                    (kwargs[n] for n in (spec or "").split("|") if n in kwargs), None))
                for i, spec in enumerate(schema)]
    try:
        bound = sig.bind(*args, **kwargs).arguments
    except TypeError:  # (the call itself raises; its event keeps what it was given)
        return [_shape_of(a) for a in args]
    if schema is not None:
        out = []
        for spec in schema:
            names = spec.split("|") if spec else ()
            value = next((bound[n] for n in names if n in bound), None)
            out.append(_shape_of(value))
        return out
    params = _schema_params(sig)
    if any(p.kind is p.VAR_POSITIONAL for p in params):  # (`shape=` is `*sizes` again)
        params = [p for p in params if p.kind is not p.KEYWORD_ONLY]
    return [[] if p.kind is p.VAR_POSITIONAL else _shape_of(bound.get(p.name))
            for p in params]


def _factory_shapes(fn, event: str, args: tuple, kwargs: dict) -> list:
    """`record_shapes`' list for a factory's call, as PyTorch's: its leading arguments (a
    `*_like`'s or `new_*`'s tensor by its shape; sizes, given as numbers, a tuple or
    `size=`, as one entry), then dtype, layout, device and pin_memory, with memory_format
    after them for `empty` and the `*_like` factories and a generator before them for
    `normal`."""
    from .._tensor import Tensor
    from ._recorder import _shape_of

    sig = _signature(fn)
    params = list(sig.parameters.values()) if sig is not None else []
    if any(p.kind is p.VAR_POSITIONAL and p.name == "sizes" for p in params):
        lead = [_shape_of(args[0])] if args and isinstance(args[0], Tensor) else []
        lead.append([])
    else:
        lead = [_shape_of(a) for a in args]
        named = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        lead += [[] for name in named[len(args):] if name in kwargs]
        if event == "aten::logspace":  # (its base is a schema argument with a default)
            lead += [[] for _ in range(4 - len(lead))]
    options = 4 + (event in ("aten::empty", "aten::normal") or event.endswith("_like"))
    return lead + [[] for _ in range(options)]


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


def _swap(namespace, name: str, names: tuple[str, ...], factory: bool = False) -> None:
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
            scope[key] = _profiled(value, names, factory)
        _UNDO.append(lambda scope=scope, saved=saved: scope.update(saved))
    elif isinstance(namespace, type):
        setattr(namespace, name, _profiled(obj, names, factory))
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
        for tables in (PROFILED_AS, PROFILED_FACTORIES):
            for label, table in tables.items():
                namespace = _namespace(label)
                if namespace is not None:
                    for name, names in table.items():
                        _swap(namespace, name, names, tables is PROFILED_FACTORIES)


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
