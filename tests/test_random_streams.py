"""Seeded random streams equal PyTorch's CPU streams bit for bit: the generator (seeding,
states in both directions), each sampling op across sizes below, at and above the 16-element
Box-Muller block, dtypes and generators, and what users see (module initialisation, data
shuffles, dropout)."""

import numpy as np
import pytest
import torch

import fusegrad as fg

SEEDS = (0, 7, 2 ** 40 + 3)
SIZES = (1, 2, 3, 15, 16, 17, 31, 33, 100, 1001)


def _array(x):
    if isinstance(x, (list, tuple)):
        return [_array(v) for v in x]
    if hasattr(x, "detach"):
        x = x.detach()
        if "bfloat16" in str(x.dtype):
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def _assert_same(run, seeds=SEEDS):
    """`run(module)` gives the same values, dtypes and shapes under torch and fusegrad after
    the same manual_seed."""
    for seed in seeds:
        torch.manual_seed(seed)
        expected = _array(run(torch))
        fg.manual_seed(seed)
        got = _array(run(fg))
        if not isinstance(expected, list):
            expected, got = [expected], [got]
        assert len(expected) == len(got)
        for e, g in zip(expected, got):
            assert e.shape == g.shape and e.dtype == g.dtype, (seed, e.dtype, g.dtype)
            np.testing.assert_array_equal(g, e, err_msg=f"seed {seed}")


# ---------------------------------------------------------------- generator


@pytest.mark.parametrize("seed", [0, 1, 12345, 2 ** 32 + 5, 2 ** 64 - 1, -1, -(2 ** 63)])
def test_seeded_state_bytes_equal_torch(seed):
    expected = torch.Generator().manual_seed(seed)
    got = fg.Generator().manual_seed(seed)
    assert got.initial_seed() == expected.initial_seed()
    np.testing.assert_array_equal(got.get_state().numpy(), expected.get_state().numpy())


def test_default_generator_before_any_seed_draws_torchs_default_stream():
    expected = torch.rand(5, generator=torch.Generator())
    got = fg.rand(5, generator=fg.Generator())
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert fg.Generator().initial_seed() == torch.Generator().initial_seed()


def test_state_after_draws_and_cached_normal_equals_torch():
    def run(t):
        g = t.Generator().manual_seed(3)
        t.rand(5, generator=g)
        t.randn(3, generator=g)  # leaves Box-Muller's spare value in the state
        return g.get_state()

    _assert_same(run)


def test_states_cross_load_both_ways():
    torch.manual_seed(11)
    torch.randn(3)
    torch.rand(700)  # past one regeneration of the 624 words
    state = torch.get_rng_state()
    fg.set_rng_state(fg.tensor(state.numpy()))
    got = [fg.randn(1), fg.randn(40), fg.rand(7)]
    expected = [torch.randn(1), torch.randn(40), torch.rand(7)]
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g.numpy(), e.numpy())
    ours = fg.get_rng_state()
    torch.set_rng_state(torch.from_numpy(ours.numpy().copy()))
    np.testing.assert_array_equal(torch.randn(5).numpy(), fg.randn(5).numpy())


def test_generator_state_round_trip_replays():
    def run(t):
        g = t.Generator().manual_seed(5)
        t.randn(5, generator=g)
        state = g.get_state()
        first = t.randn(21, generator=g)
        g.set_state(state)
        return [first, t.randn(21, generator=g), t.tensor(g.initial_seed())]

    _assert_same(run)


def test_seed_draws_a_new_seed():
    g = fg.Generator()
    s = g.seed()
    assert g.initial_seed() == s
    np.testing.assert_array_equal(
        fg.rand(4, generator=g).numpy(),
        torch.rand(4, generator=torch.Generator().manual_seed(s)).numpy())


