"""Training-loop periphery against PyTorch: a `Sampler` subclass passing `data_source` up,
the profiler's FLOPs estimates (events, averages, the table's scaled column), its events'
device type, the Chrome trace's metadata keys and the events of tensor factories."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import fusegrad

LIBS = pytest.mark.parametrize("lib", [fusegrad, torch], ids=["fusegrad", "torch"])


def _both(fn):
    """fn(torch) and fn(fusegrad), compared."""
    want = fn(torch)
    got = fn(fusegrad)
    assert got == want
    return got


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the type and text are what is compared)
        return type(e).__name__, str(e)
    return None


# ------------------------------------------------------------------------------- samplers


def test_sampler_base_takes_no_data_source():
    """PyTorch 2.13's `Sampler` has no `__init__`: passing `data_source` up is object's
    TypeError; a subclass that does not is unaffected."""

    def prog(lib):
        data = lib.utils.data

        class Reversed(data.Sampler):
            def __init__(self, source):
                super().__init__(source)

        class Plain(data.Sampler):
            def __iter__(self):
                return iter([2, 0])

        loader = data.DataLoader(list(range(3)), sampler=Plain(), batch_size=None)
        return _error(lambda: Reversed(range(3))), [int(b) for b in loader]

    _both(prog)


# ------------------------------------------------------------------------------- profiler


def _flops_program(lib):
    F = lib.nn.functional
    a, b = lib.ones(3, 4), lib.ones(4, 5)
    with lib.profiler.profile(with_flops=True) as prof:
        lib.mm(a, b)
        lib.addmm(lib.ones(5), a, b)
        lib.bmm(lib.ones(2, 3, 4), lib.ones(2, 4, 5))
        lib.baddbmm(lib.ones(2, 3, 5), lib.ones(2, 3, 4), lib.ones(2, 4, 5))
        _ = a + a, a * 2, a - a, lib.mul(lib.ones(4), a)
        a.add_(1)
        F.conv2d(lib.ones(2, 4, 6, 6), lib.ones(6, 2, 3, 3), stride=2, padding=1, groups=2)
        F.conv2d(lib.ones(2, 4, 6, 7), lib.ones(6, 4, 3, 2), None, 1, 0, 2)
        lib.nn.Linear(4, 2)(a)
    return prof


def test_flops_of_events_and_averages():
    def prog(lib):
        prof = _flops_program(lib)
        events = sorted((e.name, e.flops) for e in prof.events() if e.flops)
        averages = sorted((e.key, e.flops) for e in prof.key_averages() if e.flops)
        total = prof.events().total_average().flops
        return events, averages, total, prof.with_flops, prof.record_shapes

    events, _, total, _, _ = _both(prog)
    assert ("aten::conv2d", 3888) in events and total > 0


def test_flops_table_column():
    """The column's unit is scaled by the smallest figure; ops without one show '--'."""

    def prog(lib):
        rows = []
        for n in (3, 300):
            with lib.profiler.profile(with_flops=True) as prof:
                lib.mm(lib.ones(n, 4 * n), lib.ones(4 * n, 5 * n))
                lib.ones(2).sum()
            lines = prof.key_averages().table().splitlines()
            header = lines[1].split()
            body = {ln.split()[0]: ln.split()[-1] for ln in lines[3:-2]}
            rows.append((header[-2:], body["aten::mm"], body["aten::sum"]))
        with lib.profiler.profile() as prof:  # no FLOPs asked: no column
            lib.mm(lib.ones(2, 2), lib.ones(2, 2))
        rows.append(prof.key_averages().table().splitlines()[1].split()[-3:])
        return rows

    rows = _both(prog)
    assert rows[0][0] == ["Total", "KFLOPs"] and rows[1][0] == ["Total", "GFLOPs"]


def test_flops_with_shapes_column_order():
    def prog(lib):
        with lib.profiler.profile(with_flops=True, record_shapes=True) as prof:
            lib.mm(lib.ones(3, 4), lib.ones(4, 5))
        lines = prof.key_averages(group_by_input_shape=True).table().splitlines()
        row = [ln for ln in lines if "aten::mm" in ln][0]
        return lines[1].split("  ")[-4:], row.split()[-3:]

    _both(prog)


