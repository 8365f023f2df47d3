"""What the layers above dispatch (capture, fx, ONNX) know of a public name, read from one place.

A public name (a `fusegrad` function, a `Tensor` method or operator, a function of
`nn.functional` or `nn.init`) is the spelling of a registry op (its `OpDef.public`: `add_` is
`add_.Tensor`'s), another name of one (`spellings.ALIASES`: `arcsin`), or a composite,
written over ops or about state rather than one op: `matmul`, a factory (`zeros`), a question
about the session (`is_grad_enabled`), an in-place helper (`nn.init.zeros_`). Registry ops
carry their flags on their `OpDef`; composites carry theirs in `COMPOSITES`, the one table
of such names. `names_with(flag)` joins the two; `kind_of(name)` says which a name is.
`PROTOCOL` holds what `__torch_function__` needs to know of a name, op or composite alike
(which methods take no other tensor, which functions PyTorch writes in Python, which helpers
it does not route), read through `names_with` as the other flags are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .. import _creation
from . import call_arguments as _calls
from . import deferred
from . import foreach as _foreach
from .registry import REGISTRY
from .spellings import ALIASES, METHODS

# Makes a tensor from no tensor argument: capture records it as a graph node all the same.
FACTORY = "factory"
# A pure function of its (non-tensor) arguments: capture evaluates it while translating.
PURE = "pure"
# The result needs the tensor's values (a number, a NumPy array, a value-dependent shape):
# capture breaks the graph there.
DATA_DEPENDENT = "data_dependent"
# Writes into its first argument: capture notes the mutation and dead-code elimination keeps
# the node although nothing reads its result.
INPLACE = "inplace"
# Changes state outside its arguments (grad mode, raising on a value): never eliminated.
SIDE_EFFECT = "side_effect"
# Draws from a random generator (registry ops: `OpDef.random`): a trace of it is
# nondeterministic (jit.trace warns, as PyTorch's tracer).
RANDOM = "random"
# Answers about the Python object or the session itself (`is_tensor(proxy)` is False):
# fx calls it while tracing rather than recording it.
UNTRACED = "untraced"

# What the `__torch_function__` protocol needs to know of a public name (`PROTOCOL`, below).
# A Tensor method whose arguments other than self are never tensors (PyTorch's schemas):
# plain tensors keep Tensor's own function, with no check.
SELF_ONLY = "self_only"
# A Tensor method PyTorch writes in Python: handlers get its defaults by keyword.
PYTHON_METHOD = "python_method"
# A top-level function PyTorch writes in Python (`torch.functional`): its errors read "no
# implementation found" under that module's name.
PYTHON_FUNCTION = "python_function"
# A function of nn.functional PyTorch implements in C (the others are written in Python).
C_FUNCTIONAL = "c_functional"
# A top-level helper PyTorch does not route (configuration, seeding, predicates on objects).
NOT_ROUTED = "not_routed"

# Where a top-level name is written, when not in the public layer: ATen's spellings of layers
# (`torch.conv2d`, `torch.dropout(input, p, train)`, `torch.lstm`) are written in nn, over
# nn.functional (nn/_aten_aliases.py), and `fusegrad` loads them with nn
# on first use.
NN_SPELLING = "nn_spelling"

# A view of its first argument (`OpDef.view`): its meta gives eager's strides, so capture
# knows a view's layout wherever it knows its input's.
VIEW = "view"
# A view of its first argument or a row-major copy of it, decided by its strides (`reshape`):
# as a view's, its layout is known wherever its input's is.
VIEW_OR_COPY = "view_or_copy"
# A computed result eager's kernel lays out row-major whatever its operands' layout (the
# reductions, matrix products, softmax, layer norm, scans, top-k): capture knows its layout
# (`compiler/capture/layouts.py`; tests/test_compile_capture_gaps3.py checks it over input
# layouts and dims). Other ops' results follow their operands (`OpDef.result_order`) or are
# known only where their operands are row-major.
ROW_MAJOR = "row_major"
# A result eager's kernel lays out its own way even from row-major operands (geqrf's factor and
# ormqr's product are column-major, as LAPACK's): capture never knows its layout.
OWN_LAYOUT = "own_layout"

# A call whose result is new memory whatever its arguments (besides the factories): a write
# into it leaves the graph's inputs alone.
FRESH = "fresh"
# A call whose result may alias an argument other than its first, or memory made outside
# (`from_numpy`): its result is never new memory.
SHARES_MEMORY = "shares_memory"

_OP_FLAGS = (INPLACE, DATA_DEPENDENT, RANDOM, VIEW)  # the flags an OpDef carries as attributes

_F, _P, _D, _I, _S, _U, _R = FACTORY, PURE, DATA_DEPENDENT, INPLACE, SIDE_EFFECT, UNTRACED, \
    RANDOM

# Public functions written over registry ops, or about settings rather than tensors (matmul,
# reshape's relatives, the nn-style functions, the thread and printing settings).
_FUNCTIONS = """
adaptive_avg_pool1d adaptive_max_pool1d allclose are_deterministic_algorithms_enabled
argwhere asarray atleast_1d atleast_2d atleast_3d avg_pool1d batch_norm bilinear
broadcast_shapes broadcast_tensors broadcast_to cartesian_prod chain_matmul chunk column_stack
combinations contiguous conv1d conv2d conv_transpose1d conv_transpose2d corrcoef
cosine_embedding_loss cosine_similarity cov cumulative_trapezoid detach diag diagflat diff
dropout dsplit dstack einsum empty_strided equal feature_dropout flatten fliplr flipud
float_power from_numpy ger get_default_device get_float32_matmul_precision
get_num_interop_threads get_num_threads get_rng_state getitem group_norm
hinge_embedding_loss hsplit hstack initial_seed inner instance_norm inverse
is_anomaly_check_nan_enabled is_anomaly_enabled is_complex
is_deterministic_algorithms_warn_only_enabled is_inference_mode_enabled is_nonzero is_same_size
is_signed isreal kl_div kron layer_norm logdet logspace manual_seed margin_ranking_loss matmul
matrix_power max_pool1d max_pool2d meshgrid moveaxis movedim msort nanmean nanquantile narrow
outer pairwise_distance pinverse poisson_nll_loss qr quantile randint_like ravel
solve symeig matrix_rank
repeat_interleave rms_norm row_stack scalar_tensor seed selu set_default_device
set_default_dtype set_float32_matmul_precision set_num_interop_threads set_num_threads
set_printoptions set_rng_state setitem sparse_coo_tensor split_with_sizes spmm square
take_along_dim tensor_split
tensordot tile trapezoid trapz tril_indices triplet_margin_loss triu_indices unflatten
unravel_index use_deterministic_algorithms vsplit vstack
alpha_dropout feature_alpha_dropout conv3d conv_transpose3d max_pool3d
real imag resolve_conj resolve_neg
autocast_decrement_nesting autocast_increment_nesting clear_autocast_cache
get_autocast_cpu_dtype get_autocast_dtype get_autocast_gpu_dtype is_autocast_cache_enabled
is_autocast_cpu_enabled is_autocast_enabled set_autocast_cache_enabled set_autocast_cpu_dtype
set_autocast_cpu_enabled set_autocast_dtype set_autocast_enabled set_autocast_gpu_dtype
is_autocast_ipu_enabled set_autocast_ipu_enabled get_autocast_ipu_dtype set_autocast_ipu_dtype
is_autocast_xla_enabled set_autocast_xla_enabled get_autocast_xla_dtype set_autocast_xla_dtype
typename set_warn_always is_warn_always_enabled set_deterministic_debug_mode
get_deterministic_debug_mode set_flush_denormal set_default_tensor_type get_device is_storage
is_inference set_anomaly_enabled positive fill vander mvlgamma frobenius_norm nuclear_norm
max_pool1d_with_indices nonzero_static frombuffer rnn_tanh_cell rnn_relu_cell lstm_cell gru_cell
lstm gru rnn_tanh rnn_relu grid_sampler conv_tbc adjoint
as_strided_scatter index_reduce norm_except_dim _weight_norm range cond while_loop gradient
histogramdd
vmap from_dlpack to_dlpack svd_lowrank pca_lowrank fork wait classproperty get_file_path
sym_int sym_float sym_max sym_min sym_not sym_ite sym_sqrt sym_sum
stft istft
""".split()
# Tensor methods that are no registry op: conversions, sizes and autograd entry points Tensor
# defines itself, methods over several overloads, fixed answers (`is_cuda`), the `new_*`
# factories, and the Python protocols.
_METHODS = """
__pos__ __pow__ __rfloordiv__ __matmul__ __rmatmul__ __rmod__ __rpow__ __rtruediv__ __invert__
bfloat16 __reversed__ bool byte char
cpu cuda data_ptr dim double element_size expand_as float get_device half int is_coalesced
is_conj is_contiguous is_cpu is_distributed is_inference is_ipu is_maia is_meta is_mkldnn is_mps
is_mtia is_neg is_nested is_pinned pin_memory is_quantized is_set_to is_shared share_memory_
is_sparse is_sparse_csr is_vulkan is_xla is_xpu itemsize long coalesce dense_dim indices sparse_dim
to_dense to_sparse values nbytes ndimension nelement new new_empty new_full new_ones
to_sparse_csr to_sparse_coo crow_indices col_indices
new_tensor new_zeros register_post_accumulate_grad_hook reshape_as short size storage_offset
stride to type type_as untyped_storage storage storage_type set_ view_as __array_wrap__
__complex__ __deepcopy__
dequantize q_scale q_zero_point q_per_channel_scales q_per_channel_zero_points
q_per_channel_axis int_repr qscheme
sum_to_size new_empty_strided resize resize_as dim_order const_data_ptr module_load
__rlshift__ __rrshift__
__contains__ __format__ __hash__ __init__ __iter__ __len__ __reduce_ex__ __repr__ __str__
resolve_conj resolve_neg cfloat cdouble __dlpack__ __dlpack_device__
""".split()

# Tensor methods that are spellings of others, named by the protocol: the methods PyTorch's
# operators report (`+x` is `positive`, `1 / x` is `__rdiv__`), and the subclass conversion.
_REPORTED_METHODS = "__rdiv__ as_subclass positive".split()

# Public names that are no registry op, with their flags: the one table of composites.
COMPOSITES: dict[str, frozenset[str]] = {
    **{name: frozenset() for name in (*_FUNCTIONS, *_METHODS)},
    **{name: frozenset() for name in _REPORTED_METHODS},
    **{name: frozenset(flags) for name, flags in {
    # factories (fusegrad._creation, fusegrad._random)
    "zeros": {_F}, "ones": {_F}, "full": {_F}, "empty": {_F}, "arange": {_F},
    "linspace": {_F}, "eye": {_F}, "tensor": {_F}, "as_tensor": {_F}, "rand": {_F, _R},
    "randn": {_F, _R}, "randint": {_F, _R}, "randperm": {_F, _R}, "normal": {_F, _R},
    "zeros_like": {_F}, "ones_like": {_F}, "full_like": {_F}, "empty_like": {_F},
    "rand_like": {_F, _R}, "randn_like": {_F, _R}, "randint_like": {_R},
    "empty_permuted": {_F}, "hann_window": {_F}, "hamming_window": {_F},
    "blackman_window": {_F}, "bartlett_window": {_F}, "kaiser_window": {_F},
    "triu_indices": {_F}, "tril_indices": {_F},
    # questions answered from metadata, dtypes or the session
    "is_grad_enabled": {_P, _U}, "is_tensor": {_P, _U}, "get_default_dtype": {_P},
    "promote_types": {_P}, "result_type": {_P}, "can_cast": {_P}, "is_floating_point": {_P},
    "numel": {_P},
    # Tensor methods and protocols that read the values
    "item": {_D}, "tolist": {_D}, "numpy": {_D}, "__bool__": {_D}, "__int__": {_D},
    "__float__": {_D}, "__index__": {_D}, "__array__": {_D}, "backward": {_D},
    "register_hook": {_D}, "retain_grad": {_D},
    # in-place composites: aliases and helpers over registry ops
    "arctan2_": {_I}, "clip_": {_I}, "fix_": {_I}, "square_": {_I}, "float_power_": {_I},
    "tril_": {_I}, "triu_": {_I}, "swapaxes_": {_I}, "swapdims_": {_I},
    "resize_": {_I}, "resize_as_": {_I}, "set_": {_I}, "detach_": {_I}, "requires_grad_": {_I},
    "share_memory_": {_I, _S},  # moves the data (a side effect to capture: a graph break)
    "dropout_": {_I}, "selu_": {_I}, "rrelu_": {_I, _R}, "alpha_dropout_": {_I},
    "feature_alpha_dropout_": {_I},
    **{name: {_I} for name in (
        "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "absolute_",
        "negative_", "greater_", "greater_equal_", "less_", "less_equal_", "not_equal_",
        "multiply_", "divide_", "true_divide_", "subtract_", "fill_diagonal_",
        "apply_", "map_", "map2_", "mvlgamma_", "index_reduce_",
        "feature_dropout_")},
    # nn.init and nn.utils write into the tensors they are given
    "constant_": {_I}, "zeros_": {_I}, "ones_": {_I}, "eye_": {_I}, "orthogonal_": {_I},
    "xavier_uniform_": {_I}, "xavier_normal_": {_I}, "kaiming_uniform_": {_I},
    "kaiming_normal_": {_I}, "trunc_normal_": {_I}, "clip_grad_norm_": {_I},
    "clip_grad_value_": {_I}, "clip_grads_with_norm_": {_I}, "dirac_": {_I}, "sparse_": {_I},
    # nn.functional's dropouts (random while training)
    "dropout": {_R}, "alpha_dropout": {_R}, "feature_alpha_dropout": {_R}, "dropout1d": {_R},
    "dropout2d": {_R}, "dropout3d": {_R}, "gumbel_softmax": {_R},
    # graph targets capture itself records: a grad-mode switch, an assertion on a value
    "set_grad_enabled": {_S}, "_assert_async": {_S},
    }.items()},
    # PyTorch's `_foreach_*` functions (ops/foreach.py), loops over registry ops; the in-place
    # ones write into the tensors of their first argument.
    **{name: frozenset({_I} if name.endswith("_") else ()) for name in _foreach.names()},
}

# The protocol's facts, flag -> public names (registry ops and composites alike; PyTorch's
# schemas and sources are the reference).
PROTOCOL: dict[str, frozenset[str]] = {flag: frozenset(names.split()) for flag, names in {
    SELF_ONLY: """
