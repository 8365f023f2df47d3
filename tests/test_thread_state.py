"""Per-thread state against torch: grad mode, inference mode, saved-tensor hooks and dispatch
modes belong to the thread that sets them, a new thread starts from the defaults, anomaly mode
is process-wide, and backward runs (hooks included) with the calling thread's state.

Threads are interleaved with events, so each scenario runs the same way every time; each runs
under fusegrad and torch and the results must agree (or, for fusegrad-only objects such as its
fake-tensor mode, agree with eager)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
import torch
from compile_support import Counter
from torch.utils._python_dispatch import TorchDispatchMode

import fusegrad as fg
from fusegrad._dispatch import DispatchMode, call

MODULES = (fg, torch)


def in_thread(fn):
    """`fn()` run in a new thread; its result, or its exception raised here."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # re-raised in the calling thread
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


class Holder:
    """A thread that enters a context and holds it until `release()`: while it holds, the
    calling thread runs with the other thread inside the context."""

    def __init__(self, make_context, inside=None):
        self.entered = threading.Event()
        self.done = threading.Event()
        self.result = None
        self.error = None

        def run():
            try:
                with make_context():
                    if inside is not None:
                        self.result = inside()
                    self.entered.set()
                    self.done.wait(30)
            except BaseException as e:
                self.error = e
                self.entered.set()

        self.thread = threading.Thread(target=run)

    def __enter__(self):
        self.thread.start()
        self.entered.wait(30)
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        if self.error is not None:
            raise self.error


def both(prog):
    """`prog(T)` under fusegrad and under torch; the results must be equal."""
    got, want = prog(fg), prog(torch)
    assert got == want, (got, want)
    return got


# ---------------------------------------------------------------- grad mode


def _record_while_other_thread_in_no_grad(T):
    with Holder(T.no_grad, inside=T.is_grad_enabled) as other:
        x = T.tensor(3.0, requires_grad=True)
        y = x * x * x
        enabled, recorded = T.is_grad_enabled(), y.requires_grad
        y.backward()
    return other.result, enabled, recorded, x.grad.item()


def test_no_grad_in_another_thread_does_not_stop_recording():
    assert both(_record_while_other_thread_in_no_grad) == (False, True, True, 27.0)


def _set_grad_enabled_in_a_thread(T):
    in_thread(lambda: T.set_grad_enabled(False))  # called as a function: never undone
    here = T.is_grad_enabled() and (T.ones(1, requires_grad=True) * 2).requires_grad
    with T.no_grad():
        fresh = in_thread(T.is_grad_enabled)
        with T.enable_grad():
            inner = in_thread(T.is_grad_enabled)
    return here, fresh, inner, T.is_grad_enabled()


def test_grad_mode_set_in_a_thread_stays_there_and_new_threads_start_enabled():
    assert both(_set_grad_enabled_in_a_thread) == (True, True, True, True)


def test_grad_mode_decorator_in_one_thread_leaves_another_recording():
    def prog(T):
        inside, release = threading.Event(), threading.Event()
        seen = []

        @T.no_grad()
        def frozen():
            seen.append(T.is_grad_enabled())
            inside.set()
            release.wait(30)

        other = threading.Thread(target=frozen)
        other.start()
        inside.wait(30)
        try:
            x = T.ones(2, requires_grad=True)
            recorded = (x * 2).requires_grad
        finally:
            release.set()
            other.join()
        return seen, recorded

    assert both(prog) == ([False], True)


# ---------------------------------------------------------------- inference mode


def _inference_in_another_thread(T):
    def inside():
        return T.is_inference_mode_enabled(), T.is_grad_enabled()

    with Holder(T.inference_mode, inside=inside) as other:
        here = T.is_inference_mode_enabled(), T.is_grad_enabled()
        x = T.ones(2, requires_grad=True)
        recorded = (x * 2).requires_grad
    with T.inference_mode():
        fresh = in_thread(inside)
    return other.result, here, recorded, fresh


def test_inference_mode_is_per_thread():
    assert both(_inference_in_another_thread) == ((True, False), (False, True), True,
                                                  (False, True))


# ---------------------------------------------------------------- anomaly mode


def _anomaly_across_threads(T):
    try:
        in_thread(lambda: T.autograd.set_detect_anomaly(True, check_nan=False))
        seen = T.is_anomaly_enabled(), T.is_anomaly_check_nan_enabled()
    finally:
        T.autograd.set_detect_anomaly(False)
    return seen, T.is_anomaly_enabled(), in_thread(T.is_anomaly_enabled)