def test_event_device_type():
    def prog(lib):
        with lib.profiler.profile() as prof:
            lib.mm(lib.ones(2, 2), lib.ones(2, 2))
        event = [e for e in prof.events() if e.name == "aten::mm"][0]
        average = [e for e in prof.key_averages() if e.key == "aten::mm"][0]
        kind = event.device_type
        return (str(kind), repr(kind), kind.name, kind.value, kind == 0, str(average.device_type),
                event.kernels, type(event.device_index).__name__,
                lib.profiler.DeviceType.CUDA.value, lib.profiler.DeviceType.MTIA.value)

    _both(prog)


def test_chrome_trace_metadata_keys(tmp_path):
    def prog(lib):
        out = []
        for flags in ({}, {"with_flops": True},
                      {"profile_memory": True, "record_shapes": True, "with_stack": True,
                       "with_modules": True}):
            with lib.profiler.profile(**flags) as prof:
                lib.mm(lib.ones(2, 2), lib.ones(2, 2))
            path = tmp_path / f"{lib.__name__}.json"
            prof.export_chrome_trace(str(path))
            doc = json.loads(path.read_text())
            out.append(([k for k in doc if k not in ("baseTimeNanoseconds", "displayTimeUnit")],
                        len(doc["trace_id"]), doc.get("with_flops")))
        with lib.profiler.profile(custom_trace_id_callback=lambda: "run-7") as prof:
            lib.ones(1)
        prof.export_chrome_trace(str(path))
        out.append(json.loads(path.read_text())["trace_id"])
        return out

    _both(prog)


def test_factory_events():
    """Each factory call is one top-level event named as PyTorch's."""

    def prog(lib):
        x = lib.ones(3)
        calls = [
            lambda: lib.ones(3), lambda: lib.zeros(3, dtype=lib.int64), lambda: lib.randn(3),
            lambda: lib.rand(3), lambda: lib.empty(3), lambda: lib.full((3,), 2.0),
            lambda: lib.arange(3), lambda: lib.ones_like(x), lambda: lib.zeros_like(x),
            lambda: lib.randn_like(x), lambda: lib.full_like(x, 2), lambda: lib.eye(3),
            lambda: lib.linspace(0, 1, 5), lambda: lib.randint(0, 5, (3,)),
            lambda: lib.randperm(4), lambda: x.new_zeros(2), lambda: x.new_full((2,), 1.0),
            lambda: lib.normal(0.0, 1.0, (3,)), lambda: lib.scalar_tensor(1.0),
        ]
        out = []
        for call in calls:
            with lib.profiler.profile() as prof:
                call()
            out.append([e.name for e in prof.events() if e.cpu_parent is None])
        for call in (lambda: lib.empty_like(x), lambda: x.new_empty(2)):
            with lib.profiler.profile() as prof:
                call()
            out.append([(e.name, [c.name for c in e.cpu_children]) for e in prof.events()
                        if e.cpu_parent is None])
        return out

    _both(prog)


@LIBS
def test_factories_unswapped_after_profiling(lib):
    """Outside a profile the factories are the plain functions again (nothing recorded, the
    same objects as before)."""
    before = lib.zeros
    with lib.profiler.profile():
        lib.zeros(2)
    assert lib.zeros is before
    assert lib.zeros(2).tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------------- amp


def test_grad_scaler_refuses_fp16_gradients():
    def prog(lib):
        model = lib.nn.Linear(2, 1).half()
        opt = lib.optim.SGD(model.parameters(), lr=1.0)
        scaler = lib.amp.GradScaler("cpu")
        scaler.scale(model(lib.ones(1, 2).half()).float().sum()).backward()
        return _error(lambda: scaler.unscale_(opt))

    assert _both(prog) == ("ValueError", "Attempting to unscale FP16 gradients.")


def test_autocast_decorator():
    def prog(lib):
        from importlib import import_module

        mode = import_module(lib.__name__ + ".amp.autocast_mode")

        def matmul(a):
            """Doc kept."""
            return a @ a

        fn = mode.autocast_decorator(lib.autocast("cpu"), matmul)
        return str(fn(lib.ones(2, 2)).dtype).split(".")[-1], fn.__name__, fn.__doc__

    assert _both(prog)[0] == "bfloat16"


