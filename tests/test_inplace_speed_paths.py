"""In-place add_/sub_/mul_/div_, relu_, clamp_, zero_ and copy_ write their commonest cases
straight into `self` (their registry entries' `write_into`): values, bits, dtypes, version
counters, autograd and errors as PyTorch's, on that path and at its edges (broadcast
operands, in C along runs of `self` too, integer and half tensors, non-contiguous and
overlapping views, leaves that require grad, `alpha`)."""

import numpy as np
import pytest
import torch

import fusegrad


def _run(L, case):
    """`case(L)`'s tensors as (values, dtype, version) triples, or its error's message."""
    try:
        out = case(L)
    except (RuntimeError, TypeError, OverflowError) as e:
        return ("error", type(e).__name__, str(e))
    return [(t.detach().numpy().copy(), str(t.dtype), t._version) for t in out]


def _same(case):
    got, want = _run(fusegrad, case), _run(torch, case)
    if want[0] == "error" or got[0] == "error":
        assert got == want
        return
    assert len(got) == len(want)
    for (g, gd, gv), (w, wd, wv) in zip(got, want):
        assert gd == wd.replace("torch.", "torch.") and gv == wv
        assert g.shape == w.shape and g.dtype == w.dtype
        assert g.tobytes() == w.tobytes(), (g, w)  # bit for bit


def _data(L, shape, dtype="float32", seed=0):
    values = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return L.from_numpy(values)


def _binary(op, shape_b=(3, 4), dtype="float32", **kw):
    def case(L):
        a, b = _data(L, (3, 4), dtype), _data(L, shape_b, dtype, 1)
        return [getattr(a, op)(b, **kw), b]
    return case


def _number(op, value, dtype="float32", shape=(3, 4)):
    def case(L):
        a = _data(L, shape, dtype) * 8 if dtype != "int64" else L.arange(12).reshape(shape)
        return [getattr(a, op)(value)]
    return case


