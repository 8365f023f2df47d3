"""PyTorch's wording of the graph breaks fusegrad's capture has in common with Dynamo, for
the reasons `explain` lists and the `graph_breaks` log prints: the break's kind on the first
line, then its explanation and hints (Dynamo's developer context and web address, which name
its own internals, are left out). A break Dynamo words otherwise, or does not have, keeps
fusegrad's own text (`Unsupported`'s message).
"""

from __future__ import annotations

import builtins

from .variables import ConstantVariable, TensorVariable, Variable

# A branch on a graph tensor's truth (`if y.sum() > 0:`): Dynamo's wording, then ours.
TENSOR_BRANCH = ("generic_jump TensorVariable()\n"
                 "  Explanation: a branch on a tensor's value (data-dependent control flow)")


def graph_break(message: str | None) -> str:
    """`graph_break(msg)` called by the program."""
    return ("Call to `torch._dynamo.graph_break()`\n"
            f"  Explanation: User-inserted graph break. Message: {message or None}\n"
            "  Hint: Remove the `torch._dynamo.graph_break()` call.")


# The ATen op Dynamo names for a call whose output shape depends on the values, where it is
# not the name fusegrad's fake kernels give the call (`ops/indexing.py`, `ops/misc.py`).
_ATEN_NAME = {"argwhere": "nonzero", "index with a boolean mask": "nonzero",
              "unique": "_unique2"}
_SHAPE_FROM_VALUES = ": the output shape depends on the input values"


def dynamic_shape(what: str) -> str | None:
    """An op whose output shape depends on the input values (`nonzero`, a boolean mask), by
    the name its fake kernel or method gives it; None for one Dynamo words otherwise
    (`one_hot without num_classes`)."""
    op = _ATEN_NAME.get(what, what)
    if not op.isidentifier():
        return None
    return ("Dynamic shape operator\n"
            f"  Explanation: Operator `aten.{op}.default`'s output shape depends on input "
            "Tensor data.\n"
            "  Hint: Enable tracing of dynamic shape operators with "
            "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`")


def data_dependent_output(message: str) -> str | None:
    """A fake kernel's `DataDependentOutputError` (`"nonzero: the output shape depends on
    the input values ..."`), worded as Dynamo's where it has the same break."""
    what, found, _ = message.partition(_SHAPE_FROM_VALUES)
    return dynamic_shape(what) if found else None


def data_method(name: str, example) -> str | None:
    """A tensor method that needs the values (`item`, `tolist`, `nonzero`), of fake tensor
    `example`."""
    if name not in ("item", "tolist"):  # (the methods flagged DATA_DEPENDENT otherwise)
        return dynamic_shape(name)
    if name == "item":
        return ("Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
                "  Explanation: Dynamo does not support tracing `Tensor.item()` with "
                "config.capture_scalar_outputs=False.\n"
                "  Hint: Set `torch._dynamo.config.capture_scalar_outputs = True` or `export "
                "TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1` to include these operations in the "
                "captured graph.")
    if name == "tolist" and (example.dtype.is_floating_point or example.dtype.is_complex):
        return ("Tensor.tolist() with non-integer tensor\n"
                "  Explanation: Dynamo currently does not support tracing `tolist()` on "
                "non-integer tensors.\n"
                "  Hint: Ensure the input tensor to `tolist()` is an integer type (e.g., int8, "
                "int16, int32, int64).")
    if name == "tolist":
        return ("Data dependent operator\n"
                "  Explanation: Operator `aten._local_scalar_dense.default` has a non-Tensor "
                "output whose value is dependent on the data of Tensor inputs.\n"
                "  Hint: Enable tracing of data-dependent output operators with "
                "`torch._dynamo.config.capture_scalar_outputs = True`")
    return None


def builtin(f, args: list, kwargs: dict) -> str | None:
    """A call of a Python builtin the capture does not run (`print`, `open`, `globals`)."""
    name = getattr(f, "__name__", None)
    if name is None or getattr(builtins, name, None) is not f:
        return None
    kinds = [_type_name(a) for a in args]
    return ("Failed to trace builtin operator\n"
            f"  Explanation: Dynamo does not know how to trace builtin operator `{name}` with "
            f"argument types {kinds} (has_kwargs {bool(kwargs)})\n"
            f"  Hint: Avoid calling builtin `{name}` with argument types {kinds}. Consider "
            f"using an equivalent alternative function/method to `{name}`.\n"
            "  Hint: If you are attempting to call a logging function (e.g. `print`), you can "
            "try adding it to `torch._dynamo.config.reorderable_logging_functions`.\n"
            "  Hint: Please report an issue to PyTorch.")


def skipped(qualname: str, filename: str) -> str:
    """A call into a library function Dynamo never traces (`qualname`, defined in
    `filename`)."""
    return ("Attempted to call function marked as skipped\n"
            "  Explanation: Dynamo developers have intentionally marked that the function "
            f"`{qualname}` in file `{filename}` should not be traced.\n"
            f"  Hint: Avoid calling the function `{qualname}`.\n"
            "  Hint: Please file an issue to PyTorch.")


def _type_name(v: Variable) -> str:
    """The type Dynamo names for an argument: `Tensor`, or the Python value's type."""
    if isinstance(v, TensorVariable):
        return "Tensor"
    if isinstance(v, ConstantVariable):
        return type(v.value).__name__
    try:
        return v.python_type().__name__
    except (NotImplementedError, AttributeError):
        return type(v).__name__
