"""torch.accelerator, torch.backends, torch.hub, torch.utils.tensorboard and the Tensor device
predicates, each compared with PyTorch's CPU build."""

import os
import subprocess
import sys
import warnings

import pytest
import torch

import fusegrad

ACCEL_QUERIES = ["current_device_index", "current_device_idx", "synchronize", "current_stream",
                 "empty_cache", "empty_host_cache", "max_memory_allocated",
                 "max_memory_reserved", "memory_allocated", "memory_reserved", "memory_stats",
                 "reset_accumulated_memory_stats", "reset_peak_memory_stats",
                 "get_memory_info", "get_device_capability"]


def _outcome(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = ("ok", fn(*args))
        except Exception as e:  # noqa: BLE001  (the error itself is compared)
            result = (type(e).__name__, str(e))
    return result, [(w.category.__name__, str(w.message)) for w in caught]


def test_accelerator_queries_match_torch():
    for name in ["is_available", "device_count", "current_accelerator"] + ACCEL_QUERIES:
        assert _outcome(getattr(fusegrad.accelerator, name)) == _outcome(
            getattr(torch.accelerator, name)), name
    assert fusegrad.accelerator.current_accelerator(True) is None
    for name in ["set_device_index", "set_device_idx"]:
        for arg in [0, None, 1]:
            assert _outcome(getattr(fusegrad.accelerator, name), arg) == _outcome(
                getattr(torch.accelerator, name), arg), (name, arg)
    with fusegrad.accelerator.device_index(None):
        pass
    with pytest.raises(RuntimeError, match="none is available"):
        with fusegrad.accelerator.device_index(0):
            pass
    assert sorted(n for n in fusegrad.accelerator.__all__) == sorted(
        n for n in dir(torch.accelerator) if n in fusegrad.accelerator.__all__)


def test_backends_flags_match_torch():
    fb, tb = fusegrad.backends, torch.backends
    for mod, names in {"cudnn": ["enabled", "benchmark", "deterministic", "allow_tf32",
                                 "benchmark_limit"],
                       "mkldnn": ["enabled", "deterministic"],
                       "opt_einsum": ["enabled", "strategy"]}.items():
        for n in names:
            assert getattr(getattr(fb, mod), n) == getattr(getattr(tb, mod), n), (mod, n)
    for mod, fn in [("cudnn", "is_available"), ("cudnn", "version"), ("mps", "is_available"),
                    ("mps", "is_built"), ("mkldnn", "is_available"), ("cuda", "is_built"),
                    ("cpu", "get_cpu_capability"), ("opt_einsum", "is_available"),
                    ("mkl", "is_available"), ("openmp", "is_available"),
                    ("cuda", "flash_sdp_enabled"), ("cuda", "math_sdp_enabled"),
                    ("mha", "get_fastpath_enabled")]:
        assert getattr(getattr(fb, mod), fn)() == getattr(getattr(tb, mod), fn)(), (mod, fn)
    for n in ["allow_tf32", "allow_fp16_reduced_precision_reduction",
              "allow_bf16_reduced_precision_reduction"]:
        assert getattr(fb.cuda.matmul, n) == getattr(tb.cuda.matmul, n), n


def test_backends_flags_set_and_restore():
    cudnn = fusegrad.backends.cudnn
    cudnn.benchmark = True
    try:
        assert fusegrad.backends.cudnn.benchmark is True
        with cudnn.flags(enabled=False, deterministic=True):
            assert cudnn.enabled is False and cudnn.deterministic is True
            assert cudnn.benchmark is False
        assert cudnn.enabled is True and cudnn.deterministic is False
        assert cudnn.benchmark is True
    finally:
        cudnn.benchmark = False
    mha = fusegrad.backends.mha
    mha.set_fastpath_enabled(False)
    assert mha.get_fastpath_enabled() is False
    mha.set_fastpath_enabled(True)
    oe = fusegrad.backends.opt_einsum
    before = (oe.enabled, oe.strategy)
    with oe.flags(strategy="greedy"):
        assert oe.strategy == "greedy" and oe.enabled is before[0]
    assert (oe.enabled, oe.strategy) == before


def test_hub_dir_rules_match_torch(tmp_path, monkeypatch):
    for env in [{}, {"TORCH_HOME": str(tmp_path / "th")}, {"XDG_CACHE_HOME": str(tmp_path)}]:
        for k in ["TORCH_HOME", "XDG_CACHE_HOME", "TORCH_HUB"]:
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert fusegrad.hub.get_dir() == torch.hub.get_dir()
    try:
        fusegrad.hub.set_dir(str(tmp_path / "x"))
        torch.hub.set_dir(str(tmp_path / "x"))
        assert fusegrad.hub.get_dir() == torch.hub.get_dir()
    finally:
        fusegrad.hub._hub_dir = None
        torch.hub._hub_dir = None


def test_hub_loads_cached_checkpoint_and_refuses_downloads(tmp_path):
    sd = {"w": torch.arange(6.0).reshape(2, 3)}
    os.makedirs(tmp_path / "checkpoints")
    torch.save(sd, tmp_path / "checkpoints" / "net-1234abcd.pth")
    url = "https://example.invalid/models/net-1234abcd.pth"
    got = fusegrad.hub.load_state_dict_from_url(url, model_dir=str(tmp_path / "checkpoints"))
    ref = torch.hub.load_state_dict_from_url(url, model_dir=str(tmp_path / "checkpoints"))
    assert (got["w"].numpy() == ref["w"].numpy()).all()
    with pytest.raises(RuntimeError, match="does not download"):
        fusegrad.hub.load_state_dict_from_url(url.replace("net", "other"),
                                              model_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match="does not download"):
        fusegrad.hub.load("pytorch/vision", "resnet18")
    with pytest.raises(RuntimeError, match="does not download"):
        fusegrad.hub.download_url_to_file(url, str(tmp_path / "f"))


def _import_error(module: str):
    code = (f"try:\n    import {module}\nexcept ImportError as e:\n"
            "    print(type(e).__name__, e.name, e)\nelse:\n    print('imported')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return out.stdout


def test_tensorboard_absence_as_torch():
    pytest.importorskip("torch")
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("tensorboard is installed")
    assert _import_error("fusegrad.utils.tensorboard") == _import_error("torch.utils.tensorboard")
    assert "tensorboard" in _import_error("fusegrad.utils.tensorboard")


def test_tensor_predicates_match_torch():
    t, f = torch.arange(6.0).reshape(2, 3), fusegrad.arange(6.0).reshape(2, 3)
    for name in dir(torch.Tensor):
        if not name.startswith("is_") or name in {"is_leaf"}:
            continue
        attr = getattr(t, name)
        if callable(attr):
            args = (t,) if name in {"is_same_size", "is_set_to"} else ()
            fargs = (f,) if args else ()
            assert _outcome(getattr(f, name), *fargs) == _outcome(attr, *args), name
        else:
            assert getattr(f, name) == attr, name
    assert f.is_set_to(f) and not f.is_set_to(f.clone()) and not f.is_set_to(f.t())


PROGRAM = """
import {mod} as torch
import {mod}.nn as nn
import {mod}.nn.parallel
import {mod}.backends.cudnn as cudnn
import {mod}.optim as optim
import {mod}.utils.data
from {mod}.distributions import Normal, kl_divergence
from {mod}.utils.data import DataLoader
use_accel = True
if use_accel and torch.accelerator.is_available():
    device = torch.accelerator.current_accelerator()
else:
    device = torch.device("cpu")
print(device, torch.accelerator.device_count())
cudnn.benchmark = True
print(torch.backends.mps.is_available(), torch.backends.cudnn.enabled, cudnn.benchmark)
kwargs = {{"batch_size": 4}}
if use_accel and torch.accelerator.is_available():
    kwargs.update({{"num_workers": 1, "pin_memory": True, "shuffle": True}})
print(kwargs, torch.zeros(2).to(device).is_mps, torch.zeros(1).is_xpu)
try:
    from {mod}.utils.tensorboard import SummaryWriter
except ImportError:
    print("no tensorboard")
print(cudnn.version(), torch.backends.mps.is_built(), torch.hub.get_dir())
print(kl_divergence(Normal(0., 1.), Normal(1., 2.)), optim.NAdam, optim.swa_utils.SWALR)
"""


def test_official_example_preambles_print_as_torch():
    def run(mod):
        return subprocess.run([sys.executable, "-c", PROGRAM.format(mod=mod)],
                              capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout
    assert run("fusegrad") == run("torch").replace("torch.optim", "fusegrad.optim")
