"""Activation checkpointing against torch (values, gradients, warnings, errors), RNG state
preservation, and the memory it saves (tracemalloc)."""

import gc
import tracemalloc
import warnings

import numpy as np
import pytest
import torch
from oracle import check, fg, randn

WIDTH, HIDDEN, BATCH, BLOCKS = 32, 128, 256, 24


def block(T, h, w1, w2):
    """A residual MLP block: h + tanh(h @ w1) @ w2 (its hidden layer is 4x wider)."""
    return h + (h @ w1).tanh() @ w2


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((WIDTH, HIDDEN)) * 0.1, rng.standard_normal((HIDDEN, WIDTH)) * 0.1)
            for _ in range(BLOCKS)]


def mlp_loss(T, x, ws, mode):
    """Forward + backward of the 24-block MLP; mode: None, 'reentrant', 'non_reentrant',
    'sequential'."""
    ckpt = T.utils.checkpoint
    h = x
    if mode == "sequential":
        fns = [lambda a, w1=w1, w2=w2: block(T, a, w1, w2) for w1, w2 in ws]
        h = ckpt.checkpoint_sequential(fns, 6, h, use_reentrant=False)
    else:
        for w1, w2 in ws:
            if mode is None:
                h = block(T, h, w1, w2)
            else:
                h = ckpt.checkpoint(block, T, h, w1, w2, use_reentrant=(mode == "reentrant"))
    loss = (h * h).sum()
    loss.backward()
    return loss


def _leaf_weights(T, ws):
    return [(T.tensor(a, requires_grad=True), T.tensor(b, requires_grad=True)) for a, b in ws]


@pytest.mark.parametrize("mode", ["reentrant", "non_reentrant", "sequential"])
def test_checkpointed_mlp_gradients_match_plain_and_torch(mode):
    ws_np = weights()
    x_np = randn(8, WIDTH)
    results = {}
    for T in (fg, torch):
        for m in (None, mode):
            ws = _leaf_weights(T, ws_np)
            x = T.tensor(x_np, requires_grad=True)
            loss = mlp_loss(T, x, ws, m)
            grads = [x.grad.numpy()] + [w.grad.numpy() for pair in ws for w in pair]
            results[(T.__name__, m)] = (loss.item(), grads)
    ref_loss, ref = results[("torch", None)]
    for key, (loss, grads) in results.items():
        assert abs(loss - ref_loss) <= 1e-9 * abs(ref_loss), key
        for a, b in zip(grads, ref):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=str(key))
    # fusegrad's checkpointed gradients are bit-identical to its own plain ones
    for a, b in zip(results[("fusegrad", mode)][1], results[("fusegrad", None)][1]):
        np.testing.assert_array_equal(a, b)


def _peak(mode, ws_np, x_np):
    ws = _leaf_weights(fg, ws_np)
    x = fg.tensor(x_np, requires_grad=True)
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        mlp_loss(fg, x, ws, mode)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return peak


def test_checkpoint_lowers_memory_peak():
    ws_np = weights()
    x_np = randn(BATCH, WIDTH)
    plain = _peak(None, ws_np, x_np)
    ckpt = _peak("non_reentrant", ws_np, x_np)
    seq = _peak("sequential", ws_np, x_np)
    assert ckpt < 0.6 * plain, (plain, ckpt)
    assert seq < 0.8 * plain, (plain, seq)


def test_forward_keeps_only_inputs():
    """Inside the checkpoint nothing is saved: every saved tensor is a packed position."""
    from fusegrad.autograd.graph import SavedHooked

    x = fg.tensor(randn(4, WIDTH), requires_grad=True)
    w1, w2 = _leaf_weights(fg, weights()[:1])[0]
    y = fg.utils.checkpoint.checkpoint(block, fg, x, w1, w2, use_reentrant=False)
    seen, stack = set(), [y.grad_fn]
    packed = []
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for s in getattr(node, "_saved", None) or ():
            if isinstance(s, SavedHooked):
                packed.append(s.packed)
            else:
                assert not isinstance(s, fg.Tensor), type(node).__name__
        stack.extend(n for n, _ in node.next_functions)
    assert packed and all(isinstance(p, int) for p in packed)


