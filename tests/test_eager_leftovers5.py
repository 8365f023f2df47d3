"""Eager fidelity against torch 2.13, round 5: Tensor methods refusing `out=`, the autograd
history of `out=` results of ops without a derivative (`scatter(..., reduce=)`,
`heaviside`), loss backward layouts, and the strides of elementwise results over operands of
several layouts (ternary ops, dtype promotion). Each case runs the same code on torch and
fusegrad and compares what a program can see.
"""

from __future__ import annotations

import inspect
import itertools
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)


def _outcome(fn):
    """What a call gives: ("ok", value) or (exception type name, message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("ok", fn())
    except Exception as e:  # noqa: BLE001  (the exception is what is compared)
        return (type(e).__name__, str(e))


# ---------------------------------------------------------------- methods refuse out=

# Methods whose calls with `out=` only are no valid call in either library for another
# reason first (the message is then about that), or whose torch message is its argument
# parser's list of overloads ("received an invalid combination of arguments").
_METHOD_SKIP = {"backward", "register_hook", "apply_", "map_", "map2_", "share_memory_",
                "storage", "untyped_storage", "pin_memory", "record_stream", "new_tensor",
                "numpy", "tolist", "to_sparse"}


def _method_names():
    return sorted(n for n in dir(torch.Tensor) if not n.startswith("_") and
                  hasattr(fusegrad.Tensor, n) and callable(getattr(torch.Tensor, n)) and
                  n not in _METHOD_SKIP)


def test_no_method_accepts_out():
    """Every Tensor method torch has refuses `out=` with a TypeError (torch's methods take no
    `out`); for the methods that are public functions (which take `out` as functions), where
    torch's message is Python's "got an unexpected keyword argument 'out'", fusegrad's is the
    same text. `new` takes any keyword here (left as it is)."""
    from fusegrad.ops.spellings import METHODS

    accepted, messages = [], []
    for name in _method_names():
        got = []
        for lib in LIBS:
            t = lib.ones(2, 2)
            got.append(_outcome(lambda: getattr(t, name)(out=lib.empty(0))))  # noqa: B023
        (tk, tm), (fk, fm) = got
        if tk != "TypeError":
            continue
        if fk != "TypeError" and name != "new" and "deprecated" not in str(fm):
            accepted.append((name, fk))
        form = METHODS.get(name, ("",))
        if "got an unexpected keyword argument 'out'" in tm and not tm.startswith(
                "Tensor.") and form[0] == "function" and "out" in inspect.signature(
                getattr(fusegrad._functions, form[1])).parameters:
            if fm != tm:
                messages.append((name, tm, fm))
    assert not accepted
    assert not messages


@pytest.mark.parametrize("call", [
    lambda lib, t: t.diff(out=lib.empty(0)),
    lambda lib, t: t.renorm(2, 0, 1.0, out=lib.empty(0)),
    lambda lib, t: t.scatter(0, lib.zeros(1, 3, dtype=lib.long), 1.0, out=lib.empty(0)),
    lambda lib, t: t.sum(1, out=lib.empty(0)),
    lambda lib, t: t.cumsum(0, out=lib.empty(0)),
    lambda lib, t: t.max(0, out=(lib.empty(0), lib.empty(0, dtype=lib.long))),
    lambda lib, t: t.qr(out=(lib.empty(0), lib.empty(0))),
    lambda lib, t: t.quantile(0.5, out=lib.empty(0)),
    lambda lib, t: t.norm(out=lib.empty(0)),
    lambda lib, t: t.lu(True, False, None),
    lambda lib, t: t.norm(2, 0, False, lib.float64, None),
], ids=["diff", "renorm", "scatter", "sum", "cumsum", "max", "qr", "quantile", "norm",
        "lu_positional", "norm_positional"])
def test_method_refuses_out_with_torchs_message(call):
    """A method given `out` raises torch's TypeError; where torch's message lists the
    method's overloads (its argument parser's), fusegrad's names the `out` it refuses."""
    got = []
    for lib in LIBS:
        t = lib.arange(9.0).reshape(3, 3) + lib.eye(3) * 5
        got.append(_outcome(lambda: call(lib, t)))  # noqa: B023
    assert got[0][0] == got[1][0] == "TypeError"
    if "received an invalid combination of arguments" in got[0][1]:
        assert "'out'" in got[1][1]
    else:
        assert got[1] == got[0]


