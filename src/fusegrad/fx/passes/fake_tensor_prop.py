"""`FakeTensorProp`: run a GraphModule on fake tensors and record each node's result as
`meta['val']` (what `print_readable` annotates and later passes read), as torch.fx's pass
of that name does: only meta functions run, so a graph of any size is walked without
computing a value.
"""

from __future__ import annotations

from typing import Any

from ..._fake import FakeTensor, FakeTensorMode
from ..._tensor import Tensor
from ..interpreter import Interpreter
from ..node import Node
from .shape_prop import _map_meta

__all__ = ["FakeTensorProp"]


class FakeTensorProp(Interpreter):
    """Run `module`'s graph under `mode` (a new FakeTensorMode when None); each node's
    result, tensors as fakes, becomes its `meta['val']`."""

    def __init__(self, module: Any, mode: FakeTensorMode | None = None) -> None:
        super().__init__(module)
        self._mode = mode if mode is not None else FakeTensorMode()

    def _snapshot(self, x: Any) -> Any:
        if isinstance(x, FakeTensor):
            return x.detach()
        if isinstance(x, Tensor):  # (a module's own parameter, read by get_attr)
            return self._mode.from_tensor(x)
        return x

    def run_node(self, n: Node) -> Any:
        """Run `n` on fakes and record its result as `meta['val']`."""
        result = super().run_node(n)
        n.meta["val"] = _map_meta(result, self._snapshot)
        return result

    def propagate(self, *args: Any) -> Any:
        """Run the graph on fakes of `args` (tensors made fake); the fake result."""
        with self._mode:
            fake_args = tuple(self._mode.from_tensor(a) if isinstance(a, Tensor)
                              and not isinstance(a, FakeTensor) else a for a in args)
        return self.propagate_dont_convert_inputs(*fake_args)

    def propagate_dont_convert_inputs(self, *args: Any) -> Any:
        """Run the graph on `args` as they are (already fakes); the fake result."""
        with self._mode:
            return super().run(*args)
