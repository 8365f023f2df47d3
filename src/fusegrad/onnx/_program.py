"""`ONNXProgram`: what `export(..., dynamo=True)` returns, as PyTorch's does: the model
(`model_proto`), `save`, and calling it, which runs the model in ONNX Runtime on fusegrad
tensors (`pip install onnxruntime`); and `dynamic_shapes` read as `dynamic_axes`.
"""

from __future__ import annotations

import copy
from typing import Any


class ONNXProgram:
    """An exported ONNX model: `model_proto`, `save(path)`, `program(*inputs)`."""

    def __init__(self, model_proto: Any, exported_program: Any = None):
        self.model_proto = model_proto
        self.exported_program = exported_program
        self._session = None

    def __repr__(self) -> str:
        import onnx

        printer = getattr(onnx, "printer", None)
        text = printer.to_text(self.model_proto.graph) if printer else str(self.model_proto)
        return f"ONNXProgram(\n    model=\n{text}\n)"

    def save(self, destination, *, include_initializers: bool = True,
             keep_initializers_as_inputs: bool = False, external_data: bool | None = None
             ) -> None:
        """Write the model to `destination` (atomically); without `include_initializers`
        the weights are left out (and become inputs with `keep_initializers_as_inputs`).
        `external_data` is accepted; the weights stay inside the file."""
        from .export import _import_onnx, _save_atomic

        proto = self.model_proto
        if not include_initializers or keep_initializers_as_inputs:
            proto = copy.deepcopy(proto)
            graph = proto.graph
            inits = list(graph.initializer)
            if keep_initializers_as_inputs:
                onnx = _import_onnx()
                known = {i.name for i in graph.input}
                for t in inits:
                    if t.name not in known:
                        graph.input.append(onnx.helper.make_tensor_value_info(
                            t.name, t.data_type, list(t.dims)))
            if not include_initializers:
                del graph.initializer[:]
        _save_atomic(None, proto, destination)

    def optimize(self) -> None:
        """PyTorch's graph optimisation pass: the model is already folded here."""

    def initialize_inference_session(self, initializer=None) -> None:
        """Start the ONNX Runtime session calls run in (`initializer(model_bytes)` makes it
        when given)."""
        data = self.model_proto.SerializeToString()
        if initializer is not None:
            self._session = initializer(data)
            return
        import onnxruntime

        self._session = onnxruntime.InferenceSession(
            data, providers=["CPUExecutionProvider"])

    def release(self) -> None:
        """Drop the inference session."""
        self._session = None

    def __call__(self, *args, **kwargs) -> list:
        """Run the model in ONNX Runtime on the tensors given (positional, then keyword, in
        the model's input order); its outputs as fusegrad tensors."""
        import numpy as np

        import fusegrad

        if self._session is None:
            self.initialize_inference_session()
        values = [a for a in (*args, *kwargs.values()) if a is not None]
        names = [i.name for i in self._session.get_inputs()]
        feed = {name: (v.detach().numpy() if isinstance(v, fusegrad.Tensor) else np.asarray(v))
                for name, v in zip(names, values)}
        return [fusegrad.from_numpy(np.asarray(out)) for out in self._session.run(None, feed)]

    def apply_weights(self, state_dict: dict) -> None:
        """Replace the initializers named in `state_dict` by its tensors."""
        from onnx import numpy_helper

        by_name = {t.name: t for t in self.model_proto.graph.initializer}
        for name, value in state_dict.items():
            if name in by_name:
                array = value.detach().numpy() if hasattr(value, "detach") else value
                by_name[name].CopyFrom(numpy_helper.from_array(array, name))
        self.release()

    def rename_axes(self, rename_mapping: dict) -> None:
        """Rename symbolic dimensions of the inputs and outputs (`{"s0": "batch"}`)."""
        graph = self.model_proto.graph
        for value in (*graph.input, *graph.output, *graph.value_info):
            for d in value.type.tensor_type.shape.dim:
                if d.dim_param in rename_mapping:
                    d.dim_param = rename_mapping[d.dim_param]
        self.release()


def dynamic_axes_from_shapes(dynamic_shapes: Any, model: Any, args: tuple,
                             input_names: list | None) -> dict:
    """`export`'s `dynamic_shapes` (per positional argument, as a tuple or a dict by argument
    name; each a dict `{axis: Dim}` or a per-axis sequence of `Dim`/None) as the
    `dynamic_axes` of the inputs named as the exporter names them."""
    import inspect

    from .export import _arg_name

    if dynamic_shapes is None:
        return {}
    if isinstance(dynamic_shapes, dict):
        params = list(inspect.signature(model.forward).parameters)
        per_arg = [dynamic_shapes.get(p) for p in params[:len(args)]]
    else:
        per_arg = list(dynamic_shapes)
    axes: dict = {}
    generated = 0
    for i, spec in enumerate(per_arg):
        if spec is None:
            continue
        if isinstance(spec, (list, tuple)):
            spec = {axis: dim for axis, dim in enumerate(spec) if dim is not None}
        if not isinstance(spec, dict):
            raise NotImplementedError(f"fusegrad.onnx.export reads dynamic_shapes of tensor "
                                      f"arguments only, not {type(spec).__name__}")
        names = {}
        for axis, dim in spec.items():
            # (read by their attributes: `export`, which defines `Dim`, is a layer above)
            hint = getattr(dim, "name", None) if type(dim).__name__ == "_DimHint" else None
            if hint == "STATIC":
                continue
            if isinstance(dim, str):
                names[int(axis)] = dim
            elif hint in ("AUTO", "DYNAMIC"):
                names[int(axis)] = f"s{generated}"
                generated += 1
            elif isinstance(getattr(dim, "__name__", None), str):  # a `Dim`
                names[int(axis)] = dim.__name__
            else:
                raise NotImplementedError(f"dynamic_shapes: unsupported dimension {dim!r}")
        if names:
            name = input_names[i] if input_names and i < len(input_names) else \
                _arg_name(model, i)
            axes[name] = names
    return axes
