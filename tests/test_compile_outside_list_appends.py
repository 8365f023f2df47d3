"""`append`/`extend` on lists from outside a compiled frame (a global log, an argument, a
forward hook's closure list) are recorded and replayed on the real list after the graph,
without guarding the list's length (so a list that grows on every call does not recompile);
any other read of such a list after an append is a graph break. Compiled against eager, on
every backend, over several calls (no torch needed)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

BACKENDS = ["eager", "aot_eager", "inductor"]
LOG: list = []


def _log_loop(x):
    for i in range(2):
        LOG.append(i)
        x = x * 2
    return x


def _append_then_read(x):
    LOG.append(x.sum())
    return x * len(LOG)  # reads the list after the append: a break, then eager


def _alias(x):
    a = LOG
    LOG.append(x * 2)
    a.extend([x + 1, 3.5])
    return x - 1


def _argument(x, out):
    out.append(x * 2)
    out.extend((x + 1, "tag"))
    return x - 1, out


def _read_then_append(x, out):
    y = x * len(out)  # read first (guarded length), then an append: a break
    out.append(y)
    return y


def _inline_break(x, out):
    def helper(t):
        out.append(t * 3)
        print_value = t.sum().item()  # breaks inside the inlined call
        return t + print_value
    return helper(x * 2)


CASES = [("log_loop", _log_loop, False), ("append_then_read", _append_then_read, False),
         ("alias", _alias, False), ("argument", _argument, True),
         ("read_then_append", _read_then_append, True), ("inline_break", _inline_break, True)]


def _values(items):
    """Tensors (at any depth of lists and tuples) as nested lists of their values."""
    if isinstance(items, fg.Tensor):
        return np.round(items.detach().numpy(), 5).tolist()
    if isinstance(items, (list, tuple)):
        return [_values(v) for v in items]
    return items


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, fn, takes_list", CASES, ids=[c[0] for c in CASES])
def test_appends_replayed_as_eager(name, fn, takes_list, backend):
    fg._dynamo.reset()
    compiled = fg.compile(fn, backend=backend)
    eager_log, compiled_log, eager_out, compiled_out = [], [], [1.0], [1.0]
    for call in range(3):
        x = fg.arange(3.0) + call
        LOG[:] = eager_log
        want = fn(x, eager_out) if takes_list else fn(x)
        eager_log = list(LOG)
        LOG[:] = compiled_log
        got = compiled(x, compiled_out) if takes_list else compiled(x)
        compiled_log = list(LOG)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        assert _values(got) == _values(want)
        assert _values(compiled_log) == _values(eager_log)
        assert _values(compiled_out) == _values(eager_out)


def test_growing_list_does_not_recompile():
    fg._dynamo.reset()
    LOG.clear()
    counts = fg._dynamo.utils.counters
    counts.clear()
    compiled = fg.compile(_log_loop, backend="eager")
    for _ in range(5):
        compiled(fg.ones(2))
    assert LOG == [0, 1] * 5
    assert counts["stats"]["unique_graphs"] == 1 and not counts["graph_break"]


def test_forward_hook_collecting_features_compiles_in_one_graph():
    feats = []
    model = fg.nn.Sequential(fg.nn.Linear(4, 4), fg.nn.ReLU(), fg.nn.Linear(4, 2))
    model[0].register_forward_hook(lambda mod, inp, out: feats.append(out))
    x = fg.randn(3, 4)
    fg._dynamo.reset()
    explained = fg._dynamo.explain(model)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    feats.clear()
    compiled = fg.compile(model, backend="aot_eager")
    outs = [compiled(x) for _ in range(3)]
    assert len(feats) == 3
    want = model[0](x)
    for f, o in zip(feats, outs):
        np.testing.assert_allclose(f.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(o.detach().numpy(), model(x).detach().numpy(), rtol=1e-6)


# ---------------------------------------------------------------- checkpointed functions


class _Counter:
    n = 0


def _checkpoint_case(kind: str):
    """A function with an effect outside it, checkpointed: eager runs it again in the
    backward (the effect happens twice), so compiled code must run it eagerly too."""
    from fusegrad.utils.checkpoint import checkpoint

    counter, log = _Counter(), []
    bn = fg.nn.BatchNorm1d(3)

    def block(h):
        if kind == "counter":
            counter.n += 1
        elif kind == "append":
            log.append(1)
        else:
            h = bn(h)
        return h.sin() * h

    def f(x):
        return checkpoint(block, x, use_reentrant=False).sum()

    def state():
        return counter.n, len(log), int(bn.num_batches_tracked), \
            np.round(bn.running_mean.numpy(), 6).tolist()
    return f, state


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["counter", "append", "batch_norm"])
def test_checkpointed_side_effects_happen_as_eager(kind, backend):
    fg.manual_seed(0)
    x = fg.randn(4, 3)
    f, state = _checkpoint_case(kind)
    f(x.clone().requires_grad_()).backward()
    want = state()
    f, state = _checkpoint_case(kind)
    fg._dynamo.reset()
    fg.compile(f, backend=backend)(x.clone().requires_grad_()).backward()
    assert state() == want
