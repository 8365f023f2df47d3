"""`aot_function`, `aot_module_simplified` and the `aot_eager` backend.

On a call, the inputs' metadata (shape, strides, dtype, requires_grad) and the grad mode pick
a compiled entry; a new combination is traced: the joint graph when autograd must record (grad
mode on and an input requiring grad), partitioned into forward and backward graphs, or else
the forward alone (an inference graph). Anything the trace cannot express (data-dependent
ops, tensor subclasses, hooks on intermediates, random values made outside dispatch) makes
that entry run the original function eagerly; the reason is logged (`graph_breaks`) and kept
in `fallback_reason`, never a wrong answer.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator

import numpy as np
from numpy import ndarray as _ndarray

from ..._dtype import get_default_dtype
from ..._symbolic import graph_is_dynamic
from ..._tensor import Tensor
from ..._thread_state import local as _thread_local
from ...autograd.grad_mode import is_grad_enabled
from .. import logs
from .control_flow import route_cond
from .functionalize import AOTUnsupported
from .joint import trace_inference, trace_joint
from .lifted import Reads, WithReads, reads_of
from .partitioners import default_partition
from .provenance import Provenance, locatable
from .runtime import AOTRunner, example_values, needs_autograd


def _key(args, float_classes: bool = True) -> tuple:
    """What a trace depends on in a call's arguments and state: the entry of the cache.
    (Whether the call records gradients is not a part of its own: grad mode and each
    input's requires_grad are.)"""
    # The grad mode itself too: a program switching it is traced from the mode it starts in.
    # And the dtype CPU autocast casts to (None while off) and the default dtype: a trace
    # holds autocast's casts and the dtypes its factories made.
    parts = [is_grad_enabled(), _thread_local.autocast, get_default_dtype()]
    append = parts.append
    owners = []  # id(what owns its memory) of each tensor input with elements
    for a in args:
        if isinstance(a, Tensor):
            data = a._data
            if data is not None and data.size:
                base = data.base
                owners.append(id(data) if base is None else id(_owner(base)))
                if a._base is None and data.__class__ is _ndarray:
                    # No view (parameters, most inputs): its fields read directly, with
                    # NumPy's strides in bytes, which tell what strides in elements do.
                    append((type(a), data.shape, data.strides, a._dtype, a._rg,
                            a._grad_fn is None, False))
                    continue
            append((type(a), tuple(a.shape), tuple(a.stride()), a.dtype, a.requires_grad,
                    a.grad_fn is None, a._base is not None))
        elif type(a) is float:  # a float input: one trace serves every value (of its class)
            append((float, _float_class(a) if float_classes else None))
        else:
            append((type(a), repr(a)))
    # Which tensor inputs share memory: a trace holds one value per input, so a write into
    # one must not be reused for a call where another input sees that write.
    append(() if len(set(owners)) == len(owners) else _memory_overlaps(args))
    return tuple(parts)


def _memory_overlaps(args) -> tuple:
    """The pairs (i, j), i < j, of tensor inputs whose memory overlaps (the same tensor
    twice, views of one base that meet); () in the common case of none."""
    owners: dict = {}
    count = 0
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            data = a._data
            if data is not None and data.size:
                base = data.base
                owner = data if base is None else _owner(base)
                owners.setdefault(id(owner), []).append(i)
                count += 1
    if len(owners) == count:
        return ()  # one owner each (the common case, without asking NumPy)
    pairs = []
    for group in owners.values():
        for k, i in enumerate(group):
            for j in group[k + 1:]:
                if _shares_memory(args[i]._data, args[j]._data):
                    pairs.append((i, j))
    return tuple(sorted(pairs))


def _owner(data):
    """The object at the end of array `data`'s chain of bases (what owns its memory; NumPy's
    strided views keep theirs behind a stand-in object's `base`)."""
    while True:
        base = getattr(data, "base", None)
        if base is None:
            return data
        data = base


def _shares_memory(x, y) -> bool:
    """Whether arrays `x` and `y` share an element; True where NumPy gives up deciding."""
    try:
        return bool(np.shares_memory(x, y, max_work=10_000))
    except np.exceptions.TooHardError:
        return True


def _check_input_writes(trace, args) -> None:
    """Refuse a trace that writes an input sharing memory with another input: the graph
    reads each input's value as it came in, where eager would see the write through every
    alias (the program then runs eagerly)."""
    written = set(trace.mutated_inputs)
    if written and any(i in written or j in written for i, j in _memory_overlaps(args)):
        raise AOTUnsupported("an input written in place shares memory with another input")


def _float_class(a: float) -> tuple:
    """What C-level readers of a float see without calling its methods (`math.isnan`,
    `math.isinf`, `math.copysign`, `float.is_integer`), which a `TracedFloat` cannot
    intercept: one trace of a Python function serves the floats of one class (NaN,
    infinite, sign, integral). (A captured graph's float needs none: capture guards what
    its program reads of the value.)"""
    return (math.isnan(a), math.isinf(a), math.copysign(1.0, a) < 0,
            math.isfinite(a) and a.is_integer())


def _other_float(a: float) -> float:
    """Another float of `a`'s class (`_float_class`) with another integral part and another
    fraction: what the program computed from `a`'s value by C-level readers (`math.modf`,
    `numpy.floor`, `math.frexp`) then changes the trace. NaN and infinities have no other."""
    if not math.isfinite(a):
        return a
    sign = math.copysign(1.0, a)
    whole = math.trunc(a)
    fraction = a - whole
    if fraction:
        fraction = fraction * 0.5 + 0.1234 * sign  # (never 0: stays non-integral)
    return whole + 3.0 * sign + fraction


def _other_floats(args) -> tuple:
    """`args` with every float input changed within its class: tracing them again tells
    whether the trace kept a float's value somewhere (then it cannot serve other values)."""
    return tuple(_other_float(a) if type(a) is float else a for a in args)


def _same_trace(a, b) -> bool:
    """Whether two traces of one program are the same graph with the same constants."""
    if a.module.code != b.module.code:
        return False
    for n in a.module.graph.nodes:
        if n.op == "get_attr":
            x, y = getattr(a.module, n.target), getattr(b.module, n.target)
            if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape) or \
                    x._data.tobytes() != y._data.tobytes():
                return False
    return True


