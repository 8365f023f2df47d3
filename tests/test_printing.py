"""``fusegrad._printing.format_tensor`` must reproduce ``repr(torch.Tensor)`` exactly."""

import os
import zlib

os.environ.setdefault("OMP_NUM_THREADS", "1")

import math  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from fusegrad._printing import format_tensor, get_printoptions, set_printoptions  # noqa: E402

FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8"]
ALL_DTYPES = [*FLOAT_DTYPES, *INT_DTYPES, "bool"]

SCALES = [1e-6, 1e-4, 1e-2, 1.0, 10.0, 1e3, 1e5, 1e9]


@pytest.fixture(autouse=True)
def _restore_print_state():
    """Every test starts from (and leaves behind) the default options on both sides."""
    torch.set_printoptions(profile="default")
    set_printoptions(profile="default")
    default_dtype = torch.get_default_dtype()
    yield
    torch.set_default_dtype(default_dtype)
    torch.set_printoptions(profile="default")
    set_printoptions(profile="default")


def both_set(**kwargs):
    """Apply the same print options to torch and to fusegrad."""
    torch.set_printoptions(**kwargs)
    set_printoptions(**kwargs)


def make_pair(values, dtype_name):
    """Return ``(numpy array, torch tensor)`` holding identical values of ``dtype_name``.

    ``values`` is anything ``np.asarray`` accepts. bfloat16 goes through float32 on the torch
    side and the NumPy array is read back from the rounded tensor, so both hold the same bits.
    """
    if dtype_name == "bfloat16":
        base = np.asarray(values, dtype=np.float32)
        tensor = torch.from_numpy(base.copy()).to(torch.bfloat16)
        array = tensor.to(torch.float32).numpy().astype(ml_dtypes.bfloat16)
        return array, tensor
    with np.errstate(over="ignore", invalid="ignore"):
        array = np.asarray(values).astype(np.dtype(dtype_name))
    return array, torch.from_numpy(array.copy())


def check(values, dtype_name, default="float32"):
    """Assert that fusegrad's text equals torch's repr for the given values and dtype."""
    array, tensor = make_pair(values, dtype_name)
    expected = repr(tensor)
    got = format_tensor(array, dtype_name, default)
    assert got == expected, f"\nfusegrad:\n{got}\ntorch:\n{expected}"


def random_values(rng, shape, scale, dtype_name):
    """Random data of the given shape: signed floats of magnitude ~scale, or valid ints."""
    if dtype_name == "bool":
        return rng.random(shape) < 0.5
    if dtype_name in INT_DTYPES:
        info = np.iinfo(np.dtype(dtype_name))
        low, high = max(info.min, -(10**6)), min(info.max, 10**6)
        return rng.integers(low, high, size=shape, endpoint=True)
    return rng.standard_normal(shape) * scale


# --------------------------------------------------------------------------- options


def test_get_printoptions_matches_torch():
    assert get_printoptions() == torch._tensor_str.get_printoptions()
    for kwargs in [
        {"precision": 2},
        {"threshold": 5, "edgeitems": 1, "linewidth": 40, "sci_mode": True},
        {"profile": "short"},
        {"profile": "full", "precision": 6},
        {"profile": "no-such-profile"},
        {"profile": "default"},
    ]:
        both_set(**kwargs)
        assert get_printoptions() == torch._tensor_str.get_printoptions()


def test_sci_mode_is_reset_by_every_call():
    both_set(sci_mode=True)
    both_set(precision=3)
    assert get_printoptions()["sci_mode"] is None
    check([1.0, 2.5], "float32")


# --------------------------------------------------------------------------- basics


@pytest.mark.parametrize("dtype_name", ALL_DTYPES)
def test_zero_dim(dtype_name):
    rng = np.random.default_rng(0)
    for scale in SCALES:
        check(np.array(random_values(rng, (), scale, dtype_name)), dtype_name)
    check(np.array(0), dtype_name)
    check(np.array(1), dtype_name)


