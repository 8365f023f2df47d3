"""The hook-based `nn.utils.weight_norm`/`spectral_norm` (and their removal) and Module's
load_state_dict pre/post hooks, against torch: parameters and buffers, values, gradients,
power iteration from the same u/v, state dicts, old checkpoints, messages."""

import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch
from oracle import assert_same_error, values

import fusegrad as fg


def _pair(make_t, make_f):
    """A torch module and a fusegrad one holding the same parameters and buffers."""
    torch.manual_seed(0)
    mt = make_t(torch)
    mf = make_f(fg)
    mf.load_state_dict({k: fg.tensor(v.detach().numpy().copy())
                        for k, v in mt.state_dict().items()})
    return mt, mf


def _same(a_f, a_t, tol=1e-6):
    np.testing.assert_allclose(values(a_f), values(a_t), rtol=tol, atol=tol)


LAYERS = [
    lambda T: T.nn.Linear(5, 4),
    lambda T: T.nn.Conv2d(3, 4, 3),
    lambda T: T.nn.ConvTranspose2d(3, 4, 2),
]


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return fn(*args, **kwargs)


def _input(mod_t):
    rng = np.random.default_rng(1)
    if isinstance(mod_t, torch.nn.Linear):
        return rng.standard_normal((2, 5)).astype(np.float32)
    return rng.standard_normal((2, 3, 5, 5)).astype(np.float32)


@pytest.mark.parametrize("dim", [0, 1, None, -1])
@pytest.mark.parametrize("layer", range(len(LAYERS)))
def test_weight_norm_matches_torch(layer, dim):
    mt, mf = _pair(LAYERS[layer], LAYERS[layer])
    _quiet(torch.nn.utils.weight_norm, mt, dim=dim)
    _quiet(fg.nn.utils.weight_norm, mf, dim=dim)
    assert [n for n, _ in mf.named_parameters()] == [n for n, _ in mt.named_parameters()]
    assert list(mf.state_dict()) == list(mt.state_dict())
    for name in ("weight_g", "weight_v", "weight"):
        _same(getattr(mf, name), getattr(mt, name))
    assert not isinstance(mf.weight, fg.nn.Parameter)
    assert type(mf.weight.grad_fn).__name__ == type(mt.weight.grad_fn).__name__
    x = _input(mt)
    yt, yf = mt(torch.tensor(x)), mf(fg.tensor(x))
    _same(yf, yt, 1e-5)
    yt.square().sum().backward()
    yf.square().sum().backward()
    for name in ("weight_g", "weight_v", "bias"):
        _same(getattr(mf, name).grad, getattr(mt, name).grad, 1e-5)
    with torch.no_grad():
        mt.weight_v.mul_(2)
    with fg.no_grad():
        mf.weight_v.mul_(2)
    torch.nn.utils.remove_weight_norm(mt)
    fg.nn.utils.remove_weight_norm(mf)
    assert isinstance(mf.weight, fg.nn.Parameter)
    assert list(mf.state_dict()) == list(mt.state_dict())
    _same(mf.weight, mt.weight)


def test_weight_norm_warns_and_refuses_as_torch():
    def warned(T):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            T.nn.utils.weight_norm(T.nn.Linear(2, 2))
        return [(x.category, str(x.message)) for x in w]
    assert warned(fg) == warned(torch)

    def twice(T):
        m = _quiet(T.nn.utils.weight_norm, T.nn.Linear(2, 2))
        return lambda: _quiet(T.nn.utils.weight_norm, m)
    assert_same_error(twice(fg), twice(torch), full=True)

    def missing(T):
        return lambda: T.nn.utils.remove_weight_norm(T.nn.Linear(2, 2))
    assert_same_error(missing(fg), missing(torch), full=True)


def _copy_power_state(mf, mt):
    # The starting u and v are random draws: fusegrad starts from torch's.
    with fg.no_grad():
        mf.weight_u.copy_(fg.tensor(mt.weight_u.numpy().copy()))
        mf.weight_v.copy_(fg.tensor(mt.weight_v.numpy().copy()))


