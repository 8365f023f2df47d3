"""TorchScript patterns of user code against PyTorch: a Sequential's last layer by a negative
index, a module attribute updated with `+=`, a frozen module's preserved attributes and
methods (and nothing else left), a copy of a scripted module running its own exported
methods, and the script-time error for a Tensor method TorchScript does not have."""

from __future__ import annotations

import copy
import os
import typing
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)

X = np.arange(24, dtype=np.float32).reshape(4, 6) / 10


def _same(got: list, want: list, **tolerance) -> None:
    """Results equal item by item: arrays within `tolerance`, anything else exactly."""
    for g, w in zip(got, want, strict=True):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, **tolerance)
        else:
            assert g == w


def _counter(lib):
    """A module with a submodule, numbers read by forward and exported methods."""
    nn = lib.nn

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 3))
            self.version = 1
            self.scale = 2.0

        def forward(self, x):
            y = self.seq[-1](self.seq[-2](self.seq[0](x)))
            return y * self.scale + self.version

        @lib.jit.export
        def bump(self) -> int:
            self.version += 1
            return self.version

        @lib.jit.export
        def first(self, x: torch.Tensor) -> torch.Tensor:
            return self.seq[-3](x) - 1

    lib.manual_seed(0)
    return Counter().eval()


def _both(fn):
    return {lib: fn(lib) for lib in (torch, fusegrad)}


def _copy_weights(src, dst):
    dst.load_state_dict({k: fusegrad.tensor(v.numpy()) for k, v in src.state_dict().items()})


