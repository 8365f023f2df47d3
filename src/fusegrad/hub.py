"""`fusegrad.hub`: PyTorch Hub's cache directory and cached checkpoints, without downloads.

fusegrad never fetches code or weights over the network. `get_dir`/`set_dir` follow PyTorch's
rules for the cache directory, and `load_state_dict_from_url` loads a checkpoint already in
that cache (put there by PyTorch, or copied by hand); anything that would have to download
raises a RuntimeError saying so and where to put the file.
"""

from __future__ import annotations

import os
import warnings
from urllib.parse import urlparse

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load",
           "load_state_dict_from_url", "set_dir"]

ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"

_hub_dir: str | None = None


def _torch_home() -> str:
    base = os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR)
    return os.path.expanduser(os.getenv(ENV_TORCH_HOME, os.path.join(base, "torch")))


def get_dir() -> str:
    """The hub cache directory: `set_dir`'s, else `$TORCH_HOME/hub` (`$TORCH_HOME` defaulting to
    `$XDG_CACHE_HOME/torch`, `$XDG_CACHE_HOME` to `~/.cache`), as in PyTorch."""
    if os.getenv("TORCH_HUB"):
        warnings.warn("TORCH_HUB is deprecated, please use env TORCH_HOME instead", stacklevel=2)
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_torch_home(), "hub")


def set_dir(d) -> None:
    """Use `d` (a path, `~` expanded) as the hub cache directory."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


def _no_download(what: str) -> RuntimeError:
    return RuntimeError(f"fusegrad.hub does not download: {what}. Fetch it with PyTorch or by "
                        "hand and load it from disk.")


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None,
                         progress: bool = True) -> None:
    """Raises: fusegrad makes no network requests."""
    raise _no_download(f"{url} was not fetched to {dst}")


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location=None,
                             progress: bool = True, check_hash: bool = False,
                             file_name: str | None = None, weights_only: bool = False):
    """Load the checkpoint for `url` from the cache (`model_dir`, default `get_dir()/checkpoints`,
    file name from the URL or `file_name`); raises RuntimeError when it is not cached."""
    from .serialization import load

    if os.getenv("TORCH_MODEL_ZOO"):
        warnings.warn("TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead",
                      stacklevel=2)
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    filename = file_name or os.path.basename(urlparse(url).path)
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        raise _no_download(f"{url} is not in the cache (expected at {cached})")
    # fusegrad.load never runs code from the file, whatever `weights_only` says.
    return load(cached, map_location=map_location, weights_only=weights_only)


def load(repo_or_dir, model, *args, source: str = "github", trust_repo="check",
         force_reload: bool = False, verbose: bool = True, skip_validation: bool = False,
         **kwargs):
    """Raises: loading a hub model runs its repository's `hubconf.py`, which fusegrad does
    not fetch or execute."""
    raise _no_download(f"hub model {model!r} from {repo_or_dir!r}")


def list(github, force_reload: bool = False, skip_validation: bool = False,  # noqa: A001
         trust_repo="check", verbose: bool = True):
    """Raises: listing entry points needs the repository's `hubconf.py`."""
    raise _no_download(f"the entry points of {github!r}")


def help(github, model, force_reload: bool = False, skip_validation: bool = False,  # noqa: A001
         trust_repo="check"):
    """Raises: an entry point's docstring lives in the repository's `hubconf.py`."""
    raise _no_download(f"the documentation of {model!r} in {github!r}")
