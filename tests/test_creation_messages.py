"""Factory functions against PyTorch: `tensor` of strings and bytes (PyTorch's reading of
nested sequences and its errors), negative sizes (each factory's message), and
`linspace`/`logspace` values to the bit in every dtype."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")

LIBS = (fusegrad, torch)


def outcome(fn):
    """("ok", value) for what `fn()` returns, else the error's type name and message."""
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001  (the error itself is compared)
        return type(e).__name__, str(e)


def both(fn, describe=lambda value: value):
    """The outcomes of `fn(lib)` for fusegrad and for torch, results through `describe`."""
    results = []
    for lib in LIBS:
        kind, value = outcome(lambda lib=lib: fn(lib))
        results.append((kind, describe(value) if kind == "ok" else value))
    return results


def contents(t):
    """A tensor's dtype name, shape and values, comparable across the two libraries."""
    return str(t.dtype).split(".")[-1], tuple(t.shape), t.tolist()


def bits(t) -> np.ndarray:
    """A tensor's values as the integers of their bit patterns (NaN signs and -0.0 count)."""
    if t.dtype.is_complex:
        t = (torch if isinstance(t, torch.Tensor) else fusegrad).view_as_real(t)
    if str(t.dtype).endswith("bfloat16"):
        t = t.view(torch.int16 if isinstance(t, torch.Tensor) else fusegrad.int16)
    values = t.numpy()
    if values.dtype.kind == "f":
        values = values.view({2: np.int16, 4: np.int32, 8: np.int64}[values.itemsize])
    return values


@pytest.fixture
def default_float64():
    """Both libraries' default dtype float64 for the test, restored after."""
    for lib in LIBS:
        lib.set_default_dtype(lib.float64)
    yield
    for lib in LIBS:
        lib.set_default_dtype(lib.float32)


# ---------------------------------------------------------------- tensor() of text

TEXT_DATA = [
    "a", "", b"a", ["a", "b"], ["a"], ["ab"], [""], ["", "a"], [["a"]], [["a", "b"], ["c"]],
    [[1, "a"]], [1, "a"], ["a", 1], [["a"], [1]], [[1], ["a"]], [["a", "b"], [1, 2]],
    [[1, 2], ["a", "b"]], [b"a"], [b"ab", b"cd"], [[b"ab"], [b"cd"]], [1, b"a"], [b"a", 1],
    ["a", b"b"], [b"a", "b"], [["a"], "b"], ["a", ["b"]], [[1], "a"], ["a", [1]], [1.5, "a"],
    [True, "a"], ["a", None], [None, "a"], [[], "a"], ["a", []], [[], ["a"]], [[], "a", 3],
    ("a", "b"), (("a",),), [[1, 2], ["a"]], [["a"], [1, 2]], [[1], [2, 3], "a"],
    [[1, 2], [1, "a"]], [[1, "a"], [2]], [b"\xff"], [1j, "a"], [[1j], ["a"]],
    [np.str_("a")], [[np.str_("a")]], [1, np.str_("a")], [1, np.bytes_(b"a")],
    [np.bytes_(b"a")], np.str_("a"), np.bytes_(b"a"), np.array(["a"]), [np.array(["a", "b"])],
    [None], None, [1, None], [{"a": 1}], {"a": 1}, [bytearray(b"ab")], bytearray(b"ab"),
    [1, bytearray(b"a")],
]


def _dtypes(lib):
    return [None, lib.float32, lib.float64, lib.float16, lib.int64, lib.int8, lib.uint8,
            lib.bool, lib.complex64]


@pytest.mark.parametrize("data", TEXT_DATA, ids=repr)
@pytest.mark.parametrize("which", range(9))
def test_tensor_of_text_matches_torch(data, which):
    def make(lib):
        dtype = _dtypes(lib)[which]
        return lib.tensor(data) if dtype is None else lib.tensor(data, dtype=dtype)

    ours, theirs = both(make, contents)
    assert ours == theirs


@pytest.mark.parametrize("data", [["a"], [1, "a"], [b"a"], ["a", "b"], ["ab"]], ids=repr)
@pytest.mark.parametrize("dtype", [None, "float32"])
def test_tensor_of_text_after_a_tensor(data, dtype):
    """A tensor element is a number to PyTorch (a leaf of the shape it reads)."""
    def make(lib):
        items = [lib.tensor(1.0)] + data
        return lib.tensor(items) if dtype is None else lib.tensor(items, dtype=lib.float32)

    ours, theirs = both(make, contents)
    assert ours == theirs


