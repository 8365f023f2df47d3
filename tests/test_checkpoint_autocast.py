"""Activation checkpointing under autocast, against torch: the recomputation in backward runs
under the autocast state (enabled, dtype, cache) of the forward, whatever the state around
the backward call, in both the reentrant and the non-reentrant form; and grad mode as torch
sets it there."""

import contextlib
import warnings

import numpy as np
import pytest
import torch
from oracle import fg

MODES = [pytest.param(True, id="reentrant"), pytest.param(False, id="non_reentrant")]


def _probe(T, seen, fn):
    """`fn` noting the autocast state and grad mode each time it runs."""

    def run(t):
        seen.append((T.is_autocast_enabled("cpu"), str(T.get_autocast_dtype("cpu")),
                     T.is_grad_enabled()))
        return fn(t)

    return run


def _run(T, reentrant, scenario, act="relu"):
    """One checkpointed program under `scenario`; returns (arrays to compare, autocast states
    the function saw)."""
    nn, F = T.nn, T.nn.functional
    T.manual_seed(0)
    l1, l2 = nn.Linear(16, 32), nn.Linear(32, 8)
    x = T.randn(4, 16, requires_grad=True)
    seen = []

    def body(t):
        if act == "inner_on":  # the function's own autocast region around its first layer
            with T.autocast("cpu", dtype=T.bfloat16):
                h = l1(t)
            return l2(F.relu(h.float()))
        h = l1(t)
        if act == "inner_off":  # ... or one that switches autocast off for its last layer
            with T.autocast("cpu", enabled=False):
                return l2(F.relu(h.float()))
        h = F.gelu(h) if act == "gelu" else F.relu(h)
        if act == "dropout":
            h = F.dropout(h, 0.5, training=True)
        return l2(h)

    fn = _probe(T, seen, body)

    def ck(f):
        return T.utils.checkpoint.checkpoint(f, x, use_reentrant=reentrant)

    def ac(**kw):
        return T.autocast("cpu", **kw)

    null = contextlib.nullcontext
    fwd, bwd = {
        "bf16": (lambda: ac(dtype=T.bfloat16), null),
        "fp16": (lambda: ac(dtype=T.float16), null),
        "no_cache": (lambda: ac(dtype=T.bfloat16, cache_enabled=False), null),
        "backward_inside": (lambda: ac(dtype=T.bfloat16), None),
        "off_forward_on_backward": (null, lambda: ac(dtype=T.bfloat16)),
        "disabled_inside_enabled": (None, null),
    }[scenario]
    if scenario == "backward_inside":
        with fwd():
            y = ck(fn)
            y.float().sum().backward()
    elif scenario == "disabled_inside_enabled":
        with ac(dtype=T.bfloat16), ac(enabled=False):
            y = ck(fn)
        y.float().sum().backward()
    else:
        with fwd():
            y = ck(fn)
        with bwd():
            y.float().sum().backward()
    arrays = [y, x.grad, l1.weight.grad, l1.bias.grad, l2.weight.grad, l2.bias.grad]
    return [None if a is None else (str(a.dtype), a.detach().double().numpy())
            for a in arrays], seen


SCENARIOS = ["bf16", "fp16", "no_cache", "off_forward_on_backward", "disabled_inside_enabled"]


