"""Public functions (`fusegrad.add`, ...) and Tensor methods: thin wrappers over registry ops.

Each wrapper picks the overload PyTorch would pick (`x + 2` is `add.Tensor`, `2 - x` is
`rsub.Scalar`, `x.sum(0)` is `sum.dim_IntList`) and passes positional arguments to dispatch.
Composites (`matmul`, `reshape`, `contiguous`, indexing) are written over those ops, so they
record the same nodes PyTorch records.

The package holds one module per family: `pointwise` (arithmetic and elementwise math),
`comparison` (comparisons, logical and bitwise ops, searching), `reduction`,
`linear_algebra`, `shape` (shapes and views), `indexing`, `inplace` (in-place functions and
copies) and `activation`; once all are imported, `methods.attach` attaches the Tensor
methods and operators `ops/spellings.py` lists, in one loop.
"""

from ..ops.spellings import ALIASES
from ..ops.surface import NN_SPELLING, has_flag
from . import methods
from .activation import (
    elu,
    gelu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    logsigmoid,
    mish,
    prelu,
    relu6,
    selu,
    silu,
    softplus,
)
from .comparison import (
    allclose,
    bincount,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    bucketize,
    eq,
    equal,
    ge,
    gt,
    isclose,
    le,
    logical_and,
    logical_or,
    logical_xor,
    lt,
    ne,
    searchsorted,
    unique,
)
from .indexing import (
    argwhere,
    gather,
    getitem,
    index_add,
    index_put,
    index_select,
    masked_fill,
    masked_select,
    nonzero,
    one_hot,
    scatter,
    scatter_add,
    setitem,
    take_along_dim,
)
from .inplace import (
    add_,
    channels_last,
    channels_last_3d,
    clone,
    contiguous,
    contiguous_format,
    copy_,
    div_,
    fill_,
    mul_,
    preserve_format,
    sub_,
    to_copy,
    zero_,
)
from .linear_algebra import (
    addmm,
    addmv,
    baddbmm,
    bmm,
    dot,
    einsum,
    ger,
    matmul,
    mm,
    mv,
    outer,
    tensordot,
)
from .pointwise import (
    abs,
    acos,
    acosh,
    add,
    addcdiv,
    addcmul,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_not,
    ceil,
    clamp,
    cos,
    cosh,
    div,
    erf,
    erfc,
    exp,
    exp2,
    expm1,
    floor,
    floor_divide,
    fmax,
    fmod,
    frac,
    isfinite,
    isinf,
    isnan,
    lerp,
    log,
    log1p,
    log2,
    log10,
    logical_not,
    maximum,
    minimum,
    mul,
    nan_to_num,
    nan_to_num_,
    neg,
    pow,
    reciprocal,
    relu,
    remainder,
    round,
    rsqrt,
    rsub,
    sgn,
    sigmoid,
    sign,
    sin,
    sinh,
    special_erf,
    sqrt,
    square,
    sub,
    tan,
    tanh,
    trunc,
    where,
)
from .reduction import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    argsort,
    count_nonzero,
    cummax,
    cummin,
    cumprod,
    cumsum,
    kthvalue,
    log_softmax,
    logsumexp,
    max,
    mean,
    median,
    min,
    mode,
    msort,
    norm,
    prod,
    return_types,
    softmax,
    sort,
    std,
    std_mean,
    sum,
    topk,
    var,
    var_mean,
)
from .shape import (
    as_strided,
    broadcast_tensors,
    broadcast_to,
    cat,
    chunk,
    diag,
    diag_embed,
    diagonal,
    diagonal_fn,
    expand,
    flatten,
    flip,
    fliplr,
    flipud,
    hstack,
    meshgrid,
    moveaxis,
    movedim,
    narrow,
    repeat,
    roll,
    select,
    split,
    squeeze,
    stack,
    t,
    tensor_split,
    tile,
    trace,
    transpose,
    transpose_,
    tril,
    triu,
    unbind,
    unflatten,
    unsafe_chunk,
    unsafe_split,
    unsqueeze,
    view,
    vstack,
)
from .shape import (
    permute_function as permute,
)
from .shape import (
    reshape_function as reshape,
)

# isort: split
# Families added alongside the core ones; each module attaches its own Tensor methods when
# imported (math_extra's `fmax` replaces pointwise's, which was `maximum` under that name).
from . import complex as complex_numbers
from . import math_extra, shape_extra, statistics, utilities
from .complex import *  # noqa: F403
from .math_extra import *  # noqa: F403
from .shape_extra import *  # noqa: F403
from .statistics import *  # noqa: F403
from .utilities import *  # noqa: F403

