"""`fusegrad.testing` against torch.testing: assert_close's verdicts and failure texts for
tensors, scalars and containers, assert_allclose's older table, and make_tensor's ranges,
layouts and errors (its values come from fusegrad's generator, so only their properties are
compared)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.testing  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.testing  # noqa: E402

NAN, INF = float("nan"), float("inf")

# Each case builds (actual, expected, keyword arguments) from a library.
CASES = {
    "close_floats": lambda L: (L.tensor([1., 2., 3.]), L.tensor([1., 2.5, 3.7]), {}),
    "dtype": lambda L: (L.tensor([1., 2.]), L.tensor([1, 2]), {}),
    "shape": lambda L: (L.tensor([1., 2., 3.]), L.tensor([1., 2.]), {}),
    "shape_before_dtype": lambda L: (L.ones(2), L.ones(3, dtype=L.float64), {}),
    "ints_equal": lambda L: (L.tensor([1, 2, 3]), L.tensor([1, 3, 3]), {}),
    "uint8_no_wrap": lambda L: (L.tensor([1, 2], dtype=L.uint8),
                                L.tensor([3, 2], dtype=L.uint8), {}),
    "bools": lambda L: (L.tensor([True, False]), L.tensor([True, True]), {}),
    "2d_index": lambda L: (L.tensor([[1., 2.], [3, 4]]), L.tensor([[1., 2.], [3, 5]]), {}),
    "nan_unequal": lambda L: (L.tensor([1., NAN]), L.tensor([1., NAN]), {}),
    "nan_equal": lambda L: (L.tensor([1., NAN]), L.tensor([1., NAN]), {"equal_nan": True}),
    "nan_first": lambda L: (L.tensor([NAN, 1.]), L.tensor([1., 2.]), {}),
    "inf": lambda L: (L.tensor([1., INF]), L.tensor([1., INF]), {}),
    "inf_signs": lambda L: (L.tensor([1., INF]), L.tensor([1., -INF]), {}),
    "zero_expected": lambda L: (L.tensor([0., 1.]), L.tensor([1., 0.]), {}),
    "matched_excluded": lambda L: (L.tensor([0., 1000.]), L.tensor([0.01, 1001.]),
                                   {"rtol": 1e-2, "atol": 0}),
    "given_tolerances": lambda L: (L.tensor([1., 2.]), L.tensor([1., 2.1]),
                                   {"rtol": 0.0, "atol": 0.01}),
    "given_tolerances_pass": lambda L: (L.tensor([1., 2.]), L.tensor([1., 2.1]),
                                        {"rtol": 0, "atol": 0.2}),
    "zero_tolerances": lambda L: (L.tensor([1e-6, 2]), L.tensor([0., 2.]),
                                  {"rtol": 0, "atol": 0}),
    "ints_given_tolerance": lambda L: (L.tensor([1, 2]), L.tensor([1, 3]),
                                       {"rtol": 0.0, "atol": 0.01}),
    "float64_promoted": lambda L: (L.tensor([1., 2.], dtype=L.float64), L.tensor([1., 3.]),
                                   {"check_dtype": False}),
    "int_float_promoted": lambda L: (L.tensor([1, 2]), L.tensor([1., 3.]),
                                     {"check_dtype": False}),
    "float16": lambda L: (L.tensor([1., 2.], dtype=L.float16),
                          L.tensor([1., 2.001], dtype=L.float16), {}),
    "float16_far": lambda L: (L.tensor([1., 2.], dtype=L.float16),
                              L.tensor([1., 3.], dtype=L.float16), {}),
    "bfloat16": lambda L: (L.tensor([1., 2.], dtype=L.bfloat16),
                           L.tensor([1., 2.03], dtype=L.bfloat16), {}),
    "complex": lambda L: (L.tensor([1 + 1j, 2]), L.tensor([1 + 1j, 3]), {}),
    "requires_grad": lambda L: (L.tensor([1., 2.], requires_grad=True), L.tensor([1., 2.]),
                                {}),
    "many": lambda L: (L.tensor([[1, 2, 3]] * 1000), L.tensor([[1, 2, 4]] * 1000), {}),
    "one_element": lambda L: (L.tensor([[1.]]), L.tensor([[3.]]), {}),
    "zero_dim": lambda L: (L.tensor(1.), L.tensor(3.), {}),
    "zero_dim_int": lambda L: (L.tensor(1), L.tensor(3), {}),
    "zero_dim_zero": lambda L: (L.tensor(1.), L.tensor(0.), {}),
    "zero_dim_bool": lambda L: (L.tensor(True), L.tensor(False), {}),
    "zero_dim_complex": lambda L: (L.tensor(1 + 1j), L.tensor(1 + 2j), {}),
    "empty": lambda L: (L.tensor([]), L.tensor([1.]), {}),
    "stride": lambda L: (L.ones(2, 2), L.ones(2, 2).t(), {"check_stride": True}),
    "stride_unchecked": lambda L: (L.ones(2, 2), L.ones(2, 2).t(), {}),
    "numpy": lambda L: (np.array([1., 2.]), np.array([1., 3.]), {}),
    "numpy_dtype": lambda L: (np.ones(2), np.ones(2, dtype=np.float32), {}),
    "numpy_and_tensor": lambda L: (np.array([1., 2.]), L.tensor([1., 3.]), {}),
    "tensor_and_list": lambda L: (L.tensor([1., 2.]), [1., 2.], {}),
    "tensor_and_float": lambda L: (L.tensor(1.), 1.0, {}),
    "strings": lambda L: ("a", "b", {}),
    "floats": lambda L: (1.0, 1.1, {}),
    "ints": lambda L: (1, 2, {}),
    "int_and_float": lambda L: (1, 1.0, {}),
    "int_and_float_unchecked": lambda L: (1, 2.5, {"check_dtype": False}),
    "float_zero": lambda L: (1.0, 0.0, {}),
    "int_zero": lambda L: (1, 0, {}),
    "float_inf": lambda L: (INF, INF, {}),
    "float_infs": lambda L: (INF, -INF, {}),
    "float_nan": lambda L: (1.0, NAN, {}),
    "float_nans": lambda L: (NAN, NAN, {"equal_nan": True}),
    "python_complex": lambda L: (1 + 2j, 1 + 3j, {}),
    "numpy_scalars": lambda L: (np.int64(1), np.int64(2), {}),
    "numpy_float32_and_float": lambda L: (np.float32(1.0), 1.0, {}),
    "none": lambda L: (None, None, {}),
    "none_and_int": lambda L: (None, 1, {}),
    "booleans": lambda L: (True, False, {}),
    "sequence": lambda L: ([1.0, L.tensor(2.)], [1.0, L.tensor(3.)], {}),
    "nested": lambda L: ([[L.tensor(1.)], {"a": 1}], [[L.tensor(1.)], {"a": 2}], {}),
    "tuple_and_list": lambda L: ((1, 2), [1, 2], {}),
    "size_and_tuple": lambda L: (L.Size([1, 2]), (1, 3), {}),
    "length": lambda L: ([1, 2], [1], {}),
    "mapping": lambda L: ({"a": L.tensor(2.)}, {"a": L.tensor(3.)}, {}),
    "mapping_keys": lambda L: ({"b": 1, "a": 2, "c": 3}, {"a": 2, "d": 4, "e": 5}, {}),
    "mapping_extra_key": lambda L: ({"a": 1, "b": 2}, {"a": 1}, {}),
    "msg_string": lambda L: (L.tensor([1., 2.]), L.tensor([1., 3.]), {"msg": "boom"}),
    "msg_empty": lambda L: (L.tensor([1., 2.]), L.tensor([1., 3.]), {"msg": ""}),
    "msg_callable": lambda L: ([[1.0]], [[2.0]], {"msg": lambda m: "<" + m + ">"}),
    "msg_callable_attribute": lambda L: (L.ones(2), L.ones(3), {"msg": lambda m: "X" + m}),
    "rtol_without_atol": lambda L: (L.tensor([1.]), L.tensor([1.]), {"rtol": 1e-3}),
    "atol_without_rtol": lambda L: (L.tensor([1.]), L.tensor([1.]), {"atol": 1e-3}),
}


def _outcome(fn):
    """(error type name, message) of a call, or ("ok", None)."""
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - the outcome itself is compared
        return type(error).__name__, str(error)
    return "ok", None


@pytest.mark.parametrize("case", sorted(CASES))
def test_assert_close_verdict_and_message_are_torchs(case):
    build = CASES[case]
    a_t, e_t, kw_t = build(torch)
    a_f, e_f, kw_f = build(fusegrad)
    want = _outcome(lambda: torch.testing.assert_close(a_t, e_t, **kw_t))
    got = _outcome(lambda: fusegrad.testing.assert_close(a_f, e_f, **kw_f))
    assert got == (want[0], want[1].replace("torch.", "fusegrad.") if want[1] else None) or \
        got == want


def test_assert_close_names_fusegrad_classes_in_type_errors():
    """The TypeError for unpaired inputs names fusegrad's Tensor where torch names its own."""
    with pytest.raises(TypeError, match="No comparison pair was able to handle inputs of type "
                       "<class 'fusegrad.Tensor'> and <class 'list'>."):
        fusegrad.testing.assert_close(fusegrad.ones(1), [1.0])


