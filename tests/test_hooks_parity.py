"""Module hooks and saved-tensor hooks, against torch: always-call forward hooks after a
failure, full backward hooks over in-place modules, the pack hook's grad mode, complex
`Module.to`, and `numpy()` under no_grad."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = {"fusegrad": fusegrad, "torch": torch}


def _always_call(lib):
    nn = LIBS[lib].nn
    log = []
    lin = nn.Linear(2, 2)

    def pre(m, a):
        raise ValueError("pre boom")

    h = lin.register_forward_pre_hook(pre)
    lin.register_forward_hook(
        lambda m, a, r: log.append(("always", len(a), None if r is None else "tensor")),
        always_call=True)
    lin.register_forward_hook(lambda m, a, r: log.append("normal"))
    with pytest.raises(ValueError, match="pre boom"):
        lin(LIBS[lib].ones(1, 2))
    h.remove()

    def bad(m, a, r):
        raise KeyError("hook")

    def silenced(m, a, r):
        log.append(("silenced", type(r).__name__))
        raise ValueError("quiet")

    lin.register_forward_hook(bad)
    lin.register_forward_hook(silenced, always_call=True)
    with warnings.catch_warnings(record=True) as w, pytest.raises(KeyError):
        warnings.simplefilter("always")
        lin(LIBS[lib].ones(1, 2))
    return log + [str(x.message) for x in w]


def test_always_call_forward_hooks_after_failures_as_torch():
    assert _always_call("fusegrad") == _always_call("torch")


def _inplace_relu(lib):
    L = LIBS[lib]
    r = L.nn.ReLU(inplace=True)
    r.register_full_backward_hook(lambda m, gi, go: None)
    with pytest.raises(RuntimeError) as info:
        r(L.randn(3, requires_grad=True) * 1)
    return str(info.value)


def test_full_backward_hook_on_inplace_module_raises_as_torch():
    assert _inplace_relu("fusegrad") == _inplace_relu("torch")


def _pack_numpy(lib):
    L = LIBS[lib]
    x = L.ones(3, requires_grad=True)
    modes = []

    def pack(t):
        modes.append(L.is_grad_enabled())
        return t.numpy()

    with L.autograd.graph.saved_tensors_hooks(pack, lambda a: L.from_numpy(a)):
        y = (x * x).sum()
    y.backward()
    return [x.grad.tolist(), sorted(set(modes)), L.is_grad_enabled()]


def test_pack_hook_runs_with_grad_off_as_torch():
    assert _pack_numpy("fusegrad") == _pack_numpy("torch")


def _complex_module(lib):
    L = LIBS[lib]
    L.manual_seed(0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lin = L.nn.Linear(2, 2).to(L.complex64)
        bn = L.nn.BatchNorm1d(2).to(dtype=L.complex128)
    out = lin(L.ones(1, 2, dtype=L.complex64))
    return [str(lin.weight.dtype), str(lin.bias.dtype), type(lin.weight).__name__,
            str(bn.running_mean.dtype), str(bn.num_batches_tracked.dtype),
            np.round(out.detach().numpy(), 5).tolist(),
            [(str(x.message), x.filename == __file__) for x in w]]


def test_module_to_complex_as_torch():
    assert _complex_module("fusegrad") == _complex_module("torch")
    with pytest.raises(TypeError, match="floating point or complex"):
        fusegrad.nn.Linear(2, 2).to(fusegrad.int32)


def _numpy_no_grad(lib):
    L = LIBS[lib]
    x = L.ones(2, requires_grad=True)
    with L.no_grad():
        out = [x.numpy().tolist(), np.asarray(x).tolist(), np.array(x).tolist()]
    with pytest.raises(RuntimeError) as info:
        x.numpy()
    with pytest.raises(RuntimeError):
        np.asarray(x)
    return out + [str(info.value)]


def test_numpy_of_requires_grad_tensor_under_no_grad_as_torch():
    assert _numpy_no_grad("fusegrad") == _numpy_no_grad("torch")