def _check_float_inputs(trace_fn, fn, args, trace, *rest):
    """A trace of a program with float inputs must not depend on their values (a float
    read by Python code the trace does not see, `math.sqrt(p)`): traced again with other
    values, the graph must be the same."""
    if any(type(a) is float for a in args) and \
            not _same_trace(trace, trace_fn(fn, _other_floats(args), *rest)):
        raise AOTUnsupported("the trace depends on the value of a float input")


def _needs_joint(trace, args) -> bool:
    """Whether a program traced with grad mode off switches it on where gradients may be
    recorded (an output requiring grad, or any input requiring grad): autograd must then
    record through the compiled node, so it needs the joint graph."""
    if not trace.switches_grad:
        return False
    # Any input requiring grad, too: the inference graph keeps no `detach` (a detached
    # tensor is its input's node), so run eagerly with grad on it would record through it.
    return any(info.requires_grad for info in trace.outputs) or any(
        isinstance(a, Tensor) and a.requires_grad for a in args)


_AOT_IDS = itertools.count()


class AOTCompiled:
    """A function compiled ahead of time per input signature (see the module docstring)."""

    def __init__(self, fn, fw_compiler, bw_compiler=None, partition_fn=default_partition,
                 decompositions=None, inference_compiler=None, known_constants=(),
                 float_classes: bool = True):
        self.fn = fn
        self.float_classes = float_classes  # (see `_float_class`)
        self.fw_compiler = fw_compiler
        self.bw_compiler = bw_compiler or fw_compiler
        self.inference_compiler = inference_compiler or fw_compiler
        self.partition_fn = partition_fn
        self.decompositions = decompositions
        self.known_constants = tuple(known_constants)
        self.unsupported: str | None = None  # why no trace can express fn (it runs eagerly)
        self.provenance = None  # the stack traces of the captured graph fn runs (if any)
        self.aot_id = next(_AOT_IDS)  # (see `_graph_id`)
        self._traced = False
        self.cache: dict = {}
        self.fallback_reason: str | None = None
        # Positions of integer inputs traced as float inputs, and of the integer outputs
        # computed from them (`float_only_ints`).
        self.float_ints: frozenset = frozenset()
        self.int_outputs: frozenset = frozenset()
        functools.update_wrapper(self, fn)

    def _graph_id(self) -> int:
        """The number the logs give this compilation's graphs (PyTorch's `aot_id`): one per
        compiled function, counted across the process; each later trace of another input
        signature is a compilation of its own (as a recompilation is in PyTorch)."""
        if self._traced:
            self.aot_id = next(_AOT_IDS)
        self._traced = True
        return self.aot_id

    def compile_for(self, args):
        """The runner for these arguments (traced and compiled on first sight; integer
        inputs at `float_ints` are passed as floats to it)."""
        if self.float_ints:
            floats = _as_floats(args, self.float_ints)
            runner = self._runner(floats, report=False)
            if runner is not None:
                return runner
            # Traced as a float, the counter met a reader of its value (a factory filled
            # with it): each value gets its own trace from now on, as other ints.
            self.float_ints = self.int_outputs = frozenset()
            self.cache.pop(self._cache_key(floats), None)
        return self._runner(args)

    def _cache_key(self, args) -> tuple:
        return _key(args, self.float_classes)

    def _runner(self, args, report: bool = True):
        key = self._cache_key(args)
        runner = self.cache.get(key)
        if runner is None:
            runner = self._compile(args, needs_autograd(args), report)
            if runner is None:
                return None
            self.cache[key] = runner
        return runner

    def __call__(self, *args):
        if self.float_ints:
            runner = self.compile_for(args)
            if self.float_ints:  # (still: the trace took the ints as floats)
                return _as_ints(runner(*_as_floats(args, self.float_ints)),
                                self.int_outputs)
            return runner(*args)
        # (`compile_for` written out for the common case, a trace made before)
        runner = self.cache.get(_key(args, self.float_classes))
        if runner is None:
            runner = self._runner(args)
        return runner(*args)

    def _compile(self, args, grad: bool, report: bool = True):
        """The runner of a new trace for `args`; eager execution (`fn`) where none can be
        made, or None then when not `report`ing it (a first try)."""
        try:
            if self.unsupported is not None:
                raise AOTUnsupported(self.unsupported)
            if not grad:
                trace = trace_inference(self.fn, args, self.decompositions,
                                        self.known_constants, self.provenance)
                _check_float_inputs(trace_inference, self.fn, args, trace, self.decompositions,
                                    self.known_constants, self.provenance)
                _check_input_writes(trace, args)
                if not _needs_joint(trace, args):
                    logs.emit_graph("aot_graphs", "Forward graph", trace.module,
                                    self._graph_id())
                    fw = self.inference_compiler(trace.module, example_values(trace.module))
                    return AOTRunner(trace, fw)
            # Grad mode on, or switched on inside the program: the joint graph, traced from
            # the mode the program starts in.
            trace = trace_joint(self.fn, args, self.decompositions, self.known_constants,
                                self.provenance)
            _check_float_inputs(trace_joint, self.fn, args, trace, self.decompositions,
                                self.known_constants, self.provenance)
            _check_input_writes(trace, args)
            graph_id = self._graph_id()
            logs.emit_graph("aot_joint_graph", "Joint graph", trace.module, graph_id)
            fw_module, bw_module = self.partition_fn(
                trace.module, list(args), num_fwd_outputs=trace.num_fwd_outputs)
            logs.emit_graph("aot_graphs", "Forward graph", fw_module, graph_id)
            logs.emit_graph("aot_graphs", "Backward graph", bw_module, graph_id)
            fw = self.fw_compiler(fw_module, example_values(fw_module))
            return AOTRunner(trace, fw, bw_module, self.bw_compiler)
        except Exception as e:  # noqa: BLE001
            # Whatever stops the trace (AOTUnsupported, DataDependentOutputError, a module
            # touching a fake tensor's missing data, an error of the program itself) leaves
            # the program to eager execution, which computes it, or raises its own error.
            if not report:
                return None
            self.fallback_reason = f"{type(e).__name__}: {e}"
            logs.emit("graph_breaks", "AOT autograd cannot trace "
                      f"{getattr(self.fn, '__qualname__', self.fn)}; it runs eagerly: "
                      f"{self.fallback_reason}")
            return self.fn


