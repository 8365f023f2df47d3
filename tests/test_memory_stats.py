"""Tensor memory statistics (`fusegrad.cpu.memory_*`): the figures move by exactly the
storage sizes PyTorch reports for the same tensors; and the `cuda`/`cpu` namespaces answer
as PyTorch's CPU build does (values, error types and messages, warnings)."""

from __future__ import annotations

import gc
import subprocess
import sys
import warnings

import pytest
import torch

import fusegrad

_MAKERS = [
    ("empty", lambda lib: lib.empty(1000)),
    ("zeros f64", lambda lib: lib.zeros(3, 5, dtype=lib.float64)),
    ("int8 arange", lambda lib: lib.arange(77, dtype=lib.int8)),
    ("bool", lambda lib: lib.ones(9, dtype=lib.bool)),
    ("op result", lambda lib: lib.ones(4, 6) * 3),
    ("matmul", lambda lib: lib.ones(7, 3) @ lib.ones(3, 2)),
]


@pytest.mark.parametrize("name,make", _MAKERS, ids=[m[0] for m in _MAKERS])
def test_figures_move_by_storage_size(name, make):
    expected = make(torch).untyped_storage().nbytes()  # the oracle: PyTorch's storage size
    mem = fusegrad.cpu
    gc.collect()
    before = mem.memory_allocated()
    count = mem.memory_stats()["allocation.all.current"]
    t = make(fusegrad)
    assert mem.memory_allocated() - before == expected
    assert mem.memory_stats()["allocation.all.current"] == count + 1
    assert mem.max_memory_allocated() >= before + expected
    view = t.view(-1)[1:]  # views and detach share the storage: nothing new
    alias = t.detach()
    assert mem.memory_allocated() - before == expected
    del t, view
    assert mem.memory_allocated() - before == expected  # `alias` still holds the storage
    del alias
    assert mem.memory_allocated() == before
    assert mem.memory_stats()["allocation.all.current"] == count


def test_peak_and_totals():
    mem = fusegrad.cpu
    gc.collect()
    mem.reset_peak_memory_stats()
    start = mem.memory_stats()
    base = start["allocated_bytes.all.current"]
    assert start["allocated_bytes.all.peak"] == base
    a = fusegrad.empty(2048, dtype=fusegrad.uint8)
    b = fusegrad.empty(1024, dtype=fusegrad.uint8)
    del a
    c = fusegrad.empty(512, dtype=fusegrad.uint8)
    stats = mem.memory_stats()
    assert stats["allocated_bytes.all.current"] == base + 1536
    assert stats["allocated_bytes.all.peak"] == base + 3072
    assert mem.max_memory_allocated() == base + 3072
    assert stats["allocated_bytes.all.allocated"] - start["allocated_bytes.all.allocated"] \
        == 3584
    assert stats["allocated_bytes.all.freed"] - start["allocated_bytes.all.freed"] == 2048
    assert stats["allocation.all.allocated"] - start["allocation.all.allocated"] == 3
    assert stats["allocation.all.freed"] - start["allocation.all.freed"] == 1
    mem.reset_peak_memory_stats()
    assert mem.max_memory_allocated() == base + 1536
    del b, c


def test_fake_tensors_hold_no_memory():
    mem = fusegrad.cpu
    gc.collect()
    before = mem.memory_allocated()
    with fusegrad._subclasses.FakeTensorMode():
        fake = fusegrad.ones(1000) * 2
    assert type(fake).__name__ == "FakeTensor"
    assert mem.memory_allocated() == before


