"""The environment report bug trackers ask for, as `torch.utils.collect_env`.

`get_env_info()` gathers it into a `SystemEnv` (PyTorch's field names, each a string or
None for what could not be collected), `get_pretty_env_info()` lays it out as PyTorch's
report does, `main()` (and `python -m fusegrad.utils.collect_env`) prints it. fusegrad is a
CPU build without CUDA, ROCm or XPU: those fields say so; the rest is read from the system
(`gcc --version`, `lscpu` or /proc/cpuinfo, the installed distributions, ...), each tool
optional: one that is missing gives "Could not collect".
"""

from __future__ import annotations

import locale
import os
import platform
import re
import subprocess
import sys
from collections import namedtuple

__all__ = ["SystemEnv", "get_env_info", "get_pretty_env_info", "main", "pretty_str"]

SystemEnv = namedtuple("SystemEnv", [
    "torch_version", "is_debug_build", "cuda_compiled_version", "gcc_version",
    "clang_version", "cmake_version", "os", "libc_version", "python_version",
    "python_platform", "is_cuda_available", "cuda_runtime_version", "cuda_module_loading",
    "nvidia_driver_version", "nvidia_gpu_models", "cudnn_version", "is_xpu_available",
    "pip_version", "pip_packages", "conda_packages", "hip_compiled_version",
    "hip_runtime_version", "miopen_runtime_version", "caching_allocator_config",
    "is_xnnpack_available", "cpu_info",
])

# The installed distributions the report lists: fusegrad, its dependencies and what it
# works with (ONNX, MPI, the PyTorch it reproduces), and the usual tools of such reports.
_PACKAGE_PATTERNS = ("fusegrad", "torch", "numpy", "ml_dtypes", "ml-dtypes", "tqdm", "onnx",
                     "mpi4py", "networkx", "triton", "optree", "mypy", "flake8")


def run(command: list[str]) -> tuple[int, str, str]:
    """Run `command` (no shell); its return code, stdout and stderr (stripped). A program
    that is not there, or does not finish in 30 s, gives return code 127 or 124."""
    try:
        done = subprocess.run(command, capture_output=True, timeout=30)
    except (OSError, ValueError):
        return 127, "", ""
    except subprocess.TimeoutExpired:
        return 124, "", ""
    encoding = "oem" if sys.platform == "win32" else locale.getpreferredencoding()
    try:
        out = done.stdout.decode(encoding, "replace")
        err = done.stderr.decode(encoding, "replace")
    except LookupError:
        out = done.stdout.decode("utf-8", "replace")
        err = done.stderr.decode("utf-8", "replace")
    return done.returncode, out.strip(), err.strip()


def _first_match(command: list[str], pattern: str) -> str | None:
    """The first group of `pattern` in `command`'s output, or None."""
    rc, out, _ = run(command)
    if rc != 0:
        return None
    found = re.search(pattern, out)
    return found.group(1) if found else None


def get_gcc_version() -> str | None:
    """`gcc --version`'s version, as "(Debian 12.2.0-14+deb12u1) 12.2.0"."""
    return _first_match(["gcc", "--version"], r"gcc (.*)")


def get_clang_version() -> str | None:
    """`clang --version`'s version."""
    return _first_match(["clang", "--version"], r"clang version (.*)")


def get_cmake_version() -> str | None:
    """`cmake --version`'s version, as "version 3.25.1"."""
    return _first_match(["cmake", "--version"], r"cmake (.*)")


def get_running_cuda_version() -> str | None:
    """The CUDA toolkit's version (`nvcc --version`), if one is installed: fusegrad runs
    without it, but the report shows it, as PyTorch's does."""
    return _first_match(["nvcc", "--version"], r"release .+ V(.*)")


def _release_name() -> str | None:
    """The Linux distribution's name: `lsb_release`, else /etc/os-release's PRETTY_NAME."""
    desc = _first_match(["lsb_release", "-a"], r"Description:\t(.*)")
    if desc:
        return desc
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            with open(path, encoding="utf-8") as f:
                found = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', f.read(), re.M)
        except OSError:
            continue
        if found:
            return found.group(1)
    return None


def get_os() -> str | None:
    """The operating system and machine, as "Debian GNU/Linux 12 (bookworm) (x86_64)"."""
    machine = platform.machine()
    if sys.platform.startswith("linux"):
        name = _release_name()
        return f"{name} ({machine})" if name else f"{platform.system()} ({machine})"
    if sys.platform == "darwin":
        version = platform.mac_ver()[0]
        return f"macOS {version} ({machine})" if version else None
    if sys.platform in ("win32", "cygwin"):
        return f"{platform.system()} {platform.release()} ({platform.version()})"
    return sys.platform


def get_libc_version() -> str:
    """The C library, as "glibc-2.36" ("N/A" outside Linux)."""
    if not sys.platform.startswith("linux"):
        return "N/A"
    return "-".join(platform.libc_ver())


def get_python_platform() -> str:
    """`platform.platform()`."""
    return platform.platform()


def _python_version() -> str:
    return f"{sys.version.replace(chr(10), ' ')} ({sys.maxsize.bit_length() + 1}-bit runtime)"


