"""What the layers above dispatch (capture, fx, ONNX) know of a public name, read from one place.

A public name (a `fusegrad` function, a `Tensor` method, a function of `nn.functional` or
`nn.init`) is either the spelling of a registry op (its `OpDef.public`: `add_` is
`add_.Tensor`'s) or a composite, written over ops or about state rather than one op: a
factory (`zeros`), a question about the session (`is_grad_enabled`), an in-place helper
(`nn.init.zeros_`). Registry ops carry their flags on their `OpDef`; composites carry theirs
in `COMPOSITES`, the one table of such names. `names_with(flag)` joins the two.
"""

from __future__ import annotations

from .registry import REGISTRY

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

# Public names that are no registry op, with their flags (names without a flag that matters
# to capture, fx or ONNX are not listed here).
COMPOSITES: dict[str, frozenset[str]] = {name: frozenset(flags) for name, flags in {
    # factories (fusegrad._creation, fusegrad._random)
    "zeros": {_F}, "ones": {_F}, "full": {_F}, "empty": {_F}, "arange": {_F},
    "linspace": {_F}, "eye": {_F}, "tensor": {_F}, "as_tensor": {_F}, "rand": {_F},
    "randn": {_F}, "randint": {_F}, "randperm": {_F}, "normal": {_F}, "zeros_like": {_F},
    "ones_like": {_F}, "full_like": {_F}, "empty_like": {_F}, "rand_like": {_F},
    "randn_like": {_F},
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
    # nn.init and nn.utils write into the tensors they are given
    "constant_": {_I}, "zeros_": {_I}, "ones_": {_I}, "eye_": {_I}, "orthogonal_": {_I},
    "xavier_uniform_": {_I}, "xavier_normal_": {_I}, "kaiming_uniform_": {_I},
    "kaiming_normal_": {_I}, "trunc_normal_": {_I}, "clip_grad_norm_": {_I},
    "clip_grad_value_": {_I},
    # graph targets capture itself records: a grad-mode switch, an assertion on a value
    "set_grad_enabled": {_S}, "_assert_async": {_S},
}.items()}

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
