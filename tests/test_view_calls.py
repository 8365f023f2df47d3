"""`x[i]` and `x.view(shape)` made and recorded in one frame (`ops/_view_calls.py`): the
result and its Node are what dispatch's recorders make, in every grad state, and the edges
of the short path (signs, bounds, 0-d, index types, views of views, in-place writes through
and under the view, no_grad and inference views, modes and subclasses) behave as PyTorch's.
"""

from __future__ import annotations

import contextlib
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad import _dispatch  # noqa: E402
from fusegrad.ops import views as V  # noqa: E402

DATA = np.arange(1.0, 13.0, dtype=np.float32).reshape(3, 4) / 7

# ------------------------------------------------------------ the same result and Node


def _inputs():
    """name -> a function making the indexed tensor (fusegrad)."""
    def leaf(rg=True, data=DATA):
        return fusegrad.tensor(data.copy(), requires_grad=rg)

    return {
        "leaf": lambda: leaf(),
        "no grad": lambda: leaf(False),
        "non-leaf": lambda: leaf() * 2.0,
        "view of a leaf": lambda: leaf()[1:],
        "view of a view": lambda: (leaf() * 1.0).view(12).view(2, 6),
        "1-d": lambda: leaf().view(12),
        "int": lambda: fusegrad.tensor(np.arange(12).reshape(3, 4)),
        "complex": lambda: fusegrad.tensor(DATA.astype(np.complex64), requires_grad=True),
    }


def _states():
    """name -> a context manager factory (fusegrad)."""
    return {
        "grad": contextlib.nullcontext,
        "no_grad": fusegrad.no_grad,
        "inference": fusegrad.inference_mode,
        "saved hooks": lambda: fusegrad.autograd.graph.saved_tensors_hooks(
            lambda t: t, lambda t: t),
        "anomaly": fusegrad.autograd.detect_anomaly,
    }


def _facts(t, general=False):
    """Everything a result and its Node hold, nodes by type and identity of what is shared."""
    slots = {s: getattr(t, s) for s in fusegrad._tensor.STATE_SLOTS}
    data = slots.pop("_data")
    fn = slots.pop("_grad_fn")
    facts = [data.shape, data.strides, data.dtype, np.shares_memory(data, t._base._data)
             if t._base is not None else None, sorted(slots.items(), key=lambda kv: kv[0])]
    if fn is not None:
        x = fn._x
        facts.append((
            type(fn).__name__,
            tuple((type(f).__name__ if f is not None else None, nr)
                  for f, nr in fn.next_functions),
            fn._in_meta, fn._pos, fn._out_meta, fn._saved, fn._versions,
            None if x is None else sorted(x.metadata)))
    return facts


def _compare(short, general, chained=False):
    """Both ways of making the view give equal results, with the shared objects shared
    (`chained`: the edge is a node the call made itself, one per call)."""
    a, b = _facts(short), _facts(general)
    assert a[:4] == b[:4]
    slots_a, slots_b = dict(a[4]), dict(b[4])
    assert slots_a.keys() == slots_b.keys()
    for k in slots_a:
        if k in ("_vc", "_base"):
            assert slots_a[k] is slots_b[k], k
        else:
            assert slots_a[k] == slots_b[k], k
    assert a[5:] == b[5:]
    if short._grad_fn is not None and not chained:
        for (f, _), (g, _) in zip(short._grad_fn.next_functions,
                                  general._grad_fn.next_functions):
            assert f is g  # the same edge: the input's node, or its live accumulator


def _select_each(x, index):
    for i in index:
        x = _dispatch.call(V.select, x, 0, i)
    return x


def _ints(x):
    return (1, -1)[:x.dim()]  # `x[1, -1]`, or `x[1]` of a 1-d tensor


