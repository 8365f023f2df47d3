"""Conv3d, ConvTranspose3d (and their functional forms) and BatchNorm3d against PyTorch:
values, input/weight/bias gradients, graph nodes, double backward, module paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad


def _copy(ref, mod):
    mod.load_state_dict({k: fusegrad.from_numpy(v.detach().numpy().copy())
                         for k, v in ref.state_dict().items()})


def _run(ref, mod, shape, seed=0, **call):
    x = np.random.default_rng(seed).standard_normal(shape)
    xt = torch.tensor(x, requires_grad=True)
    xf = fusegrad.tensor(x, requires_grad=True)
    yt, yf = ref(xt, **call), mod(xf, **call)
    assert type(yf.grad_fn).__name__ == type(yt.grad_fn).__name__
    np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-9,
                               atol=1e-11)
    g = np.random.default_rng(seed + 1).standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    yf.backward(fusegrad.tensor(g))
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-11)
    for (name, pt), (_, pf) in zip(ref.named_parameters(), mod.named_parameters()):
        np.testing.assert_allclose(pf.grad.numpy(), pt.grad.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=name)


CONV = [
    ((2, 3, 5, 6, 4), dict(kernel_size=3, padding=1)),
    ((1, 4, 6, 5, 7), dict(kernel_size=(2, 3, 1), stride=(2, 1, 3), padding=(1, 0, 0),
                           dilation=(1, 2, 1), groups=2)),
    ((4, 5, 4, 4), dict(kernel_size=2, bias=False)),  # unbatched
    ((2, 2, 5, 5, 5), dict(kernel_size=3, padding="same", dilation=2)),
    ((2, 3, 5, 6, 4), dict(kernel_size=3, padding=(1, 2, 0), padding_mode="reflect")),
    ((2, 3, 5, 6, 4), dict(kernel_size=(3, 1, 2), padding=1, padding_mode="circular")),
    ((2, 3, 5, 6, 4), dict(kernel_size=2, padding=1, padding_mode="replicate", stride=2)),
]


@pytest.mark.parametrize("case", range(len(CONV)))
def test_conv3d(case):
    shape, kw = CONV[case]
    cin = shape[-4]
    ref = torch.nn.Conv3d(cin, 4, **kw).double()
    mod = fusegrad.nn.Conv3d(cin, 4, **kw).double()
    _copy(ref, mod)
    assert repr(mod) == repr(ref)
    _run(ref, mod, shape, case)


TRANSPOSED = [
    ((2, 3, 3, 4, 2), dict(kernel_size=3), {}),
    ((1, 4, 3, 2, 3), dict(kernel_size=(2, 3, 2), stride=(2, 1, 3), padding=(1, 0, 1),
                           output_padding=(1, 0, 2), dilation=(1, 2, 1), groups=2), {}),
    ((4, 2, 3, 2), dict(kernel_size=2, stride=2, bias=False), {}),  # unbatched
    ((1, 3, 3, 3, 3), dict(kernel_size=3, stride=2, padding=1),
     dict(output_size=(6, 5, 6))),
    ((1, 2, 3, 3, 2), dict(kernel_size=2, stride=1, dilation=3), {}),
    ((1, 2, 3, 3, 2), dict(kernel_size=2, stride=1, dilation=3, output_padding=(2, 0, 1)),
     {}),
]


@pytest.mark.parametrize("case", range(len(TRANSPOSED)))
def test_conv_transpose3d(case):
    shape, kw, call = TRANSPOSED[case]
    cin = shape[-4]
    ref = torch.nn.ConvTranspose3d(cin, 4, **kw).double()
    mod = fusegrad.nn.ConvTranspose3d(cin, 4, **kw).double()
    _copy(ref, mod)
    assert repr(mod) == repr(ref)
    _run(ref, mod, shape, case, **call)


def test_functional_and_double_backward():
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((2, 2, 4, 3, 4)), rng.standard_normal((3, 2, 2, 2, 2)), \
        rng.standard_normal(3)
    outs = []
    for mod in (torch, fusegrad):
        xs = [mod.tensor(v, requires_grad=True) for v in (x, w, b)]
        y = mod.nn.functional.conv3d(*xs, stride=(1, 2, 1), padding=1)
        assert torch.conv3d  # the top-level spelling exists in both
        y2 = mod.conv3d(*xs, stride=(1, 2, 1), padding=1)
        gx, gw = mod.autograd.grad((y * y).sum(), xs[:2], create_graph=True)
        (gx.sum() + (gw * gw).sum()).backward()
        outs.append([y.detach().numpy(), y2.detach().numpy()] + [t.grad.numpy() for t in xs])
        y = mod.nn.functional.conv_transpose3d(xs[0], xs[1].transpose(0, 1), stride=2,
                                               output_padding=1)
        outs[-1].append(y.detach().numpy())
        outs[-1].append(mod.conv_transpose3d(xs[0], xs[1].transpose(0, 1)).detach().numpy())
    for a, r in zip(*outs):
        np.testing.assert_allclose(a, r, rtol=1e-9, atol=1e-10)


def test_conv3d_errors():
    for args in [((1, 2, 3, 3), (4, 2, 2, 2, 2)), ((1, 3, 3, 3, 3), (4, 2, 2, 2, 2)),
                 ((1, 2, 2, 2, 2), (4, 2, 3, 3, 3))]:
        with pytest.raises(RuntimeError) as e:
            torch.nn.functional.conv3d(torch.zeros(args[0]), torch.zeros(args[1]))
        with pytest.raises(RuntimeError) as err:
            fusegrad.nn.functional.conv3d(fusegrad.zeros(args[0]), fusegrad.zeros(args[1]))
        assert str(err.value) == str(e.value)
    with pytest.raises(ValueError) as e:
        torch.nn.ConvTranspose3d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError) as err:
        fusegrad.nn.ConvTranspose3d(2, 2, 3, padding_mode="reflect")
    assert str(err.value) == str(e.value)


@pytest.mark.parametrize("train", [True, False])
def test_batchnorm3d(train):
    ref = torch.nn.BatchNorm3d(3).double()
    mod = fusegrad.nn.BatchNorm3d(3).double()
    _copy(ref, mod)
    ref.train(train)
    mod.train(train)
    _run(ref, mod, (2, 3, 2, 3, 2))
    np.testing.assert_allclose(mod.running_mean.numpy(), ref.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(mod.running_var.numpy(), ref.running_var.numpy(), rtol=1e-12)
    with pytest.raises(ValueError) as e:
        ref(torch.zeros(2, 3, 4, 4))
    with pytest.raises(ValueError) as err:
        mod(fusegrad.zeros(2, 3, 4, 4))
    assert str(err.value) == str(e.value)
