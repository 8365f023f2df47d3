"""Text rendering of tensors, matching what ``repr(torch.Tensor)`` prints in PyTorch 2.13.

The module works on plain NumPy data, so it has no knowledge of the Tensor class: the caller
passes the tensor's values, its dtype name and any already formatted trailing items
(``requires_grad=True``, ``grad_fn=<...>``), and gets back the full ``tensor(...)`` string.

How PyTorch lays a tensor out, in short:

* One formatter is built per tensor (two for complex tensors: real and imaginary parts). It
  looks only at the values that will actually be shown (the edges, when the tensor is
  summarised) and, for floating types, only at the finite nonzero ones. From those it decides
  whether every value is a whole number ("int mode", printed as ``1.``), whether scientific
  notation is needed, and the width every element is right-aligned to.
* Elements of the innermost dimension are joined by ``", "`` and wrapped so that a line holds
  as many elements as fit in ``linewidth`` minus the current indentation.
* Outer dimensions are joined by ``","`` plus ``ndim - 1`` newlines, and each nesting level
  indents by one more column than its parent's opening bracket.
* Tensors with more than ``threshold`` elements are summarised: each dimension longer than
  ``2 * edgeitems`` keeps only ``edgeitems`` entries at each end, with ``...`` between.
* Trailing items (size, dtype, autograd information) follow the data, each moved to its own
  line when it would not fit within ``linewidth``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["format_tensor", "get_printoptions", "set_printoptions"]


class _PrintOptions:
    """The mutable, process-wide printing settings (same fields and order as PyTorch).

    A plain class: importing `dataclasses` for it cost `import fusegrad` a millisecond."""

    def __init__(self) -> None:
        self.precision: int = 4
        self.threshold: float = 1000
        self.edgeitems: int = 3
        self.linewidth: int = 80
        self.sci_mode: bool | None = None


_OPTIONS = _PrintOptions()

# Values installed by ``set_printoptions(profile=...)``; ``sci_mode`` is handled separately.
_PROFILES: dict[str, dict[str, Any]] = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}

# Alternative dtype spellings accepted for ``dtype_name`` / ``default_dtype_name``.
_DTYPE_ALIASES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "long": "int64",
    "int": "int32",
    "short": "int16",
}


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Change how tensors are printed, with the semantics of ``torch.set_printoptions``.

    Args:
        precision: digits after the decimal point for floating values (default 4).
        threshold: element count above which a tensor is summarised (default 1000).
        edgeitems: entries kept at each end of a summarised dimension (default 3).
        linewidth: characters per line used for wrapping (default 80).
        profile: ``"default"``, ``"short"`` or ``"full"``; resets the four options above to
            that preset before the explicit arguments are applied. Other names are ignored.
        sci_mode: ``True``/``False`` forces or forbids scientific notation; ``None`` lets it
            be chosen from the data. As in PyTorch, this option is overwritten on every call,
            so omitting it restores automatic selection.
    """
    if profile is not None and profile in _PROFILES:
        for name, value in _PROFILES[profile].items():
            setattr(_OPTIONS, name, value)
    if precision is not None:
        _OPTIONS.precision = precision
    if threshold is not None:
        _OPTIONS.threshold = threshold
    if edgeitems is not None:
        _OPTIONS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTIONS.linewidth = linewidth
    _OPTIONS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """Return the current print options as a dict accepted by :func:`set_printoptions`."""
    return dict(vars(_OPTIONS))  # the fields in their declared order


def _canonical_dtype(name: str) -> str:
    """Normalise a dtype name: drop a ``torch.`` prefix and resolve short aliases."""
    name = name.removeprefix("torch.")
    return _DTYPE_ALIASES.get(name, name)


def _is_floating(name: str) -> bool:
    return name.startswith("float") or name == "bfloat16"


def _is_complex(name: str) -> bool:
    return name.startswith("complex")


