"""CPU autocast against PyTorch, more: result dtypes, input-gradient dtypes and the first
graph nodes of many public functions under `autocast("cpu")` in bfloat16 and float16, on
float32, bfloat16 and float16 inputs (lower-precision, float32 and promote policies, and the
functions autocast leaves alone); and the state functions through nested regions, the
weight cache switch, and `custom_fwd`/`custom_bwd` with `cast_inputs`.
"""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

G = np.random.default_rng(0)
DATA = {
    "m": G.uniform(0.1, 0.9, (4, 4)) + 2 * np.eye(4), "v": G.uniform(0.1, 0.9, (4,)),
    "b": G.uniform(0.1, 0.9, (2, 4, 4)), "x3": G.uniform(0.1, 0.9, (2, 3, 8)),
    "x4": G.uniform(0.1, 0.9, (2, 3, 6, 6)), "x5": G.uniform(0.1, 0.9, (2, 3, 4, 4, 4)),
    "w1": G.uniform(-1, 1, (4, 3, 3)), "w2": G.uniform(-1, 1, (4, 3, 3, 3)),
    "w3": G.uniform(-1, 1, (4, 3, 2, 2, 2)), "lin": G.uniform(-1, 1, (5, 4)),
    "p": G.uniform(0.1, 0.9, (4, 4)),
    "grid": G.uniform(-1, 1, (2, 3, 3, 2)),
}


def _t(lib, key, dtype, rg=True):
    t = lib.from_numpy(DATA[key].astype(np.float32)).to(getattr(lib, dtype))
    return t.requires_grad_() if rg else t