def test_tensor_of_text_nested_deep():
    """A string ends nothing: PyTorch reads its first elements up to 128 dimensions deep,
    and a deeper list is the same error named for the list."""
    def nest(depth, leaf):
        for _ in range(depth):
            leaf = [leaf]
        return leaf

    for depth in (1, 10, 127, 128, 129, 200):
        ours, theirs = both(lambda lib, d=depth: lib.tensor(nest(d, "abc")), contents)
        assert ours == theirs, depth


def test_tensor_of_text_in_the_repro():
    """The common mistake (a batch of tokens not looked up in a vocabulary)."""
    for data in ("a", ["a", "b"], [["a"]], [["hello", "world"], ["foo", "bar"]], [[1, "a"]],
                 [1, "a"]):
        ours, theirs = both(lambda lib, d=data: lib.tensor(d), contents)
        assert ours == theirs, data
    assert both(lambda lib: lib.tensor(["a", "b"]))[0] == (
        "ValueError", "too many dimensions 'str'")
    assert both(lambda lib: lib.tensor([1, "a"]))[0] == (
        "TypeError", "new(): invalid data type 'str'")


def test_tensor_of_text_complex_default_double(default_float64):
    """With float64 the default, a complex number makes complex128 at once: PyTorch reads
    no further types, and the text after it is an error of storing, not of inference."""
    for data in ([1j, "a"], [1.0, 1j, "a"], [[1j], ["a"]], [1j, None]):
        ours, theirs = both(lambda lib, d=data: lib.tensor(d), contents)
        assert ours == theirs, data


@pytest.mark.parametrize("data", [
    [1, 2], [True, False], [1, True], [1, 2.0], [1j, 1], [True, 1j], [[1, 2], [3.5, 4]],
    [[True], [1]], [], [[]], [[], []], [np.float32(1), 2], [np.int8(1), 2.5], [2 ** 62, 1],
    [fusegrad.tensor(1.5), 2], [[1.0, 2.0], (3, 4)], range(4),
], ids=repr)
def test_tensor_of_numbers_unchanged(data):
    def make(lib):
        items = [lib.tensor(1.5) if isinstance(x, fusegrad.Tensor) else x for x in data] \
            if isinstance(data, list) else data
        return lib.tensor(items)

    ours, theirs = both(make, contents)
    assert ours == theirs


# ---------------------------------------------------------------- negative sizes

NEGATIVE_SIZES = {
    "zeros(-1, -1)": lambda T, x: T.zeros(-1, -1),
    "zeros((2, -3))": lambda T, x: T.zeros((2, -3)),
    "zeros(size=(-1,))": lambda T, x: T.zeros(size=(-1,)),
    "ones(-2)": lambda T, x: T.ones(-2),
    "ones(0, -1)": lambda T, x: T.ones(0, -1),
    "ones(-1, int64, requires_grad)": lambda T, x: T.ones(-1, dtype=T.int64,
                                                          requires_grad=True),
    "empty(-2)": lambda T, x: T.empty(-2),
    "empty(2, -1, -5)": lambda T, x: T.empty(2, -1, -5),
    "empty(channels_last)": lambda T, x: T.empty(-2, 1, 1, 1, memory_format=T.channels_last),
    "full((-1, -1), -inf)": lambda T, x: T.full((-1, -1), float("-inf")),
    "full((2, -3), 0.)": lambda T, x: T.full((2, -3), 0.0),
    "full([-1], True)": lambda T, x: T.full([-1], True),
    "full((-1,), 300, uint8)": lambda T, x: T.full((-1,), 300, dtype=T.uint8),
    "rand(-2)": lambda T, x: T.rand(-2),
    "rand(3, -2)": lambda T, x: T.rand(3, -2),
    "randn(-2)": lambda T, x: T.randn(-2),
    "randn(-2, cfloat)": lambda T, x: T.randn(-2, dtype=T.cfloat),
    "randint(5, (-2,))": lambda T, x: T.randint(5, (-2,)),
    "randint(0, 5, (3, -2))": lambda T, x: T.randint(0, 5, (3, -2)),
    "randint(5, 3, (-1,))": lambda T, x: T.randint(5, 3, (-1,)),
    "randperm(-1)": lambda T, x: T.randperm(-1),
    "randperm(-5, float32)": lambda T, x: T.randperm(-5, dtype=T.float32),
    "randperm(-1, requires_grad)": lambda T, x: T.randperm(-1, requires_grad=True),
    "normal(0, 1, (2, -1))": lambda T, x: T.normal(0.0, 1.0, (2, -1)),
    "normal(0, -1, (-1,))": lambda T, x: T.normal(0.0, -1.0, (-1,)),
    "eye(-1)": lambda T, x: T.eye(-1),
    "eye(2, -1)": lambda T, x: T.eye(2, -1),
    "eye(-1, -2)": lambda T, x: T.eye(-1, -2),
    "empty_strided((-1,), (1,))": lambda T, x: T.empty_strided((-1,), (1,)),
    "empty_strided((2, -1), (1, 1))": lambda T, x: T.empty_strided((2, -1), (1, 1)),
    "empty_strided((-1,), (1, 2))": lambda T, x: T.empty_strided((-1,), (1, 2)),
    "new_zeros(-1)": lambda T, x: x.new_zeros(-1),
    "new_zeros((2, -1))": lambda T, x: x.new_zeros((2, -1)),
    "new_zeros(size=(-1,))": lambda T, x: x.new_zeros(size=(-1,)),
    "new_ones(2, -1)": lambda T, x: x.new_ones(2, -1),
    "new_empty((2, -1))": lambda T, x: x.new_empty((2, -1)),
    "new_full((2, -4), 1.)": lambda T, x: x.new_full((2, -4), 1.0),
    "new_empty_strided((-1,), (1,))": lambda T, x: x.new_empty_strided((-1,), (1,)),
    "new_zeros()": lambda T, x: x.new_zeros(),
    "new_ones(2, size=(2,))": lambda T, x: x.new_ones(2, size=(2,)),
    "square_subsequent_mask(-1)": lambda T, x: T.nn.Transformer.generate_square_subsequent_mask(
        -1),
    "square_subsequent_mask(-3)": lambda T, x: T.nn.Transformer.generate_square_subsequent_mask(
        -3),
    "zeros(0, 2)": lambda T, x: T.zeros(0, 2),
    "empty_strided((0, 2), (2, 1))": lambda T, x: T.empty_strided((0, 2), (2, 1)),
}


