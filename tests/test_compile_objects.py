"""Objects made inside compiled code: dataclasses (returned, mutated, with `__post_init__`
and default factories), plain classes (`super().__init__`, properties, class and static
methods, `__call__`), and `distributions` (Normal, Categorical, Bernoulli, Independent,
MultivariateNormal, kl_divergence, rsample). Capture follows them in one graph, as
torch.compile does; each program runs eagerly and compiled (values, gradients, exceptions,
side effects, the object's class and attributes must agree), twice with new inputs of
another shape (guards). Objects capture cannot follow (`__slots__`, a dict subclass, a
missing attribute) still give eager's answers. No torch is imported: .ci/run runs this file
on 3.12 and 3.13 too."""

from __future__ import annotations

import collections
import dataclasses
import os
import weakref

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from compile_support import CAPTURES, Counter, tolerances  # noqa: E402

import fusegrad as fg  # noqa: E402

D = fg.distributions
LOG: list = []


@dataclasses.dataclass
class Out:
    loss: fg.Tensor
    logits: fg.Tensor | None = None
    extras: list = dataclasses.field(default_factory=list)

    @property
    def total(self):
        return self.loss + self.logits.sum()

    def scaled(self, k):
        return self.logits * k


@dataclasses.dataclass
class Post:
    a: fg.Tensor
    b: fg.Tensor | None = None

    def __post_init__(self):
        if self.b is None:
            self.b = self.a * 2


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: fg.Tensor
    k: float = 2.0

    def scaled(self):
        return self.a * self.k


class Tracked:
    """Records every attribute write through its own __setattr__."""

    def __init__(self, v):
        self.names = []
        self.v = v

    def __setattr__(self, name, value):
        if name != "names":
            self.names.append(name)
        super().__setattr__(name, value)


class Base:
    kind = "base"

    def __init__(self, w):
        self.w = w
        self.calls = 0

    def apply(self, x):
        self.calls += 1
        return x * self.w


class Scaled(Base):
    factor = 3.0

    def __init__(self, w, bias):
        super().__init__(w)
        self._bias = bias

    @property
    def bias(self):
        return self._bias

    @bias.setter
    def bias(self, value):
        self._bias = value * 0.5

    @staticmethod
    def twice(x):
        return x * 2

    @classmethod
    def make(cls, w):
        return cls(w, w + 1)

    def __call__(self, x):
        return self.apply(x) * self.factor + self.bias


class Counter2(Base):
    def bump(self, T, x):
        self.calls += 1
        T._dynamo.graph_break()
        self.calls += 10
        self.w = self.w + x
        return self.w.sum()


class Slotted:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


