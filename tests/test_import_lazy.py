"""What `import fusegrad` leaves for first use behaves as if it had been made at import.

Each check that needs an untouched import runs in a fresh interpreter (this test process has
loaded everything already); values are compared with PyTorch's, run in this process.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import torch

import fusegrad

SRC = str(Path(fusegrad.__file__).resolve().parent.parent)
# Modules `import fusegrad` binds without running: kernels' helpers and op modules.
DEFERRED = ("_gemm", "_parallel", "_workspace", "_tie_order", "nn", "quantize", "random")


def run_fresh(code: str):
    """Run `code` in a new interpreter importing this checkout; the JSON it prints last."""
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _operands() -> tuple:
    """Two float32 matrices large enough for the blocked GEMM (NumPy's seeded stream)."""
    rng = np.random.default_rng(0)
    return (rng.standard_normal((120, 100)).astype(np.float32),
            rng.standard_normal((100, 90)).astype(np.float32))


def test_helpers_and_op_modules_run_on_first_use_with_pytorchs_results():
    """The deferred modules are bound but not run after the import, the standard library's
    `array`, `copy` and `importlib.util` are not loaded; the first large product, relu's
    backward, a sort with ties, `addmm` and a draw run them and give PyTorch's values. Asking the
    registry for `addmm` runs its module alone."""
    a, b = _operands()
    out = run_fresh(f"""
        import json, sys
        import numpy as np
        import fusegrad
        from fusegrad.ops import REGISTRY
        kinds = lambda: {{n: type(sys.modules["fusegrad.ops." + n]).__name__
                         for n in {DEFERRED!r}}}
        before = kinds()
        stdlib = [m for m in ("array", "copy", "importlib.util") if m in sys.modules]
        has_addmm = "addmm" in REGISTRY
        after_lookup = kinds()
        other = type(sys.modules["fusegrad.ops.math_special"]).__name__
        rng = np.random.default_rng(0)  # (NumPy's stream: the same arrays as the caller's)
        a = fusegrad.tensor(rng.standard_normal((120, 100)).astype(np.float32))
        b = fusegrad.tensor(rng.standard_normal((100, 90)).astype(np.float32))
        x = fusegrad.tensor([-1.0, 2.0, 0.5, -3.0], requires_grad=True)
        fusegrad.relu(x * 2).sum().backward()
        ties = fusegrad.sort(fusegrad.tensor([1.0, 0.0, 1.0, 0.0]), stable=True)
        mm = fusegrad.addmm(fusegrad.ones(120, 90), a, b)
        drawn = fusegrad.ones(4).bernoulli_(1.0).tolist()
        print(json.dumps([before, stdlib, has_addmm, after_lookup, other, kinds(), drawn,
                          (a @ b).tolist(), x.grad.tolist(), ties.indices.tolist(),
                          mm.tolist(), mm.grad_fn is None]))
    """)
    (before, stdlib, has_addmm, after_lookup, other, after, drawn, prod, grad, ties, mm,
     no_fn) = out
    assert before == dict.fromkeys(DEFERRED, "DeferredModule")
    assert stdlib == []
    assert has_addmm and after_lookup["nn"] == "module" and other == "DeferredModule"
    assert after["_gemm"] == after["_parallel"] == after["random"] == "module"
    assert drawn == torch.ones(4).bernoulli_(1.0).tolist()
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_allclose(prod, (ta @ tb).numpy(), rtol=1e-4, atol=1e-4)
    tx = torch.tensor([-1.0, 2.0, 0.5, -3.0], requires_grad=True)
    torch.relu(tx * 2).sum().backward()
    assert grad == tx.grad.tolist()
    assert ties == torch.sort(torch.tensor([1.0, 0.0, 1.0, 0.0]), stable=True).indices.tolist()
    np.testing.assert_allclose(mm, torch.addmm(torch.ones(120, 90), ta, tb).numpy(),
                               rtol=1e-4, atol=1e-4)
    assert no_fn


def test_gradient_edge_made_on_first_use_is_pytorchs_named_tuple():
    """`autograd.graph.GradientEdge` is not made by the import but is listed by `dir`; once
    made (by look-up or by `get_gradient_edge`) it is one class, with PyTorch's fields,
    name and behaviour in `autograd.grad`, and pickles by reference."""
    out = run_fresh("""
        import json
        import fusegrad
        g = fusegrad.autograd.graph
        made_at_import = "GradientEdge" in vars(g)
        listed = "GradientEdge" in dir(g)
        x = fusegrad.tensor([1.0, 2.0], requires_grad=True)
        edge = g.get_gradient_edge(x)
        same = type(edge) is g.GradientEdge
        from fusegrad.autograd.graph import GradientEdge
        print(json.dumps([made_at_import, listed, same, GradientEdge is g.GradientEdge,
                          list(type(edge)._fields), type(edge).__qualname__,
                          edge.output_nr]))
    """)
    made_at_import, listed, same, one_class, fields, qualname, output_nr = out
    assert not made_at_import and listed and same and one_class
    theirs = torch.autograd.graph.GradientEdge
    assert fields == list(theirs._fields) and qualname == theirs.__qualname__
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    assert output_nr == torch.autograd.graph.get_gradient_edge(tx).output_nr
    x = fusegrad.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    (ours,) = fusegrad.autograd.grad(y, fusegrad.autograd.graph.get_gradient_edge(x))
    (want,) = torch.autograd.grad((tx * tx).sum(), torch.autograd.graph.get_gradient_edge(tx))
    assert ours.tolist() == want.tolist()
    cls = fusegrad.autograd.graph.GradientEdge
    assert pickle.loads(pickle.dumps(cls)) is cls


def test_cuda_and_sparse_typed_classes_made_on_first_use_are_pytorchs():
    """`fusegrad.cuda` and `fusegrad.sparse` make their typed classes when loaded: one
    class per name, named, reported and tested as PyTorch's."""
    from fusegrad import _legacy_types

    for ours_module, theirs_module in ((fusegrad.cuda, torch.cuda),
                                       (fusegrad.sparse, torch.sparse)):
        for name in ("FloatTensor", "LongTensor", "HalfTensor"):
            ours, theirs = getattr(ours_module, name), getattr(theirs_module, name)
            assert repr(ours).replace("fusegrad", "torch") == repr(theirs)
            assert isinstance(fusegrad.ones(2), ours) == isinstance(torch.ones(2), theirs)
    assert _legacy_types.CUDA_TYPES["FloatTensor"] is fusegrad.cuda.FloatTensor
    assert _legacy_types.SPARSE_TYPES["LongTensor"] is fusegrad.sparse.LongTensor


def test_signature_parameters_keep_their_fields_and_pytorchs_messages():
    """The parsed parameters of an overload are tuples with named fields, and the parser's
    refusal reads as PyTorch's."""
    from fusegrad._functions._signatures import _parse

    (first, second) = _parse("Tensor self, *, int dim=0")
    assert (second.kind, second.name, second.default, second.keyword_only) == \
        ("int", "dim", 0, True)
    assert tuple(second) == ("int", "dim", 0, True) and not first.keyword_only
    messages = []
    for lib in (fusegrad, torch):
        try:
            lib.result_type("a", 1)
        except TypeError as error:
            messages.append(str(error))
    assert len(messages) == 2 and messages[0] == messages[1]