@pytest.mark.parametrize("make, error, message", [
    (lambda t: t.zeros(10, dtype=t.uint8), RuntimeError,
     "Expected a CPUGeneratorImplState of size 5056 but found the input RNG state size to "
     "be 10"),
    (lambda t: t.zeros(5056), TypeError, "RNG state must be a torch.ByteTensor"),
    (lambda t: t.zeros(5056, dtype=t.uint8), RuntimeError, "Invalid mt19937 state"),
])
def test_bad_states_raise_torchs_errors_and_leave_the_state(make, error, message):
    for t in (torch, fg):
        g = t.Generator().manual_seed(2)
        before = g.get_state().numpy().copy()
        with pytest.raises(error, match=message):
            g.set_state(make(t))
        np.testing.assert_array_equal(g.get_state().numpy(), before)


def test_bad_seeds_raise_torchs_errors():
    for t in (torch, fg):
        with pytest.raises(RuntimeError, match="manual_seed expected a long, but got float"):
            t.Generator().manual_seed(1.5)
        with pytest.raises(RuntimeError, match="manual_seed expected a long, but got bool"):
            t.Generator().manual_seed(True)
        with pytest.raises(ValueError, match="Overflow when unpacking long long"):
            t.Generator().manual_seed(2 ** 64)


def test_fork_rng_restores_the_stream():
    def run(t):
        with t.random.fork_rng():
            inside = t.rand(3)
        return [inside, t.rand(3)]

    _assert_same(run)


# ---------------------------------------------------------------- uniform and normal


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_rand_and_randn(n, dtype):
    _assert_same(lambda t: [t.rand(n, dtype=getattr(t, dtype)),
                            t.randn(n, dtype=getattr(t, dtype))])


@pytest.mark.parametrize("n", SIZES)
def test_normal_spare_value_carries_across_calls(n):
    _assert_same(lambda t: [t.randn(3), t.randn(n), t.randn(1), t.randn(2, dtype=t.float64),
                            t.randn(n, dtype=t.float64), t.randn(1)])


def test_randn_large_float32_every_value():
    _assert_same(lambda t: t.randn(250_007), seeds=(0, 1))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [5, 16, 37])
def test_fillers_with_parameters(dtype, n):
    def run(t):
        dt = getattr(t, dtype)
        return [t.empty(n, dtype=dt).uniform_(-0.3, 0.7), t.empty(n, dtype=dt).normal_(0.3, 0.02),
                t.empty(n, dtype=dt).uniform_(-2, 3), t.empty(n, dtype=dt).normal_(-1, 3)]

    _assert_same(run)


def test_narrow_uniform_never_reaches_the_top():
    _assert_same(lambda t: [t.empty(100_000, dtype=t.float16).uniform_(0, 1),
                            t.empty(100_000, dtype=t.bfloat16).uniform_(0, 1)], seeds=(0,))


def test_fillers_of_transposed_tensors_follow_memory_order():
    _assert_same(lambda t: [t.zeros(4, 6).t().normal_(), t.zeros(4, 6).t().uniform_(),
                            t.zeros(5, 7).t().bernoulli_(0.5)])


def test_generator_argument_and_like_factories():
    def run(t):
        g = t.Generator().manual_seed(9)
        return [t.rand(4, 5, generator=g), t.randn(40, generator=g), t.randn(3, generator=g),
                t.rand_like(t.zeros(3, 9)), t.randn_like(t.zeros(3, 9, dtype=t.float64))]

    _assert_same(run)


def test_normal_with_tensor_and_number_parameters():
    _assert_same(lambda t: [t.normal(t.zeros(20) + 0.5, t.ones(20) * 0.3),
                            t.normal(t.zeros(20) + 0.5, 0.3),
                            t.normal(0.5, t.ones(5) * 0.3),
                            t.normal(0.5, 0.3, size=(4, 5)),
                            t.normal(2.0, 0.1, size=(3,))])


def test_complex_rand_and_randn():
    _assert_same(lambda t: [t.rand(5, dtype=t.complex64), t.randn(9, dtype=t.complex64),
                            t.randn(12, dtype=t.complex128)])


# ---------------------------------------------------------------- integers


