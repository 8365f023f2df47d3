"""`import fusegrad` loads the core only; every lazily loaded name still works.

Each check runs in a fresh interpreter, since this test process has imported everything
already. No timings are asserted here (benchmarks/import_time.py measures them); the tests
check what is loaded and that the lazy names behave as PyTorch's.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import fusegrad

SRC = str(Path(fusegrad.__file__).resolve().parent.parent)
# Heavy modules `import fusegrad` must leave unloaded until used.
LAZY = ("ml_dtypes", "tqdm", "multiprocessing", "numpy.random", "fusegrad.nn",
        "fusegrad.compiler", "fusegrad._dynamo", "fusegrad.onnx", "fusegrad.fx", "fusegrad.jit",
        "fusegrad.optim", "fusegrad.datasets", "fusegrad.distributed", "fusegrad.models",
        "fusegrad.viz", "fusegrad.serialization", "fusegrad.utils.data",
        "fusegrad.utils.checkpoint", "hashlib", "dataclasses", "threading", "traceback",
        "fusegrad.linalg", "fusegrad._printing", "fusegrad.func", "scipy",
        "fusegrad.ops._special_numpy", "fusegrad.ops._bessel_zeta_numpy", "fusegrad.storage",
        "fusegrad.ops._onnx_mappings", "fusegrad._meta", "fusegrad._fake")


def run_fresh(code: str):
    """Run `code` in a new interpreter importing this checkout; returns what it prints as
    JSON on its last line."""
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_import_leaves_heavy_modules_unloaded():
    loaded = run_fresh(f"""
        import json, sys
        import fusegrad
        print(json.dumps([m for m in {LAZY!r} if m in sys.modules]))
    """)
    assert loaded == []


def test_lazy_subpackages_work_as_attributes_and_imports():
    out = run_fresh("""
        import json, sys
        import fusegrad
        from fusegrad import nn
        import fusegrad.nn.functional as F
        assert nn is fusegrad.nn and F is fusegrad.nn.functional
        lin = fusegrad.nn.Linear(3, 2)
        with fusegrad.no_grad():
            lin.weight.copy_(fusegrad.arange(6.0).reshape(2, 3))
            lin.bias.fill_(0.5)
        y = F.relu(lin(fusegrad.ones(1, 3)) - 4)
        names = ["compiler", "fx", "onnx", "optim", "jit", "datasets", "distributed",
                 "models", "viz", "linalg", "_dynamo", "serialization", "__future__"]
        mods = [type(getattr(fusegrad, n)).__name__ for n in names]
        print(json.dumps({"y": y.tolist(), "mods": mods, "sgd": fusegrad.optim.SGD.__name__,
                          "loader": fusegrad.utils.data.DataLoader.__name__,
                          "ckpt": callable(fusegrad.utils.checkpoint.checkpoint),
                          "compile": callable(fusegrad.compile),
                          "future": sorted(n for n in dir(fusegrad.__future__)
                                           if not n.startswith("_"))}))
    """)
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(6.0).reshape(2, 3))
        lin.bias.fill_(0.5)
    assert out["y"] == torch.nn.functional.relu(lin(torch.ones(1, 3)) - 4).tolist()
    assert out["mods"] == ["module"] * 13
    assert out["future"] == sorted(n for n in dir(torch.__future__) if not n.startswith("_"))
    assert out["sgd"] == "SGD" and out["loader"] == "DataLoader"
    assert out["ckpt"] and out["compile"]


def test_dir_lists_lazy_names_and_unknown_names_raise_as_torch():
    out = run_fresh("""
        import json, fusegrad, fusegrad.utils
        names = set(dir(fusegrad))
        missing = [n for n in ("nn", "optim", "compile", "load", "save", "fx", "onnx",
                               "tensor", "Tensor") if n not in names]
        errors = []
        for mod in (fusegrad, fusegrad.utils):
            try:
                mod.no_such_name
            except AttributeError as e:
                errors.append(str(e))
        print(json.dumps({"missing": missing, "utils": "data" in dir(fusegrad.utils),
                          "errors": errors}))
    """)
    assert out["missing"] == [] and out["utils"]
    expected = []
    for mod in (torch, torch.utils):
        with pytest.raises(AttributeError) as info:
            mod.no_such_name  # noqa: B018
        expected.append(str(info.value).replace("torch", "fusegrad"))
    assert out["errors"] == expected


def test_pickled_classes_load_in_a_process_that_has_not_imported_them():
    blob = pickle.dumps((fusegrad.nn.Linear, fusegrad.optim.SGD, fusegrad.bfloat16)).hex()
    out = run_fresh(f"""
        import json, pickle, sys
        import fusegrad
        lin, sgd, bf = pickle.loads(bytes.fromhex({blob!r}))
        print(json.dumps([lin.__module__ + "." + lin.__name__, sgd.__name__,
                          bf is fusegrad.bfloat16, "ml_dtypes" in sys.modules]))
    """)
    assert out == ["fusegrad.nn.modules.linear.Linear", "SGD", True, False]


def test_save_and_load_are_lazy_names():
    out = run_fresh("""
        import io, json, fusegrad
        buf = io.BytesIO()
        fusegrad.save({"w": fusegrad.arange(4.0)}, buf)
        buf.seek(0)
        print(json.dumps(fusegrad.load(buf)["w"].tolist()))
    """)
    assert out == torch.arange(4.0).tolist()


def test_bfloat16_dtype_exists_before_ml_dtypes_and_values_load_it():
    out = run_fresh("""
        import json, sys
        import fusegrad
        bf = fusegrad.bfloat16
        before = ["ml_dtypes" in sys.modules, isinstance(bf, fusegrad.dtype), repr(bf),
                  bf.is_floating_point, bf.itemsize,
                  repr(fusegrad.promote_types(bf, fusegrad.float16)),
                  "ml_dtypes" in sys.modules]
        x = fusegrad.tensor([1.0 / 3, 300.7, -2.5e-3], dtype=bf)
        after = ["ml_dtypes" in sys.modules, repr(x.dtype), (x.float() * 1).tolist(),
                 repr((x + fusegrad.ones(3, dtype=fusegrad.float16)).dtype),
                 str(bf.np), fusegrad.finfo(bf).eps]
        print(json.dumps([before, after]))
    """)
    before, after = out
    bf = torch.bfloat16
    assert before == [False, True, "torch.bfloat16", True, bf.itemsize,
                      repr(torch.promote_types(bf, torch.float16)), False]
    x = torch.tensor([1.0 / 3, 300.7, -2.5e-3], dtype=bf)
    assert after == [True, "torch.bfloat16", x.float().tolist(),
                     repr((x + torch.ones(3, dtype=torch.float16)).dtype), "bfloat16",
                     torch.finfo(bf).eps]


def test_numpy_bfloat16_arrays_made_outside_fusegrad_convert():
    out = run_fresh("""
        import json
        import fusegrad
        import ml_dtypes
        import numpy as np
        a = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
        print(json.dumps([repr(fusegrad.from_numpy(a).dtype), fusegrad.tensor(a).tolist()]))
    """)
    assert out == ["torch.bfloat16", [1.5, -2.0]]


def test_ml_dtypes_imported_first_is_used_at_once():
    out = run_fresh("""
        import json
        import ml_dtypes
        import numpy as np
        import fusegrad
        a = np.array([0.5], dtype=ml_dtypes.bfloat16)
        print(json.dumps([repr(fusegrad.as_tensor(a).dtype),
                          repr((fusegrad.as_tensor(a) * 3).dtype)]))
    """)
    t = torch.tensor([0.5], dtype=torch.bfloat16)
    assert out == [repr(t.dtype), repr((t * 3).dtype)]


def test_first_calls_of_protocol_wrappers_behave_as_later_calls():
    # A wrapper's code is compiled on its first call: the first call of each public function,
    # method and operator must already route subclasses and name the user's line in warnings.
    code = """
        import json, warnings
        import fusegrad

        class Logged(fusegrad.Tensor):
            seen = []

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                cls.seen.append(func.__name__)
                return super().__torch_function__(func, types, args, kwargs or {})

        x = fusegrad.arange(3.0).as_subclass(Logged)
        Logged.seen.clear()
        y = fusegrad.add(x, 1, alpha=2) * x + x.exp().sum()
        seen = list(Logged.seen)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fusegrad.meshgrid(fusegrad.arange(2.0), fusegrad.arange(2.0))  # warns
        print(json.dumps([seen, type(y).__name__, y.tolist(),
                          [w.lineno for w in caught], [w.filename for w in caught]]))
    """
    out = run_fresh(code)
    warns = [i for i, line in enumerate(textwrap.dedent(code).splitlines(), 1) if "# warns" in line]
    seen, kind, values, lines, files = out

    class Logged(torch.Tensor):
        seen = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.seen.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs or {})

    x = torch.arange(3.0).as_subclass(Logged)
    Logged.seen.clear()
    y = torch.add(x, 1, alpha=2) * x + x.exp().sum()
    assert seen == Logged.seen and kind == "Logged" and values == y.tolist()
    assert lines == warns and files == ["<string>"]


def test_linalg_loads_on_first_use_and_is_listed_as_overridable():
    out = run_fresh("""
        import json, sys
        import fusegrad
        before = "fusegrad.linalg" in sys.modules
        x = fusegrad.tensor([[2.0, 1.0], [1.0, 3.0]])
        values = [fusegrad.det(x).item(), fusegrad.matrix_power(x, 3).tolist(),
                  fusegrad.return_types.linalg_qr.__name__]
        listed = fusegrad.overrides.get_overridable_functions()
        ours = listed[fusegrad.linalg]
        print(json.dumps([before, values, fusegrad.linalg.det in ours,
                          fusegrad.linalg.solve in ours]))
    """)
    x = torch.tensor([[2.0, 1.0], [1.0, 3.0]])
    # PyTorch's listing, in a process of its own (listing changes what its
    # `get_ignored_functions` answers afterwards in the same process).
    listed = run_fresh("""
        import json, torch
        listed = torch.overrides.get_overridable_functions()[torch.linalg]
        print(json.dumps([torch.linalg.det in listed, torch.linalg.solve in listed]))
    """)
    assert out == [False, [pytest.approx(torch.det(x).item()), torch.matrix_power(x, 3).tolist(),
                           torch.return_types.linalg_qr.__name__], *listed]


@pytest.mark.parametrize("disabled_first", [False, True])
def test_import_leaves_the_garbage_collector_as_it_found_it(disabled_first):
    """The core loads with the collector held off, and the import hands it back as it was:
    on, or still off for a program that turned it off (as `import torch` does)."""
    code = f"""
        import gc, json
        if {disabled_first}:
            gc.disable()
        import {{name}}
        x = {{name}}.ones(2) * 2
        print(json.dumps(gc.isenabled()))
    """
    ours = run_fresh(code.format(name="fusegrad"))
    theirs = run_fresh(code.format(name="torch"))
    assert ours == theirs == (not disabled_first)


def test_import_keeps_a_programs_frozen_objects_frozen():
    """Objects a program froze (`gc.freeze`) before the import stay frozen after it, as they
    do across `import torch`; cyclic garbage made after the import is still collected."""
    code = """
        import gc, json
        kept = [[i] for i in range(100)]
        gc.freeze()
        frozen = gc.get_freeze_count()
        import {name}
        after = gc.get_freeze_count()
        gc.unfreeze()
        cycle = []
        cycle.append(cycle)
        del cycle
        # (a few frozen objects may be freed meanwhile)
        print(json.dumps([frozen > 0, after > frozen // 2, gc.collect() >= 1]))
    """
    ours = run_fresh(code.format(name="fusegrad"))
    theirs = run_fresh(code.format(name="torch"))
    assert ours == theirs == [True, True, True]


def test_node_classes_are_made_when_an_op_is_first_recorded():
    """`import fusegrad` makes no Node subclass; recording an op makes its own, named as
    PyTorch names the op's backward node, with the `_saved_*` attributes PyTorch's has."""
    ours = run_fresh("""
        import json
        import fusegrad
        from fusegrad.autograd.graph import FunctionNode
        made_at_import = len(FunctionNode.__subclasses__())
        x = fusegrad.ones(3, requires_grad=True)
        y = (x * 2).exp()
        print(json.dumps([made_at_import, len(FunctionNode.__subclasses__()),
                          type(y.grad_fn).__name__,
                          type(y.grad_fn.next_functions[0][0]).__name__,
                          float(y.grad_fn._saved_result.sum())]))
    """)
    x = torch.ones(3, requires_grad=True)
    y = (x * 2).exp()
    assert ours[0] == 0
    assert ours[1] == 2
    assert ours[2:4] == [type(y.grad_fn).__name__, type(y.grad_fn.next_functions[0][0]).__name__]
    assert ours[4] == pytest.approx(float(y.grad_fn._saved_result.sum()))


def test_gradcheck_stays_the_function_whichever_lazy_name_comes_first():
    """`autograd.gradgradcheck` loads the `gradcheck` submodule, whose import binds its
    name in `autograd`: the name must still be the function, as in PyTorch."""
    out = run_fresh("""
        import json
        import fusegrad
        second = fusegrad.autograd.gradgradcheck
        import fusegrad.autograd.gradcheck as imported
        from fusegrad.autograd import gradcheck
        x = fusegrad.randn(3, dtype=fusegrad.float64, requires_grad=True)
        print(json.dumps([type(fusegrad.autograd.gradcheck).__name__,
                          type(imported).__name__, gradcheck(lambda v: v * v, (x,)),
                          second(lambda v: v * v, (x,))]))
    """)
    want = [type(torch.autograd.gradcheck).__name__]
    import torch.autograd.gradcheck as imported
    assert out == want + [type(imported).__name__, True, True] == ["function"] * 2 + [True] * 2


DEFERRED = ("conv", "pooling", "loss", "normalization", "fft", "solvers", "factorizations",
            "sparse_twins", "attention")


def test_deferred_op_modules_run_on_first_use_and_the_registry_sees_every_op():
    out = run_fresh(f"""
        import json, sys, types
        import fusegrad
        from fusegrad.ops import REGISTRY, deferred

        def pending():
            return [n for n in {DEFERRED!r}
                    if type(sys.modules["fusegrad.ops." + n]) is deferred.DeferredModule]

        first = pending()
        import fusegrad.nn.functional as F
        x = fusegrad.ones(1, 1, 4, 4)
        y = F.conv2d(x, fusegrad.ones(1, 1, 3, 3)).sum().item()
        after_conv = pending()
        det = fusegrad.det(fusegrad.tensor([[2.0, 1.0], [1.0, 3.0]])).item()
        found = "max_pool2d_with_indices" in REGISTRY
        names = len(REGISTRY)
        print(json.dumps([first, y, "conv" in after_conv, det, found, pending(),
                          names == len(dict.keys(REGISTRY))]))
    """)
    assert out == [list(DEFERRED), 36.0, False, pytest.approx(5.0), True, [], True]


def test_an_op_looked_up_by_name_runs_only_the_deferred_modules_up_to_its_own():
    # math_special is deferred; `x.gcd_(y)` and `x.lgamma()` find their ops when called.
    out = run_fresh("""
        import json, sys
        import fusegrad
        from fusegrad.ops import deferred

        def pending(name):
            return type(sys.modules["fusegrad.ops." + name]) is deferred.DeferredModule

        first = pending("math_special")
        x = fusegrad.tensor([12, 18])
        x.gcd_(fusegrad.tensor([8, 12]))
        lg = fusegrad.tensor([3.0]).lgamma().item()
        try:
            fusegrad.heaviside(fusegrad.tensor([1j]), fusegrad.tensor([1j]))
            refused = None
        except RuntimeError as e:
            refused = str(e)
        print(json.dumps([first, pending("math_special"), pending("conv"), x.tolist(), lg,
                          refused]))
    """)
    assert out == [True, False, True, [4, 6], pytest.approx(0.6931471805599453),
                   "heaviside is not yet implemented for complex tensors."]


def test_every_real_only_op_refuses_complex_inputs_once_loaded():
    from fusegrad.ops import REGISTRY, complex

    len(REGISTRY)  # every deferred module run
    for names in complex.REAL_ONLY:
        for name in names:
            op = REGISTRY[name]
            assert getattr(op.kernel, "real_only", False), name
            assert getattr(op.meta, "real_only", False), name
            assert not getattr(op.kernel.__wrapped__, "real_only", False), name  # once


def test_deferred_op_module_first_used_by_two_threads_at_once():
    out = run_fresh("""
        import json, threading
        import fusegrad
        import fusegrad.nn.functional as F

        results, barrier = [], threading.Barrier(4)

        def work():
            barrier.wait()
            x = fusegrad.ones(1, 2, 6, 6)
            results.append(F.max_pool2d(F.conv2d(x, fusegrad.ones(3, 2, 3, 3)), 2).sum().item())

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps(results))
    """)
    assert out == [18.0 * 3 * 4] * 4
