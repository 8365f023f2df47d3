"""Eager fidelity against torch 2.13, round 7: the gradients of `_foreach_maximum`/`minimum`
with a number (halved at a tie) and their in-place forms (no derivative), the layout of a
resized `out` of the LAPACK-backed functions (column-major), `mvlgamma`'s dtype errors, and
two draws made faster that must keep their values: `randperm` (against the sequential
shuffle it replaces) and the float32 uniform and normal draws of the C kernels (against the
NumPy path). Each case runs the same code on torch and fusegrad, or on both paths, and
compares what a program can see.
"""

from __future__ import annotations

import math
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.ops import _native  # noqa: E402

LIBS = (torch, fusegrad)


def _outcome(fn):
    """What a call gives: ("ok", value) or (exception type name, message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("ok", fn())
    except Exception as e:  # noqa: BLE001  (the exception is what is compared)
        return (type(e).__name__, str(e))


# ---------------------------------------------------------------- 1. foreach bounds

_BOUNDS = ["_foreach_maximum", "_foreach_minimum", "_foreach_clamp_min", "_foreach_clamp_max"]
_OTHERS = ["number", "scalar_list", "zero_dim", "tensor_list"]


def _other(T, kind: str, value: float):
    if kind == "number":
        return value
    if kind == "scalar_list":
        return [value, value]
    if kind == "zero_dim":
        return T.tensor(value)
    return [T.full((4,), value), T.full((4,), value)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("kind", _OTHERS)
@pytest.mark.parametrize("name", _BOUNDS)
def test_foreach_bound_gradients_at_ties_and_nan(name, kind, dtype):
    """Values and gradients with the bound tied by some elements (and a NaN among them)."""
    got = []
    for T in LIBS:
        dt = getattr(T, dtype)
        a = T.tensor([1.0, 2.0, 3.0, math.nan], dtype=dt, requires_grad=True)
        b = T.tensor([2.0, 0.1, 5.0, 2.0], dtype=dt, requires_grad=True)
        bound = 0.1 if dtype != "float16" else 2.0001  # (rounds to the tied 2.0 in half)
        res = getattr(T, name)([a * 1, b * 1], _other(T, kind, bound))
        ((res[0] * T.arange(1.0, 5.0, dtype=dt)).sum() + res[1].sum()).backward()
        got.append((res[0].tolist(), res[1].tolist(), a.grad.tolist(), b.grad.tolist()))
    assert str(got[1]) == str(got[0])


@pytest.mark.parametrize("bound", [2.0, math.nan, math.inf])
@pytest.mark.parametrize("name", ["_foreach_maximum", "_foreach_minimum"])
def test_foreach_extreme_with_a_number_splits_the_gradient(name, bound):
    grads = []
    for T in LIBS:
        a = T.tensor([1.0, 2.0, 3.0, math.nan, math.inf], requires_grad=True)
        getattr(T, name)([a * 1], bound)[0].sum().backward()
        grads.append(str(a.grad.tolist()))
    assert grads[1] == grads[0]


@pytest.mark.parametrize("kind", ["number", "scalar_list", "zero_dim"])
@pytest.mark.parametrize("name", ["_foreach_maximum_", "_foreach_minimum_"])
def test_foreach_extreme_in_place_with_numbers_has_no_derivative(name, kind):
    """The values are written; the node is NotImplemented, its backward PyTorch's error."""
    got = []
    for T in LIBS:
        a = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        b = T.tensor([4.0, 0.0, 1.0], requires_grad=True)
        xs = [a * 1, b * 1]
        other = _other(T, kind, 2.0)
        returned = getattr(T, name)(xs, other)
        node = xs[0].grad_fn.name()
        backward = _outcome(lambda xs=xs: xs[0].sum().backward())
        got.append((returned is xs, [x.tolist() for x in xs], node, backward))
    assert got[1] == got[0]


@pytest.mark.parametrize("name", ["_foreach_maximum_", "_foreach_minimum_"])
def test_foreach_extreme_in_place_without_grad_and_on_integers(name):
    got = []
    for T in LIBS:
        ints = [T.tensor([1, 2, 3]), T.tensor([5, -1, 2])]
        floats = [T.tensor([1.0, 2.5, 3.0])]
        getattr(T, name)(ints, 2)
        getattr(T, name)(floats, [2.5])
        refused = _outcome(lambda T=T: getattr(T, name)([T.tensor([1, 2])], 2.5))
        half = _outcome(lambda T=T: getattr(T, name)([T.ones(2, dtype=T.float16)], 1e10))
        got.append(([t.tolist() for t in ints], floats[0].tolist(), refused, half))
    assert got[1] == got[0]


