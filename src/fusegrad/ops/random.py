"""Random sampling ops: the in-place fillers (`uniform_`, `normal_`, `bernoulli_`, ...) and
`bernoulli`, `poisson`, `multinomial`, and `native_dropout` (a bernoulli mask).

Values come from `_random_draws`, which reproduces PyTorch's CPU draws bit for bit (poisson
excepted: its sampler is NumPy's, seeded from the stream). The gradient of every sample with
respect to its input is zero, as in PyTorch, but the ops still record a node so that a later
backward knows the old values were overwritten.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .. import _random_draws as draws
from .._dispatch import call
from .._random import check_random_bounds, generator_or_default, int64_argument
from .._scalar_conversion import float_max
from .._shapes import broadcast_shapes, in_memory_order, memory_order, strides_order
from ._util import Spec, dtype_of, not_implemented_for, rand_array
from .arithmetic import not_implemented_derivative
from .registry import Sample, register
from .sorting import topk_kernel
from .views import _expand_shape

_FLOAT_KINDS = "f"


def _same(a, *args) -> Spec:
    return Spec(tuple(a.shape), a.dtype)


def _float_only(a, kernel_name: str) -> None:
    """Continuous distributions are defined for floating tensors only (PyTorch's wording)."""
    dt = np.dtype(a.dtype)
    if dt.kind not in _FLOAT_KINDS and dt.name != "bfloat16":
        raise not_implemented_for(kernel_name, dt)


def _continuous_only(a, distribution: str, cpp_name: bool) -> None:
    """exponential_'s and cauchy_'s own refusal of a tensor that is not floating, naming its
    dtype as a scalar type (Long) or, for cauchy_, as the C++ type (long int)."""
    dt = np.dtype(a.dtype)
    if dt.kind not in _FLOAT_KINDS and dt.name != "bfloat16":
        d = _dtype.from_numpy_dtype(dt)
        raise RuntimeError(f"{distribution} distribution is a continuous probability "
                           "distribution. dtype must be a floating point but you specified "
                           f"{d.cpp if cpp_name else d.legacy}")


def _not_for_bool_or_complex(a, kernel_name: str) -> None:
    """The discrete draws' kernels, which take integer and floating tensors."""
    dt = np.dtype(a.dtype)
    if dt.kind in "bc":
        raise not_implemented_for(kernel_name, dt)


def _laid_out(a, flat: np.ndarray) -> np.ndarray:
    """Values drawn in `a`'s memory order (PyTorch fills a transposed tensor along its
    storage), in `a`'s shape."""
    if a.flags.c_contiguous:
        return flat.reshape(a.shape)
    return in_memory_order(flat.reshape, a.shape, memory_order(a))


def _component(a) -> np.dtype:
    """The dtype the draws of `a` are made in: its own, or a complex dtype's real one (PyTorch
    fills a complex tensor through its real view, the real and imaginary parts of each
    element in turn)."""
    dt = np.dtype(a.dtype)
    return np.dtype(dt.char.lower()) if dt.kind == "c" else dt


def _as_complex(a, values: np.ndarray) -> np.ndarray:
    """Draws of `a`'s real view (two per element) as `a`'s complex values; others as given."""
    return values.view(a.dtype) if np.dtype(a.dtype).kind == "c" else values


def _uniform(a, low=0.0, high=1.0, generator=None):
    real = _component(a)
    _float_only(np.empty(0, real), "check_uniform_bounds")
    top = float_max(real)  # (uniform_'s bounds)
    cpp = _dtype.from_numpy_dtype(real).cpp
    for value, name in ((low, "from"), (high, "to")):
        if not -top <= value <= top:  # (NaN too)
            raise RuntimeError(f"{name} is out of bounds for {cpp}")
    if low > high:
        raise RuntimeError("uniform_ expects to return a [from, to) range, but found "
                           f"from={low:g} > to={high:g}")
    if high - low > top:
        raise RuntimeError(
            "uniform_ expects to-from <= std::numeric_limits<"
            f"{_dtype.from_numpy_dtype(real).legacy}>::max(), but found to={high:g} and "
            f"from={low:g} which result in to-from to exceed the limit")
    n = a.size * (2 if real is not np.dtype(a.dtype) else 1)
    return _laid_out(a, _as_complex(a, draws.uniform(generator, n, real, low, high)))


def _normal(a, mean=0.0, std=1.0, generator=None):
    if std < 0:  # (checked before the dtype, as PyTorch does)
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    real = _component(a)
    _float_only(np.empty(0, real), "normal_kernel_cpu")
    if real != np.dtype(a.dtype):  # each part gets half the variance
        values = draws.normal(generator, 2 * a.size, real, mean, std / np.sqrt(2.0),
                              a.flags.c_contiguous)
        return _laid_out(a, values.view(a.dtype))
    return _laid_out(a, draws.normal(generator, a.size, a.dtype, mean, std,
                                     a.flags.c_contiguous))


# (PyTorch checks the parameters of these before the tensor's dtype)
def _log_normal(a, mean=1.0, std=2.0, generator=None):
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    _float_only(a, "log_normal_cpu")
    return _laid_out(a, draws.log_normal(generator, a.size, mean, std))


def _cauchy(a, median=0.0, sigma=1.0, generator=None):
    if sigma <= 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    _continuous_only(a, "Cauchy", cpp_name=True)
    return _laid_out(a, draws.cauchy(generator, a.size, median, sigma))


def _exponential(a, lambd=1.0, generator=None):
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    _continuous_only(a, "Exponential", cpp_name=False)
    return _laid_out(a, draws.exponential(generator, a.size, lambd))


def _geometric(a, p, generator=None):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    _not_for_bool_or_complex(a, "geometric_cpu")
    return _laid_out(a, draws.geometric(generator, a.size, p))


def _bernoulli_scalar(a, p=0.5, generator=None):
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")
    if np.dtype(a.dtype).kind == "c":
        raise not_implemented_for("bernoulli_scalar_cpu_", a.dtype)
    return _laid_out(a, draws.bernoulli_scalar(generator, a.size, p))


def _probabilities(p, name: str):
    p = np.asarray(p)
    if p.size and (np.isnan(p).any() or p.min() < 0 or p.max() > 1):
        # (PyTorch's CPU kernel words it so for bernoulli and bernoulli_ alike, whatever `name`)
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could "
                           "this error message be improved?  If so, please report an "
                           "enhancement request to PyTorch.)")
    return p


