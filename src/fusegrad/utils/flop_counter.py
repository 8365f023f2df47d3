"""`utils.flop_counter.FlopCounterMode`: the floating point operations a block of code runs,
per op and per module, by PyTorch's formulas.

The mode watches every dispatched op (a `CallObserver`, as the profiler) and counts those
with a formula (`flop_registry`: matrix products and convolutions, forward and backward);
every other op costs nothing. Module calls are followed with global module hooks: an op
counts for "Global" and for every module it runs inside, named as PyTorch's module tracker
names them (a module called at the top by its class name, a child `parent.attribute`). The
backward of a node counts for the modules its forward ran in (noted on the node's creation);
a convolution's backward, computed by its node without dispatching `convolution_backward`,
is counted from the node's saved input and weight as PyTorch counts that op.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from .. import _dispatch
from .._tensor import Tensor
from ..ops._flop_formulas import bmm_flop, conv_backward_flop, conv_flop_count, mm_flop
from ..ops.overloads import aten

__all__ = ["FlopCounterMode", "bmm_flop", "conv_backward_flop", "conv_flop_count", "mm_flop",
           "register_flop_formula"]


def _shape(a: Any) -> tuple:
    return tuple(a.shape) if isinstance(a, Tensor) else ()


# Formulas registered here (`register_flop_formula`), by registry op name; the registry's
# entries carry PyTorch's own (`OpDef.flops`, `ops/_flop_formulas.py`).
flop_registry: dict[str, Callable] = {}


def register_flop_formula(targets, get_raw: bool = False) -> Callable:
    """Register `formula(*input_shapes, out_shape=..., **kwargs)` as the FLOPs of the ops
    `targets` (registry handles such as `fusegrad.ops.aten.mm`, or a list of them);
    with `get_raw`, the formula gets the call's arguments themselves."""
    def register(formula: Callable) -> Callable:
        for target in targets if isinstance(targets, (list, tuple)) else [targets]:
            name = _op_name(target)

            def counted(args, out, formula=formula):
                if get_raw:
                    return formula(*args, out_val=out)
                return formula(*(_shape(a) if isinstance(a, Tensor) else a for a in args),
                               out_shape=_shape(out))

            flop_registry[name] = counted
        return formula

    return register


def _op_name(target: Any) -> str:
    """The registry name an op handle (packet or overload) or a registry op stands for,
    without its overload ("mm" for `aten.mm.default`)."""
    name = getattr(target, "__name__", None)
    if not isinstance(name, str):
        name = getattr(target, "name", None)
    if not isinstance(name, str):
        name = str(target).removeprefix("aten.")
    return name.split("::")[-1].split(".")[0]