@pytest.mark.parametrize("n_iter", [1, 3])
@pytest.mark.parametrize("layer", range(len(LAYERS)))
def test_spectral_norm_power_iteration_matches_torch(layer, n_iter):
    mt, mf = _pair(LAYERS[layer], LAYERS[layer])
    torch.nn.utils.spectral_norm(mt, n_power_iterations=n_iter)
    fg.nn.utils.spectral_norm(mf, n_power_iterations=n_iter)
    assert [n for n, _ in mf.named_parameters()] == [n for n, _ in mt.named_parameters()]
    assert [n for n, _ in mf.named_buffers()] == [n for n, _ in mt.named_buffers()]
    _copy_power_state(mf, mt)
    x = _input(mt)
    for _step in range(3):
        yt, yf = mt(torch.tensor(x)), mf(fg.tensor(x))
        _same(yf, yt, 1e-5)
        for name in ("weight_u", "weight_v", "weight"):
            _same(getattr(mf, name), getattr(mt, name), 1e-5)
        mt.zero_grad()
        mf.zero_grad()
        yt.square().sum().backward()
        yf.square().sum().backward()
        _same(mf.weight_orig.grad, mt.weight_orig.grad, 1e-4)
    u_before = values(mf.weight_u)
    mt.eval()
    mf.eval()
    _same(mf(fg.tensor(x)), mt(torch.tensor(x)), 1e-5)
    np.testing.assert_array_equal(values(mf.weight_u), u_before)
    sd_t, sd_f = mt.state_dict(), mf.state_dict()
    assert list(sd_f) == list(sd_t)
    assert sd_f._metadata[""] == sd_t._metadata[""]
    torch.nn.utils.remove_spectral_norm(mt)
    fg.nn.utils.remove_spectral_norm(mf)
    assert [n for n, _ in mf.named_parameters()] == [n for n, _ in mt.named_parameters()]
    assert list(mf.state_dict()) == list(mt.state_dict())
    assert "spectral_norm" not in mf.state_dict()._metadata[""]
    _same(mf.weight, mt.weight, 1e-5)
    assert not mf._state_dict_hooks and not mf._load_state_dict_pre_hooks


def test_spectral_norm_loads_unversioned_state_dict():
    # A tall weight, so that W^T W, which the solve inverts, has full rank.
    mt, mf = _pair(lambda T: T.nn.Linear(3, 6), lambda T: T.nn.Linear(3, 6))
    torch.nn.utils.spectral_norm(mt)
    fg.nn.utils.spectral_norm(mf)
    _copy_power_state(mf, mt)
    mt(torch.ones(1, 3))
    mf(fg.ones(1, 3))
    # A checkpoint from before the version entry: the normalised weight, no weight_v.
    old_t = OrderedDict((k, v.clone()) for k, v in mt.state_dict().items() if k != "weight_v")
    old_t["weight"] = mt.weight.detach().clone()
    old_f = OrderedDict((k, fg.tensor(v.numpy().copy())) for k, v in old_t.items())
    mt.load_state_dict(old_t)
    mf.load_state_dict(old_f)
    _same(mf.weight_v, mt.weight_v, 1e-5)
    incomplete = OrderedDict((k, v) for k, v in old_f.items() if k != "weight_u")
    assert_same_error(
        lambda: mf.load_state_dict(incomplete),
        lambda: mt.load_state_dict(
            OrderedDict((k, v) for k, v in old_t.items() if k != "weight_u")), full=True)


def test_spectral_norm_refuses_as_torch():
    for make in (
        lambda T: T.nn.utils.spectral_norm(T.nn.utils.spectral_norm(T.nn.Linear(2, 2))),
        lambda T: T.nn.utils.remove_spectral_norm(T.nn.Linear(2, 2)),
        lambda T: T.nn.utils.spectral_norm(T.nn.Linear(2, 2), n_power_iterations=0),
        lambda T: T.nn.utils.spectral_norm(T.nn.Linear(2, 2, bias=False), name="bias"),
    ):
        assert_same_error(lambda m=make: m(fg), lambda m=make: m(torch), full=True)


