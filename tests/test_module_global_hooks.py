"""Module-global hooks (`torch.nn.modules.module.register_module_*_hook`) against PyTorch:
which fire, in what order relative to each module's own hooks (forward pre, forward with and
without kwargs, always_call on a failing forward, full backward pre and full backward), the
registration hooks for buffers, parameters and submodules (also on assignment), replacement
values returned by hooks, and removal restoring the plain call."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import importlib  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402

import fusegrad  # noqa: E402


def _story(lib) -> list:
    M = importlib.import_module(lib.__name__ + ".nn.modules.module")
    log = []

    def rec(tag, *extra):
        """A hook that logs its tag, the module's class and `extra(args)`."""
        return lambda m, *a: log.append((tag, type(m).__name__, *[f(a) for f in extra]))

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(2, 2)

        def forward(self, x, scale=1.0):
            return self.lin(x) * scale

    hs = [M.register_module_forward_pre_hook(rec("gpre")),
          M.register_module_forward_hook(rec("gfwd_kw", lambda a: sorted(a[1])),
                                         with_kwargs=True),
          M.register_module_forward_hook(rec("gfwd")),
          M.register_module_full_backward_pre_hook(rec("gbpre", lambda a: len(a[0]))),
          M.register_module_full_backward_hook(rec("gbwd", lambda a: (len(a[0]), len(a[1])))),
          M.register_module_buffer_registration_hook(rec("gbuf", lambda a: a[0])),
          M.register_module_module_registration_hook(rec("gmod", lambda a: a[0])),
          M.register_module_parameter_registration_hook(rec("gpar", lambda a: a[0]))]
    net = Net()
    log.append("built")
    net.register_forward_pre_hook(rec("pre"))
    net.register_forward_hook(rec("fwd"))
    net.register_full_backward_pre_hook(rec("bpre"))
    net.register_full_backward_hook(rec("bwd"))
    y = net(lib.ones(1, 2, requires_grad=True), scale=2.0)
    log.append("forward done")
    y.sum().backward()
    log.append("backward done")
    net.register_buffer("b", lib.zeros(1))
    net.b = lib.ones(1)
    net.c = lib.nn.Parameter(lib.ones(1))
    net.sub = lib.nn.ReLU()
    net.add_module("sub2", lib.nn.ReLU())
    net.register_parameter("nothing", None)
    log.append("registered")
    # hooks that return a replacement
    h = M.register_module_buffer_registration_hook(lambda m, n, b: b * 10)
    net.register_buffer("d", lib.ones(1))
    log.append(("d", net.d.tolist()))
    h.remove()
    h = M.register_module_parameter_registration_hook(lambda m, n, p: lib.nn.Parameter(p * 3))
    net.e = lib.nn.Parameter(lib.ones(1))
    log.append(("e", net.e.tolist(), type(net.e).__name__))
    h.remove()
    h = M.register_module_module_registration_hook(lambda m, n, s: lib.nn.Tanh())
    net.f = lib.nn.ReLU()
    log.append(("f", type(net.f).__name__))
    h.remove()
    h = M.register_module_forward_hook(
        lambda m, a, o: o * 0 + 100 if type(m).__name__ == "Net" else None)
    log.append(("out", net(lib.zeros(1, 2)).tolist()))
    h.remove()
    h = M.register_module_forward_pre_hook(
        lambda m, a: (a[0] * 0,) if type(m).__name__ == "Linear" else None)
    log.append(("pre-out", net.lin(lib.ones(1, 2)).tolist() == [net.lin.bias.tolist()]))
    h.remove()

    class Bad(lib.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    ha = M.register_module_forward_hook(rec("always", lambda a: a[-1]), always_call=True)
    hk = M.register_module_forward_hook(rec("always_kw", lambda a: (len(a), a[-1])),
                                        always_call=True, with_kwargs=True)
    try:
        Bad()(lib.ones(1))
    except ValueError as e:
        log.append(str(e))
    ha.remove()
    hk.remove()
    for h in hs:
        h.remove()
    net(lib.ones(1, 2)).sum().backward()
    log.append("end")
    return log


def test_global_hooks_fire_as_torchs(global_backward_hook_kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _story(fusegrad) == _story(torch)


def _none_registrations(lib) -> list:
    M = importlib.import_module(lib.__name__ + ".nn.modules.module")
    log = []
    handles = [
        M.register_module_buffer_registration_hook(lambda m, n, b: log.append(("b", n, b))),
        M.register_module_module_registration_hook(lambda m, n, s: log.append(("m", n, s))),
        M.register_module_parameter_registration_hook(lambda m, n, p: log.append(("p", n, p)))]
    m = lib.nn.Module()
    m.register_buffer("a", None)
    m.a = None
    m.add_module("s", None)
    m.s = None
    m.register_parameter("p", None)
    m.p = None
    m.q = lib.nn.Buffer(lib.ones(1))
    for h in handles:
        h.remove()
    m.register_buffer("after", None)
    return [(k, n, v if v is None else type(v).__name__) for k, n, v in log]


def test_registration_hooks_on_none_values():
    assert _none_registrations(fusegrad) == _none_registrations(torch)


def test_removal_restores_the_plain_call(global_backward_hook_kind):
    from fusegrad.nn.modules import module as fm

    plain = fusegrad.nn.Module.__call__
    lin = fusegrad.nn.Linear(2, 2)
    seen = []
    h1 = fm.register_module_forward_pre_hook(lambda m, a: seen.append(1))
    h2 = fm.register_module_full_backward_hook(lambda m, gi, go: seen.append(2))
    assert fusegrad.nn.Module.__call__ is not plain
    h1.remove()
    lin(fusegrad.ones(1, 2, requires_grad=True)).sum().backward()
    assert seen == [2] and fusegrad.nn.Module.__call__ is not plain
    h2.remove()
    assert fusegrad.nn.Module.__call__ is plain
    fm.register_module_forward_hook(lambda m, a, o: seen.append(3))
    fm._global_forward_hooks.clear()  # code written for PyTorch empties the table directly
    assert fusegrad.nn.Module.__call__ is plain
    lin(fusegrad.ones(1, 2))
    assert seen == [2]


def _own_always_call(lib) -> list:
    seen = []

    class Bad(lib.nn.Module):
        def forward(self, x, flag=True):
            raise ValueError("boom")

    bad = Bad()
    bad.register_forward_hook(lambda m, a, k, o: seen.append(("kw", sorted(k), o)),
                              with_kwargs=True, always_call=True)
    bad.register_forward_hook(lambda m, a, o: seen.append(("plain", o)), always_call=True)
    try:
        bad(lib.ones(1), flag=False)
    except ValueError as e:
        seen.append(str(e))
    return seen


def test_module_always_call_hook_gets_kwargs_on_failure():
    assert _own_always_call(fusegrad) == _own_always_call(torch)
