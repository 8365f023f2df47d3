"""`fusegrad.signal.windows` against torch.signal.windows: values for symmetric and periodic
windows of several lengths in float32 and float64, the history `requires_grad=True` gives
(node names and gradients), and the argument errors."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.signal.windows  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.signal.windows  # noqa: E402

WINDOWS = {
    "bartlett": {}, "blackman": {}, "cosine": {}, "hamming": {}, "hann": {}, "nuttall": {},
    "exponential": {"tau": 2.5}, "exponential_default": {},
    "gaussian": {"std": 1.7}, "gaussian_default": {}, "kaiser": {"beta": 5.0},
    "kaiser_default": {}, "kaiser_zero": {"beta": 0.0},
    "general_cosine": {"a": [0.46, 0.23, 0.31]}, "general_cosine_tuple": {"a": (0.5, 0.5)},
    "general_hamming": {"alpha": 0.6}, "general_hamming_default": {},
}


def _fn(lib, name):
    return getattr(lib.signal.windows, name.split("_default")[0].replace("_tuple", "")
                   .replace("_zero", ""))


@pytest.mark.parametrize("name", sorted(WINDOWS))
@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_window_values_are_torchs(name, sym, dtype):
    for M in (0, 1, 2, 3, 4, 7, 10, 33):
        kwargs = dict(WINDOWS[name], sym=sym)
        want = _fn(torch, name)(M, dtype=getattr(torch, dtype), **kwargs)
        got = _fn(fusegrad, name)(M, dtype=getattr(fusegrad, dtype), **kwargs)
        assert str(got.dtype) == str(want.dtype)
        assert tuple(got.shape) == tuple(want.shape)
        tol = 1e-6 if dtype == "float32" else 1e-13
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol, err_msg=M)


def test_exponential_center_of_a_periodic_window_as_torch():
    for M, center in ((1, 0.5), (5, 1.0), (6, 4.2)):
        want = torch.signal.windows.exponential(M, center=center, sym=False)
        got = fusegrad.signal.windows.exponential(M, center=center, sym=False)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


def test_default_dtype_is_followed():
    try:
        torch.set_default_dtype(torch.float64)
        fusegrad.set_default_dtype(fusegrad.float64)
        assert fusegrad.signal.windows.hann(4).dtype == fusegrad.float64
        assert torch.signal.windows.hann(4).dtype == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
        fusegrad.set_default_dtype(fusegrad.float32)


@pytest.mark.parametrize("name", ["bartlett", "blackman", "cosine", "exponential", "gaussian",
                                  "hamming", "hann", "kaiser", "nuttall"])
def test_requires_grad_gives_torchs_history(name):
    """The window is computed from a leaf that requires grad: the same last node as torch,
    and a backward pass through the history runs."""
    want = _fn(torch, name)(6, requires_grad=True)
    got = _fn(fusegrad, name)(6, requires_grad=True)
    assert got.requires_grad and type(got.grad_fn).__name__ == type(want.grad_fn).__name__
    cot = np.linspace(-1, 1, 6).astype(np.float32)
    (want * torch.tensor(cot)).sum().backward()
    (got * fusegrad.tensor(cot)).sum().backward()


ERRORS = [
    ("hann", (-1,), {}), ("hamming", (-1,), {}), ("nuttall", (3,), {"dtype": "int32"}),
    ("blackman", (-1,), {}), ("blackman", (3,), {"dtype": "float16"}),
    ("bartlett", (-1,), {}), ("cosine", (3,), {"dtype": "int32"}),
    ("exponential", (5,), {"tau": -1}), ("exponential", (5,), {"center": 1.0, "sym": True}),
    ("exponential", (0,), {"tau": 0}), ("gaussian", (5,), {"std": 0}),
    ("gaussian", (0,), {"std": -1}), ("kaiser", (5,), {"beta": -1}),
    ("kaiser", (-1,), {}), ("general_cosine", (5,), {"a": 1.0}),
    ("general_cosine", (-1,), {"a": [1.0]}), ("general_hamming", (-1,), {}),
    ("general_cosine", (3,), {"a": (1.0, 2.0), "dtype": "bfloat16"}),
    ("general_cosine", (5,), {}), ("hann", (5,), {"layout": "sparse_coo"}),
]


@pytest.mark.parametrize("name,args,kwargs", ERRORS, ids=[str(e) for e in ERRORS])
def test_errors_are_torchs(name, args, kwargs):
    outcomes = []
    for lib in (torch, fusegrad):
        kw = {k: getattr(lib, v) if k in ("dtype", "layout") else v for k, v in kwargs.items()}
        try:
            getattr(lib.signal.windows, name)(*args, **kw)
            outcomes.append(("ok", None))
        except Exception as error:  # noqa: BLE001 - the outcome itself is compared
            outcomes.append((type(error).__name__, str(error).replace("torch.", "")
                             .replace("fusegrad.", "")))
    assert outcomes[1] == outcomes[0]
