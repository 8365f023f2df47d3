"""`fusegrad.futures` against `torch.futures`: results, errors, callbacks, chaining,
collect_all / wait_all, completion from another thread, and `jit.fork` / `jit.wait`."""

from __future__ import annotations

import os
import threading
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402


def _run(lib):
    from importlib import import_module

    futures = import_module(f"{lib.__name__}.futures")
    Future = futures.Future
    out = []
    f = Future()
    out.append(f.done())
    f.set_result(3)
    out += [f.done(), f.value(), f.wait()]
    with pytest.raises(RuntimeError) as info:
        f.set_result(4)
    out.append(str(info.value))
    chained = f.then(lambda fut: fut.wait() * 2)
    out.append(chained.wait())
    failed = Future()
    failed.set_exception(ValueError("boom"))
    for read in (failed.wait, failed.value):
        with pytest.raises(ValueError, match="boom"):
            read()
    with pytest.raises(AssertionError) as info:
        Future().set_exception("x")
    out.append(str(info.value))
    after = failed.then(lambda fut: fut.wait())
    with pytest.raises(RuntimeError) as info:
        after.wait()
    out.append(str(info.value).splitlines()[0])
    calls = []
    later = Future()
    later.add_done_callback(lambda fut: calls.append(fut.value()))
    later.add_done_callback(lambda fut: calls.append(fut.value() + 1))
    out.append(list(calls))
    later.set_result(9)
    out.append(list(calls))
    both = futures.collect_all([f, chained])
    out.append([x.wait() for x in both.wait()])
    out.append(futures.wait_all([f, chained]))
    out.append(futures.wait_all([]))
    # completed from another thread while this one waits
    pending = Future()
    threading.Thread(target=lambda: (time.sleep(0.05), pending.set_result("late"))).start()
    out.append(pending.wait())
    fut = lib.jit.fork(lambda a, b=1: a + b, lib.ones(2), b=2)
    out += [lib.jit.wait(fut).tolist(), fut.done()]
    return out


def test_futures_as_pytorch():
    assert _run(fusegrad) == _run(torch)


def test_fork_raises_at_wait():
    def bad(x):
        raise KeyError("missing")

    fut = fusegrad.jit.fork(bad, 1)
    assert fut.done()
    with pytest.raises(KeyError):
        fusegrad.jit.wait(fut)
