"""The Python a segment runs on every call, generated once when it is captured.

One function per segment does what Dynamo's rewritten bytecode does between two resume
points: read the graph's inputs from the frame (locals `L`, stack `S`, globals `G`), call the
compiled graph, rebuild the frame state from graph outputs, sources and constants, replay the
attribute assignments the graph stands for, and then either return the frame's value or run
the breaking instruction. A branch (`if tensor:`, `if x is None:`) is written out as Python
and picks the next offset itself; any other breaking instruction runs through the concrete
translator (`step`). The function returns `(next offset, None)`, or `(None, value)` when the
frame returned. `FUSEGRAD_LOGS=segment_code` prints each one.
"""

from __future__ import annotations

import collections
import functools
import math
import types

from ..._random import get_rng_state, set_rng_state
from ..._thread_state import local as _thread_local
from ..._thread_state import set_grad_enabled
from .blocks import (
    enters_inference_mode,
    inference_depth,
    leave_blocks,
    reenter_block,
    reenter_blocks,
    unwind_inference,
)
from .builder import (
    autocast_depth,
    restore_sdpa,
    sdpa_kernel_enter,
    sdpa_state,
    unwind_autocast,
)
from .exceptions import fresh_exception
from .guards import _has_literal, array_tensor
from .hooks import HookRegistration
from .variables import DequeContents, DictContents, GradExit, ItemKey, replay_set


class _Null:
    """Stands for the NULL below a callable when the stack is rebuilt."""


NULL = _Null()

# Branches written out as Python: the test of the popped value, and whether a true test jumps.
_BRANCHES = {
    "FALSE": ("{}", False), "TRUE": ("{}", True),
    "NONE": ("{} is None", True), "NOT_NONE": ("{} is not None", True),
}


def branch_test(opname: str) -> tuple[str, bool] | None:
    """(test of the popped value, jumps when true) for a popping conditional jump."""
    if not opname.startswith("POP_JUMP_"):
        return None
    return _BRANCHES[opname.rsplit("_IF_", 1)[1]]


def make_function(code: types.CodeType, f_globals: dict, closure: tuple, defaults,
                  kwdefaults) -> types.FunctionType:
    """The function MAKE_FUNCTION would make of `code` (a comprehension's, a nested def's),
    for a segment that rebuilds one live at a graph break."""
    fn = types.FunctionType(code, f_globals, code.co_name, defaults, closure or None)
    if kwdefaults is not None:
        fn.__kwdefaults__ = kwdefaults
    return fn


