"""Mixed-precision training against PyTorch's CPU build.

The seed program's AMP loop (`GradScaler` + `autocast` + backward + step + update) runs
unchanged, in its deprecated `cuda.amp` spelling (off without CUDA: float32, as in PyTorch)
and with `autocast("cpu", dtype=bfloat16 or float16)`, with and without
`amp.GradScaler("cpu")`; an MLP and a small CNN, started from PyTorch's weights, give
PyTorch's per-module output dtypes and its losses within bfloat16's rounding. `GradScaler`
itself is checked step by step against PyTorch's on the same gradients: scale, skipped
steps, growth tracker, errors, state_dict.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.cuda.amp  # noqa: E402, F401  (whatever imported fusegrad.cuda before)

LIBS = (torch, fusegrad)


def _mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(),
                         nn.Linear(16, 4))


def _cnn(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(36, 16), nn.ReLU(), nn.Linear(16, 4))


MODELS = {"mlp": (_mlp, (8,)), "cnn": (_cnn, (1, 8, 8))}


def _data(shape, steps=6, batch=8):
    g = np.random.default_rng(3)
    return [(g.standard_normal((batch,) + shape).astype(np.float32),
             g.integers(0, 4, batch).astype(np.int64)) for _ in range(steps)]


def _models(name):
    torch.manual_seed(0)
    make, shape = MODELS[name]
    tm = make(torch)
    fm = make(fusegrad)
    fm.load_state_dict({k: fusegrad.from_numpy(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    return tm, fm, shape


def _record_dtypes(lib, model):
    seen = []
    for m in model.modules():
        if not isinstance(m, lib.nn.Sequential):
            m.register_forward_hook(lambda mod, i, o: seen.append(str(o.dtype)))
    return seen


def amp_loop(lib, model, dataset, scaler, autocast):
    """The seed's AMP loop, as written there, with `scaler` and the `autocast()` region
    given: returns the losses, the last loss's dtype and the final scale."""
    optimizer = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = lib.nn.CrossEntropyLoss()
    losses = []
    for data, target in dataset:
        optimizer.zero_grad()
        with autocast():
            output = model(data)
            loss = loss_fn(output, target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses, loss.dtype, scaler.get_scale()


def seed_loop(lib, model, dataset):
    """The seed's spelling: `cuda.amp.GradScaler()` and `cuda.amp.autocast()`."""
    return amp_loop(lib, model, dataset, lib.cuda.amp.GradScaler(), lib.cuda.amp.autocast)


def cpu_loop(lib, model, dataset, scaled: bool, dtype: str = "bfloat16"):
    """The same loop with CPU autocast to `dtype` (and `amp.GradScaler("cpu")` if
    `scaled`)."""
    return amp_loop(lib, model, dataset, lib.amp.GradScaler("cpu", enabled=scaled),
                    lambda: lib.autocast("cpu", dtype=getattr(lib, dtype)))


def _tensors(lib, dataset):
    return [(lib.from_numpy(x.copy()), lib.from_numpy(y.copy())) for x, y in dataset]


@pytest.mark.parametrize("name", list(MODELS))
def test_seed_amp_loop_runs_unchanged(name):
    tm, fm, shape = _models(name)
    data = _data(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (tl, tdt, _), (fl, fdt, _) = (seed_loop(torch, tm, _tensors(torch, data)),
                                      seed_loop(fusegrad, fm, _tensors(fusegrad, data)))
    assert str(fdt) == str(tdt) == "torch.float32"
    np.testing.assert_allclose(fl, tl, rtol=1e-4, atol=1e-5)


def test_seed_spelling_in_a_fresh_program():
    """`torch.cuda.amp.GradScaler()` right after `import torch`, as the seed writes it."""
    code = textwrap.dedent("""
        import warnings
        import fusegrad as torch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scaler = torch.cuda.amp.GradScaler()
            with torch.cuda.amp.autocast():
                on = torch.is_autocast_enabled("cuda")
        print(scaler.is_enabled(), on, [w.category.__name__ for w in caught])
    """)
    src = str(Path(fusegrad.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == (
        "False False ['FutureWarning', 'UserWarning', 'FutureWarning', 'UserWarning']")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("scaled", [False, True], ids=["autocast", "gradscaler"])
@pytest.mark.parametrize("name", list(MODELS))
def test_autocast_loop_matches_torch(name, scaled, dtype):
    tm, fm, shape = _models(name)
    data = _data(shape)
    t_dtypes, f_dtypes = _record_dtypes(torch, tm), _record_dtypes(fusegrad, fm)
    tl, tdt, tscale = cpu_loop(torch, tm, _tensors(torch, data), scaled, dtype)
    fl, fdt, fscale = cpu_loop(fusegrad, fm, _tensors(fusegrad, data), scaled, dtype)
    assert f_dtypes == t_dtypes and f"torch.{dtype}" in t_dtypes
    assert str(fdt) == str(tdt)
    assert fscale == tscale
    # Within bfloat16's rounding (8 bits; float16 keeps 11) after six steps of drift.
    np.testing.assert_allclose(fl, tl, rtol=2 ** -8, atol=2 ** -8)
    for (k, tv), fv in zip(tm.state_dict().items(), fm.state_dict().values()):
        np.testing.assert_allclose(fv.numpy(), tv.numpy(), rtol=2 ** -5, atol=2 ** -7, err_msg=k)
    assert all(p.dtype is fusegrad.float32 for p in fm.parameters())


# ---------------------------------------------------------------- GradScaler


# Gradients fed to one parameter, step by step; inf/NaN steps must be skipped.
GRADS = [[1.0, 2.0], [np.inf, 1.0], [0.5, 0.25], [1.0, np.nan], [3.0, 1.0], [1.0, 1.0],
         [2.0, 2.0], [1e-3, 1.0], [-np.inf, 0.0], [1.0, 4.0]]


def scaler_trace(lib, **kwargs):
    """What a GradScaler reports over GRADS with an SGD optimizer on one parameter."""
    p = lib.nn.Parameter(lib.tensor([1.0, -1.0]))
    opt = lib.optim.SGD([p], lr=0.5)
    scaler = lib.amp.GradScaler("cpu", **kwargs)
    out = []
    for i, g in enumerate(GRADS):
        scaled = scaler.scale(p.sum() * 2)
        p.grad = lib.tensor(g, dtype=lib.float32) * scaler.get_scale()
        if i % 2:
            scaler.unscale_(opt)
        ret = scaler.step(opt)
        out.append((scaled.item(), ret, p.detach().numpy().tolist(),
                    p.grad.numpy().tolist()))
        scaler.update()
        out.append((scaler.get_scale(), scaler._get_growth_tracker(), scaler.state_dict()))
    return out


@pytest.mark.parametrize("kwargs", [{}, {"growth_interval": 2, "init_scale": 8.0},
                                    {"growth_factor": 4.0, "backoff_factor": 0.25,
                                     "growth_interval": 1, "init_scale": 2.0 ** 126}],
                         ids=["default", "growth", "overflowing_growth"])
def test_grad_scaler_matches_torch(kwargs):
    want, got = (scaler_trace(lib, **kwargs) for lib in LIBS)
    assert repr(got) == repr(want)


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001  (compared)
        return (type(e).__name__, str(e))


def scaler_errors(lib):
    """The errors (and results) of misusing a GradScaler, in order."""
    p = lib.nn.Parameter(lib.tensor([1.0]))
    p.grad = lib.tensor([1.0])
    opt = lib.optim.SGD([p], lr=0.1)
    s = lib.amp.GradScaler("cpu")
    out = [_outcome(lambda: s.update()), _outcome(lambda: s.step(opt)),
           _outcome(lambda: s.unscale_(opt)), _outcome(lambda: s.scale(3)),
           _outcome(lambda: type(s.scale([p, (p,)])).__name__)]
    s.scale(p)
    out += [_outcome(lambda: s.update()),
            _outcome(lambda: s.step(opt, closure=lambda: 0)),
            _outcome(lambda: s.unscale_(opt)), _outcome(lambda: s.unscale_(opt)),
            _outcome(lambda: pickle.dumps(s) and None),
            _outcome(lambda: s.step(opt)), _outcome(lambda: s.step(opt)),
            _outcome(lambda: s.unscale_(opt))]
    s.update()
    clone = pickle.loads(pickle.dumps(s))
    out.append(clone.state_dict())
    s.update(4.0)
    out += [s.get_scale(), _outcome(lambda: s.update(lib.tensor([2.0, 3.0]))),
            _outcome(lambda: s.update("x"))]
    s.update(lib.tensor(8.0))
    out.append(s.get_scale())
    fresh = lib.amp.GradScaler("cpu")
    out += [_outcome(lambda: fresh.load_state_dict({})), fresh.state_dict()]
    fresh.load_state_dict({"scale": 3.0, "growth_factor": 3.0, "backoff_factor": 0.25,
                           "growth_interval": 5, "_growth_tracker": 2})
    fresh.scale(p)
    out += [fresh.state_dict(), fresh.get_growth_factor(), fresh.get_backoff_factor(),
            fresh.get_growth_interval()]
    off = lib.amp.GradScaler("cpu", enabled=False)
    out += [off.state_dict(), off.get_scale(), off.is_enabled(), off.scale(p) is p,
            off.load_state_dict({}), off.unscale_(opt), off.update()]
    out += [_outcome(lambda: lib.amp.GradScaler("cpu", growth_factor=1.0)),
            _outcome(lambda: lib.amp.GradScaler("cpu", backoff_factor=1.0))]
    half = lib.nn.Parameter(lib.tensor([1.0], dtype=lib.bfloat16))
    half.grad = lib.tensor([1.0], dtype=lib.bfloat16)  # bfloat16 gradients are unscaled too
    s2 = lib.amp.GradScaler("cpu", init_scale=4.0)
    s2.scale(p)
    s2.unscale_(lib.optim.SGD([half], lr=0.1))
    out.append((str(half.grad.dtype), half.grad.float().item()))
    return out


def test_grad_scaler_errors_and_state_match_torch():
    want, got = (scaler_errors(lib) for lib in LIBS)
    assert repr(got).replace("fusegrad", "torch") == repr(want)
