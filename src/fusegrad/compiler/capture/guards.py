"""Guards: what a captured graph assumed about its inputs, as readable Python.

Each guard is an expression over `L` (the frame's locals), `S` (the value stack where a graph
starts mid-function) and `G` (the function's globals), such as `L['x'].shape == (3, 4)`.
The guards of one cache entry are compiled into a single check function; when it fails,
`failure()` names the first guard that does not hold, in PyTorch's words for tensors.
"""

from __future__ import annotations

from ... import _dtype
from ..._tensor import Tensor
from ...autograd.grad_mode import state as _grad_state


def _tensor_check(t, cls, shape, dtype, requires_grad) -> bool:
    # One call instead of four expressions: this runs on every call of the compiled function.
    return (t.__class__ is cls and t._dtype is dtype and t._rg is requires_grad
            and t.shape == shape)


class TensorGuard:
    """A tensor input's type, shape, dtype and requires_grad."""

    def __init__(self, source: str, t: Tensor):
        self.source = source
        self.cls = type(t)
        self.shape = tuple(t.shape)
        self.dtype = t.dtype
        self.requires_grad = bool(t.requires_grad)

    def text(self) -> str:
        """The guard as readable Python."""
        return (f"check_tensor({self.source}, {self.cls.__name__}, shape={self.shape}, "
                f"dtype={self.dtype!r}, requires_grad={self.requires_grad})")

    def failure(self, value) -> str | None:
        """Why `value` fails this guard (PyTorch's wording), or None if it passes."""
        name = self.source
        if not isinstance(value, Tensor) or type(value) is not self.cls:
            return f"{name} is not a {self.cls.__name__}"
        if value.ndim != len(self.shape):
            return (f"tensor '{name}' rank mismatch. expected {len(self.shape)}, actual "
                    f"{value.ndim}")
        for i, (a, b) in enumerate(zip(self.shape, value.shape)):
            if a != b:
                return f"tensor '{name}' size mismatch at index {i}. expected {a}, actual {b}"
        if value.dtype is not self.dtype:
            return f"tensor '{name}' dtype mismatch. expected {self.dtype}, actual {value.dtype}"
        if bool(value.requires_grad) != self.requires_grad:
            return (f"tensor '{name}' requires_grad mismatch. expected requires_grad="
                    f"{int(self.requires_grad)}")
        return None


class GuardSet:
    """The guards of one captured graph, in the order they were added."""

    def __init__(self):
        self.exprs: list[str] = []  # plain Python expressions
        self.tensors: dict[str, TensorGuard] = {}
        self.values: dict[str, object] = {}  # constants captured by expressions
        self._seen: set[str] = set()

    def add(self, expr: str) -> None:
        """Add a plain expression guard (once)."""
        if expr not in self._seen:
            self._seen.add(expr)
            self.exprs.append(expr)

    def tensor(self, source: str, t: Tensor) -> None:
        """Guard a tensor input's type, shape, dtype and requires_grad."""
        if source not in self.tensors:
            self.tensors[source] = TensorGuard(source, t)

    def constant(self, source: str, value) -> None:
        """Guard a Python value: its type and value for plain data, its identity otherwise."""
        if value is None or value is ...:
            self.add(f"{source} is {value!r}")
        elif _is_plain_data(value):
            self.add(f"type({source}) is {type(value).__name__} and {source} == {value!r}")
        else:
            key = f"___obj{len(self.values)}"
            for k, v in self.values.items():
                if v is value:
                    key = k
                    break
            self.values[key] = value
            self.add(f"{source} is {key}")

    def global_state(self) -> None:
        """Guard grad mode and the default dtype, which change what ops record or return."""
        self.add(f"___grad_enabled() == {_grad_state.enabled}")
        self.values["___default"] = _dtype.defaults.float
        self.add("___default_dtype() is ___default")

    def lines(self) -> list[str]:
        """Every guard as readable Python."""
        return [g.text() for g in self.tensors.values()] + list(self.exprs)

    def compile(self):
        """One function `check(L, S, G) -> bool` testing every guard."""
        terms = []
        scope = {"___grad_enabled": lambda: _grad_state.enabled,
                 "___default_dtype": lambda: _dtype.defaults.float, "___check": _tensor_check}
        scope.update(self.values)
        for i, g in enumerate(self.tensors.values()):
            scope[f"___cls{i}"] = g.cls
            scope[f"___dt{i}"] = g.dtype
            terms.append(f"___check({g.source}, ___cls{i}, {g.shape!r}, ___dt{i}, "
                         f"{g.requires_grad})")
        terms += [f"({e})" for e in self.exprs]
        body = " and ".join(terms) or "True"
        src = f"def check(L, S, G):\n    try:\n        return {body}\n" \
              "    except Exception:\n        return False\n"
        exec(compile(src, "<fusegrad guards>", "exec"), scope)
        return scope["check"]

    def failure(self, L, S, G) -> str | None:
        """The first guard that fails for this frame state, in words."""
        env = {"L": L, "S": S, "G": G, "___grad_enabled": lambda: _grad_state.enabled,
               "___default_dtype": lambda: _dtype.defaults.float, **self.values}
        for g in self.tensors.values():
            try:
                value = eval(g.source, env)  # noqa: S307 (our own guard text)
            except Exception:
                return f"{g.source} is missing"
            reason = g.failure(value)
            if reason:
                return reason
        for e in self.exprs:
            try:
                ok = eval(e, env)  # noqa: S307
            except Exception:
                ok = False
            if not ok:
                return e
        return None


def _is_plain_data(value) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, complex, type(...))):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(_is_plain_data(v) for v in value)
    return False