class _ElementFormatter:
    """Turns the scalars of one real-valued component into equally wide strings.

    ``sample`` holds the values that will be displayed (already reduced to the edges when the
    tensor is summarised); the display mode and the column width are derived from it once.
    """

    def __init__(self, sample: np.ndarray, floating: bool, options: _PrintOptions) -> None:
        self.floating = floating
        self.precision = options.precision
        self.int_mode = True
        self.sci_mode = False
        self.width = 1

        if not floating:
            for value in sample.tolist():
                self.width = max(self.width, len(str(value)))
            return

        shown = sample[np.isfinite(sample) & (sample != 0)]
        if shown.size == 0:
            # Only zeros and non-finite values: keep the defaults, whatever sci_mode says.
            return

        magnitudes = np.abs(shown)
        smallest = float(magnitudes.min())
        largest = float(magnitudes.max())
        self.int_mode = bool(np.all(shown == np.ceil(shown)))
        if options.sci_mode is None:
            self.sci_mode = largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4
        else:
            self.sci_mode = bool(options.sci_mode)

        for value in shown.tolist():
            if self.sci_mode:
                length = len(f"{value:.{self.precision}e}")
            elif self.int_mode:
                length = len(f"{value:.0f}") + 1  # room for the trailing "."
            else:
                length = len(f"{value:.{self.precision}f}")
            self.width = max(self.width, length)

    def __call__(self, value: Any) -> str:
        """Format one Python scalar, right-aligned to the common width."""
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:.{self.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}"
            if math.isfinite(value):
                text += "."
        else:
            text = f"{value:.{self.precision}f}"
        return text.rjust(self.width)


class _ValueFormatter:
    """Formats tensor elements: one component for real dtypes, two for complex ones."""

    def __init__(self, real: _ElementFormatter, imag: _ElementFormatter | None = None) -> None:
        self.real = real
        self.imag = imag

    @property
    def element_width(self) -> int:
        """Width of one formatted element, excluding the ``", "`` separator."""
        if self.imag is None:
            return self.real.width
        return self.real.width + self.imag.width + 1  # the imaginary part gains a "j"

    def __call__(self, value: Any) -> str:
        if self.imag is None:
            return self.real(value)
        real_text = self.real(value.real)
        imag_text = (self.imag(value.imag) + "j").lstrip()
        if imag_text[0] in "+-":
            return real_text + imag_text
        return real_text + "+" + imag_text


def _displayed_values(array: np.ndarray, edgeitems: int) -> np.ndarray:
    """Flatten the elements that remain visible once ``array`` is summarised."""
    if array.ndim == 0:
        return array.reshape(-1)
    if array.ndim == 1:
        if array.shape[0] > 2 * edgeitems:
            # With edgeitems == 0 the tail slice ``[-0:]`` is the whole vector, as in PyTorch.
            return np.concatenate((array[:edgeitems], array[-edgeitems:]))
        return array
    if not edgeitems:
        return array.reshape(-1)[:0]
    length = array.shape[0]
    if length > 2 * edgeitems:
        rows = [*range(edgeitems), *range(length - edgeitems, length)]
    else:
        rows = list(range(length))
    return np.concatenate([_displayed_values(array[i], edgeitems) for i in rows])