def test_tensors_made_before_the_first_query_are_counted():
    """Counting starts at the first query; the tensors alive then are found and counted."""
    code = (
        "import fusegrad\n"
        "keep = fusegrad.empty(250000)\n"  # 1 MB made before accounting starts
        "n = fusegrad.cpu.memory_allocated()\n"
        "assert n >= 1000000, n\n"
        "del keep\n"
        "assert fusegrad.cpu.memory_allocated() == n - 1000000\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_storages_freed_by_the_collector_inside_accounting():
    """A garbage collection can run inside the accounting itself (any allocation may start
    one) and free counted storages there: that must neither deadlock nor miscount. The
    collector is made to run at almost every allocation while cycles holding tensors die,
    under a profiler recording memory (whose listener folds the figures on every event)."""
    code = (
        "import gc, fusegrad\n"
        "from fusegrad.profiler import profile\n"
        "class Cycle:\n"
        "    def __init__(self):\n"
        "        self.me = self\n"
        "        self.t = fusegrad.ones(64)\n"
        "base = fusegrad.cpu.memory_allocated()\n"
        "with profile(profile_memory=True) as prof:\n"
        "    gc.set_threshold(1, 1, 1)\n"
        "    for _ in range(400):\n"
        "        Cycle()\n"
        "        fusegrad.ones(8) * 2\n"
        "    gc.set_threshold(700, 10, 10)\n"
        "gc.collect()\n"
        "assert fusegrad.cpu.memory_allocated() == base, fusegrad.cpu.memory_allocated()\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.strip() == "ok", out.stderr


def _outcome(call):
    """What a call returns, or the type and text of what it raises, and its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = call()
            result = ("value", value if not hasattr(value, "__enter__") else "context")
        except Exception as e:  # the error is what is compared
            result = ("raises", type(e).__name__, str(e))
    return result, [(w.category.__name__, str(w.message)) for w in caught]


_CUDA_CALLS = [
    "is_available()", "device_count()", "is_initialized()", "memory_allocated()",
    "memory_allocated(0)", "memory_allocated('cuda:0')", "memory_reserved()",
    "max_memory_allocated()", "max_memory_reserved()", "memory_cached()",
    "max_memory_cached()", "reset_peak_memory_stats()", "reset_max_memory_allocated()",
    "reset_max_memory_cached()", "reset_accumulated_memory_stats()", "memory_stats()",
    "memory_stats_as_nested_dict()", "memory_summary()", "mem_get_info()", "empty_cache()",
    "synchronize()", "current_device()", "get_device_name()", "get_device_name(0)",
    "get_device_capability()", "get_device_properties(0)", "set_device(0)",
    "set_device(-1)", "set_device('cpu')", "set_device(None)", "Stream()",
    "Stream(priority=0)", "stream(None)", "Event()", "Event(enable_timing=True)",
    "current_stream()", "default_stream()", "init()", "is_bf16_supported()",
    "manual_seed(0)", "manual_seed_all(0)", "seed()", "initial_seed()", "get_rng_state()",
    "device(0)", "device('cpu')", "get_arch_list()", "_is_compiled()", "ipc_collect()",
    "set_stream(None)",
]


@pytest.mark.parametrize("call", _CUDA_CALLS)
def test_cuda_namespace_answers_as_pytorch_cpu_build(call):
    ours = _outcome(lambda: eval("fusegrad.cuda." + call))
    theirs = _outcome(lambda: eval("torch.cuda." + call))
    assert ours == theirs


@pytest.mark.parametrize("index", [0, -1, None, "cuda:1"])
def test_cuda_device_context_as_pytorch(index):
    def enter(lib):
        def run():
            with lib.cuda.device(index):
                return "entered"
        return run

    assert _outcome(enter(fusegrad)) == _outcome(enter(torch))


def test_cuda_stream_context_does_nothing():
    with fusegrad.cuda.stream(None) as s, torch.cuda.stream(None) as t:
        assert s is t is None


_CPU_CALLS = ["is_available()", "device_count()", "current_device()", "synchronize()",
              "synchronize('cpu')", "is_initialized()", "set_device(0)", "set_device('cpu')",
              "Event().query()", "Event().record()", "Event().synchronize()", "Event().wait()",
              "Stream().wait_stream(Stream())", "Stream().record_event()",
              "stream(None)"]


@pytest.mark.parametrize("call", _CPU_CALLS)
def test_cpu_namespace_as_pytorch(call):
    ours = _outcome(lambda: eval(call, vars(fusegrad.cpu)))
    theirs = _outcome(lambda: eval(call, vars(torch.cpu)))
    assert ours == theirs


def test_cpu_stream_context_sets_the_current_stream():
    for lib in (fusegrad, torch):
        default = lib.cpu.current_stream()
        s = lib.cpu.Stream()
        with lib.cpu.stream(s):
            assert lib.cpu.current_stream() is s
        assert lib.cpu.current_stream() is default
