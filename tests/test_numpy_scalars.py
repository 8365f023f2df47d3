"""NumPy scalars (np.float64, np.float32, np.float16, np.int64, np.int32, np.bool_) where
PyTorch takes a number: each counts as the Python number it holds (an np.bool_ as a float),
so `ones(3) * np.float64(0.1)` is float32. Eager and compiled code against torch."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

SCALARS = {
    "f64": np.float64(0.1), "f32": np.float32(0.1), "f16": np.float16(0.1),
    "i64": np.int64(2), "i32": np.int32(3), "bool": np.bool_(True),
}

# Expressions over `T` (the library), `f` (float32), `i` (int64), `h` (float16), `b` (bool)
# and `s` (the NumPy scalar).
EXPRESSIONS = [
    "f * s", "s * f", "f + s", "s + f", "f - s", "s - f", "f / s", "s / f", "f ** s", "s ** f",
    "i * s", "s * i", "i + s", "i / s", "s - i", "h * s", "s * h", "b * s", "b + s", "s * b",
    "f < s", "s < f", "f == s", "s == f", "i >= s", "f != s", "i // s", "s // i", "i % s",
    "T.add(f, s)", "T.add(i, s)", "T.mul(i, s)", "T.sub(f, s)", "T.div(i, s)",
    "T.pow(f, s)", "T.pow(s, f)", "T.pow(s, i)",
    "T.where(f > 0, f, s)", "T.where(f > 0, s, f)", "T.where(f > 0, i, s)",
    "T.clamp(f, s)", "T.clamp(f, max=s)", "f.clamp(min=s)",
    "T.full((2,), s)", "T.full_like(f, s)", "f.new_full((2,), s)",
    "f.clone().fill_(s)", "f.clone().add_(s)", "f.clone().mul_(s)", "i.clone().add_(s)",
    "f.masked_fill(f > 1, s)", "T.lerp(f, f * 2, s)", "T.eq(f, s)", "f.add(s)", "f.mul(s)",
    "T.tensor(s)", "T.tensor([s, s])", "T.as_tensor(s)", "T.arange(s)", "T.arange(0, 4, s)",
    "T.linspace(0, s, 3)", "T.addcmul(f, f, f, value=s)", "T.clamp_min(f, s)",
    "T.nan_to_num(f, nan=s)", "T.where(f > 0, s, s)", "T.where(f > 0, s, 1)",
    "T.remainder(s, i)", "T.fmod(f, s)", "T.xlogy(f, s)", "T.copysign(f, s)", "f.ge_(s)",
    "T.clamp(i, s, s)", "T.scalar_tensor(s)", "T.nn.functional.leaky_relu(f, s)",
    "T.nn.functional.threshold(f, s, s)", "T.nn.functional.elu(f, s)",
]


def _env(lib, s):
    return {"T": lib, "s": s,
            "f": lib.tensor([0.5, 1.5, -2.0]), "i": lib.tensor([1, 2, 7]),
            "h": lib.tensor([0.5, 1.5, -2.0], dtype=lib.float16),
            "b": lib.tensor([True, False, True])}


def _run(lib, expr, s):
    try:
        return eval(expr, _env(lib, s))  # noqa: S307 - fixed expressions from this file
    except Exception as e:  # noqa: BLE001 - the error type is compared with torch's
        return e


def _same(ours, theirs, expr):
    if not isinstance(theirs, (torch.Tensor, Exception)):  # `x != array` is a Python bool
        assert ours is theirs, (expr, ours, theirs)
        return
    if isinstance(theirs, Exception):
        assert type(ours).__name__ == type(theirs).__name__, (expr, ours, theirs)
        return
    assert not isinstance(ours, Exception), (expr, ours)
    assert str(ours.dtype) == str(theirs.dtype), (expr, ours.dtype, theirs.dtype)
    np.testing.assert_allclose(ours.numpy().astype(np.float64),
                               theirs.numpy().astype(np.float64), rtol=1e-6, err_msg=expr)


@pytest.mark.parametrize("kind", sorted(SCALARS))
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_eager_matches_torch(expr, kind):
    s = SCALARS[kind]
    _same(_run(fusegrad, expr, s), _run(torch, expr, s), expr)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("scalar", [np.uint8(3), np.uint64(3), np.int8(-2), np.int16(5),
                                    np.longdouble(0.5), np.complex64(1.5)],
                         ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("expr", ["f * s", "i * s", "b * s", "T.full((2,), s)", "i + s"])
def test_other_numpy_scalar_types(expr, scalar):
    _same(_run(fusegrad, expr, scalar), _run(torch, expr, scalar), expr)


def test_numpy_integers_as_dims_and_sizes():
    x, y = fusegrad.ones(2, 3), torch.ones(2, 3)
    for expr in ("x.sum(np.int64(1))", "x.cumsum(np.int64(1))", "x.transpose(np.int64(0), 1)",
                 "x.view(np.int64(3), 2)", "x[np.int64(1)]", "x.unsqueeze(np.int32(0))",
                 "x.flatten(np.int64(0))", "T.cat([x, x], np.int64(0))",
                 "T.full((np.int64(2),), np.int64(1))"):
        ours = eval(expr, {"x": x, "np": np, "T": fusegrad})  # noqa: S307
        theirs = eval(expr, {"x": y, "np": np, "T": torch})  # noqa: S307
        assert tuple(ours.shape) == tuple(theirs.shape), expr
        assert str(ours.dtype) == str(theirs.dtype), expr


def test_numpy_bool_is_no_flag():
    # PyTorch's bool arguments refuse np.bool_ (it is a number to PyTorch): TypeError.
    for lib in (torch, fusegrad):
        with pytest.raises(TypeError):
            lib.ones(2, 3).sum(1, keepdim=np.bool_(True))


@pytest.mark.parametrize("backend", [None, "eager"])
@pytest.mark.parametrize("kind", sorted(SCALARS))
def test_compiled_matches_eager_and_torch(backend, kind):
    s = SCALARS[kind]

    def fn(T, f, i, b, arg):
        # `s` from the closure (a constant in the graph) and `arg` passed in.
        return (f * s, s - f, i * arg, b + s, T.where(f > 0, f, arg), T.full((2,), s),
                T.clamp(f, arg), f.clone().add_(s), f < arg)

    ours = fusegrad.compile(lambda f, i, b, arg: fn(fusegrad, f, i, b, arg),
                            **({} if backend is None else {"backend": backend}))
    env = _env(fusegrad, s)
    compiled = ours(env["f"], env["i"], env["b"], s)
    eager = fn(fusegrad, env["f"], env["i"], env["b"], s)
    tenv = _env(torch, s)
    theirs = fn(torch, tenv["f"], tenv["i"], tenv["b"], s)
    for c, e, t in zip(compiled, eager, theirs):
        _same(c, t, f"compiled {kind}")
        _same(e, t, f"eager {kind}")


# NumPy arrays (0-d ones included) are not numbers: PyTorch's operators leave them to NumPy,
# which computes on `x.__array__()` with its own promotion and wraps the result as a tensor
# (no autograd); `array * x` is a TypeError, as is `x < array`; `x == array` is elementwise.
ARRAYS = {"0d-f64": np.array(0.1), "0d-i64": np.array(2), "0d-f32": np.array(0.5, np.float32),
          "1d-f64": np.array([0.1, 0.2, 0.3])}
ARRAY_EXPRESSIONS = [
    "f * s", "s * f", "f + s", "s + f", "f - s", "s - f", "f / s", "s / f", "f ** s", "s ** f",
    "i * s", "i / s", "h * s", "f < s", "s < f", "f == s", "f != s",
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's __array_wrap__ signature
@pytest.mark.parametrize("kind", sorted(ARRAYS))
@pytest.mark.parametrize("expr", ARRAY_EXPRESSIONS)
def test_numpy_array_operands_match_torch(expr, kind):
    s = ARRAYS[kind]
    _same(_run(fusegrad, expr, s), _run(torch, expr, s), expr)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_numpy_array_operands_leave_autograd():
    for lib in (fusegrad, torch):
        x = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires "
                                               "grad"):
            x * np.array(2.0)
        y = lib.ones(3)
        z = y
        z += np.array(2.0)  # NumPy's float64 result, a new tensor
        assert z is not y and str(z.dtype).endswith("float64") and z.grad_fn is None
        assert y.tolist() == [1.0, 1.0, 1.0]