def test_method_takes_dtype_where_the_function_takes_out():
    """`Tensor.norm`'s fourth parameter is `dtype` (the function's is `out`): the result is
    of that dtype, and nothing is written anywhere."""
    got = []
    for lib in LIBS:
        t = lib.arange(6.0).reshape(2, 3)
        r = t.norm(2, 0, False, lib.float64)
        got.append((str(r.dtype).split(".")[-1], np.round(r.numpy(), 5).tolist()))
    assert got[0] == got[1]


def test_function_forms_still_take_out():
    """Refusing `out` on the methods leaves the functions' `out=` as it was."""
    for name, args in (("exp", ()), ("diff", ()), ("sum", (1,)), ("renorm", (2, 0, 1.0))):
        got = []
        for lib in LIBS:
            t = lib.arange(6.0).reshape(2, 3)
            o = lib.empty(0)
            r = getattr(lib, name)(t, *args, out=o)
            got.append((r is o, tuple(o.shape), np.round(o.numpy(), 4).tolist()))
        assert got[0] == got[1], name


def test_aliases_stay_one_method():
    assert fusegrad.Tensor.arcsin is fusegrad.Tensor.asin
    assert fusegrad.Tensor.absolute is fusegrad.Tensor.abs


# ---------------------------------------------------------------- out= and autograd

def _scatter_case(lib, mode, reduce, rg_in, rg_out):
    x = lib.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), requires_grad=rg_in)
    idx = lib.tensor([[0, 1, 0]])
    src = lib.ones(1, 3, requires_grad=rg_in)
    o = lib.zeros(2, 3, requires_grad=rg_out)
    kw = {} if reduce is None else {"reduce": reduce}

    def run():
        with (lib.no_grad() if mode == "nograd" else lib.enable_grad()):
            r = lib.scatter(x, 0, idx, src, out=o, **kw)
        return (r is o, r.requires_grad, type(r.grad_fn).__name__ if r.grad_fn else None,
                r.detach().numpy().tolist())

    return _outcome(run)


@pytest.mark.parametrize("mode,reduce,rg_in,rg_out", list(itertools.product(
    ("grad", "nograd"), (None, "add", "multiply"), (False, True), (False, True))))
def test_scatter_out_autograd(mode, reduce, rg_in, rg_out):
    """`scatter(..., reduce=, out=)` is an op without a derivative: inputs requiring grad
    give `out` a NotImplemented node, an `out` requiring grad is refused naming
    `aten::scatter`; without `reduce` both are refused naming `scatter`."""
    assert _scatter_case(torch, mode, reduce, rg_in, rg_out) == \
        _scatter_case(fusegrad, mode, reduce, rg_in, rg_out)


_NO_DERIVATIVE = {
    "heaviside": lambda lib, x, o: lib.heaviside(x, x.detach(), out=o),
    "floor_divide": lambda lib, x, o: lib.floor_divide(x, 2.0, out=o),
    "diag": lambda lib, x, o: lib.diag(x[0], out=o),
    "scatter_value_reduce": lambda lib, x, o: lib.scatter(
        x, 0, lib.tensor([[0, 1, 0]]), 2.0, reduce="multiply", out=o),
}


@pytest.mark.parametrize("name", sorted(_NO_DERIVATIVE))
def test_out_of_op_without_derivative_records_not_implemented(name):
    """An input requiring grad makes `out` require grad with a NotImplemented node whose
    backward raises PyTorch's error; under no_grad nothing is recorded."""
    got = []
    for lib in LIBS:
        x = lib.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], requires_grad=True)
        o = lib.empty(0)
        r = _NO_DERIVATIVE[name](lib, x, o)
        back = _outcome(lambda: o.sum().backward())  # noqa: B023
        with lib.no_grad():
            o2 = lib.empty(0)
            _NO_DERIVATIVE[name](lib, x, o2)
        got.append((r is o, o.requires_grad, type(o.grad_fn).__name__, back,
                    o2.requires_grad, o2.grad_fn, o.detach().numpy().tolist()))
    assert got[0] == got[1]