def aot_function(fn, fw_compiler, bw_compiler=None, partition_fn=default_partition,
                 decompositions=None, num_params_buffers: int = 0, keep_inference_input_mutations:
                 bool = False, inference_compiler=None, *, dynamic: bool = False,
                 enable_log: bool = True) -> AOTCompiled:
    """`fn` traced with its backward ahead of time: each compiler gets a GraphModule of
    registry ops and example inputs and returns the callable to run (as torch's)."""
    return AOTCompiled(fn, fw_compiler, bw_compiler, partition_fn, decompositions,
                       inference_compiler)


def _module_constants(gm) -> list:
    """Tensors a module holds outside its parameters and buffers (graph constants)."""
    return [v for m in gm.modules() for v in vars(m).values() if isinstance(v, Tensor)]


class _WithState:
    """`mod` called with its parameters and buffers passed in front of the inputs (so they
    are graph inputs: the parameters get gradients, written buffers are written back)."""

    def __init__(self, mod, names: list, call=None):
        self.mod = mod
        self.call = mod if call is None else call
        self.names = names
        self.__qualname__ = type(mod).__qualname__

    def __call__(self, *args):
        n = len(self.names)
        slots = []
        for name, value in zip(self.names, args[:n]):
            owner, _, attr = name.rpartition(".")
            sub = self.mod.get_submodule(owner) if owner else self.mod
            table = sub._parameters if attr in sub._parameters else sub._buffers
            slots.append((table, attr, table[attr]))
            table[attr] = value
        try:
            return self.call(*args[n:])
        finally:
            for table, attr, old in slots:
                table[attr] = old