F = "nn.functional."
# name: (function path, argument keys, extra positional arguments)
CALLS = {
    "mm": ("mm", "m m", ()), "bmm": ("bmm", "b b", ()), "matmul": ("matmul", "b m", ()),
    "matmul_vec": ("matmul", "m v", ()), "addmm": ("addmm", "m m m", ()),
    "baddbmm": ("baddbmm", "b b b", ()), "addbmm": ("addbmm", "m b b", ()),
    "linear": (F + "linear", "m lin", ()), "conv1d": (F + "conv1d", "x3 w1", ()),
    "conv2d": (F + "conv2d", "x4 w2", ()), "conv3d": (F + "conv3d", "x5 w3", ()),
    "relu": (F + "relu", "x4", ()),
    "mse_loss": (F + "mse_loss", "m p", ()), "l1_loss": (F + "l1_loss", "m p", ()),
    "smooth_l1": (F + "smooth_l1_loss", "m p", ()), "huber": (F + "huber_loss", "m p", ()),
    "bce": (F + "binary_cross_entropy", "p p", ()),
    "bce_logits": (F + "binary_cross_entropy_with_logits", "m p", ()),
    "soft_margin": (F + "soft_margin_loss", "m p", ()),
    "kl_div": (F + "kl_div", "m p", ()), "poisson_nll": (F + "poisson_nll_loss", "m p", ()),
    "hinge": (F + "hinge_embedding_loss", "m p", ()),
    "margin_ranking": (F + "margin_ranking_loss", "v v v", ()),
    "cosine_embedding": (F + "cosine_embedding_loss", "m m v", ()),
    "triplet": (F + "triplet_margin_loss", "m m m", ()),
    "avg_pool3d": (F + "avg_pool3d", "x5", (2,)),
    "max_pool2d": (F + "max_pool2d", "x4", (2,)), "avg_pool2d": (F + "avg_pool2d", "x4", (2,)),
    "adaptive_avg_pool2d": (F + "adaptive_avg_pool2d", "x4", (2,)),
    "interpolate": (F + "interpolate", "x4", (None, 2.0)),
    "replication_pad": (F + "pad", "x4", ((1, 1, 1, 1), "replicate")),
    "reflection_pad": (F + "pad", "x4", ((1, 1, 1, 1), "reflect")),
    "reflection_pad3d": (F + "pad", "x5", ((1, 1, 1, 1, 1, 1), "reflect")),
    "constant_pad": (F + "pad", "x4", ((1, 1),)),
    "softmax": ("softmax", "m", (1,)), "log_softmax": ("log_softmax", "m", (1,)),
    "layer_norm": (F + "layer_norm", "m", ((4,),)), "group_norm": (F + "group_norm", "x4", (3,)),
    "gelu": (F + "gelu", "m", ()), "exp": ("exp", "m", ()), "add": ("add", "m p", ()),
    "maximum": ("maximum", "m p", ()),
    "sum": ("sum", "m", ()), "mean": ("mean", "m", ()), "prod": ("prod", "m", ()),
    "cumsum": ("cumsum", "m", (0,)), "cumprod": ("cumprod", "m", (0,)),
    "norm": ("norm", "m", ()), "var": ("var", "m", ()), "logsumexp": ("logsumexp", "m", (1,)),
    "cdist": ("cdist", "m m", ()), "dot": ("dot", "v v", ()),
    "mv": ("mv", "m v", ()), "outer": ("outer", "v v", ()), "vdot": ("vdot", "v v", ()),
    "cat": ("cat", "[m p]", ()), "stack": ("stack", "[m p]", ()),
    "index_copy": ("index_copy", "m", (0, "idx", "p")),
    "inverse": ("inverse", "m", ()), "det": ("linalg.det", "m", ()),
    "logdet": ("logdet", "m", ()), "cholesky": ("linalg.cholesky", "m", ()),
    "qr": ("linalg.qr", "m", ()), "eigvalsh": ("linalg.eigvalsh", "m", ()),
    "svdvals": ("linalg.svdvals", "m", ()), "solve": ("linalg.solve", "m p", ()),
    "lstsq": ("linalg.lstsq", "m p", ()), "matrix_rank": ("linalg.matrix_rank", "m", ()),
    "cond": ("linalg.cond", "m", ()), "vecdot": ("linalg.vecdot", "m m", ()),
    "quantile": ("quantile", "v", (0.5,)), "polar": ("polar", "m p", ()),
    "eig": ("linalg.eig", "m", ()),
    # float32 ops written as composites here (FFTs, 3-D pools, grid_sample, eigvals, lu)
    "fft": ("fft.fft", "m", ()), "rfft": ("fft.rfft", "m", ()), "ifft": ("fft.ifft", "m", ()),
    "irfft": ("fft.irfft", "m", ()), "hfft": ("fft.hfft", "m", ()),
    "ihfft": ("fft.ihfft", "m", ()), "fft2": ("fft.fft2", "x4", ()),
    "rfftn": ("fft.rfftn", "x4", ()), "irfft2": ("fft.irfft2", "x4", ()),
    "max_pool3d": (F + "max_pool3d", "x5", (2,)),
    "adaptive_avg_pool3d": (F + "adaptive_avg_pool3d", "x5", (2,)),
    "adaptive_avg_pool3d_1": (F + "adaptive_avg_pool3d", "x5", (1,)),
    "adaptive_max_pool3d": (F + "adaptive_max_pool3d", "x5", (2,)),
    "fractional_max_pool2d": (F + "fractional_max_pool2d", "x4", (2, (3, 3))),
    "fractional_max_pool3d": (F + "fractional_max_pool3d", "x5", (2, (2, 2, 2))),
    "eigvals": ("linalg.eigvals", "m", ()), "lu": ("lu", "m", ()),
}


def _resolve(lib, path):
    obj = lib
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _args(lib, keys, extra, dtype):
    if keys.startswith("["):  # one list of tensors
        args = [[_t(lib, x, dtype) for x in keys.strip("[]").split()]]
    else:
        args = [_t(lib, k, dtype) for k in keys.split()]
    for e in extra:
        if e == "idx":
            e = lib.tensor([2, 0, 1, 3])
        elif e == "p":
            e = _t(lib, "p", dtype)
        args.append(e)
    return args


def _leaves(args):
    out = []
    for a in args:
        out += _leaves(a) if isinstance(a, list) else [a]
    return [a for a in out if hasattr(a, "requires_grad") and a.requires_grad]


def _desc(r):
    if isinstance(r, (tuple, list)):
        return tuple(_desc(x) for x in r)
    if hasattr(r, "dtype") and hasattr(r, "grad_fn"):
        node = r.grad_fn
        nexts = () if node is None else tuple(
            None if f is None else type(f).__name__ for f, _ in node.next_functions)
        return (str(r.dtype).split(".")[-1], None if node is None else type(node).__name__,
                nexts)
    return type(r).__name__