ALLCLOSE_CASES = {
    "float16": lambda L: (L.tensor([1., 2.], dtype=L.float16),
                          L.tensor([1., 3.], dtype=L.float16), {}),
    "float32": lambda L: (L.tensor([1., 2.]), L.tensor([1., 3.]), {}),
    "float64": lambda L: (L.tensor([1., 2.], dtype=L.float64),
                          L.tensor([1., 3.], dtype=L.float64), {}),
    "bfloat16": lambda L: (L.tensor([1., 2.], dtype=L.bfloat16),
                           L.tensor([1., 3.], dtype=L.bfloat16), {}),
    "list_expected": lambda L: (L.tensor([1, 2]), [1, 3], {}),
    "scalar_expected": lambda L: (L.tensor([1., 2.]), 2., {}),
    "lists": lambda L: ([1., 2.], [1., 3.], {}),
    "nan_equal_by_default": lambda L: (L.tensor([1., NAN]), [1., NAN], {}),
    "mixed_dtypes": lambda L: (L.tensor([1., 2.], dtype=L.float64), L.tensor([1., 2.0000001]),
                               {}),
    "msg": lambda L: (L.tensor([1., 2.]), L.tensor([1., 3.]), {"msg": "hi"}),
    "rtol_only": lambda L: (L.tensor([1., 2.]), L.tensor([1., 3.]), {"rtol": 1}),
}


