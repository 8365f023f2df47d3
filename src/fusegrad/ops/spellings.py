"""The public spellings of the registry's ops and of the composites: which Tensor methods and
operators exist and what each one is, and which in-place methods are also functions (PyTorch
keeps the same facts in native_functions.yaml's `variants`).

The table is declarative (names only): the public layer (`fusegrad._functions.methods`)
attaches every entry to `Tensor` in one loop, and the tests check each entry against the
registry and `ops/surface.py`'s composites. A method that is the public function of the same
name (`x.exp()` is `fusegrad.exp(x)`) is listed by name; the in-place and operator forms
are made from the registry op they name, so they record the same node as the function.
"""

from __future__ import annotations

# Other names of registry ops, as PyTorch spells them (`torch.arcsin` is `torch.asin`): the
# alias and the op's public name are the same function and the same method.
ALIASES: dict[str, str] = {
    "absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
    "arcsinh": "asinh", "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh",
    "clip": "clamp", "concat": "cat", "concatenate": "cat", "divide": "div", "fix": "trunc",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
    "multiply": "mul", "native_channel_shuffle": "channel_shuffle", "negative": "neg",
    "not_equal": "ne", "subtract": "sub", "swapaxes": "transpose", "swapdims": "transpose",
    "true_divide": "div",
}

# Tensor methods that are the public function of the same name: `x.exp()` is `fusegrad.exp(x)`
_SAME_AS_FUNCTION = """
add sub subtract mul multiply div divide true_divide neg negative reciprocal pow exp log sin cos
tanh sigmoid sqrt abs absolute relu sign maximum clamp clip eq ne lt le gt ge sum mean amax
softmax log_softmax mm bmm mv dot matmul view transpose swapaxes swapdims t
expand unsqueeze squeeze unbind select narrow as_strided clone contiguous add_ sub_ mul_ div_
copy_ greater less greater_equal less_equal not_equal exp2 expm1 log2 log10 log1p rsqrt tan asin
acos atan sinh cosh asinh acosh atanh erf erfc floor ceil trunc frac sgn isnan isinf isfinite
logical_not bitwise_not square round nan_to_num atan2 floor_divide remainder fmod minimum fmax
lerp addcmul addcdiv logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor
arcsin arccos arctan arcsinh arccosh arctanh arctan2 fix amin max min argmax argmin
prod var std logsumexp cumsum cumprod cummax cummin all any median mode
kthvalue flatten unflatten broadcast_to repeat tile split chunk
unsafe_split unsafe_chunk transpose_ tensor_split flip fliplr flipud roll tril triu diagonal
diag_embed diag trace index_select gather take_along_dim scatter scatter_add index_add
masked_fill masked_select nonzero argwhere index_put outer addmm baddbmm addmv bincount isclose
allclose equal lgamma digamma erfinv i0 sinc rad2deg deg2rad signbit isneginf isposinf isreal
logit hypot logaddexp logaddexp2 nextafter heaviside fmin gcd lcm xlogy copysign ldexp frexp
float_power clamp_min clamp_max diff rot90 repeat_interleave take put index_fill index_copy
masked_scatter scatter_reduce diagonal_scatter select_scatter slice_scatter unique_consecutive orgqr
geqrf ormqr
split_with_sizes narrow_copy diagflat hsplit vsplit dsplit nansum nanmean nanmedian quantile
nanquantile cov corrcoef histc histogram aminmax logcumsumexp dist renorm ravel is_nonzero
is_same_size det inverse slogdet logdet pinverse svd qr cholesky cholesky_solve cholesky_inverse
triangular_solve matrix_power matrix_exp cross inner vdot addr addbmm kron lu_solve
stft istft eig lstsq solve symeig
""".split()

# Tensor methods that are the in-place op of the same name, on `self` alone (`x.exp_()`)
_INPLACE = """
exp2_ expm1_ log2_ log10_ log1p_ rsqrt_ tan_ asin_ acos_ atan_ sinh_ cosh_ asinh_ acosh_ atanh_
erf_ erfc_ floor_ ceil_ trunc_ frac_ exp_ tanh_ sigmoid_ sqrt_ log_ sin_ cos_ abs_ neg_
reciprocal_ relu_ sign_ logical_not_ bitwise_not_
""".split()

