"""Every registry entry with a `decomposition` against the entry itself, on its own samples.

The oracle is eager execution of the op (its kernel and derivative, which
tests/test_ops_registry.py checks against PyTorch): the decomposition, run eagerly with
autograd, must give the op's values and the op's input gradients for a random cotangent,
within the entry's tolerance. The decomposed graph must close over core ops (entries without
a decomposition), and random ops must draw the same values as eager for the same seed.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from test_ops_registry import _as_tuple as _tuple  # noqa: E402
from test_ops_registry import _leaves, _samples, _to_fg, _tol  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad import _decomp, _dispatch  # noqa: E402
from fusegrad._dispatch import DispatchMode  # noqa: E402
from fusegrad._fake import FakeTensorMode  # noqa: E402
from fusegrad.ops import REGISTRY  # noqa: E402

DTYPES = [np.float32, np.float64]
DECOMPOSED = sorted(n for n, op in REGISTRY.items() if op.decomposition is not None)
# Gradient tolerances where the op's derivative is PyTorch's rounded formula and the
# decomposition's is exact: hardsigmoid's backward multiplies by float32 1/6 in every dtype.
GRAD_TOL = {"hardsigmoid": 1e-7, "hardsigmoid_": 1e-7}
# Samples whose gradients are PyTorch's and not the decomposition's exact ones: the double
# backward of embedding_dense_backward ignores scale_grad_by_freq in PyTorch (and the entry).
NO_GRAD_CHECK = {("embedding_dense_backward", "pad=-1 scale=True")}


def _fg(x, requires_grad=True):
    return _to_fg(x, requires_grad)


def _close(a, b, tol, what):
    a = np.asarray(a.detach().numpy(), dtype=np.float64)
    b = np.asarray(b.detach().numpy(), dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what, equal_nan=True)


def check_decomposition(op, args, tol, what, seed=0, grad_tol=None, grads=True) -> None:
    """`op.decomposition(*args)` against `op(*args)`: values, dtypes, and input gradients."""
    ref_in = tuple(_fg(a) for a in args)
    dec_in = tuple(_fg(a) for a in args)
    fusegrad.manual_seed(seed)
    ref = _tuple(_dispatch.call(op, *ref_in))
    fusegrad.manual_seed(seed)
    dec = _tuple(op.decomposition(*dec_in))
    assert len(ref) == len(dec), what
    for i, (r, d) in enumerate(zip(ref, dec)):
        assert r.dtype == d.dtype, f"{what} output {i}: dtype {d.dtype} != {r.dtype}"
        _close(d, r, tol, f"{what} output {i}")
    pairs = [(r, d) for r, d in zip(ref, dec) if r.grad_fn is not None]
    if not grads or not pairs or getattr(op.derivative, "not_implemented", False):
        return  # (PyTorch has no derivative for a flash backward; its decomposition has one)
    rng = np.random.default_rng(seed)
    ref_loss = dec_loss = 0
    for r, d in pairs:
        cot = fusegrad.from_numpy(rng.standard_normal(tuple(r.shape)).astype(r.dtype.np))
        ref_loss = ref_loss + (r * cot).sum()
        dec_loss = dec_loss + (d * cot).sum()
    ref_loss.backward()
    dec_loss.backward()
    for i, (a, b) in enumerate(zip(_leaves(dec_in), _leaves(ref_in))):
        if b.grad is None:
            assert a.grad is None or not a.grad.numpy().any(), f"{what} grad {i}"
            continue
        assert a.grad is not None, f"{what}: no gradient for input {i}"
        _close(a.grad, b.grad, grad_tol or tol * 10, f"{what} grad {i}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", DECOMPOSED)
def test_decomposition_matches_op(name, dtype):
    op = REGISTRY[name]
    for k, sample in enumerate(_samples(op, dtype)):
        check_decomposition(op, sample.args, _tol(op, dtype), f"{name} sample {k} "
                            f"({sample.name})", seed=k, grad_tol=GRAD_TOL.get(name),
                            grads=(name, sample.name) not in NO_GRAD_CHECK)


class _Decomposing(DispatchMode):
    """Runs every op in `table` through its decomposition, recursively, as a tracer given the
    table does; records the ops that run whole."""

    def __init__(self, table):
        self.table = table
        self.whole = set()
        self.decomposed = set()
        self.active = []  # decompositions running, outermost first

    def __fusegrad_dispatch__(self, op, args):
        # Dispatch records the op's node on what the handler returns: the handler itself runs
        # with grad mode off, so nothing is recorded twice.
        with fusegrad.no_grad():
            fn = self.table.get(op)
            if fn is None:
                self.whole.add(op)
                return _dispatch.call(op, *args)
            assert op not in self.active, f"{op.name} decomposes into itself via {self.active}"
            self.active.append(op)
            self.decomposed.add(op.name)
            try:
                with self:  # the ops the decomposition calls are decomposed in turn
                    return fn(*args)
            finally:
                self.active.pop()


def _run(op, args, seed, mode=None):
    fusegrad.manual_seed(seed)
    with fusegrad.no_grad():
        if mode is None:
            return _tuple(_dispatch.call(op, *args))
        with mode:
            return _tuple(_dispatch.call(op, *args))


@pytest.mark.parametrize("name", DECOMPOSED)
def test_decomposition_closes_over_core_ops(name):
    """Following decompositions down from the op ends in core ops only (no cycle), and the
    fully decomposed computation still gives the op's values."""
    op = REGISTRY[name]
    core = _decomp.core_ops()
    table = _decomp.core_aten_decompositions()
    for k, sample in enumerate(_samples(op, np.float64)):
        args = tuple(_fg(a, False) for a in sample.args)
        mode = _Decomposing(table)
        got = _run(op, args, k, mode)
        assert op not in mode.whole
        assert mode.whole <= core, sorted(o.name for o in mode.whole - core)
        for i, (g, e) in enumerate(zip(got, _run(op, args, k))):
            _close(g, e, _tol(op, np.float64), f"{name} sample {k} output {i}")


