"""The profiler against PyTorch's: op and backward-node rows of a LeNet-5 training run, the
summary table's layout, schedules, the Chrome trace, errors, and no recording when off."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import fusegrad
from fusegrad import _dispatch
from fusegrad.profiler import ProfilerAction, ProfilerActivity, profile, record_function


def _lenet(lib):
    nn = lib.nn

    class LeNet5(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 6, 5, padding=2)
            self.c2 = nn.Conv2d(6, 16, 5)
            self.f1 = nn.Linear(400, 120)
            self.f2 = nn.Linear(120, 84)
            self.f3 = nn.Linear(84, 10)

        def forward(self, x):
            x = lib.max_pool2d(lib.relu(self.c1(x)), 2)
            x = nn.functional.max_pool2d(lib.relu(self.c2(x)), 2)
            x = lib.flatten(x, 1)
            return self.f3(lib.relu(self.f2(lib.relu(self.f1(x)))))

    return LeNet5()


def _train_profiled(lib, **kwargs):
    lib.manual_seed(0)
    model = _lenet(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.01)
    x = lib.randn(4, 1, 28, 28)
    y = lib.tensor([1, 2, 3, 4])
    with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU],
                              **kwargs) as prof:
        for _ in range(3):
            with lib.profiler.record_function("train_step"):
                opt.zero_grad()
                loss = lib.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
    return prof


# Ops that both libraries run as one kernel each (PyTorch's composites around them, such as
# aten::linear or aten::conv2d, and its internal ops, such as aten::empty, are not compared).
_KERNELS = ["aten::addmm", "aten::convolution", "aten::relu", "aten::max_pool2d_with_indices",
            "aten::_log_softmax", "aten::nll_loss_forward", "aten::t", "aten::mm"]


def _is_compared(key: str) -> bool:
    return (key in _KERNELS or key.endswith("Backward0") or "AccumulateGrad" in key
            or key.startswith(("autograd::engine::evaluate_function", "Optimizer.",
                               "train_step")))


def test_lenet_rows_match_pytorch():
    theirs = {e.key: e.count for e in _train_profiled(torch).key_averages()
              if _is_compared(e.key)}
    ours = {e.key: e.count for e in _train_profiled(fusegrad).key_averages()
            if _is_compared(e.key)}
    assert ours == theirs
    assert "autograd::engine::evaluate_function: ConvolutionBackward0" in ours
    assert theirs["aten::addmm"] == 9 and theirs["ConvolutionBackward0"] == 6


def test_lenet_table_prints_pytorch_columns():
    prof = _train_profiled(fusegrad, record_shapes=True, profile_memory=True)
    ref = _train_profiled(torch, record_shapes=True, profile_memory=True)
    for kwargs in ({}, {"group_by_input_shape": True}):
        ours = prof.key_averages(**kwargs).table(sort_by="self_cpu_time_total", row_limit=10)
        theirs = ref.key_averages(**kwargs).table(sort_by="self_cpu_time_total",
                                                  row_limit=10)
        our_lines, their_lines = ours.splitlines(), theirs.splitlines()
        assert our_lines[1].split() == their_lines[1].split()  # the header row
        assert len(our_lines) == len(their_lines) == 15
        assert our_lines[-1].startswith("Self CPU time total: ")
    headers = ours.splitlines()[1]
    assert "CPU Mem" in headers and "Input Shapes" in headers


def _events(lib, specs):
    """Events built from (name, start, end, parent index, memory, shapes) tuples, in the
    library's own FunctionEvent, so both tables are made from the same figures."""
    from importlib import import_module

    util = import_module("torch.autograd.profiler_util" if lib is torch
                         else "fusegrad.profiler._events")
    events = []
    for i, (name, start, end, parent, mem, shapes) in enumerate(specs):
        e = util.FunctionEvent(i, name, 1, start, end, input_shapes=shapes, stack=[],
                               cpu_memory_usage=mem)
        if parent is not None:
            events[parent].append_cpu_child(e)
            e.set_cpu_parent(events[parent])
        events.append(e)
    result = util.EventList(events, profile_memory=True)
    result._tree_built = True  # parents and children are set above
    return result


_SPECS = [
    ("outer_block", 0.0, 2500.0, None, 4096 + 120, []),
    ("aten::mm", 10.0, 1510.0, 0, 4096, [[3, 4], [4, 5]]),
    ("aten::mm", 1600.0, 1610.5, 0, 0, [[5, 4], [4, 5]]),
    ("autograd::engine::evaluate_function: AddmmBackward0", 1700, 2400, 0, 120, []),
    ("AddmmBackward0", 1710.0, 2390.0, 3, 120, [[2, 3]]),
    ("aten::sum", 1720.0, 1725.25, 4, -2 * 1024 * 1024 - 7, [[2, 3], []]),
]