CASES = {
    **{f"{op} same shape": _binary(op) for op in ("add_", "sub_", "mul_", "div_")},
    **{f"{op} float64": _binary(op, dtype="float64") for op in ("add_", "sub_", "mul_", "div_")},
    **{f"{op} broadcast b": _binary(op, (4,)) for op in ("add_", "mul_")},
    "add_ b broadcasts past self": _binary("add_", (2, 3, 4)),
    **{f"{op} {v!r}": _number(op, v) for op in ("add_", "sub_", "mul_", "div_")
       for v in (3, 0.1, -2.5)},
    "add_ alpha float32": _binary("add_", alpha=0.37),
    "sub_ alpha float32": _binary("sub_", alpha=-3),
    "add_ alpha broadcast": _binary("add_", (4,), alpha=2),
    "add_ alpha float64": _binary("add_", dtype="float64", alpha=0.37),
    "add_ alpha past float32": _binary("add_", alpha=1e39),
    "add_ float16": _binary("add_", dtype="float16"),
    "add_ float16 alpha": _binary("add_", dtype="float16", alpha=0.3),
    "mul_ float16 number": _number("mul_", 0.1, "float16"),
    "int64 add_ 1": lambda L: [L.tensor(0).add_(1)],
    "int64 0-d += 1 twice": lambda L: [(lambda t: (t.__iadd__(1), t.__iadd__(1))[1])(L.tensor(5))],
    "int64 add_ wraps": lambda L: [L.tensor(2 ** 63 - 1).add_(1)],
    "int64 mul_ wraps": lambda L: [L.tensor([2 ** 62, 3]).mul_(4)],
    "int64 sub_": _number("sub_", 7, "int64"),
    "int64 add_ float (error)": _number("add_", 1.5, "int64"),
    "int64 div_ int (error)": _number("div_", 2, "int64"),
    "int64 add_ int past int64": lambda L: [L.tensor(0).add_(2 ** 64)],
    "int32 add_ 1": lambda L: [L.tensor([1, 2], dtype=L.int32).add_(1)],
    "int8 add_ past int8": lambda L: [L.tensor([1, 2], dtype=L.int8).add_(1000)],
    "bool add_ 1": lambda L: [L.tensor([True, False]).add_(1)],
    "float32 add_ float64 (promoted, cast)": lambda L: [
        _data(L, (3,)).add_(_data(L, (3,), "float64", 1))],
    "float32 add_ int tensor": lambda L: [_data(L, (3,)).add_(L.tensor([1, 2, 3]))],
    "non-contiguous self": lambda L: (lambda a: [a.t().add_(_data(L, (4, 3))), a])(
        _data(L, (3, 4))),
    "strided self": lambda L: (lambda a: [a[:, ::2].mul_(3), a])(_data(L, (3, 4))),
    "self plus itself": lambda L: (lambda a: [a.add_(a)])(_data(L, (3, 4))),
    "self plus its element": lambda L: (lambda a: [a.add_(a[1, 2]), a])(_data(L, (3, 4))),
    "shifted view (error)": lambda L: (lambda a: [a[1:].add_(a[:-1])])(_data(L, (6,))),
    "interleaved halves": lambda L: (lambda a: [a[::2].add_(a[1::2]), a])(_data(L, (6,))),
    "expanded self (error)": lambda L: [_data(L, (4,)).expand(3, 4).add_(1)],
    "row of an expanded tensor": lambda L: (lambda e: [e[0].mul_(2), e])(
        _data(L, (4,)).expand(3, 4)),
    "empty": lambda L: [_data(L, (0, 4)).add_(_data(L, (4,)))],
    "0-d float": lambda L: [_data(L, ()).mul_(3)],
    "inf and nan": lambda L: [L.tensor([float("inf"), 1.0, float("nan")]).mul_(0.0)],
    "copy_ same dtype": lambda L: [_data(L, (3, 4)).copy_(_data(L, (3, 4), seed=1))],
    "copy_ broadcast": lambda L: [_data(L, (3, 4)).copy_(_data(L, (4,), seed=1))],
    "copy_ shape (error)": lambda L: [_data(L, (3, 4)).copy_(_data(L, (2, 4), seed=1))],
    "copy_ float64 to float32": lambda L: [_data(L, (3,)).copy_(_data(L, (3,), "float64", 1))],
    "copy_ int64": lambda L: [L.zeros(3, dtype=L.int64).copy_(L.tensor([1, -2, 3]))],
    "copy_ float16": lambda L: [_data(L, (3,), "float16").copy_(_data(L, (3,), "float16", 1))],
    "copy_ into a transpose": lambda L: (lambda a: [a.t().copy_(_data(L, (4, 3), seed=1)), a])(
        _data(L, (3, 4))),
    "copy_ its own transpose": lambda L: (lambda a: [a.copy_(a.t())])(_data(L, (3, 3))),
    "copy_ into an expanded tensor (error)": lambda L: [
        _data(L, (4,)).expand(3, 4).copy_(_data(L, (3, 4), seed=1))],
    "zero_": lambda L: [_data(L, (3, 4)).zero_()],
    "zero_ a row": lambda L: (lambda a: [a[1].zero_(), a])(_data(L, (3, 4))),
    "zero_ an expanded tensor": lambda L: (lambda e: [e.zero_(), e])(_data(L, (4,)).expand(3, 4)),
    "zero_ int8": lambda L: [L.tensor([1, -2], dtype=L.int8).zero_()],
    "clamp_ float32 between wide bounds": lambda L: [
        _data(L, (3, 4)).mul_(1e30).clamp_(-1e9, 3.4e38)],
    "clamp_ float32 past float32 (error)": lambda L: [_data(L, (3, 4)).clamp_(-1, 1e39)],
    "clamp_ float32 nan bound": lambda L: [_data(L, (3, 4)).clamp_(float("nan"), 1)],
    "relu_": lambda L: [L.tensor([-1.0, -0.0, 0.0, float("nan"), float("-inf"), 2.0]).relu_()],
    "relu_ float64 transposed view": lambda L: (lambda a: [a.t().relu_(), a])(
        _data(L, (3, 4), "float64")),
    "relu_ int64": lambda L: [L.tensor([-3, 0, 5]).relu_()],
    "relu_ float16": lambda L: [_data(L, (5,), "float16").relu_()],
    "relu_ bool (error)": lambda L: [L.tensor([True, False]).relu_()],
    "relu_ expanded self (error)": lambda L: [_data(L, (4,)).expand(3, 4).relu_()],
    "relu_ row of an expanded tensor": lambda L: (lambda e: [e[0].relu_(), e])(
        _data(L, (4,)).expand(3, 4)),
    "add_ a contiguous piece of self over its runs (error)": lambda L: (lambda a: [
        a.add_(a.view(-1)[:16].view(16, 1, 1))])(_data(L, (4, 16, 4, 5))),
    "add_ b broadcast over runs past self (error)": lambda L: [
        _data(L, (16, 4, 5)).add_(_data(L, (2, 16, 1, 1), seed=1))],
    "add_ b over runs of float64 into float32": lambda L: [
        _data(L, (4, 16, 4, 5)).add_(_data(L, (16, 1, 1), "float64", 1))],
    "mul_ b over runs of a non-contiguous self": lambda L: (lambda a: [
        a.transpose(2, 3).mul_(_data(L, (16, 1, 1), seed=1)), a])(_data(L, (4, 16, 4, 5))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_dtypes_versions_and_errors_as_torch(name):
    _same(CASES[name])


def test_a_view_shares_the_version_and_the_write():
    for L in (fusegrad, torch):
        base = L.zeros(2, 3)
        view = base[1]
        view.add_(1)
        view.mul_(2.0)
        assert base.tolist() == [[0, 0, 0], [2, 2, 2]] and base._version == view._version == 2


def _grad_case(L, op, kw, saves_self):
    x = L.tensor([0.5, -1.5, 2.0], requires_grad=True)
    w = L.tensor([1.5, 0.25, -3.0], requires_grad=True)
    y = x * 1.0
    out = getattr(y, op)(w, **kw)
    names = [out.grad_fn.name(), out.grad_fn.next_functions[0][0].name()]
    out.sum().backward() if not saves_self else (out * out).sum().backward()
    return names, y._version, x.grad.tolist(), w.grad.tolist()


def _zero_case(L):
    x = L.tensor([0.5, -1.5, 2.0], requires_grad=True)
    y = x * 2.0
    y[1:].zero_()
    (y * y).sum().backward()
    return y.grad_fn.name(), y._version, y.tolist(), x.grad.tolist()


def test_zero_of_a_recorded_view_as_torch():
    assert _zero_case(fusegrad) == _zero_case(torch)


@pytest.mark.parametrize("op, kw", [("add_", {}), ("sub_", {}), ("add_", {"alpha": 0.3}),
                                    ("mul_", {}), ("div_", {}), ("copy_", {})])
def test_recorded_in_place_ops_as_torch(op, kw):
    saves = op in ("mul_", "div_")
    assert _grad_case(fusegrad, op, kw, saves) == _grad_case(torch, op, kw, saves)


def _leaf_case(L):
    x = L.ones(3, requires_grad=True)
    try:
        x.add_(1)
    except RuntimeError as e:
        with L.no_grad():
            x.add_(1)
            x.mul_(2)
        return str(e), x.tolist(), x._version, x.requires_grad, x.grad_fn
    return None


def test_a_leaf_that_requires_grad_as_torch():
    assert _leaf_case(fusegrad) == _leaf_case(torch)


def _saved_case(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    z = y * y  # saves y at version 0
    y.add_(1)  # the fast path bumps the version the save is checked against
    try:
        z.sum().backward()
    except RuntimeError as e:
        return str(e)
    return "no error"


def test_a_saved_input_written_in_place_is_refused_as_torch():
    assert _saved_case(fusegrad) == _saved_case(torch)


def _counter_case(L):
    t = L.tensor(-(2 ** 63))
    out = []
    for op, value in (("add_", 1), ("sub_", 2), ("sub_", 2 ** 63 - 1), ("mul_", 3),
                      ("mul_", -(2 ** 62)), ("add_", 2 ** 63 - 1), ("mul_", 0)):
        getattr(t, op)(value)
        out.append((t.item(), t._version))
    return out, str(t.dtype)


def test_a_one_element_int64_counter_wraps_as_torch():
    assert _counter_case(fusegrad) == _counter_case(torch)


def test_a_read_only_element_is_written_as_torch():
    def case(L):
        e = L.arange(3).expand(2, 3)
        return [e[1, 2].add_(5), e[0, 1].mul_(2), e]
    _same(case)


@pytest.mark.parametrize("n", [1023, 1024, 4099, 1 << 17])
@pytest.mark.parametrize("native, threads", [(True, 1), (True, 2), (False, 1)])
def test_alpha_in_c_has_torchs_bits(n, native, threads):
    """add/sub with a float32 alpha over contiguous operands of one shape run one fused
    multiply-add per element in C from `AXPY_NATIVE_MIN` values: torch's bits, in place and
    not, at one and two threads and with the C kernels off."""
    from fusegrad.ops import _native

    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    before = fusegrad.get_num_threads()
    fusegrad.set_num_threads(threads)
    try:
        with _native.native_kernels(native):
            for op, alpha in (("add", 0.37), ("sub", -3e-3)):
                got = getattr(fusegrad.tensor(a), op + "_")(fusegrad.tensor(b), alpha=alpha)
                fresh = getattr(fusegrad, op)(fusegrad.tensor(a), fusegrad.tensor(b),
                                              alpha=alpha)
                want = getattr(torch.tensor(a), op + "_")(torch.tensor(b), alpha=alpha)
                np.testing.assert_array_equal(got.numpy(), want.numpy())
                np.testing.assert_array_equal(fresh.numpy(), want.numpy())
    finally:
        fusegrad.set_num_threads(before)


@pytest.mark.parametrize("n", [1023, 1024, 1 << 16])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("native, threads", [(True, 1), (True, 2), (False, 1)])
def test_clamp_between_numbers_has_torchs_bits(n, dtype, native, threads):
    """clamp and clamp_ between number bounds (in C from `CLAMP_NATIVE_MIN` contiguous
    values): NaN passes, an element equal to a bound keeps its zero's sign, crossing bounds
    give the upper one; torch's bits and version counts at one and two threads and with the
    C kernels off."""
    from fusegrad.ops import _native

    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n) * 2).astype(dtype)
    a[:4] = [np.nan, -0.0, 1.0, -1.0]
    before = fusegrad.get_num_threads()
    fusegrad.set_num_threads(threads)
    try:
        with _native.native_kernels(native):
            for lo, hi in ((-1, 1.0), (0.0, None), (None, 0.5), (2.0, -2.0), (-0.0, 0.0),
                           (70000.5, None), (-1e9, 3e38)):
                f, t = fusegrad.tensor(a), torch.tensor(a)
                fresh = fusegrad.clamp(f, lo, hi).numpy()
                got, want = f.clamp_(lo, hi), t.clamp_(lo, hi)
                np.testing.assert_array_equal(got.numpy().view(np.uint8),
                                              want.numpy().view(np.uint8))
                np.testing.assert_array_equal(fresh.view(np.uint8), want.numpy().view(np.uint8))
                assert f._version == t._version
    finally:
        fusegrad.set_num_threads(before)


def test_in_place_writers_belong_to_in_place_ops():
    """`write_into` writes into an op's first argument: only in-place ops declare one."""
    from fusegrad.ops.registry import REGISTRY

    writers = sorted(name for name, op in REGISTRY.items() if op.write_into is not None)
    assert {"add_.Tensor", "sub_.Tensor", "mul_.Tensor", "div_.Tensor", "relu_", "clamp_",
            "zero_", "copy_"} <= set(writers)
    assert all(REGISTRY[name].inplace for name in writers), writers


def _specials(rng, shape, dtype, divisor=False):
    """Random values of `shape` with NaN, infinities, signed zeros and (for a divisor) zeros
    among them."""
    v = rng.standard_normal(shape).astype(dtype).reshape(-1)
    special = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30] if not divisor else \
        [0.0, -0.0, np.nan, np.inf, 1e-30]
    v[:len(special)] = special[:v.size]
    rng.shuffle(v)
    return v.reshape(shape)