def test_anomaly_mode_is_process_wide_as_in_torch():
    assert both(_anomaly_across_threads) == ((True, False), False, False)


# ---------------------------------------------------------------- saved-tensor hooks


def _saved_hooks_across_threads(T):
    packed = {"main": 0, "other": 0}

    def hooks(name):
        def pack(t):
            packed[name] += 1
            return t

        return lambda: T.autograd.graph.saved_tensors_hooks(pack, lambda t: t)

    def forward():
        x = T.ones(3, requires_grad=True)
        y = x.exp().sin()
        y.sum().backward()
        return x.grad.tolist()

    with hooks("main")():
        in_main = forward()
        in_fresh = in_thread(forward)  # a new thread starts without hooks
    with Holder(hooks("other")):
        unhooked = forward()
    return packed, in_main == in_fresh == unhooked


def test_saved_tensor_hooks_are_per_thread():
    packed, same = both(_saved_hooks_across_threads)
    assert packed == {"main": 2, "other": 0} and same


def _disable_saved_hooks_across_threads(T):
    graph = T.autograd.graph

    def enter_hooks():
        try:
            with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                return "entered"
        except RuntimeError as e:
            return str(e)

    with graph.disable_saved_tensors_hooks("no hooks here"):
        here = enter_hooks()
        elsewhere = in_thread(enter_hooks)
    with Holder(lambda: graph.disable_saved_tensors_hooks("not in that thread")):
        while_held = enter_hooks()
    return here, elsewhere, while_held


def test_disabling_saved_tensor_hooks_is_per_thread():
    assert both(_disable_saved_hooks_across_threads) == ("no hooks here", "entered", "entered")


# ---------------------------------------------------------------- dispatch modes


class FgCounting(DispatchMode):
    def __init__(self):
        self.seen = 0

    def __fusegrad_dispatch__(self, op, args):
        self.seen += 1
        return call(op, *args)


