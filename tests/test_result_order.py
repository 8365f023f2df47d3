"""The registry's `result_order` of elementwise ops says exactly how each kernel lays out a new
result where its operands' memory orders conflict: "operands" (NumPy's order "K", which goes
row-major there) or "iterator" (TensorIterator's, which follows the first operand: `where`,
`lerp`, `addcmul` and the kernels that compute through temporaries restore it; the backward
ops' kernels, compositions of ops, are left out). Compiled code
reads the fact to give its outputs eager's strides, so a wrong one is a compiled output laid
out otherwise than eager's (`fg.compile(lambda x, y: fg.lerp(x.t(), y, 0.3))` gave (6, 1)
where eager gives (1, 4)). Oracle: the kernels themselves, and eager fusegrad for compiled
code."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fusegrad as fg  # noqa: E402
from fusegrad._shapes import iterator_strides  # noqa: E402
from fusegrad.ops import REGISTRY, deferred  # noqa: E402
from fusegrad.ops.activation_backward import first_order_kernel  # noqa: E402

# The kernels of backward ops run their forward op's derivative, a composition of ops,
# whose result's layout is that composition's (left out here).
_COMPOSED = first_order_kernel(lambda g: g).__code__
_CHOOSES_COMPOSED = {"elu_backward"}  # (picks one of two such kernels by `is_result`)


def _elementwise_ops() -> list:
    deferred.load_all()  # every op module
    return sorted((op for op in dict.values(REGISTRY)
                   if op.result_order in ("operands", "iterator") and not op.view
                   and not op.inplace and not op.metadata_only
                   and getattr(op.kernel, "__code__", None) is not _COMPOSED
                   and op.name not in _CHOOSES_COMPOSED),
                  key=lambda op: op.name)


def _elements(a: np.ndarray) -> tuple:
    return tuple(s // a.itemsize for s in a.strides)


def _k_order(arrays: list) -> tuple:
    it = np.nditer(arrays + [None], flags=["zerosize_ok", "refs_ok"], order="K",
                   op_flags=[["readonly"]] * len(arrays) + [["writeonly", "allocate"]])
    return _elements(it.operands[-1])


def _conflicting_cases(op) -> list:
    """(args with operand `i` made column-major, the arrays among them) for `op`'s float32
    samples of two or more 2-D operands of one shape."""
    try:
        samples = op.samples(np.random.default_rng(5), np.dtype(np.float32))
    except Exception:  # noqa: BLE001 - an op without float32 samples
        return []
    cases = []
    for sample in samples:
        args = list(sample.args)
        at = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.ndim == 2
              and min(a.shape) > 1]
        if len(at) < 2 or len({args[i].shape for i in at}) != 1:
            continue
        for i in at[:2]:
            given = list(args)
            given[i] = np.asfortranarray(given[i])
            cases.append(given)
    return cases


def test_declared_orders_are_the_kernels():
    checked, wrong = 0, []
    for op in _elementwise_ops():
        for args in _conflicting_cases(op):
            out = op.kernel(*args)
            out = out[0] if isinstance(out, (tuple, list)) else out
            if not isinstance(out, np.ndarray) or out.ndim != 2:
                continue
            arrays = [a for a in args if isinstance(a, np.ndarray) and a.ndim]
            if any(np.broadcast_shapes(a.shape, out.shape) != out.shape for a in arrays):
                continue  # (an operand the result is not computed over: a class weight)
            if op.result_order == "iterator":
                want = iterator_strides(out.shape, [(a.shape, _elements(a)) for a in arrays])
            else:
                want = _k_order(arrays)
            checked += 1
            if tuple(want) != _elements(out):
                wrong.append((op.name, op.result_order, _elements(out), tuple(want)))
    assert checked > 60
    assert wrong == [], wrong


PROGRAMS = {
    "where": lambda x, y: fg.where(x.t() > 0, x.t(), y),
    "lerp": lambda x, y: fg.lerp(x.t(), y, 0.3),
    "lerp_tensor_weight": lambda x, y: fg.lerp(x.t(), y, y.sigmoid()),
    "addcmul": lambda x, y: fg.addcmul(x.t(), y, y, value=0.5),
    "addcdiv": lambda x, y: fg.addcdiv(x.t(), y, y.exp()),
    "remainder": lambda x, y: fg.remainder(x.t(), y.abs() + 1),
    "fmod": lambda x, y: fg.fmod(x.t(), y.abs() + 1),
    "floor_divide": lambda x, y: fg.floor_divide(x.t(), y.abs() + 1),
    "xlogy": lambda x, y: fg.xlogy(x.t(), y.abs() + 1),
    "heaviside": lambda x, y: fg.heaviside(x.t(), y),
    "mul": lambda x, y: x.t() * y,
}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_compiled_outputs_take_eagers_strides(name, backend):
    rng = np.random.default_rng(3)
    x = fg.tensor(rng.standard_normal((6, 4)), dtype=fg.float32)
    y = fg.tensor(rng.standard_normal((4, 6)), dtype=fg.float32)
    fn = PROGRAMS[name]
    want = fn(x, y)
    fg._dynamo.reset()
    got = fg.compile(fn, backend=backend)(x, y)
    assert got.stride() == want.stride()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
