"""The signature of an exported graph (`torch.export.graph_signature`): which placeholder is
a parameter, a buffer or a user input, and which output a user output or a buffer update."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


class InputKind(enum.Enum):
    """What a graph input stands for."""

    USER_INPUT = enum.auto()
    PARAMETER = enum.auto()
    BUFFER = enum.auto()
    CONSTANT_TENSOR = enum.auto()
    CUSTOM_OBJ = enum.auto()
    TOKEN = enum.auto()


class OutputKind(enum.Enum):
    """What a graph output stands for."""

    USER_OUTPUT = enum.auto()
    LOSS_OUTPUT = enum.auto()
    BUFFER_MUTATION = enum.auto()
    PARAMETER_MUTATION = enum.auto()
    GRADIENT_TO_PARAMETER = enum.auto()
    GRADIENT_TO_USER_INPUT = enum.auto()
    USER_INPUT_MUTATION = enum.auto()
    TOKEN = enum.auto()


@dataclasses.dataclass
class TensorArgument:
    """A tensor value of the graph, by node name."""

    name: str


@dataclasses.dataclass
class ConstantArgument:
    """A non-tensor value baked into the graph (a float keyword argument)."""

    name: str
    value: Any


@dataclasses.dataclass
class InputSpec:
    """One graph input: its kind, its placeholder and (parameters, buffers) its state key."""

    kind: InputKind
    arg: Any
    target: str | None
    persistent: bool | None = None

    def __str__(self) -> str:
        """PyTorch's line of the signature's text: `p_w: PARAMETER target='w'`."""
        line = _spec_line(self)
        return line if self.persistent is None else f"{line} persistent={self.persistent}"


@dataclasses.dataclass
class OutputSpec:
    """One graph output: its kind, its value and (mutations) the state key it updates."""

    kind: OutputKind
    arg: Any
    target: str | None

    def __str__(self) -> str:
        """PyTorch's line of the signature's text: `add: USER_OUTPUT`."""
        return _spec_line(self)


def _spec_line(spec) -> str:
    line = f"{spec.arg.name}: {spec.kind.name}"
    return line if spec.target is None else f"{line} target={spec.target!r}"


@dataclasses.dataclass
class ExportGraphSignature:
    """The input and output specs of an exported graph, in graph order."""

    input_specs: list
    output_specs: list

    def _inputs(self, kind: InputKind) -> list:
        return [s.target for s in self.input_specs if s.kind == kind]

    @property
    def parameters(self) -> list:
        """The state keys of the parameter inputs."""
        return self._inputs(InputKind.PARAMETER)

    @property
    def buffers(self) -> list:
        """The state keys of the buffer inputs."""
        return self._inputs(InputKind.BUFFER)

    @property
    def user_inputs(self) -> list:
        """The names (or constant values) of the user inputs."""
        return [s.arg.value if isinstance(s.arg, ConstantArgument) and False else s.arg.name
                for s in self.input_specs if s.kind == InputKind.USER_INPUT]

    @property
    def user_outputs(self) -> list:
        """The node names of the user outputs."""
        return [s.arg.name for s in self.output_specs if s.kind == OutputKind.USER_OUTPUT]

    @property
    def inputs_to_parameters(self) -> dict:
        """Placeholder name -> parameter key."""
        return {s.arg.name: s.target for s in self.input_specs
                if s.kind == InputKind.PARAMETER}

    @property
    def inputs_to_buffers(self) -> dict:
        """Placeholder name -> buffer key."""
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.BUFFER}

    @property
    def buffers_to_mutate(self) -> dict:
        """Output node name -> the buffer key it updates."""
        return {s.arg.name: s.target for s in self.output_specs
                if s.kind == OutputKind.BUFFER_MUTATION}

    def __str__(self) -> str:
        lines = ["", "# inputs", *map(str, self.input_specs), "", "# outputs",
                 *map(str, self.output_specs)]
        return "\n".join(lines) + "\n"


for _cls in (InputKind, OutputKind, TensorArgument, ConstantArgument, InputSpec, OutputSpec,
             ExportGraphSignature):
    _cls.__module__ = "fusegrad.export.graph_signature"

__all__ = ["ConstantArgument", "ExportGraphSignature", "InputKind", "InputSpec", "OutputKind",
           "OutputSpec", "TensorArgument"]
