"""Samplers against PyTorch's: argument errors, lengths, laziness and the distribution of
the indices (the random streams of the two libraries differ, so draws are compared by
distribution)."""

import itertools

import numpy as np
import pytest
import torch

import fusegrad

CASES = [
    "RandomSampler(range(3), replacement=1)", "RandomSampler(range(3), num_samples=0)",
    "RandomSampler(range(0))", "list(RandomSampler(range(0), num_samples=2))",
    "RandomSampler(range(5), num_samples=3).num_samples",
    "len(list(RandomSampler(range(3), num_samples=70)))",
    "sorted(RandomSampler(range(10)))", "sorted(RandomSampler(range(4), num_samples=10))[:2]",
    "len(list(RandomSampler(range(4), replacement=True, num_samples=70)))",
    "WeightedRandomSampler([1, 2], 0)", "WeightedRandomSampler([1, 2], 2, replacement=1)",
    "WeightedRandomSampler([[1, 2]], 2)", "list(WeightedRandomSampler([0, 0], 2))",
    "list(WeightedRandomSampler([1, -1], 2))", "len(list(WeightedRandomSampler([1, 2], 1)))",
    "list(WeightedRandomSampler([1, float('inf')], 3))",
    "list(WeightedRandomSampler([1, 2], 5, replacement=False))",
    "list(WeightedRandomSampler([1, 2], True))", "len(WeightedRandomSampler([1, 2], 5))",
    "WeightedRandomSampler([1, 2], 2).weights.tolist()",
    "str(WeightedRandomSampler(T.tensor([1, 2]), 2).weights.dtype).split('.')[1]",
    "sorted(WeightedRandomSampler([0, 1, 0, 2], 2, replacement=False))",
    "set(WeightedRandomSampler([0, 1, 0, 2], 50)) <= {1, 3}",
    "list(SubsetRandomSampler([]))", "sorted(SubsetRandomSampler([7, 3, 9]))",
    "len(BatchSampler(range(10), 3, False))", "len(BatchSampler(range(10), 3, True))",
    "BatchSampler(range(10), 0, False)", "BatchSampler(range(10), 3, 1)",
    "list(BatchSampler(range(7), 3, True))", "list(BatchSampler(range(7), 3, False))",
    "[type(iter(s)).__name__ for s in (RandomSampler(range(3)), SubsetRandomSampler([1]), "
    "WeightedRandomSampler([1, 2], 2))]",
]


def _outcome(lib, expr):
    names = {n: getattr(lib.utils.data, n) for n in (
        "RandomSampler", "WeightedRandomSampler", "SubsetRandomSampler", "BatchSampler")}
    try:
        return repr(eval(expr, {"T": lib, **names}))
    except Exception as e:  # noqa: BLE001 (the error is what is compared)
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("expr", CASES)
def test_sampler_behaviour_as_pytorch(expr):
    assert _outcome(fusegrad, expr) == _outcome(torch, expr)


def test_huge_num_samples_are_drawn_lazily():
    sampler = fusegrad.utils.data.RandomSampler(range(10), replacement=True,
                                               num_samples=10 ** 10)
    first = list(itertools.islice(iter(sampler), 100))
    assert len(sampler) == 10 ** 10 and all(0 <= i < 10 for i in first)
    # 10 ** 7 permutations of 10 ** 5: any eager draw is out of reach, while the first
    # permutation (a Python-level shuffle, as PyTorch's bits require) stays quick.
    perm = fusegrad.utils.data.RandomSampler(range(10 ** 5), num_samples=10 ** 12)
    assert len(list(itertools.islice(iter(perm), 5))) == 5


def test_weighted_frequencies_follow_the_weights():
    weights = [0.1, 0.0, 0.6, 0.3]
    gen = fusegrad.Generator().manual_seed(0)
    draws = list(fusegrad.utils.data.WeightedRandomSampler(weights, 20000, generator=gen))
    freq = np.bincount(draws, minlength=4) / len(draws)
    assert np.allclose(freq, weights, atol=0.015) and freq[1] == 0


def test_random_sampler_is_a_uniform_permutation_and_generator_reproducible():
    data = range(5)
    firsts = np.bincount([next(iter(fusegrad.utils.data.RandomSampler(data)))
                          for _ in range(5000)], minlength=5) / 5000
    assert np.allclose(firsts, 0.2, atol=0.03)
    runs = []
    for _ in range(2):
        gen = fusegrad.Generator().manual_seed(3)
        runs.append(list(fusegrad.utils.data.RandomSampler(range(20), generator=gen)))
    assert runs[0] == runs[1] and sorted(runs[0]) == list(range(20))


def test_a_pass_takes_one_draw_from_the_default_generator():
    """PyTorch seeds each pass's generator with one draw from the default one."""
    fusegrad.manual_seed(0)
    list(fusegrad.utils.data.RandomSampler(range(1000)))
    after_long = fusegrad.rand(3)
    fusegrad.manual_seed(0)
    list(fusegrad.utils.data.RandomSampler(range(3)))
    assert fusegrad.equal(fusegrad.rand(3), after_long)