def test_randint_ranges_and_dtypes():
    _assert_same(lambda t: [t.randint(0, 10, (20,)), t.randint(-5, 2 ** 40, (21,)),
                            t.randint(3, 1000, (4, 5), dtype=t.int32),
                            t.randint(-3, 9, (11,), dtype=t.float32),
                            t.randint(0, 200, (11,), dtype=t.uint8), t.randint(7, (3, 3)),
                            t.randint(2 ** 28, 2 ** 29, (5,))])


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "bool",
                                   "float32", "float64", "float16", "bfloat16"])
def test_random_without_bounds(dtype):
    _assert_same(lambda t: t.empty(9, dtype=getattr(t, dtype)).random_())


def test_random_with_bounds():
    _assert_same(lambda t: [t.empty(9).random_(7), t.empty(9, dtype=t.int64).random_(-5, 2 ** 33),
                            t.empty(9).random_(3, 10), t.empty(9).random_(3)])


@pytest.mark.parametrize("n", [0, 1, 2, 10, 1000, 60_000])
def test_randperm(n):
    _assert_same(lambda t: [t.randperm(n), t.randperm(n, dtype=t.int32)], seeds=(0, 7))


# ---------------------------------------------------------------- other distributions


def test_bernoulli_and_dropout_masks():
    _assert_same(lambda t: [t.empty(100).bernoulli_(0.3), t.bernoulli(t.rand(100)),
                            t.bernoulli(t.rand(50, dtype=t.float64)),
                            t.empty(30, dtype=t.int64).bernoulli_(0.5),
                            t.empty(6, 5).bernoulli_(t.rand(5)),
                            t.nn.functional.dropout(t.ones(100), 0.3),
                            t.nn.functional.dropout2d(t.ones(4, 6, 3, 3), 0.3),
                            t.nn.functional.alpha_dropout(t.ones(100), 0.3, True),
                            t.nn.Dropout(0.25)(t.ones(3, 40)),
                            t.ops.aten.native_dropout(t.ones(100), 0.25, True)[1]])


def test_continuous_distributions():
    _assert_same(lambda t: [t.empty(50).exponential_(2.0),
                            t.empty(50, dtype=t.float64).exponential_(0.5),
                            t.empty(50).geometric_(0.3),
                            t.empty(50, dtype=t.float64).cauchy_(0.5, 2.0),
                            t.empty(50, dtype=t.float64).log_normal_(0.5, 0.25),
                            t.empty(5).log_normal_(0.5, 0.25)])


def test_multinomial_with_and_without_replacement():
    _assert_same(lambda t: [t.multinomial(t.rand(3, 10), 4), t.multinomial(t.rand(10), 1),
                            t.multinomial(t.rand(3, 10), 20, True),
                            t.multinomial(t.rand(3, 10, dtype=t.float64), 20, True)])


def test_rrelu_slopes():
    _assert_same(lambda t: [t.nn.functional.rrelu(t.linspace(-1, 1, 9), training=True),
                            t.nn.RReLU(0.1, 0.3).train()(t.randn(4, 6))])


# ---------------------------------------------------------------- what users see


def _params(module):
    return list(module.parameters())


def test_module_initialisation():
    _assert_same(lambda t: _params(t.nn.Linear(3, 4)) + _params(t.nn.Linear(300, 40))
                 + _params(t.nn.Conv2d(3, 8, 3)) + _params(t.nn.LSTM(5, 7, num_layers=2))
                 + _params(t.nn.GRU(5, 7)) + _params(t.nn.Embedding(10, 4))
                 + _params(t.nn.Embedding(100, 40)) + _params(t.nn.MultiheadAttention(8, 2))
                 + _params(t.nn.TransformerEncoderLayer(8, 2, 16)))