@pytest.mark.parametrize(
    "value",
    [
        0.0,
        -0.0,
        3.0,
        -7.0,
        0.5,
        1e-5,
        1e10,
        123456.789,
        math.nan,
        math.inf,
        -math.inf,
        1e-30,
        65504.0,
    ],
)
def test_zero_dim_special_values(value):
    for dtype_name in FLOAT_DTYPES:
        check(np.array(value), dtype_name)


@pytest.mark.parametrize("dtype_name", ALL_DTYPES)
@pytest.mark.parametrize(
    "shape", [(1,), (5,), (17,), (1, 1), (3, 4), (2, 3, 4), (2, 2, 2, 3), (1, 3, 1, 2)]
)
def test_random_shapes_and_scales(dtype_name, shape):
    rng = np.random.default_rng(zlib.crc32(repr((dtype_name, shape)).encode()))
    scales = SCALES if dtype_name in FLOAT_DTYPES else [1.0]
    for scale in scales:
        check(random_values(rng, shape, scale, dtype_name), dtype_name)


@pytest.mark.parametrize("dtype_name", FLOAT_DTYPES)
def test_integer_valued_floats(dtype_name):
    check([1.0, 2.0, 3.0], dtype_name)
    check([[-1.0, 20.0], [300.0, 0.0]], dtype_name)
    check([0.0, 0.0, 0.0], dtype_name)
    check([1.0, 2000.0], dtype_name)  # integers, but ratio > 1000: scientific
    check(np.arange(-12, 12, dtype=np.float64).reshape(2, 3, 4), dtype_name)
    check([100000.0, -5.0, 7.0], dtype_name)


@pytest.mark.parametrize("dtype_name", FLOAT_DTYPES)
def test_nan_inf_and_negative_zero(dtype_name):
    nan, inf = math.nan, math.inf
    cases = [
        [nan, inf, -inf],
        [0.0, nan],
        [-0.0, 0.0, 1.0],
        [-0.0, 0.5],
        [1.5, -inf, nan, 2.25],
        [1.0, inf, -2.0],
        [1e-6, nan, 3.0],
        [[nan, 1.0], [-inf, 1e9]],
        [[-0.0, -0.0], [0.0, nan]],
        [123.456, -0.0, inf],
    ]
    for values in cases:
        check(values, dtype_name)


def test_sci_mode_thresholds():
    for values in [
        [1e-4, 1.0],  # min exactly at the threshold: fixed point
        [9.99e-5, 1.0],
        [1.0, 1000.0],  # ratio exactly 1000
        [1.0, 1000.5],
        [1e8, 1.5],
        [1.5e8, 1e8],
        [99999999.0, 2e7],
        [0.1, 99.99],
        [9.99996, 1.0],  # rounding widens the text
        [-9.99996e-5, 5.0],
    ]:
        for dtype_name in ["float32", "float64"]:
            check(values, dtype_name)


def test_float16_and_bfloat16_extremes():
    check([65504.0, -65504.0, 6e-8, 1.0], "float16")
    check([3.0e38, 1e-38, -2.5], "bfloat16")
    check([1.0 / 3.0, 2.0 / 3.0, 100.0 / 7.0], "bfloat16")
    check([1.0 / 3.0, 2.0 / 3.0, 100.0 / 7.0], "float16")


@pytest.mark.parametrize("dtype_name", INT_DTYPES)
def test_integers(dtype_name):
    info = np.iinfo(np.dtype(dtype_name))
    check([info.min, 0, info.max], dtype_name)
    check([[1, -1], [10, 100]] if info.min < 0 else [[1, 0], [10, 100]], dtype_name)


def test_bool():
    check([True, False, True], "bool")
    check([[True], [False]], "bool")
    check(np.ones((3, 30), dtype=bool), "bool")


def test_complex():
    check(np.array([1 + 2j, -3.5 - 0.25j, 0j]), "complex64")
    check(np.array([[1e-6 + 1j, 2 - 1e5j], [-0.0 - 0.0j, 4j]]), "complex128")
    check(np.array(1.5 - 2j), "complex128")
    torch.set_default_dtype(torch.float64)
    check(np.array([1 + 2j, 3 - 4j]), "complex128", default="float64")
    check(np.array([1 + 2j, 3 - 4j]), "complex64", default="float64")