# ... and on `self` and the arguments given (`x.hypot_(y)`)
_INPLACE_ARGS = """
lgamma_ digamma_ erfinv_ i0_ sinc_ rad2deg_ deg2rad_
""".split()

# Every Tensor method and operator the public layer attaches: name -> (form, what).
# Forms: "function" (the public function named), "inplace" / "inplace_args" (the registry
# op named, on `self` alone / with the arguments given), "operator" and "compare" (the
# registry op, NotImplemented for an operand of a foreign type), "binary_inplace" (the
# Tensor overload, or the Scalar one for a number), "tensors_inplace" (the op on `self` and
# one operand, named as PyTorch names it; the op's `OpDef.tensors_only` has the surface refuse
# a non-tensor), "scalar_as_tensor" (the op, a number made a tensor first), "method" and
# "property" (a function of the public layer named by its module under fusegrad, for a
# method-only signature), "method_of_lazy_module" (such a function in a module `import
# fusegrad` does not load: imported on the method's first call).
# The operand's parameter name of a "tensors_inplace" method, where it is not `other` (for
# keywords: the refusal's name comes from the op's `OpDef.tensors_only`).
OPERAND_NAMES: dict[str, str] = {"heaviside_": "values"}

METHODS: dict[str, tuple[str, ...]] = {
    **{name: ("function", name) for name in _SAME_AS_FUNCTION},
    **{name: ("inplace", name) for name in _INPLACE},
    **{name: ("inplace_args", name) for name in _INPLACE_ARGS},
    # operators and aliases: the public function spelled otherwise
    "__getitem__": ("function", "getitem"), "__setitem__": ("function", "setitem"),
    "__neg__": ("function", "neg"), "__abs__": ("function", "abs"),
    "__matmul__": ("method", "_functions.methods._matmul"),
    "__floordiv__": ("function", "floor_divide"),
    "__mod__": ("function", "remainder"), "__and__": ("function", "bitwise_and"),
    "__rand__": ("function", "bitwise_and"), "__or__": ("function", "bitwise_or"),
    "__ror__": ("function", "bitwise_or"), "__xor__": ("function", "bitwise_xor"),
    "__rxor__": ("function", "bitwise_xor"), "__invert__": ("method", "_functions.methods._invert"),
    "fix_": ("inplace", "trunc_"),
    # arithmetic operators: NotImplemented for an operand of a foreign type
    "__add__": ("operator", "add.Tensor"), "__radd__": ("operator", "add.Tensor"),
    "__iadd__": ("operator", "add_.Tensor"), "__sub__": ("operator", "sub.Tensor"),
    "__rsub__": ("operator", "rsub.Scalar"), "__isub__": ("operator", "sub_.Tensor"),
    "__mul__": ("operator", "mul.Tensor"), "__rmul__": ("operator", "mul.Tensor"),
    "__imul__": ("operator", "mul_.Tensor"), "__truediv__": ("operator", "div.Tensor"),
    "__itruediv__": ("operator", "div_.Tensor"),
    # comparison operators
    "__eq__": ("compare", "eq.Tensor"), "__ne__": ("compare", "ne.Tensor"),
    "__lt__": ("compare", "lt.Tensor"), "__le__": ("compare", "le.Tensor"),
    "__gt__": ("compare", "gt.Tensor"), "__ge__": ("compare", "ge.Tensor"),
    # in place, the Scalar overload for a number (the second op) or the Tensor one
    "eq_": ("binary_inplace", "eq_.Tensor", "eq_.Scalar"),
    "ne_": ("binary_inplace", "ne_.Tensor", "ne_.Scalar"),
    "lt_": ("binary_inplace", "lt_.Tensor", "lt_.Scalar"),
    "le_": ("binary_inplace", "le_.Tensor", "le_.Scalar"),
    "gt_": ("binary_inplace", "gt_.Tensor", "gt_.Scalar"),
    "ge_": ("binary_inplace", "ge_.Tensor", "ge_.Scalar"),
    "floor_divide_": ("binary_inplace", "floor_divide_.Tensor"),
    "remainder_": ("binary_inplace", "remainder_.Tensor", "remainder_.Scalar"),
    "fmod_": ("binary_inplace", "fmod_.Tensor", "fmod_.Scalar"),
    # in place with one tensor operand (PyTorch refuses a number, naming the method and the
    # parameter: the ops' `tensors_only`)
    "atan2_": ("tensors_inplace", "atan2_"),
    "arctan2_": ("tensors_inplace", "atan2_"),
    "logical_and_": ("tensors_inplace", "logical_and_"),
    "logical_or_": ("tensors_inplace", "logical_or_"),
    "logical_xor_": ("tensors_inplace", "logical_xor_"),
    "hypot_": ("tensors_inplace", "hypot_"), "nextafter_": ("tensors_inplace", "nextafter_"),
    "heaviside_": ("tensors_inplace", "heaviside_"),
    "gcd_": ("tensors_inplace", "gcd_"), "lcm_": ("tensors_inplace", "lcm_"),
    "__ifloordiv__": ("binary_inplace", "floor_divide_.Tensor"),
    "__imod__": ("binary_inplace", "remainder_.Tensor", "remainder_.Scalar"),
    "__ipow__": ("binary_inplace", "pow_.Tensor", "pow_.Scalar"),
    # in place, a number made a tensor of the promoted dtype first
    "bitwise_and_": ("scalar_as_tensor", "bitwise_and_.Tensor"),
    "bitwise_or_": ("scalar_as_tensor", "bitwise_or_.Tensor"),
    "bitwise_xor_": ("scalar_as_tensor", "bitwise_xor_.Tensor"),
    "__iand__": ("scalar_as_tensor", "bitwise_and_.Tensor"),
    "__ior__": ("scalar_as_tensor", "bitwise_or_.Tensor"),
    "__ixor__": ("scalar_as_tensor", "bitwise_xor_.Tensor"),
    # methods with a signature of their own: `module.function` under fusegrad
    "zero_": ("method", "_functions.inplace.zero_"),
    "fill_": ("method", "_functions.inplace.fill_"),
    "where": ("method", "_functions.methods._where_method"),
    "norm": ("method", "_functions.methods._norm_method"),
    "count_nonzero": ("method", "_functions.reduction._count_nonzero_method"),
    "movedim": ("method", "_functions.shape._movedim_method"),
    # (the functions take their sizes or dims as one list, the methods spread out too)
    "reshape": ("method", "_functions.shape.reshape"),
    "permute": ("method", "_functions.shape.permute"),
    "moveaxis": ("method", "_functions.shape._movedim_method"),
    "lu": ("method", "_functions.methods._lu_method"),
    "split": ("method", "_functions.methods._split_method"),
    "sort": ("method", "_functions.reduction._sort_method"),
    "argsort": ("method", "_functions.reduction._argsort_method"),
    "msort": ("method", "_functions.reduction._msort_method"),
    "__rtruediv__": ("method", "_functions.methods._rtruediv"),
    "__rdiv__": ("method", "_functions.methods._rtruediv"),  # PyTorch's `1 / x` reports it
    "__pow__": ("method", "_functions.methods._pow"),
    "__rpow__": ("method", "_functions.methods._rpow"),
    "nan_to_num_": ("method", "_functions.pointwise.nan_to_num_"),
    "clamp_": ("method", "_functions.methods._clamp_"),
    "clip_": ("method", "_functions.methods._clamp_"),
    "scatter_": ("method", "_functions.methods._scatter_"),
    "masked_fill_": ("method", "_functions.methods._masked_fill_"),
    "polygamma_": ("method", "_functions.math_extra.polygamma_"),
    "float_power_": ("method", "_functions.math_extra.float_power_"),
    "new_full": ("method", "_creation.new_full"), "new_tensor": ("method", "_creation.new_tensor"),
    "put_": ("method", "_functions.shape_extra.put_"),
    "index_fill_": ("method", "_functions.shape_extra.index_fill_"),
    "index_copy_": ("method", "_functions.shape_extra.index_copy_"),
    "masked_scatter_": ("method", "_functions.shape_extra.masked_scatter_"),
    "scatter_reduce_": ("method", "_functions.shape_extra.scatter_reduce_"),
    "renorm_": ("method", "_functions.statistics.renorm_"),
    "data_ptr": ("method", "_functions.utilities.data_ptr"),
    "untyped_storage": ("method_of_lazy_module", "storage.untyped_storage_of"),
    "storage": ("method_of_lazy_module", "storage.tensor_storage"),
    "storage_type": ("method_of_lazy_module", "storage.storage_type"),
    "set_": ("method_of_lazy_module", "storage.set_"),
    "dequantize": ("method_of_lazy_module", "_quantized.dequantize_dense"),
    "q_scale": ("method_of_lazy_module", "_quantized.q_scale"),
    "q_zero_point": ("method_of_lazy_module", "_quantized.q_zero_point"),
    "q_per_channel_scales": ("method_of_lazy_module", "_quantized.q_per_channel_scales"),
    "q_per_channel_zero_points": ("method_of_lazy_module",
                                  "_quantized.q_per_channel_zero_points"),
    "q_per_channel_axis": ("method_of_lazy_module", "_quantized.q_per_channel_axis"),
    "int_repr": ("method_of_lazy_module", "_quantized.int_repr"),
    "qscheme": ("method_of_lazy_module", "_quantized.dense_qscheme"),
    "new": ("method", "_functions.utilities.new"),
    "resize_": ("method", "_functions.utilities.resize_"),
    "resize_as_": ("method", "_functions.utilities.resize_as_"),
    "squeeze_": ("method", "_functions.utilities.squeeze_"),
    "unsqueeze_": ("method", "_functions.utilities.unsqueeze_"),
    "t_": ("method", "_functions.utilities.t_"),
    "swapaxes_": ("method", "_functions.utilities.swapaxes_"),
    "swapdims_": ("method", "_functions.utilities.swapdims_"),
    "unfold": ("method", "_functions.utilities.unfold"),
    "is_set_to": ("method", "_functions.utilities.is_set_to"),
    "is_coalesced": ("method", "_functions.utilities.is_coalesced"),
    "addr_": ("method", "_functions.linalg_extra._addr_"),
    "addbmm_": ("method", "_functions.linalg_extra._addbmm_"),
    "uniform_": ("method", "_distributions.uniform_"),
    "normal_": ("method", "_distributions.normal_"),
    "log_normal_": ("method", "_distributions.log_normal_"),
    "cauchy_": ("method", "_distributions.cauchy_"),
    "exponential_": ("method", "_distributions.exponential_"),
    "geometric_": ("method", "_distributions.geometric_"),
    "bernoulli_": ("method", "_distributions.bernoulli_"),
    "random_": ("method", "_distributions.random_"),
    "bernoulli": ("method", "_distributions.bernoulli"),
    "multinomial": ("method", "_distributions.multinomial"),
    "__hash__": ("method", "_functions.methods._hash"),
    "view_as": ("method", "_functions.methods._view_as"),
    "reshape_as": ("method", "_functions.methods._reshape_as"),
    "expand_as": ("method", "_functions.methods._expand_as"),
    "__pos__": ("method", "_functions.methods._pos"),
    "positive": ("method", "_functions.methods._pos"),  # PyTorch's `+x` reports it
    "round_": ("method", "_functions.pointwise.round_"),  # (and its `decimals` overload)
    "__rmatmul__": ("method", "_functions.methods._rmatmul"),
    "__reversed__": ("method", "_functions.methods._reversed"),
    "lerp_": ("method", "_functions.methods._lerp_"),
    "addcmul_": ("method", "_functions.methods._addcmul_"),
    "addcdiv_": ("method", "_functions.methods._addcdiv_"),
    "square_": ("method", "_functions.methods._square_"),
    "pow_": ("method", "_functions.methods._pow_"), "sgn_": ("method", "_functions.methods._sgn_"),
    "__rfloordiv__": ("method", "_functions.methods._rfloordiv"),
    "__rmod__": ("method", "_functions.methods._rmod"),
    "cumsum_": ("method", "_functions.methods._cumsum_"),
    "tril_": ("method", "_functions.methods._tril_"),
    "triu_": ("method", "_functions.methods._triu_"),
    "scatter_add_": ("method", "_functions.methods._scatter_add_"),
    "index_add_": ("method", "_functions.methods._index_add_"),
    "index_put_": ("method", "_functions.methods._index_put_"),
    "unique": ("method", "_functions.methods._unique"),
    "topk": ("method", "_functions.methods._topk"),  # (PyTorch's parser on its arguments)
    "polygamma": ("method", "_functions.methods._polygamma"),
    "xlogy_": ("method", "_functions.math_extra.xlogy_"),
    "copysign_": ("method", "_functions.math_extra.copysign_"),
    "clamp_min_": ("method", "_functions.math_extra.clamp_min_"),
    "clamp_max_": ("method", "_functions.math_extra.clamp_max_"),
    "logit_": ("method", "_functions.math_extra.logit_"),
    "ldexp_": ("method", "_functions.math_extra.ldexp_"),
    "new_zeros": ("method", "_creation.new_zeros"), "new_ones": ("method", "_creation.new_ones"),
    "new_empty": ("method", "_creation.new_empty"),
    "is_signed": ("method", "_functions.utilities._is_signed"),
    "is_inference": ("method", "_functions.utilities.is_inference"),
    "get_device": ("method", "_functions.utilities._get_device"),
    "is_pinned": ("method", "_functions.utilities._is_pinned"),
    "pin_memory": ("method", "_functions.utilities.pin_memory"),
    "is_shared": ("method", "_functions.utilities.is_shared"),
    "share_memory_": ("method", "_functions.utilities.share_memory_"),
    "is_conj": ("method", "_functions.utilities._never"),
    "is_neg": ("method", "_functions.utilities._never"),
    "is_distributed": ("method", "_functions.utilities._never"),
    # older spellings of in-place ops, and methods kept for older code
    **{f"arc{n}_": ("inplace", f"a{n}_") for n in ("cos", "cosh", "sin", "sinh", "tan", "tanh")},
    "absolute_": ("inplace", "abs_"), "negative_": ("inplace", "neg_"),
    "greater_": ("binary_inplace", "gt_.Tensor", "gt_.Scalar"),
    "greater_equal_": ("binary_inplace", "ge_.Tensor", "ge_.Scalar"),
    "less_": ("binary_inplace", "lt_.Tensor", "lt_.Scalar"),
    "less_equal_": ("binary_inplace", "le_.Tensor", "le_.Scalar"),
    "not_equal_": ("binary_inplace", "ne_.Tensor", "ne_.Scalar"),
    "multiply_": ("function", "mul_"), "divide_": ("function", "div_"),
    "true_divide_": ("function", "div_"), "subtract_": ("function", "sub_"),
    "ger": ("function", "ger"), "hardshrink": ("function", "hardshrink"),
    "prelu": ("function", "prelu"),
    "addmm_": ("method", "_functions.methods_more._addmm_"),
    "baddbmm_": ("method", "_functions.methods_more._baddbmm_"),
    "addmv_": ("method", "_functions.methods_more._addmv_"),
    "cumprod_": ("method", "_functions.methods_more._cumprod_"),
    "fill_diagonal_": ("method", "_functions.methods_more._fill_diagonal_"),
    "sum_to_size": ("method", "_functions.methods_more._sum_to_size"),
    "apply_": ("method", "_functions.methods_more._apply_"),
    "map_": ("method", "_functions.methods_more._map_"),
    "map2_": ("method", "_functions.methods_more._map2_"),
    "new_empty_strided": ("method", "_functions.methods_more._new_empty_strided"),
    "resize": ("method", "_functions.methods_more._resize"),
    "resize_as": ("method", "_functions.methods_more._resize_as"),
    "dim_order": ("method", "_functions.methods_more._dim_order"),
    "const_data_ptr": ("method", "_functions.methods_more._const_data_ptr"),
    "module_load": ("method", "_functions.methods_more._module_load"),
    "bitwise_left_shift": ("function", "bitwise_left_shift"),
    "bitwise_right_shift": ("function", "bitwise_right_shift"),
    "__lshift__": ("function", "bitwise_left_shift"),
    "__rshift__": ("function", "bitwise_right_shift"),
    "bitwise_left_shift_": ("scalar_as_tensor", "bitwise_left_shift_.Tensor"),
    "bitwise_right_shift_": ("scalar_as_tensor", "bitwise_right_shift_.Tensor"),
    "__ilshift__": ("scalar_as_tensor", "bitwise_left_shift_.Tensor"),
    "__irshift__": ("scalar_as_tensor", "bitwise_right_shift_.Tensor"),
    "__rlshift__": ("method", "_functions.shifts._rlshift"),
    "mvlgamma": ("function", "mvlgamma"),
    "adjoint": ("function", "adjoint"),
    "igamma": ("function", "igamma"), "igammac": ("function", "igammac"),
    "igamma_": ("tensors_inplace", "igamma_"), "igammac_": ("tensors_inplace", "igammac_"),
    "as_strided_scatter": ("function", "as_strided_scatter"),
    "index_reduce": ("function", "index_reduce"),
    "index_reduce_": ("method", "_functions.compat_layers._index_reduce_"),
    "nonzero_static": ("function", "nonzero_static"),
    "unsafe_split_with_sizes": ("function", "unsafe_split_with_sizes"),
    "mvlgamma_": ("method", "_functions.compat_more._mvlgamma_"),
    "__rrshift__": ("method", "_functions.shifts._rrshift"),
    # properties: `module.getter` under fusegrad
    "nbytes": ("property", "_functions.utilities._nbytes"),
    "itemsize": ("property", "_functions.utilities._itemsize"),
    "is_cpu": ("property", "_functions.utilities._always"),
    "is_meta": ("property", "_functions.utilities._never"),
    "is_sparse": ("property", "_functions.utilities._never"),
    "is_quantized": ("property", "_functions.utilities._never"),
    "is_mkldnn": ("property", "_functions.utilities._never"),
    "is_xpu": ("property", "_functions.utilities._never"),
    "is_mps": ("property", "_functions.utilities._never"),
    "is_ipu": ("property", "_functions.utilities._never"),
    "is_maia": ("property", "_functions.utilities._never"),
    "is_mtia": ("property", "_functions.utilities._never"),
    "is_xla": ("property", "_functions.utilities._never"),
    "is_vulkan": ("property", "_functions.utilities._never"),
    "is_nested": ("property", "_functions.utilities._never"),
    "is_sparse_csr": ("property", "_functions.utilities._never"),
}


