"""utils.data: datasets, random_split, samplers and DataLoader batching/collation."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import fusegrad
import fusegrad.utils.data as fud


def _pair(n=10):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    y = np.arange(n)
    return (fud.TensorDataset(fusegrad.tensor(x), fusegrad.tensor(y)),
            tud.TensorDataset(torch.tensor(x), torch.tensor(y)))


def _same(a, b):
    if isinstance(b, torch.Tensor):
        assert isinstance(a, fusegrad.Tensor)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    elif isinstance(b, dict):
        assert type(a) is type(b) and list(a) == list(b)
        for k in b:
            _same(a[k], b[k])
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b


def test_tensor_dataset_and_subset():
    fg, th = _pair()
    assert len(fg) == 10
    _same(fg[3], th[3])
    sub_f, sub_t = fud.Subset(fg, [5, 1]), tud.Subset(th, [5, 1])
    assert len(sub_f) == 2
    _same(sub_f[0], sub_t[0])
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        fud.TensorDataset(fusegrad.ones(3), fusegrad.ones(4))
    cat = fg + fg
    assert len(cat) == 20
    _same(cat[12], th[2])


@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (5, False), (1, True)])
def test_sequential_batches_match(batch_size, drop_last):
    fg, th = _pair()
    lf = fud.DataLoader(fg, batch_size=batch_size, drop_last=drop_last)
    lt = tud.DataLoader(th, batch_size=batch_size, drop_last=drop_last)
    assert len(lf) == len(lt)
    batches_f, batches_t = list(lf), list(lt)
    assert len(batches_f) == len(batches_t)
    for a, b in zip(batches_f, batches_t):
        _same(a, b)


def test_shuffle_with_generator_is_a_reproducible_permutation():
    fg, _ = _pair(20)

    def order(seed):
        g = fusegrad.Generator().manual_seed(seed)
        return np.concatenate([b[1].numpy() for b in fud.DataLoader(fg, batch_size=4,
                                                                    shuffle=True, generator=g)])

    a, b, c = order(0), order(0), order(1)
    assert sorted(a.tolist()) == list(range(20))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    loader = fud.DataLoader(fg, batch_size=4, shuffle=True,
                            generator=fusegrad.Generator().manual_seed(3))
    assert not np.array_equal(np.concatenate([b[1].numpy() for b in loader]),
                              np.concatenate([b[1].numpy() for b in loader]))


Point = namedtuple("Point", "x y")


class Samples(tud.Dataset):
    def __init__(self, kind):
        self.kind = kind

    def __len__(self):
        return 5

    def __getitem__(self, i):
        T = torch if self.kind == "torch" else fusegrad
        return {"x": T.ones(2) * i, "label": i, "w": float(i) / 2, "name": f"s{i}",
                "arr": np.full(3, i, dtype=np.float32), "pt": Point(i, [i, i + 1]),
                "flag": i % 2 == 0}


def test_collate_dicts_tuples_numbers():
    for a, b in zip(fud.DataLoader(Samples("fg"), batch_size=2),
                    tud.DataLoader(Samples("torch"), batch_size=2)):
        _same(a, b)


def test_no_batching_and_custom_collate():
    fg, th = _pair(4)
    for a, b in zip(fud.DataLoader(fg, batch_size=None), tud.DataLoader(th, batch_size=None)):
        _same(a, b)
    out = list(fud.DataLoader(fg, batch_size=2, collate_fn=lambda b: len(b)))
    assert out == [2, 2]


def test_iterable_dataset():
    class Stream(fud.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in fud.DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5],
                                                                          [6]]


def test_random_split():
    fg, _ = _pair(10)
    g = fusegrad.Generator().manual_seed(0)
    parts = fud.random_split(fg, [3, 7], generator=g)
    assert [len(p) for p in parts] == [3, 7]
    idx = sorted(parts[0].indices + parts[1].indices)
    assert idx == list(range(10))
    fr = fud.random_split(range(10), [0.33, 0.33, 0.34])
    assert [len(p) for p in fr] == [len(p) for p in tud.random_split(range(10),
                                                                       [0.33, 0.33, 0.34])]
    for mod in (fud, tud):
        with pytest.raises(ValueError, match="Sum of input lengths does not equal the length"):
            mod.random_split(range(10), [3, 3])


def test_samplers_and_errors():
    assert list(fud.SequentialSampler(range(3))) == [0, 1, 2]
    bs = fud.BatchSampler(fud.SequentialSampler(range(5)), 2, drop_last=False)
    assert list(bs) == list(tud.BatchSampler(tud.SequentialSampler(range(5)), 2, False))
    assert len(bs) == 3
    rs = fud.RandomSampler(range(6), generator=fusegrad.Generator().manual_seed(0))
    assert sorted(rs) == list(range(6))
    assert len(list(fud.RandomSampler(range(6), replacement=True, num_samples=9))) == 9
    fg, _ = _pair()
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        fud.DataLoader(fg, sampler=fud.SequentialSampler(fg), shuffle=True)
    loader = fud.DataLoader(fg, batch_sampler=bs)
    assert len(loader) == 3


P = namedtuple("P", "a b")


@pytest.mark.parametrize("batch", [
    [(1.5, "x"), (2.5, "y")],
    [["a", 1], ["b", 2]],
    [P("s", 1), P("t", 2)],
    [{"k": "u", "n": (1, "z")}, {"k": "v", "n": (2, "w")}],
    ["p", "q"],
], ids=repr)
def test_collate_keeps_string_fields_as_tuples(batch):
    got = repr(fud.default_collate(batch)).replace("fusegrad", "torch")
    assert got == repr(tud.default_collate(batch))


class _Count:
    """An iterable dataset of `range(n)` for both libraries."""

    def __init__(self, lib, n):
        base = lib.utils.data.IterableDataset
        self.ds = type("Count", (base,), {"__iter__": lambda s: iter(range(n)),
                                          "__len__": lambda s: n})()


def _chain_and_stack(lib):
    d = lib.utils.data
    out = []
    for make in (
        lambda: list(d.ChainDataset([_Count(lib, 2).ds, _Count(lib, 3).ds])),
        lambda: len(d.ChainDataset([_Count(lib, 2).ds, _Count(lib, 3).ds])),
        lambda: len(d.ChainDataset([_Count(lib, 2).ds, d.TensorDataset(lib.ones(2))])),
        lambda: d.StackDataset(d.TensorDataset(lib.arange(3)), lib.arange(3) * 2)[1],
        lambda: d.StackDataset(a=lib.arange(3), b=lib.arange(3) * 2)[2],
        lambda: len(d.StackDataset(a=lib.arange(3), b=lib.arange(3))),
        lambda: d.StackDataset(lib.arange(3), lib.arange(4)),
        lambda: d.StackDataset(lib.arange(3), b=lib.arange(3)),
        lambda: d.StackDataset(),
        lambda: d.ConcatDataset([_Count(lib, 2).ds]),
        lambda: next(iter(d.DataLoader(d.StackDataset(x=lib.arange(4.0), y=lib.arange(4)),
                                       batch_size=2))),
    ):
        try:
            out.append(repr(make()).replace("fusegrad", "torch"))
        except (ValueError, AssertionError, TypeError) as e:
            out.append((type(e).__name__, str(e)))
    return out


def test_chain_and_stack_datasets_match_torch():
    assert _chain_and_stack(fusegrad) == _chain_and_stack(torch)
