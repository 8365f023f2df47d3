"""The composites' ATen calls (`ops/surface.py`'s `ATEN_CALLS`) and the facts kept on registry
entries for quantized tensors (`OpDef.quantized`), held to PyTorch.

A handle `fusegrad.ops.aten.zeros.default` runs the composite's public function on the
arguments PyTorch's schema names; called as torch's `torch.ops.aten.zeros.default` is, it
gives torch's result. The factories take `pin_memory` as torch's do, which these calls pass.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad import _quantized  # noqa: E402
from fusegrad.ops import REGISTRY, OpDef  # noqa: E402
from fusegrad.ops import surface as S  # noqa: E402


def _inputs(lib):
    g = np.random.default_rng(0)

    def t(*shape):
        return lib.tensor(g.standard_normal(shape).astype(np.float32))

    return {"x": t(2, 4), "w": t(3, 4), "b": t(3), "x1": t(1, 2, 5), "w1": t(3, 2, 3),
            "x2": t(1, 2, 4, 4), "w2": t(3, 2, 3, 3), "x3": t(1, 2, 3, 3, 3),
            "w3": t(2, 2, 2, 2, 2), "ln_w": t(4), "bn_x": t(2, 3, 4), "rm": t(3),
            "rv": t(3).abs() + 0.5}


# (packet.overload, arguments (names of `_inputs` as strings), keywords, values compared)
_CALLS = [
    ("zeros.default", [[2, 3]], {"dtype": "float64", "pin_memory": False}, True),
    ("ones.default", [[2]], {}, True),
    ("empty.memory_format", [[2, 3]], {"pin_memory": False}, False),
    ("full.default", [[2], 3.5], {}, True),
    ("arange.default", [5], {}, True),
    ("arange.start", [1, 5], {"dtype": "float32"}, True),
    ("arange.start_step", [1, 7, 2], {}, True),
    ("eye.default", [3], {}, True),
    ("eye.m", [2, 3], {"pin_memory": False}, True),
    ("rand.default", [[2, 2]], {}, False),
    ("randn.default", [[3]], {}, False),
    ("randint.default", [5, [3]], {}, False),
    ("randint.low", [2, 5, [2, 2]], {"dtype": "float64", "pin_memory": False}, False),
    ("randperm.default", [4], {}, False),
    ("zeros_like.default", ["x"], {"pin_memory": False}, True),
    ("ones_like.default", ["x"], {}, True),
    ("empty_like.default", ["x"], {}, False),
    ("full_like.default", ["x", 2.0], {"pin_memory": False}, True),
    ("rand_like.default", ["x"], {}, False),
    ("randn_like.default", ["x"], {"pin_memory": False}, False),
    ("new_zeros.default", ["x", [2]], {"pin_memory": False}, True),
    ("new_ones.default", ["x", [3]], {}, True),
    ("new_empty.default", ["x", [2]], {}, False),
    ("new_full.default", ["x", [2], 5.0], {"pin_memory": False}, True),
    ("scalar_tensor.default", [3], {"pin_memory": False}, True),
    ("lift_fresh_copy.default", ["x"], {}, True),
    ("detach.default", ["x"], {}, True),
    ("linear.default", ["x", "w", "b"], {}, True),
    ("conv1d.default", ["x1", "w1"], {}, True),
    ("conv2d.default", ["x2", "w2", None, [1, 1], [1, 1]], {}, True),
    ("conv3d.default", ["x3", "w3"], {}, True),
    ("layer_norm.default", ["x", [4], "ln_w", None, 1e-5, False], {}, True),
    ("dropout.default", ["x", 0.0, True], {}, True),
    ("batch_norm.default", ["bn_x", None, None, "rm", "rv", False, 0.1, 1e-5, False], {},
     True),
]


def _run(lib, key: str, args: list, kwargs: dict):
    named = _inputs(lib)
    args = [named[a] if isinstance(a, str) else a for a in args]
    kwargs = {k: getattr(lib, v) if k == "dtype" else v for k, v in kwargs.items()}
    packet, overload = key.split(".")
    handle = getattr(getattr(lib.ops.aten, packet), overload)
    return handle, handle(*args, **kwargs)


def test_every_call_is_sampled():
    """Each ATen call of the composites is one of this file's cases."""
    calls = {f"{name}.{ov}" for name, record in S.ATEN_CALLS.items()
             for ov in record.overloads}
    assert calls == {key for key, *_ in _CALLS}