@pytest.mark.parametrize("kwargs", [
    {}, {"sort_by": "self_cpu_time_total", "row_limit": 3}, {"sort_by": "cpu_time_total"},
    {"sort_by": "cpu_memory_usage", "max_name_column_width": 20}, {"time_unit": "ms"},
    {"header": "TITLE", "top_level_events_only": True}, {"sort_by": "count", "row_limit": -1},
])
@pytest.mark.parametrize("group_by_shapes", [False, True])
def test_table_text_equals_pytorch(kwargs, group_by_shapes):
    tables = []
    for lib in (torch, fusegrad):
        averages = _events(lib, _SPECS).key_averages(group_by_input_shapes=group_by_shapes)
        tables.append(averages.table(**kwargs))
    assert tables[1] == tables[0]


def test_unknown_sort_key_raises_as_pytorch():
    with pytest.raises(AttributeError) as theirs:
        _events(torch, _SPECS).key_averages().table(sort_by="nope")
    with pytest.raises(AttributeError) as ours:
        _events(fusegrad, _SPECS).key_averages().table(sort_by="nope")
    assert str(ours.value) == str(theirs.value)


def test_nesting_and_record_function_decorator():
    @record_function("helper")
    def helper(t):
        return t.exp()

    a = fusegrad.ones(2, 2, requires_grad=True)
    with profile() as prof:
        with record_function("outer"):
            helper(a * 2).sum().backward()
    by_name = {e.name: e for e in prof.events()}
    assert by_name["aten::exp"].cpu_parent is by_name["helper"]
    assert by_name["helper"].cpu_parent is by_name["outer"]
    inner = by_name["ExpBackward0"]
    assert inner.cpu_parent.name == "autograd::engine::evaluate_function: ExpBackward0"
    assert by_name["outer"].cpu_time_total >= by_name["helper"].cpu_time_total
    # record_function outside a profiler records nothing and still works as a decorator
    assert helper(fusegrad.zeros(1)).item() == 1.0


def test_recording_stops_and_costs_nothing_after_exit():
    a = fusegrad.ones(3)
    with pytest.raises(ValueError):
        with profile():
            a.add(1)
            raise ValueError("inside")
    assert _dispatch.observer() is None
    assert not fusegrad._thread_state.local.modes
    with profile() as prof:
        a.add(1)
    a.mul(2)  # after the profiler: not recorded
    assert [e.name for e in prof.events()] == ["aten::add"]


