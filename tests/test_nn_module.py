"""nn.Module behaviour against torch.nn.Module: registration, traversal, state_dict, modes,
conversions, hooks and printing."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch
from test_nn_support import sync, to_fg

import fusegrad
import fusegrad.nn as fnn


def build(nn):
    """The same small model in either library."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 3)
            self.act = nn.ReLU()
            self.block = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
            self.heads = nn.ModuleList([nn.Linear(3, 2), nn.Linear(3, 2)])
            self.extra = nn.ModuleDict({"a": nn.Tanh()})
            self.scale = nn.Parameter(nn.init.ones_(nn.Linear(1, 1).weight.detach().clone()))
            self.register_buffer("steps", (torch if nn is torch.nn else fusegrad).zeros(2))
            self.register_buffer("tmp", (torch if nn is torch.nn else fusegrad).zeros(1),
                                 persistent=False)

        def forward(self, x):
            h = self.block(self.act(self.fc1(x)))
            return self.heads[0](h) * self.scale + self.heads[1](h)

    return Net()


def test_names_and_traversal():
    th, fg = build(torch.nn), build(fnn)
    for what in ("named_parameters", "named_buffers", "named_children", "named_modules"):
        assert [n for n, _ in getattr(fg, what)()] == [n for n, _ in getattr(th, what)()], what
    assert [n for n, _ in fg.named_parameters(prefix="m", recurse=False)] == \
        [n for n, _ in th.named_parameters(prefix="m", recurse=False)]
    assert list(fg.state_dict()) == list(th.state_dict())
    assert len(list(fg.parameters())) == len(list(th.parameters()))
    assert len(list(fg.modules())) == len(list(th.modules()))
    assert fg.get_submodule("block.1") is fg.block[1]
    assert fg.get_parameter("heads.0.bias") is fg.heads[0].bias
    assert repr(fg) == repr(th).replace("torch.nn", "fusegrad.nn")


def test_forward_backward_and_steps_match():
    torch.manual_seed(0)  # PyTorch's default generator starts from fresh entropy
    th, fg = build(torch.nn), build(fnn)
    sync(th, fg)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    opt_t = torch.optim.SGD(th.parameters(), lr=0.1, momentum=0.9)
    opt_f = fusegrad.optim.SGD(fg.parameters(), lr=0.1, momentum=0.9)
    for _ in range(10):
        for mod, opt, T in ((th, opt_t, torch), (fg, opt_f, fusegrad)):
            opt.zero_grad()
            mod(T.tensor(x)).pow(2).mean().backward()
            opt.step()
    for k, v in th.state_dict().items():
        np.testing.assert_allclose(fg.state_dict()[k].numpy(), v.numpy(), atol=1e-5,
                                   rtol=1e-5, err_msg=k)


def test_shared_parameters_listed_once():
    for nn in (torch.nn, fnn):
        lin = nn.Linear(2, 2)
        seq = nn.Sequential(lin, lin)
        assert len(list(seq.parameters())) == 2
        assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
        assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_load_state_dict_errors_match():
    th, fg = build(torch.nn), build(fnn)
    sd_t = th.state_dict()
    bad_t = dict(sd_t)
    bad_t.pop("fc1.weight")
    bad_t["nope"] = torch.zeros(1)
    bad_t["block.0.nope"] = torch.zeros(1)
    bad_t["fc1.bias"] = torch.zeros(7)
    bad_f = {k: to_fg(v) for k, v in bad_t.items()}
    msgs = []
    for mod, sd in ((th, bad_t), (fg, bad_f)):
        with pytest.raises(RuntimeError) as e:
            mod.load_state_dict(sd)
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0]
    bad_t["fc1.bias"] = sd_t["fc1.bias"]
    bad_f["fc1.bias"] = to_fg(sd_t["fc1.bias"])
    r_t = th.load_state_dict(bad_t, strict=False)
    r_f = fg.load_state_dict(bad_f, strict=False)
    assert r_f.missing_keys == r_t.missing_keys
    assert r_f.unexpected_keys == r_t.unexpected_keys
    assert repr(r_f) == repr(r_t)
    assert repr(fg.load_state_dict({k: to_fg(v) for k, v in sd_t.items()})) == \
        "<All keys matched successfully>"


def test_state_dict_detaches_and_keep_vars():
    fg = fnn.Linear(2, 2)
    sd = fg.state_dict()
    assert not sd["weight"].requires_grad and type(sd["weight"]) is fusegrad.Tensor
    assert sd._metadata[""] == {"version": 1}
    assert fg.state_dict(keep_vars=True)["weight"] is fg.weight
    sd["weight"].zero_()  # shares memory, as in PyTorch
    assert not fg.weight.detach().numpy().any()