def rng_block(T, x):
    """Uses the random generator inside the checkpointed function (a dropout-like mask)."""
    mask = (T.rand(x.shape) > 0.5).to(x.dtype)
    return (x * mask * 2).sin()


def _same(a, b) -> bool:
    return np.array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize("reentrant", [False, True])
def test_rng_state_preserved_in_recomputation(reentrant):
    for T in (fg, torch):
        x = T.tensor(randn(6, 5), requires_grad=True)
        T.manual_seed(123)
        y = rng_block(T, x)
        after_plain = T.rand(3)
        y.sum().backward()
        plain = x.grad.clone()
        x.grad = None
        T.manual_seed(123)
        y2 = T.utils.checkpoint.checkpoint(rng_block, T, x, use_reentrant=reentrant)
        after_ckpt = T.rand(3)  # the generator moved on exactly as without checkpointing
        y2.sum().backward()
        assert _same(y, y2) and _same(plain, x.grad) and _same(after_plain, after_ckpt)


def test_rng_state_not_preserved_when_disabled():
    for T in (fg, torch):
        x = T.tensor(randn(50), requires_grad=True)
        T.manual_seed(5)
        rng_block(T, x).sum().backward()
        plain = x.grad.clone()
        x.grad = None
        T.manual_seed(5)
        y = T.utils.checkpoint.checkpoint(rng_block, T, x, use_reentrant=False,
                                          preserve_rng_state=False)
        y.sum().backward()  # the recomputation draws a different mask
        assert not _same(plain, x.grad)


def test_checkpoint_oracle_values_and_graph():
    def prog(T, x, w):
        def f(a, b, scale=1.0):
            return (a @ b).exp() * scale
        y1 = T.utils.checkpoint.checkpoint(f, x, w, use_reentrant=True)
        y2 = T.utils.checkpoint.checkpoint(f, x, w, use_reentrant=False, scale=2.0)
        (y1.sum() + y2.sum()).backward()
        return y1, y2, type(y1.grad_fn).__name__, type(y2.grad_fn).__name__
    check(prog, randn(3, 4), randn(4, 2, seed=1), requires_grad=True)


def test_checkpoint_warnings():
    seen = []
    for T in (fg, torch):
        x = T.ones(3, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = T.utils.checkpoint.checkpoint(lambda a: a * 2, x)
            assert type(y.grad_fn).__name__ == "CheckpointFunctionBackward"  # reentrant
            T.utils.checkpoint.checkpoint(lambda a: a * 2, x.detach(), use_reentrant=True)
            with T.no_grad():  # warned whatever the grad mode
                T.utils.checkpoint.checkpoint(lambda a: a * 2, x.detach(), use_reentrant=True)
        msgs = [str(m.message).split(".")[0] for m in w]
        assert msgs == ["torch"] + ["None of the inputs have requires_grad=True"] * 2, msgs
        seen.append([(m.category, str(m.message)) for m in w])
    assert seen[0] == seen[1]


@pytest.mark.parametrize("case", ["kwargs_reentrant", "seq_kwargs", "double_backward",
                                  "seq_more_segments_than_functions"])
def test_checkpoint_errors(case):
    def prog(T, x):
        ck = T.utils.checkpoint
        if case == "kwargs_reentrant":
            return ck.checkpoint(lambda a, k=1: a * k, x, use_reentrant=True, k=2)
        if case == "seq_kwargs":
            return ck.checkpoint_sequential([lambda a: a], 1, x, use_reentrant=False, foo=1)
        if case == "seq_more_segments_than_functions":
            return ck.checkpoint_sequential([lambda a: a * 2], 2, x, use_reentrant=False)
        y = ck.checkpoint(lambda a: a.exp(), x, use_reentrant=False)
        y.sum().backward()
        return y.sum().backward()
    check(prog, randn(3), requires_grad=True, expect_error=True)


# ---- a module's own parameters (reached inside the function, never passed as arguments) ----

def _mlp(T, dropout=0.0):
    """Linear-Tanh-(Dropout)-Linear-Tanh-Linear with the same weights under both libraries."""
    rng = np.random.default_rng(3)
    layers = [T.nn.Linear(5, 7), T.nn.Tanh(), T.nn.Dropout(dropout), T.nn.Linear(7, 6),
              T.nn.Tanh(), T.nn.Linear(6, 2)]
    model = T.nn.Sequential(*layers).double()
    with T.no_grad():
        for p in model.parameters():
            p.copy_(T.tensor(rng.standard_normal(tuple(p.shape))))
    return model


def _run_model(T, model, x, mode):
    """The loss and gradients (input, then parameters; None where there is none) of one
    forward + backward through `model` in `mode`."""
    ck = T.utils.checkpoint
    if mode == "plain":
        y = model(x)
    elif mode == "omitted":
        y = ck.checkpoint(model, x)
    elif mode.startswith("seq"):
        y = ck.checkpoint_sequential(model, 3, x, use_reentrant=mode == "seq_reentrant")
    else:
        y = ck.checkpoint(model, x, use_reentrant=mode == "reentrant")
    loss = (y * y).sum()
    loss.backward()
    grads = [x.grad] + [p.grad for p in model.parameters()]
    return loss.item(), [None if g is None else g.numpy().copy() for g in grads]


MODES = ["reentrant", "non_reentrant", "omitted", "seq_reentrant", "seq_non_reentrant"]


@pytest.mark.parametrize("mode", MODES)
def test_module_parameters_get_gradients_as_in_torch(mode):
    x_np = randn(4, 5)
    out = {}
    for T in (fg, torch):
        for m in ("plain", mode):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x = T.tensor(x_np, requires_grad=True)
                out[T.__name__, m] = _run_model(T, _mlp(T), x, m)
    ref_loss, ref = out["torch", "plain"]
    for key, (loss, grads) in out.items():
        assert loss == pytest.approx(ref_loss, rel=1e-12), key
        assert len(grads) == 7 and all(g is not None for g in grads), key
        for a, b in zip(grads, ref):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=str(key))