def _bernoulli_tensor(a, p, generator=None):
    _expand_shape(np.shape(p), a.shape, dtype_of(p))  # (PyTorch's error for a p that cannot)
    p = np.broadcast_to(_probabilities(p, "bernoulli_"), a.shape)
    return draws.bernoulli_tensor(generator, p)


def _bernoulli(a, generator=None):
    _float_only(a, "bernoulli_tensor_cpu_p_")  # (PyTorch names its p kernel)
    p = _probabilities(a, "bernoulli")
    return draws.bernoulli_tensor(generator, p).astype(a.dtype)


def _poisson(a, generator=None):
    _float_only(a, "poisson_cpu")
    if a.size and a.min() < 0:
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return draws.poisson(generator, a).astype(a.dtype)


def _binomial_checks(count, prob) -> tuple:
    """PyTorch's checks of binomial's parameters, in its order; the result's shape."""
    dt, prob_dt = dtype_of(count), dtype_of(prob)
    if not dt.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: "
                         f"{dt.legacy}")
    if dt not in (_dtype.float32, _dtype.float64):
        raise not_implemented_for("binomial_cpu", dt)
    if prob_dt != dt:
        raise RuntimeError(f"Found dtype {prob_dt.legacy} but expected {dt.legacy}")
    return broadcast_shapes(tuple(count.shape), tuple(prob.shape))


def _binomial_meta(count, prob, generator=None) -> Spec:
    return Spec(_binomial_checks(count, prob), count.dtype)


def _binomial(count, prob, generator=None):
    shape = _binomial_checks(count, prob)
    counts, probs = np.broadcast_to(count, shape), np.broadcast_to(prob, shape)
    return draws.binomial(generator, counts, probs).astype(count.dtype)