def _run(lib, name, autocast_dtype, in_dtype):
    path, keys, extra = CALLS[name]
    args = _args(lib, keys, extra, in_dtype)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.autocast("cpu", dtype=getattr(lib, autocast_dtype)):
                r = _resolve(lib, path)(*args)
            first = r[0] if isinstance(r, (tuple, list)) else r
            grads = None
            if first.requires_grad:
                (first.abs() if first.is_complex() else first).float().sum().backward()
                grads = tuple(None if a.grad is None else str(a.grad.dtype).split(".")[-1]
                              for a in _leaves(args))
        return _desc(r), grads
    except Exception as e:  # noqa: BLE001  (compared with PyTorch's)
        return type(e).__name__


@pytest.mark.parametrize("autocast_dtype,in_dtype", [
    ("bfloat16", "float32"), ("bfloat16", "bfloat16"), ("bfloat16", "float16"),
    ("float16", "float32"), ("float16", "bfloat16")])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_dtypes_grads_and_nodes_under_autocast_as_torch(name, autocast_dtype, in_dtype):
    want = _run(torch, name, autocast_dtype, in_dtype)
    if isinstance(want, str) and in_dtype != "float32":
        pytest.skip(f"PyTorch raises {want} on {in_dtype} input")
    assert _run(fusegrad, name, autocast_dtype, in_dtype) == want


# ---------------------------------------------------------------- state, cache, custom_fwd


def _state_program(lib):
    """A program that reads the autocast state and casts through nested regions, the cache
    switch and the decorator; returns what it saw (dtypes and node names as strings)."""
    seen = []

    def note(*xs):
        seen.append(tuple(str(x).split(".")[-1] for x in xs))

    def nodes(t):
        return [None if f is None else type(f).__name__ for f, _ in t.grad_fn.next_functions]

    w = lib.nn.Parameter(lib.from_numpy(DATA["p"].astype(np.float32)))
    x = lib.from_numpy(DATA["m"].astype(np.float32))
    note(lib.get_autocast_dtype("cpu"), lib.is_autocast_enabled("cpu"),
         lib.is_autocast_cache_enabled())
    with lib.autocast("cpu", dtype=lib.float16, cache_enabled=False):
        note(lib.get_autocast_dtype("cpu"), lib.is_autocast_enabled("cpu"),
             lib.is_autocast_cache_enabled())
        y = (x @ w) + (x @ w)
        a, b = y.grad_fn.next_functions
        note(y.dtype, a[0].next_functions[1][0] is b[0].next_functions[1][0])
        with lib.autocast("cpu"):
            note(lib.get_autocast_dtype("cpu"), lib.is_autocast_cache_enabled(), (x @ w).dtype)
            y = (x @ w) + (x @ w)
            a, b = y.grad_fn.next_functions
            note(y.dtype, a[0].next_functions[1][0] is b[0].next_functions[1][0], *nodes(y))
            with lib.autocast("cpu", enabled=False, dtype=lib.float16):
                note(lib.get_autocast_dtype("cpu"), lib.is_autocast_enabled("cpu"),
                     (x @ w).dtype, (x.half() @ w.half()).dtype)
            y.sum().backward()
            note(w.grad.dtype)
        note(lib.get_autocast_dtype("cpu"), lib.is_autocast_cache_enabled(), (x @ w).dtype)
    note(lib.get_autocast_dtype("cpu"), lib.is_autocast_enabled("cpu"),
         lib.is_autocast_cache_enabled(), (x @ w).dtype)
    with lib.autocast("cpu"):
        with lib.no_grad():
            note((x @ w).requires_grad)
        y = x @ w  # the cast cached under no_grad still carries the weight's gradient
        note(y.requires_grad, *nodes(y))
        note((x.double() @ w.double()).dtype, lib.cat([x.bfloat16(), x]).dtype)
    lib.set_autocast_dtype("cpu", lib.float16)
    try:
        with lib.autocast("cpu"):
            note(lib.get_autocast_dtype("cpu"), (x @ w).dtype)

        @lib.autocast("cpu", dtype=lib.bfloat16)
        def inner(p, q):
            return (p @ q).dtype, lib.get_autocast_dtype("cpu")

        note(*inner(x, w), lib.get_autocast_dtype("cpu"), lib.is_autocast_enabled("cpu"))
    finally:
        lib.set_autocast_dtype("cpu", lib.bfloat16)
    return seen