abs abs_ absolute acos acos_ acosh acosh_ all amax amin any arccos arccosh arcsin arcsinh
arctan arctanh argmax argmin argsort argwhere as_strided asin asin_ asinh asinh_ atan atan_
atanh atanh_ bitwise_not bitwise_not_ broadcast_to cauchy_ ceil ceil_ cholesky
cholesky_inverse chunk clone contiguous corrcoef cos cos_ cosh cosh_ count_nonzero cpu cuda
cummax cummin cumprod cumsum cumsum_ deg2rad deg2rad_ det detach detach_ diag diag_embed
diagflat diagonal digamma digamma_ dim dsplit element_size erf erf_ erfc erfc_ erfinv
erfinv_ exp exp2 exp2_ exp_ expand expm1 expm1_ exponential_ fix fix_ flatten flip fliplr
flipud floor floor_ frac frac_ geometric_ get_device histc hsplit i0 i0_ inverse
is_coalesced is_complex is_conj is_contiguous is_distributed is_floating_point is_inference
is_neg is_nonzero is_pinned is_signed isfinite isinf isnan isneginf isposinf isreal item
kthvalue lgamma lgamma_ log log10 log10_ log1p log1p_ log2 log2_ log_ log_normal_
log_softmax logcumsumexp logdet logical_not logical_not_ logit logit_ logsumexp matrix_exp
matrix_power mean median mode moveaxis movedim msort multinomial nan_to_num nan_to_num_
nanmean nanmedian nansum narrow_copy neg neg_ negative new_empty new_full new_ones new_zeros
nonzero norm normal_ numel permute pinverse polygamma_ positive prod rad2deg rad2deg_
random_ ravel reciprocal reciprocal_ relu relu_ renorm renorm_ repeat requires_grad_
reshape resize_ retain_grad roll rot90 round round_ rsqrt rsqrt_ select sgn sgn_ sigmoid
sigmoid_ sign sign_ signbit sin sin_ sinc sinc_ sinh sinh_ size slice softmax sort split
split_with_sizes sqrt sqrt_ square square_ squeeze squeeze_ std storage_offset stride sum
swapaxes swapaxes_ swapdims swapdims_ t t_ tan tan_ tanh tanh_ tile topk transpose
transpose_ tril tril_ triu triu_ trunc trunc_ unbind unflatten unfold uniform_
unique_consecutive unsafe_chunk unsafe_split unsqueeze unsqueeze_ var view vsplit zero_
bfloat16 bool byte char double float half int long short data_ptr ndimension nelement
numpy tolist type is_shared register_hook register_post_accumulate_grad_hook unique
__neg__ __abs__ __invert__ __pos__ __len__ __bool__ __float__ __int__ __index__ __complex__
__repr__ __format__ __array__ __deepcopy__ __reduce_ex__""",
    PYTHON_METHOD: """
