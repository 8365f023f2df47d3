"""Random sampling ops against PyTorch's: the same distribution (moments and support of many
draws from each library), dtype rules, node names, zero gradients and error messages."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

N = 200_000

# (method, args): each fills a float tensor in place.
FILLERS = [
    ("uniform_", (-2.0, 3.0)),
    ("normal_", (1.0, 2.0)),
    ("log_normal_", (0.2, 0.5)),
    ("exponential_", (2.5,)),
    ("geometric_", (0.3,)),
    ("bernoulli_", (0.3,)),
    ("random_", (10,)),
    ("random_", (-3, 5)),
]


def _draws(lib, method, args, dtype="float64"):
    lib.manual_seed(0)
    return getattr(lib.empty(N, dtype=getattr(lib, dtype)), method)(*args).numpy().astype(float)


@pytest.mark.parametrize("method,args", FILLERS, ids=[f"{m}{a}" for m, a in FILLERS])
def test_same_distribution_as_torch(method, args):
    ours = _draws(fusegrad, method, args)
    theirs = _draws(torch, method, args)
    # Means agree within 6 standard errors of the difference; so do variances (4th moment).
    se = np.sqrt(ours.var() / N + theirs.var() / N)
    assert abs(ours.mean() - theirs.mean()) < 6 * se, (ours.mean(), theirs.mean())
    assert abs(ours.var() - theirs.var()) < 0.05 * theirs.var() + 1e-12
    if method in ("random_", "bernoulli_"):  # small discrete support: every value is drawn
        np.testing.assert_array_equal(np.unique(ours), np.unique(theirs))
    elif method == "geometric_":
        assert ours.min() == theirs.min() == 1 and np.array_equal(ours, np.round(ours))
    elif method == "uniform_":  # [from, to), reaching both ends
        width = args[1] - args[0]
        assert args[0] <= ours.min() < args[0] + 1e-3 * width
        assert args[1] - 1e-3 * width < ours.max() < args[1]


def test_cauchy_median_and_quartiles():
    ours = np.sort(_draws(fusegrad, "cauchy_", (1.0, 2.0)))
    theirs = np.sort(_draws(torch, "cauchy_", (1.0, 2.0)))
    for q in (0.25, 0.5, 0.75):
        assert abs(ours[int(q * N)] - theirs[int(q * N)]) < 0.08


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64", "bool",
                                   "uint8"])
def test_random_default_range_by_dtype(dtype):
    ours = _draws(fusegrad, "random_", (), dtype)
    theirs = _draws(torch, "random_", (), dtype)
    assert ours.min() >= 0 and ours.max() <= np.float64(np.nextafter(theirs.max(), np.inf)) * 1.01
    assert np.log2(ours.max() + 1) > np.log2(theirs.max() + 1) - 1  # same top, not a subrange


def test_nodes_and_zero_gradients_like_torch():
    for lib in (fusegrad, torch):
        lib.manual_seed(0)
    a = fusegrad.ones(4, requires_grad=True)
    b = torch.ones(4, requires_grad=True)
    for method, args in FILLERS + [("cauchy_", ())]:
        x, y = a * 2, b * 2
        getattr(x, method)(*args)
        getattr(y, method)(*args)
        assert type(x.grad_fn).__name__ == type(y.grad_fn).__name__, method
        (x * 3).sum().backward()
        (y * 3).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    p_ours = fusegrad.full((4,), 0.5, requires_grad=True)
    p_theirs = torch.full((4,), 0.5, requires_grad=True)
    x, y = a * 1, b * 1
    x.bernoulli_(p_ours * 1)
    y.bernoulli_(p_theirs * 1)
    assert type(x.grad_fn).__name__ == type(y.grad_fn).__name__ == "BernoulliBackward1"
    draw = fusegrad.bernoulli(p_ours * 1)
    assert type(draw.grad_fn).__name__ == type(torch.bernoulli(p_theirs * 1).grad_fn).__name__
    assert type(fusegrad.poisson(p_ours * 4).grad_fn).__name__ == "PoissonBackward0"


def test_leaf_requiring_grad_is_refused():
    a = fusegrad.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as ours:
        a.uniform_()
    with pytest.raises(RuntimeError) as theirs:
        torch.ones(3, requires_grad=True).uniform_()
    assert str(ours.value) == str(theirs.value)
    with fusegrad.no_grad():
        a.normal_()  # nn.init's way: allowed without grad


BAD = [
    lambda lib: lib.zeros(3, dtype=lib.int64).normal_(),
    lambda lib: lib.zeros(3, dtype=lib.int64).uniform_(),
    lambda lib: lib.zeros(3).uniform_(2, 1),
    lambda lib: lib.zeros(3).normal_(0, -1),
    lambda lib: lib.zeros(3).bernoulli_(1.5),
    lambda lib: lib.zeros(3).exponential_(-1),
    lambda lib: lib.zeros(3).geometric_(0),
    lambda lib: lib.zeros(3).random_(5, 5),
    lambda lib: lib.zeros(3).log_normal_(0, 0),
    lambda lib: lib.zeros(3).cauchy_(0, 0),
    lambda lib: lib.multinomial(lib.ones(2, 2, 2), 1),
    lambda lib: lib.multinomial(lib.ones(3), 4),
]


@pytest.mark.parametrize("k", range(len(BAD)))
def test_errors_match_torch(k):
    with pytest.raises((RuntimeError, NotImplementedError)) as theirs:
        BAD[k](torch)
    with pytest.raises(type(theirs.value)) as ours:
        BAD[k](fusegrad)
    assert str(ours.value) == str(theirs.value)


def test_generator_reproduces_and_default_stream_advances():
    g = fusegrad.Generator().manual_seed(7)
    first = fusegrad.empty(5).normal_(generator=g)
    g.manual_seed(7)
    np.testing.assert_array_equal(fusegrad.empty(5).normal_(generator=g).numpy(),
                                  first.numpy())
    fusegrad.manual_seed(3)
    x = fusegrad.empty(5).uniform_()
    fusegrad.manual_seed(3)
    np.testing.assert_array_equal(fusegrad.empty(5).uniform_().numpy(), x.numpy())
    assert not np.array_equal(fusegrad.empty(5).uniform_().numpy(), x.numpy())


def test_multinomial_frequencies_and_no_repeats():
    w = [0.1, 0.2, 0.7]
    fusegrad.manual_seed(0)
    ours = fusegrad.multinomial(fusegrad.tensor(w), N, replacement=True).numpy()
    theirs = torch.multinomial(torch.tensor(w), N, replacement=True).numpy()
    np.testing.assert_allclose(np.bincount(ours, minlength=3) / N,
                               np.bincount(theirs, minlength=3) / N, atol=0.01)
    rows = fusegrad.multinomial(fusegrad.rand(50, 6) + 0.01, 6).numpy()
    assert rows.dtype == np.int64 and all(sorted(r) == list(range(6)) for r in rows)
    # Without replacement, the first pick follows the weights.
    firsts = fusegrad.multinomial(fusegrad.tensor([w] * 20000), 2).numpy()[:, 0]
    np.testing.assert_allclose(np.bincount(firsts, minlength=3) / 20000, w, atol=0.02)