@pytest.mark.parametrize("mode", MODES)
def test_input_without_grad_matches_torch(mode):
    """Reentrant: the output has no history (torch warns), so a checkpointed segment's
    parameters get no gradient; non-reentrant: the parameters still get theirs."""
    x_np = randn(4, 5)
    out = {}
    for T in (fg, torch):
        x = T.tensor(x_np)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                res = _run_model(T, _mlp(T), x, mode)
            except RuntimeError as e:
                res = str(e)
        out[T.__name__] = res, [str(m.message) for m in w]
    (got, got_w), (ref, ref_w) = out["fusegrad"], out["torch"]
    assert got_w == ref_w
    assert ("None of the inputs have requires_grad=True. Gradients will be None" in ref_w) == (
        mode in ("reentrant", "omitted", "seq_reentrant"))
    if isinstance(ref, str):
        assert got == ref
        return
    assert got[0] == pytest.approx(ref[0], rel=1e-12)
    assert [g is None for g in got[1]] == [g is None for g in ref[1]]
    for a, b in zip(got[1], ref[1]):
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("preserve", [True, False])
@pytest.mark.parametrize("mode", MODES)
def test_dropout_mask_in_recomputation(mode, preserve):
    """With preserve_rng_state the recomputation draws the forward's dropout mask: gradients
    equal the plain run's bit for bit, and the generator ends where the plain run left it.
    Without it the mask differs (as in torch; the two libraries' generators differ)."""
    x_np = randn(16, 5)
    for T in (fg, torch):
        runs = {}
        for m in ("plain", mode):
            T.manual_seed(11)
            x = T.tensor(x_np, requires_grad=True)
            model = _mlp(T, dropout=0.5)
            ck = T.utils.checkpoint
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if m == "plain":
                    y = model(x)
                elif m.startswith("seq"):
                    y = ck.checkpoint_sequential(model, 3, x, preserve_rng_state=preserve,
                                                 use_reentrant=m == "seq_reentrant")
                else:
                    kw = {} if m == "omitted" else {"use_reentrant": m == "reentrant"}
                    y = ck.checkpoint(model, x, preserve_rng_state=preserve, **kw)
            after = T.rand(4)
            y.sum().backward()
            runs[m] = [y.detach().numpy(), after.numpy()] + [
                t.grad.numpy() for t in [x, *model.parameters()]]
        same = all(np.array_equal(a, b) for a, b in zip(runs["plain"], runs[mode]))
        assert same == preserve, (T.__name__, mode)
        # the forward itself is never affected, only the recomputation
        assert np.array_equal(runs["plain"][0], runs[mode][0])


