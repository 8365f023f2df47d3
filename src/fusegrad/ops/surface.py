"""What the layers above dispatch (capture, fx, ONNX) know of a public name, read from one place.

A public name (a `fusegrad` function, a `Tensor` method or operator, a function of
`nn.functional` or `nn.init`) is the spelling of a registry op (its `OpDef.public`: `add_` is
`add_.Tensor`'s), another name of one (`spellings.ALIASES`: `arcsin`), or a composite,
written over ops or about state rather than one op: `matmul`, a factory (`zeros`), a question
about the session (`is_grad_enabled`), an in-place helper (`nn.init.zeros_`). Registry ops
carry their flags on their `OpDef`; composites carry theirs in `COMPOSITES`, the one table
of such names. `names_with(flag)` joins the two; `kind_of(name)` says which a name is.
"""

from __future__ import annotations

from .registry import REGISTRY
from .spellings import ALIASES

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
# Answers about the Python object or the session itself (`is_tensor(proxy)` is False):
# fx calls it while tracing rather than recording it.
UNTRACED = "untraced"

_OP_FLAGS = (INPLACE, DATA_DEPENDENT)  # the flags an OpDef carries as attributes

_F, _P, _D, _I, _S, _U = FACTORY, PURE, DATA_DEPENDENT, INPLACE, SIDE_EFFECT, UNTRACED

# Public functions written over registry ops, or about settings rather than tensors (matmul,
# reshape's relatives, the nn-style functions, the thread and printing settings).
_FUNCTIONS = """
adaptive_avg_pool1d adaptive_max_pool1d addmv allclose are_deterministic_algorithms_enabled
argwhere asarray atleast_1d atleast_2d atleast_3d avg_pool1d batch_norm bilinear
broadcast_shapes broadcast_tensors broadcast_to cartesian_prod chain_matmul chunk column_stack
combinations contiguous conv1d conv2d conv_transpose1d conv_transpose2d corrcoef
cosine_embedding_loss cosine_similarity cov cumulative_trapezoid detach diag diagflat diff
dropout dsplit dstack einsum empty_strided equal feature_dropout flatten fliplr flipud
float_power from_numpy ger get_default_device get_float32_matmul_precision
get_num_interop_threads get_num_threads get_printoptions get_rng_state getitem group_norm
hinge_embedding_loss hsplit hstack initial_seed inner instance_norm inverse
is_anomaly_check_nan_enabled is_anomaly_enabled is_complex
is_deterministic_algorithms_warn_only_enabled is_inference_mode_enabled is_nonzero is_same_size
is_signed isreal kl_div kron layer_norm logdet logspace manual_seed margin_ranking_loss matmul
matrix_power max_pool1d max_pool2d meshgrid moveaxis movedim msort nanmean nanquantile narrow
outer pairwise_distance pinverse poisson_nll_loss qr quantile randint_like ravel
repeat_interleave rms_norm row_stack scalar_tensor seed selu set_default_device
set_default_dtype set_float32_matmul_precision set_num_interop_threads set_num_threads
set_printoptions set_rng_state setitem split_with_sizes square take_along_dim tensor_split
tensordot tile trace trapezoid trapz tril_indices triplet_margin_loss triu_indices unflatten
unravel_index use_deterministic_algorithms vsplit vstack
autocast_decrement_nesting autocast_increment_nesting clear_autocast_cache
get_autocast_cpu_dtype get_autocast_dtype get_autocast_gpu_dtype is_autocast_cache_enabled
is_autocast_cpu_enabled is_autocast_enabled set_autocast_cache_enabled set_autocast_cpu_dtype
set_autocast_cpu_enabled set_autocast_dtype set_autocast_enabled set_autocast_gpu_dtype
is_autocast_ipu_enabled set_autocast_ipu_enabled get_autocast_ipu_dtype set_autocast_ipu_dtype
is_autocast_xla_enabled set_autocast_xla_enabled get_autocast_xla_dtype set_autocast_xla_dtype
detach_copy typename set_warn_always is_warn_always_enabled set_deterministic_debug_mode
get_deterministic_debug_mode set_flush_denormal set_default_tensor_type get_device is_storage
is_inference set_anomaly_enabled positive fill vander mvlgamma frobenius_norm nuclear_norm
max_pool1d_with_indices nonzero_static frombuffer rnn_tanh_cell rnn_relu_cell lstm_cell gru_cell
lstm gru rnn_tanh rnn_relu grid_sampler grid_sampler_2d affine_grid_generator conv_tbc adjoint
as_strided_scatter index_reduce norm_except_dim range cond while_loop gradient histogramdd
vmap from_dlpack to_dlpack binomial svd_lowrank pca_lowrank fork wait classproperty get_file_path
""".split()
# Tensor methods that are no registry op: conversions, sizes and autograd entry points Tensor
# defines itself, methods over several overloads, fixed answers (`is_cuda`), the `new_*`
# factories, and the Python protocols.
_METHODS = """
__pos__ __pow__ __rfloordiv__ __rmatmul__ __rmod__ __rpow__ __rtruediv__ bfloat16 bool byte char
cpu cuda data_ptr dim double element_size expand_as float get_device half int is_coalesced
is_conj is_contiguous is_cpu is_distributed is_inference is_ipu is_maia is_meta is_mkldnn is_mps
is_mtia is_neg is_nested is_pinned is_quantized is_set_to is_shared is_sparse is_sparse_csr
is_vulkan is_xla is_xpu itemsize long nbytes ndimension nelement new new_empty new_full new_ones
new_tensor new_zeros register_post_accumulate_grad_hook reshape_as short size storage_offset
stride to type type_as untyped_storage view_as __array_wrap__ __complex__ __deepcopy__
sum_to_size new_empty_strided resize resize_as dim_order const_data_ptr module_load
__rlshift__ __rrshift__
__format__ __hash__ __init__ __iter__ __len__ __reduce_ex__ __repr__ __str__
""".split()