def test_setattr_errors_match():
    for nn, T in ((torch.nn, torch), (fnn, fusegrad)):
        m = nn.Linear(2, 2)
        with pytest.raises(TypeError, match=r"cannot assign 'torch.FloatTensor' as parameter "
                                            r"'weight' \(torch.nn.Parameter or None expected\)"):
            m.weight = T.ones(2)
        with pytest.raises(AttributeError, match="'Linear' object has no attribute 'foo'"):
            m.foo  # noqa: B018
        m.weight = None
        assert "weight" not in dict(m.named_parameters())
        del m.bias
        assert not hasattr(m, "bias")

    class Early(fnn.Module):
        def __init__(self):
            self.w = fnn.Parameter(fusegrad.ones(1))

    with pytest.raises(AttributeError, match="cannot assign parameters before Module.__init__"):
        Early()


def test_train_eval_requires_grad_zero_grad_apply():
    fg = build(fnn)
    assert fg.training and fg.block[1].training
    fg.eval()
    assert not fg.training and not fg.block[1].training
    fg.train()
    fg(fusegrad.randn(3, 4)).sum().backward()
    assert all(p.grad is not None for p in fg.parameters())
    fg.zero_grad(set_to_none=False)
    assert all(not p.grad.numpy().any() for p in fg.parameters())
    fg.zero_grad()
    assert all(p.grad is None for p in fg.parameters())
    fg.requires_grad_(False)
    assert not any(p.requires_grad for p in fg.parameters())
    seen = []
    fg.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen[0] == "Linear"


def test_dtype_conversions():
    for nn, T in ((torch.nn, torch), (fnn, fusegrad)):
        m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
        w = m[0].weight
        assert m.double() is m
        assert m[0].weight is w and w.dtype == T.float64
        assert m[1].running_mean.dtype == T.float64
        assert m[1].num_batches_tracked.dtype == T.int64
        m.half()
        assert w.dtype == T.float16
        m.to(T.float32)
        assert w.dtype == T.float32 and isinstance(w, nn.Parameter) and w.requires_grad
        m.to("cpu")
        with pytest.raises(TypeError, match="nn.Module.to only accepts floating point or "
                                            "complex dtypes, but got desired dtype=torch.int64"):
            m.to(T.int64)
        assert m(T.ones(3, 2, dtype=T.float32)).dtype == T.float32


def test_forward_hooks():
    counts = []
    for nn, T in ((torch.nn, torch), (fnn, fusegrad)):
        calls = []
        m = nn.Linear(2, 2)
        h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
        h2 = m.register_forward_hook(lambda mod, args, out: out + 1)
        m.register_forward_hook(lambda mod, args, out, c=calls: c.append(type(mod).__name__))
        with T.no_grad():
            y = m(T.ones(1, 2))
        np.testing.assert_allclose(y.numpy()[0], (m.bias + 1).detach().numpy())
        h1.remove()
        h2.remove()
        with T.no_grad():
            y = m(T.ones(1, 2))
        np.testing.assert_allclose(y.numpy(), (m(T.ones(1, 2))).detach().numpy())
        m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2,), kwargs),
                                    with_kwargs=True)
        np.testing.assert_allclose(m(T.ones(1, 2)).detach().numpy(),
                                   m.forward(T.ones(1, 2) * 2).detach().numpy())
        counts.append(calls)
    assert counts[0] == counts[1]


def test_containers():
    for nn in (torch.nn, fnn):
        seq = nn.Sequential(nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 1))
        assert isinstance(seq[0:2], nn.Sequential) and len(seq[0:2]) == 2
        assert isinstance(seq[-1], nn.Linear)
        seq.append(nn.Tanh())
        del seq[1]
        assert [n for n, _ in seq.named_children()] == ["0", "1", "2"]
        ml = nn.ModuleList([nn.ReLU()])
        ml += [nn.Tanh()]
        ml.insert(0, nn.Sigmoid())
        assert [type(m).__name__ for m in ml] == ["Sigmoid", "ReLU", "Tanh"]
        md = nn.ModuleDict({"b": nn.ReLU(), "a": nn.Tanh()})
        assert list(md.keys()) == ["b", "a"] and "a" in md
        from collections import OrderedDict

        named = nn.Sequential(OrderedDict([("x", nn.Linear(1, 1))]))
        assert list(named.state_dict()) == ["x.weight", "x.bias"]
    assert repr(fnn.Sequential()) == repr(torch.nn.Sequential())
    assert repr(fnn.ModuleList([fnn.Linear(2, 2) for _ in range(3)] + [fnn.ReLU()])) == repr(
        torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)] + [torch.nn.ReLU()]))


def test_parameter():
    p = fnn.Parameter(fusegrad.ones(2))
    assert repr(p) == repr(torch.nn.Parameter(torch.ones(2)))
    assert p.requires_grad and p.is_leaf and isinstance(p, fusegrad.Tensor)
    y = p * 2
    assert type(y) is fusegrad.Tensor
    q = copy.deepcopy(p)
    assert isinstance(q, fnn.Parameter) and q is not p
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, fnn.Parameter) and r.requires_grad
    assert not fnn.Parameter(fusegrad.ones(1), requires_grad=False).requires_grad
    assert fnn.Parameter().shape == (0,)


def test_deepcopy_module():
    fg = build(fnn)
    cp = copy.deepcopy(fg)
    assert cp.fc1.weight is not fg.fc1.weight
    np.testing.assert_array_equal(cp.fc1.weight.detach().numpy(),
                                  fg.fc1.weight.detach().numpy())