def _render(
    array: np.ndarray,
    indent: int,
    summarize: bool,
    fmt: _ValueFormatter,
    options: _PrintOptions,
) -> str:
    """Render ``array`` as nested brackets; ``indent`` is the column of its opening bracket."""
    edge = options.edgeitems
    if array.ndim == 0:
        return fmt(array.item())

    if array.ndim == 1:
        if summarize and not edge:
            cells = ["..."]
        elif summarize and array.shape[0] > 2 * edge:
            head = [fmt(v) for v in array[:edge].tolist()]
            tail = [fmt(v) for v in array[-edge:].tolist()]
            cells = [*head, " ...", *tail]
        else:
            cells = [fmt(v) for v in array.tolist()]
        per_line = max(1, math.floor((options.linewidth - indent) / (fmt.element_width + 2)))
        lines = [", ".join(cells[i : i + per_line]) for i in range(0, len(cells), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"

    length = array.shape[0]
    if summarize and length > 2 * edge:
        head = [_render(array[i], indent + 1, summarize, fmt, options) for i in range(edge)]
        tail = [
            _render(array[i], indent + 1, summarize, fmt, options)
            for i in range(length - edge, length)
        ]
        blocks = [*head, "...", *tail]
    else:
        blocks = [_render(array[i], indent + 1, summarize, fmt, options) for i in range(length)]
    separator = "," + "\n" * (array.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(blocks) + "]"


def _to_python_friendly(array: np.ndarray, dtype_name: str) -> np.ndarray:
    """Convert the data to a NumPy dtype whose ``tolist()`` yields exact Python scalars."""
    if _is_complex(dtype_name):
        return array.astype(np.complex128)
    if _is_floating(dtype_name):
        # Every supported float format (float16, bfloat16, float32) widens exactly.
        return array.astype(np.float64)
    if dtype_name == "bool":
        return array.astype(np.bool_)
    return array


def _data_text(array: np.ndarray, dtype_name: str, indent: int, options: _PrintOptions) -> str:
    """The bracketed data part of the repr of a non-empty tensor."""
    values = _to_python_friendly(array, dtype_name)
    summarize = values.size > options.threshold

    def sample(component: np.ndarray) -> np.ndarray:
        if summarize:
            return _displayed_values(component, options.edgeitems)
        return component.reshape(-1)

    if _is_complex(dtype_name):
        fmt = _ValueFormatter(
            _ElementFormatter(sample(values.real), True, options),
            _ElementFormatter(sample(values.imag), True, options),
        )
    else:
        fmt = _ValueFormatter(_ElementFormatter(sample(values), _is_floating(dtype_name), options))
    return _render(values, indent, summarize, fmt, options)


def _close(text: str, items: Sequence[str], indent: int, linewidth: int) -> str:
    """Append the trailing ``, item`` entries and the closing parenthesis.

    An item moves to a new line (indented to the data) when it would overflow ``linewidth``.
    PyTorch measures the first line it tests as two characters longer than it really is
    (it counts the ``", "`` up front); the arithmetic below keeps that behaviour.
    """
    pieces = [text]
    used = len(text) - text.rfind("\n") + 1
    for item in items:
        if used + len(item) + 2 > linewidth:
            pieces.append(",\n" + " " * indent + item)
            used = indent + len(item)
        else:
            pieces.append(", " + item)
            used += len(item) + 2
    pieces.append(")")
    return "".join(pieces)


def format_tensor(
    array: np.ndarray,
    dtype_name: str,
    default_dtype_name: str = "float32",
    suffixes: Sequence[str] = (),
    prefix: str = "tensor(",
) -> str:
    """Return the text ``repr(tensor)`` gives in PyTorch 2.13 for a strided CPU tensor.

    Args:
        array: the tensor's values, any shape (0-d and empty included). Floating data may be
            float16, ``ml_dtypes.bfloat16``, float32 or float64; integer and bool data use
            the matching NumPy dtypes.
        dtype_name: the tensor's dtype without the ``torch.`` prefix, e.g. ``"bfloat16"``.
        default_dtype_name: the current default floating dtype; tensors of that dtype (and
            of its complex counterpart, int64 and bool) do not print ``dtype=``.
        suffixes: extra, already formatted items such as ``"requires_grad=True"`` or
            ``"grad_fn=<MulBackward0>"``, placed after the size/dtype items.
        prefix: the text opening the repr; the data is indented to its length.

    Returns:
        The complete representation, e.g. ``"tensor([1., 2.], dtype=torch.float64)"``.
    """
    options = _OPTIONS
    array = np.asarray(array)
    name = _canonical_dtype(dtype_name)
    default = _canonical_dtype(default_dtype_name)
    default_complex = "complex128" if default == "float64" else "complex64"
    indent = len(prefix)
    items: list[str] = []

    if array.size == 0:
        # Only a 1-d empty tensor leaves its shape implicit; since no values hint at the dtype,
        # anything but the default float dtype is spelled out (int64 and bool included).
        if array.ndim != 1:
            items.append(f"size={tuple(array.shape)}")
        if name != default:
            items.append(f"dtype=torch.{name}")
        body = "[]"
    else:
        if not options.edgeitems:
            items.append(f"size={tuple(array.shape)}")
        if name not in (default, default_complex, "int64", "bool"):
            items.append(f"dtype=torch.{name}")
        body = _data_text(array, name, indent, options)

    items.extend(suffixes)
    return _close(prefix + body, items, indent, options.linewidth)