# ------------------------------------------------------------------------------- data helpers


def test_data_utils_exception_wrapper():
    """`ExceptionWrapper` keeps an exception to raise elsewhere, as PyTorch's does."""

    def prog(lib):
        from importlib import import_module

        utils = import_module(lib.__name__ + ".utils.data._utils")
        out = [utils.MP_STATUS_CHECK_INTERVAL, utils.IS_WINDOWS, utils.python_exit_status,
               utils.HAS_NUMPY]

        class NeedsTwo(Exception):
            def __init__(self, a, b):
                super().__init__(a, b)

        for exc in (KeyError("k"), ValueError("bad"), NeedsTwo(1, 2)):
            try:
                raise exc
            except Exception:  # noqa: BLE001
                wrapper = utils.ExceptionWrapper(where="in pin memory thread")
            err = _error(wrapper.reraise)
            out.append((wrapper.exc_type.__name__, wrapper.where, err[0],
                        err[1].splitlines()[0], err[1].splitlines()[-1]))
        data = lib.utils.data
        out.append((data._DatasetKind.Map, data._DatasetKind.Iterable))
        out.append(lib.profiler.kineto_available())
        return out

    _both(prog)


def test_event_ids_repr_and_total():
    """Events are numbered in start order; their repr, `time_range`, and the total average
    (the last event's shapes) are PyTorch's."""
    import re

    def prog(lib):
        with lib.profiler.profile() as prof:
            with lib.profiler.record_function("outer"):
                with lib.profiler.record_function("inner"):
                    pass
            with lib.profiler.record_function("last"):
                pass
        events = prof.events()
        first = events[0]
        span = first.time_range
        shape = re.sub(r"(id|thread)=[0-9]+ |\[[0-9]+\]", r"\1=N ", repr(first))
        shape = re.sub(r"=[0-9.]+(us|ms|s)?( |>)", r"=T\2", shape)
        total = events.total_average()
        same_span = span.end - span.start == span.elapsed_us()
        return ([e.id - first.id for e in events], shape, same_span,
                [e.input_shapes for e in events], total.key, total.count,
                total.input_shapes, str(total.device_type))

    _both(prog)


# ------------------------------------------------------------------------------- schedulers


@pytest.mark.parametrize("ctor", [
    "S.LambdaLR(opt, lambda e: 0.5 ** e)", "S.MultiplicativeLR(opt, lambda e: 0.9)",
    "S.CyclicLR(opt, 0.1, 1.0, step_size_up=2)", "S.StepLR(opt, 1, 0.5)",
    "S.CosineAnnealingLR(opt, 4)", "S.CosineAnnealingLR(opt, 1)",
    "S.OneCycleLR(opt, 1.0, total_steps=9)",
])
def test_scheduler_after_add_param_group(ctor):
    """A group added after the scheduler: schedulers that zip their per-group state with the
    groups raise PyTorch's strict-zip error; the others carry the new group along."""

    def prog(lib):
        S = lib.optim.lr_scheduler  # noqa: N806  (eval'd constructor spells it S)
        a, b = lib.nn.Parameter(lib.ones(1)), lib.nn.Parameter(lib.ones(1))
        opt = lib.optim.SGD([a], lr=1.0, momentum=0.9)
        sched = eval(ctor, {"S": S, "opt": opt})
        opt.step()
        sched.step()
        opt.add_param_group({"params": [b], "lr": 0.3})
        out = []
        for _ in range(3):
            opt.step()
            err = _error(sched.step)
            out.append(err or [round(g["lr"], 10) for g in opt.param_groups])
        return out

    _both(prog)


def test_collate_of_strided_samples_is_contiguous():
    """Transposed or sliced samples (tensors or arrays) collate into a contiguous batch, as
    `stack` makes it."""
    import numpy as np

    def prog(lib):
        collate = lib.utils.data.default_collate
        t = lib.ones(2, 3).t()
        out = [collate([t, t]).stride(), collate([t[::2], t[1:]]).stride()]
        for a in (np.ones((2, 3)).T, np.arange(6.0).reshape(2, 3)[:, ::2]):
            batch = collate([a, a])
            out.append((batch.stride(), batch.is_contiguous(), batch.tolist()))
        return out

    _both(prog)