def test_view_out_of_op_without_derivative():
    """A view given as `out` records the write on its base (CopySlices), as in-place ops
    on views do."""
    got = []
    for lib in LIBS:
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        base = lib.zeros(2, 3)
        v = base[0]
        lib.heaviside(x, x.detach(), out=v)
        got.append((type(v.grad_fn).__name__, type(base.grad_fn).__name__, base.requires_grad,
                    base._version, base.detach().numpy().tolist()))
    assert got[0] == got[1]


# ---------------------------------------------------------------- loss backward layouts

@pytest.mark.parametrize("loss", ["mse_loss", "smooth_l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_loss_gradients_are_contiguous(loss, reduction, create_graph):
    """PyTorch's loss backward kernels write into a contiguous buffer: the gradients of a
    transposed input and target are contiguous, with or without create_graph."""
    got = []
    for lib in LIBS:
        x = lib.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(4, 3)).t()
        t = lib.tensor(np.linspace(1, -1, 12, dtype=np.float32).reshape(4, 3)).t()
        x.requires_grad_()
        t.requires_grad_()
        out = getattr(lib.nn.functional, loss)(x, t, reduction=reduction)
        gx, gt = lib.autograd.grad(out.sum(), (x, t), create_graph=create_graph)
        got.append((gx.stride(), gt.stride(), np.round(gx.detach().numpy(), 5).tolist()))
    assert got[0] == got[1]


@pytest.mark.parametrize("op", ["mse_loss_backward", "huber_loss_backward",
                                "smooth_l1_loss_backward"])
def test_loss_backward_ops_are_contiguous(op):
    got = []
    for lib in LIBS:
        x = lib.rand(2, 3, 4, 5).contiguous(memory_format=lib.channels_last)
        t = lib.rand(4, 3).t()
        extra = () if op == "mse_loss_backward" else (1.0,)
        fn = getattr(lib.ops.aten, op)
        got.append((fn(lib.tensor(1.0), x, x, 1, *extra).stride(),
                    fn(lib.ones(3, 4), t, t.contiguous(), 0, *extra).stride()))
    assert got[0] == got[1]


# ---------------------------------------------------------------- result strides

_RNG = np.random.default_rng(5)


def _layouts(shape):
    """Makers of an operand of `shape` laid out row-major, transposed, sliced with a step,
    expanded, and (4-D) channels_last."""
    a = (_RNG.random(shape) + 0.5).astype(np.float32)
    out = {"c": lambda lib: lib.tensor(a),
           "t": lambda lib: lib.tensor(np.ascontiguousarray(a.swapaxes(-1, -2))).transpose(
               -1, -2),
           "sl": lambda lib: lib.tensor(np.concatenate([a, a], -1))[..., ::2],
           "ex": lambda lib: lib.tensor(a[..., :1, :]).expand(*shape)}
    if len(shape) == 4:
        out["cl"] = lambda lib: lib.tensor(a).contiguous(memory_format=lib.channels_last)
    return out


_TERNARY = {
    "lerp": lambda lib, x, y: lib.lerp(x, y, 0.3),
    "lerp_tensor": lambda lib, x, y: lib.lerp(x, y, y),
    "lerp_weight": lambda lib, x, y: lib.lerp(x, x, y),
    "where": lambda lib, x, y: lib.where(x > 1, x, y),
    "where_cond": lambda lib, x, y: lib.where(y > 1, x, y),
    "addcmul": lambda lib, x, y: lib.addcmul(x, y, x),
    "addcmul_t1": lambda lib, x, y: lib.addcmul(y, x, y),
    "addcdiv": lambda lib, x, y: lib.addcdiv(x, y, y),
    "clamp_min": lambda lib, x, y: lib.clamp(x, y, None),
    "clamp_max": lambda lib, x, y: lib.clamp(x, None, y),
    "clamp_both": lambda lib, x, y: lib.clamp(x, y, y + 1),
    "xlogy": lambda lib, x, y: lib.xlogy(x, y),
}


def _strides(op, f1, f2, dts=("float32", "float32")):
    got = []
    for lib in LIBS:
        x = f1(lib).to(getattr(lib, dts[0]))
        y = f2(lib).to(getattr(lib, dts[1]))
        r = op(lib, x, y)
        got.append((tuple(r.stride()), str(r.dtype).split(".")[-1],
                    np.round(r.double().numpy(), 4).tolist()))
    return got


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 3, 4, 5)], ids=str)
@pytest.mark.parametrize("name", sorted(_TERNARY))
def test_ternary_results_laid_out_as_torch(name, shape):
    """lerp, where, addcmul/addcdiv, clamp with tensor bounds and xlogy order their result's
    dims as PyTorch's iterator does (the first operand with an opinion decides)."""
    layouts = _layouts(shape)
    for (n1, f1), (n2, f2) in itertools.product(layouts.items(), layouts.items()):
        t, f = _strides(_TERNARY[name], f1, f2)
        assert t == f, (n1, n2)