def test_core_set_and_tables():
    table = _decomp.core_aten_decompositions()
    core = _decomp.core_ops()
    assert set(table) == {REGISTRY[n] for n in DECOMPOSED}
    assert not set(table) & core and set(table) | core == set(REGISTRY.values())
    assert all(table[op] is op.decomposition for op in table)
    assert _decomp.is_core(REGISTRY["mm"]) and not _decomp.is_core(REGISTRY["addmm"])
    # A base name stands for every overload (as an overload packet); core ops are skipped.
    sub = _decomp.get_decompositions(["var", REGISTRY["_softmax"], "mm", "no_such_op"])
    assert set(sub) == {REGISTRY["var.correction"], REGISTRY["_softmax"]}
    assert set(_decomp.get_decompositions(["var_mean.correction"])) == {
        REGISTRY["var_mean.correction"]}
    _decomp.remove_decompositions(sub, ["_softmax"])
    assert set(sub) == {REGISTRY["var.correction"]}
    with pytest.raises(TypeError):
        _decomp.get_decompositions([3])


def test_partial_table_keeps_other_ops_whole():
    """Ops outside the table run whole; those inside are rewritten."""
    x = fusegrad.randn(4, 6)
    w, b = fusegrad.randn(6), fusegrad.randn(6)
    mode = _Decomposing(_decomp.get_decompositions(["native_layer_norm"]))
    with fusegrad.no_grad(), mode:
        out = fusegrad.nn.functional.gelu(fusegrad.nn.functional.layer_norm(x, [6], w, b))
    names = {op.name for op in mode.whole}
    assert "gelu" in names and "native_layer_norm" not in names
    assert {"sum.dim_IntList", "rsqrt", "mul.Tensor"} <= names
    ref = fusegrad.nn.functional.gelu(fusegrad.nn.functional.layer_norm(x, [6], w, b))
    _close(out, ref, 1e-5, "layer_norm + gelu")