def test_profiler_activities_checked():
    """No kind left, a kind named twice, an item of another type: PyTorch's errors at
    construction; a dict names a kind with a subset."""

    def prog(lib):
        kind = lib.profiler.ProfilerActivity
        out = []
        for acts in ([], [kind.CPU, kind.CPU], [kind.CPU, "cpu"], [{kind.CPU: []}],
                     [{kind.CPU: ["x"]}, kind.CPU], (kind.CPU,), None):
            err = _error(lambda acts=acts: lib.profiler.profile(activities=acts))
            out.append(err or sorted(str(a) for a in lib.profiler.profile(
                activities=acts).activities))
        with pytest.warns(FutureWarning):
            out.append(_error(lambda: lib.profiler.profile(activities=[kind.CUDA],
                                                           use_cuda=False)))
        return out

    _both(prog)


def test_event_scopes_and_cuda_time():
    """Annotations carry PyTorch's user scope (7), backward nodes 1, ops 0; `cuda_time` is
    the deprecated spelling of `device_time`."""

    def prog(lib):
        x = lib.ones(2, requires_grad=True)
        model = lib.nn.Linear(2, 1)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        with lib.profiler.profile() as prof:
            with lib.profiler.record_function("block"):
                (x * 2).sum().backward()
            opt.zero_grad()
            opt.step()
        names = {"block", "MulBackward0", "aten::mul", "aten::sum", "Optimizer.step#SGD.step",
                 "autograd::engine::evaluate_function: MulBackward0"}
        scopes = sorted({(e.name, e.scope) for e in prof.events() if e.name in names})
        average = [e for e in prof.key_averages() if e.key == "block"][0]
        with pytest.warns(FutureWarning, match="`cuda_time` is deprecated"):
            cuda = average.cuda_time
        return scopes, average.scope, cuda

    _both(prog)


def test_schedule_cycles_and_acc_events():
    """Each cycle reports its own events (with PyTorch's once-only warning when a second
    cycle starts); `acc_events=True` keeps the earlier cycles' events."""
    import torch.profiler.profiler as torch_profiler

    message = ("Warning: Profiler clears events at the end of each cycle. Only events from "
               "the current cycle will be reported. To keep events across cycles, set "
               "acc_events=True.")

    def prog(lib):
        out = []
        torch_profiler._WARNINGS_SHOWN.discard(message)
        fusegrad.profiler._WARNED.discard(message)
        for acc in (False, True):
            seen = []

            def ready(prof, seen=seen):
                seen.append(sorted((e.key, e.count) for e in prof.key_averages()
                                   if e.key in ("aten::mm", "ProfilerStep*")))

            sched = lib.profiler.schedule(wait=1, warmup=1, active=1, repeat=3)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with lib.profiler.profile(schedule=sched, acc_events=acc,
                                          on_trace_ready=ready) as prof:
                    for _ in range(8):
                        lib.mm(lib.ones(2, 2), lib.ones(2, 2))
                        prof.step()
            events = prof.events()
            out.append((seen, len({e.id for e in events}) == len(events),
                        [str(w.message) == message for w in caught]))
        return out

    _both(prog)


def test_memory_freed_outside_ops_is_an_event():
    """With `profile_memory`, memory freed outside every op (a `del`) is a top-level
    "[memory]" event of its (negative) size; without it there is none."""

    def prog(lib):
        a = lib.ones(100, 100)
        with lib.profiler.profile(profile_memory=True) as prof:
            b = lib.ones(1000)
            d = a + 1
            del d
            del b
        # (PyTorch also lists an 8-byte wrapped scalar, allocated and freed around `+ 1`)
        freed = [e.cpu_memory_usage for e in prof.events()
                 if e.name == "[memory]" and e.cpu_memory_usage < -8]
        event = [e for e in prof.events() if e.name == "[memory]"][0]
        with lib.profiler.profile() as prof:
            b = lib.ones(1000)
            del b
        return (freed, event.cpu_parent is None, event.time_range.elapsed_us(), event.scope,
                [e.name for e in prof.events() if e.cpu_parent is None])

    _both(prog)