class ModelOutput(collections.OrderedDict):
    """The shape of HF's ModelOutput: a dict whose fields that are not None are also its
    items, kept in step by its own __setattr__/__setitem__."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                self[f.name] = value

    def __getitem__(self, k):
        if isinstance(k, str):
            inner = dict(self.items())
            return inner[k]
        return self.to_tuple()[k]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class HFOut(ModelOutput):
    loss: fg.Tensor | None = None
    logits: fg.Tensor | None = None


Pair = collections.namedtuple("Pair", "a b")


class Holder:
    pass


HOLDER = Holder()


def _linear(T, x):
    return x @ T.ones(x.shape[-1], 6) * 0.1 + 0.05


def p_dataclass_return(T, x, y):
    logits = x * 2
    return Out(logits.sum(), logits)


def p_dataclass_mutate(T, x, y):
    o = Out(x.sum())
    o.logits = y * 3
    o.extras.append(o.loss)
    o.loss = o.loss + 1
    return o.total + o.scaled(2).sum() + o.extras[0] + len(o.extras)


def p_post_init(T, x, y):
    p = Post(x + 1)
    q = Post(x, y)
    return p.b + q.b


def p_plain_class(T, x, y):
    m = Scaled(x, y.sum())
    m.bias = m.bias * 4
    out = m(y) + Scaled.twice(x) + m.apply(x)
    return out * m.calls + (1.0 if m.kind == "base" else 0.0)


def p_classmethod(T, x, y):
    m = Scaled.make(x)
    return m(y) + type(m).factor + isinstance(m, Base)


def _fill(o, x):
    o.extras.append(x.exp())
    setattr(o, "logits", getattr(o, "loss") * x)  # noqa: B009, B010 - the builtins
    return hasattr(o, "missing"), hasattr(o, "logits")


def p_object_in_function(T, x, y):
    o = Out(x.sum())
    flags = _fill(o, y)
    return o.logits + o.extras[0] + sum(flags)


def p_frozen(T, x, y):
    f = Frozen(x, 3.0)
    caught = 0.0
    try:
        f.k = 5.0
    except dataclasses.FrozenInstanceError:
        caught = 1.0
    return f.scaled() + Frozen(y).scaled() + caught


def p_own_setattr(T, x, y):
    t = Tracked(x)
    t.w = y * 2
    setattr(t, "v", t.v + t.w)  # noqa: B010 - the builtin, through __setattr__
    LOG.append(tuple(t.names))
    return t.v


def p_cycle(T, x, y):
    a, b = Base(x), Base(y)
    a.peer, b.peer = b, a
    a.me = a
    return a, a.peer.peer.me.w + b.w


def p_object_at_break(T, x, y):
    o = Out(x.sum(), y)
    alias = o
    T._dynamo.graph_break()
    alias.loss = alias.loss * 2
    return o.loss + o.logits + (o is alias)


def p_object_stored_outside(T, x, y):
    HOLDER.last = Out(x.mean(), y)
    return HOLDER.last.logits * 2


def p_break_in_method(T, x, y):
    c = Counter2(x)
    total = c.bump(T, y)
    return c.w * c.calls + total


def p_init_error_caught(T, x, y):
    try:
        Scaled(x)  # a missing argument: TypeError from the call
    except TypeError as e:
        LOG.append(str(e))
    o = Out(x, y)
    return o.logits + (type(o) is Out) + isinstance(o, Out) + (o.__class__ is Out)


def p_missing_attribute(T, x, y):
    o = Out(x)
    try:
        return o.nothing
    except AttributeError as e:
        LOG.append(str(e))
        return x + 1


def p_init_raises(T, x, y):
    return D.transforms.ExpTransform(cache_size=2)(x)


def p_slots(T, x, y):
    s = Slotted(x)
    return s.v * 2


def p_hf_output(T, x, y):
    out = HFOut(logits=y * 2)
    out.loss = x.sum()  # not an item yet: an attribute only
    first = out[0] + out["logits"] + len(out) + len(out.to_tuple()) + bool(out)
    out["loss"] = out.loss * 3  # an item, and the attribute with it
    keys = list(out.keys())
    return first + out.loss + sum(1 for _ in out) + (keys == ["logits", "loss"])


def p_hf_return(T, x, y):
    return HFOut(loss=(x * y).sum(), logits=y)


def p_namedtuple(T, x, y):
    p = Pair(x + 1, b=y)
    q = Pair(p.a, p.b * 2)
    return q.a * q.b + len(q) + q[0]


def p_normal(T, x, y):
    h = _linear(T, x)
    mu, log_std = h.chunk(2, -1)
    d = D.Normal(mu, log_std.exp())
    return d.log_prob(y[:, :3]).sum() + D.kl_divergence(d, D.Normal(0.0, 1.0)).sum() + \
        d.entropy().sum() + d.mean.sum() + d.stddev.sum()


def p_rsample(T, x, y):
    d = D.Normal(x, y.exp())
    z = d.rsample()
    return d.log_prob(z).sum() + z.sum()


def p_categorical(T, x, y):
    d = D.Categorical(logits=_linear(T, x))
    return d.log_prob(T.arange(x.shape[0]) % 6).sum() + d.entropy().sum() + d.probs.sum()


def p_bernoulli(T, x, y):
    d = D.Bernoulli(logits=x)
    return d.log_prob((y > 0).float()).sum() + d.entropy().sum()


def p_independent(T, x, y):
    d = D.Independent(D.Normal(y, y.exp()), 1)
    return d.log_prob(x * 0.5).sum() + d.entropy().sum()


def p_mvn(T, x, y):
    n = x.shape[-1]
    d = D.MultivariateNormal(y.mean(0), scale_tril=T.eye(n) * y.exp()[0])
    return d.log_prob(x).sum() + d.entropy()


def p_transformed(T, x, y):
    d = D.TransformedDistribution(D.Normal(x, 1.0), [D.transforms.ExpTransform()])
    return d.log_prob(y.exp()).sum() + d.rsample().sum()


def p_weakref(T, x, y):
    a = Base(x)
    ref = weakref.ref(a)
    a.ref = ref
    return a.ref().w * 2 + (ref() is a)


def p_validated(T, x, y):
    d = D.Normal(x, y.exp(), validate_args=True)
    return d.log_prob(y).sum()


def p_invalid(T, x, y):
    return D.Normal(x, -y.exp(), validate_args=True).log_prob(y).sum()


PROGRAMS = {name[2:]: f for name, f in globals().items() if name.startswith("p_")}
# An object that lives across a graph break is a real one afterwards, which the resumed
# code's guards check by identity: each call's new object compiles again (not yet as
# torch.compile, which guards such an object by its type and attributes).
NEW_OBJECT_AFTER_BREAK = {"object_at_break", "validated", "break_in_method"}
# Programs capture follows whole: one graph each (as torch.compile makes).
ONE_GRAPH = {"dataclass_return", "dataclass_mutate", "post_init", "plain_class",
             "classmethod", "object_in_function", "object_stored_outside", "normal",
             "frozen", "own_setattr", "transformed", "hf_output", "hf_return", "namedtuple",
             "rsample", "categorical", "bernoulli", "independent", "mvn"}


# kl_divergence memoises its dispatch on the pair of types: the first call (which sorts
# candidate pairs with `min` over `_Match` objects) is a graph break, as the memo's write is;
# warm, it is one dict read, guarded.
D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(0.0, 1.0))


def _inputs(rows: int, seed: int):
    rng = np.random.default_rng(seed)
    return [fg.tensor(rng.standard_normal((rows, 4)).astype(np.float32), requires_grad=True)
            for _ in range(2)]


def _flat(value):
    """The tensors of a result (an object's attributes in order), and its structure."""
    if isinstance(value, fg.Tensor):
        return [value], "tensor"
    if isinstance(value, tuple):  # (object, tensor): the object's links and the tensor
        obj, t = value
        links = (obj.me is obj, obj.peer.peer is obj, type(obj.peer))
        return [t], (type(obj), links)
    if dataclasses.is_dataclass(value):
        items = [getattr(value, f.name) for f in dataclasses.fields(value)]
        tensors = [t for t in items if isinstance(t, fg.Tensor)]
        if isinstance(value, dict):  # its items are the same tensors, in its own order
            assert all(value[k] is getattr(value, k) for k in value)
        return tensors, (type(value), [type(t) for t in items], sorted(vars(value)),
                         list(value) if isinstance(value, dict) else None)
    raise AssertionError(type(value))


def _run(fn, rows: int, seed: int):
    """(result tensors, structure, gradients, error, log, the holder's attribute)."""
    LOG.clear()
    HOLDER.__dict__.clear()
    fg.manual_seed(seed)
    args = _inputs(rows, seed)
    try:
        result = fn(*args)
    except Exception as e:  # compared by type and message (not a tensor's grad_fn name)
        return None, None, None, (type(e).__name__, str(e).split("\n")[0]), list(LOG), None
    tensors, structure = _flat(result)
    total = sum(t.float().sum() for t in tensors if t.requires_grad)
    if isinstance(total, fg.Tensor):
        total.backward()
    grads = [None if a.grad is None else a.grad.numpy() for a in args]
    held = getattr(HOLDER, "last", None)
    held = None if held is None else (type(held), [
        v.detach().numpy() if isinstance(v, fg.Tensor) else v for v in vars(held).values()])
    return [t.detach().numpy() for t in tensors], structure, grads, None, list(LOG), held


def _same(got, want) -> None:
    values, structure, grads, error, log, held = got
    assert error == want[3]
    assert log == want[4]
    if error is not None:
        return
    assert structure == want[1]
    tol = {k: max(v, 1e-6) for k, v in tolerances(fg.float32).items()}
    for a, b in zip(values, want[0], strict=True):
        np.testing.assert_allclose(a, b, **tol)
    for a, b in zip(grads, want[2], strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, **tol)
    assert (held is None) == (want[5] is None)
    if held is not None:
        assert held[0] is want[5][0]
        for a, b in zip(held[1], want[5][1], strict=True):
            np.testing.assert_allclose(a, b, **tol)


@pytest.fixture(autouse=True)
def _no_default_validation():
    """Validation off by default, as torch.compile leaves it (its data-dependent checks
    would break every graph); `validated`/`invalid` ask for it."""
    before = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(False)
    yield
    D.Distribution.set_default_validate_args(before)


@pytest.fixture(autouse=True)
def _fresh_recompile_limits():
    """A reset before each test: the cases share functions (one code object each), whose
    recompile limit all their compiled wrappers share, as in torch."""
    fg._dynamo.reset()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_object_program_compiled_equals_eager(name):
    prog = PROGRAMS[name]

    def fn(x, y):
        return prog(fg, x, y)

    counter = Counter()
    compiled = fg.compile(fn, backend=counter)
    for rows, seed in ((4, 0), (4, 1), (5, 2)):  # a new shape: guards, then a new graph
        _same(_run(compiled, rows, seed), _run(fn, rows, seed))
        if rows == 4 and seed == 0:
            first = counter.graphs
    if CAPTURES and name in ONE_GRAPH:
        assert first == 1, f"{first} graphs (graph breaks)"
    if CAPTURES and name not in NEW_OBJECT_AFTER_BREAK:
        assert counter.graphs <= 2 * max(first, 1), "recompiled on the same shape"


def test_returned_object_is_new_on_every_call():
    compiled = fg.compile(lambda x, y: p_dataclass_return(fg, x, y), backend=Counter())
    x, y = _inputs(4, 0)
    a, b = compiled(x, y), compiled(x, y)
    assert type(a) is Out and a is not b and a.extras is not b.extras
    assert list(vars(a)) == ["loss", "logits", "extras"]


def test_class_attribute_change_recompiles():
    def fn(x, y):
        m = Scaled(x, y.sum())
        return m(y)

    counter = Counter()
    compiled = fg.compile(fn, backend=counter)
    x, y = _inputs(4, 0)
    before = compiled(x, y).detach().numpy()
    Scaled.factor = 5.0
    try:
        after = compiled(x, y).detach().numpy()
        np.testing.assert_allclose(after, fn(x, y).detach().numpy(),
                                   **tolerances(fg.float32))
    finally:
        Scaled.factor = 3.0
    assert not np.allclose(before, after)
    if CAPTURES:
        assert counter.graphs == 2


def test_explain_counts_one_graph_for_a_distribution():
    if not CAPTURES:
        pytest.skip("capture runs on CPython 3.11-3.13")
    x, y = _inputs(4, 0)
    out = fg._dynamo.explain(lambda x, y: p_normal(fg, x, y))(x, y)
    assert (out.graph_count, out.graph_break_count) == (1, 0), out.break_reasons


def test_compile_switches_default_validation_off(monkeypatch):
    """The first `compile` of a process switches argument validation off, as torch.compile
    does (`Normal(0., -1.)` then constructs; torch 2.13 behaves so after its first compile);
    `validate_args=True` still checks."""
    from fusegrad import compiler

    monkeypatch.setitem(compiler._VALIDATION, "switched", False)
    D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    fg.compile(lambda x: x + 1)
    assert D.Distribution._validate_args is False
    D.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0, validate_args=True)
