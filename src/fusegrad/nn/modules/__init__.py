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
from .attention import MultiheadAttention, NonDynamicallyQuantizableLinear
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .extra import Bilinear, GroupNorm, HuberLoss, Upsample
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
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .transformer import TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "ELU", "GELU", "Hardtanh", "LeakyReLU", "LogSoftmax", "ReLU", "ReLU6", "Sigmoid", "SiLU",
    "Softmax", "Softplus", "Tanh", "ModuleDict", "ModuleList", "ParameterDict",
    "ParameterList", "Sequential", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
    "Identity", "Linear", "BCELoss",
    "BCEWithLogitsLoss", "CrossEntropyLoss", "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss",
    "SmoothL1Loss", "Dropout", "Embedding", "Flatten", "Unflatten", "Module", "BatchNorm1d",
    "BatchNorm2d", "LayerNorm", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d",
    "AvgPool2d", "MaxPool1d", "MaxPool2d",
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
    "MultiheadAttention", "NonDynamicallyQuantizableLinear", "TransformerEncoderLayer",
    "TransformerEncoder",
]
__all__ += ["Bilinear", "GroupNorm", "HuberLoss", "Upsample"]