def _suffix(total: int) -> tuple[int, str]:
    """The power of 1000 and suffix the table writes every figure with, from the total."""
    suffixes = ["", "K", "M", "B", "T"]
    index = max(0, min(len(suffixes) - 1, (len(str(total)) - 2) // 3))
    return index, suffixes[index]


class FlopCounterMode(_dispatch.CallObserver):
    """Count the FLOPs of the ops run inside the `with` block, per module (see the module
    docstring); with `display`, print the table (modules up to `depth` deep) on exit.
    `custom_mapping`: {op handle: formula} as `register_flop_formula` takes them."""

    def __init__(self, mods: Any = None, depth: int = 2, display: bool = True,
                 custom_mapping: dict | None = None) -> None:
        super().__init__()
        if mods is not None:
            warnings.warn("mods argument is not needed anymore, you can stop passing it",
                          stacklevel=2)
        self.depth = depth
        self.display = display
        self.flop_counts: dict = defaultdict(lambda: defaultdict(int))
        self.custom_mapping = {}
        for target, formula in (custom_mapping or {}).items():
            self.custom_mapping[_op_name(target)] = (
                lambda args, out, f=formula: f(*(_shape(a) if isinstance(a, Tensor) else a
                                                 for a in args), out_shape=_shape(out)))
        self._stack: list = []  # module names, outermost first
        self._made_in: dict = {}  # id(node) -> (node, module names)
        self._handles: list = []

    # ------------------------------------------------------------------ results

    def get_total_flops(self) -> int:
        """Every counted op's FLOPs."""
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self) -> dict:
        """{module name ("Global" for all): {op handle: FLOPs}}."""
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth: int | None = None) -> str:
        """The table `display` prints: each module's FLOPs and share, then its ops'."""
        depth = self.depth if depth is None else depth
        total = self.get_total_flops()
        power, suffix = _suffix(total)

        def figure(n: int) -> str:
            return str(n) if power == 0 else f"{n / 1000 ** power:.3f}{suffix}"

        def share(n: int) -> str:
            return f"{n / total * 100:.2f}%" if total else "0%"

        rows = []
        top = [k for k in self.flop_counts if k != "Global" and "." not in k]
        names = sorted(k for k in self.flop_counts if k != "Global")
        hide_global = len(top) == 1 and total > 0 and \
            sum(self.flop_counts[top[0]].values()) == total
        for name in ([] if hide_global else ["Global"]) + names:
            if name != "Global" and name.count(".") + 1 > depth:
                continue
            counts = self.flop_counts.get(name, {})
            module_total = sum(counts.values())
            if name != "Global" and module_total == 0:
                continue
            rows.append((name, figure(module_total), share(module_total)))
            for op, n in counts.items():
                rows.append((f"- aten.{_op_name(op)}", figure(n), share(n)))
        return _table(("Module", "FLOP", "% Total"), rows)

    # ------------------------------------------------------------------ the mode

    def __enter__(self) -> FlopCounterMode:
        from ..nn.modules._global_hooks import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        self.flop_counts.clear()
        self._handles = [register_module_forward_pre_hook(self._enter_module),
                         register_module_forward_hook(self._leave_module)]
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._made_in.clear()
        if self.display:
            print(self.get_table(self.depth))

    def _enter_module(self, module: Any, args: Any) -> None:
        name = None
        if self._stack:
            parent_name, parent = self._stack[-1]
            for attr, child in getattr(parent, "_modules", {}).items():
                if child is module:
                    name = f"{parent_name}.{attr}"
                    break
        self._stack.append((name or type(module).__name__, module))

    def _leave_module(self, module: Any, args: Any, out: Any) -> None:
        if self._stack:
            self._stack.pop()

    def _count(self, op: Any, args: tuple, out: Any, names: list) -> None:
        name = _op_name(op)
        formula = self.custom_mapping.get(name) or flop_registry.get(name) or \
            getattr(op, "flops", None)
        if formula is None:
            return
        self._add(getattr(aten, name), formula(args, out), names)

    def _add(self, packet: Any, flops: int, names: list) -> None:
        for scope in ["Global", *dict.fromkeys(names)]:
            self.flop_counts[scope][packet] += flops

    def __fusegrad_observe__(self, op: Any, args: tuple) -> Any:
        out = _dispatch.call(op, *args)
        names = [n for n, _ in self._stack]
        self._count(op, args, out, names)
        if names:  # where this result's backward will count
            for t in out if isinstance(out, (tuple, list)) else (out,):
                node = getattr(t, "grad_fn", None) if isinstance(t, Tensor) else None
                if node is not None:
                    self._made_in[id(node)] = (node, names)
        return out

    def __fusegrad_observe_node__(self, node: Any, grads: list, run: Any) -> Any:
        made = self._made_in.get(id(node))
        names = made[1] if made is not None and made[0] is node else []
        outer = self._stack
        self._stack = [(n, None) for n in names]
        before = self.get_total_flops()
        try:
            result = run(node, grads)
        finally:
            self._stack = outer
        if type(node).__name__ == "ConvolutionBackward0" and \
                self.get_total_flops() == before:
            # Its node computes both gradients itself: counted as PyTorch counts the
            # `convolution_backward` call its node makes.
            mask = tuple(edge is not None and edge[0] is not None
                         for edge in node.next_functions[:2])
            flops = conv_backward_flop(_shape(grads[0]), tuple(node._saved_input.shape),
                                       tuple(node._saved_weight.shape),
                                       bool(node._saved_transposed), mask)
            self._add(aten.convolution_backward, flops, names)
        return result


def _table(header: tuple, rows: list) -> str:
    """A plain text table: the first column left-aligned, the others right-aligned, two
    spaces between columns, a dashed rule under the header."""
    columns = list(zip(header, *rows)) if rows else [(h,) for h in header]
    # (a header keeps two spaces of room, as tabulate's does)
    widths = [max([len(str(col[0])) + 2] + [len(str(c)) for c in col[1:]])
              for col in columns]

    def line(cells) -> str:
        parts = [str(cells[0]).ljust(widths[0])]
        parts += [str(c).rjust(w) for c, w in zip(cells[1:], widths[1:])]
        return "  ".join(parts)

    out = [line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


FlopCounterMode.__module__ = "fusegrad.utils.flop_counter"