def spec_code(spec, consts: dict) -> str:
    """A Python expression that rebuilds `spec` from `outs`, L, S and G."""
    kind = spec[0]
    if kind == "out":
        return f"outs[{spec[1]}]"
    if kind == "alias":  # made where the code first reads it, then reused by name
        name = f"___m{spec[1]}"
        if name in consts:
            return name
        consts[name] = None
        return f"({name} := {spec_code(spec[2], consts)})"
    if kind == "source":
        return spec[1]
    if kind == "const":
        value = spec[1]
        # Exact types: a NumPy float64 is a float whose repr names `np` (and which must
        # come back as itself).
        if value is None or type(value) in (bool, int, str) or (
                type(value) is float and math.isfinite(value)):  # (`inf` is no literal)
            return repr(value)
        if isinstance(value, BaseException):  # made while translating: a new one per call,
            # one object wherever the frame holds it (a local and a method bound to it)
            consts["___fresh"] = fresh_exception
            for key, held in consts.items():
                if held is value and key.startswith("___c"):
                    return f"___e{key[4:]}"
            name = f"___c{len(consts)}"
            consts[name] = value
            return f"(___e{name[4:]} := ___fresh({name}))"
        name = f"___c{len(consts)}"
        consts[name] = value
        return name
    if kind == "function":  # a function the frame made (its defaults and cells rebuilt)
        consts["___function"] = make_function
        parts = [spec_code(("const", spec[1]), consts), spec_code(("const", spec[2]), consts),
                 spec_code(("tuple", spec[3]), consts)]
        parts += ["None" if s is None else spec_code(s, consts) for s in spec[4:]]
        return f"___function({', '.join(parts)})"
    if kind == "cell":
        consts["___cell"] = types.CellType
        return "___cell()" if spec[1] is None else f"___cell({spec_code(spec[1], consts)})"
    if kind in ("list", "tuple", "iter", "slice", "set"):
        items = ", ".join(spec_code(s, consts) for s in spec[1])
        return {"list": f"[{items}]", "tuple": f"({items}{',' if spec[1] else ''})",
                "iter": f"iter([{items}])", "slice": f"slice({items})",
                "set": f"{{{items}}}" if items else "set()"}[kind]
    if kind == "named":
        name = f"___c{len(consts)}"
        consts[name] = spec[1]
        return f"{name}({', '.join(spec_code(s, consts) for s in spec[2])})"
    if kind == "bound":  # a user function bound to a rebuilt value, as a real method
        consts["___bind"] = types.MethodType
        name = f"___c{len(consts)}"
        consts[name] = spec[1]
        return f"___bind({name}, {spec_code(spec[2], consts)})"
    if kind == "partial":
        consts["___partial"] = functools.partial
        args = "".join(f", {spec_code(a, consts)}" for a in spec[2])
        kwargs = ", ".join(f"{k!r}: {spec_code(a, consts)}" for k, a in spec[3].items())
        return f"___partial({spec_code(spec[1], consts)}{args}, **{{{kwargs}}})"
    if kind == "truth":
        return f"bool({spec_code(spec[1], consts)})"
    if kind == "text":  # an f-string of dynamic floats, formatted with this call's values
        pieces = [repr(p) if isinstance(p, str) else
                  f"format({p[1] or ''}({spec_code(p[0], consts)}), {p[2]!r})"
                  for p in spec[1]]
        return f"({' + '.join(pieces) or repr('')})"
    if kind in ("dict", "odict", "ddict"):
        items = ", ".join(f"{_key_code(k, consts)}: {spec_code(s, consts)}"
                          for k, s in spec[1].items())
        if kind == "dict":
            return "{" + items + "}"
        if kind == "ddict":  # a defaultdict made in the frame, of a builtin factory
            consts["___ddict"] = collections.defaultdict
            factory = spec_code(("const", spec[2]), consts)
            return f"___ddict({factory}, {{" + items + "})"
        consts["___odict"] = collections.OrderedDict
        return "___odict({" + items + "})"
    if kind == "method":
        return f"{spec_code(spec[1], consts)}.{spec[2]}"
    if kind == "set_replay":
        consts["___replay_set"] = replay_set
        name = f"___c{len(consts)}"
        consts[name] = spec[1]
        return f"___replay_set({name})"
    if kind == "view":
        return f"{spec_code(spec[1], consts)}.{spec[2]}()"
    if kind == "resume_iter":
        consts["___resume_iter"] = resume_iter
        return f"___resume_iter({spec_code(spec[1], consts)}, {spec[2]}, {spec[3]!r})"
    if kind == "null":
        return "___NULL"
    if kind == "block":  # a block open at the break (`blocks.py`): entered here, for real
        consts["___reenter_block"] = reenter_block
        block_kind = f"___c{len(consts)}"
        consts[block_kind] = spec[1]
        args = f"___c{len(consts)}"
        consts[args] = spec[2]
        return f"___reenter_block({block_kind}, {args}, {spec[3]!r})"
    if kind == "grad_exit":  # the __exit__ of a grad-mode with block, rebuilt for real
        name = f"___c{len(consts)}"
        consts[name] = GradExit(spec[1])
        return name
    raise AssertionError(kind)


def _key_code(key, consts: dict) -> str:
    """A dict key as Python: its literal, else a constant (`torch.float32`, `inf`)."""
    if _has_literal(key):
        return repr(key)
    name = f"___c{len(consts)}"
    consts[name] = key
    return name


def resume_iter(container, index: int, kind: str):
    """An iterator over a real dict or set (`kind`: "keys", "items", "values" or "set")
    that has already yielded `index` items."""
    it = iter(container.items() if kind == "items" else
              container.values() if kind == "values" else container)
    for _ in range(index):
        next(it)
    return it