@pytest.mark.parametrize("reentrant", MODES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_recompute_under_forward_autocast_matches_torch(reentrant, scenario):
    """Values, gradients (of the input and the parameters) and the autocast state seen by
    every run of the function equal torch's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, got_seen = _run(fg, reentrant, scenario)
        want, want_seen = _run(torch, reentrant, scenario)
    assert got_seen == want_seen
    for (gd, g), (wd, w) in zip(got, want):
        assert gd == wd
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_backward_inside_autocast_non_reentrant():
    """Backward inside the forward's autocast region, non-reentrant form: as torch."""
    got, got_seen = _run(fg, False, "backward_inside")
    want, want_seen = _run(torch, False, "backward_inside")
    assert got_seen == want_seen
    for (gd, g), (wd, w) in zip(got, want):
        assert gd == wd
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_backward_inside_autocast_reentrant_input_grad():
    """Backward inside the region, reentrant form: the input's gradient and the states seen
    match torch (the parameters' gradients depend on the autocast weight cache, see
    `_autocast`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, got_seen = _run(fg, True, "backward_inside")
        want, want_seen = _run(torch, True, "backward_inside")
    assert got_seen == want_seen
    for (gd, g), (wd, w) in zip(got[:2], want[:2]):
        assert gd == wd
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reentrant", MODES)
@pytest.mark.parametrize("act,scenario", [("dropout", "bf16"),
                                          ("inner_on", "off_forward_on_backward"),
                                          ("inner_off", "bf16")])
def test_autocast_inside_the_function_and_dropout(reentrant, act, scenario):
    """The function's own autocast regions (on, or off inside an enabled one) nest inside the
    restored state as in torch; the recomputation redraws the forward's dropout mask."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, got_seen = _run(fg, reentrant, scenario, act=act)
        want, want_seen = _run(torch, reentrant, scenario, act=act)
    assert got_seen == want_seen
    for (gd, g), (wd, w) in zip(got, want):
        assert gd == wd
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _plain(T, act):
    """The same program without checkpointing."""
    nn, F = T.nn, T.nn.functional
    T.manual_seed(0)
    l1, l2 = nn.Linear(16, 32), nn.Linear(32, 8)
    x = T.randn(4, 16, requires_grad=True)
    with T.autocast("cpu", dtype=T.bfloat16):
        h = l1(x)
        y = l2(F.gelu(h) if act == "gelu" else F.relu(h))
    y.float().sum().backward()
    arrays = [y, x.grad, l1.weight.grad, l1.bias.grad, l2.weight.grad, l2.bias.grad]
    return [(str(a.dtype), a.detach().double().numpy()) for a in arrays]


@pytest.mark.parametrize("reentrant", MODES)
def test_checkpointed_equals_plain_under_autocast(reentrant):
    """Checkpointed or not, an autocast program gives the same values and gradients (the
    bug: the recomputation ran without autocast, so gradients differed, or backward failed
    with a dtype mismatch in the non-reentrant form)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, _ = _run(fg, reentrant, "bf16", act="gelu")
    want = _plain(fg, "gelu")
    for (gd, g), (wd, w) in zip(got, want):
        assert gd == wd
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("reentrant", MODES)
def test_gelu_program_close_to_torch(reentrant):
    """The report's program (Linear then gelu under bfloat16 autocast): close to torch's
    gradients (gelu's bfloat16 backward itself rounds differently by an ulp)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, _ = _run(fg, reentrant, "bf16", act="gelu")
        want, _ = _run(torch, reentrant, "bf16", act="gelu")
    for (gd, g), (wd, w) in zip(got, want):
        assert gd == wd
        np.testing.assert_allclose(g, w, rtol=2e-2, atol=2e-2)


def test_non_reentrant_linear_module_under_autocast():
    """`checkpoint(nn.Linear(4, 4), x, use_reentrant=False)` under autocast: backward used to
    fail with 'expected m1 and m2 to have the same dtype'."""
    out = []
    for T in (fg, torch):
        T.manual_seed(0)
        lin = T.nn.Linear(4, 4)
        x = T.randn(2, 4, requires_grad=True)
        with T.autocast("cpu", dtype=T.bfloat16):
            y = T.utils.checkpoint.checkpoint(lin, x, use_reentrant=False)
        y.float().sum().backward()
        out.append([t.detach().double().numpy() for t in (y, x.grad, lin.weight.grad)])
    for g, w in zip(*out):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _no_grad_checkpoint(T):
    """A non-reentrant checkpoint under no_grad; returns (output, whether the forward context
    was entered)."""
    entered = []

    @contextlib.contextmanager
    def fwd_ctx():
        entered.append(True)
        yield

    x = T.ones(3, requires_grad=True)
    with T.no_grad():
        y = T.utils.checkpoint.checkpoint(
            lambda t: t * 2, x, use_reentrant=False,
            context_fn=lambda: (fwd_ctx(), contextlib.nullcontext()))
    return y, bool(entered)


def test_non_reentrant_without_grad_mode_runs_plainly():
    """Under no_grad the non-reentrant form runs the function as it is (no hooks, no
    forward context), as torch does."""
    for T in (fg, torch):
        y, entered = _no_grad_checkpoint(T)
        assert not y.requires_grad
        assert not entered


def test_forward_context_suppressing_an_exception_raises():
    """A `context_fn` forward context that swallows the function's exception: torch's
    RuntimeError."""
    msgs = []
    for T in (fg, torch):
        @contextlib.contextmanager
        def swallow():
            try:
                yield
            except ValueError:
                pass

        def fn(t):
            raise ValueError("boom")

        x = T.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError) as info:
            T.utils.checkpoint.checkpoint(fn, x, use_reentrant=False,
                                          context_fn=lambda: (swallow(),
                                                              contextlib.nullcontext()))
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def _weight_grad_after_a_no_grad_forward(lib):
    lib.manual_seed(0)
    lin = lib.nn.Linear(4, 4)
    x = lib.ones(2, 4)
    with lib.autocast("cpu", dtype=lib.bfloat16):
        with lib.no_grad():
            lin(x)
        out = lin(x)
        out.float().sum().backward()
    with lib.autocast("cpu", dtype=lib.bfloat16):
        with lib.inference_mode():
            lin(x)
        lin(x).float().sum().backward()
    return out.requires_grad, lin.weight.grad is not None


def test_autocast_weight_cache_made_under_no_grad_keeps_the_gradient():
    # The cached cast is made with grad on (and not cached under inference mode), as in
    # PyTorch: a forward with grad after one under no_grad still reaches the weight.
    assert _weight_grad_after_a_no_grad_forward(fg) == \
        _weight_grad_after_a_no_grad_forward(torch) == (True, True)