def _summary_of_proc_cpuinfo() -> str | None:
    """lscpu's leading lines, read from /proc/cpuinfo where lscpu is missing."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    fields: dict[str, str] = {}
    processors = 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "processor":
            processors += 1
        elif key and key not in fields:
            fields[key] = value.strip()
    rows = [("Architecture", platform.machine()), ("CPU(s)", str(processors)),
            ("Vendor ID", fields.get("vendor_id")), ("Model name", fields.get("model name")),
            ("CPU family", fields.get("cpu family")), ("Model", fields.get("model")),
            ("Stepping", fields.get("stepping")), ("BogoMIPS", fields.get("bogomips")),
            ("Flags", fields.get("flags"))]
    return "\n".join(f"{k + ':':<41}{v}" for k, v in rows if v)


def get_cpu_info() -> str | None:
    """The CPU: `lscpu` on Linux (else a summary of /proc/cpuinfo), `sysctl` on macOS,
    the processor's name elsewhere."""
    if sys.platform.startswith("linux"):
        rc, out, _ = run(["lscpu"])
        return out if rc == 0 and out else _summary_of_proc_cpuinfo()
    if sys.platform == "darwin":
        rc, out, _ = run(["sysctl", "-n", "machdep.cpu.brand_string"])
        return out if rc == 0 else None
    return platform.processor() or None


def get_pip_packages() -> tuple[str, str | None]:
    """("pip3", the installed distributions the report lists as "name==version" lines)."""
    from importlib import metadata

    found = set()
    for dist in metadata.distributions():
        name = dist.metadata.get("Name") or ""
        if any(p in name.lower() for p in _PACKAGE_PATTERNS):
            found.add(f"{name}=={dist.version}")
    pip = "pip3" if sys.version_info.major == 3 else "pip"
    return pip, "\n".join(sorted(found, key=str.lower)) or None


def get_conda_packages() -> str | None:
    """`conda list`'s lines for the same packages, when conda is there."""
    conda = os.environ.get("CONDA_EXE", "conda")
    rc, out, _ = run([conda, "list"])
    if rc != 0:
        return None
    lines = [line for line in out.splitlines() if not line.startswith("#")
             and any(p in line.lower() for p in _PACKAGE_PATTERNS)]
    return "\n".join(lines) or None


def get_env_info() -> SystemEnv:
    """What `get_pretty_env_info` reports, as a `SystemEnv` of strings (None: not
    collected)."""
    import fusegrad
    from fusegrad import version

    pip_version, pip_packages = get_pip_packages()
    return SystemEnv(
        torch_version=str(fusegrad.__version__),
        is_debug_build=str(version.debug),
        cuda_compiled_version=version.cuda,
        gcc_version=get_gcc_version(),
        clang_version=get_clang_version(),
        cmake_version=get_cmake_version(),
        os=get_os(),
        libc_version=get_libc_version(),
        python_version=_python_version(),
        python_platform=get_python_platform(),
        is_cuda_available=str(fusegrad.cuda.is_available()),
        cuda_runtime_version=get_running_cuda_version(),
        cuda_module_loading="N/A",  # (set by CUDA's lazy loading; no CUDA backend here)
        nvidia_driver_version=None,
        nvidia_gpu_models=None,
        cudnn_version=None,
        is_xpu_available="False",
        pip_version=pip_version,
        pip_packages=pip_packages,
        conda_packages=get_conda_packages(),
        hip_compiled_version="N/A",
        hip_runtime_version="N/A",
        miopen_runtime_version="N/A",
        caching_allocator_config=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", {}),
        is_xnnpack_available="False",
        cpu_info=get_cpu_info(),
    )


_TEMPLATE = """
PyTorch version: {torch_version}
Is debug build: {is_debug_build}
CUDA used to build PyTorch: {cuda_compiled_version}
ROCM used to build PyTorch: {hip_compiled_version}

OS: {os}
GCC version: {gcc_version}
Clang version: {clang_version}
CMake version: {cmake_version}
Libc version: {libc_version}

Python version: {python_version}
Python platform: {python_platform}
Is CUDA available: {is_cuda_available}
CUDA runtime version: {cuda_runtime_version}
CUDA_MODULE_LOADING set to: {cuda_module_loading}
GPU models and configuration: {nvidia_gpu_models}
Nvidia driver version: {nvidia_driver_version}
cuDNN version: {cudnn_version}
Is XPU available: {is_xpu_available}
HIP runtime version: {hip_runtime_version}
MIOpen runtime version: {miopen_runtime_version}
Is XNNPACK available: {is_xnnpack_available}
Caching allocator config: {caching_allocator_config}

CPU:
{cpu_info}

Versions of relevant libraries:
{pip_packages}
{conda_packages}
""".strip()


def _prefixed(text: str | None, prefix: str) -> str:
    """Each line of `text` behind `prefix` (one line saying so when there is none)."""
    if text is None:
        return f"{prefix} Could not collect"
    if not text:
        return f"{prefix} No relevant packages"
    return "\n".join(f"{prefix} {line}" for line in text.split("\n"))


def pretty_str(envinfo: SystemEnv) -> str:
    """`envinfo` laid out as PyTorch's report."""
    fields = envinfo._asdict()
    # Nothing of a CUDA runtime found: its fields say "No CUDA", the build's "None".
    if all(fields[k] is None for k in ("cuda_runtime_version", "nvidia_gpu_models",
                                       "nvidia_driver_version")):
        for key in ("cuda_runtime_version", "nvidia_gpu_models", "nvidia_driver_version",
                    "cudnn_version"):
            fields[key] = "No CUDA"
        fields["cuda_compiled_version"] = str(fields["cuda_compiled_version"])
    fields["pip_packages"] = _prefixed(fields["pip_packages"], f"[{fields['pip_version']}]")
    fields["conda_packages"] = _prefixed(fields["conda_packages"], "[conda]")
    if not fields["caching_allocator_config"]:
        fields["caching_allocator_config"] = "N/A"
    for key, value in fields.items():
        if value is None:
            fields[key] = "Could not collect"
        elif isinstance(value, bool):
            fields[key] = "Yes" if value else "No"
    return _TEMPLATE.format(**fields)


def get_pretty_env_info() -> str:
    """The report `main` prints."""
    return pretty_str(get_env_info())


def main() -> None:
    """Print the report."""
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    main()
