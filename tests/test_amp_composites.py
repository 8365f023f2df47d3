"""Public functions that PyTorch's CPU autocast casts as a whole (not registry entries here):
under `autocast("cpu")` each gives PyTorch's result dtype and records PyTorch's backward
graph (the `ToCopyBackward0` casts in the same places), for float32 and bfloat16 inputs."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from test_amp_ops import dtypes, graph  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(0)


def _r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _spd(n):
    a = _r(n, n)
    return (a @ a.T + n * np.eye(n)).astype(np.float32)


def _labels(n, c):
    return RNG.integers(0, c, n).astype(np.int64)


def _sign(n):
    return np.sign(_r(n)).astype(np.float32)


# (id, function path in both namespaces, args, kwargs); arrays of float32 stand for float
# tensors (converted to the case's dtype), others (int64 labels) stay as they are.
CASES = [
    ("linear", "nn.functional.linear", (_r(4, 5), _r(3, 5), _r(3)), {}),
    ("linear_3d", "nn.functional.linear", (_r(2, 4, 5), _r(3, 5), _r(3)), {}),
    ("linear_nobias", "nn.functional.linear", (_r(4, 5), _r(3, 5)), {}),
    ("conv1d", "nn.functional.conv1d", (_r(2, 3, 9), _r(4, 3, 3), _r(4)), {}),
    ("conv2d", "nn.functional.conv2d", (_r(2, 3, 7, 7), _r(4, 3, 3, 3), _r(4)),
     {"padding": 1}),
    ("conv2d_unbatched", "nn.functional.conv2d", (_r(3, 7, 7), _r(4, 3, 3, 3)), {}),
    ("conv_transpose1d", "nn.functional.conv_transpose1d", (_r(2, 3, 5), _r(3, 4, 3)), {}),
    ("conv_transpose2d", "nn.functional.conv_transpose2d", (_r(2, 3, 5, 5), _r(3, 4, 3, 3),
                                                            _r(4)), {}),
    ("torch_conv2d", "conv2d", (_r(2, 3, 7, 7), _r(4, 3, 3, 3)), {}),
    ("matmul_2d", "matmul", (_r(4, 5), _r(5, 3)), {}),
    ("matmul_3d_2d", "matmul", (_r(2, 4, 5), _r(5, 3)), {}),
    ("matmul_batched", "matmul", (_r(2, 4, 5), _r(2, 5, 3)), {}),
    ("matmul_vec", "matmul", (_r(4, 5), _r(5)), {}),
    ("matmul_1d_3d", "matmul", (_r(5), _r(2, 5, 3)), {}),
    ("einsum", "einsum", ("bij,bjk->bik", _r(2, 3, 4), _r(2, 4, 5)), {}),
    ("prelu", "nn.functional.prelu", (_r(2, 3, 4), np.full(3, 0.25, np.float32)), {}),
    ("sdpa", "nn.functional.scaled_dot_product_attention",
     (_r(2, 2, 3, 4), _r(2, 2, 3, 4), _r(2, 2, 3, 4)), {}),
    ("vecdot", "linalg.vecdot", (_r(3, 4), _r(3, 4)), {}),
    ("cross_entropy", "nn.functional.cross_entropy", (_r(6, 5), _labels(6, 5)), {}),
    ("cross_entropy_smooth", "nn.functional.cross_entropy", (_r(6, 5), _labels(6, 5)),
     {"label_smoothing": 0.1}),
    ("nll_loss", "nn.functional.nll_loss", (_r(6, 5), _labels(6, 5)), {}),
    ("l1_loss", "nn.functional.l1_loss", (_r(4, 3), _r(4, 3)), {}),
    ("mse_loss", "nn.functional.mse_loss", (_r(4, 3), _r(4, 3)), {}),
    ("smooth_l1_loss", "nn.functional.smooth_l1_loss", (_r(4, 3), _r(4, 3)), {}),
    ("kl_div", "nn.functional.kl_div", (_r(4, 3), np.abs(_r(4, 3))),
     {"reduction": "batchmean"}),
    ("bce_logits", "nn.functional.binary_cross_entropy_with_logits",
     (_r(4, 3), np.abs(_r(4, 3)) % 1), {}),
    ("cosine_embedding_loss", "nn.functional.cosine_embedding_loss",
     (_r(4, 3), _r(4, 3), _sign(4)), {}),
    ("hinge_embedding_loss", "nn.functional.hinge_embedding_loss", (_r(4, 3), _sign(3)), {}),
    ("margin_ranking_loss", "nn.functional.margin_ranking_loss", (_r(4), _r(4), _sign(4)), {}),
    ("triplet_margin_loss", "nn.functional.triplet_margin_loss",
     (_r(4, 3), _r(4, 3), _r(4, 3)), {}),
    ("poisson_nll_loss", "nn.functional.poisson_nll_loss", (_r(4, 3), np.abs(_r(4, 3))), {}),
    ("multilabel_margin_loss", "nn.functional.multilabel_margin_loss",
     (_r(3, 4), np.array([[3, 0, -1, 1], [0, 1, 2, 3], [1, -1, 0, 0]])), {}),
    ("cdist", "cdist", (_r(4, 3), _r(5, 3)), {}),
    ("trace", "trace", (_r(4, 4),), {}),
    ("quantile", "quantile", (_r(4, 5), 0.3), {"dim": 1}),
    ("nanquantile", "nanquantile", (_r(4, 5), 0.3), {}),
    ("inverse", "inverse", (_spd(3),), {}),
    ("pinverse", "pinverse", (_r(3, 4),), {}),
    ("linalg_inv", "linalg.inv", (_spd(3),), {}),
    ("linalg_cholesky", "linalg.cholesky", (_spd(3),), {}),
    ("linalg_eigh", "linalg.eigh", (_spd(3),), {}),
    ("linalg_eigvalsh", "linalg.eigvalsh", (_spd(3),), {}),
    ("linalg_svd", "linalg.svd", (np.diag([3.0, 2.0, 1.0]).astype(np.float32),), {}),
    ("linalg_svdvals", "linalg.svdvals", (_r(3, 4),), {}),
    ("linalg_solve", "linalg.solve", (_spd(3), _r(3, 2)), {}),
    ("linalg_matrix_rank", "linalg.matrix_rank", (_r(3, 4),), {}),
    ("linalg_cond", "linalg.cond", (_spd(3),), {}),
    ("linalg_tensorinv", "linalg.tensorinv", (_spd(4).reshape(4, 2, 2),), {"ind": 1}),
    ("linalg_tensorsolve", "linalg.tensorsolve", (_spd(4).reshape(2, 2, 4), _r(2, 2)), {}),
    ("svd", "svd", (np.diag([3.0, 2.0, 1.0]).astype(np.float32),), {}),
    ("qr", "qr", (_r(4, 3),), {}),
    ("cholesky", "cholesky", (_spd(3),), {}),
    ("lu_solve", "lu_solve", None, {}),  # built per library (needs lu_factor)
    ("addmv", "addmv", (_r(4), _r(4, 3), _r(3)), {}),
    ("addr", "addr", (_r(4, 3), _r(4), _r(3)), {}),
    ("tensordot", "tensordot", (_r(3, 4), _r(4, 5)), {"dims": 1}),
    ("bilinear", "nn.functional.bilinear", (_r(2, 3), _r(2, 4), _r(5, 3, 4)), {}),
    ("layer_norm", "nn.functional.layer_norm", (_r(2, 5), (5,), _r(5), _r(5)), {}),
    ("group_norm", "nn.functional.group_norm", (_r(2, 4, 3), 2, _r(4), _r(4)), {}),
    ("softmax", "softmax", (_r(3, 4), 1), {}),
    ("cat", "cat", ([_r(2, 3), _r(1, 3)],), {}),
]


def _resolve(lib, path):
    obj = lib
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _convert(x, lib, dtype, requires_grad):
    if isinstance(x, np.ndarray):
        t = lib.from_numpy(x.copy())
        if t.is_floating_point():
            t = t.to(getattr(lib, dtype))
            if requires_grad:
                t.requires_grad_(True)
        return t
    if isinstance(x, list):
        return [_convert(v, lib, dtype, requires_grad) for v in x]
    return x


def _args(lib, case_id, args, dtype, rg):
    if case_id == "lu_solve":
        a = lib.from_numpy(_spd(3).copy())
        lu, piv = lib.linalg.lu_factor(a)
        b = _convert(_r(3, 2), lib, dtype, rg)
        return (b, lu.to(getattr(lib, dtype)), piv)
    return tuple(_convert(a, lib, dtype, rg) for a in args)


def run(lib, case, dtype, rg, enabled=True):
    """(result dtypes, graph) of the case under CPU bfloat16 autocast (or without it), or the
    error type."""
    case_id, path, args, kwargs = case
    fn = _resolve(lib, path)
    try:
        with lib.autocast("cpu", dtype=lib.bfloat16, enabled=enabled):
            out = fn(*_args(lib, case_id, args, dtype, rg), **kwargs)
    except Exception as e:  # noqa: BLE001  (the error type is compared)
        return type(e).__name__
    return dtypes(out), graph(out)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_composite_under_autocast_matches_torch(case, dtype):
    rg = dtype == "float32"
    want = run(torch, case, dtype, rg)
    got = run(fusegrad, case, dtype, rg)
    if isinstance(want, str):
        assert isinstance(got, str), f"PyTorch raised {want}, fusegrad gave {got}"
        return
    assert not isinstance(got, str), f"fusegrad raised {got}; PyTorch gave {want}"
    assert got[0] == want[0]
    # Graphs are compared where they agree without autocast (einsum, trace, addmv and
    # tensorinv record other nodes than PyTorch's composites today, autocast or not).
    if rg and run(torch, case, dtype, rg, False)[1] == run(fusegrad, case, dtype, rg, False)[1]:
        assert got[1] == want[1]


def test_composite_values_close_to_torch():
    """linear and conv2d under autocast: bfloat16 results within bfloat16's rounding of
    PyTorch's (float32 accumulation in both)."""
    for path, args in (("nn.functional.linear", (_r(8, 16), _r(4, 16), _r(4))),
                       ("nn.functional.conv2d", (_r(2, 3, 8, 8), _r(4, 3, 3, 3), _r(4)))):
        outs = []
        for lib in (torch, fusegrad):
            with lib.autocast("cpu"):
                out = _resolve(lib, path)(*[lib.from_numpy(a.copy()) for a in args])
            outs.append(out.float().detach().numpy())
        np.testing.assert_allclose(outs[1], outs[0], rtol=2 ** -7, atol=2 ** -7)
