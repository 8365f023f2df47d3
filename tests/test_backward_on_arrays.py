"""The backward of a training step's common ops on NumPy arrays (`OpDef.on_arrays`: addmm,
t, relu, softmax / log_softmax, sum) and its small C loops (`ops/native/pointwise.c`: the
sum over leading rows of a bias's gradient, nll_loss's gather and reduced loops): the same bits as
the recorded derivatives (`create_graph=True` runs those) and as the NumPy paths
(`native_kernels(False)`), PyTorch's values and errors, and no array the caller holds
written to."""

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _native
from fusegrad.ops import reductions as R

F = fusegrad.nn.functional
RNG = np.random.default_rng(11)
DTYPES = [np.float32, np.float64]
HAVE_CC = _cbuild.compiler() is not None
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="needs a C compiler")


def _grads(fn, inputs, create_graph):
    """Gradients of sum(fn(*inputs) * weights) for each input, by backward (arrays) or
    recorded (create_graph)."""
    leaves = [fusegrad.tensor(x, requires_grad=True) for x in inputs]
    out = fn(*leaves)
    w = fusegrad.tensor(np.random.default_rng(3).standard_normal(tuple(out.shape))
                        .astype(inputs[0].dtype))
    grads = fusegrad.autograd.grad((out * w).sum(), leaves, create_graph=create_graph)
    return [g.detach().numpy() for g in grads]


def _same(a, b):
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(np.signbit(x), np.signbit(y))


TARGET = fusegrad.tensor([0, 2, 4, 1, 2, 3])
CASES = {
    "linear": (lambda x, w, b: F.linear(x, w, b), [(6, 5), (4, 5), (4,)]),
    "linear_1_row": (lambda x, w, b: F.linear(x, w, b), [(1, 5), (4, 5), (4,)]),
    "addmm_2d_bias": (lambda m, a, b: fusegrad.addmm(m, a, b), [(3, 4), (3, 5), (5, 4)]),
    "addmm_scaled": (lambda m, a, b: fusegrad.addmm(m, a, b, beta=0.5, alpha=2.0),
                     [(4,), (3, 5), (5, 4)]),
    "addmm_col_major": (lambda m, a, b: fusegrad.addmm(m, a.t(), b.t()),
                        [(4,), (5, 3), (4, 5)]),
    "t": (lambda a: a.t() * 1.5, [(3, 4)]),
    "relu": (lambda a: a.relu(), [(5, 7)]),
    "relu_0d": (lambda a: a.relu(), [()]),
    "softmax_dim0": (lambda a: a.softmax(0), [(6, 10)]),
    "sum": (lambda a: a.sum().expand(3), [(4, 5)]),
    # nll_loss's node has two outputs: its derivative on arrays takes a list of them.
    "nll_mean": (lambda a: F.nll_loss(a, TARGET), [(6, 5)]),
    "nll_sum": (lambda a: F.nll_loss(a, TARGET, reduction="sum"), [(6, 5)]),
    "nll_none": (lambda a: F.nll_loss(a, TARGET, reduction="none"), [(6, 5)]),
    "nll_ignored": (lambda a: F.nll_loss(a, TARGET, ignore_index=2), [(6, 5)]),
    "nll_weight": (lambda a: F.nll_loss(a, TARGET, weight=fusegrad.tensor(
        np.linspace(0.5, 2.0, 5), dtype=a.dtype)), [(6, 5)]),
    "sum_0d": (lambda a: a.sum().expand(3), [()]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_array_gradients_are_the_recorded_ones(case, dtype):
    fn, shapes = CASES[case]
    inputs = [RNG.standard_normal(s).astype(dtype) for s in shapes]
    _same(_grads(fn, inputs, False), _grads(fn, inputs, True))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_a_loss_at_the_root_is_the_recorded_one(reduction, dtype):
    """`loss.backward()` hands the loss's node its ones as an array (no buffer): the
    gradient is the recorded derivative's, bit for bit, and PyTorch's."""
    x = RNG.standard_normal((6, 5)).astype(dtype)
    got = []
    for create_graph in (False, True):
        t = fusegrad.tensor(x, requires_grad=True)
        loss = F.nll_loss(t, TARGET, reduction=reduction)
        if create_graph:
            got.append(fusegrad.autograd.grad(loss, t, create_graph=True)[0].detach().numpy())
        else:
            loss.backward()
            got.append(t.grad.numpy())
    _same(got[:1], got[1:])
    tt = torch.tensor(x, requires_grad=True)
    torch.nn.functional.nll_loss(tt, torch.tensor(TARGET.numpy()),
                                 reduction=reduction).backward()
    np.testing.assert_array_equal(got[0], tt.grad.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,shape,dim", [("_log_softmax", (6, 10), 1),
                                            ("_softmax", (3, 4, 5), -1),
                                            ("_softmax", (6, 10), 0)])
def test_softmax_gradients_on_arrays(name, shape, dim, dtype):
    """(log_)softmax's gradient on arrays is its derivative's (the C kernel over rows, which
    a recorded backward replaces by the formula); None where the kernel does not apply."""
    op = fusegrad.ops.REGISTRY[name]
    x = fusegrad.tensor(RNG.standard_normal(shape).astype(dtype))
    out = x.log_softmax(dim) if name == "_log_softmax" else x.softmax(dim)
    g = RNG.standard_normal(shape).astype(dtype)
    raw = op.on_arrays(g, out, dim)
    with fusegrad.no_grad():
        want = op.derivative(fusegrad.tensor(g), out, dim)
    if dim == 0 or not HAVE_CC:  # no C kernel: the derivative computes it
        assert raw is None
    else:
        _same([raw[0]], [want[0].numpy()])


@pytest.mark.parametrize("dtype", DTYPES)
def test_mlp_step_matches_torch(dtype):
    x = RNG.standard_normal((16, 20)).astype(dtype)
    y = RNG.integers(0, 5, 16)
    fm = fusegrad.nn.Sequential(fusegrad.nn.Linear(20, 30), fusegrad.nn.ReLU(),
                                fusegrad.nn.Linear(30, 5)).to(getattr(fusegrad, dtype.__name__))
    tm = torch.nn.Sequential(torch.nn.Linear(20, 30), torch.nn.ReLU(),
                             torch.nn.Linear(30, 5)).to(getattr(torch, dtype.__name__))
    tm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in
                        fm.state_dict().items()})
    F.cross_entropy(fm(fusegrad.tensor(x)), fusegrad.tensor(y)).backward()
    torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)).backward()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for (name, p), q in zip(fm.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=tol, atol=tol,
                                   err_msg=name)


