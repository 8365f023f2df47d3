"""What programs written for PyTorch found, checked against torch: MultiheadAttention's
separate projections check the key's and value's widths before projecting (PyTorch's
AssertionError); nll_loss's input gradient is +0 at an ignored target; L-BFGS keeps its
curvature scalars in the parameters' dtype and rounds `add(x, y, alpha)` once, so its iterates
are PyTorch's bit for bit."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad as fg  # noqa: E402


def _error(fn):
    """(type name, message) of what `fn()` raises."""
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value).__name__, str(info.value)


# (query width, key width, value width, key length, value length) for an attention of width
# 6 with kdim=4, vdim=5: each is refused, by the first check PyTorch makes.
_BAD_WIDTHS = {
    "key": (6, 3, 5, 4, 4),
    "value": (6, 4, 6, 4, 4),
    "key_and_value": (6, 2, 2, 4, 4),
    "lengths": (6, 4, 5, 4, 2),
}


@pytest.mark.parametrize("name", list(_BAD_WIDTHS))
def test_separate_projection_widths_are_checked_as_torch(name):
    eq, ek, ev, lk, lv = _BAD_WIDTHS[name]

    def run(lib):
        lib.manual_seed(0)
        mha = lib.nn.MultiheadAttention(6, 2, kdim=4, vdim=5)
        return _error(lambda: mha(lib.randn(3, 1, eq), lib.randn(lk, 1, ek),
                                  lib.randn(lv, 1, ev)))

    assert run(fg) == run(torch)


def test_separate_projection_bias_width_is_checked_as_torch():
    def run(lib):
        lib.manual_seed(0)
        mha = lib.nn.MultiheadAttention(6, 2, kdim=4, vdim=5)
        args = (lib.randn(3, 1, 6), lib.randn(4, 1, 4), lib.randn(4, 1, 5), 6, 2, None,
                lib.zeros(7), None, None, False, 0.0, mha.out_proj.weight, None)
        return _error(lambda: lib.nn.functional.multi_head_attention_forward(
            *args, use_separate_proj_weight=True, q_proj_weight=mha.q_proj_weight,
            k_proj_weight=mha.k_proj_weight, v_proj_weight=mha.v_proj_weight))

    assert run(fg) == run(torch)


# (input shape, target shape) of nll_loss: a batch, one sample, an image batch, a sequence.
_NLL_SHAPES = {"2d": ((4, 3), (4,)), "1d": ((3,), ()), "4d": ((2, 3, 2, 2), (2, 2, 2)),
               "3d": ((2, 3, 4), (2, 4))}


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", list(_NLL_SHAPES))
def test_nll_loss_gradient_at_ignored_targets_keeps_torchs_signs(shape, reduction, weighted):
    """An ignored target gets no write (+0); a class weighted 0 gets -(0 * g) (-0), as in
    PyTorch; the sign shows through log_softmax's gradient."""
    xs, ts = _NLL_SHAPES[shape]
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(xs).astype(np.float32)
    t0 = rng.integers(0, 3, ts)
    t0.reshape(-1)[0] = 1

    def run(lib):
        x = lib.tensor(x0, requires_grad=True)
        w = lib.tensor([1.0, 0.0, 3.0]) if weighted else None
        loss = lib.nn.functional.nll_loss(lib.log_softmax(x, 0 if shape == "1d" else 1),
                                          lib.tensor(t0), weight=w, ignore_index=1,
                                          reduction=reduction)
        loss.sum().backward()
        return np.signbit(x.grad.numpy()), x.grad.numpy()

    (sign_fg, grad_fg), (sign_t, grad_t) = run(fg), run(torch)
    np.testing.assert_array_equal(sign_fg, sign_t)
    np.testing.assert_allclose(grad_fg, grad_t, rtol=1e-6, atol=1e-7)


def _rosenbrock_lbfgs(lib, dtype, max_iter):
    """Three L-BFGS steps without line search on the Rosenbrock function: the iterates and
    the optimizer's state tensors as arrays."""
    p = lib.nn.Parameter(lib.tensor([-1.5, 2.0], dtype=getattr(lib, dtype)))
    opt = lib.optim.LBFGS([p], lr=0.5, max_iter=max_iter, history_size=3,
                          tolerance_grad=1e-9, tolerance_change=1e-12)

    def closure():
        opt.zero_grad()
        loss = (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2
        loss.backward()
        return loss

    out = []
    for _ in range(3):
        out.append(float(opt.step(closure).detach()))
        out.append(p.detach().numpy().copy())
    st = opt.state[p]
    for key in ("d", "H_diag", "prev_flat_grad"):
        out.append(st[key].numpy())
    out += [v.numpy() for v in st["old_stps"] + st["old_dirs"] + st["ro"]]
    return out


@pytest.mark.parametrize("dtype,max_iter", [("float32", 10), ("float32", 4),
                                            ("float64", 10)])
def test_lbfgs_iterates_are_torchs(dtype, max_iter):
    """float32: bit for bit (the product of two float32 values is exact in float64, so one
    rounding of the sum is reproduced); float64 rounds the product too (NumPy has no fused
    multiply-add), an ulp or so away."""
    got, want = _rosenbrock_lbfgs(fg, dtype, max_iter), _rosenbrock_lbfgs(torch, dtype,
                                                                         max_iter)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if dtype == "float32":
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-8)
