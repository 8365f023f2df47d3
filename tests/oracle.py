"""Oracle helpers: run the same program under fusegrad and torch and compare everything.

A test writes ``def prog(T, x, y): ...`` against the public torch API, where ``T`` is either
module, and calls ``check(prog, np_x, np_y, ...)``.  Inputs are built from the same NumPy data
for both modules; outputs (tensors, tuples, Python scalars, dtypes, sizes), leaf gradients and
raised exceptions (type and message) must agree.
"""

import contextlib
import io
import re
import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg

MODULES = (fg, torch)

FLOAT_DTYPES = ("float32", "float64")
ALL_DTYPES = (
    "float16", "bfloat16", "float32", "float64",
    "int8", "int16", "int32", "int64", "uint8", "bool",
)

_TOL = {
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
}


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------

def randn(*shape, seed=0):
    """Standard normal float64 NumPy data (deterministic)."""
    return np.random.default_rng(seed).standard_normal(shape)


def rand_pos(*shape, seed=0):
    """Strictly positive float64 NumPy data in [0.5, 2.5)."""
    return np.random.default_rng(seed).random(shape) * 2.0 + 0.5


def sample(shape, dtype, seed=0):
    """NumPy data suitable for building a tensor of the torch dtype named ``dtype``."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype in ("int8", "int16", "int32", "int64", "uint8"):
        return rng.integers(0, 5, size=shape).astype(dtype)
    return rng.uniform(-2.0, 2.0, size=shape)


def dtype_name(d):
    """'float32' for torch.float32 and for fusegrad.float32 whatever its repr prefix."""
    return str(d).split(".")[-1]


def tensor(T, data, dtype=None, requires_grad=False):
    """Build a tensor of module ``T`` from NumPy data; ``dtype`` is a dtype name or None."""
    data = np.array(data, copy=True)
    if dtype is None:
        return T.tensor(data, requires_grad=requires_grad)
    if dtype == "bfloat16":
        data = data.astype(np.float32)
    return T.tensor(data, dtype=getattr(T, dtype), requires_grad=requires_grad)


def make_inputs(T, arrays, requires_grad=False, dtype=None):
    """Tensors of module T for each NumPy array; anything else passes through unchanged."""
    n = len(arrays)
    rgs = requires_grad if isinstance(requires_grad, tuple | list) else (requires_grad,) * n
    dts = dtype if isinstance(dtype, tuple | list) else (dtype,) * n
    out = []
    for a, rg, dt in zip(arrays, rgs, dts, strict=True):
        if isinstance(a, np.ndarray | np.generic):
            out.append(tensor(T, a, dtype=dt, requires_grad=rg))
        else:
            out.append(a)
    return out


def pair(data, requires_grad=False, dtype=None):
    """(fusegrad tensor, torch tensor) built from the same data."""
    return tuple(tensor(T, data, dtype=dtype, requires_grad=requires_grad) for T in MODULES)


# ----------------------------------------------------------------------------------------------
# comparison
# ----------------------------------------------------------------------------------------------

def values(t):
    """A NumPy copy of a tensor's values (bfloat16 widened to float32)."""
    t = t.detach()
    if dtype_name(t.dtype) == "bfloat16":
        t = t.float()
    return np.array(t.numpy(), copy=True)


def node_name(fn):
    return None if fn is None else type(fn).__name__


def _is_fg_tensor(x):
    return isinstance(x, fg.Tensor)


