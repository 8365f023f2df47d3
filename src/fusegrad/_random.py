"""Random number generators: NumPy's PCG64 behind PyTorch's `Generator` API.

Streams need not equal PyTorch's; tests copy values, never seeds.
"""

from __future__ import annotations

import numpy as np

# Called with the generator before each draw, innermost last: vmap's randomness rules
# (`fusegrad.func`) refuse or replay draws. Empty outside vmap, so a draw pays one test.
DRAW_CHECKS: list = []


class Generator:
    """A random number generator with its own state (`manual_seed`, `get_state`...)."""

    def __init__(self, device="cpu"):
        self.device = device
        self._seed = 67280421310721
        self._numpy_rng = None  # made from the seed on first use (see `_numpy`)

    @property
    def _rng(self) -> np.random.Generator:
        """The NumPy generator that draws the values, for a draw: the checks in
        `DRAW_CHECKS` run first."""
        if DRAW_CHECKS:
            for check in tuple(DRAW_CHECKS):
                check(self)
        return self._numpy()

    def _numpy(self) -> np.random.Generator:
        """The NumPy generator behind this one. It is made on the first draw, not
        when the seed is set: `import fusegrad` then need not import numpy.random for the
        default generator, and the stream is the same either way."""
        rng = self._numpy_rng
        if rng is None:
            rng = self._numpy_rng = np.random.Generator(np.random.PCG64(self._seed))
        return rng

    def manual_seed(self, seed: int):
        """Reset the generator with `seed`; returns self."""
        seed = int(seed)
        if seed < 0:
            seed &= (1 << 64) - 1
        self._seed = seed
        self._numpy_rng = None
        return self

    def seed(self) -> int:
        """Reseed from fresh entropy and return the new seed."""
        seed = int(np.random.SeedSequence().entropy) & ((1 << 63) - 1)
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        """The seed last set."""
        return self._seed

    def get_state(self):
        """The generator state as a uint8 tensor (restore with `set_state`)."""
        import pickle

        from . import _dtype
        from ._tensor import Tensor

        raw = np.frombuffer(pickle.dumps(self._numpy().bit_generator.state), dtype=np.uint8)
        return Tensor._make(raw.copy(), _dtype.uint8)

    def set_state(self, state) -> None:
        """Restore a state returned by `get_state`."""
        raw = bytes(np.asarray(state._data, dtype=np.uint8))
        self._numpy().bit_generator.state = _load_state(raw)


def _load_state(raw: bytes):
    """Read a state written by `get_state` (a dict of numbers and strings, no classes)."""
    import io
    import pickle

    class _Restricted(pickle.Unpickler):
        def find_class(self, module, name):
            raise pickle.UnpicklingError("generator states contain no classes")

    return _Restricted(io.BytesIO(raw)).load()


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator; returns it."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from fresh entropy."""
    return default_generator.seed()


def initial_seed() -> int:
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state."""
    return default_generator.get_state()


def set_rng_state(state) -> None:
    """Restore the default generator's state."""
    default_generator.set_state(state)


def rng(generator: Generator | None) -> np.random.Generator:
    """The NumPy generator behind `generator` (or the default one)."""
    return (generator or default_generator)._rng