_LIST_PAIRS = {
    "int_float": ([1, 2], "int64", [1.5, 2.5], "float32"),
    "float_int": ([1.0, 2.0], "float32", [1, 3], "int64"),
    "broadcast_other": ([1.0, 2.0], "float32", [[1.0, 2.0]] * 3, "float32"),
    "broadcast_self": ([[1.0, 2.0]] * 3, "float32", [1.0, 2.0], "float32"),
    "complex": ([1.0, 2.0], "float32", [1 + 1j, 2], "complex64"),
    "bool_int": ([True, False], "bool", [1, 0], "int64"),
    "nan": ([1.0, math.nan], "float32", [math.nan, 3.0], "float32"),
}


@pytest.mark.parametrize("pair", sorted(_LIST_PAIRS))
@pytest.mark.parametrize("name", ["_foreach_maximum_", "_foreach_minimum_"])
def test_foreach_extreme_in_place_with_tensors(name, pair):
    """Values, dtype errors and (for floats) the node and gradients of both lists."""
    a, adt, b, bdt = _LIST_PAIRS[pair]
    got = []
    for T in LIBS:
        def run(T=T):
            x = T.tensor(a, dtype=getattr(T, adt))
            y = T.tensor(b, dtype=getattr(T, bdt))
            grads = x.is_floating_point() and y.is_floating_point() and x.shape == \
                T.broadcast_shapes(x.shape, y.shape)
            x.requires_grad_(grads)
            y.requires_grad_(grads)
            xs = [x * 1 if grads else x]
            getattr(T, name)(xs, [y])
            out = [str(xs[0].tolist())]
            if grads:
                out.append(xs[0].grad_fn.name())
                (xs[0] * T.arange(1.0, xs[0].numel() + 1).view(xs[0].shape)).sum().backward()
                out += [x.grad.tolist(), y.grad.tolist()]
            return out

        got.append(_outcome(run))
    assert got[1] == got[0]


def test_foreach_extreme_with_a_number_compiled_keeps_the_split():
    """The per-tensor calls are recorded as eager runs them (the aot_eager backend)."""
    grads = []
    for T in LIBS:
        a = T.tensor([1.0, 2.0, 3.0], requires_grad=True)

        def f(x, T=T):
            return T._foreach_maximum([x * 1, x * 2], 2.0)

        r = T.compile(f, backend="aot_eager")(a)
        (r[0].sum() + r[1].sum()).backward()
        grads.append(a.grad.tolist())
    assert grads[1] == grads[0]


# ---------------------------------------------------------------- 2. LAPACK outs resized


def _square(T, n: int = 3, m: int = 3):
    return T.arange(1.0, n * m + 1).view(n, m) / 7 + T.eye(n, m) * 3


def _spd(T):
    a = _square(T)
    return a @ a.mT + T.eye(3)


def _reflectors(T):
    return T.arange(1.0, 7.0).view(3, 2) / 7, T.tensor([0.5, 1.5])


