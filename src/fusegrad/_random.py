"""Random number generators: PyTorch's CPU generator (a 32-bit Mersenne Twister) behind its
`Generator` API, so a seeded program draws PyTorch's numbers.

The engine is NumPy's `MT19937` bit generator, seeded the way PyTorch seeds its own (the low
32 bits of the seed through the reference `init_genrand`), whose `random_raw` gives the same
32-bit words in bulk. A 64-bit draw is two words, the first one high. Box-Muller's spare
normal is cached in the generator as PyTorch does, and `get_state` writes PyTorch's 5056-byte
layout, so states cross-load both ways. How each op turns words into values lives in
`_random_draws.py`.
"""

from __future__ import annotations

import operator
import os

import numpy as np

from ._device import device as _device
from ._type_names import python_type_name

# Called with the generator before each draw, innermost last: vmap's randomness rules
# (`fusegrad.func`) refuse or replay draws. Empty outside vmap, so a draw pays one test.
DRAW_CHECKS: list = []

DEFAULT_SEED = 67280421310721
_N = 624  # Mersenne Twister words
_STATE_BYTES = 5056
# Byte offsets of PyTorch's state layout: seed, left, seeded, next, the 624 words (one per
# 8 bytes), the cached double normal and its flag, the cached float normal and its flag.
_LEFT, _SEEDED, _NEXT, _WORDS = 8, 12, 16, 24
_NORMAL_Y, _NORMAL_VALID = 5024, 5040
_FLOAT_NORMAL, _FLOAT_VALID = 5048, 5052
_U64 = (1 << 64) - 1


def _engine_for(seed: int) -> np.random.MT19937:
    """A Mersenne Twister seeded as PyTorch seeds one: `init_genrand` of the seed's low 32
    bits, with the first draw regenerating the words."""
    bit_generator = np.random.MT19937()
    bit_generator._legacy_seeding(seed & 0xFFFFFFFF)
    return bit_generator