_OFF_FAST_PATH = {
    "div_floor": lambda lib, x, y: lib.div(x, y, rounding_mode="floor"),
    "div_trunc": lambda lib, x, y: lib.div(x, y, rounding_mode="trunc"),
    "floor_divide": lambda lib, x, y: lib.floor_divide(x, y),
    "fmod": lambda lib, x, y: lib.fmod(x, y),
    "remainder": lambda lib, x, y: lib.remainder(x, y),
    "heaviside": lambda lib, x, y: lib.heaviside(x - 1, y),
    "nextafter": lambda lib, x, y: lib.nextafter(x, y),
}


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 3, 4, 5)], ids=str)
@pytest.mark.parametrize("name", sorted(_OFF_FAST_PATH))
def test_binary_kernels_off_the_fast_path_laid_out_as_torch(name, shape):
    """Binary kernels computed through `np.where` or temporaries (division with rounding,
    remainder, heaviside, nextafter) order their result's dims as PyTorch's iterator."""
    layouts = _layouts(shape)
    for (n1, f1), (n2, f2) in itertools.product(layouts.items(), layouts.items()):
        t, f = _strides(_OFF_FAST_PATH[name], f1, f2)
        assert t == f, (n1, n2)


_BINARY = {
    "mul": lambda lib, x, y: x * y, "add": lambda lib, x, y: x + y,
    "div": lambda lib, x, y: x / y, "maximum": lambda lib, x, y: lib.maximum(x, y),
    "atan2": lambda lib, x, y: lib.atan2(x, y), "eq": lambda lib, x, y: x == y,
    "pow": lambda lib, x, y: x ** y,
}


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 3, 4, 5)], ids=str)
@pytest.mark.parametrize("dts", [("float32", "float64"), ("float64", "float32")], ids=str)
@pytest.mark.parametrize("name", sorted(_BINARY))
def test_promoting_binary_results_laid_out_as_torch(name, dts, shape):
    """With operands of two dtypes, PyTorch's iterator first converts the one of the other
    dtype (`to`, which lays out an expanded or sliced operand contiguous), then orders the
    dims over the converted operands: `x.expand(...) * y.t().double()` is row-major."""
    layouts = _layouts(shape)
    for (n1, f1), (n2, f2) in itertools.product(layouts.items(), layouts.items()):
        t, f = _strides(_BINARY[name], f1, f2, dts)
        assert t == f, (n1, n2)


def test_promoting_with_a_number_converted_operand():
    """An integer operand sliced with a step and transposed, times a float number: PyTorch
    converts it contiguous first, so the result is row-major."""
    got = []
    for lib in LIBS:
        x = lib.arange(24).reshape(4, 6)[:, ::2].t()
        r = x * 1.5
        got.append((r.stride(), r.numpy().tolist()))
    assert got[0] == got[1]


# ---------------------------------------------------------------- op-by-op findings

def _both(fn):
    """`fn(lib)` for torch and fusegrad, with warnings silenced."""
    out = []
    for lib in LIBS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(fn(lib))
    return out