def test_negative_index_and_attribute_update():
    def run(lib):
        m = _counter(lib)
        if lib is fusegrad:
            _copy_weights(_counter(torch), m)
        sm = lib.jit.script(m)
        x = lib.tensor(X)
        out = [sm(x).detach().numpy(), sm.first(x).detach().numpy()]
        out.append((sm.bump(), sm.bump(), sm.version))
        out.append(sm(x).detach().numpy())
        return out
    results = _both(run)
    got, want = results[fusegrad], results[torch]
    _same(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("keep", [(), ("version", "bump"), ("first",), ("scale",)])
def test_freeze_keeps_only_what_is_preserved(keep):
    names = ("seq", "version", "scale", "bump", "first", "training")

    def run(lib):
        m = _counter(lib)
        if lib is fusegrad:
            _copy_weights(_counter(torch), m)
        sm = lib.jit.script(m)
        fm = lib.jit.freeze(sm, preserved_attrs=list(keep))
        x = lib.tensor(X)
        out = [[hasattr(fm, n) for n in names], fm(x).detach().numpy()]
        if "bump" in keep:
            out.append((fm.bump(), fm.version, sm.version))
            out.append(fm(x).detach().numpy())
        if "first" in keep:
            out.append(fm.first(x).detach().numpy())
        return out
    results = _both(run)
    got, want = results[fusegrad], results[torch]
    _same(got, want, rtol=1e-6, atol=1e-6)  # (item 0: which names the frozen module has)


def test_copy_of_scripted_module_runs_its_own_methods():
    sm = fusegrad.jit.script(_counter(fusegrad))
    other = copy.deepcopy(sm)
    assert (other.bump(), other.bump()) == (2, 3)
    assert (other.version, sm.version) == (3, 1)
    assert sm.bump() == 2


@pytest.mark.parametrize("annotated", [False, True])
def test_python_only_tensor_method_fails_when_scripting(annotated):
    def messages(lib):
        if annotated:
            def f(x: torch.Tensor):
                return x.numpy()
        else:
            def f(x):
                return x.numpy()
        with pytest.raises(RuntimeError) as info:
            lib.jit.script(f)
        return str(info.value).split(":\n")[0]
    got = messages(fusegrad)
    assert got == messages(torch)
    assert ("(inferred)" in got) == (not annotated)


def _script_results(lib):
    """Scripted functions using isinstance, sorted, str and str methods, fork and wait."""
    jit, Tensor = lib.jit, lib.Tensor

    def add_if(x: torch.Tensor, y: torch.Tensor | None) -> torch.Tensor:
        if isinstance(y, Tensor):
            return x + y
        return x

    def count(xs: list[int], ys: list[int]) -> int:
        t = 0
        for a, b in zip(xs, ys):
            t += max(a, b) - min(a, b)
        zs = sorted(xs)
        return t + zs[0] + len(zs) + int(isinstance(t, int))

    def words(s: str, xs: list[str]) -> str:
        out = s.upper() + "-" + "_".join(xs)
        if out.startswith("AB"):
            out = out.replace("-", "+")
        return out + str(len(out)) + str(out.find("_"))

    def triple(x: torch.Tensor) -> torch.Tensor:
        return x * 3

    def forked(x: torch.Tensor) -> torch.Tensor:
        fut = jit.fork(triple, x)
        y = x + 1
        return jit.wait(fut) + y

    x = lib.tensor(X)
    f, g, h = jit.script(add_if), jit.script(count), jit.script(words)
    fork = jit.script(forked)
    return [f(x, x).numpy(), f(x, None).numpy(), g([3, 1, 2], [0, 5, 1]),
            h("abc", ["x", "y"]), h("zz", []), fork(x).numpy(),
            jit.wait(jit.fork(triple, x)).numpy()]


def test_builtins_string_methods_and_fork_in_script():
    got, want = _script_results(fusegrad), _script_results(torch)
    _same(got, want, rtol=1e-6)


def _script_module_subclass(lib, weights=None):
    """The older way of writing a scripted module: a ScriptModule subclass with
    script_methods, subclassed again. Returns the results and the weights used (fusegrad
    is given torch's)."""
    nn = lib.nn

    class Base(lib.jit.ScriptModule):
        def __init__(self, n):
            super().__init__()
            self.lin = nn.Linear(n, 3)
            self.k = 2

        @lib.jit.script_method
        def forward(self, x):
            if x.dim() == 2:
                return self.lin(x).tanh() * self.k
            return x

        @lib.jit.script_method
        def shifted(self, x: torch.Tensor) -> torch.Tensor:
            return self.forward(x) + 1

    class Sub(Base):
        def __init__(self):
            super().__init__(6)
            self.head = nn.Linear(3, 1)

        @lib.jit.script_method
        def forward(self, x):
            return self.head(self.lin(x))

    base, sub = Base(6), Sub()
    if weights is None:
        weights = [{k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
                   for m in (base, sub)]
    for m, w in zip((base, sub), weights):
        m.load_state_dict({k: lib.tensor(v) for k, v in w.items()})
    x = lib.tensor(X)
    out = base(x)
    out.sum().backward()
    results = [type(base).__name__, isinstance(base, lib.jit.ScriptModule),
               sorted(base.state_dict()), out.detach().numpy(),
               base.shifted(x).detach().numpy(), base(lib.ones(3)).numpy(),
               base.lin.weight.grad.numpy(), sorted(n for n, _ in sub.named_modules()),
               sub(x).detach().numpy()]
    return results, weights


def test_script_module_subclass_with_script_methods():
    want, weights = _script_module_subclass(torch)
    got, _ = _script_module_subclass(fusegrad, weights)
    _same(got, want, rtol=1e-5, atol=1e-6)


def _class_results(lib):
    """A class compiled for scripted code: made, its methods called (one making another
    object of the class, one updating an attribute), returned to Python, and saved with the
    function that makes it."""
    import io

    class Pair:
        def __init__(self, a: torch.Tensor, b: torch.Tensor):
            self.a = a
            self.b = b
            self.calls = 0

        def total(self) -> torch.Tensor:
            self.calls += 1
            return self.a + self.b

        def scaled(self, k: float) -> Pair:
            return Pair(self.a * k, self.b * k)

    class Bag:
        def __init__(self):
            self.items: list[torch.Tensor] = []

        def add(self, x: torch.Tensor):
            self.items.append(x)

    scripted_pair = lib.jit.script(Pair)

    def combine(x: torch.Tensor):
        p = Pair(x, x * 2)
        q = p.scaled(0.5)
        bag = Bag()
        for i in range(3):
            bag.add(x * i)
        return p.total() + q.total() + p.calls, p, len(bag.items)

    f = lib.jit.script(combine)
    x = lib.tensor(X)
    value, p, n = f(x)
    buf = io.BytesIO()
    lib.jit.save(f, buf)
    buf.seek(0)
    loaded = lib.jit.load(buf)
    value2, p2, n2 = loaded(x)
    plain = Pair(x, x)
    return [scripted_pair is Pair, value.numpy(), type(p).__name__, isinstance(p, Pair),
            p.a.numpy(), p.calls, n, value2.numpy(), type(p2).__name__, p2.total().numpy(),
            n2, plain.total().numpy(), plain.calls]


def test_script_classes():
    got, want = _class_results(fusegrad), _class_results(torch)
    _same(got, want, rtol=1e-6)


def test_if_expression_type_mismatch_message():
    def messages(lib):
        def f(x, flag: bool):
            return x * (0.5 if flag else 0)
        with pytest.raises(RuntimeError) as info:
            lib.jit.script(f)
        return str(info.value).split(":\n")[0].strip()
    assert messages(fusegrad) == messages(torch)


def test_trace_with_memory_format_saves_and_loads():
    import io

    def f(x):
        return x.t().contiguous(memory_format=fusegrad.contiguous_format) * 2

    x = fusegrad.tensor(X)
    traced = fusegrad.jit.trace(f, (x,))
    buf = io.BytesIO()
    fusegrad.jit.save(traced, buf)
    buf.seek(0)
    loaded = fusegrad.jit.load(buf)
    want = torch.tensor(X).t().contiguous() * 2
    for out in (traced(x), loaded(x)):
        np.testing.assert_array_equal(out.numpy(), want.numpy())
        assert out.stride() == want.stride()
    assert "contiguous_format" in loaded.code


def _attribute(lib):
    nn = lib.nn

    class Names(nn.Module):
        def __init__(self):
            super().__init__()
            self.names = lib.jit.Attribute([], list[str])

        def forward(self, x):
            self.names.append("a")
            return x * len(self.names)

    x = lib.tensor(X)
    names = lib.jit.script(Names())
    names(x)
    return [names(x).numpy(), list(names.names)]


def test_jit_attribute():
    got, want = _attribute(fusegrad), _attribute(torch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1] == want[1]


@fusegrad.jit.interface
class _Shift(fusegrad.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pass


class _Plus(fusegrad.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


class _Holder(fusegrad.nn.Module):
    sub: _Shift

    def __init__(self):
        super().__init__()
        self.sub = _Plus()

    def forward(self, x):
        return self.sub(x) * 2


def test_jit_interface_annotated_submodule():
    m = _Holder()
    x = fusegrad.tensor(X)
    np.testing.assert_array_equal(fusegrad.jit.script(m)(x).numpy(), m(x).numpy())
    assert fusegrad.jit.interface(_Shift) is _Shift


class _Out(typing.NamedTuple):
    total: torch.Tensor
    count: int


def test_named_tuple_results_as_torch():
    import io

    def run(lib):
        def f(x: torch.Tensor) -> _Out:
            o = _Out(x.sum(1), x.size(0))
            return _Out(o.total * 2, count=o.count + 1)

        scripted = lib.jit.script(f)
        buf = io.BytesIO()
        lib.jit.save(scripted, buf)
        buf.seek(0)
        loaded = lib.jit.load(buf)
        x = lib.tensor(X)
        a, b = scripted(x), loaded(x)
        return [type(a).__name__, a.total.numpy(), a.count, len(a),
                type(b).__name__, b.total.numpy(), b.count, tuple(type(b)._fields)]
    got, want = run(fusegrad), run(torch)
    _same(got, want, rtol=1e-6)
