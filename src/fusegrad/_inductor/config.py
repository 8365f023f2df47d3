"""The `inductor` backend's options (`torch._inductor.config`'s names, where the meaning is
the same) and the modes of `compile(mode=...)`.

`compile(options={...})` and `compile(mode=...)` are checked here, with PyTorch's errors: an
unknown key, a value of the wrong type, an unknown mode, or a mode together with options.
"""

from __future__ import annotations

import copy

# name -> default. The type of the default is the type a value must have (an int option
# also takes a bool, as PyTorch's check is isinstance).
_DEFAULTS: dict = {
    # Print each compiled graph's wrapper and kernels (as FUSEGRAD_LOGS=output_code).
    "debug": False,
    # Random ops run on eager's generator in any case (as extern calls of their kernels), so
    # compiled random values equal eager's for a seed whatever this is.
    "fallback_random": False,
    "max_autotune": False,
    "max_autotune_pointwise": False,
    "max_autotune_gemm": False,
    "coordinate_descent_tuning": False,
    "epilogue_fusion": True,
    "allow_buffer_reuse": True,
    "fx_graph_cache": True,
    "size_asserts": True,
    "cpp.threads": -1,
    "cpp.simdlen": None,
    "cpp.min_chunk_size": 512,
    "cpp.cxx": (None, "g++"),
    "cpp.enable_kernel_profile": False,
    "cpp.descriptive_names": "original_aten",
    "triton.cudagraphs": False,
    "trace.enabled": False,
    "trace.debug_dir": None,
}

_MODES: dict = {
    "default": {},
    "lite": {"fallback_by_default": True, "selective_decompose": True,
             "reorder_for_peak_memory": False, "reorder_for_compute_comm_overlap": False,
             "triton.reorder_for_reducing_graph_partitions": False,
             "use_pre_grad_passes": False, "use_joint_graph_passes": False,
             "use_post_grad_passes": False, "use_dce": False, "allow_buffer_reuse": False},
    "reduce-overhead": {"triton.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True, "coordinate_descent_tuning": True},
    "max-autotune": {"max_autotune": True, "triton.cudagraphs": True,
                     "coordinate_descent_tuning": True},
}

current: dict = copy.deepcopy(_DEFAULTS)


def list_options() -> list[str]:
    """The names `compile(options=...)` accepts for the inductor backend."""
    return list(_DEFAULTS)


def list_mode_options(mode: str | None = None, dynamic: bool | None = None) -> dict:
    """The options each mode sets (all modes, or `mode`'s)."""
    if mode is None:
        return copy.deepcopy(_MODES)
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           f"{', '.join(_MODES)}")
    return dict(_MODES[mode])


def check_options(options: dict) -> dict:
    """`options` validated against the known names and their types (PyTorch's errors)."""
    for key, value in options.items():
        if key not in _DEFAULTS:
            raise RuntimeError(f"Unexpected optimization option {key}, known options are "
                               f"{list_options()}")
        default = _DEFAULTS[key]
        if default is not None and not isinstance(default, tuple) and \
                not isinstance(value, type(default)):
            raise RuntimeError(f"Unexpected type of attr {key}, got {type(value).__name__} "
                               f"should be {type(default).__name__}")
    return dict(options)


def resolve(mode: str | None, options: dict | None) -> dict:
    """The option values a compiled function uses: the defaults, updated by `mode`'s or by
    `options` (checked)."""
    result = copy.deepcopy(current)
    if options is not None:
        result.update(check_options(options))
    elif mode is not None:
        result.update({k: v for k, v in list_mode_options(mode).items() if k in _DEFAULTS})
    return result