def assert_close(a, b, rtol=None, atol=None, path="out", check_grad_fn=False):
    """Compare a fusegrad object ``a`` with the torch object ``b``, recursively.

    Tensors: type, shape, dtype, requires_grad and values (NaN == NaN).  Sequences: type and
    length.  Python scalars: exact type and value (with tolerance for floats).
    """
    if isinstance(b, torch.Tensor):
        assert _is_fg_tensor(a), f"{path}: expected a Tensor, got {type(a).__name__}: {a!r}"
        assert tuple(a.shape) == tuple(b.shape), f"{path}: shape {tuple(a.shape)} != {b.shape}"
        assert dtype_name(a.dtype) == dtype_name(b.dtype), (
            f"{path}: dtype {dtype_name(a.dtype)} != {dtype_name(b.dtype)}"
        )
        assert a.requires_grad == b.requires_grad, (
            f"{path}: requires_grad {a.requires_grad} != {b.requires_grad}"
        )
        if check_grad_fn:
            assert node_name(a.grad_fn) == node_name(b.grad_fn), (
                f"{path}: grad_fn {node_name(a.grad_fn)} != {node_name(b.grad_fn)}"
            )
        va, vb = values(a), values(b)
        assert va.shape == vb.shape, f"{path}: numpy() shape {va.shape} != {vb.shape}"
        name = dtype_name(b.dtype)
        if name in _TOL:
            r0, a0 = _TOL[name]
            np.testing.assert_allclose(
                va.astype(np.float64), vb.astype(np.float64),
                rtol=r0 if rtol is None else rtol, atol=a0 if atol is None else atol,
                equal_nan=True, err_msg=path,
            )
        else:
            np.testing.assert_array_equal(va, vb, err_msg=path)
    elif isinstance(b, torch.Size):
        assert type(a).__name__ == "Size", f"{path}: expected Size, got {type(a).__name__}"
        assert isinstance(a, tuple) and tuple(a) == tuple(b), f"{path}: {a!r} != {b!r}"
    elif isinstance(b, torch.dtype):
        assert dtype_name(a) == dtype_name(b), f"{path}: dtype {a!r} != {b!r}"
    elif isinstance(b, torch.device):
        assert str(a) == str(b) and a.type == b.type, f"{path}: device {a!r} != {b!r}"
    elif isinstance(b, tuple | list):
        assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
        assert len(a) == len(b), f"{path}: len {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, rtol, atol, f"{path}[{i}]", check_grad_fn)
    elif isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys(), f"{path}: keys differ"
        for k in b:
            assert_close(a[k], b[k], rtol, atol, f"{path}[{k!r}]", check_grad_fn)
    elif isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray), f"{path}: expected ndarray, got {type(a).__name__}"
        assert a.dtype == b.dtype and a.shape == b.shape, f"{path}: {a.dtype}{a.shape}"
        if b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=rtol or 1e-5, atol=atol or 1e-5,
                                       equal_nan=True, err_msg=path)
        else:
            np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(b, float):
        assert type(a) is float, f"{path}: expected float, got {type(a).__name__}: {a!r}"
        if np.isnan(b):
            assert np.isnan(a), f"{path}: {a} != nan"
        else:
            tol = (atol or 1e-6) + (rtol or 1e-5) * abs(b)
            assert abs(a - b) <= tol, f"{path}: {a!r} != {b!r}"
    elif isinstance(b, bool | int | str | type(None)):
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"
    else:
        raise TypeError(f"{path}: don't know how to compare {type(b).__name__}")


def grads_match(fg_tensors, th_tensors, rtol=None, atol=None):
    """Compare ``.grad`` of corresponding tensors (both None, or equal tensors)."""
    for i, (a, b) in enumerate(zip(fg_tensors, th_tensors, strict=True)):
        if not isinstance(b, torch.Tensor):
            continue
        if b.is_leaf or b.retains_grad:
            if b.grad is None:
                assert a.grad is None, f"input {i}: expected grad None, got {a.grad!r}"
            else:
                assert a.grad is not None, f"input {i}: grad is None, expected {b.grad}"
                assert_close(a.grad, b.grad, rtol, atol, path=f"input {i}.grad")


# ----------------------------------------------------------------------------------------------
# errors and warnings
# ----------------------------------------------------------------------------------------------