# name -> (call with out, the number of outputs)
LAPACK = {
    "linalg.inv": (lambda T, o: T.linalg.inv(_square(T), out=o), 1),
    "linalg.inv.batch": (lambda T, o: T.linalg.inv(T.stack([_square(T), _square(T) * 2]),
                                                   out=o), 1),
    "inverse": (lambda T, o: T.inverse(_square(T), out=o), 1),
    "linalg.inv_ex": (lambda T, o: T.linalg.inv_ex(_square(T), out=o), 2),
    "linalg.qr": (lambda T, o: T.linalg.qr(_square(T, 4, 3), out=o), 2),
    "qr": (lambda T, o: T.qr(_square(T, 4, 3), out=o), 2),
    "linalg.solve": (lambda T, o: T.linalg.solve(_square(T), T.ones(3, 2), out=o), 1),
    "linalg.solve.column": (lambda T, o: T.linalg.solve(_square(T), T.ones(3, 1), out=o), 1),
    "linalg.solve.batch": (lambda T, o: T.linalg.solve(
        T.stack([_square(T), _square(T) * 2]), T.ones(2, 3, 2), out=o), 1),
    "linalg.solve.vector": (lambda T, o: T.linalg.solve(_square(T), T.ones(3), out=o), 1),
    "linalg.solve_ex": (lambda T, o: T.linalg.solve_ex(_square(T), T.ones(3, 2), out=o), 2),
    "linalg.cholesky": (lambda T, o: T.linalg.cholesky(_spd(T), out=o), 1),
    "linalg.cholesky.upper": (lambda T, o: T.linalg.cholesky(_spd(T), upper=True, out=o), 1),
    "cholesky": (lambda T, o: T.cholesky(_spd(T), out=o), 1),
    "linalg.cholesky_ex": (lambda T, o: T.linalg.cholesky_ex(_spd(T), out=o), 2),
    "cholesky_inverse": (lambda T, o: T.cholesky_inverse(T.linalg.cholesky(_spd(T)), out=o), 1),
    "cholesky_solve": (lambda T, o: T.cholesky_solve(T.ones(3, 2), T.linalg.cholesky(_spd(T)),
                                                     out=o), 1),
    "orgqr": (lambda T, o: T.orgqr(*_reflectors(T), out=o), 1),
    "linalg.householder_product": (lambda T, o: T.linalg.householder_product(
        *_reflectors(T), out=o), 1),
    "linalg.eigh": (lambda T, o: T.linalg.eigh(_spd(T), out=o), 2),
    "linalg.eig": (lambda T, o: T.linalg.eig(_spd(T), out=o), 2),
    "linalg.svd": (lambda T, o: T.linalg.svd(_square(T, 4, 3), out=o), 3),
    "linalg.svd.thin": (lambda T, o: T.linalg.svd(_square(T, 4, 3), full_matrices=False,
                                                  out=o), 3),
    "svd": (lambda T, o: T.svd(_square(T, 4, 3), out=o), 3),
    "linalg.lu_factor": (lambda T, o: T.linalg.lu_factor(_square(T), out=o), 2),
    "linalg.lu_factor_ex": (lambda T, o: T.linalg.lu_factor_ex(_square(T), out=o), 3),
    "linalg.lu": (lambda T, o: T.linalg.lu(_square(T), out=o), 3),
    "linalg.lu_solve": (lambda T, o: T.linalg.lu_solve(*T.linalg.lu_factor(_square(T)),
                                                       T.ones(3, 2), out=o), 1),
    "lu_solve": (lambda T, o: T.lu_solve(T.ones(3, 2), *T.linalg.lu_factor(_square(T)), out=o),
                 1),
    "linalg.ldl_factor": (lambda T, o: T.linalg.ldl_factor(_spd(T), out=o), 2),
    "linalg.ldl_factor_ex": (lambda T, o: T.linalg.ldl_factor_ex(_spd(T), out=o), 3),
    "linalg.ldl_solve": (lambda T, o: T.linalg.ldl_solve(*T.linalg.ldl_factor(_spd(T)),
                                                         T.ones(3, 2), out=o), 1),
    "triangular_solve": (lambda T, o: T.triangular_solve(T.ones(3, 2), T.triu(_square(T)),
                                                         out=o), 2),
    "linalg.solve_triangular": (lambda T, o: T.linalg.solve_triangular(
        T.triu(_square(T)), T.ones(3, 2), upper=True, out=o), 1),
    "linalg.pinv": (lambda T, o: T.linalg.pinv(_square(T, 4, 3), out=o), 1),
    "linalg.matrix_power": (lambda T, o: T.linalg.matrix_power(_square(T), 3, out=o), 1),
    "nonzero": (lambda T, o: T.nonzero(T.tensor([[1, 0], [1, 1]]), out=o), 1),
}


def _outs(T, plain: list, layout: str) -> list:
    outs = []
    for p in plain:
        if layout == "empty":
            outs.append(T.empty(0, dtype=p.dtype))
        elif layout == "wrong_shape":
            outs.append(T.empty(7, dtype=p.dtype))
        elif layout == "right" or p.dim() < 2:
            outs.append(T.empty(p.shape, dtype=p.dtype))
        else:  # the right shape, transposed in memory
            outs.append(T.empty(p.shape[:-2] + p.shape[-2:][::-1], dtype=p.dtype).mT)
    return outs


