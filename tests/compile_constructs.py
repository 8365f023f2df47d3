"""Programs for test_compile_constructs.py, one Python construct each (kept out of the test
module so that pytest does not rewrite their `assert` statements), and the recording of
torch.compile's graph and op counts for them (needs torch; run on CPython 3.11):

    python tests/compile_constructs.py --record   # rewrites compile_constructs_torch.json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from compile_support import Counter, tolerances  # noqa: E402

TABLE = Path(__file__).with_name("compile_constructs_torch.json")
LOG: list = []  # side effects programs leave (compared eager vs compiled)


class Base:
    def scale(self, x):
        return x * 2

    def shift(self, x, k=1.0):
        return x + k


class Child(Base):
    factor = 3.0

    def scale(self, x):
        return super().scale(x) + 1

    def shift(self, x, k=1.0):
        return super().shift(x, k * 2) * self.factor


CHILD = Child()


class Oops(Exception):
    """A user exception class with nothing but a docstring."""


class Depth:
    """A context manager written in Python that counts how deep it is entered and what
    left it."""

    def __init__(self):
        self.depth = 0
        self.last_exit = None

    def __enter__(self):
        self.depth += 1
        return self

    def __exit__(self, kind, value, tb):
        self.depth -= 1
        self.last_exit = None if kind is None else kind.__name__
        return False


DEPTH = Depth()


# ---------------------------------------------------------------- assert


def p_assert_true_shape(T, a, b):
    assert a.shape[0] == 4, "rows"
    return a * 2 + b


def p_assert_true_no_message(T, a, b):
    assert a.dim() == 2
    return a.sin() + b


def p_assert_false_shape(T, a, b):
    y = a * 2
    assert a.shape[0] == 5, f"expected 5 rows, got {a.shape[0]}"
    return y


def p_assert_block_size(T, a, b):
    t = a.size(1)
    assert t <= 8, f"Cannot forward sequence of length {t}, block size is only 8"
    return (a @ b).softmax(-1)


def p_assert_isinstance(T, a, b):
    assert isinstance(a, T.Tensor) and not isinstance(b, (list, tuple))
    return a * b


def p_assert_tensor_true(T, a, b):
    assert (a.abs() >= 0).all(), "negative absolute value"
    return a + b


def p_assert_tensor_false(T, a, b):
    assert (a > 100).all(), "values too small"
    return a + b


def _checked_double(x):
    assert x.dim() == 2, "2-d only"
    return x * 2


def p_assert_in_helper(T, a, b):
    return _checked_double(a) + _checked_double(b)


def exp_at_least_half(a):
    """An assert on a tensor (used by test_compile_bytecode_versions.py)."""
    y = a.exp()
    assert (y > 0.5).all(), "too small"
    return y * 2


# ---------------------------------------------------------------- raise


def p_raise_not_taken(T, a, b):
    if a.shape[0] > 10:
        raise ValueError("too many rows")
    return a * b


def _check_rows(x):
    if x.shape[0] != 4:
        raise ValueError(f"bad rows {x.shape[0]}")
    return x


def p_raise_not_taken_in_helper(T, a, b):
    return _check_rows(a).relu() + _check_rows(b)


def p_raise_taken(T, a, b):
    y = a + b
    if a.shape[0] == 4:
        raise ValueError(f"rows {a.shape[0]}")
    return y


def p_raise_caught(T, a, b):
    try:
        raise ValueError("handled")
    except ValueError:
        y = a * 2
    return y + b


def _lookup(d, k):
    if k not in d:
        raise KeyError(k)
    return d[k]


def p_raise_caught_from_helper(T, a, b):
    try:
        v = _lookup({"x": a}, "y")
    except KeyError:
        v = b * 3
    return v + a


def p_raise_user_exception_caught(T, a, b):
    try:
        raise Oops("mine")
    except Oops as e:
        y = a * len(str(e))
    return y - b


def p_raise_from(T, a, b):
    try:
        raise KeyError("inner")
    except KeyError as e:
        raise RuntimeError("wrapped") from e


def p_raise_bare_reraise(T, a, b):
    try:
        raise ValueError("again")
    except ValueError:
        raise


def p_raise_class_caught(T, a, b):
    try:
        raise IndexError
    except (KeyError, IndexError):
        y = a.tanh()
    return y * b


# ---------------------------------------------------------------- try / except / finally


def p_try_no_exception(T, a, b):
    try:
        y = a * 2
    except RuntimeError:
        y = a
    return y + b


def p_try_finally_no_exception(T, a, b):
    try:
        y = a * 2
    finally:
        z = b + 1
    return y + z


def p_try_else(T, a, b):
    try:
        y = a.relu()
    except ValueError:
        y = a
    else:
        y = y * 3
    return y + b


def p_try_key_error(T, a, b):
    d = {"x": a}
    try:
        v = d["y"]
    except KeyError:
        v = b
    return v + a


def p_try_index_error(T, a, b):
    xs = [a, b]
    try:
        z = xs[5]
    except IndexError:
        z = a * 4
    return z + b


def p_try_nested(T, a, b):
    try:
        try:
            raise ValueError("inner")
        except KeyError:
            y = a
    except ValueError:
        y = b * 2
    return y + a


def p_try_finally_with_exception(T, a, b):
    y = a
    try:
        try:
            raise ValueError("v")
        finally:
            y = a * 3
    except ValueError:
        y = y + b
    return y


def p_try_in_loop(T, a, b):
    acc = a * 0
    for i in range(3):
        try:
            if i == 1:
                raise ValueError(i)
            acc = acc + a * i
        except ValueError:
            acc = acc - b
    return acc


def p_try_exception_message(T, a, b):
    try:
        int("not a number")
    except ValueError as e:
        n = len(str(e))
    return a * n + b


def p_try_finally_return(T, a, b):
    try:
        return a * b
    finally:
        LOG.append("finally")


# ---------------------------------------------------------------- with


def p_with_user_context(T, a, b):
    with DEPTH as d:
        y = a * (d.depth + 1)
    return y + b * DEPTH.depth


def p_with_user_context_exception(T, a, b):
    try:
        with DEPTH:
            raise KeyError("inside")
    except KeyError:
        y = a * 2
    return y + b * len(DEPTH.last_exit)


def p_with_no_grad_and_try(T, a, b):
    with T.no_grad():
        try:
            raise ValueError("inside")
        except ValueError:
            s = (a * 2).sum()
    return b * s + a


# ---------------------------------------------------------------- closures writing cells


def p_cell_nonlocal_counter(T, a, b):
    n = 0

    def inc():
        nonlocal n
        n += 1

    inc()
    inc()
    return a * n + b


def p_cell_nonlocal_tensor(T, a, b):
    acc = a * 0

    def add(x):
        nonlocal acc
        acc = acc + x

    add(a)
    add(b.exp())
    return acc


def p_cell_late_binding(T, a, b):
    fns = []
    for i in range(3):
        fns.append(lambda x: x * i)  # noqa: B023 (every lambda sees the last i, on purpose)
    out = b
    for f in fns:
        out = out + f(a)
    return out


def p_cell_rebound_before_call(T, a, b):
    s = 1.0
    g = lambda x: x * s  # noqa: E731
    s = 3.0
    return g(a) + b


def p_cell_argument(T, a, b):
    def g():
        return a.cos() * 2

    return g() + b


# ---------------------------------------------------------------- generator expressions


def p_gen_sum_tensors(T, a, b):
    return sum(x * 2 for x in (a, b))


def p_gen_tuple(T, a, b):
    parts = tuple(x.relu() for x in [a, b])
    return parts[0] + parts[1]


def p_gen_all_isinstance(T, a, b):
    if all(isinstance(x, T.Tensor) for x in (a, b)):
        return a + b
    return a


def p_gen_any_shapes(T, a, b):
    if any(x.shape[0] > 3 for x in (a, b)):
        return a * b
    return a - b


def p_gen_closure(T, a, b):
    k = 3
    return sum(x * k for x in [a, b])


def p_gen_max_sizes(T, a, b):
    m = max(x.size(0) for x in (a, b))
    return a * m


def p_gen_unpack(T, a, b):
    q, k, v = (t.transpose(1, 0) for t in (a, b, a * b))
    return q @ k + v


def p_gen_unpack_star(T, a, b):
    first, *rest = (t * 2 for t in (a, b, a - b))
    return first + rest[0] * rest[1]


def p_gen_list(T, a, b):
    parts = list(t.sin() for t in (a, b))
    return parts[0] * parts[1]


def p_gen_dict(T, a, b):
    named = dict((f"t{i}", t.exp()) for i, t in enumerate((a, b)))
    return named["t0"] - named["t1"]


def p_gen_min_sorted(T, a, b):
    smallest = min(t.dim() for t in (a, b))
    sizes = sorted(t.size(1) for t in (a, b))
    return a * smallest + b * sizes[-1]


def p_gen_join(T, a, b):
    name = "x".join(str(t.shape[0]) for t in (a, b))
    return a * len(name)


def p_gen_for_loop(T, a, b):
    total = a
    for t in (x.cos() for x in (a, b)):
        total = total * t
    return total


def p_list_concat_tensors(T, a, b):
    parts = [a * i for i in range(2)]
    both = parts + [b] + [a.exp()]
    return T.cat(both) if len(both) == 4 else a


def p_list_iadd_tensors(T, a, b):
    parts = [a.sin()]
    alias = parts
    parts += [b, a * b]
    pair = (a.cos(),) + (b,)
    return T.stack(alias).sum(0) + pair[0] if len(parts) == 3 else a


# ---------------------------------------------------------------- super()


def p_super_zero_arg(T, a, b):
    return CHILD.scale(a) + b


def p_super_two_arg(T, a, b):
    return CHILD.shift(a, 0.5) * b


def p_super_module_forward(T, a, b):
    return _module(T, "super")(a) + b


# ---------------------------------------------------------------- import


def p_import_module(T, a, b):
    import math

    return a * math.pi + b


def p_import_from(T, a, b):
    from math import sqrt

    return a * sqrt(4.0) - b


def p_import_as(T, a, b):
    import os.path as osp

    return a * len(osp.basename("dir/name")) + b


# ---------------------------------------------------------------- unpacking, set literals


def p_star_unpack_rest(T, a, b):
    first, *rest = [a, b, a * b]
    return first + rest[1]


def p_star_unpack_middle(T, a, b):
    x, *mid, y = (a, b, a, b)
    return x * y + len(mid)


def p_set_literal(T, a, b):
    s = {1, 2, 3}
    return a * len(s) + (b if 2 in s else a)


def p_set_literal_strings(T, a, b):
    modes = {"train", "eval"}
    return a * 2 if "train" in modes else b


def p_hasattr_tensor(T, a, b):
    c = a * 2
    if hasattr(a, "grad") and hasattr(c, "shape") and not hasattr(c, "no_such_attribute"):
        return c + b
    return a


# ---------------------------------------------------------------- modules


def p_modules_enumerate(T, a, b):
    x = a
    for i, m in enumerate(_module(T, "seq")):
        x = m(x) * (i + 1)
    return x + b


def p_modules_items_isinstance(T, a, b):
    x = a
    for name, m in _module(T, "dict").items():
        if isinstance(m, T.nn.Linear) and hasattr(m, "weight"):
            x = m(x)
        elif name == "act":
            x = m(x)
    return x + b


def p_modules_zip(T, a, b):
    x = a
    for m, s in zip(_module(T, "seq"), (1.0, 0.5)):
        x = m(x) * s
    return x + b


def p_modules_named_children(T, a, b):
    x = a
    for name, m in _module(T, "seq").named_children():
        x = m(x) if name != "1" else x + m(x)
    return x * b


def p_modules_parameters_generator(T, a, b):
    penalty = sum(p.pow(2).sum() for p in _module(T, "seq").parameters())
    return _module(T, "seq")(a) * penalty + b


def p_modules_named_parameters_loop(T, a, b):
    x = a
    for name, p in _module(T, "dict").named_parameters():
        if name.endswith("bias"):
            x = x + p
    return x * b


# ---------------------------------------------------------------- the harness

_MODULES: dict = {}


def _module(T, kind):
    """The same small module for each framework (built by `_build_modules`)."""
    return _MODULES[T.__name__][kind]


def _build_modules(T) -> None:
    """Small modules for framework `T`, with weights from one seed."""
    if T.__name__ in _MODULES:
        return
    nn = T.nn

    class Scaled(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 0.5

    mods = {"super": Scaled(4, 4), "seq": nn.Sequential(nn.Linear(4, 4), nn.Tanh()),
            "dict": nn.ModuleDict({"lin": nn.Linear(4, 4), "act": nn.ReLU()})}
    rng = np.random.default_rng(1)
    for mod in mods.values():
        mod.load_state_dict({k: T.tensor(rng.standard_normal(tuple(v.shape)).astype(np.float32))
                             for k, v in mod.state_dict().items()})
    _MODULES[T.__name__] = mods


PROGRAMS = {k[2:]: v for k, v in sorted(globals().items()) if k.startswith("p_")}


def run(T, fn):
    """Call `fn(x, y)` once on fresh tensors: (output, gradients, error, side effects)."""
    _build_modules(T)
    LOG.clear()
    rng = np.random.default_rng(0)
    args = [T.tensor(rng.standard_normal((4, 4)).astype(np.float32), requires_grad=True)
            for _ in range(2)]
    try:
        out = fn(*args)
    except Exception as e:  # compared by type, message and cause
        cause = type(e.__cause__).__name__ if e.__cause__ is not None else None
        return None, None, (type(e).__name__, str(e), cause), list(LOG)
    out.sum().backward()
    grads = [None if a.grad is None else a.grad.numpy() for a in args]
    return out.detach().numpy(), grads, None, list(LOG)


def same(got, want) -> None:
    out, grads, error, log = got
    assert error == want[2]
    assert log == want[3]
    if want[0] is None:
        return
    tol = {"rtol": 1e-6, "atol": 1e-6}
    if out.dtype == np.float32:
        tol = {k: max(v, tolerances(out.dtype)[k]) for k, v in tol.items()}
    np.testing.assert_allclose(out, want[0], **tol)
    for g1, g2 in zip(grads, want[1]):
        assert (g1 is None) == (g2 is None)
        if g1 is not None:
            np.testing.assert_allclose(g1, g2, **tol)


def torch_counts() -> dict:
    """torch.compile's graph and op counts per program, as recorded."""
    return json.loads(TABLE.read_text()) if TABLE.exists() else {}


def record() -> None:
    """Count torch.compile's graphs and ops for every program (needs torch)."""
    import torch

    table = {}
    for name, prog in sorted(PROGRAMS.items()):
        torch._dynamo.reset()
        counter = Counter()
        run(torch, torch.compile(lambda x, y, p=prog: p(torch, x, y), backend=counter))
        table[name] = {"graphs": counter.graphs, "ops": counter.ops}
    TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(json.dumps(table, indent=1, sort_keys=True))


if __name__ == "__main__":
    if "--record" in sys.argv:
        record()
