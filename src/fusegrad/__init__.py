"""fusegrad: PyTorch's programming model and compiler stack, in readable Python on NumPy.

`import fusegrad as torch` runs ordinary PyTorch code: tensors, autograd, and (as they land)
nn, optim, data, fx and compile.
"""

import numbers as _numbers
from types import ModuleType as _ModuleType

import numpy as _np

from ._collector import CollectorPaused as _CollectorPaused
from ._heap import keep_freed_memory as _keep_freed_memory

_keep_freed_memory()  # training steps reuse freed buffers without page faults (_heap)

with _CollectorPaused():
    from . import (
        _dtype as _dtype_module,
    )
    from . import (
        _functions,  # noqa: F401  (attaches the Tensor methods)
        _legacy_types,
        autograd,
        ops,
        utils,
    )
    from ._autocast import DEVICE_SPELLINGS as _AUTOCAST_DEVICE_SPELLINGS
    from ._autocast import (
        autocast_decrement_nesting,
        autocast_increment_nesting,
        clear_autocast_cache,
        get_autocast_cpu_dtype,
        get_autocast_dtype,
        get_autocast_gpu_dtype,
        is_autocast_cache_enabled,
        is_autocast_cpu_enabled,
        is_autocast_enabled,
        set_autocast_cache_enabled,
        set_autocast_cpu_dtype,
        set_autocast_cpu_enabled,
        set_autocast_dtype,
        set_autocast_enabled,
        set_autocast_gpu_dtype,
    )
    from ._creation import (
        arange,
        as_tensor,
        empty,
        empty_like,
        eye,
        from_numpy,
        full,
        full_like,
        ones,
        ones_like,
        rand,
        rand_like,
        randint,
        randint_like,
        randn,
        randn_like,
        randperm,
        tensor,
        tril_indices,
        triu_indices,
        zeros,
        zeros_like,
    )
    from ._device import device
    from ._distributions import bernoulli, binomial, multinomial, normal, poisson
    from ._dtype import (
        bfloat16,
        can_cast,
        complex64,
        complex128,
        dtype,
        float16,
        float32,
        float64,
        get_default_dtype,
        int8,
        int16,
        int32,
        int64,
        promote_types,
        qint8,
        qint32,
        quint4x2,
        quint8,
        set_default_dtype,
        uint8,
        uint16,
    )
    from ._dtype import bool_ as bool  # noqa: A004
    from ._functions import *  # noqa: F403
    from ._functions import abs, pow, sum  # noqa: A004
    from ._functions.compat_more import _assert
    from ._functions.ranges import linspace, logspace
    from ._functions.sparse import sparse_coo_tensor, spmm
    from ._random import (
        Generator,
        default_generator,
        get_rng_state,
        initial_seed,
        manual_seed,
        seed,
        set_rng_state,
    )
    from ._sparse import layout, sparse_coo, sparse_csr, strided
    from ._tensor import Size, Tensor
    from ._type_info import finfo, iinfo
    from .autograd import (
        enable_grad,
        inference_mode,
        is_anomaly_check_nan_enabled,
        is_anomaly_enabled,
        is_grad_enabled,
        is_inference_mode_enabled,
        no_grad,
        set_grad_enabled,
    )

half, float, double = float16, float32, float64  # noqa: A001
cfloat, cdouble = complex64, complex128
short, int, long = int16, int32, int64  # noqa: A001
# PyTorch's constants: `torch.pi`, ..., and `torch.newaxis`, NumPy's None for a new dim.
e, pi, inf, nan, newaxis = _np.e, _np.pi, _np.inf, _np.nan, None
# The PyTorch version whose behaviour fusegrad reproduces, labelled with fusegrad's own
# release ("2.13.0+fusegrad0.1.0"), so programs comparing `torch.__version__` take the paths
# for that PyTorch; `version.fusegrad` is the package's own version (see `torch_version`).
from . import version  # noqa: E402
from .torch_version import TorchVersion as _TorchVersion  # noqa: E402

__version__ = _TorchVersion(version.__version__)

# As in PyTorch, overflow, division by zero and invalid operations give inf/nan silently.
_np.seterr(all="ignore")


def is_tensor(obj) -> bool:
    """True if `obj` is a fusegrad Tensor."""
    return isinstance(obj, Tensor)


def numel(input) -> int:
    """Number of elements of `input`."""
    return input.numel()


def result_type(tensor1, tensor2) -> dtype:
    """The dtype an operation on the two operands produces (each a tensor or a number)."""
    from ._dtype import result_type as _rt

    if not isinstance(tensor1, (Tensor, _numbers.Number)) or \
            not isinstance(tensor2, (Tensor, _numbers.Number)):
        from ._functions import _args  # (PyTorch's parser's listing of its overloads)

        _args.parsed("result_type", _args.Overloads((), (
            "Tensor tensor, Tensor other", "Number scalar, Tensor tensor",
            "Tensor tensor, Number other", "Number scalar1, Number scalar2")),
            None, (tensor1, tensor2), {}, True)
    return _rt(tensor1, tensor2)