@pytest.mark.parametrize("layout", ["empty", "wrong_shape", "right", "transposed"])
@pytest.mark.parametrize("name", sorted(LAPACK))
def test_lapack_out_layout(name, layout):
    """Shapes, strides and contiguity of each `out` after the call, and its values."""
    call, count = LAPACK[name]
    got = []
    for T in LIBS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain = call(T, None)
            plain = list(plain) if isinstance(plain, tuple) else [plain]
            outs = _outs(T, plain, layout)
            call(T, outs if count > 1 else outs[0])
        got.append([(tuple(o.shape), o.stride(), o.is_contiguous(), o.numpy().copy())
                    for o in outs])
    for (ts, tst, tc, tv), (os_, ost, oc, ov) in zip(*got):
        assert (os_, ost, oc) == (ts, tst, tc)
        if name.startswith(("linalg.svd", "svd", "linalg.eig")) and ov.ndim >= 2:
            # (singular and eigen vectors up to the signs a LAPACK build picks)
            ov, tv = np.abs(ov), np.abs(tv)
        np.testing.assert_allclose(ov, tv, rtol=1e-4, atol=1e-5)


def test_lapack_out_resized_under_fake_tensors_is_column_major():
    """A fake `out` (shapes only) takes the strides a real one would."""
    from fusegrad._fake import FakeTensorMode

    with FakeTensorMode():
        a = fusegrad.empty(3, 3)
        out = fusegrad.empty(0)
        fusegrad.linalg.inv(a, out=out)
        strides = out.stride()
    ref = torch.empty(0)
    torch.linalg.inv(torch.eye(3), out=ref)
    assert strides == ref.stride()


# ---------------------------------------------------------------- 3. mvlgamma


MVLGAMMA = {
    "bool": lambda T: T.mvlgamma(T.tensor([True, False]), 2),
    "bool.p0": lambda T: T.mvlgamma(T.tensor([True]), 0),
    "bool.method_": lambda T: T.tensor([True]).mvlgamma_(1),
    "p0": lambda T: T.mvlgamma(T.tensor([2.0]), 0),
    "int64.inplace": lambda T: T.tensor([2, 3]).mvlgamma_(2),
    "uint8.inplace": lambda T: T.tensor([2, 3], dtype=T.uint8).mvlgamma_(1),
    "int32.out_int": lambda T: T.mvlgamma(T.tensor([2, 3], dtype=T.int32), 2,
                                          out=T.empty(2, dtype=T.int32)),
    "float.out_int": lambda T: T.mvlgamma(T.tensor([2.0, 3.0]), 2,
                                          out=T.empty(2, dtype=T.int64)),
    "int64.out_int.keywords": lambda T: T.mvlgamma(input=T.tensor([2, 3]), p=2,
                                                   out=T.empty(2, dtype=T.int64)),
    "int64.out_double": lambda T: T.mvlgamma(T.tensor([2, 3]), 3,
                                             out=T.empty(2, dtype=T.float64)),
    "complex": lambda T: T.mvlgamma(T.tensor([2.0 + 0j]), 2),
    "special.multigammaln.int": lambda T: T.special.multigammaln(T.tensor([2, 3]), 2),
    "float64.p4": lambda T: T.mvlgamma(T.tensor([1.6, 2.0, 7.25], dtype=T.float64), 4),
    "float32.inplace": lambda T: T.tensor([1.6, 2.0, 7.25]).mvlgamma_(3),
}


@pytest.mark.parametrize("name", sorted(MVLGAMMA))
def test_mvlgamma_dtypes_and_errors(name):
    theirs = _outcome(lambda: MVLGAMMA[name](torch))
    ours = _outcome(lambda: MVLGAMMA[name](fusegrad))
    if theirs[0] != "ok":
        assert ours == theirs
        return
    assert ours[0] == "ok", ours
    assert str(ours[1].dtype) == str(theirs[1].dtype)
    # (the float lgamma of the C library differs in the last bit now and then)
    np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy(), rtol=1e-6)


# ---------------------------------------------------------------- 4. randperm