# A (N, C, H, W) `self` of 4 x 16 x 16 x 17 values (work enough to share between threads),
# and operands broadcast along its runs (a bias per channel, per sample, per row...), or in
# ways NumPy computes (rows, dims apart).
RUN_SHAPES = [(16, 1, 1), (1, 16, 1, 1), (4, 1, 1, 1), (16, 16, 1), (4, 16, 1, 1), (17,),
              (16, 1, 17), (1, 1, 1)]


@pytest.mark.parametrize("shape_b", RUN_SHAPES)
@pytest.mark.parametrize("native, threads", [(True, 1), (True, 2), (False, 1)])
def test_operand_broadcast_along_runs_has_torchs_bits(shape_b, native, threads):
    """add_/sub_/mul_/div_ of an operand broadcast along runs of `self` (in C, `a OP b` per
    value): torch's bits and versions, NaN, infinities and signed zeros included, in float32
    and float64, recorded or not, at one and two threads and with the C kernels off."""
    from fusegrad.ops import _native

    rng = np.random.default_rng(len(shape_b))
    before = fusegrad.get_num_threads()
    fusegrad.set_num_threads(threads)
    try:
        with _native.native_kernels(native):
            for dtype in ("float32", "float64"):
                a = _specials(rng, (4, 16, 16, 17), dtype)
                for op in ("add_", "sub_", "mul_", "div_"):
                    b = _specials(rng, shape_b, dtype, divisor=op == "div_")
                    f, t = fusegrad.tensor(a), torch.tensor(a)
                    got, want = getattr(f, op)(fusegrad.tensor(b)), getattr(t, op)(
                        torch.tensor(b))
                    assert got.numpy().tobytes() == want.numpy().tobytes(), (op, dtype)
                    assert f._version == t._version == 1
    finally:
        fusegrad.set_num_threads(before)


