"""`fusegrad.library`: custom operators written in Python, as `torch.library` makes them.

`custom_op("ns::name", mutates_args=...)` turns a type-annotated function into an operator:
its schema is inferred from the annotations (PyTorch's messages for a missing one), it runs
below autograd (its kernel records no history), and `register_autograd` gives it a backward
(the node is `GeneratedBackwardFor_<ns>_<name>_defaultBackward`, as PyTorch names it);
without one, backward through its output is PyTorch's error. `register_fake` gives the
shape-only implementation that `opcheck` asks for. Registered operators are reachable as
`fusegrad.ops.<ns>.<name>` (with `.default`), as `torch.ops.<ns>.<name>`.

The kernel itself always runs on real tensors (fusegrad has one device); the fake
implementation is checked by `opcheck` against it, not used for tracing.
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Callable, Iterable

__all__ = ["CustomOpDef", "custom_op", "opcheck", "register_autograd", "register_fake",
           "register_kernel"]

_OPS: dict[str, dict[str, CustomOpDef]] = {}  # namespace -> name -> operator


def _tensor_class():
    from ._tensor import Tensor

    return Tensor


def _type_name(annotation, name: str, describe: str) -> str:
    """The schema type of one annotation (PyTorch's spelling), or ValueError."""
    Tensor = _tensor_class()
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Tensor:
        return "Tensor"
    simple = {int: "SymInt", float: "float", bool: "bool", str: "str"}
    if annotation in simple:
        return simple[annotation]
    if origin is typing.Union and len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        return _type_name(inner, name, describe) + "?"
    if origin in (list, typing.List, Iterable, typing.Sequence) and len(args) == 1:  # noqa: UP006
        return _type_name(args[0], name, describe) + "[]"
    raise ValueError(f"infer_schema(func): Parameter {name} has unsupported type {annotation}. "
                     f"Got func with signature {describe})")


def _default_text(value) -> str:
    if isinstance(value, float):
        text = repr(value)
        return text[:-1] if text.endswith(".0") else text  # C++ spells 2.0 as "2."
    return repr(value)


def _return_text(annotation, describe: str) -> str:
    Tensor = _tensor_class()
    if annotation is None or annotation is type(None):
        return "()"
    if typing.get_origin(annotation) is tuple:
        return "(" + ", ".join(_type_name(a, "return", describe)
                               for a in typing.get_args(annotation)) + ")"
    if annotation is Tensor:
        return "Tensor"
    return _type_name(annotation, "return", describe)


def _infer_schema(fn: Callable, name: str, mutates_args) -> tuple[str, inspect.Signature]:
    """`name(args) -> returns` from `fn`'s annotations, and its signature."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    describe = str(sig).replace("fusegrad.Tensor", "torch.Tensor")
    params = []
    names = set(sig.parameters)
    if mutates_args != "unknown":
        missing = set(mutates_args) - names
        if missing:
            raise ValueError(
                f"infer_schema(func): {missing} in mutates_args were not found in the custom "
                "op's signature. mutates_args should contain the names of all args that the "
                "custom op mutates, or just the string 'unknown' if you don't know. Got func "
                f"with signature {describe})")
    alias = 0
    for pname, p in sig.parameters.items():
        if pname not in hints:
            raise ValueError(f"infer_schema(func): Parameter {pname} must have a type "
                             f"annotation. Got func with signature {describe})")
        text = _type_name(hints[pname], pname, describe)
        if mutates_args != "unknown" and pname in mutates_args and text.startswith("Tensor"):
            text = f"Tensor(a{alias}!)" + text[len("Tensor"):]
            alias += 1
        text += f" {pname}"
        if p.default is not inspect.Parameter.empty:
            text += f"={_default_text(p.default)}"
        params.append(text)
    if sig.return_annotation is inspect.Signature.empty:
        raise ValueError("infer_schema(func): No return type annotation was provided. Please "
                         f"add one. Got func with signature {describe})")
    returns = _return_text(hints.get("return", sig.return_annotation), describe)
    return f"{name}({', '.join(params)}) -> {returns}", sig


class _Schema(str):
    """An operator's schema text (what `OpOverload._schema` prints)."""

    __slots__ = ()


class CustomOpDef:
    """An operator made by `custom_op`: call it like the function it wraps."""

    def __init__(self, namespace: str, name: str, schema: str, sig, fn: Callable,
                 mutates_args) -> None:
        self._namespace = namespace
        self._name = name
        self._qualname = f"{namespace}::{name}"
        self._schema = _Schema(schema)
        self._signature = sig
        self._init_fn = fn
        self._mutates_args = mutates_args
        self._fake_fn: Callable | None = None
        self._backward_fn: Callable | None = None
        self._setup_context_fn: Callable | None = None
        self._kernels: dict = {}
        self._function = None

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"

    # -------------------------------------------------------------- registration

    def register_fake(self, fn: Callable) -> Callable:
        """The shape-and-dtype-only implementation (PyTorch's FakeTensor kernel)."""
        self._fake_fn = fn
        return fn

    def register_kernel(self, device_types, fn: Callable | None = None):
        """A kernel for `device_types` (only the CPU's is ever run here)."""
        def register(fn):
            for device in ([device_types] if isinstance(device_types, str) or
                           device_types is None else device_types):
                self._kernels[device] = fn
            return fn

        return register if fn is None else register(fn)

    def register_autograd(self, backward: Callable, /, *,
                          setup_context: Callable | None = None) -> None:
        """Backward for the operator: `backward(ctx, *grads)` returns one gradient per
        input; `setup_context(ctx, inputs, output)` saves what it needs."""
        self._backward_fn = backward
        self._setup_context_fn = setup_context

    # -------------------------------------------------------------- calling

    def _bind(self, args, kwargs) -> list:
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError:
            bound = self._signature.bind_partial(*args, **kwargs)
            for pname, p in self._signature.parameters.items():
                if pname not in bound.arguments and p.default is inspect.Parameter.empty:
                    raise RuntimeError(
                        f"{self._qualname}() is missing value for argument '{pname}'. "
                        f"Declaration: {self._schema_text()}") from None
            raise
        bound.apply_defaults()
        hints = typing.get_type_hints(self._init_fn)
        for position, (pname, value) in enumerate(bound.arguments.items()):
            expected = hints.get(pname)
            if expected is int and not isinstance(value, int):
                raise RuntimeError(
                    f"{self._qualname}() Expected a value of type 'int' for argument "
                    f"'{pname}' but instead found type '{type(value).__name__}'.\n"
                    f"Position: {position}\nValue: {value}\n"
                    f"Declaration: {self._schema_text()}\n"
                    f"Cast error details: Unable to cast Python instance of type "
                    f"{type(value)} to C++ type '?' (#define PYBIND11_DETAILED_ERROR_MESSAGES "
                    "or compile in debug mode for details)")
        return list(bound.arguments.values())

    def _schema_text(self) -> str:
        return f"{self._namespace}::{self._schema}"

    def _kernel(self, *args):
        """The implementation, run below autograd; its outputs may not alias inputs."""
        from .autograd.grad_mode import no_grad

        fn = self._kernels.get("cpu", self._kernels.get(None, self._init_fn))
        with no_grad():
            out = fn(*args)
        self._check_aliasing(args, out)
        self._bump_mutated(args)
        return out

    def _check_aliasing(self, args, out) -> None:
        Tensor = _tensor_class()
        outs = out if isinstance(out, (tuple, list)) else (out,)
        ins = [a for a in args if isinstance(a, Tensor)]
        for o in outs:
            if isinstance(o, Tensor) and any(o is t or _shares_memory(o, t) for t in ins):
                # (PyTorch names the module of its own wrapper: here, this one)
                raise RuntimeError(
                    f"{self._name} (with implementation in {sys.modules[__name__]}): The "
                    "output of this custom operator (1) must not also be an input to this "
                    "custom operator and (2) may not alias any inputs to this custom operator "
                    "or other returns. The most common way to trigger this error is if we "
                    "have y = custom_op(x) and y and x are the same Tensor. Please instead "
                    "return a clone of the offending output tensor(s) (e.g. return x.clone()) "
                    "or refactor the custom operator to not return y.")

    def _bump_mutated(self, args) -> None:
        """A mutated argument's version moves on, as after any in-place op."""
        Tensor = _tensor_class()
        if not self._mutates_args:
            return
        names = list(self._signature.parameters)
        for pname, value in zip(names, args):
            if isinstance(value, Tensor) and (self._mutates_args == "unknown" or
                                              pname in self._mutates_args):
                value._vc[0] += 1

    def __call__(self, *args, **kwargs):
        from .autograd.grad_mode import is_grad_enabled

        values = self._bind(args, kwargs)
        Tensor = _tensor_class()
        wants_grad = is_grad_enabled() and any(
            isinstance(v, Tensor) and v.requires_grad for v in values)
        if not wants_grad:
            return self._kernel(*values)
        return self._autograd_function().apply(*values)

    def _autograd_function(self):
        """The autograd.Function that records the operator (made once)."""
        if self._function is not None:
            return self._function
        from .autograd.function import Function

        op = self

        def forward(*args):
            return op._kernel(*args)

        def setup_context(ctx, inputs, output):
            if op._setup_context_fn is not None:
                op._setup_context_fn(ctx, inputs, output)

        def backward(ctx, *grads):
            if op._backward_fn is None:
                raise RuntimeError(
                    f"Trying to backward through {op._namespace}.{op._name}.default but no "
                    "autograd formula was registered. Please use register_autograd to add one.")
            result = op._backward_fn(ctx, *grads)
            return result if isinstance(result, tuple) else (result,)

        name = f"GeneratedBackwardFor_{self._namespace}_{self._name}_default"
        self._function = type(name, (Function,), {
            "forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
            "backward": staticmethod(backward), "__module__": __name__})
        return self._function

    @property
    def _opoverload(self) -> OpOverload:
        return getattr(_namespace(self._namespace), self._name).default


def _shares_memory(a, b) -> bool:
    import numpy as np

    da, db = getattr(a, "_data", None), getattr(b, "_data", None)
    return da is not None and db is not None and da.size > 0 and db.size > 0 and \
        np.shares_memory(da, db)


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args,
              device_types=None, schema: str | None = None):
    """Make `fn` (or the decorated function) the operator `name` ("namespace::name")."""
    if isinstance(mutates_args, str) and mutates_args != "unknown":
        raise ValueError("mutates_args must be a sequence of argument names or 'unknown'")

    def make(fn: Callable) -> CustomOpDef:
        namespace, opname = name.split("::")
        inferred, sig = _infer_schema(fn, opname, mutates_args)
        op = CustomOpDef(namespace, opname, schema or inferred, sig, fn,
                         mutates_args if mutates_args == "unknown" else set(mutates_args))
        if device_types is not None:
            op.register_kernel(device_types, fn)
        _OPS.setdefault(namespace, {})[opname] = op
        return op

    return make if fn is None else make(fn)


