"""`fusegrad.export` (PyTorch's `torch.export`): whole-program capture into a graph of
registry ops with its parameters, buffers and signature, dynamic dims, decomposition and a
code-free file format. See `_trace.py` for how the graph is made."""

from __future__ import annotations

from ._serialize import load, save
from ._trace import export
from .dynamic_shapes import Dim, dims
from .exported_program import ExportedProgram
from .graph_signature import ExportGraphSignature
from .unflatten import unflatten  # (the function, as PyTorch's `torch.export.unflatten`)

__all__ = ["Dim", "ExportGraphSignature", "ExportedProgram", "dims", "export", "load", "save",
           "unflatten"]
