"""`jit.trace`, `jit.trace_module`, `jit.freeze` and `jit.optimize_for_inference` return
PyTorch's types, checked against PyTorch run here: a traced module is a
`TopLevelTracedModule` (a `ScriptModule`) whose submodules are `TracedModule`s sharing the
original's parameters; a traced function is a `ScriptFunction`; frozen and optimized modules
are `RecursiveScriptModule`s; values, reprs and errors as PyTorch's."""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)
X = np.random.default_rng(0).standard_normal((1, 3, 6, 6)).astype(np.float32)
Y = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
Z = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecation warnings are tested elsewhere
        yield


def _conv_bn(lib):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4), lib.nn.ReLU())
    with lib.no_grad():  # running statistics that make the folding matter
        m[1].running_mean.copy_(lib.tensor([0.5, -0.25, 0.1, 0.0]))
        m[1].running_var.copy_(lib.tensor([2.0, 0.5, 1.5, 0.75]))
    return m.eval()


def _linear_bn(lib):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.BatchNorm1d(5))
    with lib.no_grad():
        m[1].running_mean.copy_(lib.tensor([0.5, -0.25, 0.1, 0.0, 1.0]))
        m[1].running_var.copy_(lib.tensor([2.0, 0.5, 1.5, 0.75, 1.0]))
    return m.eval()


def _np(t):
    return t.detach().numpy()


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the exception itself is what is compared
        return type(e).__name__, str(e)
    return None


def test_traced_module_types_structure_and_state():
    facts = {}
    for lib in LIBS:
        m = _conv_bn(lib)
        tr = lib.jit.trace(m, lib.tensor(X))
        facts[lib] = (
            [c.__name__ for c in type(tr).__mro__[:4]],
            isinstance(tr, lib.jit.ScriptModule),
            isinstance(tr, lib.jit.RecursiveScriptModule),
            [(n, type(c).__name__, c.original_name) for n, c in tr.named_children()],
            tr.original_name,
            [p is q for p, q in zip(tr.parameters(), m.parameters())],
            [b is c for b, c in zip(tr.buffers(), m.buffers())],
            list(tr.state_dict()),
            repr(tr),
            type(tr).__module__.replace("torch", "fusegrad"),
            tr.code.startswith("def forward(self,\n    input: Tensor) -> Tensor:"),
            str(tr.graph).startswith("graph(%self"),
        )
        tr.train()
        facts[lib] += (tr.training, tr._modules["1"].training, m.training, m[1].training)
        tr.eval()
        facts[lib] += (_np(tr(lib.tensor(Y))), _np(m(lib.tensor(Y))))
    got, want = facts[fusegrad], facts[torch]
    assert got[:-2] == want[:-2]
    np.testing.assert_allclose(got[-2], got[-1], rtol=1e-6, atol=1e-6)  # new shape
    np.testing.assert_allclose(got[-2], want[-2], rtol=1e-5, atol=1e-5)


def _sequence_errors(lib):
    tr = lib.jit.trace(_conv_bn(lib), lib.tensor(X))
    return [_error(lambda: len(tr)), _error(lambda: tr[0]), _error(lambda: iter(tr)),
            _error(lambda: tr._modules["0"](lib.tensor(X)))]


def test_traced_module_is_no_sequence_and_its_submodules_do_not_run():
    want = _sequence_errors(torch)
    assert _sequence_errors(fusegrad) == want
    assert all(e is not None for e in want)


