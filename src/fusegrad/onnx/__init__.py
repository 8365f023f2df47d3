"""`fusegrad.onnx`: export a Module to an ONNX file, as `torch.onnx.export` does.

The model is captured with `fusegrad.fx.symbolic_trace`; every node of the graph is mapped
to ONNX operators (`modules.py` for leaf modules, `functions.py` for functions and Tensor
methods). The `onnx` package is needed only when `export` runs (`pip install onnx`).
"""

from ._graph import UnsupportedOperatorError
from .export import export

__all__ = ["UnsupportedOperatorError", "export"]
