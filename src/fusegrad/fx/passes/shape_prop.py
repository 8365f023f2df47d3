"""`ShapeProp`: run a GraphModule node by node and record every node's result metadata.

Each node gets `meta['type']` (the class of its result) and, when the result holds tensors,
`meta['tensor_meta']` (a `TensorMetadata` for each tensor, nested like the result). Without
a fake mode the graph runs on the given (real) tensors, as in PyTorch; with one (passed in,
or active when the ShapeProp is made) it runs on fakes of them: only meta functions run.
"""

from __future__ import annotations

import traceback
from typing import Any, NamedTuple

from ..._fake import FakeTensor, FakeTensorMode
from ..._tensor import Tensor
from ..interpreter import Interpreter
from ..node import Node


class TensorMetadata(NamedTuple):
    """Shape, dtype, requires_grad, stride and memory format of a tensor result."""

    shape: Any
    dtype: Any
    requires_grad: bool
    stride: tuple
    memory_format: Any
    is_quantized: bool
    qparams: dict


def _memory_format(t: Tensor) -> Any:
    """The first memory format `t` is contiguous in (None for other layouts)."""
    import fusegrad

    for name in ("contiguous_format", "channels_last", "channels_last_3d"):
        fmt = getattr(fusegrad, name, None)
        if fmt is None:
            continue
        try:
            if t.is_contiguous(memory_format=fmt):
                return fmt
        except (RuntimeError, ValueError, TypeError):
            continue  # a format for another rank
    return None


def extract_tensor_metadata(t: Tensor) -> TensorMetadata:
    """The TensorMetadata of tensor `t`."""
    return TensorMetadata(t.shape, t.dtype, t.requires_grad, tuple(t.stride()),
                          _memory_format(t), False, {})


def _active_fake_mode() -> FakeTensorMode | None:
    """The innermost FakeTensorMode active on this thread, if any."""
    from ... import _thread_state

    for mode in reversed(getattr(_thread_state.local, "modes", None) or []):
        if isinstance(mode, FakeTensorMode):
            return mode
    return None


def _map_meta(a: Any, fn) -> Any:
    # Structured results (`return_types.max`) become plain tuples, as PyTorch's map_aggregate
    # treats its struct sequences; NamedTuples keep their class.
    if isinstance(a, tuple):
        items = tuple(_map_meta(x, fn) for x in a)
        named = hasattr(a, "_fields") and not type(a).__module__.endswith("return_types")
        return type(a)(*items) if named else items
    if isinstance(a, list):
        return [_map_meta(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: _map_meta(v, fn) for k, v in a.items()}
    return fn(a)


class ShapeProp(Interpreter):
    """Run a GraphModule and record each node's result type and tensor metadata."""

    def __init__(self, gm: Any, fake_mode: FakeTensorMode | None = None) -> None:
        super().__init__(gm)
        self.fake_mode = fake_mode if fake_mode is not None else _active_fake_mode()

    def run_node(self, n: Node) -> Any:
        """Run `n` (under the fake mode, if any) and record its metadata."""
        try:
            if self.fake_mode is not None:
                with self.fake_mode:
                    result = super().run_node(n)
            else:
                result = super().run_node(n)
        except Exception as e:
            traceback.print_exc()
            raise RuntimeError(f"ShapeProp error for: node={n.format_node()} with "
                               f"meta={n.meta}") from e
        found = [False]

        def meta(x: Any) -> Any:
            if isinstance(x, Tensor):
                found[0] = True
                return extract_tensor_metadata(x)
            return x

        tensor_meta = _map_meta(result, meta)
        if found[0]:
            n.meta["tensor_meta"] = tensor_meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args: Any) -> Any:
        """Run the module on `args` (on fakes of them under a fake mode); its result."""
        if self.fake_mode is not None:
            args = tuple(self.fake_mode.from_tensor(a) if isinstance(a, Tensor)
                         and not isinstance(a, FakeTensor) else a for a in args)
        return self.run(*args)
