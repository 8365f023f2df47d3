"""`fusegrad.utils.collect_env` against `torch.utils.collect_env` on this machine: the same
fields, the same system facts, the same report layout."""

from __future__ import annotations

import os
import subprocess
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch.utils.collect_env as theirs  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.utils import collect_env as ours  # noqa: E402

# What both read from the system itself (the rest names the library, or differs by design:
# fusegrad lists its own dependencies among the packages).
SHARED_FIELDS = ("is_debug_build", "gcc_version", "clang_version", "cmake_version", "os",
                 "libc_version", "python_version", "python_platform", "is_cuda_available",
                 "cuda_runtime_version", "cuda_module_loading", "is_xpu_available",
                 "pip_version", "conda_packages", "hip_compiled_version", "hip_runtime_version",
                 "miopen_runtime_version", "caching_allocator_config", "is_xnnpack_available",
                 "cpu_info", "cudnn_version", "nvidia_driver_version", "nvidia_gpu_models")


@pytest.fixture(scope="module")
def infos():
    return theirs.get_env_info(), ours.get_env_info()


def test_fields_are_pytorchs():
    assert ours.SystemEnv._fields == theirs.SystemEnv._fields
    assert ours.SystemEnv.__module__ == "fusegrad.utils.collect_env"
    assert fusegrad.utils.collect_env is ours


@pytest.mark.parametrize("field", SHARED_FIELDS)
def test_system_facts_match(infos, field):
    t, f = infos
    assert getattr(f, field) == getattr(t, field)


def test_library_fields(infos):
    t, f = infos
    assert f.torch_version == str(fusegrad.__version__)
    assert f.cuda_compiled_version is None
    numpy_line = next(line for line in t.pip_packages.split("\n")
                      if line.startswith("numpy=="))
    assert numpy_line in f.pip_packages.split("\n")
    assert any(line.startswith("fusegrad==") for line in f.pip_packages.split("\n"))


def _labels(report: str) -> list[str]:
    """Each line's label (the text before its first ": "), the CPU and package sections
    left out (their lines are the system's and the packages')."""
    head = report.split("\nCPU:\n")[0]
    return [line.split(": ")[0] for line in head.split("\n")]


def test_pretty_layout_matches(infos):
    t, f = infos
    mine = ours.pretty_str(f)
    reference = theirs.pretty_str(t)
    assert _labels(mine) == _labels(reference)
    assert mine.split("\nCPU:\n")[1].split("\n\nVersions")[0] == \
        reference.split("\nCPU:\n")[1].split("\n\nVersions")[0]
    assert "\nVersions of relevant libraries:\n[pip3] " in mine
    # The same filling-in of values that are absent, on the same (altered) input.
    blank = t._replace(cuda_runtime_version=None, nvidia_gpu_models=None,
                       nvidia_driver_version=None, cudnn_version=None, pip_packages=None,
                       conda_packages=None, gcc_version=None, torch_version="x")
    assert ours.pretty_str(blank) == theirs.pretty_str(blank)
    assert ours.pretty_str(t) == theirs.pretty_str(t)


def test_main_prints_the_report():
    out = subprocess.run([sys.executable, "-m", "fusegrad.utils.collect_env"],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = out.stdout.split("\n")
    assert lines[0] == "Collecting environment information..."
    assert lines[1] == f"PyTorch version: {fusegrad.__version__}"
    assert out.stderr == ""


def test_pretty_fills_in_as_pytorch(infos):
    t, _ = infos
    for change in ({"pip_packages": "", "conda_packages": "a\nb", "is_xpu_available": False,
                    "os": "", "cuda_runtime_version": "1", "nvidia_gpu_models": None},
                   {"is_cuda_available": True, "cuda_runtime_version": None,
                    "nvidia_gpu_models": None, "nvidia_driver_version": None,
                    "caching_allocator_config": "", "clang_version": ""},
                   {"caching_allocator_config": "expandable_segments:True"}):
        altered = t._replace(**change)
        assert ours.pretty_str(altered) == theirs.pretty_str(altered), change