# --------------------------------------------------------------------------- dtype display


@pytest.mark.parametrize("dtype_name", ALL_DTYPES)
@pytest.mark.parametrize("default", ["float32", "float64", "float16", "bfloat16"])
def test_dtype_item_depends_on_default_dtype(dtype_name, default):
    torch.set_default_dtype(getattr(torch, default))
    check([1, 0, 1], dtype_name, default=default)
    check([], dtype_name, default=default)
    check(np.zeros((0, 2)), dtype_name, default=default)


@pytest.mark.parametrize("dtype_name", ALL_DTYPES)
@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 4), (0, 0, 0, 0)])
def test_empty(dtype_name, shape):
    check(np.zeros(shape), dtype_name)


# --------------------------------------------------------------------------- wrapping


@pytest.mark.parametrize("dtype_name", ALL_DTYPES)
def test_long_rows_wrap(dtype_name):
    rng = np.random.default_rng(1)
    for shape in [(40,), (3, 30), (2, 2, 25), (100,)]:
        for scale in [1.0, 1e4]:
            check(random_values(rng, shape, scale, dtype_name), dtype_name)


def test_dtype_item_wraps_to_new_line():
    # Lengths chosen around the 80-column limit so the dtype item both fits and does not.
    for n in range(5, 14):
        check(np.linspace(-1, 1, n), "float64")
        check(np.arange(n) * 1000, "int32")
        check(np.linspace(-1, 1, 2 * n).reshape(2, n), "float16")


@pytest.mark.parametrize("requires_grad", [True, False])
def test_autograd_suffixes(requires_grad):
    rng = np.random.default_rng(2)
    for shape in [(), (3,), (9,), (10,), (11,), (2, 10), (30,)]:
        for dtype_name in ["float32", "float64", "float16"]:
            data = rng.standard_normal(shape).astype(dtype_name)
            leaf = torch.tensor(data, requires_grad=True)
            if requires_grad:
                expected = repr(leaf)
                suffix = "requires_grad=True"
                array = data
            else:
                result = leaf * 2
                expected = repr(result)
                suffix = "grad_fn=<MulBackward0>"
                array = result.detach().numpy()
            got = format_tensor(array, dtype_name, suffixes=[suffix])
            assert got == expected, f"\nfusegrad:\n{got}\ntorch:\n{expected}"


def test_suffix_after_empty():
    leaf = torch.zeros((0, 3), dtype=torch.float64, requires_grad=True)
    got = format_tensor(np.zeros((0, 3)), "float64", suffixes=["requires_grad=True"])
    assert got == repr(leaf)


class _Named(torch.Tensor):
    pass


def test_custom_prefix_changes_indentation():
    data = np.linspace(-3, 3, 40).reshape(2, 20)
    tensor = torch.from_numpy(data.copy()).as_subclass(_Named)
    assert format_tensor(data, "float64", prefix="_Named(") == repr(tensor)


# --------------------------------------------------------------------------- summarisation


@pytest.mark.parametrize("dtype_name", ALL_DTYPES)
@pytest.mark.parametrize(
    "shape", [(1001,), (2000,), (40, 40), (7, 200), (1001, 1), (11, 11, 11), (5, 6, 7, 8)]
)
def test_summarised(dtype_name, shape):
    rng = np.random.default_rng(3)
    check(random_values(rng, shape, 100.0, dtype_name), dtype_name)


def test_summarised_width_uses_only_visible_values():
    data = np.ones(2000)
    data[1000] = 123456.5  # hidden in the middle: must not widen the columns
    check(data, "float32")
    data[1] = 1e-7  # visible: switches to scientific notation
    check(data, "float32")


# --------------------------------------------------------------------------- options


def test_precision_and_profiles():
    rng = np.random.default_rng(4)
    data = rng.standard_normal((4, 5)) * 10
    for kwargs in [
        {"precision": 0},
        {"precision": 2},
        {"precision": 8},
        {"profile": "short"},
        {"profile": "full"},
        {"profile": "short", "precision": 6},
    ]:
        both_set(**kwargs)
        for dtype_name in ["float32", "float64", "bfloat16"]:
            check(data, dtype_name)
            check(data * 1e-6, dtype_name)