CALLS = {
    "x[i, j]": (lambda x: x[_ints(x)], lambda x: _select_each(x, _ints(x))),
    "x[i]": (lambda x: x[1], lambda x: _dispatch.call(V.select, x, 0, 1)),
    "x[-1]": (lambda x: x[-1], lambda x: _dispatch.call(V.select, x, 0, -1)),
    "x[0]": (lambda x: x[0], lambda x: _dispatch.call(V.select, x, 0, 0)),
    "x.view(n)": (lambda x: x.view(x.numel()),
                  lambda x: _dispatch.call(V.view, x, (x.numel(),))),
    "x.view(-1)": (lambda x: x.view(-1), lambda x: _dispatch.call(V.view, x, (-1,))),
    "x.view(a, b)": (lambda x: x.view(2, -1), lambda x: _dispatch.call(V.view, x, (2, -1))),
}


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("state", list(_states()))
@pytest.mark.parametrize("source", list(_inputs()))
def test_short_path_makes_what_dispatch_makes(call, state, source):
    short_of, general_of = CALLS[call]
    x = _inputs()[source]()
    accounted = []
    fusegrad._tensor.watch_new_tensors("test", lambda t: accounted.append(t._data))
    try:
        _run_both(short_of, general_of, x, call, state)
    finally:
        fusegrad._tensor.watch_new_tensors("test", None)
    views = 8 if call == "x[i, j]" and x.dim() > 1 else 4  # each storage accounted once
    assert len(accounted) == views and all(a.base is not None for a in accounted)


def _run_both(short_of, general_of, x, call, state) -> None:
    with _states()[state]():
        for first_short in (True, False):  # each first: a new accumulator, then the live one
            if first_short:
                short = short_of(x)
                general = general_of(x)
            else:
                general = general_of(x)
                short = short_of(x)
            _compare(short, general, chained=call == "x[i, j]")
            del short, general


# ------------------------------------------------------------ behaviour beside PyTorch

EXPRESSIONS = [
    "x[0]", "x[2]", "x[-1]", "x[-3]", "x[3]", "x[-4]", "x[5]", "x[np.int64(1)]",
    "x[1][2]", "x[-1][-1]", "x[0, 1]", "x[2, -4]", "x[0, 9]", "x[-4, 0]", "x[1, 2, 3]",
    "v[0]", "v[11]", "v[12]", "z[0]", "z[1]", "z[-1]",
    "x.view(12)", "x.view(-1)", "x.view(2, 6)", "x.view(6, -1)", "x.view(-2)",
    "x.view(-2, 6)", "x.view(-1, -1)", "x.view(5)", "x.t().view(12)", "x.view(np.int64(12))",
    "e.view(-1)", "e.view(0, -1)", "e.view(3, 0)", "x[1].view(2, 2)", "x.view(12)[3]",
    "x.t()[1]", "x.t().view(4, 3)[0]", "x.view(3, 4)",
    # PyTorch names the index's position in its out-of-bounds message.
    "t[0, 9]", "t[None, 0, 9]", "t[..., 9]", "t[0, ..., 9]", "t[0, :, 7]", "t[1, 2, 4]",
    "t[0, None, None, 1, 9]", "t[[0, 1], 9]", "t[0, [1], 7]", "t[..., [0], 9]", "t[1, -3, -4]",
]


def _run(mod, expr):
    x = mod.tensor(DATA.copy(), requires_grad=True)
    names = {"x": x, "v": x.view(12), "z": mod.tensor(1.5, requires_grad=True),
             "e": mod.zeros(0, 3, requires_grad=True), "np": np,
             "t": mod.arange(24.0).reshape(2, 3, 4).requires_grad_()}
    try:
        y = eval(expr, names)  # noqa: S307 - the expressions above
    except Exception as e:  # noqa: BLE001 - the error is the result compared
        return ("error", type(e).__name__, str(e))
    fn = y.grad_fn
    facts = (tuple(y.shape), y.detach().numpy().copy(), type(fn).__name__ if fn else None,
             y._base is not None, y.requires_grad, y.is_contiguous())
    if y.numel():
        (y * mod.arange(1.0, y.numel() + 1.0).reshape(y.shape)).sum().backward()
        facts += tuple(None if names[n].grad is None else names[n].grad.numpy().copy()
                       for n in ("x", "z", "e", "t"))
    return facts


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_views_and_their_errors_match_pytorch(expr):
    ours, theirs = _run(fusegrad, expr), _run(torch, expr)
    assert len(ours) == len(theirs), (ours, theirs)
    for a, b in zip(ours, theirs):
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            np.testing.assert_allclose(a, b, rtol=1e-6)
        else:
            assert a == b


