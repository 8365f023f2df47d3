"""`nn.utils.get_total_norm`, `clip_grads_with_norm_`, `clip_grad_norm_` built from the two,
the deprecated `clip_grad_norm` and `skip_init`, against PyTorch: norms to the bit (each
tensor's norm in its own dtype, then the norm of the norms), gradients after clipping, errors."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import math  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(5)
ARRAYS = [RNG.standard_normal((3, 4)).astype(np.float32) * 3,
          RNG.standard_normal(5).astype(np.float32),
          RNG.standard_normal((2, 2)).astype(np.float32) * 0.01]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 0.5, 3, math.inf, -math.inf, 0.0])
def test_get_total_norm_is_torchs(norm_type):
    ours = fusegrad.nn.utils.get_total_norm([fusegrad.tensor(a) for a in ARRAYS], norm_type)
    theirs = torch.nn.utils.get_total_norm([torch.tensor(a) for a in ARRAYS], norm_type)
    assert ours.dtype == fusegrad.float32 and ours.shape == ()
    assert ours.item() == theirs.item()


def test_get_total_norm_dtypes_single_tensor_and_empty():
    for lib in (fusegrad, torch):
        mixed = lib.nn.utils.get_total_norm([lib.tensor(ARRAYS[0]),
                                             lib.tensor(ARRAYS[1].astype(np.float64))])
        assert mixed.dtype == lib.float64
    pairs = [(fusegrad.nn.utils.get_total_norm(fusegrad.tensor(ARRAYS[1]), 2.5),
              torch.nn.utils.get_total_norm(torch.tensor(ARRAYS[1]), 2.5)),
             (fusegrad.nn.utils.get_total_norm([]), torch.nn.utils.get_total_norm([]))]
    for ours, theirs in pairs:
        assert ours.item() == theirs.item() and str(ours.dtype)[6:] == str(theirs.dtype)[6:]


def _errors(lib):
    msgs = []
    for call in (lambda: lib.nn.utils.get_total_norm([lib.tensor([math.inf, 1.0])],
                                                     error_if_nonfinite=True),
                 lambda: lib.nn.utils.get_total_norm([lib.ones(2, dtype=lib.int64)])):
        with pytest.raises(RuntimeError) as info:
            call()
        msgs.append(str(info.value))
    assert lib.nn.utils.get_total_norm([lib.tensor([math.nan])]).isnan()
    return msgs


def test_get_total_norm_errors():
    assert _errors(fusegrad) == _errors(torch)


def _params(lib, scale):
    params = [lib.nn.Parameter(lib.tensor(a)) for a in ARRAYS] + [lib.nn.Parameter(lib.ones(2))]
    for p, a in zip(params, ARRAYS):
        p.grad = lib.tensor(a * scale)
    return params


@pytest.mark.parametrize("scale", [1.0, 0.01])
@pytest.mark.parametrize("total", [0.5, 40.0])
def test_clip_grads_with_norm_(scale, total):
    results = []
    for lib in (fusegrad, torch):
        params = _params(lib, scale)
        versions = [p.grad._version for p in params[:3]]
        assert lib.nn.utils.clip_grads_with_norm_(params, 2.0, lib.tensor(total)) is None
        assert [p.grad._version for p in params[:3]] == [v + 1 for v in versions]
        assert params[3].grad is None
        results.append([p.grad.numpy() for p in params[:3]])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("max_norm, norm_type", [(1.0, 2.0), (0.3, 1.0), (100.0, 2.0),
                                                 (0.1, math.inf)])
def test_clip_grad_norm_is_total_norm_then_clip(max_norm, norm_type):
    outs = []
    for lib in (fusegrad, torch):
        params = _params(lib, 1.0)
        gen = (p for p in params)  # a generator is read once
        total = lib.nn.utils.clip_grad_norm_(gen, max_norm, norm_type)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            again = lib.nn.utils.clip_grad_norm(params, max_norm, norm_type)
        outs.append((total.item(), again.item(), [str(w.message) for w in caught],
                     [p.grad.numpy().tolist() for p in params[:3]]))
    assert outs[0] == outs[1]


def test_clip_grad_norm_training_step():
    for lib in (fusegrad, torch):
        lib.manual_seed(0)
    lin_t = torch.nn.Linear(4, 3)
    lin_f = fusegrad.nn.Linear(4, 3)
    lin_f.load_state_dict({k: fusegrad.tensor(v.numpy()) for k, v in lin_t.state_dict().items()})
    x = RNG.standard_normal((6, 4)).astype(np.float32) * 10
    for lib, lin in ((torch, lin_t), (fusegrad, lin_f)):
        opt = lib.optim.SGD(lin.parameters(), lr=0.1)
        lin(lib.tensor(x)).pow(2).sum().backward()
        lib.nn.utils.clip_grad_norm_(lin.parameters(), 1.0)
        opt.step()
    for k, v in lin_t.state_dict().items():
        np.testing.assert_allclose(lin_f.state_dict()[k].numpy(), v.numpy(), rtol=1e-6, atol=1e-7)


def _skip_init(lib):
    lib.manual_seed(0)
    m = lib.nn.utils.skip_init(lib.nn.Linear, 3, out_features=4, bias=False)
    out = [type(m).__name__, tuple(m.weight.shape), m.bias, m.weight.requires_grad,
           str(m.weight.device), type(m.weight).__name__,
           lib.rand(2).tolist()]  # (the initialisation drew nothing)

    class NoDevice(lib.nn.Module):
        def __init__(self):
            super().__init__()

    for bad in (int, NoDevice):
        with pytest.raises(RuntimeError) as info:
            lib.nn.utils.skip_init(bad)
        out.append(str(info.value).replace("torch", "fusegrad").split("<locals>")[0])
    return out


def test_skip_init():
    assert _skip_init(fusegrad) == _skip_init(torch)