# The inclusive top of random_()'s default range: integers a float holds exactly.
_RANDOM_TOP = {np.dtype(np.float16): 2 ** 11, np.dtype(np.float32): 2 ** 24,
               np.dtype(np.float64): 2 ** 53, np.dtype(np.bool_): 1}


def _integers(a, low: int, high: int, generator) -> np.ndarray:
    check_random_bounds(low, high, np.dtype(a.dtype))
    return _laid_out(a, draws.integers(generator, a.size, low, high))


def _top(a) -> int:
    """The largest value `random_()` draws for `a`'s dtype: the integers a float holds exactly
    (bfloat16 keeps 8 mantissa bits), or an integer type's maximum."""
    dt = np.dtype(a.dtype)
    top = _RANDOM_TOP.get(dt)
    if top is None:
        top = 2 ** 8 if dt.kind == "V" or dt.name == "bfloat16" else int(np.iinfo(dt).max)
    return top


def _random_default(a, generator=None):
    if np.dtype(a.dtype).kind == "c":
        raise not_implemented_for("random_kernel_cpu", a.dtype)
    return _laid_out(a, draws.random_bits(generator, a.size, a.dtype))


def _random_to(a, to, generator=None):
    return _integers(a, 0, int64_argument(to), generator)


def _random_from(a, low, to=None, generator=None):
    low = int64_argument(low)
    return _integers(a, low, _top(a) + 1 if to is None else int64_argument(to), generator)


def multinomial_input_check(a) -> None:
    """PyTorch's first checks of multinomial's weights (array, fake or tensor): its rank,
    then a floating dtype (integer weights are refused, not sampled from). They come before
    the `out` dtype check, which `fusegrad.multinomial` makes between them and the rest."""
    if len(a.shape) not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    dt = dtype_of(a)
    if not dt.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{dt.legacy}")


def _multinomial_meta(a, num_samples, replacement=False, generator=None) -> Spec:
    multinomial_input_check(a)
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > a.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    from .. import _dtype

    return Spec(tuple(a.shape[:-1]) + (num_samples,), _dtype.int64)