def test_seeded_script_gives_torchs_loss():
    def run(t):
        model = t.nn.Sequential(t.nn.Linear(3, 8), t.nn.ReLU(), t.nn.Dropout(0.2),
                                t.nn.Linear(8, 1))
        x, y = t.randn(4, 3), t.randn(4, 1)
        return t.nn.functional.mse_loss(model(x), y).detach()

    for seed in SEEDS:
        torch.manual_seed(seed)
        expected = run(torch).item()
        fg.manual_seed(seed)
        assert run(fg).item() == pytest.approx(expected, rel=1e-6)


def test_init_functions():
    _assert_same(lambda t: [t.nn.init.xavier_uniform_(t.empty(5, 7)),
                            t.nn.init.xavier_normal_(t.empty(5, 7)),
                            t.nn.init.kaiming_uniform_(t.empty(6, 4), a=0.1),
                            t.nn.init.kaiming_normal_(t.empty(5, 7)),
                            t.nn.init.normal_(t.empty(5, 7), 0, 0.02),
                            t.nn.init.uniform_(t.empty(3), -1, 1)])


def test_trunc_normal_both_branches():
    # wide bounds: normal draws with redraws; narrow ones: uniform candidates accepted
    # against a second uniform (a log per candidate, so allow the last bit)
    _assert_same(lambda t: [t.nn.init.trunc_normal_(t.empty(50, 7), std=0.02),
                            t.nn.init.trunc_normal_(t.empty(40), mean=0.0, std=1.0, a=-1, b=1)])
    for seed in SEEDS:
        torch.manual_seed(seed)
        expected = torch.nn.init.trunc_normal_(torch.empty(300), mean=1.0, std=1.0, a=0.0,
                                               b=0.5).numpy()
        fg.manual_seed(seed)
        got = fg.nn.init.trunc_normal_(fg.empty(300), mean=1.0, std=1.0, a=0.0, b=0.5).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_orthogonal_draws_torchs_normal():
    for seed in SEEDS:
        torch.manual_seed(seed)
        expected = torch.nn.init.orthogonal_(torch.empty(5, 7)).numpy()
        fg.manual_seed(seed)
        got = fg.nn.init.orthogonal_(fg.empty(5, 7)).numpy()
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_random_split():
    _assert_same(lambda t: [np.array(s.indices) for s in
                            t.utils.data.random_split(range(10), [3, 7])]
                 + [np.array(s.indices) for s in t.utils.data.random_split(
                     range(50), [0.3, 0.7], generator=t.Generator().manual_seed(42))])


def _loader_batches(t, **kw):
    ds = t.utils.data.TensorDataset(t.arange(20))
    batches = []
    for _ in range(2):
        batches += [b[0] for b in t.utils.data.DataLoader(ds, batch_size=6, shuffle=True, **kw)]
    return batches + [t.rand(3)]


def test_dataloader_shuffle_order():
    _assert_same(_loader_batches)
    _assert_same(lambda t: _loader_batches(t, generator=t.Generator().manual_seed(5)))


def test_samplers():
    data = range(10)
    _assert_same(lambda t: [
        np.array(list(t.utils.data.RandomSampler(data, replacement=True, num_samples=70))),
        np.array(list(t.utils.data.RandomSampler(data, num_samples=25))),
        np.array(list(t.utils.data.SubsetRandomSampler([3, 5, 9, 11]))),
        np.array(list(t.utils.data.WeightedRandomSampler([0.1, 0.5, 0.4, 0.2], 12))),
        np.array(list(t.utils.data.WeightedRandomSampler([0.1, 0.5, 0.4, 0.2], 3,
                                                          replacement=False))),
        t.rand(2)])


def test_default_generator_starts_from_fresh_entropy_as_torch():
    # Unseeded, PyTorch draws other numbers on each run; a new Generator() does not.
    import subprocess
    import sys

    code = "import {0}; print({0}.initial_seed(), {0}.rand(2).tolist())"
    for lib in ("torch", "fusegrad"):
        runs = {subprocess.run([sys.executable, "-c", code.format(lib)], capture_output=True,
                               text=True, check=True).stdout for _ in range(2)}
        assert len(runs) == 2, lib