class Generator:
    """A random number generator with its own state (`manual_seed`, `get_state`...)."""

    def __init__(self, device="cpu"):
        self.device = _device(device)  # a `torch.device`, as PyTorch's generators have
        self._seed = DEFAULT_SEED
        # Made from the seed on the first draw: `import fusegrad` then need not import
        # numpy.random for the default generator, and the stream is the same either way.
        self._mt: np.random.MT19937 | None = None
        self._fresh = True  # nothing drawn since seeding (PyTorch's state says next=0 then)
        self._next_double: float | None = None  # Box-Muller's spare sample, per precision
        self._next_float: float | None = None

    def _engine(self) -> np.random.MT19937:
        """The bit generator, for a draw: the checks in `DRAW_CHECKS` run first."""
        if DRAW_CHECKS:
            for check in tuple(DRAW_CHECKS):
                check(self)
        mt = self._mt
        if mt is None:
            mt = self._mt = _engine_for(self._seed)
        self._fresh = False
        return mt

    def _words(self, n: int) -> np.ndarray:
        """`n` 32-bit draws (as uint64), PyTorch's `random()`."""
        return self._engine().random_raw(n)

    def _words64(self, n: int) -> np.ndarray:
        """`n` 64-bit draws, PyTorch's `random64()`: two words each, the first one high."""
        raw = self._engine().random_raw(2 * n)
        return (raw[0::2] << np.uint64(32)) | raw[1::2]

    @property
    def _rng(self) -> np.random.Generator:
        """A NumPy generator for the few draws PyTorch makes with other algorithms (poisson,
        binomial...): seeded from one 64-bit draw, so seeded programs stay repeatable."""
        return np.random.Generator(np.random.PCG64(int(self._words64(1)[0])))

    def manual_seed(self, seed: int):
        """Reset the generator with `seed`; returns self."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        seed = int(seed)
        if not -(1 << 63) <= seed <= _U64:
            raise ValueError("Overflow when unpacking long long")
        self._seed = seed & _U64
        self._mt = None
        self._fresh = True
        self._next_double = self._next_float = None
        return self

    def seed(self) -> int:
        """Reseed from fresh entropy and return the new seed."""
        seed = int(np.random.SeedSequence().entropy) & _U64
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        """The seed last set."""
        return self._seed

    def get_state(self):
        """The generator state as PyTorch's 5056-byte uint8 tensor (restore with
        `set_state`; PyTorch's generators load it too)."""
        from . import _dtype
        from ._tensor import Tensor

        raw = np.zeros(_STATE_BYTES, np.uint8)
        mt = self._mt if self._mt is not None else _engine_for(self._seed)
        state = mt.state["state"]
        pos = int(state["pos"])
        left, nxt = (1, 0 if self._fresh else _N) if pos == _N else (_N + 1 - pos, pos)
        raw[0:8] = np.frombuffer(np.uint64(self._seed).tobytes(), np.uint8)
        raw[_LEFT:_SEEDED] = np.frombuffer(np.int32(left).tobytes(), np.uint8)
        raw[_SEEDED:_NEXT] = np.frombuffer(np.int32(1).tobytes(), np.uint8)
        raw[_NEXT:_WORDS] = np.frombuffer(np.uint64(nxt).tobytes(), np.uint8)
        words = np.asarray(state["key"], dtype="<u8")
        raw[_WORDS:_WORDS + 8 * _N] = words.view(np.uint8)
        if self._next_double is not None:
            raw[_NORMAL_Y:_NORMAL_Y + 8] = np.frombuffer(
                np.float64(self._next_double).tobytes(), np.uint8)
            raw[_NORMAL_VALID] = 1
        if self._next_float is not None:
            raw[_FLOAT_NORMAL:_FLOAT_NORMAL + 4] = np.frombuffer(
                np.float32(self._next_float).tobytes(), np.uint8)
            raw[_FLOAT_VALID] = 1
        return Tensor._make(raw, _dtype.uint8)

    def set_state(self, new_state) -> None:
        """Restore a state returned by `get_state` (or by a PyTorch generator)."""
        from . import _dtype

        if getattr(new_state, "dtype", None) is not _dtype.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        raw = np.ascontiguousarray(np.asarray(new_state._data, dtype=np.uint8)).reshape(-1)
        if raw.size != _STATE_BYTES:
            raise RuntimeError("Expected a CPUGeneratorImplState of size 5056 but found the "
                               f"input RNG state size to be {raw.size}")
        left = int(raw[_LEFT:_SEEDED].view("<i4")[0])
        seeded = int(raw[_SEEDED:_NEXT].view("<i4")[0])
        nxt = int(raw[_NEXT:_WORDS].view("<u8")[0])
        if not (seeded and 0 < left <= _N and nxt <= _N):
            raise RuntimeError("Invalid mt19937 state")
        words = raw[_WORDS:_WORDS + 8 * _N].view("<u8").astype(np.uint32)
        mt = np.random.MT19937()
        # PyTorch regenerates the words when `left` runs out; NumPy when its position
        # reaches the end: the same moment in every state either writes.
        mt.state = {"bit_generator": "MT19937",
                    "state": {"key": words, "pos": _N if left == 1 else nxt}}
        self._seed = int(raw[0:8].view("<u8")[0])
        self._mt = mt
        self._fresh = left == 1 and nxt == 0
        self._next_double = (float(raw[_NORMAL_Y:_NORMAL_Y + 8].view("<f8")[0])
                             if raw[_NORMAL_VALID] else None)
        self._next_float = (float(raw[_FLOAT_NORMAL:_FLOAT_NORMAL + 4].view("<f4")[0])
                            if raw[_FLOAT_VALID] else None)

    def _snapshot(self) -> tuple:
        """Everything a later draw depends on, for `_restore` (vmap's "same" randomness)."""
        mt = self._mt if self._mt is not None else _engine_for(self._seed)
        return (self._seed, mt.state, self._fresh, self._next_double, self._next_float)

    def _restore(self, snapshot: tuple) -> None:
        """Put back a `_snapshot`."""
        self._seed, state, self._fresh, self._next_double, self._next_float = snapshot
        self._mt = np.random.MT19937()
        self._mt.state = state


default_generator = Generator()
# As PyTorch's, the default generator starts from a seed of fresh entropy: an unseeded
# program draws other numbers on each run (a new `Generator()` starts from DEFAULT_SEED).
default_generator._seed = int.from_bytes(os.urandom(8), "little")


def manual_seed(seed: int) -> Generator:
    """Seed the default generator with `int(seed)` (a float, a numeric string or a one-value
    tensor, as PyTorch's); returns it."""
    return default_generator.manual_seed(int(seed))


def seed() -> int:
    """Seed the default generator from fresh entropy."""
    return default_generator.seed()


def initial_seed() -> int:
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state."""
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    """Restore the default generator's state."""
    default_generator.set_state(new_state)