@pytest.mark.parametrize("key,args,kwargs,values", _CALLS, ids=[c[0] for c in _CALLS])
def test_handle_runs_as_torchs(key, args, kwargs, values):
    """`fusegrad.ops.aten.<call>` gives what `torch.ops.aten.<call>` gives on the same
    schema arguments (shape and dtype where the values are random or uninitialised), and is
    named as torch's."""
    handle, got = _run(fusegrad, key, args, kwargs)
    theirs, want = _run(torch, key, args, kwargs)
    assert str(handle) == str(theirs).replace("torch.", "fusegrad.", 0)
    assert handle.name() == theirs.name()
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    if values:
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_random_calls_draw():
    """The random factories' handles, and dropout's, are kept by dead-code elimination."""
    drawn = {key.split(".")[0] for key, *_ in _CALLS
             if _run(fusegrad, key, *_CALLS[[c[0] for c in _CALLS].index(key)][1:3])[0].draws}
    assert drawn == {"rand", "randn", "randint", "randperm", "rand_like", "randn_like",
                     "dropout"}


def _factories(lib):
    x = lib.ones(2)
    return {
        "zeros": lambda **k: lib.zeros(2, **k), "ones": lambda **k: lib.ones(2, **k),
        "empty": lambda **k: lib.empty(2, **k), "full": lambda **k: lib.full((2,), 1., **k),
        "arange": lambda **k: lib.arange(3, **k), "eye": lambda **k: lib.eye(2, **k),
        "rand": lambda **k: lib.rand(2, **k), "randn": lambda **k: lib.randn(2, **k),
        "randint": lambda **k: lib.randint(3, (2,), **k),
        "randperm": lambda **k: lib.randperm(3, **k),
        "linspace": lambda **k: lib.linspace(0, 1, 3, **k),
        "logspace": lambda **k: lib.logspace(0, 1, 3, **k),
        "scalar_tensor": lambda **k: lib.scalar_tensor(2, **k),
        "tensor": lambda **k: lib.tensor([1.0], **k),
        "empty_strided": lambda **k: lib.empty_strided((2,), (1,), **k),
        "zeros_like": lambda **k: lib.zeros_like(x, **k),
        "ones_like": lambda **k: lib.ones_like(x, **k),
        "empty_like": lambda **k: lib.empty_like(x, **k),
        "full_like": lambda **k: lib.full_like(x, 2., **k),
        "rand_like": lambda **k: lib.rand_like(x, **k),
        "randn_like": lambda **k: lib.randn_like(x, **k),
        "new_zeros": lambda **k: x.new_zeros(2, **k),
        "new_ones": lambda **k: x.new_ones(2, **k),
        "new_empty": lambda **k: x.new_empty(2, **k),
        "new_full": lambda **k: x.new_full((2,), 1., **k),
    }


@pytest.mark.parametrize("name", sorted(_factories(torch)))
def test_factories_take_pin_memory_as_torchs(name):
    """`pin_memory=False` (or None) is accepted; True is refused, as torch refuses it on a
    machine without an accelerator, with its message."""
    ours, theirs = _factories(fusegrad)[name], _factories(torch)[name]
    for value in (False, None):
        try:
            want = theirs(pin_memory=value)
        except TypeError:  # (`torch.tensor` takes a bool only: not a factory's option)
            continue
        assert tuple(ours(pin_memory=value).shape) == tuple(want.shape)
    with pytest.raises(RuntimeError) as want:
        theirs(pin_memory=True)
    with pytest.raises(RuntimeError) as got:
        ours(pin_memory=True)
    assert str(got.value) == str(want.value)


def test_quantized_rules_name_kernels_that_exist():
    """Every op's `quantized` rule names functions `fusegrad._quantized` has, and an unknown
    key is refused when the entry is made."""
    rules = {op.name: op.quantized for op in REGISTRY.values() if op.quantized}
    assert {"mean", "cat", "copy_", "clone", "index.Tensor", "add.Tensor", "sum"} <= set(rules)
    for name, rule in rules.items():
        for key in ("kernel", "per_channel"):
            kernel = rule.get(key)
            if kernel not in (None, "moves"):
                assert callable(getattr(_quantized, kernel, None)), (name, kernel)
    with pytest.raises(ValueError, match="unknown quantized keys"):
        OpDef("no_such_op", kernel=abs, meta=abs, quantized={"kernels": "_mean"})


@pytest.mark.parametrize("call", ["x.new_tensor([1.0], pin_memory=False)",
                                  "x.new_tensor([1.0], layout=None)",
                                  "lib.as_tensor([1.0], pin_memory=False)"])
def test_conversions_take_no_factory_options(call):
    """`new_tensor` and `as_tensor` take neither `pin_memory` nor `layout`, as torch's."""
    errors = []
    for lib in (torch, fusegrad):
        x = lib.ones(2)
        with pytest.raises(TypeError) as info:
            eval(call, {"x": x, "lib": lib})
        errors.append(str(info.value))
    assert errors[0] == errors[1]