def test_old_weight_norm_checkpoint_loads_into_parametrization():
    mt_old, mf_old = _pair(LAYERS[1], LAYERS[1])
    _quiet(torch.nn.utils.weight_norm, mt_old)
    _quiet(fg.nn.utils.weight_norm, mf_old)
    sd_t = mt_old.state_dict()
    sd_f = mf_old.state_dict()
    new_t = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv2d(3, 4, 3))
    new_f = fg.nn.utils.parametrizations.weight_norm(fg.nn.Conv2d(3, 4, 3))
    assert repr(new_f.load_state_dict(sd_f)) == repr(new_t.load_state_dict(sd_t))
    assert list(new_f.state_dict()) == list(new_t.state_dict())
    _same(new_f.weight, new_t.weight, 1e-6)
    _same(new_f.weight, mt_old.weight, 1e-6)
    assert type(new_f.weight.grad_fn).__name__ == type(new_t.weight.grad_fn).__name__


def _model(T):
    return T.nn.Sequential(T.nn.Linear(2, 3), T.nn.Sequential(T.nn.Linear(3, 1)))


def test_load_state_dict_hooks_match_torch():
    def run(T):
        log = []
        model = _model(T)
        inner = model[1]

        def pre_private(state_dict, prefix, meta, strict, missing, unexpected, errors):
            log.append(("pre", prefix, sorted(state_dict), strict))
            if prefix + "0.w_old" in state_dict:  # an old name for the weight
                state_dict[prefix + "0.weight"] = state_dict.pop(prefix + "0.w_old")

        def pre_public(module, state_dict, prefix, *rest):
            log.append(("pre_module", type(module).__name__, prefix, sorted(state_dict)))

        def post(module, keys):
            log.append(("post", type(module).__name__, list(keys.missing_keys),
                        list(keys.unexpected_keys)))
            keys.unexpected_keys[:] = [k for k in keys.unexpected_keys if "extra" not in k]

        inner._register_load_state_dict_pre_hook(pre_private)
        handle = inner.register_load_state_dict_pre_hook(pre_public)
        model.register_load_state_dict_post_hook(post)
        inner.register_load_state_dict_post_hook(post)
        sd = {k: v.detach().clone() for k, v in _model(T).state_dict().items()}
        sd["1.0.w_old"] = sd.pop("1.0.weight")
        sd["extra"] = T.zeros(1)
        res = model.load_state_dict(sd)
        handle.remove()
        model.load_state_dict(model.state_dict())
        return log, repr(res)
    assert run(fg) == run(torch)


def test_load_state_dict_pre_hook_with_module_and_bad_post_hook():
    def run(T):
        seen = []
        model = _model(T)
        model._register_load_state_dict_pre_hook(
            lambda module, sd, prefix, *rest: seen.append(type(module).__name__),
            with_module=True)
        model.register_load_state_dict_post_hook(lambda module, keys: keys)
        return lambda: (model.load_state_dict(model.state_dict()), seen)
    assert_same_error(run(fg), run(torch), full=True)


@pytest.mark.parametrize("dim", [0, 1, 3, -1])
def test_weight_norm_function_matches_torch(dim):
    """`torch._weight_norm`: the fused interface for the first or last dim, else the
    composite; values, node names and gradients (twice differentiable)."""
    rng = np.random.default_rng(3)
    v = rng.standard_normal((4, 3, 2, 2))
    g_shape = [1] * 4 if dim == -1 else [v.shape[d] if d == dim else 1 for d in range(4)]
    g = rng.standard_normal(g_shape)
    res = []
    for T in (fg, torch):
        vt, gt = T.tensor(v, requires_grad=True), T.tensor(g, requires_grad=True)
        w = T._weight_norm(vt, gt, dim)
        gv, gg = T.autograd.grad((w * w.detach()).sum(), (vt, gt), create_graph=True)
        second = T.autograd.grad((gv.sum() + gg.sum()), (vt, gt))
        res.append((type(w.grad_fn).__name__, values(w), values(gv), values(gg),
                    values(second[0]), values(second[1])))
    assert res[0][0] == res[1][0]
    for a, b in zip(res[0][1:], res[1][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
