"""DLPack against PyTorch: fusegrad tensors read by NumPy and by torch without a copy
(`__dlpack__`), torch and NumPy arrays read by fusegrad (`from_dlpack`: a torch tensor used to
recurse through torch's `__torch_function__`), the error for a tensor requiring grad, and
`fusegrad.utils.dlpack`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad
import fusegrad.utils.dlpack as fdl


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_exchange_shares_memory(dtype):
    base = np.arange(6).reshape(2, 3).astype(dtype)
    x = fusegrad.tensor(base)
    t = torch.from_dlpack(x)
    a = np.from_dlpack(x)
    assert t.dtype == torch.from_numpy(base).dtype and t.tolist() == x.tolist()
    np.testing.assert_array_equal(a, base)
    if dtype != "bool":
        t[0, 0] = 7
        assert x[0, 0].item() == 7 and a[0, 0] == 7
    y = fusegrad.from_dlpack(torch.from_numpy(base.copy()))
    assert y.dtype == fusegrad.from_numpy(base).dtype and y.tolist() == base.tolist()
    z = fusegrad.utils.dlpack.from_dlpack(np.ascontiguousarray(base.T))
    assert z.tolist() == base.T.tolist() and z.stride() == torch.from_numpy(
        np.ascontiguousarray(base.T)).stride()


def test_transposed_and_sliced_views_keep_their_strides():
    x = fusegrad.arange(12.0).reshape(3, 4).t()[1:]
    t = torch.from_dlpack(x)
    assert t.stride() == x.stride() and t.tolist() == x.tolist()


def test_requires_grad_refused_as_torch():
    messages = []
    for lib in (fusegrad, torch):
        with pytest.raises(BufferError) as info:
            np.from_dlpack(lib.ones(2, requires_grad=True))
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert fusegrad.ones(1).__dlpack_device__() == torch.ones(1).__dlpack_device__()
    assert fdl.DLDeviceType.kDLCPU == torch.utils.dlpack.DLDeviceType.kDLCPU