def test_gradient_given_by_the_caller_is_not_written():
    """An addmm whose bias is used twice: its gradient entries are added together, never
    into the gradient the caller passed."""
    m = fusegrad.randn(4, 6, requires_grad=True)
    a = fusegrad.randn(4, 5, requires_grad=True)
    b = fusegrad.randn(5, 6, requires_grad=True)
    g = fusegrad.randn(4, 6)
    before = g.numpy().copy()
    out = fusegrad.addmm(m, a, b) + fusegrad.addmm(m, a, b)
    out.backward(g)
    np.testing.assert_array_equal(g.numpy(), before)
    np.testing.assert_array_equal(m.grad.numpy(), before + before)
    w = fusegrad.randn(3, 4, requires_grad=True)
    gw = fusegrad.randn(4, 3)
    before = gw.numpy().copy()
    (w.t() + w.t()).backward(gw)
    np.testing.assert_array_equal(gw.numpy(), before)
    np.testing.assert_array_equal(w.grad.numpy(), (before + before).T)


@needs_cc
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,k", [((64, 128), 1), ((200, 128), 1), ((64, 10), 1), ((1, 5), 1),
                                     ((3, 2), 1), ((7, 5, 3), 1), ((7, 5, 3), 2),
                                     ((2, 3, 4, 5), 3), ((20000, 2), 1), ((2, 1), 1)])
def test_sum_over_leading_rows_in_c(shape, k, dtype):
    a = (RNG.standard_normal(shape) * 1e6).astype(dtype)
    a[RNG.random(shape) < 0.2] = -0.0
    for keep in (False, True):
        got = R._sum_kernel(a, list(range(k)), keep)
        with _native.native_kernels(False):
            want = R._sum_kernel(a, list(range(k)), keep)
        _same([got], [want])


