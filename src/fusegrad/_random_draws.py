"""How PyTorch's CPU ops turn a generator's 32/64-bit words into values, reproduced bit for bit
with vectorised NumPy (the tiny normal path loops in Python; the float32 uniform and normal
draws run in C, `ops/native/random.c`, where a compiler is at hand: the same bits).

- uniform: float64 uses a 64-bit word's low 53 bits times 2**-53, float32 (and float16 and
  bfloat16, which compute in float32) a 32-bit word's low 24 bits times 2**-24; then
  `x * (to - from) + from` in that precision.
- normal on a contiguous tensor of 16 or more elements: all uniforms first, then Box-Muller
  on blocks of 16 (8 pairs: `1 - u[j]` feeds the radius, `u[j + 8]` the angle), the last
  block redrawn and recomputed when the size is no multiple of 16. float32 computes it with
  PyTorch's AVX2 Cephes-style log and sincos polynomials, whose fused multiply-adds we
  reproduce in float64 (exact products); float64 uses the C library's log, sin and cos.
- normal otherwise (fewer than 16 elements, or not contiguous): one double Box-Muller pair
  per two values, the spare cached in the generator across calls.
- integers: `word % range + low`, with 64-bit words once the range reaches 2**28.
- randperm: a Fisher-Yates shuffle with `word % (n - i)`, its swaps resolved without a loop
  over them (`_swapped_in_turn`).
- bernoulli and the other distributions: one double (or float) uniform per element.
"""

from __future__ import annotations

import math

import numpy as np

from . import _random
from ._random import Generator, generator_or_default

_F32 = np.float32
_MASK24 = np.uint64((1 << 24) - 1)
_MASK53 = np.uint64((1 << 53) - 1)
_LONG_RANGE = 1 << 28  # ranges from here on draw 64-bit words


def _gen(generator) -> Generator:
    return generator_or_default(generator)


# The C kernels of the float32 draws (`ops/native/random.c`, the same bits in one pass):
# `ops.random` registers the native layer's `function` at import (`use_native_kernels`:
# this module sits below it). None, or a None answer (no C compiler, kernels off): the NumPy
# path runs.
_native_function = None


def use_native_kernels(find) -> None:
    """Register `find(family, name, argument codes)`, the native layer's lookup of a C
    function (None where there is none), for the float32 draws."""
    global _native_function
    _native_function = find


def _kernel(name: str, args: str):
    find = _native_function
    return None if find is None else find("random", name, args)


def unit_float(gen: Generator, n: int) -> np.ndarray:
    """`n` float32 uniforms in [0, 1) from 32-bit words."""
    return (gen._words(n) & _MASK24).astype(_F32) * _F32(2.0 ** -24)


def unit_double(gen: Generator, n: int) -> np.ndarray:
    """`n` float64 uniforms in [0, 1) from 64-bit words."""
    return (gen._words64(n) & _MASK53).astype(np.float64) * (2.0 ** -53)


def _is_double(dtype) -> bool:
    return np.dtype(dtype) == np.float64