def _sequential_randperm(generator, n: int) -> np.ndarray:
    """The shuffle fusegrad drew randperm with before (and the reference for its order):
    Fisher-Yates, position i swapped with i + word % (n - i), one step at a time."""
    perm = list(range(n))
    if n > 1:
        words = generator._words(n - 1) % np.arange(n, 1, -1, dtype=np.uint64)
        for i, w in enumerate(words.tolist()):
            j = i + w
            perm[i], perm[j] = perm[j], perm[i]
    return np.array(perm, dtype=np.int64)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 16, 17, 1000, 4099, 200_003])
@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_randperm_keeps_its_sequence(seed, n):
    fusegrad.manual_seed(seed)
    drawn = fusegrad.randperm(n)
    after = fusegrad.rand(2).tolist()
    fusegrad.manual_seed(seed)
    expected = _sequential_randperm(fusegrad.default_generator, n)
    assert drawn.dtype == fusegrad.int64
    assert drawn.numpy().tolist() == expected.tolist()
    assert fusegrad.rand(2).tolist() == after  # as many words drawn
    g = fusegrad.Generator().manual_seed(seed + 1)
    drawn = fusegrad.randperm(n, generator=g, dtype=fusegrad.int32)
    expected = _sequential_randperm(fusegrad.Generator().manual_seed(seed + 1), n)
    assert drawn.dtype == fusegrad.int32 and drawn.numpy().tolist() == expected.tolist()


def _swaps_in_turn(js: np.ndarray, n: int) -> list:
    perm = list(range(n))
    for i, j in enumerate(js.tolist()):
        perm[i], perm[j] = perm[j], perm[i]
    return perm


@pytest.mark.parametrize("pattern", ["self", "last", "next", "random", "mixed"])
@pytest.mark.parametrize("n", [2, 513, 600, 3000])
def test_randperm_swaps_any_pattern(pattern, n):
    """The shuffle's swaps, whatever positions they name (each j_i >= i), as the loop does
    them: every position swapped with itself, all with the last, chains of neighbours."""
    from fusegrad._random_draws import _swapped_in_turn

    i = np.arange(n - 1)
    rng = np.random.default_rng(n)
    js = {"self": i, "last": np.full(n - 1, n - 1), "next": i + 1,
          "random": i + rng.integers(0, n - i),
          "mixed": np.where(rng.random(n - 1) < 0.5, i, np.minimum(i + 1 + i % 3, n - 1))
          }[pattern].astype(np.int64)
    assert _swapped_in_turn(js, n).tolist() == _swaps_in_turn(js, n)


# ---------------------------------------------------------------- 5. float32 draws in C

DRAWS = {
    "randn": lambda: fusegrad.randn(10_007),
    "randn.16": lambda: fusegrad.randn(16),
    "randn.33": lambda: fusegrad.randn(33),
    "normal_": lambda: fusegrad.empty(5003).normal_(0.5, 3.0),
    "normal_.tiny": lambda: fusegrad.empty(40).normal_(-1e-3, 1e-5),
    "rand": lambda: fusegrad.rand(10_007),
    "uniform_": lambda: fusegrad.empty(10_007).uniform_(-0.3, 0.7),
    "uniform_.huge": lambda: fusegrad.empty(1000).uniform_(-1e30, 1e30),
    "uniform_.half": lambda: fusegrad.empty(1000, dtype=fusegrad.float16).uniform_(-2, 2),
    "randn.bfloat16": lambda: fusegrad.randn(1000, dtype=fusegrad.bfloat16),
    "kaiming_uniform_": lambda: fusegrad.nn.init.kaiming_uniform_(fusegrad.empty(64, 27),
                                                                  a=math.sqrt(5)),
    "kaiming_normal_": lambda: fusegrad.nn.init.kaiming_normal_(fusegrad.empty(64, 3, 3, 3),
                                                                mode="fan_out"),
}


@pytest.mark.parametrize("seed", [0, 7, 2 ** 33])
@pytest.mark.parametrize("name", sorted(DRAWS))
def test_c_draws_equal_the_numpy_draws(name, seed):
    got = []
    for on in (True, False):
        with _native.native_kernels(on):
            fusegrad.manual_seed(seed)
            got.append(DRAWS[name]().numpy().tobytes())
            got.append(fusegrad.rand(3).tolist())
    assert got[0] == got[2] and got[1] == got[3]


