"""The versions of this build, as PyTorch's `torch.version`: the PyTorch version whose
behaviour fusegrad reproduces, labelled with fusegrad's own release (see `torch_version`),
and a CPU build's attributes (no CUDA, HIP, ROCm or XPU)."""

__all__ = ["__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu"]

fusegrad = "0.1.0"  # the package's own version: pyproject.toml's `version`
pytorch = "2.13.0"  # the PyTorch API fusegrad reproduces
__version__ = f"{pytorch}+fusegrad{fusegrad}"
debug = False
cuda = hip = rocm = xpu = None
git_version = "Unknown"  # PyTorch's value for a build made outside a git checkout
