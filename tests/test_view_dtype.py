"""Tensor.view(dtype) against PyTorch: reinterpreted bits, shapes, strides and storage
offsets, shared memory, no autograd history, and the errors for geometries that do not allow
a different element size."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad

GEOMETRIES = [  # (size, stride, offset) into an 8x8 float32 storage
    ((2, 4), (8, 1), 0), ((2, 4), (8, 1), 2), ((2, 4), (8, 1), 1), ((2, 4), (3, 1), 2),
    ((2, 4), (3, 2), 2), ((2, 4), (3, 2), 1), ((2, 3), (8, 1), 0), ((2, 1), (4, 3), 2),
    ((2, 2), (4, 3), 2), ((2, 2, 4), (16, 4, 1), 4), ((2, 4), (0, 1), 2), ((), (), 3),
]
DTYPES = ["float64", "int64", "int32", "float16", "bfloat16", "int16", "uint8", "bool",
          "int8"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("geom", range(len(GEOMETRIES)))
def test_view_dtype_geometry(geom, dtype):
    size, stride, offset = GEOMETRIES[geom]
    data = np.random.default_rng(geom).standard_normal(64).astype(np.float32)
    bt, bf = torch.tensor(data), fusegrad.tensor(data)
    xt, xf = bt.as_strided(size, stride, offset), bf.as_strided(size, stride, offset)
    try:
        yt = xt.view(getattr(torch, dtype))
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as err:
            xf.view(getattr(fusegrad, dtype))
        assert str(err.value) == str(e)
        return
    yf = xf.view(getattr(fusegrad, dtype))
    assert yf.dtype is getattr(fusegrad, dtype)
    assert tuple(yf.shape) == tuple(yt.shape)
    assert yf.stride() == yt.stride()
    assert yf.storage_offset() == yt.storage_offset()
    if dtype == "bfloat16":  # NumPy has no bfloat16: compare the bits as int16
        yt, yf = yt.view(torch.int16), yf.view(fusegrad.int16)
    np.testing.assert_array_equal(_bytes(yf.numpy()), _bytes(yt.numpy()))


def _bytes(a):
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def test_view_dtype_shares_memory_and_has_no_history():
    for mod in (torch, fusegrad):
        x = mod.randn(3, 4, requires_grad=True)
        for d in ("int32", "float32", "float64", "uint8"):
            y = x.view(getattr(mod, d))
            assert y.grad_fn is None and not y.requires_grad
        x = mod.zeros(4)
        y = x.view(mod.int32)
        y[1] = 1065353216  # the bits of 1.0f
        assert x[1].item() == 1.0
        assert x._version == y._version == 1


def test_view_dtype_keyword():
    for mod in (torch, fusegrad):
        assert tuple(mod.ones(2, 4).view(dtype=mod.float64).shape) == (2, 2)


def test_view_dtype_under_fake_tensors_and_bool_bits():
    from fusegrad._fake import FakeTensor

    fake = FakeTensor.from_tensor(fusegrad.zeros(3, 8))
    out = fake.view(fusegrad.float64)
    assert tuple(out.shape) == (3, 4) and out.dtype is fusegrad.float64
    ref = torch.tensor([0, 1, 2], dtype=torch.uint8).view(torch.bool)
    got = fusegrad.tensor([0, 1, 2], dtype=fusegrad.uint8).view(fusegrad.bool)
    assert got.tolist() == ref.tolist()
