"""Half types (float16, bfloat16) with a scalar or 0-d operand: each op computes in float32
and rounds once, with its operands first rounded to the half type (add, sub, remainder,
fmod, pow, atan2, alpha) or the scalar taken at full precision (mul, div, floor and trunc
division, addcmul/addcdiv's value, lerp's weight), as PyTorch's CPU kernels: bit for bit
against torch. Also nan_to_num's half extremes, heaviside of NaN and pow's gradients where
the formulas meet 0 * inf."""

import numpy as np
import pytest
import torch

import fusegrad

DATA = np.linspace(-3, 3, 257).astype(np.float32)
DATA = DATA[DATA != 0]

OPS = {
    "add": lambda L, x, b: x + b, "sub": lambda L, x, b: x - b, "rsub": lambda L, x, b: b - x,
    "mul": lambda L, x, b: x * b, "div": lambda L, x, b: x / b,
    "remainder": lambda L, x, b: x % b, "fmod": lambda L, x, b: L.fmod(x, b),
    "pow": lambda L, x, b: x.abs() ** b, "rpow": lambda L, x, b: b ** x,
    "add_alpha": lambda L, x, b: L.add(x, b, alpha=3),
    "sub_alpha": lambda L, x, b: L.sub(x, b, alpha=0.3),
    "floor_divide": lambda L, x, b: x // b,
    "div_trunc": lambda L, x, b: L.div(x, b, rounding_mode="trunc"),
    "clamp": lambda L, x, b: L.clamp(x, min=b), "lerp": lambda L, x, b: L.lerp(x, x * 2, b),
    "addcmul": lambda L, x, b: L.addcmul(x, x, x, value=b),
    "addcdiv": lambda L, x, b: L.addcdiv(x, x, x + 5, value=b),
    "add_": lambda L, x, b: x.clone().add_(b), "mul_": lambda L, x, b: x.clone().mul_(b),
    "div_": lambda L, x, b: x.clone().div_(b),
    "atan2": lambda L, x, b: L.atan2(x, L.ones(()) * b),
}


@pytest.mark.parametrize("kind", ["number", "0-d float32"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_half_type_with_a_scalar_operand_matches_torch_bitwise(name, dtype, kind):
    results = []
    for lib in (torch, fusegrad):
        b = 1 / 3 if kind == "number" else lib.tensor(1 / 3, dtype=lib.float32)
        x = lib.tensor(DATA).to(getattr(lib, dtype))
        out = OPS[name](lib, x, b)
        assert str(out.dtype).split(".")[-1] == dtype
        results.append(out.float().numpy())
    np.testing.assert_array_equal(results[1], results[0])


def test_xlogy_of_half_types_rounds_the_logarithm_as_torch():
    for dtype in ("float16", "bfloat16"):
        results = [lib.xlogy(lib.tensor(DATA).to(getattr(lib, dtype)),
                             lib.tensor(1 / 3)).float().numpy() for lib in (torch, fusegrad)]
        np.testing.assert_array_equal(results[1], results[0])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_nan_to_num_uses_the_dtypes_own_extremes(dtype):
    results = []
    for lib in (torch, fusegrad):
        x = lib.tensor([float("nan"), float("inf"), -float("inf"), 1.5]).to(getattr(lib, dtype))
        results.append([lib.nan_to_num(x).double().tolist(),
                        lib.nan_to_num(x, 1.0, 2.0, -3.0).double().tolist()])
    assert results[1] == results[0]


def test_heaviside_of_nan_is_zero():
    results = [lib.heaviside(lib.tensor([float("nan"), 1.0, 0.0, -2.0]), lib.tensor(0.5)).tolist()
               for lib in (torch, fusegrad)]
    assert results[1] == results[0]


def _pow_grads(lib):
    x = lib.tensor([0.0, 2.0, 0.0, -1.5, 0.0], requires_grad=True)
    y = lib.tensor([0.0, 3.0, 2.0, 2.0, -1.0], requires_grad=True)
    (x ** y).sum().backward()
    e = lib.tensor([0.0, -1.0, 2.0, 0.5], requires_grad=True)
    (0 ** e).sum().backward()
    return [x.grad.tolist(), y.grad.tolist(), e.grad.tolist()]


def test_pow_gradients_where_the_formulas_meet_zero_times_infinity():
    np.testing.assert_allclose(np.array(sum(_pow_grads(fusegrad), []), dtype=float),
                               np.array(sum(_pow_grads(torch), []), dtype=float), rtol=1e-6)


ACTIVATIONS = ["gelu", "silu", "mish", "hardswish", "tanh", "sigmoid", "elu", "softplus",
               "leaky_relu", "hardsigmoid", "selu", "celu", "hardtanh", "relu6"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_gradients_of_half_types_round_once_as_torch(name, dtype):
    # Computed in float32 and rounded once, as PyTorch's kernels: bit for bit, except
    # float16's gelu, silu and sigmoid, which torch rounds differently (an ulp).
    grads = []
    for lib in (torch, fusegrad):
        x = lib.tensor(DATA).to(getattr(lib, dtype)).requires_grad_()
        fn = getattr(lib.nn.functional, name, None) or getattr(lib, name)
        y = fn(x)
        y.backward(lib.ones_like(y) * 0.7)
        grads.append(x.grad.float().numpy())
    if name in ("gelu", "silu", "sigmoid") and dtype == "float16":
        np.testing.assert_allclose(grads[1], grads[0], rtol=2 ** -9, atol=2 ** -24)
    else:
        np.testing.assert_array_equal(grads[1], grads[0])
