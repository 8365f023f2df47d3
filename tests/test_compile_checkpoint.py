"""`checkpoint(fn, *args, use_reentrant=False)` inside compiled code: the function's ops are
captured into the graph (no break), give eager checkpointing's values and gradients, and the
partitioners recompute them in the backward instead of saving them: the forward graph saves
the checkpointed function's inputs only, as eager checkpointing keeps them. Reentrant
checkpoints (whose gradients depend on which inputs require grad) stay outside the graph."""

import numpy as np
import pytest
from compile_support import Counter

import fusegrad
import fusegrad.nn.functional as F
from fusegrad.compiler.aot.api import aot_module_simplified
from fusegrad.compiler.aot.partitioners import (
    default_partition,
    min_cut_rematerialization_partition,
)
from fusegrad.utils.checkpoint import checkpoint

PARTITIONS = [default_partition, min_cut_rematerialization_partition]


def _block(t, w1, w2):
    return ((t @ w1).tanh() @ w2).sin()


def _checkpointed(x, w1, w2):
    h = checkpoint(_block, x, w1, w2, use_reentrant=False)
    return (h * h).sum()


def _plain(x, w1, w2):
    h = _block(x, w1, w2)
    return (h * h).sum()


def _saving(partition, graphs: list):
    """A backend running AOT autograd with `partition`, keeping the forward graphs."""
    def backend(gm, example_inputs):
        def keep(g, example):
            graphs.append(g)
            return g.forward

        return aot_module_simplified(gm, example_inputs, fw_compiler=keep, bw_compiler=keep,
                                     partition_fn=partition)
    return backend


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [fusegrad.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
            for s in ((6, 5), (5, 7), (7, 4))]


def _saved_count(graph_module) -> int:
    out = [n for n in graph_module.graph.nodes if n.op == "output"][0]
    return len(out.args[0]) - 1  # after the one user output


def _run(fn, inputs):
    loss = fn(*inputs)
    loss.backward()
    return [float(loss.detach())] + [t.grad.numpy().copy() for t in inputs]


@pytest.mark.parametrize("partition", PARTITIONS)
def test_checkpoint_is_captured_and_recomputed(partition):
    fusegrad._dynamo.reset()
    with_graphs, without_graphs = [], []
    expected = _run(_checkpointed, _inputs())
    got = _run(fusegrad.compile(_checkpointed, backend=_saving(partition, with_graphs)),
               _inputs())
    for a, b in zip(expected, got):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    fusegrad._dynamo.reset()
    _run(fusegrad.compile(_plain, backend=_saving(partition, without_graphs)), _inputs())
    assert len(with_graphs) == 2 and len(without_graphs) == 2  # one forward, one backward
    # Checkpointed: the three inputs alone (the function's output, which `h * h`'s gradient
    # reads, is recomputed with the rest); plain: intermediates too.
    assert _saved_count(with_graphs[0]) == 3 < _saved_count(without_graphs[0])


def test_no_graph_break_and_eager_values_under_every_backend():
    for backend in (None, "aot_eager", "inductor"):
        fusegrad._dynamo.reset()
        counter = Counter()
        fn = fusegrad.compile(_checkpointed, backend=counter if backend is None else backend)
        got, expected = _run(fn, _inputs(1)), _run(_checkpointed, _inputs(1))
        for a, b in zip(expected, got):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        explain = fusegrad._dynamo.explain(_checkpointed)(*_inputs(1))
        assert explain.graph_break_count == 0


class _Net(fusegrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = fusegrad.nn.Linear(8, 16)
        self.b = fusegrad.nn.Linear(16, 8)

    def _inner(self, x, scale=1.0):
        return self.b(F.dropout(F.gelu(self.a(x)), 0.3, self.training)) * scale

    def forward(self, x):
        return checkpoint(self._inner, x, use_reentrant=False, scale=2.0).relu().mean()


def test_module_with_dropout_and_keywords_matches_eager_checkpoint():
    fusegrad.manual_seed(3)
    net = _Net()
    x = fusegrad.randn(4, 8)
    grads = []
    for compiled in (False, True):
        fusegrad._dynamo.reset()
        net.zero_grad()
        fusegrad.manual_seed(11)
        run = fusegrad.compile(net, backend="aot_eager") if compiled else net
        loss = run(x)
        loss.backward()
        grads.append([float(loss.detach()), net.a.weight.grad.numpy().copy(),
                      net.b.bias.grad.numpy().copy(), float(fusegrad.rand(()))])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs", [{"use_reentrant": True}, {}])
def test_reentrant_checkpoint_stays_outside_the_graph(kwargs):
    fusegrad._dynamo.reset()

    def f(x, w1, w2):
        return checkpoint(_block, x, w1, w2, **kwargs).sum()

    with pytest.warns(UserWarning) if not kwargs else _nothing():
        explain = fusegrad._dynamo.explain(f)(*_inputs())
    assert any("checkpoint() with use_reentrant=True" in str(r.reason)
               for r in explain.break_reasons)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