def test_reentrant_refuses_grad_and_backward_inputs():
    """A reentrant checkpoint cannot serve `autograd.grad` / `backward(inputs=...)` (its
    nested backward would fill every leaf's .grad): same error as torch, no .grad written."""
    def prog(T, x, how):
        model = _mlp(T)
        y = T.utils.checkpoint.checkpoint(model, x, use_reentrant=True).sum()
        try:
            if how == "grad":
                T.autograd.grad(y, x)
            else:
                y.backward(inputs=[x])
        except RuntimeError as e:
            return str(e), [p.grad for p in model.parameters()], x.grad
        raise AssertionError("no error")

    for how in ("grad", "inputs"):
        (msg, pg, xg), (ref, _, _) = (prog(T, T.tensor(randn(2, 5), requires_grad=True), how)
                                      for T in (fg, torch))
        assert msg == ref and all(g is None for g in pg) and xg is None
    # the non-reentrant variant supports both, like torch
    for T in (fg, torch):
        x = T.tensor(randn(2, 5), requires_grad=True)
        y = T.utils.checkpoint.checkpoint(_mlp(T), x, use_reentrant=False).sum()
        assert T.autograd.grad(y, x)[0].shape == (2, 5)


def test_context_fn_and_sequential_warning():
    entered = []

    class Mark:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            entered.append(self.name)

        def __exit__(self, *exc):
            return False

    for T in (fg, torch):
        entered.clear()
        x = T.ones(3, requires_grad=True)
        y = T.utils.checkpoint.checkpoint(lambda a: a.sin() * 2, x, use_reentrant=False,
                                          context_fn=lambda: (Mark("fwd"), Mark("re")))
        assert entered == ["fwd"]
        y.sum().backward()
        assert entered == ["fwd", "re"], T.__name__
        with pytest.raises(ValueError) as e:
            T.utils.checkpoint.checkpoint(lambda a: a, x, use_reentrant=True,
                                          context_fn=lambda: (Mark("a"), Mark("b")))
        assert str(e.value) == ("Passing `context_fn` or `debug` is only supported when "
                                "use_reentrant=False.")
    msgs = []
    for T in (fg, torch):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            T.utils.checkpoint.checkpoint_sequential([lambda a: a * 2] * 2, 2,
                                                     T.ones(2, requires_grad=True))
        msgs.append([(m.category, str(m.message)) for m in w])
    assert msgs[0] == msgs[1] and len(msgs[0]) == 1


def _recomputation_outcomes(T):
    """A function that saves other tensors when it is recomputed, under each option: the
    gradient, or the error's type and message (before its tip)."""
    ckpt = T.utils.checkpoint
    calls = [0]

    def more(x):  # recomputed, it saves one tensor more (early stop hides it)
        calls[0] += 1
        y = x.sin() * x
        return (y.exp() if calls[0] > 1 else y).sum(1)

    def fewer(x):
        calls[0] += 1
        y = x.sin()
        return (y * x if calls[0] == 1 else y).sum(1)

    def other_dtype(x):
        calls[0] += 1
        return (x.sin() if calls[0] == 1 else x.double().sin()).sum(1)

    def other_shape(x):
        calls[0] += 1
        return (x if calls[0] == 1 else x[:2]).sin().sum(1)

    out = []
    for fn in (more, fewer, other_dtype, other_shape):
        for kwargs, stop in (({}, None), ({"early_stop": False}, None),
                             ({"determinism_check": "none"}, None), ({}, False)):
            calls[0] = 0
            x = T.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4) / 7,
                         requires_grad=True)
            block = ckpt.set_checkpoint_early_stop(stop) if stop is not None else \
                warnings.catch_warnings()
            try:
                with block:
                    ckpt.checkpoint(fn, x, use_reentrant=False, **kwargs).sum().backward()
                out.append(round(float(x.grad.sum()), 4))
            except RuntimeError as e:
                out.append((type(e).__name__, str(e).split("\nTip:")[0]))
    return out


def test_recomputation_that_saves_other_tensors_raises_pytorchs_errors():
    assert _recomputation_outcomes(fg) == _recomputation_outcomes(torch)