def test_gelu_tanh_and_activation_parameters():
    """Parameters the entries' samples leave at their defaults."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-4, 4, (5, 6))
    for name, extra in (("gelu", ("tanh",)), ("leaky_relu", (0.3,)), ("elu", (0.7, 1.2, 0.8)),
                        ("softplus", (3.0, 2.0)), ("hardtanh", (-0.3, 0.8)),
                        ("celu", (1.7,)), ("addmm", None), ("smooth_l1_loss", None)):
        op = REGISTRY[name]
        if name == "addmm":
            args = (rng.standard_normal((3, 5)), rng.standard_normal((3, 4)),
                    rng.standard_normal((4, 5)), 0.5, -2.0)
        elif name == "smooth_l1_loss":
            args = (x, rng.uniform(-4, 4, (5, 6)), 1, 0.0)
        else:
            args = (x,) + extra
        check_decomposition(op, args, 1e-10, f"{name} {args[1:] if name != 'addmm' else ''}")


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_decomposition_updates_running_stats_as_torch(training):
    """native_batch_norm's decomposition with running statistics: outputs and the updated
    running mean and variance against ATen's op and torch._decomp's decomposition."""
    from torch._decomp import decomposition_table

    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 5, 2))
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    rm, rv = rng.standard_normal(3), rng.uniform(0.5, 2.0, 3)
    args = (x, w, b, rm, rv, training, 0.1, 1e-5)
    fg_args = [fusegrad.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    fg_out = REGISTRY["native_batch_norm"].decomposition(*fg_args)
    refs = []
    for fn in (torch.ops.aten.native_batch_norm.default,
               decomposition_table[torch.ops.aten.native_batch_norm.default]):
        th_args = [torch.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
        refs.append((fn(*th_args), th_args[3], th_args[4]))
    for th_out, th_rm, th_rv in refs:
        for f, t in zip(fg_out, th_out):
            np.testing.assert_allclose(f.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(fg_args[3].numpy(), th_rm.numpy(), rtol=1e-12)
        np.testing.assert_allclose(fg_args[4].numpy(), th_rv.numpy(), rtol=1e-12)
    # And against the op's own kernel, running statistics included.
    k_args = [fusegrad.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    k_out = _dispatch.call(REGISTRY["native_batch_norm"], *k_args)
    for f, k in zip(fg_out, k_out):
        np.testing.assert_allclose(f.numpy(), k.numpy(), rtol=1e-10, atol=1e-12)
    for i in (3, 4):
        np.testing.assert_allclose(fg_args[i].numpy(), k_args[i].numpy(), rtol=1e-12)


def test_batch_norm_decomposition_keeps_buffers_out_of_autograd():
    x = fusegrad.randn(6, 3, requires_grad=True)
    rm, rv = fusegrad.zeros(3), fusegrad.ones(3)
    out = REGISTRY["native_batch_norm"].decomposition(x, None, None, rm, rv, True, 0.1, 1e-5)
    assert out[0].requires_grad
    assert not rm.requires_grad and rm.grad_fn is None and rv.grad_fn is None
    assert rm.abs().sum().item() > 0  # the update happened


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_dropout_decomposition_draws_eager_mask(p):
    """For one seed: native_dropout's kernel, its decomposition and F.dropout keep the same
    elements and give the same values; the decomposition's gradient is the op's."""
    op = REGISTRY["native_dropout"]
    x = fusegrad.randn(8, 16, 4)
    fusegrad.manual_seed(11)
    out, mask = _dispatch.call(op, x, p, True)
    fusegrad.manual_seed(11)
    d_out, d_mask = op.decomposition(x, p, True)
    fusegrad.manual_seed(11)
    eager = fusegrad.nn.functional.dropout(x, p, True)
    assert mask.dtype == d_mask.dtype == fusegrad.bool
    assert 0 < mask.sum().item() < mask.numel()
    np.testing.assert_array_equal(mask.numpy(), d_mask.numpy())
    np.testing.assert_array_equal(out.numpy(), d_out.numpy())
    np.testing.assert_array_equal(out.numpy(), eager.numpy())
    np.testing.assert_array_equal(eager.numpy() != 0, mask.numpy() & (x.numpy() != 0))
    # A different seed draws another mask.
    fusegrad.manual_seed(12)
    assert (op.decomposition(x, p, True)[1].numpy() != mask.numpy()).any()
    check_decomposition(op, (np.random.default_rng(2).standard_normal((5, 7)), p, True),
                        1e-6, f"native_dropout p={p}", seed=3)


def test_dropout_records_torch_nodes_and_traces_through_registry():
    """F.dropout records PyTorch's CPU node (MulBackward0) and draws its mask with a
    registry op, so a dispatch mode sees it."""
    x = fusegrad.randn(3, 4, requires_grad=True)
    mode = _Decomposing({})
    with mode:
        y = fusegrad.nn.functional.dropout(x, 0.5, True)
    assert type(y.grad_fn).__name__ == "MulBackward0"
    assert {"bernoulli_.float", "mul.Tensor"} <= {op.name for op in mode.whole}
    tx = torch.randn(3, 4, requires_grad=True)
    assert type(torch.nn.functional.dropout(tx, 0.5, True).grad_fn).__name__ == "MulBackward0"


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_attention_decompositions_with_masks(dtype):
    """The flash attention forward and backward decompositions with additive masks (2-D and
    4-D), causal masking with more keys than queries, and a query whose every key is masked
    (its output and log-sum-exp are 0)."""
    rng = np.random.default_rng(5)
    fwd = REGISTRY["_scaled_dot_product_flash_attention_for_cpu"]
    bwd = REGISTRY["_scaled_dot_product_flash_attention_for_cpu_backward"]
    q = rng.standard_normal((2, 4, 3, 5)).astype(dtype)
    k, v = (rng.standard_normal((2, 2, 6, 5)).astype(dtype) for _ in range(2))
    mask2 = rng.standard_normal((3, 6)).astype(dtype)
    mask4 = rng.standard_normal((2, 1, 3, 6)).astype(dtype)
    mask4[0, 0, 1] = -np.inf  # every key masked for one query
    tol = _tol(fwd, dtype)
    for causal, mask in ((True, None), (False, mask2), (True, mask4), (False, mask4)):
        m = None if mask is None else fusegrad.from_numpy(mask)  # masks get no gradient
        what = f"causal={causal} mask={None if mask is None else mask.shape}"
        check_decomposition(fwd, (q, k, v, 0.0, causal, m, 0.4), tol, what)
        out, lse = _dispatch.call(fwd, *(fusegrad.from_numpy(a) for a in (q, k, v)), 0.0,
                                  causal, m, 0.4)
        g = rng.standard_normal(out.shape).astype(dtype)
        args = (g, q, k, v, out.numpy(), lse.numpy(), 0.0, causal, m, 0.4)
        check_decomposition(bwd, args, tol, "backward " + what)


@pytest.mark.parametrize("name", DECOMPOSED)
def test_decomposition_runs_on_fake_tensors(name):
    """Under FakeTensorMode (as a tracer runs it) the decomposition gives the op's output
    shapes and dtypes, and autograd can run backward through it on fakes."""
    op = REGISTRY[name]
    for k, sample in enumerate(_samples(op, np.float32)):
        with FakeTensorMode() as mode:
            args = tuple(mode._fakeify(_fg(a)) for a in sample.args)
            ref = _tuple(_dispatch.call(op, *args))
            got = _tuple(op.decomposition(*args))
            assert [(tuple(r.shape), r.dtype) for r in ref] == [
                (tuple(g.shape), g.dtype) for g in got], f"{name} sample {k}"
            outs = [g for g, r in zip(got, ref) if r.grad_fn is not None]
            if outs and not getattr(op.derivative, "not_implemented", False):
                sum((o * o).sum() for o in outs).backward()
                for leaf in _leaves(args):
                    assert leaf.grad is None or tuple(leaf.grad.shape) == tuple(leaf.shape)


def _small_models():
    from fusegrad import nn
    from fusegrad.models.resnet import BasicBlock

    fusegrad.manual_seed(0)
    conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                         nn.ReLU(inplace=True), nn.MaxPool2d(2),
                         BasicBlock(8, 8), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.3), nn.Linear(8, 5))
    encoder = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, activation="gelu",
                                         batch_first=True, norm_first=True)
    attention = nn.Sequential(nn.Embedding(20, 16), encoder, nn.LayerNorm(16),
                              nn.Linear(16, 5))
    return {"conv net with batch norm": (conv, fusegrad.randn(4, 3, 8, 8)),
            "transformer layer": (attention, fusegrad.randint(0, 20, (3, 6)))}


@pytest.mark.parametrize("which", ["conv net with batch norm", "transformer layer"])
def test_training_step_fully_decomposed_matches_eager(which):
    """A float64 training step (forward, loss, backward) with every decomposition applied
    gives eager's loss, parameter gradients and running statistics, and runs core ops only."""
    import copy

    model, x = _small_models()[which]
    model = model.double()

    def step(m, mode):
        fusegrad.manual_seed(1)  # the same dropout masks
        with mode if mode is not None else fusegrad.enable_grad():
            out = m(x if x.dtype == fusegrad.int64 else x.double())
            loss = fusegrad.nn.functional.cross_entropy(
                out.reshape(-1, 5), fusegrad.arange(out.numel() // 5) % 5)
            loss.backward()
        return loss, m

    ref_loss, ref = step(copy.deepcopy(model), None)
    mode = _Decomposing(_decomp.core_aten_decompositions())
    loss, dec = step(copy.deepcopy(model), mode)
    assert mode.whole <= _decomp.core_ops()
    expected = {"conv net with batch norm": {"native_batch_norm", "addmm", "mean.dim"},
                "transformer layer": {"native_layer_norm", "gelu", "_log_softmax",
                                      "nll_loss_forward", "embedding_dense_backward"}}[which]
    assert expected <= mode.decomposed, expected - mode.decomposed
    _close(loss, ref_loss, 1e-10, "loss")
    for (name, p), (_, q) in zip(dec.named_parameters(), ref.named_parameters()):
        _close(p.grad, q.grad, 1e-9, f"{which} grad {name}")
    for (name, b), (_, c) in zip(dec.named_buffers(), ref.named_buffers()):
        _close(b.double(), c.double(), 1e-10, f"{which} buffer {name}")