# isort: split
from . import (
    compat_layers,  # ATen's functional spellings: recurrent layers, samplers, scatters
    compat_more,  # settings, type questions, ATen's spellings of layers, small helpers
    linalg_extra,  # det, inverse, svd, qr, ... (after linear_algebra; methods)
    numeric_more,  # gradient, histogramdd, binomial, DLPack
    shifts,  # bitwise_left_shift, bitwise_right_shift
    spectral,  # stft, istft
    symbolic_numbers,  # sym_int, sym_max, ...: Python's number functions, spelled as torch's
    view_copies,  # the `*_copy` forms of the views
)
from .compat_layers import *  # noqa: F403
from .compat_more import *  # noqa: F403
from .linalg_extra import *  # noqa: F403
from .numeric_more import *  # noqa: F403
from .shifts import *  # noqa: F403
from .spectral import *  # noqa: F403
from .symbolic_numbers import *  # noqa: F403
from .view_copies import *  # noqa: F403

__all__ = [
    "add", "sub", "rsub", "mul", "div", "neg", "reciprocal", "pow", "exp", "log", "sin", "cos",
    "tanh", "sigmoid", "sqrt", "abs", "relu", "sign", "maximum", "clamp", "where", "eq", "ne",
    "lt", "le", "gt", "ge", "sum", "mean", "amax", "softmax", "log_softmax", "mm", "bmm", "mv",
    "dot", "matmul", "reshape", "permute", "transpose", "t", "unsqueeze",
    "squeeze", "unbind", "cat", "select", "narrow", "as_strided", "clone", "contiguous_format",
    "preserve_format", "channels_last", "channels_last_3d", "exp2", "expm1", "log2", "log10",
    "log1p", "rsqrt",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc",
    "floor", "ceil", "trunc", "frac", "sgn", "isnan", "isinf", "isfinite", "logical_not",
    "bitwise_not", "square", "round", "nan_to_num", "nan_to_num_", "atan2", "floor_divide",
    "remainder", "fmod", "minimum", "fmax", "lerp", "addcmul", "addcdiv", "logical_and",
    "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "amin", "max",
    "min", "argmax", "argmin", "prod", "var", "std", "var_mean", "std_mean", "norm",
    "logsumexp", "cumsum", "cumprod", "cummax", "cummin", "all", "any", "count_nonzero",
    "median", "mode", "kthvalue", "topk", "sort", "argsort", "msort", "return_types", "flatten",
    "unflatten", "movedim", "moveaxis", "broadcast_to", "broadcast_tensors", "tile",
    "stack", "hstack", "vstack", "split", "chunk", "unsafe_split", "unsafe_chunk",
    "tensor_split", "flip", "fliplr", "flipud", "roll", "tril", "triu", "diagonal",
    "diag_embed", "diag", "trace", "index_select", "gather", "take_along_dim", "scatter",
    "scatter_add", "index_add", "masked_fill", "masked_select", "nonzero", "argwhere",
    "index_put", "outer", "ger", "addmm", "baddbmm", "addmv", "tensordot", "einsum", "selu",
    "searchsorted", "bucketize", "bincount", "unique", "isclose", "allclose", "equal",
    "meshgrid",
]
__all__ += [*complex_numbers.__all__, *math_extra.__all__, "hardshrink", "prelu",
            *shape_extra.__all__, *statistics.__all__, *utilities.__all__]
__all__ += linalg_extra.__all__
__all__ += view_copies.__all__ + shifts.__all__ + compat_more.__all__ + compat_layers.__all__
__all__ += numeric_more.__all__ + symbolic_numbers.__all__ + spectral.__all__

# isort: split
# PyTorch's other names of ops (`arcsin`), the in-place methods PyTorch also spells as
# functions, then every Tensor method, once the namespace holds all the public functions the
# table names.
_ALIASES = {alias: name for alias, name in ALIASES.items()  # those of nn's spellings are nn's
            if not has_flag(name, NN_SPELLING)}
globals().update({alias: globals()[name] for alias, name in _ALIASES.items()})
globals().update(methods.function_forms())
__all__ += [alias for alias in _ALIASES if alias not in __all__]
__all__ += methods.INPLACE_FUNCTIONS
methods.attach(globals())