def _recorded_runs_case(L):
    x = L.tensor(np.linspace(-2, 2, 4 * 16 * 5 * 4, dtype=np.float32).reshape(4, 16, 5, 4),
                 requires_grad=True)
    b = L.tensor(np.linspace(-1, 1, 16, dtype=np.float32).reshape(16, 1, 1),
                 requires_grad=True)
    y = x * 1.5
    y.add_(b).relu_()
    names = [y.grad_fn.name(), y.grad_fn.next_functions[0][0].name()]
    (y * y).sum().backward()
    return names, y._version, y.detach().numpy().tobytes(), x.grad.numpy(), b.grad.numpy()


def test_recorded_add_along_runs_then_relu_as_torch():
    """add_ of a bias per channel, then relu_, on a recorded tensor: one node each, the
    version and the values bit for bit as torch's, both gradients as torch's (the bias's is
    a sum, in an order of its own)."""
    got, want = _recorded_runs_case(fusegrad), _recorded_runs_case(torch)
    assert got[:3] == want[:3]
    np.testing.assert_array_equal(got[3], want[3])
    np.testing.assert_allclose(got[4], want[4], rtol=1e-6)


@pytest.mark.parametrize("n", [10, 1027, (1 << 14) + 8, (1 << 15) + 40])
@pytest.mark.parametrize("native, threads", [(True, 1), (True, 2), (False, 1)])
def test_relu_in_place_has_torchs_bits(n, native, threads):
    """relu_ written in place at every size relu's kernel takes its own way (a scalar loop,
    a block of zeros, rows of it, C): torch's bits (NaN passes, -0.0 stays) and versions,
    contiguous and strided, in float32 and float64, at one and two threads and with the C
    kernels off."""
    from fusegrad.ops import _native

    rng = np.random.default_rng(n)
    before = fusegrad.get_num_threads()
    fusegrad.set_num_threads(threads)
    try:
        with _native.native_kernels(native):
            for dtype in ("float32", "float64"):
                a = _specials(rng, (n,), dtype)
                for view in (lambda x: x, lambda x: x[::2]):
                    f, t = fusegrad.tensor(a), torch.tensor(a)
                    got, want = view(f).relu_(), view(t).relu_()
                    assert got.numpy().tobytes() == want.numpy().tobytes(), (n, dtype)
                    assert f.numpy().tobytes() == t.numpy().tobytes()
                    assert f._version == t._version == 1
    finally:
        fusegrad.set_num_threads(before)