def uniform(generator, n: int, dtype, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """`uniform_(low, high)` on `n` elements of `dtype` (a NumPy float dtype)."""
    gen = _gen(generator)
    if _is_double(dtype):
        x = unit_double(gen, n)
        return x if (low, high) == (0.0, 1.0) else _fma64(x, high - low, low)
    affine = (low, high) != (0.0, 1.0)  # PyTorch's build fuses x * (to - from) + from
    kernel = _kernel("uniform_f32", "ppiffi") if n else None
    if kernel is not None:
        words = gen._words(n)
        x = np.empty(n, _F32)
        kernel(words.ctypes.data, x.ctypes.data, n, float(_F32(high) - _F32(low)),
               float(_F32(low)), int(affine))
    else:
        x = unit_float(gen, n)
        if affine:
            x = _fused(_wide(x), _F32(high) - _F32(low), _F32(low))
    if np.dtype(dtype) == np.float32:
        return x
    # Narrower floats: a value that rounds up to `high` becomes `low`, as in PyTorch.
    out = x.astype(dtype)
    top = np.asarray(high).astype(dtype)
    out[out == top] = np.asarray(low).astype(dtype)
    return out


# ---------------------------------------------------------------- normal

_LOG_POLY = tuple(_F32(c) for c in (
    7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
    -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1))


# Float32 arithmetic is done as float64 rounded back where it helps speed: for +, - and * of
# floats that rounding is exact (53 >= 2 * 24 + 2 bits), and a float64 a * b + c rounded once
# to float32 is the fused multiply-add PyTorch's build emits, but for the rare double rounding
# of the sum (never seen in tens of millions of draws).
_F64 = np.float64


def _fused(a64: np.ndarray, b, c) -> np.ndarray:
    """float32 fma(a, b, c) for float64 `a64` (and `b`, `c`) holding float32 values."""
    t = a64 * b
    t += c
    return t.astype(_F32)


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(_F64)


def _log_avx(u: np.ndarray) -> np.ndarray:
    """PyTorch's AVX2 float logarithm (Cephes coefficients, fused as its build fuses them)
    for u in (0, 1]."""
    bits = u.view(np.int32)
    e = ((bits >> 23) - 0x7E).astype(_F32)  # the exponent, plus one
    m = ((bits & 0x007FFFFF) | 0x3F000000).view(_F32)  # the mantissa in [0.5, 1)
    low = (m < _F32(0.707106781186547524)).view(np.uint8).astype(_F32)
    m = m * (low + _F32(1)) - _F32(1)  # 2m - 1 below sqrt(1/2), else m - 1: both exact
    e -= low
    z = m * m
    m64 = _wide(m)
    y = _fused(m64, _LOG_POLY[0], _LOG_POLY[1])
    for c in _LOG_POLY[2:]:
        y = _fused(_wide(y), m64, c)
    y = _fused(_wide(y * m), _wide(z), _wide(e * _F32(-2.12194440e-4)))
    y = y - z * _F32(0.5)  # z / 2 is exact, so the fused and plain forms agree
    return (m + y) + e * _F32(0.693359375)  # e * 0.693359375 is exact too


def _sincos_avx(x: np.ndarray) -> tuple:
    """PyTorch's AVX2 float sine and cosine (Cephes) of x in [0, 2 pi)."""
    j = ((x * _F32(1.27323954473516)).astype(np.int32) + 1) & ~1
    y = j.astype(_F32)
    # y * DP1 and y * DP2 are exact for the small octants here; DP3's product is not
    x = (x + y * _F32(-0.78515625)) + y * _F32(-2.4187564849853515625e-4)
    x = _fused(_wide(y), _F32(-3.77489497744594108e-8), _wide(x))
    z = x * x
    z64 = _wide(z)
    c = _fused(_wide(_fused(z64, _F32(2.443315711809948E-005), _F32(-1.388731625493765E-003))),
               z64, _F32(4.166664568298827E-002))
    c = _fused(_wide(c * z), z64, _wide(-(z * _F32(0.5)))) + _F32(1)
    s = _fused(_wide(_fused(z64, _F32(-1.9515295891E-4), _F32(8.3321608736E-3))), z64,
               _F32(-1.6666654611E-1))
    x64 = _wide(x)
    s = _fused(_wide(s * z), x64, x64)
    # Which polynomial is the sine, and the signs, by arithmetic (masked selects are slow)
    first = ((j & 2) == 0).view(np.uint8).astype(_F32)
    other = _F32(1) - first
    sin_sign = _F32(1) - ((j >> 1) & 2).astype(_F32)
    cos_sign = ((j - 2) & 4).astype(_F32) * _F32(0.5) - _F32(1)
    sin = (s * first + c * other) * sin_sign
    cos = (c * first + s * other) * cos_sign
    return sin, cos


_HUGE_FACTOR = 2.0 ** 996  # above this, Dekker's split of the factor overflows
_RESCALE = 64


def _fma64(a, b, c) -> np.ndarray:
    """a * b + c in float64 with one rounding (exact product by Dekker's split)."""
    a = np.asarray(a, np.float64)
    if np.ndim(b) == 0 and abs(float(b)) >= _HUGE_FACTOR:
        # b * (2**27 + 1) would overflow to inf and turn every value into NaN, so compute
        # in a range scaled down by a power of two (exact) and scale the result back.
        # A zero factor keeps `c` untouched: scaling a tiny `c` down could lose its bits.
        down = math.ldexp(1.0, -_RESCALE)
        scaled = _fma64_core(a, float(b) * down, np.multiply(c, down))
        with np.errstate(over="ignore"):
            return np.where(a == 0, c, scaled * math.ldexp(1.0, _RESCALE))
    return _fma64_core(a, b, c)


def _fma64_core(a: np.ndarray, b, c) -> np.ndarray:
    p = a * b
    split = 134217729.0  # 2**27 + 1
    ah = a * split
    ah = ah - (ah - a)
    bh = b * split
    bh = bh - (bh - b)
    err = ((ah * bh - p) + ah * (b - bh) + (a - ah) * bh) + (a - ah) * (b - bh)
    s = p + c
    bp = s - p
    t = (p - (s - bp)) + (c - bp)
    return s + (t + err)


def _libm(fn, x: np.ndarray) -> np.ndarray:
    """The C library's `fn` elementwise (NumPy's own float64 log differs in the last bit
    now and then, and PyTorch calls the C library)."""
    return np.fromiter(map(fn, x.tolist()), np.float64, count=x.size)


_CHUNK = 4096  # blocks of 16 per pass: fewer calls, temporaries still near the cache


def _box_muller16_float(u: np.ndarray, mean: float, std: float) -> np.ndarray:
    kernel = _kernel("box_muller16_f32", "ppiffi") if u.size else None
    if kernel is not None:
        u = np.ascontiguousarray(u)
        out = np.empty(u.size, _F32)
        kernel(u.ctypes.data, out.ctypes.data, u.size // 16, float(_F32(mean)),
               float(_F32(std)), int((mean, std) != (0.0, 1.0)))
        return out
    blocks = u.reshape(-1, 16)
    out = np.empty_like(blocks)
    std32, mean32 = _F32(std), _F32(mean)
    for start in range(0, len(blocks), _CHUNK):
        part = blocks[start:start + _CHUNK]
        radius = np.sqrt(_F32(-2) * _log_avx(_F32(1) - part[:, :8]))
        sin, cos = _sincos_avx(_F32(2.0 * math.pi) * part[:, 8:])
        cos *= radius
        sin *= radius
        if (mean, std) != (0.0, 1.0):
            cos, sin = _fused(_wide(cos), std32, mean32), _fused(_wide(sin), std32, mean32)
        out[start:start + _CHUNK, :8] = cos
        out[start:start + _CHUNK, 8:] = sin
    return out.reshape(-1)


def _box_muller16_double(u: np.ndarray, mean: float, std: float) -> np.ndarray:
    blocks = u.reshape(-1, 16)
    radius = np.sqrt(-2 * _libm(math.log, 1 - blocks[:, :8].reshape(-1))).reshape(-1, 8)
    theta = 2.0 * math.pi * blocks[:, 8:]
    out = np.empty_like(blocks)
    first, second = radius * np.cos(theta), radius * np.sin(theta)
    if (mean, std) != (0.0, 1.0):
        first, second = _fma64(first, std, mean), _fma64(second, std, mean)
    out[:, :8], out[:, 8:] = first, second
    return out.reshape(-1)


def normal(generator, n: int, dtype, mean: float = 0.0, std: float = 1.0,
           contiguous: bool = True) -> np.ndarray:
    """`normal_(mean, std)` on `n` elements of `dtype` (1-D, in the tensor's memory order)."""
    gen = _gen(generator)
    if n < 16 or not contiguous:  # PyTorch's build fuses value * std + mean here too
        values = normal_doubles(gen, n)
        if (mean, std) != (0.0, 1.0):
            values = _fma64(values, std, mean)
        return values.astype(dtype)
    whole = n - n % 16
    if _is_double(dtype):
        u = unit_double(gen, n)
        out = np.empty(n, np.float64)
        out[:whole] = _box_muller16_double(u[:whole], mean, std)
        if whole < n:  # PyTorch redraws and recomputes the last 16 values
            out[n - 16:] = _box_muller16_double(unit_double(gen, 16), mean, std)
        return out
    # float32 fills the tensor with uniforms first (the tail's too, then overwritten);
    # float16 and bfloat16 draw block by block, so their tail draws no wasted uniforms.
    u = unit_float(gen, n if np.dtype(dtype) == np.float32 else whole)
    out = np.empty(n, _F32)
    out[:whole] = _box_muller16_float(u[:whole], mean, std)
    if whole < n:
        out[n - 16:] = _box_muller16_float(unit_float(gen, 16), mean, std)
    return out.astype(dtype, copy=False)


def normal_doubles(gen: Generator, n: int) -> np.ndarray:
    """`n` standard normals from PyTorch's scalar double Box-Muller, which caches the spare
    value of each pair in the generator (across calls too)."""
    out = np.empty(n)
    start = 0
    if n and gen._next_double is not None:
        out[0] = gen._next_double
        gen._next_double = None
        start = 1
    pairs = (n - start + 1) // 2
    if pairs:
        u = unit_double(gen, 2 * pairs)
        theta = 2.0 * math.pi * u[0::2]
        radius = np.sqrt(-2.0 * _libm(math.log1p, -u[1::2]))
        cos = radius * _libm(math.cos, theta)
        sin = radius * _libm(math.sin, theta)
        both = np.empty(2 * pairs)
        both[0::2], both[1::2] = cos, sin
        out[start:] = both[:n - start]
        if (n - start) % 2:
            gen._next_double = float(sin[-1])
    return out


class SerialDraws:
    """The draws of one of PyTorch's serial CPU kernels (gamma, dirichlet), one value at a
    time as its `uniform_real_distribution<double>` and `normal_distribution<double>` make
    them: a uniform of one 64-bit word, a normal from the generator's spare Box-Muller value
    or a new pair of two words (the spare kept in the generator). Words are read from blocks
    drawn ahead; `finish` leaves the generator as if only the words used had been drawn."""

    def __init__(self, gen: Generator, expected: int = 16):
        self._gen = gen
        self._start = gen._snapshot()
        self._block = max(16, expected)
        self._words: list = []
        self._pos = 0
        self._used = 0

    def uniform(self) -> float:
        """A uniform double in [0, 1)."""
        if self._pos == len(self._words):
            self._words = (self._gen._words64(self._block) & _MASK53).tolist()
            self._block *= 2
            self._pos = 0
        word = self._words[self._pos]
        self._pos += 1
        self._used += 1
        return word * (2.0 ** -53)

    def normal(self) -> float:
        """A standard normal double."""
        gen = self._gen
        spare = gen._next_double
        if spare is not None:
            gen._next_double = None
            return spare
        u1 = self.uniform()
        u2 = self.uniform()
        radius = math.sqrt(-2.0 * math.log1p(-u2))
        theta = 2.0 * math.pi * u1
        gen._next_double = radius * math.sin(theta)
        return radius * math.cos(theta)

    def finish(self) -> None:
        """Put the generator where the words used leave it (the spare normal kept)."""
        gen = self._gen
        spare = gen._next_double
        gen._restore(self._start)
        if self._used:
            gen._words64(self._used)
        gen._next_double = spare


def poisson_value(rate: float, draws: SerialDraws) -> int:
    """One Poisson(rate) draw as PyTorch's CPU `sample_poisson`: Hörmann's transformed
    rejection (PTRS) from rate 10, the product of uniforms below it."""
    if rate >= 10:
        slam = math.sqrt(rate)
        loglam = math.log(rate)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        while True:
            u = draws.uniform() - 0.5
            v = draws.uniform()
            us = 0.5 - abs(u)
            k = math.floor((2 * a / us + b) * u + rate + 0.43)
            if us >= 0.07 and v <= vr:
                return k
            if k < 0 or (us < 0.013 and v > us):
                continue
            if (math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b)) <= \
                    (-rate + k * loglam - math.lgamma(k + 1.0)):
                return k
    if rate == 0:
        return 0
    enlam = math.exp(-rate)
    x, prod = 0, 1.0
    while True:
        prod *= draws.uniform()
        if prod > enlam:
            x += 1
        else:
            return x


