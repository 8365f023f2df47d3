"""`ShapeProp`: run a GraphModule on fake tensors and record every node's result metadata.

Each node gets `meta['val']` (a FakeTensor, or the Python value for non-tensor results),
`meta['tensor_meta']` (a `TensorMetadata` for tensor results, nested like the result) and
`meta['type']`. Nothing is computed: ops run their meta functions only.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..._fake import FakeTensor, FakeTensorMode
from ..._tensor import Tensor
from ..interpreter import Interpreter
from ..node import Node, map_aggregate


class TensorMetadata(NamedTuple):
    """Shape, dtype, requires_grad, stride and memory format of a tensor result."""

    shape: Any
    dtype: Any
    requires_grad: bool
    stride: tuple
    memory_format: Any
    is_quantized: bool
    qparams: dict


def extract_tensor_metadata(t: Tensor) -> TensorMetadata:
    """The TensorMetadata of tensor `t`."""
    from ... import _functions

    fmt = _functions.contiguous_format if t.is_contiguous() else None
    return TensorMetadata(t.shape, t.dtype, t.requires_grad, tuple(t.stride()), fmt, False, {})


class ShapeProp(Interpreter):
    """Propagate shapes and dtypes through a GraphModule with fake tensors."""

    def __init__(self, gm: Any, fake_mode: FakeTensorMode | None = None) -> None:
        super().__init__(gm)
        self.fake_mode = fake_mode if fake_mode is not None else FakeTensorMode()

    def run_node(self, n: Node) -> Any:
        """Run `n` under the fake mode and record its metadata."""
        with self.fake_mode:
            result = super().run_node(n)
        found = [False]

        def meta(x: Any) -> Any:
            if isinstance(x, Tensor):
                found[0] = True
                return extract_tensor_metadata(x)
            return x

        tensor_meta = map_aggregate(result, meta)
        if found[0]:
            n.meta["tensor_meta"] = tensor_meta
        n.meta["val"] = result
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args: Any) -> Any:
        """Run the module on fakes of `args`; returns the (fake) result."""
        fakes = [self.fake_mode.from_tensor(a) if isinstance(a, Tensor)
                 and not isinstance(a, FakeTensor) else a for a in args]
        return self.run(*fakes)