@pytest.mark.parametrize("name", list(NEGATIVE_SIZES))
def test_negative_sizes_match_torch(name):
    fn = NEGATIVE_SIZES[name]
    ours, theirs = both(lambda lib: fn(lib, lib.zeros(2, 3)),
                        lambda t: (str(t.dtype).split(".")[-1], tuple(t.shape)))
    assert ours == theirs


def test_negative_size_messages():
    assert outcome(lambda: fusegrad.full((-1, -1), float("-inf"))) == (
        "RuntimeError", "Trying to create tensor with negative dimension -1: [-1, -1]")
    assert outcome(lambda: fusegrad.zeros(-1, -1)) == (
        "RuntimeError", "zeros: Dimension size must be non-negative.")
    assert outcome(lambda: fusegrad.nn.Transformer.generate_square_subsequent_mask(-1)) == (
        "RuntimeError", "Trying to create tensor with negative dimension -1: [-1, -1]")


@pytest.mark.parametrize("size", [0, 1, 4])
def test_square_subsequent_mask_values(size):
    ours, theirs = both(lambda lib: lib.nn.Transformer.generate_square_subsequent_mask(size),
                        contents)
    assert ours == theirs


# ---------------------------------------------------------------- linspace, logspace

RANGES = [
    (-5, 5, 1001), (0.1, 0.9, 9), (-1e6, 1e6, 7), (0, 1, 2), (3, 3, 5), (0, 1, 1), (2.5, 7, 1),
    (0, 1, 100), (-1, 1, 10), (10, -10, 21), (0, 10, 4), (-0.5, 9.7, 4), (-10, 10, 7),
    (0.3, 0.7, 1000), (1 / 3, 2 / 3, 12), (0, math.pi, 1234), (-1e-8, 1e-8, 11), (5, -3, 8),
    (0, 100000, 100001), (0, 1, 70000), (-0.0, 1, 3), (-1, -0.0, 4), (0, 0, 0), (2, 5, 0),
    (math.inf, 1, 3), (0, math.nan, 4), (-3, 250, 77), (True, 3, 3),
]
_rng = np.random.default_rng(0)
RANGES += [(float(a), float(b), int(n)) for a, b, n in zip(
    _rng.uniform(-100, 100, 40) * 10.0 ** _rng.integers(-3, 3, 40),
    _rng.uniform(-100, 100, 40), _rng.integers(2, 3000, 40))]