def poisson(generator, rates: np.ndarray) -> np.ndarray:
    """Poisson draws (as float64) for `rates` in row-major order, one at a time as
    PyTorch's serial CPU kernel draws them."""
    flat = rates.reshape(-1).astype(np.float64).tolist()
    serial = SerialDraws(_gen(generator), 2 * len(flat))
    try:
        out = [poisson_value(r, serial) for r in flat]
    finally:
        serial.finish()
    return np.array(out, np.float64).reshape(rates.shape)


# Stirling-series tails log k! - [(k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2] for k <= 9
# (the table of PyTorch's, and TensorFlow's, binomial sampler); the series above that.
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_tail(k: float) -> float:
    if k <= 9:
        return _STIRLING_TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


def _binomial_inversion(count, prob, draws, s) -> float:
    # Counts geometric waiting times until they pass `count`.
    logprob = float(np.log1p(-prob))
    geom_sum = 0.0
    num = 0
    while True:
        geom_sum += math.ceil(math.log(draws.uniform()) / logprob)
        if geom_sum > count:
            return num
        num += 1


def _btrs(count, prob, draws, s) -> float:
    # Hormann's transformed rejection with squeeze (BTRS), as PyTorch runs it: products of
    # the parameters in their own precision `s`, the rest in double.
    stddev = float(np.sqrt(s(count * prob * (s(1) - prob))))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * float(prob)
    c = float(count * prob) + 0.5
    v_r = 0.92 - 4.2 / b
    r = float(prob / (s(1) - prob))
    alpha = (2.83 + 5.1 / b) * stddev
    m = float(np.floor((count + s(1)) * prob))
    n = float(count)
    while True:
        u = draws.uniform() - 0.5
        v = draws.uniform()
        us = 0.5 - abs(u)
        k = float(s(math.floor((2 * a / us + b) * u + c)))
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = math.log(v * alpha / (a / (us * us) + b))
        upper = ((m + 0.5) * math.log((m + 1) / (r * (n - m + 1)))
                 + (n + 1) * math.log((n - m + 1) / (n - k + 1))
                 + (k + 0.5) * math.log(r * (n - k + 1) / (k + 1))
                 + _stirling_tail(m) + _stirling_tail(n - m)
                 - _stirling_tail(k) - _stirling_tail(n - k))
        if v <= upper:
            return k


