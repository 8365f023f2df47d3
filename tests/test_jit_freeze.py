"""`torch.jit.freeze` against PyTorch: eval-mode scripted and traced modules become copies
whose weights are constants (no parameters or buffers listed, no gradient), with the same
outputs; PyTorch's errors for a module in training mode and for a plain module."""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3), lib.nn.BatchNorm2d(3), lib.nn.ReLU(),
                             lib.nn.Flatten(), lib.nn.Linear(12, 2))


@pytest.mark.parametrize("how", ["script", "trace"])
def test_frozen_module_has_constant_weights_and_the_same_outputs(how):
    x = np.random.default_rng(0).standard_normal((2, 2, 4, 4)).astype(np.float32)
    results = {}
    for lib in (torch, fusegrad):
        m = _model(lib).eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = lib.jit.script(m) if how == "script" else lib.jit.trace(m, lib.tensor(x))
        frozen = lib.jit.freeze(compiled)
        out = frozen(lib.tensor(x))
        results[lib] = (out.detach().numpy(), out.requires_grad, len(list(frozen.parameters())),
                        len(list(frozen.buffers())), len(list(compiled.parameters())),
                        m(lib.tensor(x)).detach().numpy())
    got, want = results[fusegrad], results[torch]
    np.testing.assert_allclose(got[0], got[5], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    assert got[1:5] == want[1:5] == (False, 0, 0, 6)


def test_freeze_errors():
    for lib in (torch, fusegrad):
        m = _model(lib)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scripted = lib.jit.script(m)
        with pytest.raises(RuntimeError, match="Freezing is currently only implemented for "
                           r"modules in eval mode. Please call .eval\(\) on your module"):
            lib.jit.freeze(scripted)
        with pytest.raises(RuntimeError, match="Freezing expects a ScriptModule as input. "
                           "Please use torch.jit.script or torch.jit.trace to script your "
                           "'nn.Module'."):
            lib.jit.freeze(m.eval())