@pytest.mark.parametrize("kwargs", [
    dict(wait=1, warmup=1, active=2, repeat=2, skip_first=1),
    dict(wait=0, warmup=1, active=1), dict(wait=2, warmup=0, active=3, repeat=1),
    dict(wait=1, warmup=2, active=1, skip_first_wait=1),
])
def test_schedule_actions_equal_pytorch(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = fusegrad.profiler.schedule(**kwargs)
        theirs = torch.profiler.schedule(**kwargs)
    assert [ours(i).name for i in range(16)] == [theirs(i).name for i in range(16)]


def test_schedule_errors_and_warnings_equal_pytorch():
    with pytest.raises(AssertionError) as theirs:
        torch.profiler.schedule(wait=-1, warmup=0, active=0)
    with pytest.raises(AssertionError) as ours:
        fusegrad.profiler.schedule(wait=-1, warmup=0, active=0)
    assert str(ours.value) == str(theirs.value)
    with pytest.warns(UserWarning, match="Profiler won't be using warmup"):
        fusegrad.profiler.schedule(wait=0, warmup=0, active=1)


@pytest.mark.parametrize("steps", [0, 1, 2, 3, 5, 9])
def test_on_trace_ready_follows_the_schedule_as_pytorch(steps):
    def run(lib):
        saved = []

        def ready(prof):
            names = {e.name for e in prof.events()}
            saved.append((sorted(n for n in names if n in ("aten::mul", "ProfilerStep*")),
                          sum(e.name == "ProfilerStep*" for e in prof.events())))

        a = lib.ones(3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = lib.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
            with lib.profiler.profile(schedule=sched, on_trace_ready=ready) as prof:
                for i in range(steps):
                    a.mul(i + 1)
                    prof.step()
        return saved, prof.step_num

    assert run(fusegrad) == run(torch)


def test_step_event_names_in_the_trace(tmp_path):
    sched = fusegrad.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)
    traces = []
    handler = fusegrad.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")
    with profile(schedule=sched, on_trace_ready=lambda p: (handler(p), traces.append(1))) \
            as prof:
        for _ in range(4):
            fusegrad.ones(2).neg()
            prof.step()
    files = sorted(tmp_path.iterdir())
    assert len(files) == 1 and files[0].name.startswith("w.")
    assert files[0].name.endswith(".pt.trace.json")
    doc = json.loads(files[0].read_text())
    steps = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    assert steps == ["ProfilerStep#1", "ProfilerStep#2"]


def test_chrome_trace_has_one_event_per_op(tmp_path):
    prof = _train_profiled(fusegrad, record_shapes=True, profile_memory=True)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    events = prof.events()
    assert [e["name"] for e in spans] == [e.name for e in events]
    assert all(e["cat"] in ("cpu_op", "user_annotation") for e in spans)
    assert all(e["dur"] >= 0 and isinstance(e["ts"], float) for e in spans)
    addmm = next(e for e in spans if e["name"] == "aten::addmm")
    # PyTorch lists every schema argument: beta and alpha (numbers) as []
    assert addmm["args"]["Input Dims"] == [[120], [4, 400], [400, 120], [], []]
    memory = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    assert memory and all(e["ph"] == "i" for e in memory)
    assert doc["schemaVersion"] == 1 and doc["traceName"] == str(path)
    assert not list(tmp_path.glob(".*"))  # written at once: no temporary file left


def test_memory_columns_use_storage_accounting():
    a = fusegrad.ones(256)
    with profile(profile_memory=True) as prof:
        with record_function("block"):
            b = a * 2  # 1 KiB, kept
            c = a + 1  # 1 KiB, freed below
            del c
    by_name = {e.key: e for e in prof.key_averages()}
    assert by_name["aten::mul"].cpu_memory_usage == 1024
    assert by_name["aten::add"].self_cpu_memory_usage == 1024
    assert by_name["block"].cpu_memory_usage == 1024  # +1024 +1024 -1024
    assert by_name["block"].self_cpu_memory_usage == -1024
    del b


def test_activities_and_uninitialised_errors_as_pytorch():
    def error(lib, fn):
        with pytest.raises(Exception) as info:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(lib)
        return type(info.value), str(info.value)

    cases = [
        lambda lib: lib.profiler.profile().events(),
        lambda lib: lib.profiler.profile().key_averages(),
        lambda lib: lib.profiler.profile(
            activities=[lib.profiler.ProfilerActivity.CUDA]).__enter__(),
    ]
    for case in cases:
        assert error(fusegrad, case) == error(torch, case)
    with pytest.warns(UserWarning, match="CUDA is not available, disabling CUDA profiling"):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            pass
    assert str(ProfilerActivity.CPU) == str(torch.profiler.ProfilerActivity.CPU)
    assert [a.name for a in ProfilerAction] == list(torch.profiler.ProfilerAction.__members__)


def test_autograd_profiler_spelling():
    a = fusegrad.ones(4, 4)
    with fusegrad.autograd.profiler.profile(record_shapes=True) as prof:
        a.mm(a).relu()
    assert [e.name for e in prof.function_events] == ["aten::mm", "aten::relu"]
    lines = prof.table().splitlines()
    assert lines[1].split()[:3] == ["Name", "Self", "CPU"]
    assert prof.self_cpu_time_total > 0
    assert prof.key_averages()[0].count == 1
    with fusegrad.autograd.profiler.profile(enabled=False) as off:
        a.mm(a)
    with torch.autograd.profiler.profile(enabled=False) as torch_off:
        torch.ones(1)
    assert off is None and torch_off is None
    with fusegrad.autograd.profiler.record_function("x") as r:
        assert isinstance(r, fusegrad.autograd.profiler.record_function)


def test_with_stack_groups_by_source():
    with profile(with_stack=True) as prof:
        fusegrad.ones(2).exp()
    event = next(e for e in prof.events() if e.name == "aten::exp")
    assert event.stack and __file__ in event.stack[0]
    table = prof.key_averages(group_by_stack_n=2).table()
    assert "Source Location" in table.splitlines()[1]


def _lenet_grads(profiled: bool):
    fusegrad.manual_seed(0)
    model = _lenet(fusegrad)
    x = fusegrad.randn(2, 1, 28, 28)
    with profile(profile_memory=True) if profiled else _null():
        fusegrad.nn.functional.cross_entropy(model(x), fusegrad.tensor([0, 1])).backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_profiling_changes_no_result_and_no_path():
    """The profiler only watches: same gradients bit for bit, and code that takes another
    path under a computing mode (NumPy backward kernels, fake factories) does not switch."""
    import numpy as np

    for ours, plain in zip(_lenet_grads(True), _lenet_grads(False)):
        np.testing.assert_array_equal(ours, plain)
    from fusegrad._fake import FakeTensor

    with profile() as prof:
        x = FakeTensor.from_tensor(fusegrad.zeros(3, 4, requires_grad=True))
        (x * 2).sum().backward()
        assert isinstance(x.grad, FakeTensor)
        a = fusegrad.ones(1, 1, 6, 6, requires_grad=True)
        fusegrad.nn.functional.max_pool2d(a, 2).sum().backward()
    names = {e.name for e in prof.events()}
    # the NumPy backward of max pooling runs as without a profiler: no ops inside its node
    node = next(e for e in prof.events() if e.name == "MaxPool2DWithIndicesBackward0")
    assert node.cpu_children == [] and "aten::mul" in names