def test_model_initial_values_with_and_without_c_draws():
    """A small ResNet's state dict, bit for bit, whichever path drew it."""
    import fusegrad.models as models

    got = []
    for on in (True, False):
        with _native.native_kernels(on):
            fusegrad.manual_seed(3)
            model = models.resnet18(num_classes=10)
            got.append({k: v.numpy().tobytes() for k, v in model.state_dict().items()})
    assert got[0] == got[1]


# ---------------------------------------------------------------- 6. found by sweeps

NARROW = [(s, n) for s in (-4, -3, -1, 0, 3, 4) for n in (-1, 0, 1, 2, 5)]


@pytest.mark.parametrize("fn", ["narrow", "narrow_copy"])
@pytest.mark.parametrize("start, length", NARROW)
def test_narrow_start_and_length_checks(fn, start, length):
    """A start outside [-size, size] is PyTorch's IndexError; the sum check names the
    wrapped start; narrow refuses a negative length first."""
    got = [_outcome(lambda T=T: tuple(getattr(T.arange(12.0).view(3, 4), fn)(0, start, length)
                                      .shape)) for T in LIBS]
    assert got[1] == got[0]


@pytest.mark.parametrize("fn", ["narrow", "narrow_copy"])
def test_narrow_of_a_zero_dim_tensor(fn):
    got = [_outcome(lambda T=T: getattr(T.tensor(1.0), fn)(0, 0, 1)) for T in LIBS]
    assert got[1][0] != "ok" and got[1] == got[0]


_DRAW_DTYPES = ["int64", "bool", "uint8", "int8", "complex64", "float16"]
_DRAWS_CHECKED = ["exponential_()", "exponential_(-1.0)", "cauchy_()", "cauchy_(0, -1.0)",
                  "geometric_(0.5)", "geometric_(1.5)", "log_normal_()", "log_normal_(1, -1.0)",
                  "normal_(0, -1.0)", "bernoulli_(0.5)", "bernoulli_(1.5)", "random_()",
                  "random_(3)", "random_(-1, 3)", "random_(0, 300)", "random_(-129, 0)",
                  "random_(0, 2 ** 63)", "random_(2, 2)"]


@pytest.mark.parametrize("dtype", _DRAW_DTYPES)
@pytest.mark.parametrize("draw", _DRAWS_CHECKED)
def test_in_place_draws_refuse_as_torch_does(draw, dtype):
    """The parameter checks first, then the dtype's (each distribution's own wording), then
    random_'s bounds for the dtype: what is drawn, or the error."""
    got = []
    for T in LIBS:
        t = T.ones(2, dtype=getattr(T, dtype))
        got.append(_outcome(lambda T=T, t=t: (eval(f"t.{draw}") is t, str(t.dtype))))  # noqa: S307
    assert got[1] == got[0]


ADDC = [(f, self_, pair, v)
        for f in ("addcmul", "addcdiv", "addcmul_", "addcdiv_")
        for self_ in ("float32", "int64", "uint8", "int8", "bool")
        for pair in (("int64", "int64"), ("float32", "int64"), ("bool", "int64"),
                     ("bool", "bool"))
        for v in (1, 0.5, -1.5, -1, 300)]