def _multinomial(a, num_samples, replacement=False, generator=None):
    _multinomial_meta(a, num_samples, replacement)
    weights = np.atleast_2d(np.asarray(a, dtype=np.float64))
    if replacement and num_samples > 1:  # PyTorch checks this case entry by entry
        if not (weights >= 0).all():
            raise RuntimeError(
                "invalid multinomial distribution (encountering probability entry < 0)")
        if np.isinf(weights).any():
            raise RuntimeError("invalid multinomial distribution (encountering probability "
                               "entry = infinity or NaN)")
    if (weights < 0).any() or not np.isfinite(weights).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (weights.sum(-1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    probs = np.atleast_2d(np.asarray(a))
    if not probs.shape[0]:  # no rows: nothing drawn
        return np.zeros((0, num_samples), np.int64)
    if replacement and num_samples > 1:
        # Each row's normalised running sum (in the input's dtype), searched for one double
        # uniform per sample: row by row, as PyTorch's CPU kernel draws them.
        rows = []
        for w in probs:
            cum = np.cumsum(w)
            cum = cum / cum[-1]
            cum[-1] = 1
            rows.append(np.searchsorted(cum, draws.unit_double(
                generator_or_default(generator), num_samples), side="left"))
    else:
        # PyTorch's trick (without replacement, or for one sample either way): the largest
        # p / q for q ~ Exp(1) drawn over the whole input. One sample is the first largest
        # (argmax); more are topk's, whose tie order ranks the zero-weight categories that
        # fill up a row with fewer nonzero weights than samples.
        q = draws.exponential(generator, probs.size, 1.0).astype(probs.dtype)
        keys = probs / q.reshape(probs.shape)
        if num_samples == 1:
            rows = list(np.argmax(keys, axis=1)[:, None])
        else:
            rows = list(topk_kernel(keys, num_samples, 1)[1])
    out = np.stack(rows).astype(np.int64)
    return out if np.ndim(a) == 2 else out[0]


def _fill_samples(*params):
    def samples(rng_, dtype):
        return [Sample((rand_array(rng_, s, dtype),) + params, name=str(s))
                for s in ((3, 4), (), (0,))]

    return samples


def _zero(n: int):
    """The derivative of a sample: zero for `self`, nothing for the `n` other arguments."""
    return lambda g: (g * 0,) + (None,) * n


def _in_dtype(kernel):
    """The draw converted to `self`'s dtype (integers into a bool or half tensor, ...)."""
    def fill(a, *args):
        return np.asarray(kernel(a, *args)).astype(a.dtype, copy=False)

    fill.__name__ = kernel.__name__
    return fill


def _filler(name: str, kernel, node: str, params: tuple, public: str, nargs: int, **kw):
    return register(name, kernel=_in_dtype(kernel), meta=_same, inplace=True, node=node,
                    derivative=_zero(nargs), zero_grad=True, random=True, public=public,
                    samples=_fill_samples(*params), **kw)


uniform_ = _filler("uniform_", _uniform, "UniformBackward0", (-2.0, 3.0), "uniform_", 3)
normal_ = _filler("normal_", _normal, "NormalBackward0", (1.0, 2.0), "normal_", 3)
log_normal_ = _filler("log_normal_", _log_normal, "LogNormalBackward0", (0.5, 0.25),
                      "log_normal_", 3)
cauchy_ = _filler("cauchy_", _cauchy, "CauchyBackward0", (0.0, 1.0), "cauchy_", 3)
exponential_ = _filler("exponential_", _exponential, "ExponentialBackward0", (2.0,),
                       "exponential_", 2)
geometric_ = _filler("geometric_", _geometric, "GeometricBackward0", (0.3,), "geometric_", 2)
bernoulli_float = _filler("bernoulli_.float", _bernoulli_scalar, "BernoulliBackward2", (0.3,),
                          "bernoulli_", 2)
random_default = _filler("random_", _random_default, "RandomBackward2", (), "random_", 1)
random_to = _filler("random_.to", _random_to, "RandomBackward1", (7,), "random_", 2)
random_from = _filler("random_.from", _random_from, "RandomBackward0", (-3, 5), "random_", 3)
bernoulli_tensor = register(
    "bernoulli_.Tensor", kernel=_in_dtype(_bernoulli_tensor), meta=_same, inplace=True,
    node="BernoulliBackward1", derivative=lambda g: (g * 0, g * 0, None), zero_grad=True,
    random=True, public="bernoulli_", tensor_args=(0, 1),
    samples=lambda r, dt: [Sample((rand_array(r, (3, 4), dt), rand_array(r, (3, 4), dt,
                                                                            (0.0, 1.0))))])
bernoulli = register(
    "bernoulli", kernel=_bernoulli, meta=_same, node="BernoulliBackward0",
    derivative=_zero(1), zero_grad=True, random=True,
    samples=lambda r, dt: [Sample((rand_array(r, s, dt, (0.0, 1.0)),), name=str(s))
                           for s in ((3, 4), (), (0,))])
def _bernoulli_p(a, p=0.5, generator=None):
    """`bernoulli(input, p)`: `bernoulli_(p)`'s draw into a new row-major tensor of `input`'s
    shape and dtype (PyTorch's result is contiguous whatever the input's layout)."""
    return _bernoulli_scalar(np.empty(a.shape, a.dtype), p, generator)


# An out-of-place result, which PyTorch gives a NotImplemented node.
bernoulli_p = register(
    "bernoulli.p", kernel=_in_dtype(_bernoulli_p), meta=_same, node="NotImplemented",
    derivative=not_implemented_derivative("bernoulli"), random=True, gradcheck=False,
    public="bernoulli", samples=_fill_samples(0.3))
poisson = register(
    "poisson", kernel=_poisson, meta=_same, node="PoissonBackward0", derivative=_zero(1),
    zero_grad=True, random=True,
    samples=lambda r, dt: [Sample((rand_array(r, s, dt, (0.5, 5.0)),), name=str(s))
                           for s in ((3, 4), (), (0,))])
# ---------------------------------------------------------------- normal of tensors


def _normal_of_tensors(mean, std, generator=None):
    """`normal(mean, std)` where mean, std or both are tensors (the other a number): in the
    tensor's dtype (mean's where both are), as PyTorch draws it: N(0, std) for a number std,
    else N(0, 1) scaled by the tensor std (made the result's dtype first); then the mean
    added, each step rounding in the result's dtype."""
    ref = mean if isinstance(mean, np.ndarray) else std
    dt = ref.dtype
    if isinstance(std, np.ndarray) and std.dtype.kind == "c":
        raise RuntimeError("normal expects standard deviation to be non-complex")
    if not isinstance(std, np.ndarray) and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    real = _component(ref)  # (a complex mean: the draws fill the result's real view)
    _float_only(np.empty(0, real), "normal_kernel_cpu")
    if isinstance(std, np.ndarray) and (std < 0).any():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    shape = broadcast_shapes(np.shape(mean), np.shape(std))
    n = int(np.prod(shape))
    parts, scale = (2, 1 / np.sqrt(2.0)) if real != dt else (1, 1.0)
    if isinstance(std, np.ndarray):
        data = draws.normal(generator, n * parts, real, 0.0, scale)
        data = _as_complex(ref, data).reshape(shape) * std.astype(dt)
    else:
        data = draws.normal(generator, n * parts, real, 0.0, std * scale)
        data = _as_complex(ref, data).reshape(shape)
    return (data + np.asarray(mean).astype(dt)).astype(dt)


def _normal_of_tensors_meta(mean, std, generator=None) -> Spec:
    ref = mean if hasattr(mean, "shape") else std
    return Spec(broadcast_shapes(*(tuple(t.shape) for t in (mean, std) if hasattr(t, "shape"))),
                dtype_of(ref))


def _zeros_for(*which: bool):
    """A sample's derivative as PyTorch's: zeros of each tensor argument's own shape (not
    the result's: a broadcast mean gets a gradient of its size), None for the generator."""
    def derivative(g, *shapes):
        it = iter(shapes)
        return tuple(g.new_zeros(next(it)) if tensor else None for tensor in which) + (None,)

    return derivative


def _normal_samples(mean_tensor: bool, std_tensor: bool):
    def samples(r, dt):
        mean = rand_array(r, (3, 4), dt) if mean_tensor else 0.5
        std = rand_array(r, (4,), dt, (0.5, 2.0)) if std_tensor else 2.0
        return [Sample((mean, std))]

    return samples


def _normal_op(overload: str, node: str, mean_tensor: bool, std_tensor: bool):
    shapes = (("mean",) if mean_tensor else ()) + (("std",) if std_tensor else ())

    def save(out, mean, std, generator=None):
        given = {"mean": mean, "std": std}
        return tuple(tuple(given[k].shape) for k in shapes)

    return register(
        f"normal.{overload}", kernel=_normal_of_tensors, meta=_normal_of_tensors_meta,
        node=node, derivative=_zeros_for(mean_tensor, std_tensor), save=save,
        saved_names=tuple(f"{k}_sym_sizes" for k in shapes), zero_grad=True, random=True,
        public="_normal_of_tensors",
        tensor_args=tuple(i for i, t in enumerate((mean_tensor, std_tensor)) if t),
        samples=_normal_samples(mean_tensor, std_tensor))


normal_tensor_float = _normal_op("Tensor_float", "NormalBackward1", True, False)
normal_float_tensor = _normal_op("float_Tensor", "NormalBackward2", False, True)
normal_tensor_tensor = _normal_op("Tensor_Tensor", "NormalBackward3", True, True)


binomial = register(
    "binomial", kernel=_binomial, meta=_binomial_meta, node="NotImplemented",
    derivative=not_implemented_derivative("binomial"), random=True, gradcheck=False,
    samples=lambda r, dt: [Sample((np.floor(rand_array(r, (3, 4), dt, (0.0, 40.0))),
                                   rand_array(r, (3, 4), dt, (0.0, 1.0))))])
multinomial = register(
    "multinomial", kernel=_multinomial, meta=_multinomial_meta, random=True,
    samples=lambda r, dt: [Sample((rand_array(r, (6,), dt, (0.1, 1.0)), 3)),
                           Sample((rand_array(r, (2, 5), dt, (0.1, 1.0)), 7, True))])

# ---------------------------------------------------------------- dropout


def _dropout_scale(p: float) -> float:
    return 0.0 if p == 1 else 1.0 / (1.0 - p)


def _native_dropout(a, p, train=None, generator=None):
    if a.size == 0:  # PyTorch returns an empty mask of the input's dtype
        return a.copy(), np.zeros(a.shape, a.dtype)
    if train is not None and not train:
        return a.copy(), np.ones(a.shape, dtype=np.bool_)
    # The mask is bernoulli_(1 - p)'s draw on the default generator, so the decomposition
    # (and F.dropout, which draws the same way) keeps the same elements for the same seed.
    keep = _bernoulli_scalar(a, 1 - p, generator)
    return (a * (keep * _dropout_scale(p)).astype(a.dtype)).astype(a.dtype, copy=False), keep


def _native_dropout_meta(a, p, train=None):
    if a.dtype.category != _dtype.FLOAT:
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{a.dtype.legacy}")
    mask = a.dtype if 0 in tuple(a.shape) else _dtype.bool_
    return [Spec(tuple(a.shape), a.dtype), Spec(tuple(a.shape), mask)]


def _native_dropout_derivative(grads, mask, p, train):
    g = grads[0] if isinstance(grads, list) else grads
    # PyTorch scales by 1 unless `train` is given and true (train=None trains in the forward
    # but its backward does not rescale).
    return (g * mask * (_dropout_scale(p) if train else 1.0), None, None)


def _native_dropout_decomposition(a, p, train=None):
    """bernoulli_(1 - p) on a zero tensor (the kernel's draw), then a scaled multiply."""
    if not a.numel():
        return a.clone(), a.new_zeros(tuple(a.shape))
    if train is not None and not train:
        return a.clone(), a.new_ones(tuple(a.shape), dtype=_dtype.bool_)
    shape = tuple(a.shape)
    order = None if a.is_contiguous() else strides_order(shape, a.stride())
    if order is None:
        keep = a.new_zeros(shape).bernoulli_(1 - p)
    else:  # drawn in `a`'s memory order, as the kernel draws (`_laid_out`)
        inverse = [0] * len(order)
        for i, d in enumerate(order):
            inverse[d] = i
        keep = a.new_zeros(tuple(shape[d] for d in order)).bernoulli_(1 - p).permute(inverse)
    return a * (keep * _dropout_scale(p)), keep.bool()


native_dropout = register(
    "native_dropout", kernel=_native_dropout, meta=_native_dropout_meta,
    node="NativeDropoutBackward0", derivative=_native_dropout_derivative,
    save=lambda out, a, p, train=None: (out[1], p, train), nondiff_outputs=(1,), random=True,
    gradcheck=False, decomposition=_native_dropout_decomposition,
    # Masks drawn with p in (0, 1) differ from PyTorch's, and so do their gradients: the
    # oracle samples are the deterministic cases (tests/test_decompositions.py draws masks).
    samples=lambda r, dt: [Sample((rand_array(r, s, dt), p, t), name=f"{s} p={p} train={t}")
                           for s, p, t in (((3, 4), 1.0, True), ((2, 3, 4), 0.0, True),
                                           ((3, 4), 0.5, False))],
    saved_names=("result1", "p", ""))


# ---------------------------------------------------------------- gamma and dirichlet draws
#
# The draws behind the reparameterised Gamma, Beta and Dirichlet distributions, and their
# implicit-reparameterisation factors, as ops (PyTorch's `_standard_gamma`,
# `_standard_gamma_grad`, `_sample_dirichlet`, `_dirichlet_grad`): made through dispatch, a
# compiled program traces them as it traces the other random ops.


def _gamma_dtype_check(a) -> None:
    dt = np.dtype(a.dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise not_implemented_for("gamma_cpu", dt)


def _standard_gamma_kernel(a, generator=None):
    """Gamma(a, 1) draws in a's dtype, at least its smallest normal value (PyTorch's clamp:
    later logarithms stay finite), drawn one at a time as PyTorch's serial kernel draws."""
    from . import _distribution_special as _special

    _gamma_dtype_check(a)
    flat = np.asarray(a).reshape(-1).tolist()
    single = np.dtype(a.dtype) == np.dtype(np.float32)
    serial = draws.SerialDraws(generator_or_default(generator), 2 * len(flat))
    try:
        out = [_special.sample_gamma(v, serial, single) for v in flat]
    finally:
        serial.finish()
    values = np.array(out, np.float64).reshape(np.shape(a)).astype(a.dtype)
    return np.asarray(np.maximum(values, np.finfo(a.dtype).tiny))


def _standard_gamma_grad_kernel(a, x):
    from . import _distribution_special as _special

    return np.asarray(_special.standard_gamma_grad(x, a)).astype(a.dtype)


def _standard_gamma_grad_derivative(g, *rest):
    raise NotImplementedError("the derivative for '_standard_gamma_grad' is not implemented.")


_standard_gamma_grad_derivative.not_implemented = True


def _empty_samples(r, dt):
    # Empty: the registry walk draws from generators seeded unlike PyTorch's, so non-empty
    # draws (and their gradients) differ; tests/test_programs_more13.py compares them after
    # seeding both alike.
    return [Sample((rand_array(r, s, dt, (0.2, 4.0)),), name=str(s)) for s in ((0,), (2, 0))]


standard_gamma_grad = register(
    "_standard_gamma_grad", kernel=_standard_gamma_grad_kernel,
    meta=lambda a, x: Spec(tuple(a.shape), a.dtype), node="StandardGammaGradBackward0",
    derivative=_standard_gamma_grad_derivative, gradcheck=False, tensor_args=(0, 1),
    nondiff_args=(1,),
    samples=lambda r, dt: [Sample((rand_array(r, (3, 4), dt, (0.2, 4.0)),
                                   rand_array(r, (3, 4), dt, (0.1, 3.0))))])
standard_gamma = register(
    "_standard_gamma", kernel=_standard_gamma_kernel, meta=_same,
    node="StandardGammaBackward0",
    derivative=lambda g, a, out: (g * call(standard_gamma_grad, a, out), None),
    save=lambda out, a, generator=None: (a, out), saved_names=("self", "result"),
    random=True, gradcheck=False, samples=_empty_samples)


def _sample_dirichlet_kernel(a, generator=None):
    """Dirichlet draws as PyTorch's CPU kernel makes them: Gamma draws of the concentration
    in double (at least the smallest normal double), divided by their sum over the last dim,
    then in the concentration's dtype within [its smallest normal value, the value below
    1]."""
    from . import _distribution_special as _special

    dt = np.dtype(a.dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise not_implemented_for("dirichlet", dt)
    flat = np.asarray(a, np.float64).reshape(-1).tolist()
    serial = draws.SerialDraws(generator_or_default(generator), 2 * len(flat))
    try:
        g = np.array([_special.sample_gamma(v, serial, False) for v in flat], np.float64)
    finally:
        serial.finish()
    g = np.maximum(g.reshape(np.shape(a)), np.finfo(np.float64).tiny)
    out = (g / g.sum(-1, keepdims=True)).astype(dt)
    return np.asarray(np.clip(out, np.finfo(dt).tiny, np.nextafter(dt.type(1), dt.type(0))))


sample_dirichlet = register(
    "_sample_dirichlet", kernel=_sample_dirichlet_kernel, meta=_same, node="NotImplemented",
    derivative=not_implemented_derivative("_sample_dirichlet"), random=True, gradcheck=False,
    samples=lambda r, dt: [Sample((rand_array(r, (3, 4), dt, (0.2, 4.0)),))])


def _dirichlet_grad_kernel(x, alpha, total):
    from . import _distribution_special as _special

    return np.asarray(_special.dirichlet_grad(x, alpha, total)).astype(x.dtype)


dirichlet_grad = register(
    "_dirichlet_grad", kernel=_dirichlet_grad_kernel,
    meta=lambda x, alpha, total: Spec(tuple(x.shape), x.dtype), node="NotImplemented",
    derivative=not_implemented_derivative("_dirichlet_grad"), gradcheck=False,
    tensor_args=(0, 1, 2),
    samples=lambda r, dt: [Sample((rand_array(r, (3, 4), dt, (0.05, 0.9)),
                                   rand_array(r, (3, 4), dt, (0.2, 3.0)),
                                   rand_array(r, (3, 4), dt, (3.5, 6.0))))])