__repr__ __format__ __len__ __deepcopy__ __reduce_ex__ __array__ __reversed__ split backward
norm unique
unique_consecutive lu unflatten register_hook register_post_accumulate_grad_hook is_shared
stft istft""",
    PYTHON_FUNCTION: """
atleast_1d atleast_2d atleast_3d block_diag broadcast_tensors cartesian_prod cdist
chain_matmul einsum lu meshgrid norm split stft tensordot unique unique_consecutive
unravel_index""",
    C_FUNCTIONAL: """
adaptive_avg_pool1d avg_pool1d avg_pool2d avg_pool3d bilinear celu_ channel_shuffle conv1d
conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d cosine_similarity
elu_ gelu hardshrink hardtanh_ leaky_relu_ linear logsigmoid native_channel_shuffle one_hot
pairwise_distance pdist pixel_shuffle pixel_unshuffle prelu relu_ rrelu_
scaled_dot_product_attention selu_ softplus softshrink threshold_""",
    NOT_ROUTED: """
is_tensor is_storage manual_seed seed initial_seed get_rng_state set_rng_state
get_default_dtype set_default_dtype set_default_device broadcast_shapes is_grad_enabled
is_inference_mode_enabled is_anomaly_enabled is_anomaly_check_nan_enabled set_printoptions
from_numpy use_deterministic_algorithms are_deterministic_algorithms_enabled
is_deterministic_algorithms_warn_only_enabled set_num_threads get_num_threads
set_num_interop_threads get_num_interop_threads set_float32_matmul_precision
get_float32_matmul_precision compile load save vmap""",
}.items()}

# Where names are written, flag -> public names (as PROTOCOL).
PLACES: dict[str, frozenset[str]] = {NN_SPELLING: frozenset("""
adaptive_avg_pool1d adaptive_max_pool1d affine_grid_generator alpha_dropout alpha_dropout_
avg_pool1d batch_norm bilinear binary_cross_entropy_with_logits celu celu_ channel_shuffle
constant_pad_nd conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d
conv_transpose3d cosine_embedding_loss cosine_similarity ctc_loss dropout dropout_ embedding
embedding_bag embedding_renorm_ feature_alpha_dropout feature_alpha_dropout_ feature_dropout
feature_dropout_ grid_sampler grid_sampler_2d grid_sampler_3d group_norm gru gru_cell
hinge_embedding_loss
instance_norm kl_div layer_norm lstm lstm_cell margin_ranking_loss max_pool1d
max_pool1d_with_indices max_pool2d max_pool3d native_channel_shuffle pairwise_distance
pixel_shuffle pixel_unshuffle poisson_nll_loss rms_norm rnn_relu rnn_relu_cell rnn_tanh
rnn_tanh_cell rrelu rrelu_ selu_ threshold threshold_ triplet_margin_loss""".split())}

# The events PyTorch's profiler shows for a composite public function, outermost first
# (`F.linear` is `aten::linear`, around the `aten::t` and `aten::addmm` its body runs), by
# the namespace that spells it: the profiler opens them around the call.
PROFILED_AS: dict[str, dict[str, tuple[str, ...]]] = {
    "torch.nn.functional": {
        "linear": ("aten::linear",), "conv1d": ("aten::conv1d",),
        "conv2d": ("aten::conv2d",), "conv3d": ("aten::conv3d",),
        "conv_transpose1d": ("aten::conv_transpose1d",),
        "conv_transpose2d": ("aten::conv_transpose2d",),
        "conv_transpose3d": ("aten::conv_transpose3d",),
        "batch_norm": ("aten::batch_norm", "aten::_batch_norm_impl_index"),
        "instance_norm": ("aten::instance_norm",), "layer_norm": ("aten::layer_norm",),
        "group_norm": ("aten::group_norm",), "softmax": ("aten::softmax",),
        "log_softmax": ("aten::log_softmax",), "dropout": ("aten::dropout",),
        "cross_entropy": ("aten::cross_entropy_loss",), "nll_loss": ("aten::nll_loss_nd",),
        "max_pool1d": ("aten::max_pool1d",), "max_pool2d": ("aten::max_pool2d",),
        "max_pool3d": ("aten::max_pool3d",), "embedding": ("aten::embedding",),
    },
    "torch": {
        "matmul": ("aten::matmul",), "flatten": ("aten::flatten",),
        "reshape": ("aten::reshape",), "softmax": ("aten::softmax",),
        "log_softmax": ("aten::log_softmax",), "dropout": ("aten::dropout",),
    },
    "torch.Tensor": {
        "matmul": ("aten::matmul",), "__matmul__": ("aten::matmul",),
        "__rmatmul__": ("aten::matmul",), "flatten": ("aten::flatten",),
        "reshape": ("aten::reshape",), "softmax": ("aten::softmax",),
        "log_softmax": ("aten::log_softmax",), "to": ("aten::to",),
    },
}


# The profiler's events of the factories (`profiler/_composites.py`): fusegrad builds their
# tensors without registry ops, so nothing would show a call. PyTorch shows each as an event
# of its own (`aten::zeros` around its `aten::empty` and `aten::zero_`); the outer event is
# the call's. A chain of single nested events is spelled out (`aten::empty_like` runs only
# `aten::empty_strided`).
PROFILED_FACTORIES: dict[str, dict[str, tuple[str, ...]]] = {
    "torch": {
        "ones": ("aten::ones",), "zeros": ("aten::zeros",), "empty": ("aten::empty",),
        "full": ("aten::full",), "rand": ("aten::rand",), "randn": ("aten::randn",),
        "randint": ("aten::randint",), "randperm": ("aten::randperm",),
        "normal": ("aten::normal",), "arange": ("aten::arange",), "eye": ("aten::eye",),
        "linspace": ("aten::linspace",), "logspace": ("aten::logspace",),
        "scalar_tensor": ("aten::scalar_tensor",),
        "ones_like": ("aten::ones_like",), "zeros_like": ("aten::zeros_like",),
        "full_like": ("aten::full_like",), "rand_like": ("aten::rand_like",),
        "randn_like": ("aten::randn_like",), "randint_like": ("aten::randint_like",),
        "empty_like": ("aten::empty_like", "aten::empty_strided"),
    },
    "torch.Tensor": {
        "new_zeros": ("aten::new_zeros",), "new_ones": ("aten::new_ones",),
        "new_full": ("aten::new_full",), "new_empty": ("aten::new_empty", "aten::empty"),
    },
}


class AtenCall(NamedTuple):
    """The ATen calls PyTorch's traced graphs (make_fx, export) record for a composite,
    where no registry op stands for the call (`ops/call_handles.py` makes their handles,
    `ops/call_arguments.py` reads and writes their arguments)."""

    # the overload names: `fusegrad.ops.aten.<name>.<overload>` for each
    overloads: tuple[str, ...]
    # make_fx: how the public factory's frame reads as one of the calls (`traced_call`)
    read: Callable | None = None
    # export: how a call of the layer's functional reads as one, kept whole (`export`)
    write: Callable | None = None
    # what a handle runs, where it is not the public function of the composite's name
    run: Callable | None = None


# Composites by name -> their ATen calls.
ATEN_CALLS: dict[str, AtenCall] = {
    # factories: make_fx records the program's call (`aten.zeros.default([3], ...)`)
    "zeros": AtenCall(("default",), _calls.read_sized("zeros.default")),
    "ones": AtenCall(("default",), _calls.read_sized("ones.default")),
    "empty": AtenCall(("memory_format",), _calls.read_empty),
    "full": AtenCall(("default",), _calls.read_full),
    "arange": AtenCall(("default", "start", "start_step"), _calls.read_arange),
    "eye": AtenCall(("default", "m"), _calls.read_eye),
    "rand": AtenCall(("default",), _calls.read_random("rand.default")),
    "randn": AtenCall(("default",), _calls.read_random("randn.default")),
    "randint": AtenCall(("default", "low"), _calls.read_randint),
    "randperm": AtenCall(("default",), _calls.read_randperm),
    "zeros_like": AtenCall(("default",), _calls.read_like),
    "ones_like": AtenCall(("default",)),  # (made through zeros_like's code: its reader)
    "empty_like": AtenCall(("default",)),
    "full_like": AtenCall(("default",), _calls.read_full_like),
    "rand_like": AtenCall(("default",), _calls.read_random_like("rand_like.default")),
    "randn_like": AtenCall(("default",), _calls.read_random_like("randn_like.default")),
    "new_zeros": AtenCall(("default",), _calls.read_new),
    "new_ones": AtenCall(("default",)),  # (new_zeros' code: its reader)
    "new_empty": AtenCall(("default",)),
    "new_full": AtenCall(("default",), _calls.read_new_full),
    "scalar_tensor": AtenCall(("default",)),
    "tensor": AtenCall((), _calls.read_literal),
    "as_tensor": AtenCall((), _calls.read_literal),
    "new_tensor": AtenCall((), _calls.read_literal),
    # (a tensor literal's constant, copied so each run makes a tensor of its own)
    "lift_fresh_copy": AtenCall(("default",), _calls.read_literal,
                                run=_creation.lift_fresh_copy),
    # (an alias without history, made outside dispatch: `detach()`, `.data`)
    "detach": AtenCall(("default",)),
    # layers export keeps whole (`aten.linear.default(x, p_fc_weight, p_fc_bias)`)
    "linear": AtenCall(("default",), write=_calls.write_linear),
    "conv1d": AtenCall(("default",), write=_calls.write_conv(1)),
    "conv2d": AtenCall(("default",), write=_calls.write_conv(2)),
    "conv3d": AtenCall(("default",), write=_calls.write_conv(3)),
    "layer_norm": AtenCall(("default",), write=_calls.write_layer_norm),
    "dropout": AtenCall(("default",), write=_calls.write_dropout),
    "batch_norm": AtenCall(("default",), write=_calls.write_batch_norm),
}


# How PyTorch reports a non-tensor first argument (or target) of the nn.functional
# functions it writes in Python (the protocol's errors, `_torch_function_wrappers.
# argument_error`). Most hand it to a C function of their own name first, whose argument
# parser refuses it (`relu(): argument 'input' (position 1) must be Tensor, not list`);
# these hand it to one of another name, the first argument as its `input` (position 1) and
# a target as its `target` (position 2) unless `ours=theirs:position` says otherwise ...
FUNCTIONAL_PARSER_NAMES: dict[str, str] = {
    "cross_entropy": "cross_entropy_loss", "nll_loss": "nll_loss_nd", "fold": "col2im",
    "unfold": "im2col", "grid_sample": "grid_sampler", "logsigmoid": "log_sigmoid",
    "multilabel_soft_margin_loss": "log_sigmoid", "gumbel_softmax": "empty_like",
    "adaptive_max_pool1d_with_indices": "adaptive_max_pool1d",
    "embedding": "embedding input=indices:2 weight=weight:1",
    "bilinear": "bilinear input1=input1:1",
    "cosine_embedding_loss": "cosine_embedding_loss input1=input1:1",
    "triplet_margin_loss": "triplet_margin_loss anchor=anchor:1",
}
# ... and these read an attribute of it first (Python's AttributeError).
FUNCTIONAL_INPUT_ATTRIBUTES: dict[str, str] = {
    "adaptive_avg_pool2d": "size", "adaptive_avg_pool3d": "size", "adaptive_max_pool2d": "size",
    "adaptive_max_pool3d": "size", "adaptive_max_pool2d_with_indices": "size",
    "adaptive_max_pool3d_with_indices": "size", "affine_grid": "is_floating_point",
    "binary_cross_entropy": "size", "binary_cross_entropy_with_logits": "size",
    "dropout1d": "dim", "dropout2d": "dim", "dropout3d": "dim", "embedding_bag": "dim",
    "gaussian_nll_loss": "size", "glu": "dim", "group_norm": "dim", "huber_loss": "size",
    "instance_norm": "size", "interpolate": "dim", "l1_loss": "size",
    "local_response_norm": "dim", "lp_pool1d": "pow", "lp_pool2d": "pow",
    "lp_pool3d": "pow", "margin_ranking_loss": "dim", "max_pool3d_with_indices": "is_cuda",
    "max_unpool1d": "size", "max_unpool2d": "size", "max_unpool3d": "size", "mse_loss": "size",
    "multi_head_attention_forward": "dim", "normalize": "norm", "sigmoid": "sigmoid",
    "smooth_l1_loss": "size", "softsign": "abs",
    "tanh": "tanh", "tanhshrink": "tanh", "triplet_margin_with_distance_loss": "ndim",
    "upsample": "dim", "upsample_bilinear": "dim", "upsample_nearest": "dim",
}
# (fractional max pooling checks its sizes before its input, the softmaxes read another
# attribute by their `dim`, ctc_loss's C function has overloads: fusegrad's error stands.)
FUNCTIONAL_OWN_ERRORS = frozenset({"fractional_max_pool2d", "fractional_max_pool3d",
                                   "fractional_max_pool2d_with_indices",
                                   "fractional_max_pool3d_with_indices", "ctc_loss",
                                   "softmax", "softmin", "log_softmax"})

# Public names by layout fact (composites and spellings of registry ops alike).
# What TorchScript's schemas say a public name's call returns, where it is no Tensor (read by
# `jit/_types.py`): a bool, an int, a list of tensors, or a pair of tensors ("Tuple[Tensor,
# Tensor] with a dim": a pair only when given more than the tensor, `max(x, 0)`).
_PAIR_WITH_DIM = "Tuple[Tensor, Tensor] with a dim"
SCRIPT_RESULTS: dict[str, str] = {
    **dict.fromkeys(("is_floating_point", "is_contiguous", "is_complex", "equal", "allclose",
                     "is_tensor", "is_nonzero", "is_same_size", "is_signed"), "bool"),
    **dict.fromkeys(("dim", "numel", "ndimension", "nelement", "element_size", "get_device"),
                    "int"),
    **dict.fromkeys(("split", "chunk", "unbind", "tensor_split", "split_with_sizes", "hsplit",
                     "vsplit", "dsplit", "meshgrid", "broadcast_tensors"), "List[Tensor]"),
    **dict.fromkeys(("sort", "std_mean", "var_mean", "aminmax", "slogdet", "frexp"),
                    "Tuple[Tensor, Tensor]"),
    **dict.fromkeys(("max", "min", "topk", "kthvalue", "median", "mode", "cummax", "cummin"),
                    _PAIR_WITH_DIM),
}

# Public names by memory fact (composites and registry ops alike), for capture's writes.
MEMORY: dict[str, frozenset[str]] = {
    FRESH: frozenset(("clone", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor")),
    SHARES_MEMORY: frozenset(("as_tensor", "asarray", "from_numpy", "set_", "frombuffer")),
}

LAYOUTS: dict[str, frozenset[str]] = {VIEW_OR_COPY: frozenset("""
reshape reshape_as view_as flatten unflatten ravel movedim moveaxis swapaxes swapdims narrow
expand_as""".split()), ROW_MAJOR: frozenset("""
mm bmm addmm baddbmm dot mv sum nansum mean prod amax amin max min argmax argmin all any
logsumexp norm linalg_vector_norm var std var_mean std_mean softmax log_softmax
native_layer_norm cumsum cumprod logcumsumexp topk embedding masked_fill""".split()),
    OWN_LAYOUT: frozenset(["geqrf", "ormqr"])}

_CACHE: dict[str, tuple[int, frozenset[str]]] = {}


def names_with(flag: str) -> frozenset[str]:
    """The public names flagged `flag`: registry ops' spellings and composites."""
    hit = _CACHE.get(flag)
    # A flag no op carries is the tables' alone; an op flag's names are recomputed when an
    # op is registered later (asking the registry's size runs the deferred op modules).
    size = len(REGISTRY) if flag in _OP_FLAGS else 0
    if hit is not None and hit[0] == size:
        return hit[1]
    names = {name for name, flags in COMPOSITES.items() if flag in flags}
    names.update(PROTOCOL.get(flag, ()))
    names.update(PLACES.get(flag, ()))
    names.update(LAYOUTS.get(flag, ()))
    names.update(MEMORY.get(flag, ()))
    if flag in _OP_FLAGS:
        names.update(op.public for op in REGISTRY.values() if getattr(op, flag))
    found = frozenset(names)
    _CACHE[flag] = (size, found)
    return found