class _ModuleRunner:
    """Calls a compiled module graph with the module's current parameters and buffers."""

    def __init__(self, compiled: AOTCompiled, state: list, reads: Reads | None = None,
                 program=None):
        self.compiled = compiled
        self.state = state
        self.reads = reads  # what the graph's functions read (lifted.py), or None
        self.program = program  # the program without those reads (run eagerly)

    def __call__(self, *args):
        if self.reads is None:
            return self.compiled(*self.state, *args)
        found = self.reads.current()
        if found is None:  # a read the trace cannot take: the program runs eagerly
            return self.program(*self.state, *args)
        return self.compiled(*self.state, *found[0], found[1], *args)

    def arguments(self, args) -> tuple | None:
        """The compiled function's arguments for a call with `args` (None: see `__call__`)."""
        if self.reads is None:
            return tuple(self.state) + tuple(args)
        found = self.reads.current()
        if found is None:
            return None
        return (*self.state, *found[0], found[1], *args)

    @property
    def fallback_reason(self) -> str | None:
        """Why the last compilation runs eagerly (None when it runs compiled graphs)."""
        return self.compiled.fallback_reason


def aot_module_simplified(mod, args, fw_compiler, bw_compiler=None,
                          partition_fn=default_partition, decompositions=None,
                          keep_inference_input_mutations: bool = False,
                          inference_compiler=None, cudagraphs=None, boxed_forward_device_index=None,
                          ignore_shape_env: bool = False):
    """Compile module `mod` (a captured GraphModule, or any module) for example inputs `args`
    ahead of time; returns the callable that runs it on such inputs. The module's parameters
    and buffers become graph inputs in front of `args`, as in PyTorch."""
    named = list(mod.named_parameters(remove_duplicate=False)) + \
        list(mod.named_buffers(remove_duplicate=False))
    state = [t for _, t in named]
    # A captured graph is traced through its forward: hooks registered for every module are
    # the program's, run where its modules are called, not around fusegrad's graph.
    if _is_graph_module(mod):
        route_cond(mod)  # (`cond` nodes: a trace selects between the branches)
    call = mod.forward if _is_graph_module(mod) else mod
    # A captured graph's nodes know the user's lines: traced node by node, the AOT graphs'
    # nodes take them (provenance.py).
    provenance = Provenance(mod) if _is_graph_module(mod) and locatable(mod) else None
    if provenance is not None:
        call = provenance.runner()
    fn = program = _WithState(mod, [n for n, _ in named], call) if named else call
    # Globals and cells that the functions it holds read (a score_mod's bias table): read
    # again on each call, after the state (lifted.py).
    reads = reads_of(mod) if _is_graph_module(mod) else None
    if reads is not None:
        fn = WithReads(program, reads, len(state))
    compiled = AOTCompiled(fn, fw_compiler, bw_compiler, partition_fn, decompositions,
                           inference_compiler, known_constants=_module_constants(mod),
                           float_classes=not _is_graph_module(mod))
    compiled.provenance = provenance
    if hasattr(mod, "graph") and graph_is_dynamic(mod):
        # Tracing keeps sizes concrete (make_fx has no symbolic mode yet): a graph with
        # symbolic sizes is traced once per input signature, each trace exact for its sizes.
        logs.emit("recompiles", "AOT autograd traces a graph with symbolic sizes per input "
                  "signature (symbolic tracing is not implemented)")
    compiled.unsupported = _untraceable(mod)
    if _is_graph_module(mod):
        lifted = 0 if reads is None else len(reads.tensor_slots) + 1
        compiled.float_ints, compiled.int_outputs = float_only_ints(mod, len(state) + lifted)
    runner = _ModuleRunner(compiled, state, reads, program)
    first = runner.arguments(args)
    if first is not None:
        compiled.compile_for(first)
    return runner


