"""`sym_int`, `sym_float`, `sym_max`, `sym_min`, `sym_not`, `sym_ite`, `sym_sqrt` and
`sym_sum` against torch's on plain numbers (values, result types, errors), their
`__torch_function__` routing, and on capture's symbolic sizes."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

NAN, INF = float("nan"), float("inf")

CALLS = [
    ("sym_int", (3.7,)), ("sym_int", (-3.7,)), ("sym_int", (True,)), ("sym_int", (5,)),
    ("sym_int", ("3",)), ("sym_int", (INF,)), ("sym_int", (None,)), ("sym_int", (2.0 ** 70,)),
    ("sym_float", (3,)), ("sym_float", (True,)), ("sym_float", (2.5,)), ("sym_float", ("x",)),
    ("sym_float", (None,)), ("sym_float", (np.int64(2),)),
    ("sym_max", (2, 3.0)), ("sym_max", (3, 2.0)), ("sym_max", (2, 3)), ("sym_max", (True, 0)),
    ("sym_max", (2.0, 2)), ("sym_max", (np.int64(2), 3)), ("sym_max", (np.int64(4), 3.5)),
    ("sym_max", (True, 0.5)), ("sym_max", ("a", "b")), ("sym_max", (NAN, 1)),
    ("sym_max", (1, NAN)), ("sym_max", (1, 2, 3)),
    ("sym_min", (2, 3.0)), ("sym_min", (3, 2.0)), ("sym_min", (2.0, 2)),
    ("sym_min", (True, False)), ("sym_min", (np.float32(1.5), 2)), ("sym_min", (1, NAN)),
    ("sym_min", (NAN, 1.0)),
    ("sym_not", (True,)), ("sym_not", (0,)), ("sym_not", (3,)), ("sym_not", (np.bool_(True),)),
    ("sym_ite", (True, 1, 2)), ("sym_ite", (False, 1, 2.0)), ("sym_ite", (1, 1, 2)),
    ("sym_ite", (1, 1, 2.0)), ("sym_ite", (True, "a", "b")), ("sym_ite", (np.bool_(True), 1, 2)),
    ("sym_sqrt", (4,)), ("sym_sqrt", (2.0,)), ("sym_sqrt", (-1,)),
    ("sym_sum", ([1, 2, 3],)), ("sym_sum", ([1, 2.5],)), ("sym_sum", ([],)),
    ("sym_sum", ((1, True),)), ("sym_sum", (1,)), ("sym_sum", (iter([1, 2]),)),
]


def _outcome(fn, args):
    try:
        value = fn(*args)
    except Exception as error:  # noqa: BLE001 - the outcome itself is compared
        return type(error).__name__, str(error)
    return type(value), repr(value)


@pytest.mark.parametrize("name,args", CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CALLS)])
def test_sym_functions_on_numbers_are_torchs(name, args):
    assert _outcome(getattr(fusegrad, name), args) == _outcome(getattr(torch, name), args)


def test_sym_functions_on_tensors_as_torch():
    """Tensors are numbers to sym_int/sym_float/sym_sqrt and rejected by sym_max."""
    for name, args in [("sym_int", (2.5,)), ("sym_float", (3,)), ("sym_sqrt", (4.,)),
                       ("sym_max", (1, 2)), ("sym_not", (True,)), ("sym_sum", ([1, 2],))]:
        want = _outcome(getattr(torch, name), (torch.tensor(args[0]), *args[1:]))
        got = _outcome(getattr(fusegrad, name), (fusegrad.tensor(args[0]), *args[1:]))
        if want[0] is torch.Tensor:
            assert got[0] is fusegrad.Tensor and got[1] == want[1], name
        else:
            assert got == (want[0], want[1].replace("torch.", "fusegrad.")), name


@pytest.mark.parametrize("name,args", [("sym_int", ("s",)), ("sym_float", ("s",)),
                                       ("sym_max", ("s", 1)), ("sym_min", (1, "s")),
                                       ("sym_not", ("s",)), ("sym_ite", ("s", 1, 2)),
                                       ("sym_sum", (["s", 1],))])
def test_sym_functions_honour_torch_function(name, args):
    """A tensor subclass with `__torch_function__` sees each call, as in PyTorch."""
    def run(lib):
        seen = []

        class Spy(lib.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, a=(), kw=None):
                seen.append(func.__name__)
                return 7

        spy = lib.ones(()).as_subclass(Spy)

        def swap(v):
            return spy if v == "s" else [swap(x) for x in v] if isinstance(v, list) else v

        return getattr(lib, name)(*[swap(a) for a in args]), seen

    assert run(fusegrad) == run(torch)


def test_sym_functions_on_symbolic_sizes():
    """Under dynamic capture the functions take capture's symbolic sizes as ints and give
    the values PyTorch's compiled function gives."""
    def f(x):
        n = fusegrad.sym_int(x.shape[0]) if isinstance(x, fusegrad.Tensor) else \
            torch.sym_int(x.shape[0])
        lib = fusegrad if isinstance(x, fusegrad.Tensor) else torch
        m = lib.sym_max(n, 3)
        k = lib.sym_min(n, 3)
        return x.sum() * m + k + lib.sym_float(n)

    for size in (2, 5, 7):
        want = torch.compile(f, backend="eager", dynamic=True)(torch.ones(size))
        got = fusegrad.compile(f, backend="eager", dynamic=True)(fusegrad.ones(size))
        assert float(got) == float(want)
