"""`fusegrad.multiprocessing` against `torch.multiprocessing`: `spawn`'s processes and its
errors (a raised exception with its traceback, an exit code), Hogwild training on a model in
shared memory, shared tensors written by spawned processes and passed through queues (both
sides see the writes), tensors that are not shared copied, and non-leaf tensors refused."""

from __future__ import annotations

import importlib
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import mp_workers  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.multiprocessing as fmp  # noqa: E402


def _spawn_error(mp, fn, lib: str):
    # (forked: a spawned process would import torch again, seconds each)
    with pytest.raises((mp.ProcessRaisedException, mp.ProcessExitedException)) as info:
        mp.start_processes(fn, args=(lib,), nprocs=2, start_method="fork")
    e = info.value
    lines = [line for line in str(e).splitlines() if not line.lstrip().startswith(
        ("File ", "fn(i", "^", "if i"))]
    return type(e).__name__, lines, e.error_index, getattr(e, "exit_code", None)


@pytest.mark.parametrize("fn", [mp_workers.fails, mp_workers.exits])
def test_spawn_reports_the_failing_process_as_torch(fn):
    tmp = pytest.importorskip("torch.multiprocessing")
    assert _spawn_error(fmp, fn, "fusegrad") == _spawn_error(tmp, fn, "torch")


def test_spawn_without_join_and_sharing_strategies():
    ctx = fmp.spawn(mp_workers.fails, args=("fusegrad",), nprocs=1, join=False)
    assert isinstance(ctx, fmp.ProcessContext) and len(ctx.pids()) == 1
    while not ctx.join():
        pass
    assert fmp.get_sharing_strategy() == "file_descriptor"
    assert fmp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    assert fmp.Queue is not None and fmp.get_context("spawn").Process is not None


def test_hogwild_training_updates_the_shared_model():
    fusegrad.manual_seed(0)
    model = fusegrad.nn.Linear(4, 1)
    model.share_memory()
    assert model.weight.is_shared() and model.bias.is_shared()
    xs = fusegrad.tensor(np.random.default_rng(0).standard_normal((2, 8, 4)).astype("f"))
    before = [p.detach().clone() for p in model.parameters()]
    fmp.spawn(mp_workers.train, args=("fusegrad", model, xs, 5), nprocs=1)
    # one process: the same steps as here, in this process, from the same start
    twin = fusegrad.nn.Linear(4, 1)
    with fusegrad.no_grad():
        for p, b in zip(twin.parameters(), before):
            p.copy_(b)
    mp_workers.train(0, "fusegrad", twin, xs, 5)
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    fmp.spawn(mp_workers.train, args=("fusegrad", model, xs, 5), nprocs=2)
    assert not np.array_equal(model.weight.detach().numpy(), twin.weight.detach().numpy())


def test_shared_tensors_through_spawn_and_queues():
    t = fusegrad.zeros(3).share_memory_()
    ctx = fmp.get_context("spawn")
    q = ctx.SimpleQueue()
    fmp.spawn(mp_workers.add_rank, args=("fusegrad", t, q), nprocs=2)
    assert t.tolist() == [1.0, 2.0, 0.0]
    assert sorted([q.get(), q.get()]) == [(0, True), (1, True)]
    for value, shared in ((fusegrad.ones(2).share_memory_(), True),
                          (fusegrad.ones(2), False)):
        q_in, q_out = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=mp_workers.double, args=("fusegrad", q_in, q_out))
        p.start()
        q_in.put(value)
        assert q_out.get(timeout=60) == (shared, [2.0, 2.0])
        p.join()
        assert value.tolist() == ([2.0, 2.0] if shared else [1.0, 1.0])
    # a forked process shares the memory too
    f = fusegrad.zeros(2).share_memory_()
    p = fmp.get_context("fork").Process(target=mp_workers.add_rank,
                                        args=(0, "fusegrad", f, ctx.SimpleQueue()))
    p.start()
    p.join()
    assert f.tolist() == [1.0, 0.0]


def test_non_leaf_tensor_is_refused_as_torch():
    torch = pytest.importorskip("torch")
    tmp = importlib.import_module("torch.multiprocessing")
    messages = []
    for lib, mp in ((fusegrad, fmp), (torch, tmp)):
        q = mp.get_context("spawn").SimpleQueue()
        with pytest.raises(RuntimeError) as info:
            q.put(lib.ones(2, requires_grad=True) * 2)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
