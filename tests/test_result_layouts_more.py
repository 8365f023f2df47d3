"""Result layouts against PyTorch, more: the column-major batches of LAPACK-backed linalg
results (`inv`, `qr`, `svd`, `eigh`, `eig`, `solve`, `cholesky`, `lu_factor`, `lstsq`,
the triangular and Cholesky solvers), on CPU tensors and on the meta device, what ops on
them give, and `stack` of channels-last tensors. Strides of dims of size 0 or 1 are not
compared (PyTorch's there are arbitrary); values are compared too.
"""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402


def _rand(lib, *shape, spd=False, seed=0):
    a = np.random.default_rng(seed + len(shape) + sum(shape)).uniform(-1, 1, shape)
    if spd:
        a = a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
    return lib.from_numpy(a.astype(np.float32))


def _flat(r):
    if isinstance(r, (tuple, list)):
        out = []
        for x in r:
            out += _flat(x)
        return out
    return [r]


def _same_layout(shape, a, b) -> bool:
    return all(n <= 1 or s == t for n, s, t in zip(shape, a, b))


def _agree(fn, values: bool = True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = _flat(fn(torch)), _flat(fn(fusegrad))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        if not isinstance(w, torch.Tensor):
            continue
        assert tuple(g.shape) == tuple(w.shape)
        assert _same_layout(tuple(w.shape), g.stride(), w.stride()), (g.stride(), w.stride())
        assert g.is_contiguous() == w.is_contiguous()
        if values and w.device.type == "cpu" and not w.dtype.is_complex:
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=2e-4,
                                       atol=2e-5)


A = lambda t: _rand(t, 2, 4, 4, spd=True)  # noqa: E731
B = lambda t: _rand(t, 2, 4, 3)  # noqa: E731