def float_only_ints(gm, offset: int = 0) -> tuple[frozenset, frozenset]:
    """(positions, outputs): the positions (counted from `offset`) of graph `gm`'s integer
    inputs that only feed float arithmetic (a step counter in `0.9 ** (step + 1)`, `step /
    2`, `math.sqrt(step)`), directly or through integer arithmetic with int literals whose
    results the graph may also return (`step + 1`, the counter's new value), and the indices
    of those returned integers among the graph's outputs.

    Such an input is traced as a float input, so one trace serves every value where a trace
    per value would compile again on each step: each float use computes the same float from
    the int as from its float (Python converts the int first), and the integer results
    computed on the float are whole numbers, made ints again as they leave (`_as_ints`;
    inputs past 2**31 stay ints and are traced per value, `_as_floats`)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    positions, outputs = set(), set()
    for i, p in enumerate(placeholders):
        found = _feeds_floats_only(p) if p.meta.get("symbol") else None
        if found is not None:
            positions.add(offset + i)
            outputs |= found
    return frozenset(positions), frozenset(outputs)


def _feeds_floats_only(p) -> set | None:
    """The output indices `p`'s integer arithmetic reaches, or None where `p` (or an
    integer computed from it) has a use other than number arithmetic and returning."""
    todo, seen, outputs = [p], set(), set()
    while todo:
        node = todo.pop()
        if not node.users:
            return None
        for user in node.users:
            if user.op == "output":
                results = user.args[0]
                if not isinstance(results, (tuple, list)):
                    return None
                outputs |= {i for i, r in enumerate(results) if r is node}
                continue
            if user in seen:
                continue
            seen.add(user)
            kind = _number_use(user, node)
            if kind is None:
                return None
            if kind == "int":
                todo.append(user)
    return outputs


def _number_use(node, value) -> str | None:
    """What number arithmetic `node` makes of integer `value`: "float" (its result is a
    float for every int), "int" (integer arithmetic with int literals), else None."""
    if node.op != "call_function" or node.kwargs:
        return None
    target, args = node.target, node.args
    if getattr(target, "math_name", None) is not None:  # a `_sym_*` twin of math's
        return "float" if len(args) == 1 else None
    if target is operator.neg and len(args) == 1:
        return "int"
    if len(args) != 2 or (target is not operator.truediv and target not in _INT_ARITHMETIC):
        return None
    others = [a for a in args if a is not value]
    if len(others) != 1:
        return None
    other = others[0]
    if target is operator.truediv or type(other) is float:
        return "float"
    if type(other) is int and target is not operator.pow:
        return "int"
    return None


_INT_ARITHMETIC = frozenset([operator.add, operator.sub, operator.mul, operator.pow,
                             operator.floordiv, operator.mod])


def _as_floats(args, positions: frozenset) -> tuple:
    """`args` with the ints at `positions` as floats (see `float_only_ints`), where each
    integer computed from them stays exact (below 2**31; larger ones are traced as ints)."""
    return tuple(float(a) if i in positions and type(a) is int and -_EXACT < a < _EXACT
                 else a for i, a in enumerate(args))


def _as_ints(results, positions: frozenset):
    """`results` (a graph's outputs) with the whole numbers at `positions` as ints again."""
    if not isinstance(results, (tuple, list)):
        return results
    return type(results)(int(r) if i in positions and r is not None else r
                         for i, r in enumerate(results))


_EXACT = 1 << 31


def _is_graph_module(mod) -> bool:
    from ...fx import GraphModule

    return isinstance(mod, GraphModule)


def _user_object(a) -> bool:
    """Whether `a` is an object of a user-defined class (not a Node, number, tensor, ...)."""
    if isinstance(a, (list, tuple)):
        return any(_user_object(x) for x in a)
    module = type(a).__module__ or ""
    return not (module == "builtins" or module.startswith(("fusegrad", "numpy")))


def _subclass_type(a) -> bool:
    """Whether `a` (or an item of it) is a tensor subclass that keeps `__torch_function__`
    (what `as_subclass(cls)` makes): fake tensors stand for plain tensors only."""
    if isinstance(a, (list, tuple)):
        return any(_subclass_type(x) for x in a)
    from ..._torch_function import _FAST_CLASSES

    return isinstance(a, type) and issubclass(a, Tensor) and a not in _FAST_CLASSES


def _untraceable(mod) -> str | None:
    """Why a captured graph cannot be traced, or None: an operator of a user object kept
    live in the graph (`x * obj` calling obj.__rmul__) reads the object's state on each
    call, which a trace would freeze; a tensor subclass made in the graph (`as_subclass`)
    would come back a plain tensor. Such graphs run as they are."""
    graph = getattr(mod, "graph", None)
    for n in getattr(graph, "nodes", ()):
        if n.op in ("call_function", "call_method") and (
                _subclass_type(n.args) or _subclass_type(tuple(n.kwargs.values()))):
            return f"{n.name} makes a tensor subclass, which a trace cannot keep"
        if n.op != "call_function":
            continue
        if _user_object(n.args) or _user_object(tuple(n.kwargs.values())):
            return (f"{n.name} calls {getattr(n.target, '__name__', n.target)} on a Python "
                    "object whose state is read live on each call")
    return None


def nop(gm, example_inputs):
    """A compiler that runs the graph as its generated Python code."""
    return gm.forward


def aot_eager(gm, example_inputs, **kwargs):
    """The `aot_eager` backend: AOT autograd, both graphs run as FX code."""
    return aot_module_simplified(gm, example_inputs, fw_compiler=nop, bw_compiler=nop,
                                 **kwargs)
