"""`record_shapes` and `key_averages(group_by_input_shape=True)` against PyTorch's profiler:
every schema argument listed (numbers and defaults as `[]`), for ops, composites and
factories, and a small conv + linear model's forward and backward rows."""

from __future__ import annotations

import os
from collections import Counter

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad as fg  # noqa: E402
from fusegrad.ops import REGISTRY  # noqa: E402
from fusegrad.profiler._recorder import op_input_shapes, schema_arity  # noqa: E402


@pytest.fixture(autouse=True)
def _numpy_kernels():
    """NumPy's kernels: building the C ones is a test of its own (tests/test_native.py)."""
    from fusegrad.ops._native import native_kernels

    with native_kernels(False):
        yield


def _rows(lib, work) -> Counter:
    """(event name, input shapes) -> count, from `key_averages(group_by_input_shape=True)`."""
    with lib.profiler.profile(record_shapes=True) as prof:
        work(lib)
    rows = Counter()
    for e in prof.key_averages(group_by_input_shape=True):
        rows[(e.key, str(e.input_shapes))] += e.count
    return rows


def _matches(theirs: Counter, ours: Counter, known: set = frozenset()) -> list:
    """Our rows that PyTorch's table lacks, or has with another count. (PyTorch shows more
    rows: the backend ops its kernels run inside, which fusegrad's NumPy kernels do not.)"""
    return [(key, n, theirs.get(key)) for key, n in ours.items()
            if theirs.get(key) != n and key[0] not in known]


class _Net:
    @staticmethod
    def build(lib):
        lib.manual_seed(0)

        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = lib.nn.Conv2d(1, 2, 3)
                self.lin = lib.nn.Linear(8, 3)

            def forward(self, x):
                return self.lin(lib.relu(self.conv(x)).flatten(1))

        return Net()


def test_conv_linear_forward_and_backward_rows():
    def work(lib):
        model = _Net.build(lib)
        x = lib.ones(2, 1, 4, 4)
        model(x).sum().backward()

    theirs, ours = _rows(torch, work), _rows(fg, work)
    # expand's schema has an `implicit` flag fusegrad's kernel does not take: one `[]` short.
    assert _matches(theirs, ours, known={"aten::expand"}) == []
    # The model's own ops and nodes are all there.
    names = {k[0] for k in ours}
    for name in ("aten::conv2d", "aten::convolution", "aten::linear", "aten::addmm",
                 "aten::flatten", "aten::relu", "aten::sum", "AddmmBackward0",
                 "ConvolutionBackward0", "torch::autograd::AccumulateGrad"):
        assert name in names, name


def test_ops_list_defaults_and_numbers():
    def work(lib):
        a = lib.ones(2, 3)
        b = lib.ones(2, 3)
        lib.cat([a, b])
        a + b
        a + 2
        a * 2.5
        a.sum(1)
        a.mean()
        lib.stack([a, b], 1)
        a.neg()
        a.softmax(-1)
        lib.nn.functional.gelu(a)
        a.transpose(0, 1)
        a.reshape(3, 2)
        lib.where(a > 0, a, b)
        a.max(1)
        a.clamp(0, 1)
        a[:, 1:]
        lib.matmul(a, b.t())
        a.scatter(1, lib.zeros(2, 1, dtype=lib.long), 1.0)

    theirs, ours = _rows(torch, work), _rows(fg, work)
    assert _matches(theirs, ours, known={"aten::cat", "aten::ones", "aten::zeros",
                                         "aten::transpose"}) == []
    assert ours[("aten::add", "[[2, 3], [2, 3], []]")] == 1
    assert ours[("aten::mean", "[[2, 3], []]")] == 1


def test_composites_follow_atens_schemas():
    def work(lib):
        F = lib.nn.functional
        x = lib.ones(2, 3, 8, 8)
        a = lib.ones(4, 6)
        t = lib.tensor([1, 0, 2, 1])
        F.linear(a, lib.ones(5, 6))
        F.conv2d(x, lib.ones(4, 3, 3, 3), None, 1, 1)
        F.batch_norm(x, lib.zeros(3), lib.ones(3), training=False)
        F.layer_norm(a, (6,))
        F.group_norm(x, 3)
        F.softmax(a, 1)
        F.log_softmax(a, -1)
        F.dropout(a, 0.5, False)
        F.max_pool2d(x, 2)
        F.embedding(t, a)
        lib.matmul(a, a.t())
        lib.flatten(x, 1)
        lib.reshape(a, (3, 8))
        a.reshape(2, 12)
        a.log_softmax(dim=1)
        a.to(lib.float64)
        lib.dropout(a, 0.5, False)

    theirs, ours = _rows(torch, work), _rows(fg, work)
    # (fusegrad's max_pool2d runs max_pool2d_with_indices, PyTorch's CPU kernel does not;
    # `_to_copy`'s kernel takes the dtype alone, of the seven schema arguments.)
    assert _matches(theirs, ours, known={"aten::max_pool2d_with_indices",
                                         "aten::_to_copy"}) == []


def test_factories_list_their_options():
    def work(lib):
        a = lib.ones(2, 3)
        lib.zeros(2)
        lib.full((2,), 1.0)
        lib.rand(2)
        lib.randn(2, 2)
        lib.randint(0, 5, (3,))
        lib.randint(5, (3,))
        lib.normal(0.0, 1.0, (2,))
        lib.arange(5)
        lib.arange(0, 5)
        lib.eye(3)
        lib.linspace(0, 1, 5)
        lib.logspace(0, 1, 5)
        lib.ones_like(a)
        lib.full_like(a, 2.0)
        lib.randn_like(a)
        lib.randint_like(a, 5)
        a.new_zeros(2)
        a.new_full((2,), 1.0)

    theirs, ours = _rows(torch, work), _rows(fg, work)
    assert _matches(theirs, ours) == []


def _torch_arity(name: str) -> int | None:
    base, _, overload = name.partition(".")
    try:
        return len(getattr(getattr(torch.ops.aten, base), overload or "default")
                   ._schema.arguments)
    except (AttributeError, RuntimeError):
        return None


def test_schema_arity_of_registry_ops():
    """The arity read from each op's kernel and meta is PyTorch's schema's for nearly every
    op; where it is read, a wrong one is rare (kernels with helper parameters of their own)."""
    right, wrong = 0, []
    for name, op in REGISTRY.items():
        theirs = _torch_arity(name)
        ours = schema_arity(op)
        if theirs is None or ours is None:
            continue
        if ours == theirs:
            right += 1
        else:
            wrong.append((name, ours, theirs))
    assert right >= 450, right
    assert len(wrong) <= 12, wrong


@pytest.mark.parametrize("given", [1, 2, 3])
def test_op_input_shapes_pads_to_the_schema(given):
    op = REGISTRY["addmm"]
    args = (fg.ones(3), fg.ones(2, 8), fg.ones(8, 3), 1, 1)[:given]
    shapes = op_input_shapes(op, args)
    expected = [[3], [2, 8], [8, 3], [], []]
    assert shapes == expected[:given] + [[] for _ in range(5 - given)]
    np.testing.assert_equal(len(shapes), _torch_arity("addmm"))