def generator_or_default(generator: Generator | None) -> Generator:
    """`generator`, or the default one when None. Anything else is refused here as a last
    resort: the public functions refuse it first, in PyTorch's words (`check_generator`)."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"argument 'generator' must be torch.Generator, not "
                        f"{parser_type_name(generator)}")
    return generator


def parser_type_name(value) -> str:
    """The type name PyTorch's argument parser prints for `value`: `torch.dtype` for the
    classes PyTorch defines in `torch` (dtype, Size, device, ...), `Tensor` for a tensor."""
    cls = type(value)
    if cls.__module__ == "fusegrad" and cls.__name__ != "Tensor":
        return f"torch.{cls.__qualname__}"
    return python_type_name(value)


def check_generator(generator, fname: str, position: int | None = None) -> None:
    """PyTorch's error for a `generator` that is no Generator, from a function with one
    signature that takes one (`uniform_`, `multinomial`, ...); `position`: the argument's
    place when it was given positionally."""
    if generator is not None and not isinstance(generator, Generator):
        where = f" (position {position})" if position else ""
        raise TypeError(f"{fname}(): argument 'generator'{where} must be torch.Generator, not "
                        f"{parser_type_name(generator)}")


def bad_generator(generator) -> bool:
    """Whether `generator` is neither None nor a Generator."""
    return generator is not None and not isinstance(generator, Generator)


# PyTorch's overload lists of the random factories (`randperm(n, *, generator, ...)` ...):
# each head (the positional parameters) with a generator, then without one.
_MADE = ("torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, "
         "bool pin_memory = False, bool requires_grad = False")
FACTORY_OPTIONS = "Tensor out = None, " + _MADE
LIKE_OPTIONS = "torch.memory_format memory_format = None, " + _MADE


def factory_signatures(*heads: str, options: str = FACTORY_OPTIONS) -> str:
    """PyTorch's overload list of a random factory whose positional parameters are each of
    `heads`: each with a generator, then without one."""
    return "".join(f" * ({head}, *, torch.Generator generator, {options})\n"
                   f" * ({head}, *, {options})\n" for head in heads)


RANDINT_SIGNATURES = factory_signatures("int high, tuple of ints size",
                                        "int low, int high, tuple of ints size")
RANDPERM_SIGNATURES = factory_signatures("int n")


def random_signatures(note: str = "") -> str:
    """`random_`'s overload list (`note`: the line under the overload without bounds)."""
    return (f" * (*, torch.Generator generator = None)\n{note}"
            " * (int from, int to, *, torch.Generator generator = None)\n"
            " * (int to, *, torch.Generator generator = None)\n")


def invalid_generator_combination(fname: str, args: tuple, kwargs: dict,
                                  signatures: str) -> TypeError:
    """PyTorch's error for a `generator` that is no Generator, from a function with several
    signatures (a factory: one with and one without a generator): "received an invalid
    combination of arguments", the arguments' types, then `signatures` (PyTorch's overload
    list, " * (...)\n" each). `kwargs`: the keyword arguments given, in the order given
    (PyTorch lists them last first; with no positional argument, each is followed by ", ")."""
    got = [parser_type_name(a) for a in args]
    named = [f"{k}={parser_type_name(v)}" for k, v in reversed(kwargs.items())]
    text = ", ".join(got + named) if got else "".join(f"{n}, " for n in named)
    return TypeError(f"{fname}() received an invalid combination of arguments - got ({text}), "
                     f"but expected one of:\n{signatures}")


def check_random_bounds(low: int, high: int, dt: np.dtype) -> None:
    """PyTorch's checks of integer draws in [low, high) for NumPy dtype `dt` (`random_`,
    `randint`), in its order: a non-empty range, a dtype that holds integers (complex ones do
    not), then both ends (`from`, `to - 1`) within an integer or bool dtype's range."""
    if low >= high:
        raise RuntimeError("random_ expects 'from' to be less than 'to', but got "
                           f"from={low} >= to={high}")
    if dt.kind == "c":
        raise RuntimeError("check_random_bounds handles only integral, floating-point and "
                           "boolean types")
    if dt.kind in "biu":
        from ._dtype import from_numpy_dtype

        bottom, top = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min),
                                                     int(np.iinfo(dt).max))
        for value, name in ((low, "from"), (high - 1, "to - 1")):
            if not bottom <= value <= top:
                raise RuntimeError(f"{name} is out of bounds for {from_numpy_dtype(dt).cpp}")


def int64_argument(value) -> int:
    """An int argument as PyTorch's parser reads it, a C long long: anything with
    `__index__` (a 0-d integer tensor too), refused past int64's range."""
    value = operator.index(value)
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError("Overflow when unpacking long long")
    return value


def rng(generator: Generator | None) -> np.random.Generator:
    """A NumPy generator seeded from `generator` (or the default one), for draws whose
    algorithm is not PyTorch's; each call takes one 64-bit draw from the stream."""
    return (generator or default_generator)._rng