class TorchCounting(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen += 1
        return func(*args, **(kwargs or {}))


def _counting_mode_across_threads(T):
    mode_cls = FgCounting if T is fg else TorchCounting

    def work():
        x = T.ones(2)
        return (x.exp() * 2).sum().item()

    mode = mode_cls()
    with mode:
        in_fresh = in_thread(work)
        unseen = mode.seen
    other = mode_cls()
    with Holder(lambda: other):
        here = work()
    return unseen, other.seen, in_fresh == here


def test_dispatch_mode_is_per_thread():
    unseen, other_seen, same = both(_counting_mode_across_threads)
    assert unseen == 0 and other_seen == 0 and same


def test_fake_tensor_mode_in_one_thread_leaves_another_real():
    def work():
        x = fg.ones(2, 3, requires_grad=True)
        y = (x * 2).exp().sum()
        y.backward()
        return type(y).__name__, y.item(), x.grad.numpy().tolist()

    want = work()
    with fg._subclasses.FakeTensorMode():
        assert in_thread(work) == want
    with Holder(fg._subclasses.FakeTensorMode, inside=lambda: type(fg.ones(2)).__name__) as other:
        assert work() == want
    assert other.result == "FakeTensor"


def test_a_thread_that_ends_inside_a_mode_leaves_others_real():
    in_thread(lambda: fg._subclasses.FakeTensorMode().__enter__())  # never exited
    x = fg.ones(2, requires_grad=True)
    y = (x * 3).sum()
    y.backward()
    assert type(y) is fg.Tensor and y.item() == 6.0 and x.grad.tolist() == [3.0, 3.0]


# ---------------------------------------------------------------- the engine


def test_hook_sees_grad_enabled_in_a_new_thread():
    def prog(T):
        x = T.ones(1, requires_grad=True)
        seen = []

        def hook(g):
            seen.append(in_thread(T.is_grad_enabled))
            return g

        x.register_hook(hook)
        (x * 2).sum().backward()
        return seen

    assert both(prog) == [True]


def _hooks_that_leave_state_changed(T):
    log = []

    def leak(value):
        def hook(g):
            log.append((T.is_grad_enabled(), T.is_inference_mode_enabled()))
            T.set_grad_enabled(value)
            return g
        return hook

    x = T.ones(2, requires_grad=True)
    y = x * 2
    z = y.exp()
    w = z * 3
    w.register_hook(leak(True))  # runs first: leaves grad mode on
    z.register_hook(leak(False))
    y.register_hook(leak(True))
    w.sum().backward()
    after = T.is_grad_enabled()
    z = (x * 2).exp()
    z.register_hook(leak(False))
    z.sum().backward(create_graph=True)
    log.append(T.is_grad_enabled())
    return log, after


def test_every_node_runs_with_the_callers_state_and_the_caller_gets_it_back():
    log, after = both(_hooks_that_leave_state_changed)
    assert log == [(False, False)] * 3 + [(True, False), True] and after


def _backward_with_the_callers_state(T):
    packed = []
    graph = T.autograd.graph
    x = T.tensor([0.5, 1.5], requires_grad=True)
    y = (x * x).sin().sum()
    with graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
        (g,) = T.autograd.grad(y, x, create_graph=True)
    during = len(packed)
    (gg,) = T.autograd.grad(g.sum(), x)

    def failing(grad):
        T.set_grad_enabled(True)
        raise ValueError("hook failed")

    z = x.exp()
    z.register_hook(failing)
    total = z.sum()
    with T.no_grad():
        try:
            total.backward()
        except ValueError as e:
            error = str(e)
        still_off = T.is_grad_enabled()
    return during > 0, np.round(gg.tolist(), 12).tolist(), error, still_off


def test_backward_uses_the_callers_hooks_and_restores_after_an_error():
    assert both(_backward_with_the_callers_state)[0::2] == (True, "hook failed")


# ---------------------------------------------------------------- compiled code


def test_compiled_guard_reads_the_calling_threads_grad_mode():
    def f(x):
        return x * 2 + 1

    compiled = fg.compile(f, backend=Counter())
    x = fg.ones(3, requires_grad=True)
    assert compiled(x).requires_grad
    with Holder(fg.no_grad):
        got = compiled(x)
    assert got.requires_grad and got.grad_fn is not None
    assert in_thread(lambda: compiled(x).requires_grad)
    with fg.no_grad():
        assert not compiled(x).requires_grad
        assert in_thread(lambda: compiled(x).requires_grad)


# ---------------------------------------------------------------- training in threads


STEPS = 300


def _mlp(T, seed):
    rng = np.random.default_rng(seed)
    model = T.nn.Sequential(T.nn.Linear(4, 16), T.nn.Tanh(), T.nn.Linear(16, 1))
    with T.no_grad():
        for p in model.parameters():
            p.copy_(T.from_numpy(rng.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))
    data = rng.standard_normal((32, 4)).astype(np.float32)
    target = np.sin(data.sum(1, keepdims=True)).astype(np.float32)
    return model, T.from_numpy(data), T.from_numpy(target)


def _train(T, seed):
    model, data, target = _mlp(T, seed)
    opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = T.nn.functional.mse_loss(model(data), target)
        loss.backward()
        opt.step()
    return [p.detach().numpy().copy() for p in model.parameters()]


def _evaluate_without_grad(T, stop):
    model, data, _ = _mlp(T, 99)
    while not stop.is_set():
        with T.no_grad():
            model(data).sum()


@pytest.fixture
def busy_switching():
    """Switch threads every few bytecodes, so concurrent steps interleave inside ops."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def test_two_threads_train_as_if_alone(busy_switching):
    alone = [_train(fg, seed) for seed in (1, 2)]
    results = [None, None]
    errors = []
    stop = threading.Event()

    def trainer(i, seed):
        try:
            results[i] = _train(fg, seed)
        except BaseException as e:
            errors.append(e)

    trainers = [threading.Thread(target=trainer, args=(i, s)) for i, s in enumerate((1, 2))]
    evaluator = threading.Thread(target=_evaluate_without_grad, args=(fg, stop))
    evaluator.start()
    for t in trainers:
        t.start()
    for t in trainers:
        t.join()
    stop.set()
    evaluator.join()
    if errors:
        raise errors[0]
    for got, want in zip(results, alone):
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes()  # bit-identical
    reference = _train(torch, 1)
    for g, w in zip(results[0], reference):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_threads_switching_modes_at_once_keep_the_counts_exact(busy_switching):
    """The process-wide counts that spare the fast path its thread-local reads lose nothing
    when many threads change their state at once: each leaves them as it found them."""
    from fusegrad._thread_state import active

    before = len(active.grad_off), len(active.modes), len(active.saved_hooks)
    x = fg.ones(3, requires_grad=True)

    def churn():
        for _ in range(300):
            with fg.no_grad():
                fg.set_grad_enabled(True)
                fg.set_grad_enabled(False)
            with fg._subclasses.FakeTensorMode(), fg.autograd.graph.saved_tensors_hooks(lambda t: t,
                                                                            lambda t: t):
                pass
            (x * 2).sum().backward()

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(active.grad_off), len(active.modes), len(active.saved_hooks)) == before
    assert x.grad.tolist() == [2400.0] * 3