def _op_of(op) -> CustomOpDef:
    if isinstance(op, CustomOpDef):
        return op
    if isinstance(op, (OpOverload, OpOverloadPacket)):
        return op._op
    namespace, opname = str(op).split("::")
    return _OPS[namespace][opname.split(".")[0]]


def register_fake(op, fn: Callable | None = None, /, **kwargs):
    """`op.register_fake(fn)` for an operator or its name (a decorator without `fn`)."""
    target = _op_of(op)
    return target.register_fake if fn is None else target.register_fake(fn)


def register_autograd(op, backward: Callable, /, *, setup_context: Callable | None = None,
                      **kwargs) -> None:
    """`op.register_autograd(...)` for an operator or its name."""
    _op_of(op).register_autograd(backward, setup_context=setup_context)


def register_kernel(op, device_types, fn: Callable | None = None, /, **kwargs):
    """`op.register_kernel(...)` for an operator or its name."""
    return _op_of(op).register_kernel(device_types, fn)


# ------------------------------------------------------------------ torch.ops.<ns>.<name>


class OpOverload:
    """`ops.<ns>.<name>.default`: the operator as an overload."""

    def __init__(self, op: CustomOpDef) -> None:
        self._op = op
        self._schema = _Schema(op._schema_text())

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def name(self) -> str:
        """`ns::name`."""
        return self._op._qualname

    def __repr__(self) -> str:
        return f"{self._op._namespace}.{self._op._name}.default"


