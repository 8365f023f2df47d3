"""`nn.utils.parametrizations` against PyTorch: weight_norm (original0/original1, `dim`),
spectral_norm (power iteration from the same `_u`/`_v` buffers, copied from torch), and
orthogonal with the matrix_exp, cayley and householder maps (same base and original copied
from torch): state_dict keys, weights, gradients after a step of training, and messages."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(21)


def _twin(make, apply, **kwargs):
    """The same parametrized module in torch and fusegrad (fusegrad's state loaded from
    torch's, so random parts such as u/v or the base agree)."""
    torch.manual_seed(0)
    mt = apply(torch)(make(torch), **kwargs)
    mf = apply(fusegrad)(make(fusegrad), **kwargs)
    assert list(mf.state_dict()) == list(mt.state_dict())
    mf.load_state_dict({k: fusegrad.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    return mt, mf


def _train_and_compare(mt, mf, x, steps=2, atol=1e-5):
    for lib, m in ((torch, mt), (fusegrad, mf)):
        opt = lib.optim.SGD(m.parameters(), lr=0.05)
        for _ in range(steps):
            opt.zero_grad()
            m(lib.tensor(x)).pow(2).sum().backward()
            opt.step()
    grads_t = {n: p.grad.numpy() for n, p in mt.named_parameters()}
    grads_f = {n: p.grad.numpy() for n, p in mf.named_parameters()}
    assert list(grads_f) == list(grads_t)
    for n in grads_t:
        np.testing.assert_allclose(grads_f[n], grads_t[n], rtol=1e-4, atol=atol, err_msg=n)
    for k, v in mt.state_dict().items():
        np.testing.assert_allclose(mf.state_dict()[k].numpy(), v.numpy(), rtol=1e-4,
                                   atol=atol, err_msg=k)
    np.testing.assert_allclose(mf.weight.detach().numpy(), mt.weight.detach().numpy(),
                               rtol=1e-4, atol=atol)


def _pz(lib, fn):
    import importlib

    mod = importlib.import_module(lib.__name__ + ".nn.utils.parametrizations")
    return getattr(mod, fn)


@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_weight_norm(dim):
    mt, mf = _twin(lambda L: L.nn.Linear(4, 3), lambda L: _pz(L, "weight_norm"), dim=dim)
    assert type(mf).__name__ == "ParametrizedLinear"
    assert mf.parametrizations.weight.original0.shape == mt.parametrizations.weight.original0.shape
    _train_and_compare(mt, mf, RNG.standard_normal((5, 4)).astype(np.float32))


@pytest.mark.parametrize("make, kwargs", [
    (lambda L: L.nn.Linear(5, 4), {}),
    (lambda L: L.nn.Conv2d(2, 3, 2), {"n_power_iterations": 3}),
    (lambda L: L.nn.ConvTranspose2d(2, 3, 2), {}),
    (lambda L: L.nn.Linear(5, 4), {"dim": 1, "eps": 1e-6}),
])
def test_spectral_norm_same_power_iteration(make, kwargs):
    mt, mf = _twin(make, lambda L: _pz(L, "spectral_norm"), **kwargs)
    shape = (3, 5) if isinstance(mt, torch.nn.Linear) else (1, 2, 4, 4)
    x = RNG.standard_normal(shape).astype(np.float32)
    _train_and_compare(mt, mf, x, steps=3)
    mt.eval()
    mf.eval()
    np.testing.assert_allclose(mf(fusegrad.tensor(x)).detach().numpy(),
                               mt(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder", None])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_orthogonal(orthogonal_map, shape):
    mt, mf = _twin(lambda L: L.nn.Linear(shape[1], shape[0]), lambda L: _pz(L, "orthogonal"),
                   orthogonal_map=orthogonal_map)
    w = mf.weight.detach().numpy()
    small = min(shape)
    gram = w @ w.T if shape[0] < shape[1] else w.T @ w
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5)
    _train_and_compare(mt, mf, RNG.standard_normal((2, shape[1])).astype(np.float32))


def test_orthogonal_householder_without_trivialization():
    mt, mf = _twin(lambda L: L.nn.Linear(3, 5), lambda L: _pz(L, "orthogonal"),
                   orthogonal_map="householder", use_trivialization=False)
    assert "parametrizations.weight.0.base" not in mf.state_dict()
    _train_and_compare(mt, mf, RNG.standard_normal((2, 3)).astype(np.float32))
    value = RNG.standard_normal((5, 3)).astype(np.float32)
    q = np.linalg.qr(value)[0]
    for lib, m in ((torch, mt), (fusegrad, mf)):
        m.weight = lib.tensor(q)
    np.testing.assert_allclose(mf.weight.detach().numpy(), mt.weight.detach().numpy(),
                               atol=1e-5)


def _messages(lib):
    out = []
    cases = [
        lambda: _pz(lib, "orthogonal")(lib.nn.Linear(2, 2), "bias"),
        lambda: _pz(lib, "orthogonal")(lib.nn.Linear(2, 2), "nothing"),
        lambda: _pz(lib, "orthogonal")(lib.nn.Linear(2, 2), orthogonal_map="svd"),
        lambda: _pz(lib, "spectral_norm")(lib.nn.Linear(2, 2), "nothing"),
        lambda: _pz(lib, "spectral_norm")(lib.nn.Linear(2, 2), dim=2),
        lambda: _pz(lib, "spectral_norm")(lib.nn.Linear(2, 2), n_power_iterations=0),
    ]
    for case in cases:
        try:
            case()
        except (ValueError, IndexError) as e:
            out.append((type(e).__name__, str(e)))
    m = _pz(lib, "orthogonal")(lib.nn.Linear(2, 2), use_trivialization=False)
    try:
        m.weight = lib.eye(2)
    except NotImplementedError as e:
        out.append(str(e))
    m = _pz(lib, "orthogonal")(lib.nn.Linear(2, 2))
    try:
        m.weight = lib.eye(3)
    except ValueError as e:
        out.append(str(e))
    return out


def test_messages():
    ours, theirs = _messages(fusegrad), _messages(torch)
    assert len(theirs) == 8
    assert ours == theirs
