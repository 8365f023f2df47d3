"""The public surface read from one place: the registry's flags and its table of composites.

Capture, fx and ONNX read what they know of a public name (factory, pure, data-dependent,
in place) from `fusegrad.ops.surface`; these tests hold that table to PyTorch: its in-place
names are PyTorch's (a trailing underscore), its data-dependent ops carry ATen's
`dynamic_output_shape` tag, and capture and fx behave on them as torch.compile and torch.fx.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.ops import REGISTRY, OpDef  # noqa: E402
from fusegrad.ops import surface as S  # noqa: E402


def _public_callables():
    """(where, name) of the public callables whose names say they work in place."""
    import fusegrad.nn.functional as F
    import fusegrad.nn.init as init
    import fusegrad.nn.utils as nn_utils

    found = []
    for where, space in (("Tensor", vars(fusegrad.Tensor)), ("fusegrad", vars(fusegrad)),
                         ("nn.functional", vars(F)), ("nn.init", vars(init)),
                         ("nn.utils", {n: getattr(nn_utils, n) for n in dir(nn_utils)})):
        for name, obj in space.items():
            if name.startswith("_") or not callable(obj) or isinstance(obj, type):
                continue
            found.append((where, name))
    return found


def test_inplace_flag_is_pytorchs_trailing_underscore():
    """Every public callable named with PyTorch's in-place underscore is flagged in place,
    and every name flagged in place is spelled so."""
    inplace = S.names_with(S.INPLACE)
    missing = [f"{w}.{n}" for w, n in _public_callables() if n.endswith("_") and
               n not in inplace]
    assert not missing, f"in-place names without the flag: {missing}"
    assert all(n.endswith("_") for n in inplace), sorted(n for n in inplace
                                                         if not n.endswith("_"))


def test_data_dependent_ops_are_atens_dynamic_shape_ops():
    """A registry op flagged data-dependent has ATen's `dynamic_output_shape` tag."""
    flagged = [op for op in REGISTRY.values() if op.data_dependent]
    assert flagged
    for op in flagged:
        packet, _, overload = op.name.partition(".")
        aten = getattr(getattr(torch.ops.aten, packet), overload or "default")
        assert torch.Tag.dynamic_output_shape in aten.tags, op.name


def test_composites_are_not_registry_spellings():
    """A composite is no registry op's public spelling (its flags would be read twice), and
    every composite exists as a public name of fusegrad, Tensor or nn."""
    publics = {op.public for op in REGISTRY.values()}
    assert not set(S.COMPOSITES) & publics
    import fusegrad.nn.functional as F
    import fusegrad.nn.init as init
    import fusegrad.nn.utils as nn_utils

    spaces = (fusegrad, fusegrad._functions, fusegrad.Tensor, F, init, nn_utils)
    capture_targets = {"set_grad_enabled", "_assert_async"}  # nodes capture itself records
    for name in S.COMPOSITES:
        assert name in capture_targets or any(hasattr(s, name) for s in spaces), name


def test_flags_follow_later_registrations():
    """An op registered after the first lookup is seen by the next one."""
    assert "zz_probe_" not in S.names_with(S.INPLACE)
    REGISTRY["zz_probe_"] = OpDef("zz_probe_", kernel=abs, meta=abs, inplace=True)
    try:
        assert S.has_flag("zz_probe_", S.INPLACE)
    finally:
        del REGISTRY["zz_probe_"]
    assert not S.has_flag("zz_probe_", S.INPLACE)


@pytest.mark.parametrize("lib", [torch, fusegrad])
def test_fx_calls_untraced_predicates_and_records_factories(lib):
    """fx calls `is_tensor` (False for a proxy) instead of recording it, as torch.fx does."""
    def f(x):
        if lib.is_tensor(x):
            return x + 1
        return x * 2

    gm = lib.fx.symbolic_trace(f)
    targets = [getattr(n.target, "__name__", n.target) for n in gm.graph.nodes
               if n.op == "call_function"]
    assert targets == ["mul"]


@pytest.mark.parametrize("method", ["nonzero", "item", "tolist"])
def test_capture_breaks_on_data_dependent_methods(method):
    """A data-dependent method ends the graph: the compiled function runs it eagerly and
    gives eager's result, as torch.compile does."""
    def f(x):
        y = x * 2
        out = getattr(y, method)()
        return out

    for lib in (torch, fusegrad):
        lib._dynamo.reset()
    x = torch.tensor([[0.0, 1.5], [2.0, 0.0]]) if method != "item" else torch.tensor(3.0)
    want = f(x)
    got = fusegrad.compile(f, backend="eager")(fusegrad.tensor(x.numpy()))
    if isinstance(want, torch.Tensor):
        assert got.tolist() == want.tolist()
    else:
        assert got == want


def test_capture_keeps_unread_inplace_composites():
    """Dead-code elimination keeps a composite in-place call nothing reads (`x.clip_`), so
    the compiled function mutates its input as eager does."""
    def f(x):
        x.clip_(-0.5, 0.5)
        x.tril_()
        return x.sum()

    data = [[-1.0, 2.0], [0.25, -3.0]]
    t = torch.tensor(data)
    want = f(t)
    fx = fusegrad.tensor(data)
    fusegrad._dynamo.reset()
    got = fusegrad.compile(f, backend="eager")(fx)
    assert float(got) == float(want)
    assert fx.tolist() == t.tolist()