@pytest.mark.parametrize("dtype", DTYPES)
# (Batches under 8, up to 128 and beyond it: each of the pairwise sum's three ways, which the
# reduced loss's C loop takes as NumPy's sum does.)
@pytest.mark.parametrize("shape", [(64, 10), (1, 3), (7, 3), (100, 1000), (300, 4),
                                   (5000, 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_in_c_and_numpy(shape, reduction, dtype):
    x = (RNG.standard_normal(shape) * 4).astype(dtype)
    t = RNG.integers(0, shape[1], shape[0])
    results = []
    for on in (True, False):
        with _native.native_kernels(on):
            xf = fusegrad.tensor(x, requires_grad=True)
            loss = F.nll_loss(xf, fusegrad.tensor(t), reduction=reduction)
            loss.sum().backward()
            results.append([loss.detach().numpy(), xf.grad.numpy()])
    _same(results[0], results[1])
    xt = torch.tensor(x, requires_grad=True)
    lt = torch.nn.functional.nll_loss(xt, torch.tensor(t), reduction=reduction)
    lt.sum().backward()
    np.testing.assert_allclose(results[0][0], lt.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(results[0][1], xt.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("target", [[0, 1, 3, 2], [0, -1, 1, 2], [0, 1, -100, 2],
                                    [2, 1, 1, 0]])
def test_nll_loss_targets_outside_the_classes(target):
    """Out-of-range targets raise PyTorch's IndexError; ignored ones (the default -100, and
    ignore_index=1) are masked: the C loop hands those to the general path."""
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    for ignore in (-100, 1):
        try:
            lt = torch.nn.functional.cross_entropy(torch.tensor(x, requires_grad=True),
                                                   torch.tensor(target), ignore_index=ignore)
        except IndexError as e:
            with pytest.raises(IndexError, match=str(e).split(" ")[1]):
                F.cross_entropy(fusegrad.tensor(x), fusegrad.tensor(target),
                                ignore_index=ignore)
            continue
        xf = fusegrad.tensor(x, requires_grad=True)
        xt = torch.tensor(x, requires_grad=True)
        lt = torch.nn.functional.cross_entropy(xt, torch.tensor(target), ignore_index=ignore)
        lf = F.cross_entropy(xf, fusegrad.tensor(target), ignore_index=ignore)
        lt.backward()
        lf.backward()
        np.testing.assert_allclose(lf.detach().numpy(), lt.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-7)


@needs_cc
@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_over_leading_rows_is_the_same_at_two_threads(dtype):
    """The C loop's columns are shared between threads, each summed over all rows in order:
    the bits do not depend on the thread count."""
    a = RNG.standard_normal((3000, 700)).astype(dtype)
    before = fusegrad.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            fusegrad.set_num_threads(threads)
            results.append(R._sum_kernel(a, [0], False))
    finally:
        fusegrad.set_num_threads(before)
    _same([results[0]], [results[1]])
    with _native.native_kernels(False):
        _same([results[0]], [R._sum_kernel(a, [0], False)])


def test_nll_c_loops_refuse_rows_that_do_not_match():
    """nll_loss's C loops never index past an array: a target of another
    length is refused (None: the general path, whose meta names the mismatch)."""
    from fusegrad.ops import nn as N

    x = RNG.standard_normal((4, 3)).astype(np.float32)
    t = np.array([0, 1], np.int64)
    assert N._nll_gather(x, t, -100, np.empty(2, np.float32)) is None
    assert N._nll_gather(x, np.zeros(4, np.int64), -100, np.empty(2, np.float32)) is None
    one = np.ones((), np.float32)
    assert N._nll_reduced_grad(one, (4, 3), t, 1, -100, one) is None
    assert N._nll_reduced(x, t, 1, -100) is None
    with pytest.raises(ValueError, match=r"batch_size \(4\) to match target batch_size \(2\)"):
        F.nll_loss(fusegrad.tensor(x), fusegrad.tensor(t))


@pytest.mark.parametrize("op", ["relu", "log_softmax", "softmax"])
def test_a_saved_output_changed_in_place_is_reported(op):
    """A derivative on arrays reads a saved output as its array; one changed in place after
    the op is still reported, with PyTorch's message, and the unchanged one gives the
    recorded gradient (a saved output of a 0-d relu, which the array form declines, is
    rebuilt as a tensor for the recorded derivative)."""
    def run(lib, change):
        x = lib.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4) - 5, requires_grad=True)
        y = getattr(x * 1, op)() if op == "relu" else getattr(x * 1, op)(1)
        loss = (y * lib.arange(12.0).reshape(3, 4)).sum()
        if change:
            with lib.no_grad():
                y.add_(1)
        loss.backward()
        return x.grad.numpy()

    with pytest.raises(RuntimeError) as theirs:
        run(torch, True)
    with pytest.raises(RuntimeError) as ours:
        run(fusegrad, True)
    assert str(ours.value) == str(theirs.value)
    np.testing.assert_allclose(run(fusegrad, False), run(torch, False), rtol=1e-5)
    x = fusegrad.tensor(-2.0, requires_grad=True)
    (x * 1).relu().backward()
    assert x.grad.item() == 0.0


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_a_reduced_loss_and_its_total_weight_hold_storages_of_their_own(reduction):
    """The C loop writes the loss and the total weight into arrays of their own: each
    tensor's storage holds its one value at offset 0, as PyTorch's."""
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    t = np.array([0, 2, 1, 1, 0])
    facts = []
    for lib in (fusegrad, torch):
        loss = lib.nn.functional.cross_entropy(lib.tensor(x, requires_grad=True),
                                               lib.tensor(t), reduction=reduction)
        total = loss.grad_fn._saved_total_weight
        facts.append([(v.untyped_storage().nbytes(), v.storage_offset(), v.item())
                      for v in (loss, total)])
    assert facts[0][0][:2] == facts[1][0][:2] and facts[0][1] == facts[1][1]
    np.testing.assert_allclose(facts[0][0][2], facts[1][0][2], rtol=1e-6)
