"""`torch.random`: the default CPU generator's seeding and state, and `fork_rng`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ._random import (
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str = "cuda") -> Iterator[None]:
    """Run the block on a copy of the CPU generator's state: draws inside it leave the
    stream outside as it was (there are no accelerator generators to fork here)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed",
           "seed", "set_rng_state"]