# The in-place methods PyTorch also spells as functions (`torch.relu_(x)` is `x.relu_()`).
INPLACE_FUNCTIONS = """
relu_ sigmoid_ exp_ tanh_ sqrt_ abs_ neg_ log_ sin_ cos_ ceil_ floor_ round_ trunc_ rsqrt_
exp2_ erf_ erfc_ expm1_ log1p_ log2_ log10_ frac_ reciprocal_ sinh_ cosh_ tan_ atan_ asin_
acos_ asinh_ acosh_ atanh_ square_ fix_ clamp_ clip_ fill_ zero_ nan_to_num_ clamp_min_
clamp_max_ logit_ xlogy_ i0_ sinc_ rad2deg_ deg2rad_ ldexp_ gcd_ lcm_ arccos_ arccosh_ arcsin_
arcsinh_ arctan_ arctanh_ negative_ detach_ resize_as_ index_put_ addmv_
""".split()


# The method each operator reports to `__torch_function__` handlers, as PyTorch's operators
# do (`x + 1` and `1 + x` report `Tensor.add`); an operator not listed reports itself.
OPERATOR_REPORTS: dict[str, str] = {
    "__abs__": "abs", "__add__": "add", "__radd__": "add", "__ne__": "ne", "__ge__": "ge",
    "__gt__": "gt", "__le__": "le", "__lt__": "lt", "__iadd__": "add_",
    "__ifloordiv__": "floor_divide_", "__imod__": "remainder_", "__imul__": "mul_",
    "__ipow__": "pow_",
    "__isub__": "sub_", "__itruediv__": "div_", "__matmul__": "matmul", "__mod__": "remainder",
    "__mul__": "mul", "__rmul__": "mul", "__neg__": "neg", "__pos__": "positive",
    "__rand__": "bitwise_and", "__ror__": "bitwise_or", "__rxor__": "bitwise_xor",
    "__rtruediv__": "__rdiv__", "__sub__": "sub", "__truediv__": "div",
}