def has_flag(name: str, flag: str) -> bool:
    """Whether public name `name` is flagged `flag`."""
    return name in names_with(flag)


def kind_of(name: str) -> str | None:
    """"op" for a registry op's public spelling or one of its aliases, "composite" for a name
    of `COMPOSITES`, None for a name the surface does not know."""
    if name in ALIASES or any(op.public == name for op in REGISTRY.values()):
        return "op"
    return "composite" if name in COMPOSITES else None


# The loaded ops by public spelling, for `tensors_only`: (registry size when made, every
# public spelling, those with tensor-only operands -> their names).
_PUBLICS: list = [-1, frozenset(), {}]
# Method forms made from registry ops: the op names they give are the method's ops.
_OP_FORMS = frozenset({"inplace", "inplace_args", "operator", "compare", "binary_inplace",
                       "tensors_inplace", "scalar_as_tensor"})


def _loaded_publics() -> list:
    """`_PUBLICS`, remade when ops were registered since (a deferred module ran): read
    without running any deferred module."""
    size = dict.__len__(REGISTRY)
    if _PUBLICS[0] != size:
        ops = list(dict.values(REGISTRY))
        _PUBLICS[:] = [size, frozenset(op.public for op in ops),
                       {op.public: op.tensors_only for op in ops if op.tensors_only}]
    return _PUBLICS