def _switches_grad_mode(graph_module) -> bool:
    """Whether a captured graph switches grad mode (a `no_grad` block, `set_grad_enabled`)."""
    from .builder import set_grad_enabled as switch

    graph = getattr(graph_module, "graph", None)
    return graph is not None and any(n.target is switch for n in graph.nodes)


def _switches_sdpa(graph_module) -> bool:
    """Whether a captured graph sets the attention switches (a `with sdpa_kernel()` block)
    or enters an inference-mode block: thread state a graph raising inside the block has
    not restored."""
    graph = getattr(graph_module, "graph", None)
    return graph is not None and (
        any(n.target is sdpa_kernel_enter for n in graph.nodes) or
        enters_inference_mode(graph_module))


def grad_mode() -> bool:
    """Segment code: the thread's grad mode."""
    return _thread_local.grad_mode


def graph_state(sdpa: bool = False) -> tuple:
    """Segment code: the grad mode and autocast depth before a protected graph runs, and
    the attention switches and inference-mode blocks where it sets them (`sdpa`)."""
    return _thread_local.grad_mode, autocast_depth(), \
        (sdpa_state(), inference_depth()) if sdpa else None


def restore_state(state: tuple, stack: list) -> None:
    """Segment code: undo what a protected graph that raised changed (grad mode, autocast
    regions it entered, attention switches) and enter the frame's regions the segment left
    for it again, so the segment reruns eagerly from where it started."""
    set_grad_enabled(state[0])
    unwind_autocast(state[1])
    if state[2] is not None:
        unwind_inference(state[2][1])  # (which restores the grad mode it found: set again)
        set_grad_enabled(state[0])
        restore_sdpa(state[2][0])
    reenter_blocks(stack)


def segment_source(seg, name: str, sources: list, branch: tuple | None,
                   next_offset: int | None, consts: dict) -> str:
    """The source of `name(L, S, G)` running segment `seg` (see the module docstring).
    `branch`: (test, jumps when true) when the breaking instruction is written out."""
    lines = [f"def {name}(L, S, G):"]
    if seg.blocks:  # the graph enters the frame's open blocks itself (`blocks.py`)
        name = f"___c{len(consts)}"
        consts[name] = seg.blocks
        lines.append(f"    ___leave_blocks({name})")
    if seg.compiled is not None:
        args = ", ".join(sources) + ("," if len(sources) == 1 else "")
        call = f"outs = ___graph({args})"
        if seg.protected:
            # An exception in a try block goes to its handler: if the graph raises, run the
            # segment's code again eagerly (the graph changed no input in place).
            # It starts in the state the segment started in (grad mode, autocast regions).
            sdpa = _switches_sdpa(seg.graph_module)
            lines += ["    ___rng = ___get_rng()", f"    ___state = ___graph_state({sdpa})",
                      "    try:", f"        {call}", "    except Exception:",
                      "        ___set_rng(___rng)", "        ___restore_state(___state, S)",
                      f"        return None, ___eager({seg.start}, L, S)"]
        elif _switches_sdpa(seg.graph_module):
            # A graph raising inside a `with sdpa_kernel()` block it entered has not run the
            # block's exit: the switches (and grad mode) go back to what they were.
            lines += ["    ___state = ___graph_state(True)", "    try:", f"        {call}",
                      "    except BaseException:", "        ___restore_state(___state, [])",
                      "        raise"]
        elif _switches_grad_mode(seg.graph_module):
            # A graph raising inside a `with no_grad()` block it entered has not run the
            # block's exit: the mode goes back to what it was when the graph started, as the
            # block's exit would set it. (Code run for real after a break unwinds its own
            # blocks, and a mode set without a block stays set, as in eager mode.)
            lines += ["    ___mode = ___grad_mode()", "    try:", f"        {call}",
                      "    except BaseException:", "        ___set_grad(___mode)",
                      "        raise"]
        else:
            lines.append(f"    {call}")
    if seg.kind == "return":
        lines.append(f"    ___r = {spec_code(seg.result, consts)}")
        lines += _stores(seg, consts)
        lines.append("    return None, ___r")
        return "\n".join(lines) + "\n"
    # Every new value is read before L and S change (a spec may read either).
    changed = [(k, v) for k, v in seg.locals.items() if v != ("source", f"L[{k!r}]")]
    for i, (_, spec) in enumerate(changed):
        lines.append(f"    ___l{i} = {spec_code(spec, consts)}")
    stack = list(seg.stack)
    top = stack.pop() if branch is not None else None
    lines.append(f"    ___s = [{', '.join(spec_code(s, consts) for s in stack)}]")
    if top is not None:
        lines.append(f"    ___v = {spec_code(top, consts)}")
    lines += _stores(seg, consts)
    lines += [f"    L[{k!r}] = ___l{i}" for i, (k, _) in enumerate(changed)]
    lines.append("    S[:] = ___s")
    if seg.grad_after is not None:  # (re-entered inference-mode blocks set their own mode)
        lines.append(f"    ___set_grad({seg.grad_after!r})")
    # The names that held rebuilt objects must not keep them alive while the frame goes on
    # (a weak reference to an object nothing else holds is dead in eager).
    held = [k for k in consts if k.startswith("___m")] + [
        f"___{p}{i}" for i in range(len(seg.stores)) for p in "ov"]
    if held:
        lines.append(f"    del {', '.join(held)}")
    if branch is None:
        lines.append(f"    return ___step({seg.offset}, L, S, {seg.kw_names!r})")
    else:
        test, when = branch
        if_true, if_false = (seg.target, next_offset) if when else (next_offset, seg.target)
        lines += [f"    if {test.format('___v')}:", f"        return {if_true}, None",
                  f"    return {if_false}, None"]
    return "\n".join(lines) + "\n"