def detach(input):
    """`input.detach()`."""
    return input.detach()

from ._windows import (  # noqa: E402
    bartlett_window,
    blackman_window,
    hamming_window,
    hann_window,
    kaiser_window,
)

# `FloatTensor`, `LongTensor`, ...: legacy constructors and dtype tests of old code.
globals().update(_legacy_types.TYPES)
# The deprecated per-device autocast settings (`set_autocast_ipu_enabled`, ...).
globals().update(_AUTOCAST_DEVICE_SPELLINGS)

# The core classes belong to the top-level namespace, as PyTorch's do: reprs and pickles
# name them `fusegrad.Tensor`, `fusegrad.dtype`, ...
for _cls in (Tensor, Size, device, dtype, finfo, iinfo):
    _cls.__module__ = "fusegrad"
del _cls

from . import _out  # noqa: E402

# Subpackages and names loaded on first use (PEP 562), as PyTorch's own lazy submodules:
# `import fusegrad` then costs the core only. `fusegrad.nn`, `from fusegrad import nn`,
# `import fusegrad.nn.functional` and unpickling all reach them through `__getattr__`
# or the ordinary import system.
_LAZY_MODULES = frozenset({
    "__future__", "_dynamo", "_inductor", "_logging", "_subclasses", "accelerator", "amp",
    "backends",
    "compiler", "cpu",
    "cuda", "func", "export",
    "datasets", "distributed", "distributions", "fft", "futures", "fx", "hub", "jit", "linalg",
    "models", "multiprocessing",
    "library", "nn", "onnx", "optim", "overrides", "profiler", "random", "serialization",
    "signal",
    "sparse", "special", "storage", "testing", "types", "viz", "ao", "quantization",
})
_LAZY_NAMES = {"autocast": "amp", "GradScaler": "amp", "compile": "compiler",
               "load": "serialization", "save": "serialization",
               "set_printoptions": "_printing", "vmap": "func", "UntypedStorage": "storage",
               "TypedStorage": "storage", "from_file": "storage"}
# PyTorch's legacy storage classes (`FloatStorage`, ...), made in `storage`.
_LAZY_NAMES.update(dict.fromkeys(
    [f"{_dtype_module.BY_NAME[d].legacy}Storage" for d in _dtype_module.LEGACY_STORAGE],
    "storage"))
# ATen's spellings of layers (`conv2d`, `dropout`, `lstm`, ...) are written in nn.
_LAZY_NAMES.update(dict.fromkeys(ops.surface.names_with(ops.surface.NN_SPELLING),
                                 "nn._aten_aliases"))
# `_foreach_*` (optimizers' and EMA code's list ops), built from their table on first use.
_LAZY_NAMES.update(dict.fromkeys(ops.foreach.names(), "_functions.foreach"))
# `segment_reduce`, its keyword-only signature checked beside its op.
_LAZY_NAMES["segment_reduce"] = "ops.segment"
# Quantized tensors: their constructors and quantization schemes (`per_tensor_affine`, ...).
_LAZY_NAMES.update(dict.fromkeys(
    ("quantize_per_tensor", "quantize_per_channel", "dequantize", "qscheme",
     "per_tensor_affine", "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
     "per_channel_affine_float_qparams"), "_quantized"))


def __getattr__(name: str):
    """Import a lazy subpackage (or the module defining a lazy name) on first access."""
    import importlib

    if name == "__all__":  # made on first use: `from fusegrad import *` loads every name
        public = [n for n, v in globals().items() if not isinstance(v, _ModuleType)]
        globals()["__all__"] = sorted(n for n in {*public, *_LAZY_NAMES} if n[0] != "_")
        return globals()["__all__"]
    if name in _LAZY_MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        if name == "cuda":  # `torch.cuda.amp` works without importing it, as in PyTorch
            importlib.import_module(f"{__name__}.cuda.amp")
        return module
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The namespace including the names not loaded yet."""
    return sorted(set(globals()) | _LAZY_MODULES | set(_LAZY_NAMES))


# Last, once the namespace is complete: each function taking `out` gets PyTorch's out=
# (the result written into it, `_out.write_out`); bernoulli and multinomial draw into it
# themselves.
with _CollectorPaused():
    _out.guard_namespace(globals(), "fusegrad", frozenset({"bernoulli", "multinomial"}))

    # Then every public function and Tensor method honours `__torch_function__` (subclasses
    # and tensor-likes); the configuration helpers PyTorch does not route stay as they are.
    from . import _C, _torch_function_wrappers  # noqa: F401

    _torch_function_wrappers.wrap_namespace(globals(), "torch",
                                            _torch_function_wrappers.TOP_LEVEL_NOT_ROUTED,
                                            _torch_function_wrappers.TOP_LEVEL_PYTHON)
    _torch_function_wrappers.wrap_tensor()