def binomial_value(count, prob, draws: SerialDraws, single: bool) -> float:
    """One Binomial(count, prob) draw as PyTorch's CPU `sample_binomial`: inversion of
    geometric waiting times when count * min(p, 1 - p) < 10, BTRS above, drawing the
    uniforms from `draws` (a `SerialDraws`); `single`: the parameters are float32."""
    s = np.float32 if single else np.float64
    count, prob = s(count), s(prob)
    if count <= 0 or prob <= 0:
        return 0.0
    if prob >= 1:
        return float(count)
    if prob <= 0.5:
        if count * prob >= 10:
            return _btrs(count, prob, draws, s)
        return float(_binomial_inversion(count, prob, draws, s))
    if prob > 0.5:
        q = s(1) - prob
        if count * q >= 10:
            return float(count) - _btrs(count, q, draws, s)
        return float(count) - _binomial_inversion(count, q, draws, s)
    return math.nan


def binomial(generator, counts: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Binomial draws (as float64) for `counts` and `probs` (one shape, float32 or float64
    parameters) in row-major order, one at a time as PyTorch's serial CPU kernel draws them."""
    single = counts.dtype == np.float32
    flat_counts = counts.reshape(-1).tolist()
    flat_probs = probs.reshape(-1).tolist()
    serial = SerialDraws(_gen(generator), 2 * len(flat_counts))
    try:
        out = [binomial_value(c, p, serial, single) for c, p in zip(flat_counts, flat_probs)]
    finally:
        serial.finish()
    return np.array(out, np.float64).reshape(counts.shape)


# ---------------------------------------------------------------- integers


def integers(generator, n: int, low: int, high: int) -> np.ndarray:
    """`random_(low, high)`: `n` int64 values in [low, high)."""
    if generator is not None and _random.bad_generator(generator):
        # (the public ops refuse it first: here the samplers' draw, PyTorch's
        # `randint(high=n, size=(k,), dtype=torch.int64, generator=generator)`)
        from ._dtype import int64

        raise _random.invalid_generator_combination(
            "randint", (), {"high": high, "size": (n,), "dtype": int64,
                            "generator": generator}, _random.RANDINT_SIGNATURES)
    gen = _gen(generator)
    span = high - low
    words = gen._words64(n) if span >= _LONG_RANGE else gen._words(n)
    return ((words % np.uint64(span)) + np.uint64(low & ((1 << 64) - 1))).view(np.int64)


def random_bits(generator, n: int, dtype) -> np.ndarray:
    """`random_()` without bounds: [0, 2**digits] for floats, [0, max] for integers."""
    if generator is not None and _random.bad_generator(generator):
        # (the public ops refuse it first: here a data loader's seed, PyTorch's `random_`)
        raise _random.invalid_generator_combination(
            "random_", (), {"generator": generator}, _random.random_signatures())
    gen = _gen(generator)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return (gen._words(n) & np.uint64(1)).astype(np.bool_)
    if dt == np.int64:
        return (gen._words64(n) % np.uint64(1 << 63)).view(np.int64)
    if dt == np.float64:
        return (gen._words64(n) % np.uint64((1 << 53) + 1)).astype(np.float64)
    if dt.kind == "f" or dt.kind == "V" or dt.name == "bfloat16":
        digits = {np.dtype(np.float32): 24, np.dtype(np.float16): 11}.get(dt, 8)
        return (gen._words(n) % np.uint64((1 << digits) + 1)).astype(np.int64)
    return (gen._words(n) % np.uint64(int(np.iinfo(dt).max) + 1)).astype(np.int64)


def _swapped_in_turn(js: np.ndarray, n: int) -> np.ndarray:
    """range(n) after swapping positions i and js[i] (js[i] >= i) for i = 0, 1, ..., n - 2
    in turn, without a Python loop over the swaps.

    Position i is final after step i: it takes what position js[i] holds then. That is the
    element the last earlier step aimed at js[i] displaced (or js[i] itself, if none did);
    and the element step t displaces, from position t, is in turn the one the last earlier
    step aimed at t displaced (or t). Those "last earlier step aimed at the same place"
    links come from one sort of (target, step) pairs; following them to their ends (the
    elements never displaced before) takes a few rounds of pointer jumping."""
    steps = n - 1
    if steps < 512:  # a few swaps: the loop itself costs less than the passes below
        perm = list(range(n))
        for i, j in enumerate(js.tolist()):
            perm[i], perm[j] = perm[j], perm[i]
        return np.array(perm, dtype=np.int64)
    s = np.arange(steps, dtype=np.int64)
    # (target, step) pairs sorted: grouped by target, each group in step order (packed in
    # one int64 each where they fit, one sort of plain integers)
    if n < 1 << 31:
        keys = np.sort((js << 32) | s)
        order, targets = keys & 0xFFFFFFFF, keys >> 32
    else:
        order = np.lexsort((s, js))
        targets = js[order]
    same = targets[1:] == targets[:-1]
    before = np.full(steps, -1, np.int64)  # the last earlier step aimed at js[i]
    before[order[1:][same]] = order[:-1][same]
    ends = np.ones(steps, bool)
    ends[:-1] = ~same
    last = np.full(n, -1, np.int64)  # the last step aimed at each position
    last[targets[ends]] = order[ends]
    # the last step before t aimed at t: at a self-swap (js[t] == t) the one before it
    link = np.where(js == s, before, last[:steps])
    source = np.where(link < 0, s, link)  # the element step t displaces, once resolved
    while True:
        further = source[source]
        if np.array_equal(further, source):
            break
        source = further
    perm = np.empty(n, np.int64)
    perm[:steps] = np.where(before >= 0, source[np.maximum(before, 0)], js)
    perm[steps] = source[last[steps]] if last[steps] >= 0 else steps
    return perm


def randperm(generator, n: int) -> np.ndarray:
    """PyTorch's CPU permutation of range(n): Fisher-Yates, word % (n - i) for position i."""
    if generator is not None and _random.bad_generator(generator):
        # (the public `randperm` refuses it first: here the samplers' and random_split's)
        raise _random.invalid_generator_combination(
            "randperm", (n,), {"generator": generator}, _random.RANDPERM_SIGNATURES)
    gen = _gen(generator)
    if n < (1 << 32) // 20:
        if n <= 1:
            return np.arange(n, dtype=np.int64)
        swaps = gen._words(n - 1) % np.arange(n, 1, -1, dtype=np.uint64)
        swaps += np.arange(n - 1, dtype=np.uint64)  # the position swapped with i
        return _swapped_in_turn(swaps.astype(np.int64), n)
    # Long permutations: the inside-out shuffle with 64-bit words.
    perm = list(range(n))
    picks = (gen._words64(n) % np.arange(1, n + 1, dtype=np.uint64)).tolist()
    for i, z in enumerate(picks):
        perm[i] = perm[z]
        perm[z] = i
    return np.array(perm, dtype=np.int64)


# ---------------------------------------------------------------- other distributions


def bernoulli_scalar(generator, n: int, p: float) -> np.ndarray:
    """`bernoulli_(p)`: one double uniform per element, true below p."""
    return unit_double(_gen(generator), n) < p


def bernoulli_tensor(generator, p: np.ndarray) -> np.ndarray:
    """`bernoulli_(p_tensor)` / `bernoulli(p)`: double uniforms against float64
    probabilities, float uniforms against narrower ones (p already in the output's shape)."""
    gen = _gen(generator)
    flat = np.ascontiguousarray(p).reshape(-1)
    if flat.dtype == np.float64:
        return (unit_double(gen, flat.size) < flat).reshape(np.shape(p))
    return (unit_float(gen, flat.size) < flat.astype(_F32)).reshape(np.shape(p))


def exponential(generator, n: int, lambd: float) -> np.ndarray:
    """`exponential_(lambd)`: -1/lambd * log1p(-u) in double."""
    u = unit_double(_gen(generator), n)
    return (-1.0 / lambd) * _libm(math.log1p, -u)


def geometric(generator, n: int, p: float) -> np.ndarray:
    """`geometric_(p)`: ceil(log(u) / log1p(-p)) in double."""
    u = unit_double(_gen(generator), n)
    return np.ceil(_libm(math.log, u) / math.log1p(-p))


def cauchy(generator, n: int, median: float, sigma: float) -> np.ndarray:
    """`cauchy_(median, sigma)`: median + sigma * tan(pi * (u - 0.5)) in double."""
    u = unit_double(_gen(generator), n)
    return median + sigma * _libm(math.tan, math.pi * (u - 0.5))


def log_normal(generator, n: int, mean: float, std: float) -> np.ndarray:
    """`log_normal_(mean, std)`: exp of the scalar double normal path."""
    return _libm(math.exp, _fma64(normal_doubles(_gen(generator), n), std, mean))