# Public names that are no registry op, with their flags: the one table of composites.
COMPOSITES: dict[str, frozenset[str]] = {
    **{name: frozenset() for name in (*_FUNCTIONS, *_METHODS)},
    **{name: frozenset(flags) for name, flags in {
    # factories (fusegrad._creation, fusegrad._random)
    "zeros": {_F}, "ones": {_F}, "full": {_F}, "empty": {_F}, "arange": {_F},
    "linspace": {_F}, "eye": {_F}, "tensor": {_F}, "as_tensor": {_F}, "rand": {_F},
    "randn": {_F}, "randint": {_F}, "randperm": {_F}, "normal": {_F}, "zeros_like": {_F},
    "ones_like": {_F}, "full_like": {_F}, "empty_like": {_F}, "rand_like": {_F},
    "randn_like": {_F}, "empty_permuted": {_F}, "hann_window": {_F}, "hamming_window": {_F},
    "blackman_window": {_F}, "bartlett_window": {_F}, "kaiser_window": {_F},
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
    "ldexp_": {_I}, "tril_": {_I}, "triu_": {_I}, "swapaxes_": {_I}, "swapdims_": {_I},
    "resize_": {_I}, "resize_as_": {_I}, "detach_": {_I}, "requires_grad_": {_I},
    "dropout_": {_I}, "selu_": {_I}, "rrelu_": {_I},
    **{name: {_I} for name in (
        "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "absolute_",
        "negative_", "greater_", "greater_equal_", "less_", "less_equal_", "not_equal_",
        "multiply_", "divide_", "true_divide_", "subtract_", "addmv_", "fill_diagonal_",
        "apply_", "map_", "map2_", "embedding_renorm_", "mvlgamma_", "index_reduce_",
        "feature_dropout_")},
    # nn.init and nn.utils write into the tensors they are given
    "constant_": {_I}, "zeros_": {_I}, "ones_": {_I}, "eye_": {_I}, "orthogonal_": {_I},
    "xavier_uniform_": {_I}, "xavier_normal_": {_I}, "kaiming_uniform_": {_I},
    "kaiming_normal_": {_I}, "trunc_normal_": {_I}, "clip_grad_norm_": {_I},
    "clip_grad_value_": {_I},
    # graph targets capture itself records: a grad-mode switch, an assertion on a value
    "set_grad_enabled": {_S}, "_assert_async": {_S},
    }.items()},
}

_CACHE: dict[str, tuple[int, frozenset[str]]] = {}


def names_with(flag: str) -> frozenset[str]:
    """The public names flagged `flag`: registry ops' spellings and composites."""
    hit = _CACHE.get(flag)
    if hit is not None and hit[0] == len(REGISTRY):
        return hit[1]
    names = {name for name, flags in COMPOSITES.items() if flag in flags}
    if flag in _OP_FLAGS:
        names.update(op.public for op in REGISTRY.values() if getattr(op, flag))
    found = frozenset(names)
    _CACHE[flag] = (len(REGISTRY), found)  # recomputed when an op is registered later
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