def _transposed(lib, shape):
    a = np.random.default_rng(1).random(shape[::-1]).astype(np.float32)
    return lib.tensor(a).transpose(0, len(shape) - 1) if len(shape) > 1 else lib.tensor(a)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_results_are_contiguous(name):
    def run(lib):
        x = _transposed(lib, (3, 4))
        x4 = lib.tensor(np.arange(120.0, dtype=np.float32).reshape(2, 3, 4, 5)).contiguous(
            memory_format=lib.channels_last)
        v, i = getattr(x, name)(0)
        v4, i4 = getattr(x4, name)(1)
        return v.stride(), i.stride(), v4.stride(), i4.stride(), v.numpy().tolist()

    t, f = _both(run)
    assert t == f


@pytest.mark.parametrize("layout", ["t", "sl", "cl"])
def test_fake_quantize_results_laid_out_like_the_input(layout):
    def run(lib):
        rng = np.random.default_rng(2)
        if layout == "t":
            x = _transposed(lib, (3, 4))
        elif layout == "sl":
            x = lib.tensor(rng.random((3, 8)).astype(np.float32))[:, ::2]
        else:
            x = lib.tensor(rng.random((2, 3, 4, 5)).astype(np.float32)).contiguous(
                memory_format=lib.channels_last)
        c = x.shape[1]
        r = lib.fake_quantize_per_tensor_affine(x, 0.1, 0, -8, 7)
        r2 = lib.fake_quantize_per_channel_affine(x, lib.ones(c) * 0.1,
                                                  lib.zeros(c, dtype=lib.int32), 1, -8, 7)
        return r.stride(), r2.stride(), np.round(r.numpy(), 5).tolist()

    t, f = _both(run)
    assert t == f


def test_max_unpool2d_keeps_channels_last():
    def run(lib):
        x = lib.tensor(np.random.default_rng(3).random((2, 3, 4, 4)).astype(np.float32))
        x = x.contiguous(memory_format=lib.channels_last).requires_grad_()
        p, i = lib.nn.functional.max_pool2d(x, 2, return_indices=True)
        u = lib.nn.functional.max_unpool2d(p, i, 2)
        (u * u).sum().backward()
        p2, i2 = lib.nn.functional.max_pool2d(x.detach().contiguous(), 2, return_indices=True)
        return (u.stride(), lib.nn.functional.max_unpool2d(p2, i2, 2).stride(),
                x.grad.stride(), np.round(u.detach().numpy(), 5).tolist())

    t, f = _both(run)
    assert t == f


def test_view_copy_of_a_tensor_no_view_fits():
    """`view_copy` never refuses: where no view has the shape it reshapes."""
    def run(lib):
        x = _transposed(lib, (3, 4)).requires_grad_()
        r = lib.view_copy(x, (2, 6))
        r.sum().backward()
        return (r.stride(), r.detach().numpy().tolist(), type(r.grad_fn).__name__,
                x.grad.stride(), _outcome(lambda: lib.view_copy(x, (5,)))[1])

    t, f = _both(run)
    assert t == f


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_embedding_bag_offset2bag_with_a_strided_weight(transposed, mode):
    """PyTorch's sum fast path (which leaves offset2bag empty) needs contiguous weight rows."""
    w = np.random.default_rng(4).random((10, 3)).astype(np.float32)

    def run(lib):
        weight = lib.tensor(np.ascontiguousarray(w.T)).t() if transposed else lib.tensor(w)
        weight.requires_grad_()
        args = (weight, lib.tensor([1, 2, 4, 5, 4, 3]), lib.tensor([0, 2, 4, 5]), False, mode,
                False, None, False, -1)
        if lib is torch:
            r = torch.ops.aten._embedding_bag(*args)
        else:
            from fusegrad import _dispatch
            from fusegrad.ops import REGISTRY
            r = _dispatch.call(REGISTRY["_embedding_bag"], *args)
        r[0].sum().backward()
        return [tuple(x.shape) for x in r], np.round(weight.grad.numpy(), 5).tolist()

    t, f = _both(run)
    assert t == f


def test_packed_sequence_data_is_contiguous():
    def run(lib):
        x = _transposed(lib, (7, 2))
        if lib is torch:
            data, sizes = torch._pack_padded_sequence(x, torch.tensor([4, 3]), False)
        else:
            from fusegrad import _dispatch
            from fusegrad.ops import REGISTRY
            data, sizes = _dispatch.call(REGISTRY["_pack_padded_sequence"], x,
                                         fusegrad.tensor([4, 3]), False)
        return data.stride(), data.numpy().tolist(), sizes.tolist()

    t, f = _both(run)
    assert t == f


