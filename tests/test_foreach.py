"""`torch._foreach_*` against torch: every name, its overloads (a number, one number per
tensor, one 0-dim tensor, one tensor per tensor), values and dtypes on lists of tensors of
different shapes and dtypes, in-place writes into the given tensors, gradients, and
PyTorch's error messages.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.ops import foreach as table  # noqa: E402
from fusegrad.ops import surface  # noqa: E402

RNG = np.random.default_rng(0)
SHAPES = ((2, 3), (4,), ())
FLOATS = (np.float32, np.float64)


def arrays(dtype=np.float32, lo=-2.0, hi=2.0, shapes=SHAPES) -> list:
    if np.dtype(dtype).kind in "iu":
        return [RNG.integers(1, 6, size=s).astype(dtype) for s in shapes]
    return [RNG.uniform(lo, hi, size=s).astype(dtype) for s in shapes]


def mixed() -> list:
    """A list of float32 and float64 tensors (PyTorch groups nothing by dtype on CPU)."""
    return [RNG.uniform(0.2, 2.0, size=s).astype(d) for s, d in zip(SHAPES, FLOATS * 2)]


def convert(lib, value, grad=False):
    """NumPy arrays (in lists and tuples, too) as tensors of `lib`; leaves requiring grad for
    float arrays when `grad`."""
    if isinstance(value, np.ndarray):
        t = lib.from_numpy(value.copy())
        if grad and value.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    if isinstance(value, (list, tuple)):
        return type(value)(convert(lib, v, grad) for v in value)
    return value


def leaves(args) -> list:
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out += leaves(a)
        elif hasattr(a, "requires_grad") and a.requires_grad and a.grad_fn is None:
            out.append(a)
    return out


def same_tensor(f, t, tol) -> None:
    assert str(f.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (f.dtype, t.dtype)
    assert tuple(f.shape) == tuple(t.shape), (f.shape, t.shape)
    if t.dtype in (torch.bfloat16, torch.float16):
        np.testing.assert_allclose(f.detach().float().numpy(), t.detach().float().numpy(),
                                   rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), rtol=tol,
                                   atol=tol, equal_nan=True)


def same_error(run_torch, run_fusegrad) -> bool:
    """If torch raises, fusegrad raises the same type and message (True); else False."""
    try:
        run_torch()
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)) as got:
            run_fusegrad()
        assert str(got.value) == str(e)
        return True
    return False


def compare(fn, *data, tol=1e-5, grad=False, prepare=None, torch_fn=None, message=None):
    """Run `fn(lib, *args)` on both libraries with the same data and compare: the errors, or
    the results (a tuple of tensors for out-of-place forms; for in-place ones the argument
    written into itself, whose tensors are the ones given, updated), and with `grad` the
    gradients of every leaf for a random cotangent. `prepare(lib, args)` turns leaves into
    the arguments (non-leaves for in-place forms); `torch_fn` is what runs on torch instead
    of `fn` (the per-tensor ops, where PyTorch's foreach backward fails); `message(text)`
    rewrites both error messages before the comparison."""
    ta, fa = convert(torch, data, grad), convert(fusegrad, data, grad)
    tx = prepare(torch, ta) if prepare else ta
    fx = prepare(fusegrad, fa) if prepare else fa
    f_before = [list(a) if isinstance(a, (list, tuple)) else a for a in fx]
    try:
        t_out = (torch_fn or fn)(torch, *tx)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)) as got:
            fn(fusegrad, *fx)
        same = message or str
        assert same(str(got.value)) == same(str(e))
        return None
    f_out = fn(fusegrad, *fx)
    if torch_fn is None:
        assert type(f_out) is type(t_out), (type(f_out), type(t_out))
    if isinstance(t_out, list):  # an in-place form: the list written into, its own tensors
        k = next(i for i, a in enumerate(tx) if a is t_out)
        assert f_out is fx[k]
        assert all(a is b for a, b in zip(f_out, f_before[k]))
    assert len(f_out) == len(t_out)
    for f, t in zip(f_out, t_out):
        same_tensor(f, t, tol)
    if grad:
        rng = np.random.default_rng(1)
        pairs = [(f, t) for f, t in zip(f_out, t_out) if t.requires_grad]
        assert len(pairs) == len([f for f in f_out if f.requires_grad])
        if pairs:
            tl = fl = 0
            for f, t in pairs:
                cot = rng.standard_normal(tuple(t.shape)).astype(np.float64)
                tl = tl + (t.double() * torch.from_numpy(cot)).sum()
                fl = fl + (f.double() * fusegrad.from_numpy(cot)).sum()
            tl.backward()
            fl.backward()
            for f, t in zip(leaves(fa), leaves(ta)):
                if t.grad is None:
                    assert f.grad is None or not f.grad.numpy().any()
                else:
                    np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=tol * 10,
                                               atol=tol * 10, equal_nan=True)
    return f_out, t_out


def per_tensor(op, inplace=False, **kwargs):
    """The loop PyTorch's foreach functions run, written with torch's per-tensor ops."""
    def run(lib, tensors, other):
        others = other if isinstance(other, list) else [other] * len(tensors)
        if inplace:
            for t, o in zip(tensors, others):
                getattr(t, f"{op}_")(o, **kwargs)
            return tensors
        return tuple(getattr(t, op)(o, **kwargs) for t, o in zip(tensors, others))

    return run


def long_int(text: str) -> str:
    """PyTorch's clamp kernels name int64 `long int` in their cast error where its other ops
    say `Long`; the per-tensor ops' spelling is theirs to match, not the loop's."""
    return text.replace("type long int", "type Long")


def copies(lib, args):
    """Non-leaf copies of the first list (in-place forms on tensors of a graph)."""
    return (type(args[0])(x * 1 for x in args[0]), *args[1:])


def call(name, *args, **kwargs):
    return lambda lib, *data: getattr(lib, name)(*data, *args, **kwargs)


# ---------------------------------------------------------------- the surface


def test_names_are_torchs():
    """fusegrad has every `_foreach_*` name torch has, and no other."""
    theirs = sorted(n for n in dir(torch) if n.startswith("_foreach_"))
    ours = sorted(n for n in dir(fusegrad) if n.startswith("_foreach_"))
    assert ours == theirs == table.names()


def test_surface_flags_the_inplace_forms():
    """Each name is a composite of the surface, flagged in place exactly when it writes into
    its first argument, and is a function of fusegrad's namespace with a docstring."""
    for name in table.names():
        assert surface.kind_of(name) == "composite", name
        assert surface.has_flag(name, surface.INPLACE) == name.endswith("_"), name
        fn = getattr(fusegrad, name)
        assert fn.__name__ == name and fn.__doc__, name


@pytest.mark.parametrize("name", ["_foreach_exp", "_foreach_add", "_foreach_norm"])
def test_out_of_place_returns_a_tuple(name):
    """Out-of-place forms return a tuple (as PyTorch 2.13's), for a list or a tuple."""
    args = {"_foreach_add": (1.0,)}.get(name, ())
    for kind in (list, tuple):
        data = kind(arrays())
        out = compare(call(name, *args), data)
        assert type(out[0]) is tuple


# ---------------------------------------------------------------- unary


@pytest.mark.parametrize("op", table.UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_unary(op, dtype):
    """Values and dtypes (ints promote as the op does; some refuse ints, with the op's error),
    then the in-place form writes into the given tensors (or raises the cast error)."""
    lo, hi = (0.1, 0.9) if op in ("acos", "asin") else (-2.0, 2.0)
    data = arrays(dtype, lo, hi)
    compare(call(f"_foreach_{op}"), data)
    compare(call(f"_foreach_{op}_"), data)


@pytest.mark.parametrize("op", table.UNARY)
def test_unary_gradients(op):
    """Out-of-place: each output has its tensor's node, and the gradients are torch's;
    in place on tensors of a graph: the same, through the in-place nodes."""
    lo, hi = (0.2, 0.8) if op in ("acos", "asin", "log", "log2", "log10", "log1p", "sqrt",
                                  "rsqrt", "lgamma", "reciprocal") else (-2.0, 2.0)
    data = arrays(np.float64, lo, hi)
    compare(call(f"_foreach_{op}"), data, grad=True)
    out = compare(call(f"_foreach_{op}_"), data, grad=True, prepare=copies)
    for f, t in zip(*out):
        assert type(f.grad_fn).__name__ == type(t.grad_fn).__name__


def test_unary_bool_and_complex_errors():
    compare(call("_foreach_neg"), [np.array([True, False])])
    # (PyTorch's abs refuses bools; fusegrad's per-tensor abs does not: not compared here)
    compare(call("_foreach_sqrt"), [np.array([True, False])])
    compare(call("_foreach_sign"), [np.array([1 + 1j], dtype=np.complex64)])


# ---------------------------------------------------------------- binary

BINARY = ("add", "sub", "mul", "div", "clamp_min", "clamp_max", "maximum", "minimum", "pow")
HAS_TENSOR = ("add", "mul", "div")  # the ops with a 0-dim `Tensor other` overload


def second(form, dtype=np.float32, n=3):
    """The second argument of each overload."""
    if form == "scalar":
        return 1.5
    if form == "int":
        return 2
    if form == "scalars":
        return [1.5, -0.5, 2][:n]
    if form == "tensor":
        return np.array(0.75, dtype=dtype)
    return arrays(dtype, 0.3, 2.0)[:n]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("form", ["scalar", "int", "scalars", "tensor", "list"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_binary(op, form, dtype):
    """Each overload out of place and in place, on float and integer lists (in place, a
    float result into an integer tensor is the op's cast error)."""
    data = arrays(dtype, 0.2, 2.0)
    other = second(form, dtype)
    compare(call(f"_foreach_{op}"), data, other)
    compare(call(f"_foreach_{op}_"), data, other, message=long_int)


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("form", ["list", "tensor"])
def test_alpha(op, form):
    data = arrays(np.float64)
    if op == "sub" and form == "tensor":  # sub has no Tensor overload: torch's TypeError
        assert compare(lambda lib, x: lib._foreach_sub(x, lib.tensor(1.0), alpha=2),
                       data) is None
        return
    # PyTorch's backward of a foreach op with one tensor requiring grad for all fails
    # ("inconsistent range for TensorList output"): its per-tensor loop is the reference.
    reference = per_tensor(op, alpha=-0.5) if form == "tensor" else None
    compare(call(f"_foreach_{op}", alpha=-0.5), data, second(form, np.float64), grad=True,
            torch_fn=reference)
    reference = per_tensor(op, inplace=True, alpha=2) if form == "tensor" else None
    compare(call(f"_foreach_{op}_", alpha=2), data, second(form, np.float64), grad=True,
            prepare=copies, torch_fn=reference)


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("form", ["scalar", "scalars", "tensor", "list"])
def test_binary_gradients(op, form):
    """Gradients reach every tensor (and the shared 0-dim tensor, for mul and div), out of
    place and through the in-place nodes, whose names are PyTorch's (AddBackward1 for a
    number, MaximumBackward0 for maximum_ with tensors, ...)."""
    data = arrays(np.float64, 0.2, 2.0)
    other = second(form, np.float64)
    # (for one tensor requiring grad for all, PyTorch's backward fails: its loop is compared)
    reference = per_tensor(op) if form == "tensor" and op in HAS_TENSOR else None
    compare(call(f"_foreach_{op}"), data, other, grad=True, torch_fn=reference)
    if op in ("maximum", "minimum") and form != "list":
        # PyTorch's in-place forms with numbers have no derivative (NotImplemented nodes,
        # raising in backward: tests/test_eager_leftovers7.py): compared without grad.
        compare(call(f"_foreach_{op}_"), data, other, prepare=copies)
        return
    reference = per_tensor(op, inplace=True) if reference else None
    out = compare(call(f"_foreach_{op}_"), data, other, grad=True, prepare=copies,
                  torch_fn=reference)
    if out is None or reference:
        return
    for f, t in zip(*out):
        assert type(f.grad_fn).__name__ == type(t.grad_fn).__name__


def test_pow_with_a_number_base():
    compare(call("_foreach_pow"), 2.0, arrays(np.float64), grad=True)
    compare(lambda lib, d: lib._foreach_pow(2, d), arrays(np.int64))
    compare(lambda lib, d: lib._foreach_pow(self=2.5, exponent=d), arrays(np.float32))


def test_zero_dim_tensor_of_one_type_for_another():
    """A 0-dim tensor outside the graph is a number where an overload takes one (pow, clamp,
    lerp); one in the graph is refused there, and where the Tensor overload exists (mul) its
    gradient is the sum over the list."""
    data = arrays(np.float32)
    compare(call("_foreach_pow"), data, np.array(2.0, dtype=np.float32))
    compare(call("_foreach_clamp_min"), arrays(np.int64), np.array(1.5, dtype=np.float32))
    compare(lambda lib, a, b: lib._foreach_lerp(a, b, lib.tensor(0.25)), data, arrays())
    compare(call("_foreach_mul"), arrays(np.float64), np.array(-1.5), grad=True,
            torch_fn=per_tensor("mul"))
    compare(call("_foreach_div_"), arrays(np.float64), np.array(-1.5), grad=True,
            prepare=copies, torch_fn=per_tensor("div", inplace=True))
    # requires grad where a number is expected: an invalid combination
    w = [lib.tensor(0.5, requires_grad=True) for lib in (torch, fusegrad)]
    assert compare(lambda lib, x: lib._foreach_lerp(x, x, w[lib is fusegrad]),
                   arrays()) is None


def test_mixed_dtypes_and_promotion():
    """Each tensor keeps its own dtype; a list of ints with a float number promotes."""
    compare(call("_foreach_add"), mixed(), 1.25)
    compare(call("_foreach_mul"), mixed(), [arrays(np.float64)[0], *arrays(np.float32)[1:]])
    compare(call("_foreach_div"), arrays(np.int64), 2)
    compare(call("_foreach_add"), arrays(np.int64), [2, 1.5, True])
    compare(call("_foreach_mul"), arrays(np.int64), np.array(2.5, dtype=np.float32))
    compare(call("_foreach_maximum"), arrays(np.int64), arrays(np.float32))
    compare(call("_foreach_sqrt_"), mixed())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_numbers(dtype):
    """A number meets a half tensor at its (float) computing precision, as PyTorch's loops."""
    for name, arg in (("_foreach_mul", 0.1), ("_foreach_mul_", [0.1, 0.3, 3]),
                      ("_foreach_add", 0.1), ("_foreach_div_", 0.3),
                      ("_foreach_lerp_", None)):
        results = []
        for lib in (torch, fusegrad):
            xs = [lib.tensor([3.0, 1.7, -2.2], dtype=getattr(lib, dtype)) for _ in range(3)]
            if arg is None:
                out = getattr(lib, name)(xs, [x * 0 for x in xs], 0.3)
            else:
                out = getattr(lib, name)(xs, arg)
            results.append([x.float().tolist() for x in out])
        assert results[0] == results[1], name


def test_number_spellings():
    """NumPy numbers, bools and complex numbers are numbers too; a number given by keyword
    (`scalar=`, `scalars=`, `other=`, `self=`) picks its overload."""
    data = arrays(np.float64)
    compare(call("_foreach_add"), data, np.float32(2.5))
    compare(call("_foreach_add"), data, [np.float32(2.5), np.int64(3), 1])
    compare(call("_foreach_add"), data, 1j)
    compare(call("_foreach_mul"), data, True)
    compare(lambda lib, d: lib._foreach_add(d, scalar=2), data)
    compare(lambda lib, d: lib._foreach_add(d, scalars=[1, 2, 3]), data)
    compare(lambda lib, d, o: lib._foreach_add(self=d, other=o, alpha=2), data, arrays())
    compare(lambda lib, d: lib._foreach_pow(d, exponent=3), data)
    compare(lambda lib, d: lib._foreach_add(d, [d[0], d[1], d[2]], alpha=lib.tensor(2.0)),
            data)


# ---------------------------------------------------------------- addcmul, addcdiv, lerp


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("value", ["default", 0.5, [0.5, -2.0, 3], "tensor", "int tensor"])
def test_addcmul_addcdiv(op, value):
    # (no 0-dim or one-element tensor: PyTorch's addcdiv backward fails on those, "select()
    # cannot be applied to a 0-dim tensor")
    shapes = ((2, 3), (4,), (3, 2))
    data, t1 = arrays(np.float64, shapes=shapes), arrays(np.float64, shapes=shapes)
    t2 = arrays(np.float64, 0.5, 2.0, shapes=shapes)
    packed = {"tensor": [0.5, -2.0, 3.0], "int tensor": [1, 2, 3]}.get(str(value))

    def run(name):
        if value == "default":
            return call(name)
        if packed is None:
            return call(name, value)
        return lambda lib, *d: getattr(lib, name)(*d, lib.tensor(packed))

    def loop(name):  # PyTorch's loop, for the packed values, which it does not differentiate
        def run(lib, *d):
            out = [getattr(x, name)(a, b, value=v) for x, a, b, v in zip(*d, packed)]
            return d[0] if name.endswith("_") else tuple(out)

        return None if packed is None else run

    compare(run(f"_foreach_{op}"), data, t1, t2, grad=True, torch_fn=loop(op))
    out = compare(run(f"_foreach_{op}_"), data, t1, t2, grad=True, prepare=copies,
                  torch_fn=loop(f"{op}_"))
    if value not in ("tensor", "int tensor"):  # PyTorch's nodes there are NotImplemented
        for f, t in zip(*out):
            assert type(f.grad_fn).__name__ == type(t.grad_fn).__name__


def test_addcmul_by_keyword_and_integer_lists():
    data = arrays(np.float32)
    compare(lambda lib, a, b, c: lib._foreach_addcmul_(a, b, c, value=0.25), data, data, data)
    compare(lambda lib, a, b, c: lib._foreach_addcmul(a, b, c, scalars=[1, 2, 3]), data,
            data, data)
    ints = arrays(np.int64)
    compare(call("_foreach_addcmul", 2), ints, ints, ints)
    # integer division: the per-tensor op's error (PyTorch's has a double space, which the
    # per-tensor op's spelling may or may not keep: not the loop's to match)
    compare(call("_foreach_addcdiv"), ints, ints, ints,
            message=lambda text: text.replace("future  release", "future release"))


@pytest.mark.parametrize("weight", [0.3, [0.1, 0.5, 0.9], "tensors"])
def test_lerp(weight):
    data, ends = arrays(np.float64), arrays(np.float64)
    extra = arrays(np.float64, 0.0, 1.0) if weight == "tensors" else weight
    compare(call("_foreach_lerp"), data, ends, extra, grad=True)
    out = compare(call("_foreach_lerp_"), data, ends, extra, grad=True, prepare=copies)
    for f, t in zip(*out):
        assert type(f.grad_fn).__name__ == type(t.grad_fn).__name__


def test_lerp_keywords_and_dtypes():
    data = arrays(np.float32)
    compare(lambda lib, a, b: lib._foreach_lerp_(a, b, weight=0.001), data, arrays())
    compare(lambda lib, a, b: lib._foreach_lerp(a, tensors1=b, weight=[0.5, 0.2, 0.1]), data,
            arrays())
    compare(lambda lib, a, b, w: lib._foreach_lerp(a, b, weights=w), data, arrays(),
            arrays())
    compare(call("_foreach_lerp", 0.5), arrays(np.int64), arrays(np.int64))
    compare(call("_foreach_lerp", 0.5), arrays(np.float32), arrays(np.float64))


# ---------------------------------------------------------------- reductions and the rest


@pytest.mark.parametrize("ord", [2, 1, 3, 0, 0.5, math.inf, -math.inf, 2.0])
def test_norm(ord):
    compare(call("_foreach_norm", ord), arrays(np.float64), grad=ord not in (0,))
    compare(lambda lib, d: lib._foreach_norm(d, ord, dtype=lib.float64), arrays(np.float32))


def test_norm_forms_and_errors():
    data = arrays(np.float32)
    compare(call("_foreach_norm"), data)
    compare(call("_foreach_norm"), mixed())
    compare(lambda lib, d: lib._foreach_norm(d, ord=1, dtype=lib.float64), data)
    compare(lambda lib, d: lib._foreach_norm(d, lib.tensor(3.0)), data)
    compare(call("_foreach_norm"), [np.zeros((0,), np.float32), np.zeros(3, np.float32)])
    compare(call("_foreach_norm"), [np.zeros(3)], grad=True)  # 0 at the origin, as torch
    compare(call("_foreach_norm"), arrays(np.int64))
    compare(lambda lib, d: lib._foreach_norm(d, 2, dtype=lib.float16), data)
    compare(lambda lib, d: lib._foreach_norm(d, 2, dtype=lib.int64), data)
    compare(lambda lib, d: lib._foreach_norm(d, None), data)
    compare(lambda lib, d: lib._foreach_norm(d, "fro"), data)
    compare(lambda lib, d: lib._foreach_norm(d, 2, dtype="float64"), data)


@pytest.mark.parametrize("ord", [2, 1, 3, 0, 0.5, -1, math.inf, -math.inf])
def test_powsum(ord):
    data = [np.array([-1.5, 2.0, 0.5]), np.array([[3.0, -0.0]]), np.array(0.25)]
    compare(call("_foreach_powsum", ord), data)
    compare(lambda lib, d: lib._foreach_powsum(d, ord, dtype=lib.float64),
            [a.astype(np.float32) for a in data])


def test_powsum_errors():
    compare(call("_foreach_powsum"), arrays(np.int64))
    compare(call("_foreach_powsum"), [])


def test_max():
    compare(call("_foreach_max"), arrays(np.float64), grad=True)
    compare(call("_foreach_max"), arrays(np.int64))
    compare(call("_foreach_max"), [np.array([1.0, 3.0, 3.0]), np.array([np.nan, 1.0])],
            grad=True)  # ties share the gradient; NaN wins
    compare(call("_foreach_max"), [np.array(True), np.array([False, True])])
    compare(call("_foreach_max"), [np.ones(2), np.zeros((2, 0))])


def test_clone_copy_zero_mm():
    data = arrays(np.float64)
    compare(call("_foreach_clone"), data, grad=True)
    compare(lambda lib, d: lib._foreach_clone(d, memory_format=lib.contiguous_format), data)
    compare(call("_foreach_zero_"), data)
    compare(call("_foreach_zero_"), [np.array([True, False]), np.arange(3)])
    out = compare(call("_foreach_zero_"), data, grad=True, prepare=copies)
    assert [type(f.grad_fn).__name__ for f in out[0]] == ["ZeroBackward0"] * 3
    compare(call("_foreach_copy_"), [np.zeros(3, np.int32), np.zeros((2, 2))],
            [np.array([1.7, -2.2, 3.9]), np.array([5.0, 6.0])])  # casts and broadcasts
    compare(lambda lib, a, b: lib._foreach_copy_(a, src=b, non_blocking=True), data,
            arrays(np.float32))
    compare(call("_foreach_copy_"), [np.zeros(3)], [np.zeros(2)])
    compare(call("_foreach_copy_"), [np.zeros((2, 3))], [np.zeros((2, 3))], grad=True,
            prepare=lambda lib, args: (args[0], [x * 2 for x in args[1]]))
    mats = [RNG.standard_normal((2, 3)), RNG.standard_normal((4, 4))]
    compare(call("_foreach_mm"), mats, [RNG.standard_normal((3, 5)), RNG.standard_normal((4, 1))],
            grad=True)
    compare(call("_foreach_mm"), [np.ones((2, 3))], [np.ones((2, 3))])
    compare(call("_foreach_mm"), [np.ones(3)], [np.ones(3)])


# ---------------------------------------------------------------- in place


def test_inplace_writes_into_the_given_tensors():
    """Views see the writes; the version counters move; the list (or tuple) given is what
    comes back, for every in-place form."""
    base = fusegrad.zeros(2, 3)
    views = [base[0], base[1]]
    versions = [v._version for v in views]
    assert fusegrad._foreach_add_(views, [1.0, 2.0]) is views
    assert base.tolist() == [[1.0] * 3, [2.0] * 3]
    assert all(v._version > before for v, before in zip(views, versions))
    pair = (fusegrad.ones(2), fusegrad.ones(3))
    assert fusegrad._foreach_mul_(pair, 3.0) is pair
    assert pair[1].tolist() == [3.0] * 3
    t_pair = (torch.ones(2), torch.ones(3))
    assert torch._foreach_mul_(t_pair, 3.0) is t_pair  # as PyTorch's


def test_same_tensor_twice():
    twice = lambda lib, args: ([args[0][0], args[0][0]],)  # noqa: E731
    compare(call("_foreach_add_", 1.0), [np.array([1.0, 2.0])], prepare=twice)
    compare(lambda lib, d: lib._foreach_mul_(d, d), [np.array([1.0, 2.0])], prepare=twice)


@pytest.mark.parametrize("call_", [
    lambda lib, x, y: lib._foreach_add_(x, 1.0),
    lambda lib, x, y: lib._foreach_mul_(x, y),
    lambda lib, x, y: lib._foreach_exp_(x),
    lambda lib, x, y: lib._foreach_zero_(x),
    lambda lib, x, y: lib._foreach_copy_(x, y),
    lambda lib, x, y: lib._foreach_lerp_(x, y, 0.5),
    lambda lib, x, y: lib._foreach_addcmul_(x, y, y, [1.0, 2.0][:len(x)]),
    lambda lib, x, y: lib._foreach_maximum_(x, y),
])
def test_inplace_on_a_leaf_that_requires_grad(call_):
    """Refused with PyTorch's message before any tensor is written (the first tensor, which
    does not require grad, is left as it was); allowed under no_grad."""
    for lib in (torch, fusegrad):
        plain, leaf = lib.zeros(2), lib.zeros(2, requires_grad=True)
        other = [lib.ones(2), lib.ones(2)]
        with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being "
                                               "used in an in-place operation.$"):
            call_(lib, [plain, leaf], other)
        assert plain.tolist() == [0.0, 0.0]
        view = lib.zeros(4, requires_grad=True)[:2]
        with pytest.raises(RuntimeError, match="^a view of a leaf Variable"):
            call_(lib, [view], other[:1])
        with lib.no_grad():
            call_(lib, [plain, leaf], other)
    compare(lambda lib, x, y: lib._foreach_add_(x, y), arrays(), arrays(), grad=True,
            prepare=lambda lib, args: ([x.detach() for x in args[0]], args[1]))


# ---------------------------------------------------------------- errors


P, Q = np.ones(2), np.ones(3)


@pytest.mark.parametrize("name,args", [
    ("_foreach_exp", ([],)),
    ("_foreach_exp_", ([],)),
    ("_foreach_add", ([], 1.0)),
    ("_foreach_add_", ([], [])),
    ("_foreach_add", ([], [1.0])),
    ("_foreach_add", ([], [P])),
    ("_foreach_add", ([P, Q], [P])),
    ("_foreach_add", ([P], [P, Q])),
    ("_foreach_add", ([P, Q], [1.0])),
    ("_foreach_add", ([P], [])),
    ("_foreach_add", ([], np.array(1.0))),
    ("_foreach_add", ([P], np.array([1.0]))),
    ("_foreach_mul_", ([P], np.ones(2))),
    ("_foreach_add", ([P, Q], [Q, P])),
    ("_foreach_pow", (2.0, [])),
    ("_foreach_addcmul", ([P, Q], [P], [P, Q])),
    ("_foreach_addcmul", ([P, Q], [P, Q], [P])),
    ("_foreach_addcmul", ([], [], [])),
    ("_foreach_addcmul", ([P, Q], [P, Q], [P, Q], [1.0])),
    ("_foreach_addcmul", ([P, Q], [P, Q], [P, Q], np.array([1.0]))),
    ("_foreach_addcmul", ([P, Q], [P, Q], [P, Q], np.ones((2, 1)))),
    ("_foreach_addcdiv_", ([P, Q], [P, Q], [P, Q], np.array(1.0))),
    ("_foreach_addcmul", ([], [], [], np.array([1.0]))),
    ("_foreach_lerp", ([], [P], 0.5)),
    ("_foreach_lerp", ([P], [P], [P, Q])),
    ("_foreach_lerp", ([P], [P, Q], [P])),
    ("_foreach_lerp_", ([P], [P], [])),
    ("_foreach_lerp", ([P, Q], [P, Q], [0.5])),
    ("_foreach_copy_", ([], [P])),
    ("_foreach_copy_", ([P], [P, Q])),
    ("_foreach_mm", ([], [])),
    ("_foreach_mm", ([np.ones((2, 2))], [])),
    ("_foreach_mm", ([], [np.ones((2, 2))])),
    ("_foreach_clone", ([],)),
    ("_foreach_zero_", ([],)),
    ("_foreach_max", ([],)),
    ("_foreach_norm", ([],)),
    ("_foreach_sub", ([np.array([True])], True)),
    ("_foreach_sub", ([np.array([True])], [np.array([True])])),
    ("_foreach_pow", ([np.arange(3)], -1)),
    ("_foreach_add_", ([np.zeros(3)], [np.zeros((2, 3))])),
    ("_foreach_clamp_max_", ([np.arange(3)], 1.5)),
    ("_foreach_maximum_", ([np.arange(3)], 1.5)),
    ("_foreach_maximum_", ([np.arange(3)], [np.ones(3)])),
])
def test_runtime_errors(name, args):
    """PyTorch's checks of lengths, emptiness and 0-dim tensors, in its order, and the
    per-tensor op's own errors."""
    assert compare(call(name), *args, message=long_int) is None


@pytest.mark.parametrize("name,args,kwargs", [
    ("_foreach_exp", (P,), {}),
    ("_foreach_exp", ("ab",), {}),
    ("_foreach_exp", (None,), {}),
    ("_foreach_exp", ([1.0],), {}),
    ("_foreach_exp", ([P, None],), {}),
    ("_foreach_exp", ([P], 1), {}),
    ("_foreach_add", ([1.0], 1.0), {}),
    ("_foreach_add", ([P], [None]), {}),
    ("_foreach_add", ([P], ["a"]), {}),
    ("_foreach_add", ([P, P], [P, 1.0]), {}),
    ("_foreach_add", ([P, P], [1.0, P]), {}),
    ("_foreach_norm", ([P], None), {}),
    ("_foreach_norm", ([P], "fro"), {}),
    ("_foreach_norm", ([P],), {"dtype": "float64"}),
    ("_foreach_copy_", ([P], P), {}),
])
def test_argument_type_errors(name, args, kwargs):
    """A function with one overload names the argument that does not fit; a list element
    that is no tensor is named by its position."""
    ran = same_error(lambda: getattr(torch, name)(*convert(torch, args), **kwargs),
                     lambda: getattr(fusegrad, name)(*convert(fusegrad, args), **kwargs))
    assert ran


@pytest.mark.parametrize("call_", [
    lambda lib, p, r: lib._foreach_add(p[0], 1.0),
    lambda lib, p, r: lib._foreach_add(p, 1.0, alpha=2),
    lambda lib, p, r: lib._foreach_mul(p, p, alpha=2),
    lambda lib, p, r: lib._foreach_sub(p, r),
    lambda lib, p, r: lib._foreach_sub(p, lib.tensor(1.0), alpha=2),
    lambda lib, p, r: lib._foreach_add(p, np.ones(2)),
    lambda lib, p, r: lib._foreach_add(p, "a"),
    lambda lib, p, r: lib._foreach_add((t for t in p), 1),
    lambda lib, p, r: lib._foreach_pow_(2, p),
    lambda lib, p, r: lib._foreach_pow(2, "a"),
    lambda lib, p, r: lib._foreach_pow(tuple(p), "a"),
    lambda lib, p, r: lib._foreach_pow((p[0], p[0]), "a"),
    lambda lib, p, r: lib._foreach_clamp_min(p, lib.ones(1)),
    lambda lib, p, r: lib._foreach_clamp_min(p, other=r),
    lambda lib, p, r: lib._foreach_clamp_min(p, scalar=r),
    lambda lib, p, r: lib._foreach_lerp(p, p, r),
    lambda lib, p, r: lib._foreach_lerp(p, p, weights=r),
    lambda lib, p, r: lib._foreach_lerp(p, tensors1=p, weights=r),
    lambda lib, p, r: lib._foreach_add(zzz=1),
    lambda lib, p, r: lib._foreach_add(self=p, zzz=1),
    lambda lib, p, r: lib._foreach_add(p, 1, zzz=1),
    lambda lib, p, r: lib._foreach_add(p, r, 1),
    lambda lib, p, r: lib._foreach_add(p, r, 1, 2),
    lambda lib, p, r: lib._foreach_add([], "a"),
    lambda lib, p, r: lib._foreach_add(p, None),
    lambda lib, p, r: lib._foreach_addcmul(p, p, p, "a"),
    lambda lib, p, r: lib._foreach_addcmul(p, p, p, value="a"),
    lambda lib, p, r: lib._foreach_norm(p, 2, lib.float32, 1),
    lambda lib, p, r: lib._foreach_norm(p, r),
    lambda lib, p, r: lib._foreach_norm(p, zzz=1),
    lambda lib, p, r: lib._foreach_norm(),
    lambda lib, p, r: lib._foreach_norm(p, 2, ord=2),
    lambda lib, p, r: lib._foreach_exp(p, zzz=1),
    lambda lib, p, r: lib._foreach_copy_(p),
    lambda lib, p, r: lib._foreach_copy_(),
    lambda lib, p, r: lib._foreach_clone(p, lib.contiguous_format),
    lambda lib, p, r: lib._foreach_lerp_(p, p),
])
def test_type_errors_name_the_overloads(call_):
    """Arguments that fit no overload: when their number leaves one overload, what is wrong
    with them for it; otherwise PyTorch's list of the overloads, each with its note on the
    arguments (those that take as many as were given)."""
    assert same_error(lambda: call_(torch, [torch.ones(2)], torch.ones((), requires_grad=True)),
                      lambda: call_(fusegrad, [fusegrad.ones(2)],
                                    fusegrad.ones((), requires_grad=True)))


def test_parameter_is_named_so():
    for lib in (torch, fusegrad):
        with pytest.raises(TypeError) as e:
            lib._foreach_exp(lib.nn.Parameter(lib.ones(1)))
        if lib is torch:
            want = str(e.value)
    assert str(e.value) == want


# ---------------------------------------------------------------- the protocol, fx, compile


def test_subclass_handler_gets_the_whole_call():
    """A Tensor subclass in a list reaches its `__torch_function__` with the foreach function
    itself (as PyTorch routes it), and its handler's results keep the subclass."""
    seen = {}
    for lib in (torch, fusegrad):
        class Logged(lib.Tensor):
            library = lib

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                seen.setdefault(cls.library, []).append(func)
                return super().__torch_function__(func, types, args, kwargs or {})

        x = lib.ones(2).as_subclass(Logged)
        out = lib._foreach_add([x, lib.ones(3)], 1.0)
        assert type(out) is tuple and all(type(t) is Logged for t in out)
        assert seen[lib][0] is lib._foreach_add
        lib._foreach_mul_([x], 2.0)
        assert seen[lib][-1] is lib._foreach_mul_ and x.tolist() == [2.0, 2.0]


def test_fx_records_the_call():
    """symbolic_trace records a foreach function as one call_function node, as torch.fx."""
    codes, values = [], []
    def traced(lib):
        def f(x, y):
            a, b = lib._foreach_mul([x, y], 2.0)
            return a + lib._foreach_norm([b])[0]

        return f

    for lib in (torch, fusegrad):
        gm = lib.fx.symbolic_trace(traced(lib))
        targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
        assert targets[0] is lib._foreach_mul
        codes.append(gm.code.replace("fusegrad.", "torch."))
        values.append(gm(lib.ones(2), lib.full((3,), 2.0)).tolist())
    assert codes[0] == codes[1]
    assert values[0] == values[1]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compiled(backend):
    """Compiled code gives eager's results and writes: the out-of-place forms are captured
    (a node returning a tuple), an in-place one ends the graph and runs as written."""
    def step(params, grads):
        scaled = fusegrad._foreach_mul(grads, 0.5)
        fusegrad._foreach_add_(params, scaled, alpha=-0.1)
        return fusegrad.stack(fusegrad._foreach_norm(params)).sum()

    data = arrays(np.float32), arrays(np.float32)
    want_params = convert(fusegrad, data[0])
    want = step(want_params, convert(fusegrad, data[1]))
    fusegrad._dynamo.reset()
    params = convert(fusegrad, data[0])
    got = fusegrad.compile(step, backend=backend)(params, convert(fusegrad, data[1]))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    for p, w in zip(params, want_params):
        np.testing.assert_allclose(p.numpy(), w.numpy(), rtol=1e-6)


# ---------------------------------------------------------------- as real code calls them


def test_model_ema_step():
    """timm's ModelEmaV3 update: lerp toward the model (or mul + add with alpha)."""
    ema, model = arrays(np.float32), arrays(np.float32)

    def step(lib, e, m):
        decay = 0.999
        with lib.no_grad():
            lib._foreach_lerp_(e, m, weight=1.0 - decay)
            lib._foreach_mul_(e, decay)
            lib._foreach_add_(e, m, alpha=1.0 - decay)
        return e

    compare(step, ema, model, grad=True)


def test_gradient_clipping_and_an_adam_step():
    """clip_grad_norm_'s foreach path and a hand-written Adam step on a list of parameters."""
    grads, params = arrays(np.float32), arrays(np.float32)
    exp_avg, exp_avg_sq = [np.zeros_like(g) for g in grads], [np.zeros_like(g) for g in grads]

    def step(lib, g, p, m, v):
        norms = lib._foreach_norm(g, 2.0)
        total = lib.linalg.vector_norm(lib.stack(norms), 2.0)
        clip = (0.5 / (total + 1e-6)).clamp(max=1.0)
        lib._foreach_mul_(g, clip)
        lib._foreach_lerp_(m, g, 0.1)
        lib._foreach_mul_(v, 0.999)
        lib._foreach_addcmul_(v, g, g, 0.001)
        denom = lib._foreach_sqrt(v)
        lib._foreach_div_(denom, math.sqrt(1 - 0.999))
        lib._foreach_add_(denom, 1e-8)
        lib._foreach_addcdiv_(p, m, denom, -0.01 / (1 - 0.9))
        lib._foreach_maximum_(p, -1.0)
        lib._foreach_clamp_max_(p, [1.0, 0.5, 2.0])
        return p

    compare(step, grads, params, exp_avg, exp_avg_sq)