def outcome(run, described):
    """`described(run())` (a result in comparable form), or ("error", the exception's type
    name, its message) when `run` raises; warnings are not shown."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = run()
    except Exception as e:  # noqa: BLE001 (the error is the outcome compared)
        return ("error", type(e).__name__, str(e))
    return described(r)


def described(r):
    """A result in comparable form: a tensor's dtype, shape, strides and values (its real
    part); a tuple's items; another value's repr with the library's name replaced."""
    if isinstance(r, (tuple, list)):
        return tuple(described(x) for x in r)
    if isinstance(r, (torch.Tensor, fg.Tensor)):
        wide = torch.float64 if isinstance(r, torch.Tensor) else fg.float64
        return ("tensor", str(r.dtype).replace("fusegrad", "torch"), tuple(r.shape),
                tuple(r.stride()), np.asarray(r.detach().real.to(wide).numpy()).tolist())
    return ("value", repr(r).replace("fusegrad", "torch"))


def same_outcome(expression: str) -> None:
    """`expression` (with `L` the library, `np` NumPy) gives the same outcome under torch and
    fusegrad: values, dtypes, shapes and strides, or the error's type and whole message."""
    got = [repr(outcome(lambda L=L: eval(expression, {"L": L, "np": np}),  # noqa: S307
                        described)).replace("fusegrad", "torch") for L in (torch, fg)]
    assert got[0] == got[1], got


def expression_cases(text: str) -> list:
    """The expressions of `text`, one per line (for `same_outcome`)."""
    return [line.strip() for line in text.strip().splitlines()]


def first_sentence(msg):
    msg = str(msg).strip()
    return re.split(r"(?<=[.!?])\s|\n", msg, maxsplit=1)[0]


def _builtin_base(exc_type):
    return next(c for c in exc_type.__mro__ if c.__module__ == "builtins")


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - we compare whatever was raised
        return e
    return None


def assert_same_exception(e_fg, e_th, full=False):
    assert e_th is not None, "oracle (torch) did not raise: the test is wrong"
    expect = f"{type(e_th).__name__}: {e_th}"
    if e_fg is None:
        pytest.fail(f"fusegrad did not raise; torch raised {expect}")
    got = f"{type(e_fg).__name__}: {e_fg}"
    assert type(e_fg).__name__ == type(e_th).__name__, f"got {got}\nexpected {expect}"
    assert _builtin_base(type(e_fg)) is _builtin_base(type(e_th)), f"got {got}\n{expect}"
    if full:
        assert str(e_fg).strip() == str(e_th).strip(), f"got {got}\nexpected {expect}"
    else:
        assert first_sentence(e_fg) == first_sentence(e_th), f"got {got}\nexpected {expect}"


def assert_same_error(fn_fg, fn_th, full=False):
    """Both callables raise the same exception type with the same message (first sentence, or
    the whole message with ``full=True``)."""
    e_th = _raised(fn_th)
    e_fg = _raised(fn_fg)
    assert_same_exception(e_fg, e_th, full)