@pytest.mark.parametrize("shapes", [((5, 3), (5, 4), (6, 3, 4)), ((7, 3), (7, 2), (1, 3, 2))],
                         ids=str)
def test_bilinear_of_a_transposed_input_is_contiguous(shapes):
    arrays = [np.random.default_rng(6).random(s).astype(np.float32) for s in shapes]

    def run(lib):
        a, b, w = (lib.tensor(x) for x in arrays)
        r = lib.nn.functional.bilinear(lib.tensor(np.ascontiguousarray(arrays[0].T)).t(), b, w)
        return r.stride(), np.round(r.numpy(), 4).tolist(), lib.nn.functional.bilinear(
            a, b, w).stride()

    t, f = _both(run)
    assert t == f


def test_pdist_of_a_transposed_input():
    """`pdist` runs its kernel on the input made contiguous (a CloneBackward0 in the graph);
    the kernel itself refuses a non-contiguous input."""
    def run(lib):
        x = _transposed(lib, (3, 4)).requires_grad_()
        r = lib.pdist(x)
        r.sum().backward()
        if lib is torch:
            refused = _outcome(lambda: torch.ops.aten._pdist_forward(x.detach(), 2.0))
        else:
            from fusegrad import _dispatch
            from fusegrad.ops import REGISTRY
            refused = _outcome(lambda: _dispatch.call(REGISTRY["_pdist_forward"],
                                                      x.detach(), 2.0))
        return ([type(n[0]).__name__ for n in r.grad_fn.next_functions], x.grad.stride(),
                np.round(r.detach().numpy(), 5).tolist(), refused)

    t, f = _both(run)
    assert t == f


# ---------------------------------------------------------------- dtypes PyTorch refuses

def _refusal_cases(lib, d):
    dt = getattr(lib, d)

    def x(*shape):
        return (lib.arange(float(np.prod(shape))).reshape(shape) % 3 + 0.5).to(dt)

    nf = lib.nn.functional
    return {
        "erfc": lambda: lib.erfc(x(3)), "erfc_": lambda: x(3).erfc_(),
        "i0e": lambda: lib.special.i0e(x(3)), "i1e": lambda: lib.special.i1e(x(3)),
        "xlog1py": lambda: lib.special.xlog1py(x(3), x(3)),
        "xlog1py_number": lambda: lib.special.xlog1py(x(3), 2.0),
        "reflect1d": lambda: nf.pad(x(1, 2, 5), (1, 1), mode="reflect"),
        "reflect2d": lambda: nf.pad(x(1, 2, 4, 4), (1, 1, 1, 1), mode="reflect"),
        "replicate3d": lambda: nf.pad(x(1, 2, 3, 3, 3), (1,) * 6, mode="replicate"),
        "max_unpool2d": lambda: nf.max_unpool2d(x(1, 2, 2, 2),
                                                lib.zeros(1, 2, 2, 2, dtype=lib.long), 2),
        "max_unpool3d": lambda: nf.max_unpool3d(x(1, 2, 2, 2, 2),
                                                lib.zeros(1, 2, 2, 2, 2, dtype=lib.long), 2),
        "searchsorted": lambda: lib.searchsorted(x(4), x(3)),
        "bucketize": lambda: lib.bucketize(x(3), x(4)),
        "isin": lambda: lib.isin(x(3), x(3)), "isin_number": lambda: lib.isin(x(3), 1),
        "pdist": lambda: lib.pdist(x(3, 2)), "renorm": lambda: lib.renorm(x(3, 2), 2, 0, 1.0),
        "fold": lambda: nf.fold(x(1, 4, 4), (3, 3), 2),
        "unfold": lambda: nf.unfold(x(1, 2, 4, 4), 2),
        "nll_loss2d": lambda: nf.nll_loss(x(1, 2, 4, 4), lib.zeros(1, 4, 4, dtype=lib.long)),
        "grid_sample": lambda: nf.grid_sample(x(1, 2, 4, 4), lib.zeros(1, 2, 2, 2, dtype=dt)),
    }


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "complex64", "float32"])
@pytest.mark.parametrize("name", sorted(_refusal_cases(torch, "float32")))
def test_dtypes_refused_as_torch(name, dtype):
    """Inputs of a dtype PyTorch's kernel has no form for raise its error (and the others
    run in both)."""
    got = []
    for lib in LIBS:
        out = _outcome(_refusal_cases(lib, dtype)[name])
        got.append(out if out[0] != "ok" else "ok")
    assert got[0] == got[1]


