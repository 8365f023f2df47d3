"""The layers of `fusegrad.nn`."""

from .activation import (
    ELU,
    GELU,
    Hardtanh,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .linear import Identity, Linear
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .misc import Dropout, Embedding, Flatten, Unflatten
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
)

__all__ = [
    "ELU", "GELU", "Hardtanh", "LeakyReLU", "LogSoftmax", "ReLU", "ReLU6", "Sigmoid", "SiLU",
    "Softmax", "Softplus", "Tanh", "ModuleDict", "ModuleList", "ParameterDict",
    "ParameterList", "Sequential", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
    "Identity", "Linear", "BCELoss",
    "BCEWithLogitsLoss", "CrossEntropyLoss", "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss",
    "SmoothL1Loss", "Dropout", "Embedding", "Flatten", "Unflatten", "Module", "BatchNorm1d",
    "BatchNorm2d", "LayerNorm", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d",
    "AvgPool2d", "MaxPool1d", "MaxPool2d",
]