class OpOverloadPacket:
    """`ops.<ns>.<name>`: the operator's overloads (only `default`)."""

    def __init__(self, op: CustomOpDef) -> None:
        self._op = op
        self.default = OpOverload(op)

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def overloads(self) -> list[str]:
        """['default']."""
        return ["default"]

    def __repr__(self) -> str:
        return f"{self._op._namespace}.{self._op._name}"


class _OpNamespace:
    """`ops.<ns>`: the custom operators of one namespace."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._packets: dict = {}

    def __getattr__(self, name: str) -> OpOverloadPacket:
        if name.startswith("__"):
            raise AttributeError(name)
        op = _OPS.get(self.__dict__["_name"], {}).get(name)
        if op is None:
            raise AttributeError(f"'_OpNamespace' '{self._name}' object has no attribute "
                                 f"'{name}'")
        packets = self.__dict__["_packets"]
        if packets.get(name) is None or packets[name]._op is not op:
            packets[name] = OpOverloadPacket(op)
        return packets[name]

    def __repr__(self) -> str:
        return f"<module 'torch.ops.{self._name}' from 'torch.ops'>"


_NAMESPACES: dict[str, _OpNamespace] = {}


def _namespace(name: str) -> _OpNamespace:
    if name not in _NAMESPACES:
        _NAMESPACES[name] = _OpNamespace(name)
    return _NAMESPACES[name]


def namespace_of_ops(name: str) -> _OpNamespace | None:
    """`ops.<name>` when custom operators were registered under that namespace."""
    return _namespace(name) if name in _OPS else None


# ------------------------------------------------------------------ opcheck


class OpCheckError(Exception):
    """A test of `opcheck` failed."""


_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
          "test_aot_dispatch_dynamic")


def opcheck(op, args: tuple, kwargs: dict | None = None, *, test_utils=_TESTS,
            raise_exception: bool = True, atol=None, rtol=None) -> dict[str, str]:
    """Check a custom operator as PyTorch's `opcheck` does (a subset): it runs, its
    autograd registration is there when an input requires grad, and its fake implementation
    exists and gives the real outputs' shapes and dtypes."""
    target = _op_of(op)
    kwargs = kwargs or {}
    if isinstance(test_utils, str):
        test_utils = (test_utils,)
    Tensor = _tensor_class()
    results: dict[str, str] = {}
    for test in test_utils:
        try:
            if test == "test_schema":
                target(*args, **kwargs)
            elif test == "test_autograd_registration":
                needs = any(isinstance(a, Tensor) and a.requires_grad for a in args)
                if needs and target._backward_fn is None:
                    raise AssertionError(
                        f"{target._qualname}: an input requires grad but no autograd "
                        "formula was registered. Please use register_autograd to add one.")
            elif test in ("test_faketensor", "test_aot_dispatch_dynamic"):
                _check_fake(target, args, kwargs, Tensor)
            results[test] = "SUCCESS"
        except Exception as error:
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {test} failed with {error} (scroll up "
                                   "for stack trace)") from error
            results[test] = error
    return results


def _check_fake(target: CustomOpDef, args, kwargs, Tensor) -> None:
    if target._fake_fn is None:
        raise RuntimeError(
            f"There was no fake impl registered for {target!r}. This is necessary for "
            "torch.compile/export/fx tracing to work. Please use "
            f"`{target._init_fn.__name__}.register_fake` to add an fake impl.")
    from .autograd.grad_mode import no_grad

    values = target._bind(args, kwargs)
    with no_grad():
        real = target._kernel(*[a.detach() if isinstance(a, Tensor) else a for a in values])
        fake = target._fake_fn(*values)
    reals = real if isinstance(real, (tuple, list)) else (real,)
    fakes = fake if isinstance(fake, (tuple, list)) else (fake,)
    for r, f in zip(reals, fakes):
        if isinstance(r, Tensor) and (tuple(r.shape) != tuple(f.shape) or r.dtype != f.dtype):
            raise RuntimeError(f"{target._qualname}: the fake implementation gave shape "
                               f"{tuple(f.shape)} and dtype {f.dtype}, the operator "
                               f"{tuple(r.shape)} and {r.dtype}")