# ---------------------------------------------------------------- shape errors as torch's

_SHAPE_ERRORS = {
    "slice_scatter": lambda lib: lib.slice_scatter(lib.rand(3, 4), lib.rand(4, 2), 1, 0, 2),
    "select_scatter": lambda lib: lib.select_scatter(lib.rand(3, 4), lib.rand(5), 0, 0),
    "multi_margin": lambda lib: lib.nn.functional.multi_margin_loss(
        lib.rand(3, 4), lib.zeros(5, dtype=lib.long)),
    "multi_margin_2d_target": lambda lib: lib.nn.functional.multi_margin_loss(
        lib.rand(3, 4), lib.zeros(3, 1, dtype=lib.long)),
    "addbmm_batches": lambda lib: lib.addbmm(lib.rand(3, 5), lib.rand(3, 3, 4),
                                             lib.rand(2, 4, 5)),
    "addr_self": lambda lib: lib.addr(lib.rand(3, 4), lib.rand(4), lib.rand(4)),
    "addr_self_3d": lambda lib: lib.addr(lib.rand(2, 4, 4), lib.rand(4), lib.rand(4)),
    "addmv_self": lambda lib: lib.addmv(lib.rand(3), lib.rand(4, 3), lib.rand(3)),
    "addmv_dims": lambda lib: lib.addmv(lib.rand(2, 4), lib.rand(4, 3), lib.rand(3)),
    "addmv_inner": lambda lib: lib.addmv(lib.rand(4), lib.rand(4, 2), lib.rand(3)),
    "addmm_": lambda lib: lib.rand(3, 5).addmm_(lib.rand(4, 3), lib.rand(3, 5)),
    "addmm_broadcastable": lambda lib: lib.rand(1, 5).addmm_(lib.rand(4, 3), lib.rand(3, 5)),
    "addmm_inner": lambda lib: lib.rand(4, 5).addmm_(lib.rand(4, 2), lib.rand(3, 5)),
    "baddbmm_": lambda lib: lib.rand(1, 4, 5).baddbmm_(lib.rand(2, 4, 3), lib.rand(2, 3, 5)),
}


@pytest.mark.parametrize("name", sorted(_SHAPE_ERRORS))
def test_shape_errors_as_torch(name):
    t, f = (_outcome(lambda: _SHAPE_ERRORS[name](lib)) for lib in LIBS)  # noqa: B023
    assert t[0] != "ok"
    assert t == f


def test_valid_shapes_still_run():
    """The checks above refuse only what PyTorch refuses."""
    def run(lib):
        a = lib.tensor(np.arange(20.0, dtype=np.float32).reshape(4, 5))
        m1 = lib.tensor(np.ones((4, 3), np.float32))
        m2 = lib.tensor(np.ones((3, 5), np.float32))
        b = lib.tensor(np.ones((2, 4, 5), np.float32))
        return (a.clone().addmm_(m1, m2).numpy().tolist(),
                b.baddbmm_(m1.expand(2, 4, 3), m2.expand(2, 3, 5)).numpy().tolist(),
                lib.addmv(lib.tensor([1.0]), m1, lib.ones(3)).numpy().tolist(),
                lib.addmv(lib.tensor(2.0), m1, lib.ones(3)).numpy().tolist(),
                lib.addr(lib.ones(4, 1), lib.ones(4), lib.ones(5)).numpy().tolist(),
                lib.slice_scatter(a, lib.zeros(4, 2), 1, 0, 4, 2).numpy().tolist(),
                lib.select_scatter(a, lib.zeros(5), 0, -1).numpy().tolist())

    t, f = _both(run)
    assert t == f
