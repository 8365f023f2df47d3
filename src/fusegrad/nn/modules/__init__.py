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
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
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
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
    "MultiheadAttention", "NonDynamicallyQuantizableLinear", "TransformerEncoderLayer",
    "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
]
__all__ += ["Bilinear", "GroupNorm", "HuberLoss", "Upsample"]

from . import padding as _padding  # noqa: E402
from .padding import *  # noqa: E402, F403

__all__ += _padding.__all__

# Activations, losses and layers added with the nn coverage work.
from .activation import (  # noqa: E402
    CELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    LogSigmoid,
    Mish,
    PReLU,
    RReLU,
    Softmax2d,
    Softmin,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
)
from .distance import CosineSimilarity, PairwiseDistance  # noqa: E402
from .instancenorm import (  # noqa: E402
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LocalResponseNorm,
    RMSNorm,
)
from .loss import (  # noqa: E402
    CosineEmbeddingLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from .shuffle import (  # noqa: E402
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    ChannelShuffle,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    Fold,
    PixelShuffle,
    PixelUnshuffle,
    Unfold,
)
from .sparse import EmbeddingBag  # noqa: E402

__all__ += [
    "CELU", "GLU", "SELU", "Hardshrink", "Hardsigmoid", "Hardswish", "LogSigmoid", "Mish",
    "PReLU", "RReLU", "Softmax2d", "Softmin", "Softshrink", "Softsign", "Tanhshrink",
    "Threshold", "CosineSimilarity", "PairwiseDistance", "InstanceNorm1d", "InstanceNorm2d",
    "InstanceNorm3d", "LocalResponseNorm", "RMSNorm", "CosineEmbeddingLoss", "GaussianNLLLoss",
    "HingeEmbeddingLoss", "MarginRankingLoss", "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss",
    "TripletMarginLoss", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "ChannelShuffle",
    "Dropout1d", "Dropout2d", "Dropout3d", "Fold", "PixelShuffle", "PixelUnshuffle", "Unfold",
    "EmbeddingBag", "CTCLoss",
]