@pytest.mark.parametrize("case", sorted(ALLCLOSE_CASES))
def test_assert_allclose_is_torchs_deprecated_form(case):
    build = ALLCLOSE_CASES[case]
    a_t, e_t, kw_t = build(torch)
    a_f, e_f, kw_f = build(fusegrad)
    with warnings.catch_warnings(record=True) as w_t:
        warnings.simplefilter("always")
        want = _outcome(lambda: torch.testing.assert_allclose(a_t, e_t, **kw_t))
    with warnings.catch_warnings(record=True) as w_f:
        warnings.simplefilter("always")
        got = _outcome(lambda: fusegrad.testing.assert_allclose(a_f, e_f, **kw_f))
    assert got == want
    assert [(w.category, str(w.message)) for w in w_f] == \
        [(w.category, str(w.message)) for w in w_t]


# ---------------------------------------------------------------- make_tensor

DTYPES = ["float32", "float64", "float16", "bfloat16", "complex64", "int64", "int32", "int8",
          "uint8", "bool"]
RANGES = [{}, {"low": 2, "high": 3}, {"low": 2.5, "high": 3.5}, {"low": -2.5, "high": 1.5},
          {"low": 0, "high": 3}, {"low": -200, "high": -120}, {"low": 127, "high": 300},
          {"low": -5, "high": 0}, {"low": 2, "high": 2}, {"low": 5, "high": 3}, {"low": 20},
          {"high": -20}, {"low": 2.2, "high": 2.7}, {"low": -INF, "high": 3},
          {"low": 1e10, "high": 1e11}, {"low": NAN, "high": 3}, {"low": 0, "high": 1},
          {"low": 1, "high": 2}, {"low": 2, "high": 4}]