def _stores(seg, consts: dict) -> list[str]:
    # Attribute assignments the graph stands for, in program order, after it ran. Their
    # objects and values are read first: a source such as `L['o'].inner` names what the
    # program read before an earlier assignment (`o.inner = p`) changed it.
    lines = []
    for i, (ref, _, spec, _) in enumerate(seg.stores):
        lines += [f"    ___o{i} = {ref}", f"    ___v{i} = {spec_code(spec, consts)}"]
    if any(raw for *_, raw in seg.stores):
        consts["___object_setattr"] = object.__setattr__
    for i, (_, name, _, raw) in enumerate(seg.stores):
        if type(name) is HookRegistration:  # a hook on a graph input
            lines.append(f"    ___o{i}.register_hook(___v{i})")
        elif type(name) is DictContents:  # an OrderedDict's items, set in place in order
            lines.append(f"    ___o{i}.clear(); ___o{i}.update(___v{i})")
        elif type(name) is DequeContents:  # a deque's items, set in place (its maxlen kept)
            lines.append(f"    ___o{i}.clear(); ___o{i}.extend(___v{i})")
        elif isinstance(name, ItemKey):  # an item of a dict from outside
            lines.append(f"    ___o{i}[{spec_code(('const', name.key), consts)}] = ___v{i}")
        else:
            setter = "___object_setattr" if raw else "setattr"
            lines.append(f"    {setter}(___o{i}, {name!r}, ___v{i})")
    return lines


def compile_segment(seg, scope: dict, name: str, source: str, consts: dict, step, eager):
    """The function `source` defines, with the guard scope's names, the constants it uses,
    the compiled graph, and the runner's `step`/`eager` (a breaking instruction run for real,
    the rest of the frame run eagerly)."""
    env = dict(scope)
    env.update((k, v) for k, v in consts.items() if not k.startswith("___m"))
    env.update(___NULL=NULL, ___graph=seg.compiled, ___step=step, ___eager=eager,
               ___get_rng=get_rng_state, ___set_rng=set_rng_state,
               ___leave_blocks=leave_blocks,
               ___graph_state=graph_state,
               ___restore_state=restore_state, ___grad_mode=grad_mode,
               ___set_grad=set_grad_enabled, ___from_numpy=array_tensor)
    exec(compile(source, f"<fusegrad segment {name}>", "exec"), env)
    return env[name]