def test_missing_forward():
    class NoForward(fnn.Module):
        pass

    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        NoForward()(1)


def _hooked_run(T):
    log = []
    m = T.nn.Sequential(T.nn.Linear(3, 2), T.nn.Tanh())
    with T.no_grad():
        m[0].weight.copy_(T.tensor(np.arange(6.0).reshape(2, 3) / 10))
        m[0].bias.zero_()

    def hook(mod, gi, go):
        log.append(("hook", type(mod).__name__, [None if g is None else g for g in gi],
                    list(go)))
        return tuple(None if g is None else g * 2 for g in gi)

    def pre(mod, go):
        log.append(("pre", list(go)))
        return (go[0] * 3,)

    m[0].register_full_backward_hook(hook)
    m[1].register_full_backward_pre_hook(pre)
    x = T.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    y = m(x)
    nodes = (type(y.grad_fn).__name__, type(y.grad_fn.next_functions[0][0]).__name__)
    y.sum().backward()
    log.append(("grads", [x.grad, m[0].weight.grad]))
    m.zero_grad()
    with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are "):
        m(T.ones(1, 3)).sum().backward()
    log.append(("w", [m[0].weight.grad]))
    return nodes, log


def test_full_backward_hooks_match_torch():
    (nt, lt), (nf, lf) = _hooked_run(torch), _hooked_run(fusegrad)
    assert nf == nt == ("BackwardHookFunctionBackward", "TanhBackward0")
    assert len(lf) == len(lt)

    def flat(entry):
        out = []
        for v in entry:
            if isinstance(v, list):
                out += [None if t is None else np.asarray(t.detach().numpy(), np.float64)
                        for t in v]
            else:
                out.append(v)
        return out

    for a, b in zip(lf, lt):
        for x, y in zip(flat(a), flat(b)):
            if isinstance(y, np.ndarray):
                np.testing.assert_allclose(x, y, rtol=1e-5)
            else:
                assert x == y


def test_load_state_dict_assign_and_old_batchnorm_checkpoints():
    m = fnn.Linear(2, 2)
    new_w = fusegrad.ones(2, 2)
    m.load_state_dict({"weight": new_w, "bias": fusegrad.zeros(2)}, assign=True)
    assert isinstance(m.weight, fnn.Parameter) and m.weight.requires_grad
    new_w.zero_()
    assert not m.weight.detach().numpy().any()  # assigned, not copied
    for nn in (torch.nn, fnn):
        bn = nn.BatchNorm1d(2)
        sd = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
        assert repr(bn.load_state_dict(sd)) == "<All keys matched successfully>"


def _state_dict_hooks(lib, returns):
    """The keys and hook calls of state_dict with public pre and post hooks on a child."""
    model = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU())
    calls = []
    model[0].register_state_dict_pre_hook(
        lambda mod, prefix, keep_vars: calls.append(("pre", prefix, keep_vars)))

    def post(mod, sd, prefix, local_metadata):
        calls.append(("post", prefix, sorted(sd)))
        sd[prefix + "extra"] = lib.ones(1)
        return sd if returns else None

    handle = model[0].register_state_dict_post_hook(post)
    try:
        keys = list(model.state_dict(keep_vars=True))
    except RuntimeError as e:
        return str(e), calls
    handle.remove()
    return keys, list(model.state_dict()), calls


@pytest.mark.parametrize("returns", [False, True])
def test_public_state_dict_hooks_match_torch(returns):
    assert _state_dict_hooks(fusegrad, returns) == _state_dict_hooks(torch, returns)


def test_public_post_hook_cannot_be_registered_privately():
    for lib in (torch, fusegrad):
        m = lib.nn.Linear(1, 1)

        def hook(*args):
            return None

        m.register_state_dict_post_hook(hook)
        with pytest.raises(RuntimeError, match="previously registered via "
                                               "register_state_dict_post_hook"):
            m._register_state_dict_hook(hook)


def _parameter_containers(lib):
    """Reprs and key orders of ParameterList and ParameterDict built the usual ways."""
    from collections import OrderedDict

    def p(*shape, dtype=None):
        return lib.nn.Parameter(lib.ones(*shape, dtype=dtype))

    d = lib.nn.ParameterDict({"w": p(2), "v": p(2, 3, dtype=lib.float64)})
    out = [repr(d), list(d.keys())]
    d.update({"z": p(1), "c": p(1)})
    d.update(OrderedDict([("y", p(1)), ("x", p(1))]))
    d.update([("q", p(1)), ("b", p(1))])
    out.append(list(d.keys()))
    out.append(list(lib.nn.ParameterDict(lib.nn.ParameterDict({"k": p(1), "j": p(1)}))))
    out.append(repr(lib.nn.ParameterList([p(2, dtype=lib.float16), lib.zeros(3)])))
    out.append(repr(lib.nn.ParameterDict({"a": p(1)})))
    return [s.replace("fusegrad", "torch") if isinstance(s, str) else s for s in out]


def test_parameter_containers_print_and_order_as_torch():
    assert _parameter_containers(fusegrad) == _parameter_containers(torch)
