"""`fusegrad.onnx`: export a Module to an ONNX file, as `torch.onnx.export` does.

The model runs once on the example inputs under a capturing dispatch mode; every registry op
it calls is mapped to ONNX operators through the op's own `OpDef.onnx` entry (`ops/*.py`),
so the registry is the only list of exportable ops. The `onnx` package is needed only when
`export` runs (`pip install onnx`).
"""

from ._graph import UnsupportedOperatorError
from ._program import ONNXProgram
from .export import TrainingMode, export, is_in_onnx_export

__all__ = ["ONNXProgram", "TrainingMode", "UnsupportedOperatorError", "export",
           "is_in_onnx_export"]