def test_full_profile_prints_everything():
    both_set(profile="full")
    check(np.arange(1500, dtype=np.float32), "float32")
    both_set(profile="short")
    check(np.arange(1500, dtype=np.float32).reshape(30, 50) / 7, "float32")


@pytest.mark.parametrize("sci_mode", [True, False])
def test_forced_sci_mode(sci_mode):
    both_set(sci_mode=sci_mode)
    for values in [
        [1.0, 2.0],
        [0.5, 1e-7],
        [1e10, -3.0],
        [0.0, -0.0],
        [math.nan, 2.0],
        [math.inf, 0.0],
        [1.25],
        [123456789.0, 1.0],
    ]:
        for dtype_name in ["float32", "float64", "float16"]:
            check(values, dtype_name)
    check([1, 2, 3], "int64")


@pytest.mark.parametrize("edgeitems", [0, 1, 2, 5])
@pytest.mark.parametrize("threshold", [0, 5, 30, math.inf])
def test_threshold_and_edgeitems(edgeitems, threshold):
    both_set(threshold=threshold, edgeitems=edgeitems)
    rng = np.random.default_rng(5)
    for shape in [(), (4,), (13,), (3, 9), (12, 2), (3, 4, 5), (2, 11, 1, 3)]:
        check(random_values(rng, shape, 3.0, "float32"), "float32")
        check(random_values(rng, shape, 1.0, "int16"), "int16")
    check(np.zeros((0, 4)), "float32")


@pytest.mark.parametrize("linewidth", [1, 20, 50, 120])
def test_linewidth(linewidth):
    both_set(linewidth=linewidth)
    rng = np.random.default_rng(6)
    for shape in [(30,), (3, 17), (2, 2, 12)]:
        check(rng.standard_normal(shape), "float64")
        check(rng.standard_normal(shape), "float32")
        check(rng.integers(-100, 100, shape), "int8")
    leaf = torch.ones(12, requires_grad=True, dtype=torch.float16)
    got = format_tensor(np.ones(12, np.float16), "float16", suffixes=["requires_grad=True"])
    assert got == repr(leaf)


# --------------------------------------------------------------------------- property based

_HYPOTHESIS_DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"]


@st.composite
def _array_and_dtype(draw):
    dtype_name = draw(st.sampled_from([*_HYPOTHESIS_DTYPES, "bfloat16"]))
    storage = "float32" if dtype_name == "bfloat16" else dtype_name
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6))
    if storage.startswith("float"):
        bound = 10.0 ** draw(st.integers(-8, 10))
        elements = st.one_of(
            st.floats(-bound, bound),
            st.sampled_from([0.0, -0.0, 1.0, -2.0, math.nan, math.inf, -math.inf]),
        )
        wide = draw(hnp.arrays(np.float64, shape, elements=elements))
        with np.errstate(over="ignore"):
            array = wide.astype(storage)  # may round to zero or overflow to inf: both fine
    else:
        array = draw(hnp.arrays(np.dtype(storage), shape))
    return array, dtype_name


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_array_and_dtype())
def test_hypothesis_default_options(case):
    array, dtype_name = case
    check(array, dtype_name)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _array_and_dtype(),
    st.integers(0, 6),
    st.sampled_from([0, 3, 10, 100, 1000]),
    st.integers(0, 3),
    st.integers(10, 100),
    st.sampled_from([None, True, False]),
    st.sampled_from(["float32", "float64"]),
)
def test_hypothesis_with_options(case, precision, threshold, edgeitems, linewidth, sci, default):
    array, dtype_name = case
    torch.set_default_dtype(getattr(torch, default))
    try:
        both_set(
            precision=precision,
            threshold=threshold,
            edgeitems=edgeitems,
            linewidth=linewidth,
            sci_mode=sci,
        )
        check(array, dtype_name, default=default)
    finally:
        torch.set_default_dtype(torch.float32)
        both_set(profile="default")