def test_traced_function_is_a_script_function():
    def add_twice(a, b):
        return a + b * 2

    facts = {}
    for lib in LIBS:
        x, z = lib.tensor(Z), lib.tensor(Z[::-1].copy())
        f = lib.jit.trace(add_twice, (x, z))
        g = lib.jit.trace(lambda a: a * 2, x)
        facts[lib] = (type(f).__name__, type(f) is lib.jit.ScriptFunction, f.name,
                      f.qualified_name, g.name, g.qualified_name,
                      f.code.splitlines()[0], hasattr(f, "save"), _np(f(x, b=z)),
                      _np(f(lib.ones(2, 4), lib.ones(2, 4))))
    got, want = facts[fusegrad], facts[torch]
    assert got[:8] == want[:8]
    for a, b in zip(got[8:], want[8:]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def _two_methods(lib):
    lib.manual_seed(0)

    class Two(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(4, 4)
            self.b = lib.nn.Linear(4, 4)

        def forward(self, x):
            return self.a(x)

        def other(self, x):
            return self.b(x) * 2

    m, x = Two(), lib.tensor(Z)
    bound = lib.jit.trace(m.forward, x)
    tm = lib.jit.trace_module(m, {"forward": x, "other": x})
    return (type(bound).__name__, type(tm).__name__, _np(tm(x)), _np(m(x)), _np(tm.other(x)),
            _np(m.other(x)), _error(lambda: lib.jit.trace_module(m, x)),
            _error(lambda: lib.jit.trace_module(m, {"nope": x})))


def test_trace_of_a_bound_forward_and_trace_module():
    got, want = _two_methods(fusegrad), _two_methods(torch)
    assert got[:2] == want[:2] == ("TopLevelTracedModule", "TopLevelTracedModule")
    np.testing.assert_allclose(got[2], got[3], rtol=1e-6)
    np.testing.assert_allclose(got[4], got[5], rtol=1e-6)
    assert got[6:] == want[6:]


@pytest.mark.parametrize("how", ["script", "trace"])
def test_freeze_makes_a_recursive_script_module(how):
    facts = {}
    for lib in LIBS:
        m = _conv_bn(lib)
        c = lib.jit.script(m) if how == "script" else lib.jit.trace(m, lib.tensor(X))
        fr = lib.jit.freeze(c)
        facts[lib] = (type(fr).__name__, fr.original_name, len(list(fr.parameters())),
                      len(list(fr.buffers())), _np(fr(lib.tensor(Y))).shape,
                      fr(lib.tensor(Y)).requires_grad)
        np.testing.assert_allclose(_np(fr(lib.tensor(Y))), _np(m(lib.tensor(Y))), rtol=1e-5,
                                   atol=1e-5)
        if how == "trace":
            facts[lib] += (list(fr.children()),)
    assert facts[fusegrad] == facts[torch]


def _freeze_errors(lib):
    m = _conv_bn(lib).train()
    tr = lib.jit.trace(m, lib.tensor(X))
    f = lib.jit.trace(lambda a: a * 2, lib.tensor(X))
    return [_error(lambda: lib.jit.freeze(tr)),
            _error(lambda: lib.jit.freeze(m.eval())),
            _error(lambda: lib.jit.freeze(f)),
            _error(lambda: lib.jit.optimize_for_inference(m)),
            _error(lambda: lib.jit.freeze(tr.eval(), preserved_attrs=["nope"])),
            _error(lambda: lib.jit.optimize_for_inference(tr, ["nope"]))]


def test_freeze_and_optimize_errors():
    want = _freeze_errors(torch)
    assert _freeze_errors(fusegrad) == want
    assert all(e is not None for e in want)


@pytest.mark.parametrize("how", ["script", "trace"])
@pytest.mark.parametrize("model", ["conv_bn", "linear_bn"])
def test_optimize_for_inference_folds_and_keeps_the_values(how, model):
    build, x, y = (_conv_bn, X, Y) if model == "conv_bn" else (_linear_bn, Z, Z[:2])
    facts = {}
    for lib in LIBS:
        m = build(lib).train()
        c = lib.jit.script(m) if how == "script" else lib.jit.trace(m.eval(), lib.tensor(x))
        c.train()
        o = lib.jit.optimize_for_inference(c)
        again = lib.jit.optimize_for_inference(o)  # a frozen module is optimized as it is
        out = _np(o(lib.tensor(y)))
        facts[lib] = (type(o).__name__, type(again).__name__, c.training, out.shape)
        np.testing.assert_allclose(out, _np(m.eval()(lib.tensor(y))), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_np(again(lib.tensor(y))), out, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(_np(c(lib.tensor(y))), _np(m(lib.tensor(y))), rtol=1e-6)
        if lib is torch:  # PyTorch's optimized program has no batch norm left ...
            assert "batch_norm" not in o.code
        elif model == "conv_bn":  # ... nor has fusegrad's after a convolution ...
            assert 'getattr(self, "1")' not in o.code
        else:  # ... but a linear layer's stays (see the next test)
            assert "batch_norm" in o.code or 'getattr(self, "1")' in o.code


def test_optimize_for_inference_keeps_a_batch_norm_after_a_linear_layer():
    """A batch norm after a linear layer normalizes its input's dim 1, the linear layer's
    features only for a 2-D input: PyTorch folds it anyway, and for an (N, C, L) input with
    C equal to the features its optimized module computes other values; fusegrad keeps the
    batch norm and the module's values."""
    m = fusegrad.nn.Sequential(fusegrad.nn.Linear(4, 3), fusegrad.nn.BatchNorm1d(3)).eval()
    with fusegrad.no_grad():
        m[1].running_mean.copy_(fusegrad.tensor([0.5, -0.25, 1.0]))
        m[1].running_var.copy_(fusegrad.tensor([2.0, 0.5, 1.5]))
    rng = np.random.default_rng(0)
    x = fusegrad.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    flat = fusegrad.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    for made in (fusegrad.jit.trace(m, x), fusegrad.jit.script(m)):
        o = fusegrad.jit.optimize_for_inference(made)
        for inp in (x, flat):
            np.testing.assert_allclose(_np(o(inp)), _np(m(inp)), rtol=1e-5, atol=1e-5)


def test_traced_module_saves_and_loads(tmp_path):
    m = _conv_bn(fusegrad)
    tr = fusegrad.jit.trace(m, fusegrad.tensor(X))
    tr.save(tmp_path / "t.pt")
    loaded = fusegrad.jit.load(tmp_path / "t.pt")
    want = _conv_bn(torch)(torch.tensor(Y))
    np.testing.assert_allclose(_np(loaded(fusegrad.tensor(Y))), _np(want), rtol=1e-5,
                               atol=1e-5)
    fr = fusegrad.jit.freeze(tr)
    fr.save(tmp_path / "f.pt")
    np.testing.assert_allclose(_np(fusegrad.jit.load(tmp_path / "f.pt")(fusegrad.tensor(Y))),
                               _np(want), rtol=1e-5, atol=1e-5)


def _reuse(lib):
    """A convolution called twice, once before a batch norm (folding would change the other
    call's result) and a nested Sequential whose conv and batch norm fold."""
    lib.manual_seed(0)

    class Reuse(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = lib.nn.Conv2d(3, 3, 1)
            self.bn = lib.nn.BatchNorm2d(3)
            self.inner = _conv_bn(lib)[:2]

        def forward(self, x):
            return self.bn(self.c(x)) + self.c(x) + self.inner(x)[:, :3, 1:-1, 1:-1].mean()

    m = Reuse()
    with lib.no_grad():
        m.bn.running_var.fill_(3.0)
    return m.eval()


@pytest.mark.parametrize("how", ["script", "trace"])
def test_optimize_for_inference_folds_only_a_layer_used_once(how):
    results = {}
    for lib in LIBS:
        m = _reuse(lib)
        c = lib.jit.script(m) if how == "script" else lib.jit.trace(m, lib.tensor(X))
        o = lib.jit.optimize_for_inference(c)
        results[lib] = (_np(o(lib.tensor(X))), _np(m(lib.tensor(X))))
    np.testing.assert_allclose(results[fusegrad][0], results[fusegrad][1], rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(results[fusegrad][0], results[torch][0], rtol=1e-5, atol=1e-5)


def _modes(lib):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.BatchNorm1d(4), lib.nn.Dropout(0.5))
    x = lib.tensor(Z)
    tr = lib.jit.trace(m.eval(), x)
    before = _np(tr(x))
    m.train()  # the trace keeps the mode it was recorded in
    after = _np(tr(x))
    tr.train()
    trained = _np(tr(x))
    with lib.no_grad():
        m[0].weight.mul_(2)  # and reads the module's parameters as they are now
    return before, after, trained, _np(tr(x)), _np(m.eval()(x))


def test_trace_keeps_its_mode_and_shares_the_weights():
    got, want = _modes(fusegrad), _modes(torch)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_allclose(got[3], got[4], rtol=1e-6)


def _mixed(lib):
    """A scripted module holding a traced one (with a batch norm to fold)."""
    lib.manual_seed(0)
    x = lib.tensor(Z)

    class Outer(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.t = lib.jit.trace(_linear_bn(lib)[:2], x)
            self.out = lib.nn.Linear(5, 2)

        def forward(self, x):
            return self.out(self.t(x)).relu()

    m = Outer().eval()
    traced_outer = lib.jit.trace(m, x)
    scripted = lib.jit.script(m)
    o = lib.jit.optimize_for_inference(lib.jit.script(m))
    return ([(n, type(c).__name__) for n, c in traced_outer.named_children()],
            type(scripted).__name__, _np(scripted(x)), _np(o(x)), o(x).requires_grad,
            _np(m(x)))


def test_a_scripted_module_holding_a_traced_one():
    got, want = _mixed(fusegrad), _mixed(torch)
    assert got[:2] == want[:2]
    assert got[4] == want[4]
    for k in (2, 3):
        np.testing.assert_allclose(got[k], want[5], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[k], got[5], rtol=1e-5, atol=1e-6)


def test_a_scripted_module_holding_a_traced_one_saves_and_loads(tmp_path):
    """The traced submodule saves as its program (here recorded op by op, with a tensor
    constant of its own), plain and frozen; the loaded programs agree with eager."""
    k = fusegrad.tensor([1.0, 2.0, 3.0, 4.0])

    class Inner(fusegrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = fusegrad.nn.Linear(4, 4)

        def forward(self, x):
            if x.sum() > 0:  # a branch on values: recorded as the example takes it
                return self.lin(x) + k
            return x

    x = fusegrad.ones(3, 4)

    class Outer(fusegrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.t = fusegrad.jit.trace(Inner(), x)

        def forward(self, x):
            return self.t(x) * 2

    m = Outer().eval()
    scripted = fusegrad.jit.script(m)
    for i, program in enumerate((scripted, fusegrad.jit.freeze(scripted))):
        program.save(tmp_path / f"{i}.pt")
        loaded = fusegrad.jit.load(tmp_path / f"{i}.pt")
        np.testing.assert_allclose(_np(loaded(x)), _np(m(x)), rtol=1e-6)
