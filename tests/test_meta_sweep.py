"""The meta device against PyTorch's: result strides of elementwise ops, joins and copies,
CPU index tensors, data-dependent ops' errors, in-place checks, `new_*` factories and the
storage figures of meta tensors."""

import copy
import pickle
import random

import pytest
import torch

import fusegrad as fg


def _describe(o):
    """What a program returned, in a form both libraries print alike."""
    if isinstance(o, (torch.Tensor, fg.Tensor)):
        fn = type(o.grad_fn).__name__ if o.grad_fn is not None else None
        return ("tensor", tuple(o.shape), str(o.dtype).replace("fusegrad", "torch"),
                tuple(o.stride()), o.requires_grad, fn, str(o.device))
    if isinstance(o, (list, tuple)):
        return [_describe(x) for x in o]
    if isinstance(o, (int, float, bool, str)) or o is None:
        return o
    return repr(o).replace("fusegrad", "torch")


def _run(prog, T):
    try:
        return _describe(prog(T))
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return ("raised", type(e).__name__, str(e))


def _meta(T, *shape, dtype=None, rg=False, strides=None):
    if strides is not None:
        return T.empty_strided(shape, strides, device="meta", dtype=dtype)
    if dtype is None or dtype.is_floating_point:
        return T.randn(*shape, device="meta", dtype=dtype, requires_grad=rg)
    return T.empty(*shape, device="meta", dtype=dtype)


def _under_no_grad(T, fn):
    with T.no_grad():
        return fn()


def _cl(T, *shape):
    return _meta(T, *shape).contiguous(memory_format=T.channels_last)


