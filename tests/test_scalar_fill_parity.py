"""Fill values against PyTorch: a Python number written into a tensor of a narrower dtype.

PyTorch checks fill values (fill_, full, `x[i] = v`, masked_fill, index_fill, clamp bounds,
`tensor(..., dtype=)`) against the target dtype: unsigned integer dtypes take negative ints
down to minus their maximum as two's complement (uint8: -1 is 255), anything else out of
range is an overflow error naming the C++ type. Also `element in tensor` and the generator's
device.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32"]
VALUES = [-1, -255, -256, 300, 2 ** 31, 2 ** 63 - 1, -1.0, -1.5, 255.7, 1e6, 1e39,
          float("nan"), float("inf")]

WRITES = {
    "fill_": lambda t, x, v: x.clone().fill_(v),
    "full": lambda t, x, v: t.full((2,), v, dtype=x.dtype),
    "setitem": lambda t, x, v: _set(x.clone(), 0, v),
    "setitem_mask": lambda t, x, v: _set(x.clone(), t.tensor([True, False]), v),
    "masked_fill": lambda t, x, v: x.masked_fill(t.tensor([True, False]), v),
    "index_fill": lambda t, x, v: x.index_fill(0, t.tensor([1]), v),
}


def _set(x, index, value):
    x[index] = value
    return x


def _outcome(fn):
    try:
        out = fn()
    except (RuntimeError, OverflowError) as e:
        return type(e).__name__, str(e)
    return [str(v) for v in out.tolist()]  # "nan" compares equal as text


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_values_as_torch(write, dtype):
    for value in VALUES:
        def run(lib, value=value):
            x = lib.zeros(2, dtype=getattr(lib, dtype))
            return _outcome(lambda: WRITES[write](lib, x, value))

        assert run(fusegrad) == run(torch), (write, dtype, value)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16"])
def test_clamp_bounds_as_torch(dtype):
    for lo, hi in [(-5, 200), (-5, 300), (0, 100), (-300, 5), (1.5, 100)]:
        def run(lib, lo=lo, hi=hi):
            x = lib.tensor([0, 50, 120], dtype=getattr(lib, dtype))
            return _outcome(lambda: lib.clamp(x, lo, hi))

        assert run(fusegrad) == run(torch), (dtype, lo, hi)


@pytest.mark.parametrize("data", [[-1], [-255], [-256], [300], [[-1, 2], [3, -255]], [-1.5]])
def test_tensor_of_negative_ints_for_uint8_as_torch(data):
    assert _outcome(lambda: fusegrad.tensor(data, dtype=fusegrad.uint8)) == \
        _outcome(lambda: torch.tensor(data, dtype=torch.uint8))


def test_contains_as_torch():
    for lib in (torch, fusegrad):
        t = lib.arange(6.0).reshape(2, 3)
        assert 3.0 in t and 7 not in t and lib.tensor(2.0) in t
        assert lib.tensor([0.0, 1.0, 2.0]) in t
    with pytest.raises(RuntimeError) as want:
        "a" in torch.ones(2)  # noqa: B015
    with pytest.raises(RuntimeError) as got:
        "a" in fusegrad.ones(2)  # noqa: B015
    assert str(got.value) == str(want.value)


def test_generator_device_is_a_device():
    g = fusegrad.Generator()
    assert isinstance(g.device, fusegrad.device)
    assert repr(g.device) == repr(torch.Generator().device)