@pytest.mark.parametrize("fn, self_dtype, pair, value", ADDC)
def test_addcmul_addcdiv_integer_values_and_errors(fn, self_dtype, pair, value):
    """An integer result takes the value converted to its type first (0.5 is 0, with the
    overflow error); two integral tensors never divide; bool has no addcmul."""
    got = []
    for T in LIBS:
        def run(T=T):
            a = T.tensor([1, 2, 3]).to(getattr(T, self_dtype))
            t1 = T.tensor([3, 1, 0]).to(getattr(T, pair[0]))
            t2 = T.tensor([2, 2, 1]).to(getattr(T, pair[1]))
            if fn.endswith("_"):
                return getattr(a, fn)(t1, t2, value=value).tolist()
            r = getattr(T, fn)(a, t1, t2, value=value)
            return str(r.dtype), r.tolist()

        got.append(_outcome(run))
    if got[0][0] == "ok" and got[1][0] == "ok":
        np.testing.assert_allclose(np.array(got[1][1][-1], dtype=float),
                                   np.array(got[0][1][-1], dtype=float), rtol=1e-6)
        assert got[1][1][:-1] == got[0][1][:-1]
    else:
        assert got[1] == got[0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bessel_j1_keeps_the_sign_of_zero(dtype):
    got = [T.special.bessel_j1(T.tensor([-0.0, 0.0, -1e-30], dtype=getattr(T, dtype))).tolist()
           for T in LIBS]
    np.testing.assert_allclose(got[1], got[0], rtol=1e-12)
    assert [math.copysign(1, v) for v in got[1]] == [math.copysign(1, v) for v in got[0]]


_TENSORS_ONLY = ["logaddexp", "logaddexp2", "hypot", "nextafter", "heaviside", "fmin", "fmax",
                 "gcd", "lcm", "igamma", "igammac", "ldexp", "logical_and", "logical_or",
                 "logical_xor", "atan2", "maximum", "minimum"]


@pytest.mark.parametrize("args", ["x, 2", "2, x", "x, 2.5", "x, True", "x, None",
                                  "2, 3", "x, T.tensor(2.0)"])
@pytest.mark.parametrize("name", _TENSORS_ONLY)
def test_functions_of_two_tensors_refuse_numbers(name, args):
    """PyTorch's parser takes tensors only for both operands of these (its message names
    the parameter and its position)."""
    got = []
    for T in LIBS:
        x = T.tensor([1.0, 2.0]) if name not in ("gcd", "lcm") else T.tensor([4, 6])
        got.append(_outcome(lambda T=T, x=x: getattr(T, name)(
            *eval(f"({args},)")).tolist()))  # noqa: S307
    _same(got)


@pytest.mark.parametrize("other", ["2", "2.5", "True", "None", "T.tensor(2.0)"])
@pytest.mark.parametrize("name", _TENSORS_ONLY)
def test_methods_of_two_tensors_refuse_numbers(name, other):
    """The same refusal through the Tensor method, which counts positions after self."""
    got = []
    for T in LIBS:
        x = T.tensor([1.0, 2.0]) if name not in ("gcd", "lcm") else T.tensor([4, 6])
        got.append(_outcome(lambda T=T, x=x: getattr(x, name)(eval(other)).tolist()))  # noqa: S307
    _same(got)


def _same(got: list) -> None:
    """The same error, or values equal to float32 rounding."""
    if got[0][0] == "ok" and got[1][0] == "ok":
        np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-6)
    else:
        assert got[1] == got[0]


_IN_PLACE_TENSORS_ONLY = ["atan2_", "arctan2_", "logical_and_", "logical_or_", "logical_xor_",
                          "hypot_", "nextafter_", "heaviside_", "gcd_", "lcm_", "ldexp_",
                          "igamma_", "igammac_"]


@pytest.mark.parametrize("other", ["2", "2.5", "True", "None", "[1.0, 2.0]", "T.tensor(2.0)",
                                   "T.tensor([3.0, 1.0])"])
@pytest.mark.parametrize("name", _IN_PLACE_TENSORS_ONLY)
def test_in_place_methods_of_two_tensors_refuse_numbers(name, other):
    got = []
    for T in LIBS:
        x = T.tensor([1.0, 2.0]) if name not in ("gcd_", "lcm_") else T.tensor([4, 6])
        y = eval(other)  # noqa: S307
        if name in ("gcd_", "lcm_") and isinstance(y, T.Tensor):
            y = y.long()
        got.append(_outcome(lambda x=x, y=y: getattr(x, name)(y).tolist()))
    _same(got)


HEAVISIDE = {
    "function.values=": lambda T, x, y: T.heaviside(x, values=y),
    "method.values=": lambda T, x, y: x.heaviside(values=y),
    "in_place.values=": lambda T, x, y: x.clone().heaviside_(values=y),
    "function.list": lambda T, x, y: T.heaviside(x, [1.0]),
    "method.number": lambda T, x, y: x.heaviside(2),
    "out": lambda T, x, y: T.heaviside(x, y, out=T.empty(3)),
}


@pytest.mark.parametrize("name", sorted(HEAVISIDE))
def test_heaviside_names_its_values(name):
    got = []
    for T in LIBS:
        x, y = T.tensor([0.0, 2.0, -1.0]), T.tensor([5.0, 5.0, 5.0])
        got.append(_outcome(lambda T=T, x=x, y=y: HEAVISIDE[name](T, x, y).tolist()))
    assert got[1] == got[0]