CASES = {
    # elementwise results keep their operands' memory order, as PyTorch's meta kernels
    "t plus scalar": lambda T: _meta(T, 3, 4).t() + 1,
    "t plus contiguous": lambda T: _meta(T, 3, 4).t() + _meta(T, 4, 3),
    "contiguous plus t": lambda T: _meta(T, 4, 3) + _meta(T, 3, 4).t(),
    "t exp grad": lambda T: _meta(T, 3, 4, rg=True).t().exp(),
    "permuted broadcast": lambda T: _meta(T, 2, 3, 4).permute(2, 0, 1) * _meta(T, 2, 1),
    "expanded and t": lambda T: _meta(T, 4, 1).expand(4, 3) + _meta(T, 3, 4).t(),
    "lower rank operand": lambda T: _meta(T, 3, 2, strides=(1, 3)) + _meta(T, 2, 3, 2),
    "strided slice": lambda T: _meta(T, 4, 6)[:, ::2].sigmoid(),
    "channels_last relu": lambda T: _cl(T, 2, 3, 4, 5).relu(),
    "channels_last add": lambda T: _cl(T, 2, 3, 4, 5) + _cl(T, 2, 3, 4, 5),
    "channels_last mixed": lambda T: _cl(T, 2, 3, 4, 5) + _meta(T, 2, 3, 4, 5),
    "channels_last bias": lambda T: _cl(T, 2, 3, 4, 5) + _meta(T, 3, 1, 1),
    "where t": lambda T: T.where(_meta(T, 3, 4).t() > 0, _meta(T, 4, 3), 0.0),
    "clamp t": lambda T: _meta(T, 3, 4).t().clamp(0, 1),
    "to dtype t": lambda T: _meta(T, 3, 4).t().double(),
    "clone t": lambda T: _meta(T, 3, 4).t().clone(),
    "clone size-1 strides": lambda T: _meta(T, 2, 1, 3, strides=(3, 6, 1)).clone(),
    "clone slice": lambda T: _meta(T, 4, 6)[:, ::2].clone(),
    "clone contiguous_format": lambda T: _meta(T, 3, 4).t().clone(
        memory_format=T.contiguous_format),
    "contiguous channels_last": lambda T: _cl(T, 2, 3, 4, 5),
    "clone channels_last": lambda T: _meta(T, 2, 3, 4, 5).clone(memory_format=T.channels_last),
    "clone channels_last 3d": lambda T: _meta(T, 1, 2, 3, 4, 5).clone(
        memory_format=T.channels_last_3d),
    "channels_last wrong rank": lambda T: _meta(T, 2, 3, 4).clone(
        memory_format=T.channels_last),
    "cat channels_last": lambda T: T.cat([_cl(T, 2, 3, 4, 4)] * 2, 1),
    "cat mixed formats": lambda T: T.cat([_cl(T, 2, 3, 4, 4), _meta(T, 2, 3, 4, 4)], 1),
    "cat t": lambda T: T.cat([_meta(T, 2, 3).t()] * 2),
    # index tensors on the CPU index a meta tensor, as in PyTorch
    "list index": lambda T: _meta(T, 3, 4)[[0, 2]],
    "cpu tensor index": lambda T: _meta(T, 3, 4, rg=True)[T.tensor([0, 1]), T.tensor([1, 2])],
    "cpu mask index": lambda T: _meta(T, 3, 4)[T.tensor([True, False, True])],
    "cpu 2-d mask index": lambda T: _meta(T, 3, 4)[T.ones(3, 4, dtype=T.bool)],
    "cpu index_select": lambda T: _meta(T, 3, 4).index_select(0, T.tensor([0, 2])),
    "cpu gather": lambda T: _meta(T, 3, 4).gather(0, T.zeros(1, 4, dtype=T.long)),
    "cpu scatter": lambda T: _meta(T, 3, 4).scatter(0, T.zeros(1, 4, dtype=T.long), 1.0),
    "cpu take": lambda T: _meta(T, 3, 4).take(T.tensor([[0, 5]])),
    "cpu embedding": lambda T: T.nn.functional.embedding(T.tensor([1, 2]), _meta(T, 5, 4,
                                                                                 rg=True)),
    # devices mixed: the first tensor's device is the one expected
    "meta plus cpu": lambda T: _meta(T, 3) + T.ones(3),
    "cpu plus meta": lambda T: T.ones(3) + _meta(T, 3),
    "meta plus cpu number": lambda T: _meta(T, 3) + T.tensor(2.0),
    # data-dependent shapes: PyTorch's meta errors
    "nonzero": lambda T: _meta(T, 3, 4).nonzero(),
    "argwhere": lambda T: T.argwhere(_meta(T, 3, 4)),
    "meta mask index": lambda T: _meta(T, 3, 4)[_meta(T, 3, 4) > 0],
    "masked_select": lambda T: _meta(T, 3, 4).masked_select(_meta(T, 3, 4) > 0),
    "unique": lambda T: _meta(T, 5).unique(),
    "unique_consecutive": lambda T: T.unique_consecutive(_meta(T, 5)),
    "bincount": lambda T: T.bincount(_meta(T, 5, dtype=T.long)),
    "one_hot without classes": lambda T: T.nn.functional.one_hot(_meta(T, 3, dtype=T.long)),
    "one_hot": lambda T: T.nn.functional.one_hot(_meta(T, 3, dtype=T.long), 4),
    # in-place checks
    "leaf in-place": lambda T: _meta(T, 3, rg=True).add_(1),
    "leaf zero_": lambda T: _meta(T, 3, rg=True).zero_(),
    "view of leaf in-place": lambda T: _meta(T, 3, rg=True)[0].mul_(2),
    "in-place broadcast larger": lambda T: _meta(T, 3, 4).add_(_meta(T, 2, 3, 4)),
    "in-place broadcast smaller": lambda T: _meta(T, 3, 4).mul_(_meta(T, 4)),
    "in-place int result float": lambda T: _meta(T, 3, dtype=T.long).div_(2),
    "in-place int add float": lambda T: _meta(T, 3, dtype=T.long).add_(1.5),
    "in-place int sub float tensor": lambda T: _meta(T, 3, dtype=T.int32).sub_(_meta(T, 3)),
    "in-place bool add int": lambda T: _meta(T, 3, dtype=T.bool).add_(2),
    "in-place int add int": lambda T: _meta(T, 3, dtype=T.long).add_(2),
    "in-place int from float": lambda T: _meta(T, 3, dtype=T.long).copy_(_meta(T, 3)),
    "in-place under no_grad": lambda T: _under_no_grad(T, lambda: _meta(T, 3, rg=True).mul_(2)),
    "view made under no_grad": lambda T: (lambda x: _under_no_grad(T, lambda: x[0]).mul_(2))(
        _meta(T, 3, rg=True) * 1),
    "in-place version": lambda T: (lambda x: (x.add_(1), x.mul_(2), x._version)[2])(
        _meta(T, 3)),
    # new_* factories, the legacy constructor and type names
    "new_zeros": lambda T: _meta(T, 3).new_zeros(2, 3),
    "new_ones grad": lambda T: _meta(T, 3).new_ones((2,), requires_grad=True),
    "new_empty dtype": lambda T: _meta(T, 3).new_empty(2, dtype=T.long),
    "new_full": lambda T: _meta(T, 3).new_full((2,), 3.0),
    "new_full cpu": lambda T: _meta(T, 3).new_full((2,), 3.0, device="cpu"),
    "new_zeros cpu": lambda T: _meta(T, 3).new_zeros(2, device="cpu"),
    "new_tensor": lambda T: _meta(T, 3).new_tensor([1, 2]),
    "new_tensor long": lambda T: _meta(T, 3).new_tensor([1, 2], dtype=T.long),
    "new_ones negative": lambda T: _meta(T, 3).new_ones(-1),
    "new": lambda T: _meta(T, 3, dtype=T.float64).new(2, 3),
    "new empty": lambda T: _meta(T, 3).new(),
    "type": lambda T: (_meta(T, 3).type(), _meta(T, 3, dtype=T.long).type()),
    "type dtype": lambda T: _meta(T, 3).type(T.float64),
    "type cpu name": lambda T: _meta(T, 3).type("torch.DoubleTensor"),
    # storage figures
    "nbytes": lambda T: (_meta(T, 3, 4).nbytes, _meta(T, 3, 4)[:, 1].nbytes,
                         _meta(T, 3, 1).expand(2, 3, 4).nbytes),
    "data_ptr": lambda T: (_meta(T, 3).data_ptr(), _meta(T, 3)[1:].data_ptr()),
    "storage": lambda T: [(s.nbytes(), len(s), s.data_ptr(), str(s.device), s.size())
                          for s in (_meta(T, 3, 4).untyped_storage(),
                                    _meta(T, 3, 4)[:1].untyped_storage(),
                                    _meta(T, 3, 4, dtype=T.float64).t().untyped_storage(),
                                    _meta(T, 0).untyped_storage())],
    "resize_": lambda T: (lambda x: (x.resize_(2, 2), x._version)[0:2])(_meta(T, 3, 4).t()),
    "resize_ same": lambda T: (lambda x: (x.resize_(3, 4), x._version))(_meta(T, 3, 4)),
    "resize_ grad": lambda T: _meta(T, 3, rg=True).resize_(2),
    # formatting (no item to read)
    "format 0-d": lambda T: f"{_meta(T, ())}",
    "format spec": lambda T: format(_meta(T, ()), ".2f"),
    "format 1-d": lambda T: f"{_meta(T, 2)}",
    # copies and pickles
    "deepcopy non-leaf": lambda T: copy.deepcopy(_meta(T, 3, rg=True) * 2),
    "deepcopy shared": lambda T: (lambda c: (c[0] is c[1], c[0]))(
        copy.deepcopy([_meta(T, 3, rg=True)] * 2)),
    "pickle": lambda T: pickle.loads(pickle.dumps(_meta(T, 3, 4, rg=True).t()[1:])),
    "pickle long": lambda T: pickle.loads(pickle.dumps(_meta(T, 2, dtype=T.long))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_meta_as_pytorch(name):
    prog = CASES[name]
    assert _run(prog, fg) == _run(prog, torch)


def _random_layout(rng, shape):
    """Strides of a dense permutation of `shape`, or of every other element of a larger one."""
    if rng.random() < 0.3:
        return torch.empty([s * 2 for s in shape])[tuple(slice(None, None, 2)
                                                         for _ in shape)].stride()
    perm = list(range(len(shape)))
    rng.shuffle(perm)
    return torch.empty([shape[i] for i in perm]).permute(
        *[perm.index(i) for i in range(len(shape))]).stride()


def test_elementwise_strides_sweep():
    """Sums of operands of random layouts and ranks (broadcasting, size-1 dims): the result
    strides PyTorch's meta kernels give."""
    rng = random.Random(0)
    for _ in range(400):
        ndim = rng.randint(2, 4)
        shape = [rng.choice([1, 2, 3]) for _ in range(ndim)]
        operands = []
        for _ in range(rng.randint(1, 3)):
            s = [d if rng.random() < 0.7 else 1 for d in shape]
            if rng.random() < 0.3:
                s = s[1:]
            operands.append((s, _random_layout(rng, s)))
        got = []
        for T in (torch, fg):
            ts = [T.empty_strided(s, st, device="meta") for s, st in operands]
            out = ts[0].exp() if len(ts) == 1 else ts[0]
            for t in ts[1:]:
                out = out + t
            got.append(tuple(out.stride()))
        assert got[0] == got[1], operands