# The operands composites take as tensors only, as `OpDef.tensors_only` declares an op's
# (PyTorch's parser refuses a number there: `torch.outer(x, 2.0)`).
COMPOSITE_TENSORS_ONLY: dict[str, tuple[str, ...]] = {
    "allclose": ("input", "other"), "equal": ("input", "other"), "outer": ("input", "vec2"),
    "ger": ("input", "vec2"), "kron": ("input", "other"), "inner": ("input", "other"),
    "matmul": ("input", "other"),
}


def tensors_only(name: str, method: bool = False, load: bool = True) -> tuple[str, ...] | None:
    """The operands public name `name` (a top-level function, or with `method` a Tensor
    method) takes as tensors only, by PyTorch's parameter names: its op's
    `OpDef.tensors_only` (an alias's is its op's); () for any other name. An op of a module
    that has not run yet (`ops/deferred.py`) is found by running the deferred modules in
    turn until one has registered it, as the registry finds an op by name (with `load`;
    without, the answer for such a name is None)."""
    if method:
        form, *what = METHODS.get(name, ("method",))
        if form == "function":
            name = what[0]
        elif form in _OP_FORMS:  # (the in-place forms name their ops: `arctan2_`'s atan2_)
            ops = [dict.get(REGISTRY, op) or (REGISTRY.get(op) if load else None)
                   for op in what]
            publics = {op.public for op in ops if op is not None}
            name = publics.pop() if len(publics) == 1 else name
    name = ALIASES.get(name, name)
    found = _loaded_publics()
    if name not in found[1] and name not in COMPOSITES:
        if not load:
            return None
        if deferred.load_until(lambda: name in _loaded_publics()[1]):
            found = _loaded_publics()
    return found[2].get(name, ()) or COMPOSITE_TENSORS_ONLY.get(name, ())