# Sign-free results only (the factors of qr, svd, eigh and eig are compared by layout).
LINALG = {
    "inv": lambda t: t.linalg.inv(A(t)),
    "inv_2d": lambda t: t.linalg.inv(A(t)[0]),
    "inv_of_transposed": lambda t: t.linalg.inv(A(t).mT),
    "inv_ex": lambda t: t.linalg.inv_ex(A(t)),
    "tensorinv": lambda t: t.linalg.tensorinv(A(t)[0].reshape(4, 2, 2), 1),
    "matrix_power_negative": lambda t: t.linalg.matrix_power(A(t), -1),
    "solve": lambda t: t.linalg.solve(A(t), B(t)),
    "solve_broadcast": lambda t: t.linalg.solve(A(t)[0], B(t)),
    "solve_right": lambda t: t.linalg.solve(A(t), B(t).mT, left=False),
    "solve_ex": lambda t: t.linalg.solve_ex(A(t), B(t)),
    "cholesky": lambda t: t.linalg.cholesky(A(t)),
    "cholesky_upper": lambda t: t.linalg.cholesky(A(t), upper=True),
    "cholesky_ex": lambda t: t.linalg.cholesky_ex(A(t)),
    "torch_cholesky": lambda t: t.cholesky(A(t)),
    "lu_factor": lambda t: t.linalg.lu_factor(A(t)),
    "lu_factor_wide": lambda t: t.linalg.lu_factor(_rand(t, 3, 5)),
    "lu_factor_ex": lambda t: t.linalg.lu_factor_ex(A(t)),
    "lu": lambda t: t.linalg.lu(A(t)),
    "lu_unpack": lambda t: t.lu_unpack(*t.linalg.lu_factor(A(t))),
    "lu_solve": lambda t: t.linalg.lu_solve(*t.linalg.lu_factor(A(t)), B(t)),
    "lu_solve_adjoint": lambda t: t.linalg.lu_solve(*t.linalg.lu_factor(A(t)), B(t),
                                                    adjoint=True),
    "lu_solve_right": lambda t: t.linalg.lu_solve(*t.linalg.lu_factor(A(t)), B(t).mT,
                                                  left=False),
    "lstsq_square": lambda t: t.linalg.lstsq(A(t), B(t)),
    "lstsq_tall": lambda t: t.linalg.lstsq(_rand(t, 2, 5, 3), _rand(t, 2, 5, 2)),
    "lstsq_wide": lambda t: t.linalg.lstsq(_rand(t, 2, 3, 5), _rand(t, 2, 3, 2)),
    "lstsq_vector": lambda t: t.linalg.lstsq(_rand(t, 5, 3), _rand(t, 5)),
    "cholesky_solve": lambda t: t.cholesky_solve(B(t), t.linalg.cholesky(A(t))),
    "cholesky_inverse": lambda t: t.cholesky_inverse(t.linalg.cholesky(A(t))),
    "triangular_solve": lambda t: t.triangular_solve(B(t), A(t)),
    "solve_triangular": lambda t: t.linalg.solve_triangular(A(t), B(t), upper=True),
    "solve_triangular_right": lambda t: t.linalg.solve_triangular(A(t), B(t).mT, upper=True,
                                                                  left=False),
    # what elementwise ops, clone and matmul make of such a result
    "inv_plus_one": lambda t: t.linalg.inv(A(t)) + 1,
    "inv_clone": lambda t: t.linalg.inv(A(t)).clone(),
    "inv_contiguous": lambda t: t.linalg.inv(A(t)).contiguous(),
    "inv_matmul": lambda t: t.linalg.inv(A(t)) @ A(t),
    "inv_view_transposed": lambda t: t.linalg.inv(A(t)[0]).t().view(16),
}
FACTORS = {
    "qr": lambda t: t.linalg.qr(_rand(t, 2, 3, 4)),
    "qr_tall": lambda t: t.linalg.qr(B(t)),
    "qr_complete": lambda t: t.linalg.qr(B(t), mode="complete"),
    "qr_r": lambda t: t.linalg.qr(B(t), mode="r"),
    "torch_qr": lambda t: t.qr(B(t)),
    "svd": lambda t: t.linalg.svd(_rand(t, 2, 3, 4)),
    "svd_tall_reduced": lambda t: t.linalg.svd(B(t), full_matrices=False),
    "svd_values": lambda t: t.linalg.svdvals(B(t)),
    "torch_svd": lambda t: t.svd(B(t)),
    "eigh": lambda t: t.linalg.eigh(A(t)),
    "eigvalsh": lambda t: t.linalg.eigvalsh(A(t)),
    "eig": lambda t: t.linalg.eig(A(t)),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg_result_layouts_as_torch(name):
    _agree(LINALG[name])


@pytest.mark.parametrize("name", sorted(FACTORS))
def test_factor_layouts_as_torch(name):
    _agree(FACTORS[name], values=False)


def _meta(t, *shape):
    return t.empty(*shape, device="meta")


# (Not `svd`: PyTorch's meta function lays Vh out row-major where its CPU kernel does not.)
META = {
    "inv": lambda t: t.linalg.inv(_meta(t, 2, 4, 4)),
    "qr": lambda t: t.linalg.qr(_meta(t, 2, 4, 3)),
    "eigh": lambda t: t.linalg.eigh(_meta(t, 2, 4, 4)),
    "solve": lambda t: t.linalg.solve(_meta(t, 2, 4, 4), _meta(t, 2, 4, 3)),
    "cholesky": lambda t: t.linalg.cholesky(_meta(t, 2, 4, 4)),
    "solve_triangular": lambda t: t.linalg.solve_triangular(
        _meta(t, 2, 4, 4), _meta(t, 2, 4, 3), upper=False),
    "inv_plus_one": lambda t: t.linalg.inv(_meta(t, 2, 4, 4)) + 1,
}


@pytest.mark.parametrize("name", sorted(META))
def test_meta_linalg_layouts_as_torch(name):
    _agree(META[name], values=False)


def test_backward_through_column_major_results_as_torch():
    def grads(t):
        a = A(t).requires_grad_()
        b = B(t).requires_grad_()
        x = t.linalg.solve(a, b)
        (t.linalg.inv(a).sum(-1, keepdim=True) * x).square().sum().backward()
        return a.grad, b.grad

    _agree(grads)


# ---------------------------------------------------------------- stack of channels-last


def _cl(t, *shape):
    fmt = t.channels_last if len(shape) == 4 else t.channels_last_3d
    return _rand(t, *shape).contiguous(memory_format=fmt)


def _stack_cl(shape: tuple, n: int, dim: int):
    return lambda t: t.stack([_cl(t, *shape)] * n, dim)


STACKS = {
    **{f"cl_dim{d}": _stack_cl((2, 3, 4, 5), 2, d) for d in range(-5, 5)},
    **{f"cl3d_dim{d}": _stack_cl((2, 3, 2, 3, 4), 3, d) for d in range(6)},
    "cl_sliced_dim1": lambda t: t.stack([_cl(t, 2, 3, 4, 6)[..., ::2]] * 2, 1),
    "cl_and_contiguous_dim0": lambda t: t.stack([_cl(t, 2, 3, 4, 5), _rand(t, 2, 3, 4, 5)]),
    "contiguous_and_cl_dim1": lambda t: t.stack([_rand(t, 2, 3, 4, 5), _cl(t, 2, 3, 4, 5)], 1),
    "cl_one_channel_dim1": lambda t: t.stack([_cl(t, 2, 1, 4, 5)] * 2, 1),
    "cl_1x1_dim1": lambda t: t.stack([_cl(t, 2, 3, 1, 1)] * 2, 1),
    "transposed_dim0": lambda t: t.stack([_rand(t, 3, 4).t()] * 2),
    "permuted_dim1": lambda t: t.stack([_rand(t, 3, 4, 5).permute(2, 0, 1)] * 2, 1),
    "cl_dim0_then_add": lambda t: t.stack([_cl(t, 2, 3, 4, 5)] * 2) + 1,
    "cat_cl": lambda t: t.cat([_cl(t, 2, 3, 4, 5)] * 2, 1),
}


@pytest.mark.parametrize("name", sorted(STACKS))
def test_stack_layouts_as_torch(name):
    _agree(STACKS[name])


@pytest.mark.parametrize("dim", [0, 1, 3])
def test_stack_of_channels_last_on_meta_and_backward_as_torch(dim):
    _agree(lambda t: t.stack([_cl(t, 2, 3, 4, 5).to("meta")] * 2, dim), values=False)

    def grads(t):
        x = _cl(t, 2, 3, 4, 5).requires_grad_()
        y = t.stack([x, x * 2], dim)
        (y * t.arange(float(y.numel())).reshape(y.shape)).sum().backward()
        return y, x.grad

    _agree(grads)


# ---------------------------------------------------------------- TensorIterator's order


def test_iterator_strides_as_torch_on_random_layouts():
    """`_shapes.iterator_strides` (the order TensorIterator gives an elementwise result)
    against PyTorch's `a + b` and `addcmul(a, b, c)` over permuted, broadcast and expanded
    operands."""
    from fusegrad._shapes import iterator_strides

    rng = np.random.default_rng(0)

    def operand(shape):
        perm = rng.permutation(len(shape))
        t = torch.rand([shape[p] for p in perm]).permute(*np.argsort(perm).tolist())
        big = [d for d in range(len(shape)) if shape[d] > 1]
        if big and rng.random() < 0.2:  # expanded along one dim (stride 0)
            d = int(rng.choice(big))
            t = t.narrow(d, 0, 1).expand(*shape)
        return t

    checked = 0
    for _ in range(400):
        shape = tuple(int(s) for s in rng.integers(1, 4, int(rng.integers(2, 5))))
        ops = [operand(tuple(1 if rng.random() < 0.25 else s for s in shape))
               for _ in range(int(rng.integers(2, 4)))]
        try:
            r = ops[0] + ops[1] if len(ops) == 2 else torch.addcmul(*ops)
        except RuntimeError:
            continue
        got = iterator_strides(tuple(r.shape), [(tuple(o.shape), o.stride()) for o in ops])
        assert _same_layout(tuple(r.shape), got, r.stride()), (ops, got, r.stride())
        checked += 1
    assert checked > 300


BINARY_MIXED = {
    "transposed_times_long": lambda t: _rand(t, 3, 4).t() * _rand(t, 4, 3).long(),
    "long_plus_transposed": lambda t: _rand(t, 4, 3).long() + _rand(t, 3, 4).t(),
    "transposed_plus_double": lambda t: _rand(t, 3, 4).t() + _rand(t, 4, 3).double(),
    "half_transposed_plus_half": lambda t: _rand(t, 3, 4).half().t() + _rand(t, 4, 3).half(),
    "cl_times_contiguous_double": lambda t: _cl(t, 2, 3, 4, 5) * _rand(t, 2, 3, 4, 5).double(),
    "permuted_minus_broadcast_int": lambda t: (_rand(t, 3, 4, 5).permute(2, 0, 1)
                                                - t.ones(1, 3, 1, dtype=t.int32)),
    "transposed_div_bfloat16": lambda t: _rand(t, 3, 4).t() / _rand(t, 4, 3).bfloat16(),
}


@pytest.mark.parametrize("name", sorted(BINARY_MIXED))
def test_mixed_dtype_binary_layouts_as_torch(name):
    """Binary ops whose operands' orders conflict, through their kernels' promoting paths:
    TensorIterator's order (the first operand with an opinion decides)."""
    _agree(BINARY_MIXED[name])


# ---------------------------------------------------------------- sort


def _sort_inputs(t):
    c = _rand(t, 3, 4, 5)
    return [c.permute(2, 0, 1), c.permute(2, 0, 1)[:, ::2], c.transpose(0, 1), c[:, :, ::2],
            _rand(t, 4, 3).t(), _rand(t, 4, 1).expand(4, 3), _cl(t, 2, 3, 4, 5)]


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_sort_results_laid_out_like_their_input_as_torch(device):
    """`sort`/`argsort` results have the strides `empty_like(input)` has (dense inputs keep
    theirs), on CPU and on the meta device."""
    def program(t):
        out = []
        for x in _sort_inputs(t):
            x = x.to(device)
            for d in range(x.dim()):
                out += [*x.sort(d), x.argsort(d, descending=True),
                        t.sort(x, dim=d, stable=True)[0]]
        return out

    _agree(program, values=device == "cpu")