def recorded_warnings(fn):
    """(result-or-exception, [(category name, first sentence)]) of the warnings fn emits."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = _raised(fn)
    return res, [(c.category.__name__, first_sentence(c.message)) for c in w]


def assert_same_warnings(fn_fg, fn_th):
    res_th, w_th = recorded_warnings(fn_th)
    res_fg, w_fg = recorded_warnings(fn_fg)
    assert res_th is None, f"oracle raised {res_th!r}"
    assert res_fg is None, f"fusegrad raised {type(res_fg).__name__}: {res_fg}"
    assert w_fg == w_th, f"fusegrad warned {w_fg}\ntorch warned    {w_th}"


# ----------------------------------------------------------------------------------------------
# state snapshots (a failed operation must not change anything)
# ----------------------------------------------------------------------------------------------

def snapshot(objs):
    snap = []
    for t in objs:
        if isinstance(t, fg.Tensor | torch.Tensor):
            snap.append((tuple(t.shape), dtype_name(t.dtype), t._version, values(t)))
        else:
            snap.append(None)
    return snap


def assert_unchanged(before, objs):
    after = snapshot(objs)
    for i, (b, a) in enumerate(zip(before, after)):
        if b is None:
            continue
        assert a[:3] == b[:3], f"input {i}: (shape, dtype, _version) {a[:3]} != {b[:3]}"
        np.testing.assert_array_equal(a[3], b[3], err_msg=f"input {i} values changed")


# ----------------------------------------------------------------------------------------------
# the main entry point
# ----------------------------------------------------------------------------------------------

def run_both(prog, *arrays, requires_grad=False, dtype=None):
    """Run prog under both modules. Returns ((fg_inputs, fg_result), (th_inputs, th_result));
    a result is the returned value or the raised exception (flagged by ``raised``)."""
    out = []
    for T in MODULES:
        ins = make_inputs(T, arrays, requires_grad, dtype)
        before = snapshot(ins)
        try:
            res = (False, prog(T, *ins))
        except Exception as e:  # noqa: BLE001
            res = (True, e)
        out.append((ins, before, res))
    return out


def check(prog, *arrays, requires_grad=False, dtype=None, rtol=None, atol=None,
          full_message=False, check_grad_fn=False, expect_error=None):
    """Run ``prog(T, *inputs)`` for T in (fusegrad, torch) and compare the outcomes.

    If torch raises, fusegrad must raise the same exception type with the same message and
    must leave every input unchanged (values, shape, dtype, _version).  Otherwise results and
    the inputs' ``.grad`` must match.  ``expect_error`` (True/False) guards the test itself.
    """
    (fg_in, fg_before, (fg_raised, fg_res)), (th_in, th_before, (th_raised, th_res)) = run_both(
        prog, *arrays, requires_grad=requires_grad, dtype=dtype
    )
    if expect_error is not None:
        assert th_raised == expect_error, f"oracle outcome unexpected: {th_res!r}"
    if th_raised:
        assert_same_exception(fg_res if fg_raised else None, th_res, full_message)
        assert_unchanged(th_before, th_in)
        assert_unchanged(fg_before, fg_in)
        return None
    if fg_raised:
        raise AssertionError(
            f"fusegrad raised {type(fg_res).__name__}: {fg_res}"
        ) from fg_res
    assert_close(fg_res, th_res, rtol, atol, check_grad_fn=check_grad_fn)
    grads_match(fg_in, th_in, rtol, atol)
    return fg_res, th_res


# ----------------------------------------------------------------------------------------------
# autograd graph structure
# ----------------------------------------------------------------------------------------------

def graph_signature(fn, leaves=(), _seen=None):
    """A comparable nested description of the graph below node ``fn``.

    Each node becomes (class name, ((child signature, input_nr), ...)); AccumulateGrad nodes
    record which of ``leaves`` their ``.variable`` is (by identity).  Shared nodes are
    described once and referenced afterwards as ('<shared>', k) so sharing must agree too.
    """
    if _seen is None:
        _seen = {}
    if fn is None:
        return None
    if id(fn) in _seen:
        return ("<shared>", _seen[id(fn)][0])
    _seen[id(fn)] = (len(_seen), fn)
    name = type(fn).__name__
    if name == "AccumulateGrad":
        var = fn.variable
        idx = next((i for i, v in enumerate(leaves) if v is var), None)
        return (name, idx, tuple(fn.next_functions))
    kids = tuple(
        (graph_signature(child, leaves, _seen), nr) for child, nr in fn.next_functions
    )
    return (name, kids)


# ----------------------------------------------------------------------------------------------
# running whole programs
# ----------------------------------------------------------------------------------------------

def run_program(src, T):
    """exec ``src`` (with any ``import torch`` line removed) with ``torch`` bound to module T;
    returns captured stdout."""
    src = "\n".join(line for line in src.splitlines() if line.strip() != "import torch")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(src, "<program>", "exec"), {"torch": T, "__name__": "__main__"})
    return buf.getvalue()


_FLOAT_RE = re.compile(r"-?\d+\.\d*(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+")
_ADDR_RE = re.compile(r"0x[0-9a-fA-F]+")


def normalize_output(text):
    """Replace addresses by 0xADDR and round floats to 6 significant digits."""
    text = _ADDR_RE.sub("0xADDR", text)
    return _FLOAT_RE.sub(lambda m: f"{float(m.group()):.6g}", text)