def _summary(lib, dtype, kwargs):
    """The outcome of make_tensor: its error, or its warnings and the set of values or their
    range (random values differ between the libraries, their bounds do not)."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x = lib.testing.make_tensor(4000, dtype=getattr(lib, dtype), device="cpu",
                                        **kwargs)
    except Exception as error:  # noqa: BLE001 - the outcome itself is compared
        return type(error).__name__, str(error).replace("torch.", "")
    said = [(w.category, str(w.message)) for w in caught]
    assert str(x.dtype).split(".")[-1] == dtype
    if x.is_complex():
        x = lib.view_as_real(x)
    values = x.double() if x.is_floating_point() else x.long()
    if not x.is_floating_point() and len(set(values.tolist())) < 100:
        return "values", said, sorted(set(values.tolist()))
    low, high = float(values.min()), float(values.max())
    return "range", said, low, high


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", RANGES, ids=str)
def test_make_tensor_ranges_and_errors_are_torchs(dtype, kwargs):
    torch.manual_seed(0)
    want = _summary(torch, dtype, kwargs)
    got = _summary(fusegrad, dtype, kwargs)
    if want[0] != "range":
        assert got == want
        return
    assert got[:2] == want[:2]
    (w_low, w_high), (g_low, g_high) = want[2:], got[2:]
    if w_low == w_high:  # a single value: exact
        assert (g_low, g_high) == (w_low, w_high)
        return
    # Both fill the same interval: draws of 4000 values reach close to both ends (bfloat16
    # rounds the ends by up to 3% of this narrowest interval).
    width = w_high - w_low
    for w, g in ((w_low, g_low), (w_high, g_high)):
        assert abs(w - g) <= 0.05 * width, (w, g)


@pytest.mark.parametrize("dtype", DTYPES)
def test_make_tensor_exclude_zero_as_torch(dtype):
    """Zeros become the dtype's smallest normal value, 1 or True, as torch's do."""
    for lib in (torch, fusegrad):
        kwargs = {"low": 0, "high": 0} if dtype[0] in "fbc" and dtype != "bool" else \
            {"low": 0, "high": 1}
        x = lib.testing.make_tensor(50, dtype=getattr(lib, dtype), device="cpu",
                                    exclude_zero=True, **kwargs)
        if lib is torch:
            want = x.tolist()
        else:
            got = x.tolist()
    assert got == want


def test_make_tensor_layouts_and_shapes_as_torch():
    for args, kwargs in [((2, 3), {"noncontiguous": True}),
                         ((1,), {"noncontiguous": True}),
                         ((), {"noncontiguous": True}),
                         (([2, 3],), {}), (((2, 3),), {}),
                         ((2, 3, 4, 5), {"memory_format": "channels_last"}),
                         ((2, 3, 4, 5), {"memory_format": "contiguous_format"})]:
        got, want = [], []
        for lib, out in ((torch, want), (fusegrad, got)):
            kw = dict(kwargs)
            if "memory_format" in kw:
                kw["memory_format"] = getattr(lib, kw["memory_format"])
            x = lib.testing.make_tensor(*args, dtype=lib.float32, device="cpu", **kw)
            out.append((tuple(x.shape), x.stride(), x.is_contiguous(), x.storage_offset()))
        assert got == want, (args, kwargs)


@pytest.mark.parametrize("call", [
    lambda L: L.testing.make_tensor(2, 3, dtype=L.float32, device="cpu",
                                    memory_format=L.channels_last),
    lambda L: L.testing.make_tensor(2, 3, 4, 5, dtype=L.float32, device="cpu",
                                    memory_format=L.channels_last, noncontiguous=True),
    lambda L: L.testing.make_tensor(2, 3, dtype=L.int64, device="cpu", requires_grad=True),
    lambda L: L.testing.make_tensor(2, 3, dtype=L.float32),
    lambda L: L.testing.make_tensor(2, 3, device="cpu"),
])
def test_make_tensor_argument_errors_as_torch(call):
    want = _outcome(lambda: call(torch))
    got = _outcome(lambda: call(fusegrad))
    assert got[0] == want[0] and got[1].replace("fusegrad.", "torch.") == want[1]


def test_make_tensor_requires_grad_and_seed():
    """A float tensor is a leaf that requires grad; the values follow fusegrad's seed."""
    fusegrad.manual_seed(3)
    a = fusegrad.testing.make_tensor(5, dtype=fusegrad.float32, device="cpu",
                                     requires_grad=True)
    fusegrad.manual_seed(3)
    b = fusegrad.testing.make_tensor(5, dtype=fusegrad.float32, device="cpu")
    assert a.requires_grad and a.is_leaf and a.grad_fn is None
    assert a.tolist() == b.tolist()