def _inplace_histories(mod, make_view):
    """Write into a view (the base's history becomes CopySlices, the view's an as_strided of
    it), then into the base (the view's history follows the base's new one)."""
    x = mod.tensor(DATA.copy(), requires_grad=True)
    base = x * 1.0
    v = make_view(base)
    v.mul_(3.0)
    names = (type(base.grad_fn).__name__, type(v.grad_fn).__name__, base._version, v._version)
    w = make_view(base)
    base.add_(1.0)
    y = (v * 2.0).sum() + (w * 5.0).sum() + base.sum()
    y.backward()
    return names + (type(w.grad_fn).__name__, w._version, x.grad.numpy().copy())


@pytest.mark.parametrize("make_view", [
    lambda b: b[1], lambda b: b[-1], lambda b: b.view(12), lambda b: b.view(2, 6)[1],
    lambda b: b[2][3],
], ids=["x[1]", "x[-1]", "view(12)", "view(2, 6)[1]", "x[2][3]"])
def test_in_place_writes_through_and_under_views_match_pytorch(make_view):
    ours, theirs = _inplace_histories(fusegrad, make_view), _inplace_histories(torch, make_view)
    assert ours[:-1] == theirs[:-1]
    np.testing.assert_allclose(ours[-1], theirs[-1])


def _grad_mode_views(mod):
    x = mod.tensor(DATA.copy(), requires_grad=True)
    base = x * 1.0
    out = []
    with mod.no_grad():
        v, w = base[1], base.view(12)
    out += [v.grad_fn, w.grad_fn, v._base is base, w._base is base]
    for t in (v, w):
        try:
            t.mul_(2.0)
        except RuntimeError as e:
            out.append(str(e))
    d = x.detach()
    with mod.inference_mode():
        i, j = d[0], d.view(12)
        out += [i.requires_grad, j.requires_grad, i.grad_fn, j.grad_fn, i._base is d]
    k = d[2]
    k.add_(1.0)  # the version counter is the base's
    out += [d._version, k._version, x._version, i._version, j._version]
    return out


def test_no_grad_and_inference_views_match_pytorch():
    assert _grad_mode_views(fusegrad) == _grad_mode_views(torch)


def _protocol_calls(mod):
    seen = []

    class Logged(mod.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", repr(func)))
            return super().__torch_function__(func, types, args, kwargs or {})

    s = mod.tensor(DATA.copy()).as_subclass(Logged)
    r = [type(s[1]).__name__, type(s.view(12)).__name__, type(s[0, 1]).__name__]
    log_subclass = list(seen)

    class Mode(mod.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", repr(func)))
            return func(*args, **(kwargs or {}))

    seen.clear()
    x = mod.tensor(DATA.copy(), requires_grad=True)
    with Mode():
        y = x[1]
        w = x.view(12)
    return r, log_subclass, list(seen), type(y.grad_fn).__name__, type(w.grad_fn).__name__


def test_subclasses_and_modes_see_the_calls_as_in_pytorch():
    assert _protocol_calls(fusegrad) == _protocol_calls(torch)


def test_profiler_sees_select_and_view():
    """Under a dispatch mode (the profiler) the short path hands the call to dispatch."""
    names = {}
    for mod in (fusegrad, torch):
        x = mod.tensor(DATA.copy(), requires_grad=True)
        with mod.profiler.profile() as prof:
            x[1]
            x.view(12)
        keys = {e.key for e in prof.key_averages()}
        names[mod.__name__] = {"aten::select", "aten::view"} & keys
    assert names["fusegrad"] == names["torch"] == {"aten::select", "aten::view"}