DTYPES = ["float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int64",
          "int32", "int16", "int8", "uint8"]


def _space(fn, start, end, steps, dtype, **kwargs):
    def make(lib):
        return getattr(lib, fn)(start, end, steps, dtype=getattr(lib, dtype), **kwargs)

    return both(make, lambda t: (str(t.dtype).split(".")[-1], bits(t).tolist()))


# PyTorch's linspace kernel fuses `start + step * i` into one rounding where it is built for
# AVX2 or AVX-512 (as fusegrad computes it); other builds round twice.
FUSED = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


@pytest.mark.skipif(not FUSED, reason="PyTorch's linspace kernel without fused multiply-add")
@pytest.mark.parametrize("dtype", DTYPES)
def test_linspace_bits_match_torch(dtype):
    for start, end, steps in RANGES:
        if dtype.startswith("complex"):
            start, end = complex(start, end / 3), complex(end, -start * 1.5)
        ours, theirs = _space("linspace", start, end, steps, dtype)
        assert ours == theirs, (start, end, steps)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("base", [10.0, 2.0, math.e, 0.5])
def test_logspace_bits_match_torch(dtype, base):
    for start, end, steps in RANGES:
        start, end = start / 30, end / 30
        if dtype.startswith("complex"):
            start, end = complex(start, end / 3), complex(end, -start * 1.5)
        ours, theirs = _space("logspace", start, end, steps, dtype, base=base)
        assert ours == theirs, (start, end, steps)


@pytest.mark.skipif(not FUSED, reason="PyTorch's linspace kernel without fused multiply-add")
def test_linspace_default_dtypes(default_float64):
    for args in [(-1e6, 1e6, 7), (0.1, 0.9, 9), (0, 1j, 5), (1j, 2, 1), (0, 5, 3)]:
        for fn in ("linspace", "logspace"):
            ours, theirs = both(lambda lib, f=fn, a=args: getattr(lib, f)(*a),
                                lambda t: (str(t.dtype).split(".")[-1], bits(t).tolist()))
            assert ours == theirs, (fn, args)


@pytest.mark.skipif(not FUSED, reason="PyTorch's linspace kernel without fused multiply-add")
def test_linspace_symmetric_range_prints_as_torch():
    """The middle of (-1e6, 1e6, 7) is -0.03125 in float32, not 0: it prints in scientific
    notation, as PyTorch's does."""
    assert str(fusegrad.linspace(-1e6, 1e6, 7)) == str(torch.linspace(-1e6, 1e6, 7))


@pytest.mark.parametrize("args", [
    (1e6, 2, 3, "float16"), (0, 1e6, 3, "float16"), (1e6, 2, 1, "float16"),
    (1e39, 1, 3, "bfloat16"), (1e300, 1, 3, "float32"), (1e300, 1, 1, "float32"),
    (-1.0, 10, 4, "uint8"), (-1, 10, 4, "uint8"), (2.7, 10, 4, "int64"), (-2.7, 10, 4, "int64"),
    (300, 1, 3, "uint8"), (300, 1, 3, "int8"), (1e20, 1, 3, "int64"), (1e10, 1, 3, "int32"),
    (2.7, 10, 1, "int64"), (-2.7, 10, 1, "int64"), (300, 10, 1, "uint8"), (-1, 10, 1, "uint8"),
    (-1.5, 10, 1, "uint8"), (0, 1j, 3, "float32"), (0, 1j, 3, "int64"), (0, 1, 3, "bool"),
    (0, 1, 1, "bool"), (0, 1, 0, "bool"), (0, 1, 3, "uint16"), (math.inf, 1, 3, "int64"),
    (math.nan, 1, 3, "int64"), (0, 1, -1, "float32"), (0, 19, 4, "int16"), (0, 12, 5, "int32"),
    (0, 30, 4, "int64"),
], ids=repr)
def test_space_errors_and_conversions_match_torch(args):
    start, end, steps, dtype = args
    for fn in ("linspace", "logspace"):
        ours, theirs = _space(fn, start, end, steps, dtype)
        assert ours == theirs, fn


def test_space_tensor_bounds():
    for start, end in [(0.5, 2), (1, 2), (1j, 2)]:
        for fn in ("linspace", "logspace"):
            def make(lib, f=fn, s=start, e=end):
                return getattr(lib, f)(lib.tensor(s), e, 3)

            ours, theirs = both(make, lambda t: (str(t.dtype).split(".")[-1],
                                                 bits(t).tolist()))
            assert ours == theirs, (fn, start, end)
