"""Forms and promotions programs use, against torch: `x[mask] = 0-d tensor` of another dtype
(converted; other advanced assignments refuse it), autocast's promote rule over float64 and
mixed half types, `torch.GradScaler`, einsum's sublist form, 0-d tensors as linspace bounds."""

import numpy as np
import pytest
import torch

import fusegrad


def _outcome(fn):
    try:
        out = fn()
    except Exception as e:  # compared by type and message
        return (type(e).__name__, str(e).split(" (Triggered")[0])
    return out.dtype.__repr__().split(".")[-1], np.asarray(out.detach().double()).tolist()


ASSIGNMENTS = [
    ([0, 2], lambda L: L.tensor([1.0, 2.0], dtype=L.float64)),
    ([0, 2], lambda L: L.tensor(1.0, dtype=L.float64)),
    ("mask", lambda L: L.tensor([1, 2])),
    ("mask", lambda L: L.tensor(1)),
    ("mask", lambda L: L.tensor(1.0, dtype=L.float64, requires_grad=True)),
    (slice(0, 2), lambda L: L.tensor([1.0, 2.0], dtype=L.float64)),
]


@pytest.mark.parametrize("case", range(len(ASSIGNMENTS)))
def test_advanced_assignment_of_another_dtype_as_torch(case):
    index, value = ASSIGNMENTS[case]

    def run(lib):
        x = lib.zeros(4)
        idx = lib.tensor([True, False, True, False]) if index == "mask" else index
        x[idx] = value(lib)
        return x

    assert _outcome(lambda: run(fusegrad)) == _outcome(lambda: run(torch))


PROMOTE = [("float32", "bfloat16"), ("bfloat16", "float32"), ("float32", "float64"),
           ("float16", "float16"), ("float64", "float16"), ("bfloat16", "float16"),
           ("bfloat16", "float16", "float32")]


@pytest.mark.parametrize("lower", ["float16", "bfloat16"])
@pytest.mark.parametrize("dtypes", PROMOTE)
def test_autocast_promote_rule_as_torch(lower, dtypes):
    def run(lib):
        args = [lib.ones(2, dtype=getattr(lib, d)) for d in dtypes]
        with lib.autocast("cpu", dtype=getattr(lib, lower)):
            return lib.cat(args)

    assert _outcome(lambda: run(fusegrad)) == _outcome(lambda: run(torch))


def test_grad_scaler_at_the_top_level():
    assert fusegrad.GradScaler is fusegrad.amp.GradScaler


EINSUM = [
    lambda L, a, b: L.einsum(a, [0, 1], b, [1, 2], [0, 2]),
    lambda L, a, b: L.einsum(a, [0, 1], b, [1, 2]),
    lambda L, a, b: L.einsum(a, [Ellipsis, 1], [1, Ellipsis]),
    lambda L, a, b: L.einsum(a, [27, 30], [30]),
    lambda L, a, b: L.einsum(a, [0, 60]),
]


@pytest.mark.parametrize("case", range(len(EINSUM)))
def test_einsum_sublist_form_as_torch(case):
    def run(lib):
        return EINSUM[case](lib, lib.arange(6.0).reshape(2, 3), lib.arange(12.0).reshape(3, 4))

    assert _outcome(lambda: run(fusegrad)) == _outcome(lambda: run(torch))


@pytest.mark.parametrize("fn", [
    lambda L: L.linspace(L.tensor(0.0), L.tensor(1.0), 3),
    lambda L: L.logspace(L.tensor(0), 2, 3),
    lambda L: L.linspace(L.zeros(1), 1, 3),
])
def test_zero_dim_tensor_bounds_of_linspace_as_torch(fn):
    assert _outcome(lambda: fn(fusegrad)) == _outcome(lambda: fn(torch))


NAN = float("nan")
NAN_CASES = [
    lambda L: 2 ** L.tensor([-1, 2, -3]),
    lambda L: (-1) ** L.tensor([-1, -2, 3]),
    lambda L: L.unique(L.tensor([NAN, 1.0, NAN]), return_inverse=True, return_counts=True)[0],
    lambda L: L.unique(L.tensor([NAN, 1.0, NAN]), return_inverse=True, return_counts=True)[1],
    lambda L: L.unique(L.tensor([NAN, 1.0, NAN]), return_inverse=True, return_counts=True)[2],
    lambda L: L.searchsorted(L.tensor([1.0, NAN]), L.tensor([NAN, 2.0, 0.5])),
    lambda L: L.searchsorted(L.tensor([1.0, 3.0, NAN]), L.tensor([NAN, 2.0, 5.0]), right=True),
    lambda L: L.searchsorted(L.tensor([[1.0, NAN], [0.0, 2.0]]), L.tensor([[0.5], [NAN]])),
]


@pytest.mark.parametrize("case", range(len(NAN_CASES)))
def test_integer_powers_and_nan_handling_as_torch(case):
    ours = _outcome(lambda: NAN_CASES[case](fusegrad))
    theirs = _outcome(lambda: NAN_CASES[case](torch))
    assert str(ours) == str(theirs)  # NaNs compare equal as text


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor([L.tensor([1.0]), L.tensor([2.0])]),
    lambda L: L.tensor([L.tensor(1.0), L.tensor(2)]),
    lambda L: L.tensor([L.ones(2), L.ones(2)]),
    lambda L: L.tensor([[L.tensor(1), 2], [3, L.tensor([[4]])]]),
])
def test_tensors_inside_data_are_numbers_as_in_torch(fn):
    ours = _outcome(lambda: fn(fusegrad))
    theirs = _outcome(lambda: fn(torch))
    assert ours == theirs


@pytest.mark.parametrize("data,dtype", [([1, 2 ** 63], None), ([-2 ** 63 - 1], None),
                                        (2 ** 63, None), ([2 ** 63], "int32"),
                                        ([300], "int8"), ([2 ** 63], "float32")])
def test_integers_beyond_int64_as_torch(data, dtype):
    def run(lib):
        return lib.tensor(data, dtype=None if dtype is None else getattr(lib, dtype))

    assert _outcome(lambda: run(fusegrad)) == _outcome(lambda: run(torch))