def test_state_nesting_and_cache_as_torch():
    assert _state_program(fusegrad) == _state_program(torch)


def _custom_program(lib):
    seen = []

    class Cast(lib.autograd.Function):
        @staticmethod
        @lib.amp.custom_fwd(device_type="cpu", cast_inputs=lib.float32)
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            seen.append(("fwd", str(a.dtype), str(b.dtype), lib.is_autocast_enabled("cpu")))
            return a @ b

        @staticmethod
        @lib.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            seen.append(("bwd", str(g.dtype), lib.is_autocast_enabled("cpu"),
                         str((g @ b.t()).dtype)))
            return g @ b.t(), a.t() @ g

    class Keep(lib.autograd.Function):
        @staticmethod
        @lib.amp.custom_fwd(device_type="cpu")
        def forward(ctx, a, b):
            seen.append(("fwd2", str(a.dtype), lib.is_autocast_enabled("cpu"),
                         str((a @ b).dtype)))
            return a @ b

        @staticmethod
        @lib.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen.append(("bwd2", str(g.dtype), lib.is_autocast_enabled("cpu"),
                         str(lib.get_autocast_dtype("cpu"))))
            return g, g

    x = lib.from_numpy(DATA["m"].astype(np.float32)).requires_grad_()
    w = lib.from_numpy(DATA["p"].astype(np.float32)).requires_grad_()
    with lib.autocast("cpu"):
        r1 = Cast.apply(x.bfloat16(), w)
        r2 = Keep.apply(x, w)
        r3 = Cast.apply(x.double(), w.double())  # float64 is left alone
    with lib.autocast("cpu", dtype=lib.float16):
        r4 = Keep.apply(x, w)
    r5 = Cast.apply(x.bfloat16(), w.bfloat16())  # outside a region: no casts
    for r in (r1, r2, r4, r5):
        r.float().sum().backward()
    seen.append(tuple(str(r.dtype) for r in (r1, r2, r3, r4, r5)))
    seen.append((str(x.grad.dtype), str(w.grad.dtype)))
    return [tuple(str(v).replace("fusegrad", "torch") for v in s) for s in seen]


def test_custom_fwd_and_bwd_as_torch():
    assert _custom_program(fusegrad) == _custom_program(torch)


def test_set_aside_runs_ops_as_a_disabled_region_and_restores():
    """`_autocast.set_aside()` (for `out=` calls, whose PyTorch overloads autocast leaves
    alone) runs ops as PyTorch's `autocast(enabled=False)` inside a region, and restores."""
    from fusegrad import _autocast

    def program(lib, inner):
        a = lib.from_numpy(DATA["m"].astype(np.float32))
        seen = []
        with lib.autocast("cpu"):
            with inner():
                seen += [str((a @ a).dtype), str(lib.cat([a.bfloat16(), a]).dtype)]
            seen += [str((a @ a).dtype), str(lib.get_autocast_dtype("cpu"))]
        return [s.replace("fusegrad", "torch") for s in seen]

    want = program(torch, lambda: torch.autocast("cpu", enabled=False))
    assert program(fusegrad, _autocast.set_aside) == want
    assert not fusegrad.is_autocast_enabled("cpu")


@pytest.mark.parametrize("in_dtype", ["float32", "bfloat16"])
def test_grid_sample_runs_in_float32_under_autocast(in_dtype):
    # (its nodes are a composite's here: the values and dtypes are compared)
    got = []
    for lib in (torch, fusegrad):
        x, grid = _t(lib, "x4", in_dtype), _t(lib, "grid", in_dtype)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = lib.nn.functional.grid_sample(x, grid, align_corners=False)
        y.sum().backward()
        got.append((str(y.dtype), str(x.grad.dtype), str(grid.grad.dtype),
                    y.detach().double().numpy(), x.grad.double().numpy()))
    (*ta, ty, tg), (*fa, fy, fg) = got
    assert [a.split(".")[-1] for a in fa] == [a.split(".")[-1] for a in ta]
    np.testing.assert_allclose(fy, ty, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fg, tg, rtol=1e-2, atol=1e-2)
