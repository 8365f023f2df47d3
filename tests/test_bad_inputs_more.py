"""Usual mistakes (wrong sizes, dtypes and argument types) reported as PyTorch reports them:
each case runs in torch and in fusegrad, which must raise the same exception type with the
same message, or give the same result where PyTorch accepts the call."""

import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg


def _b(L, *shape):
    return L.ones(*shape, dtype=L.bool)


CASES = {
    # a bias that is not one value per output channel
    "conv2d bias": lambda L: L.nn.functional.conv2d(L.ones(1, 2, 4, 4), L.ones(3, 2, 3, 3),
                                                    L.ones(4)),
    "conv1d 2-d bias": lambda L: L.nn.functional.conv1d(L.ones(1, 2, 4), L.ones(3, 2, 3),
                                                        L.ones(3, 1)),
    "conv3d bias": lambda L: L.nn.functional.conv3d(L.ones(1, 2, 4, 4, 4),
                                                    L.ones(3, 2, 3, 3, 3), L.ones(2)),
    "conv bias before kernel size": lambda L: L.nn.functional.conv2d(
        L.ones(1, 2, 2, 2), L.ones(3, 2, 3, 3), L.ones(4)),
    "grouped conv bias": lambda L: L.nn.functional.conv2d(
        L.ones(1, 2, 4, 4), L.ones(4, 1, 3, 3), L.ones(2), groups=2),
    "conv_transpose2d bias": lambda L: L.nn.functional.conv_transpose2d(
        L.ones(1, 2, 4, 4), L.ones(2, 3, 3, 3), L.ones(3), groups=2),
    "conv_transpose1d bias": lambda L: L.nn.functional.conv_transpose1d(
        L.ones(1, 2, 4), L.ones(2, 3, 3), L.ones(4)),
    # class weights
    "nll_loss weight": lambda L: L.nn.functional.nll_loss(
        L.zeros(3, 5), L.tensor([1, 2, 3]), weight=L.ones(4)),
    "cross_entropy weight": lambda L: L.nn.functional.cross_entropy(
        L.zeros(3, 5), L.tensor([1, 2, 3]), weight=L.ones(6)),
    "nll_loss2d weight": lambda L: L.nn.functional.nll_loss(
        L.zeros(3, 5, 2), L.tensor([[1, 2], [3, 1], [0, 0]]), weight=L.ones(4)),
    # adaptive pooling sizes
    "AdaptiveAvgPool2d 3 sizes": lambda L: L.nn.AdaptiveAvgPool2d((2, 2, 2))(L.ones(1, 3, 4, 4)),
    "adaptive_avg_pool2d 1 size": lambda L: L.nn.functional.adaptive_avg_pool2d(
        L.ones(1, 3, 4, 4), (2,)),
    "adaptive_avg_pool2d float": lambda L: L.nn.functional.adaptive_avg_pool2d(
        L.ones(1, 3, 4, 4), (2.0, 2)),
    "adaptive_avg_pool3d 2 sizes": lambda L: L.nn.functional.adaptive_avg_pool3d(
        L.ones(1, 3, 4, 4, 4), (2, 2)),
    "adaptive_avg_pool1d 2 sizes": lambda L: L.nn.functional.adaptive_avg_pool1d(
        L.ones(1, 3, 4), (2, 2)),
    "adaptive_max_pool1d float": lambda L: L.nn.functional.adaptive_max_pool1d(
        L.ones(1, 3, 4), 2.0),
    "adaptive_max_pool3d 4 sizes": lambda L: L.nn.functional.adaptive_max_pool3d(
        L.ones(1, 3, 4, 4, 4), (2, 2, 2, 2)),
    # cdist dtypes
    "cdist float/double": lambda L: L.cdist(L.ones(3, 2), L.ones(3, 2, dtype=L.float64)),
    "cdist long": lambda L: L.cdist(L.ones(3, 2, dtype=L.int64), L.ones(3, 2)),
    "cdist mm float/double": lambda L: L.cdist(L.ones(30, 2), L.ones(30, 2, dtype=L.float64)),
    # matrix products of bools
    "mm bool": lambda L: L.mm(_b(L, 2, 2), _b(L, 2, 3)),
    "matmul bool": lambda L: L.matmul(_b(L, 2, 2), _b(L, 2, 2)),
    "bmm bool": lambda L: L.bmm(_b(L, 1, 2, 2), _b(L, 1, 2, 2)),
    "dot bool": lambda L: _b(L, 2) @ _b(L, 2),
    "mv bool": lambda L: L.mv(_b(L, 2, 2), _b(L, 2)),
    "baddbmm bool": lambda L: L.baddbmm(_b(L, 1, 2, 2), _b(L, 1, 2, 2), _b(L, 1, 2, 2)),
    "inner bool": lambda L: L.inner(_b(L, 2), _b(L, 2)),
    "empty mm bool": lambda L: L.mm(_b(L, 0, 2), _b(L, 2, 2)),
    "addr bool": lambda L: L.addr(_b(L, 2, 2), L.zeros(2, dtype=L.bool), _b(L, 2)),
    "addr int alpha": lambda L: L.addr(L.ones(2, 2, dtype=L.int64), _b(L, 2), _b(L, 2),
                                       alpha=2.5),
    # dropout of integers
    "dropout long": lambda L: L.nn.functional.dropout(L.ones(3, dtype=L.int64)),
    "dropout long eval": lambda L: L.nn.functional.dropout(L.ones(3, dtype=L.int64),
                                                           training=False),
    "dropout empty long": lambda L: L.nn.functional.dropout(L.ones(0, dtype=L.int64)),
    "dropout2d long": lambda L: L.nn.functional.dropout2d(L.ones(1, 3, 3, 3, dtype=L.int64)),
    "Dropout bool": lambda L: L.nn.Dropout()(L.ones(3, dtype=L.bool)),
    "dropout nan p": lambda L: L.nn.functional.dropout(L.ones(3), p=float("nan")),
    # normalisation
    "rms_norm weight shape": lambda L: L.nn.functional.rms_norm(L.ones(2, 3), (3,),
                                                                L.ones(4)),
    "rms_norm int shape": lambda L: L.nn.functional.rms_norm(L.ones(2, 3), 3),
    "rms_norm mixed dtypes": lambda L: L.nn.functional.rms_norm(
        L.ones(2, 3), (3,), L.ones(3, dtype=L.float64)).dtype,
    "layer_norm bias dtype": lambda L: L.nn.functional.layer_norm(
        L.ones(2, 3), (3,), L.ones(3), L.ones(3, dtype=L.float64)),
    "layer_norm half, half and float": lambda L: L.nn.functional.layer_norm(
        L.ones(2, 3, dtype=L.float16), (3,), L.ones(3), L.ones(3, dtype=L.float16)),
    "layer_norm long": lambda L: L.nn.functional.layer_norm(L.ones(2, 3, dtype=L.int64), (3,)),
    "batch_norm long": lambda L: L.nn.functional.batch_norm(
        L.ones(2, 3, dtype=L.int64), L.zeros(3), L.ones(3)),
    "group_norm bias dtype": lambda L: L.nn.functional.group_norm(
        L.ones(2, 4), 2, L.ones(4), L.ones(4, dtype=L.float64)),
    # non-tensors where a tensor is wanted
    "exp of a list": lambda L: L.exp([1.0]),
    "exp of a float": lambda L: L.exp(1.0),
    "exp of a NumPy scalar": lambda L: L.exp(np.float32(1.0)),
    "sum of an array": lambda L: L.sum(np.ones(3)),
    "relu of a list": lambda L: L.nn.functional.relu([1.0]),
    "gelu of a list": lambda L: L.nn.functional.gelu([1.0]),
    "cross_entropy of a list": lambda L: L.nn.functional.cross_entropy([[1.0]], L.tensor([0])),
    "mse_loss of a list": lambda L: L.nn.functional.mse_loss([1.0], L.ones(1)),
    "softmax of a list": lambda L: L.nn.functional.softmax([1.0], dim=0),
    "linear weight list": lambda L: L.nn.functional.linear(L.ones(1), [[1.0]]),
    "linear bias list": lambda L: L.nn.functional.linear(L.ones(2), L.ones(1, 2), [1.0]),
    "cat of lists": lambda L: L.cat([[1], [2]]),
    "add list method": lambda L: L.ones(2).add([1]),
    "add array method": lambda L: L.ones(2).add(np.ones(2)),
    "add list function": lambda L: L.add(L.ones(1), [1.0]),
    "add list keyword": lambda L: L.add(L.ones(1), other=[1.0]),
    "mul tuple": lambda L: L.mul(L.ones(1), (1.0,)),
    "add number": lambda L: L.add(L.ones(2), 2),
    "mm None": lambda L: L.mm(L.ones(2, 1), None),
    "index_select list": lambda L: L.index_select(L.ones(2), 0, [0]),
    "gather list method": lambda L: L.ones(2).gather(0, [0]),
    "copy_ list": lambda L: L.ones(2).copy_([1.0, 1.0]),
    "copy_ keyword": lambda L: L.ones(2).copy_(other=L.zeros(2)),
    "expand_as list": lambda L: L.ones(2).expand_as([1, 2]),
    "sin of None": lambda L: L.sin(None),
    "getitem with a list": lambda L: L.arange(4)[[0, 2]],
    "view with a list": lambda L: L.arange(4).view([2, 2]),
    "dot list": lambda L: L.ones(2).dot([1.0, 2.0]),
    "dot keyword": lambda L: L.dot(L.ones(2), tensor=L.ones(2)),
    "one_hot list": lambda L: L.nn.functional.one_hot([0, 1], 3),
    "logsigmoid list": lambda L: L.nn.functional.logsigmoid([1.0]),
    "gumbel_softmax list": lambda L: L.nn.functional.gumbel_softmax([1.0]),
    "cross_entropy target list": lambda L: L.nn.functional.cross_entropy(L.ones(2, 3), [0, 1]),
    "l1_loss target list": lambda L: L.nn.functional.l1_loss(L.ones(1), [1.0]),
    "embedding weight list": lambda L: L.nn.functional.embedding(L.tensor([0, 1]),
                                                                 [[1.0, 2.0]]),
    "embedding indices list": lambda L: L.nn.functional.embedding([0, 1], L.ones(3, 2)),
    "transpose float dim": lambda L: L.transpose(L.ones(2, 3), 0, 1.0),
    "gather float dim": lambda L: L.gather(L.ones(3), 0.0, L.tensor([0])),
    "cat float dim": lambda L: L.cat([L.ones(2), L.ones(2)], dim=0.5),
    "roll float shifts": lambda L: L.roll(L.ones(4), 1.5),
    "full str": lambda L: L.full((2,), "a"),
    "transpose missing dims": lambda L: L.transpose(L.ones(2, 2)),
    "mm method missing": lambda L: L.ones(2, 2).mm(),
    "exp of two": lambda L: L.exp(L.ones(2), 1),
    "where list condition method": lambda L: type(_error(lambda: L.ones(2).where(
        [True, False], 1.0))).__name__,
    "linalg.inv list": lambda L: L.linalg.inv([[1.0]]),
    "linalg.det array": lambda L: L.linalg.det(np.eye(2)),
    "linalg.solve list": lambda L: L.linalg.solve(L.eye(2), [1.0]),
    "linalg.norm input keyword": lambda L: L.linalg.norm(input=L.eye(2)),
    "linalg.cross length first": lambda L: L.linalg.cross(L.ones(3), L.ones(4)),
    "linalg.cross broadcast": lambda L: L.linalg.cross(L.ones(2, 3), L.ones(3, 3)),
    "linalg.cond fro not square": lambda L: L.linalg.cond(L.ones(2, 3), p="fro"),
    "linalg.cond 1.0 long": lambda L: L.linalg.cond(L.ones(2, 2, dtype=L.int64), p=1.0),
    "grid_sample grid dtype": lambda L: L.nn.functional.grid_sample(
        L.ones(1, 1, 4, 4), L.ones(1, 2, 2, 2, dtype=L.float64), align_corners=False),
    "threshold bool": lambda L: L.nn.functional.threshold(L.ones(2, dtype=L.bool), 0.5, 0),
    "celu alpha 0": lambda L: L.nn.functional.celu(L.ones(2), alpha=0),
    "multilabel_margin_loss float target": lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(2, 3), L.ones(2, 3)),
    "softmax dtype str": lambda L: L.nn.functional.softmax(L.ones(2), 0, dtype="a"),
    "log_softmax dtype str method": lambda L: L.ones(2).log_softmax(0, dtype="a"),
    # sort's two overloads
    "masked_fill None mask": lambda L: str(_error(lambda: L.ones(2).masked_fill(
        None, 1.0))).split(" - got")[0],
    "sort dim and stable": lambda L: L.sort(L.tensor([3., 1., 2.]), 0, stable=True),
    "sort bool dim": lambda L: L.sort(L.tensor([3., 1., 2.]), True),
    "sort four positional": lambda L: L.sort(L.tensor([3., 1., 2.]), 0, True, True),
    "sort float dim": lambda L: L.sort(L.tensor([3., 1., 2.]), 0.5),
    "sort keywords": lambda L: L.sort(L.tensor([3., 1., 2.]), dim=0, descending=True,
                                      stable=True),
    "sort positional": lambda L: L.sort(L.tensor([3., 1., 2.]), 0, True),
    "sort method dim and stable": lambda L: L.tensor([3., 1., 2.]).sort(0, stable=True),
    "sort method bool": lambda L: L.tensor([3., 1., 2.]).sort(True),
    "sort method three positional": lambda L: L.tensor([3., 1., 2.]).sort(0, True, True),
    "sort method keyword": lambda L: L.tensor([3., 1., 2.]).sort(dim=True),
    "argsort stable": lambda L: L.argsort(L.tensor([3., 1., 2.]), 0, stable=True),
    "argsort stable None": lambda L: L.argsort(L.tensor([3., 1., 2.]), stable=None),
    "argsort four positional": lambda L: L.argsort(L.tensor([3., 1., 2.]), 0, True, True),
    "argsort positional": lambda L: L.argsort(L.tensor([3., 1., 2.]), 0, True),
    # removed linear-algebra functions
    "eig": lambda L: L.eig(L.eye(2)),
    "lstsq": lambda L: L.lstsq(L.eye(2), L.eye(2)),
    "solve": lambda L: L.solve(L.eye(2), L.eye(2)),
    "symeig method": lambda L: L.eye(2).symeig(),
    "matrix_rank": lambda L: L.matrix_rank(L.eye(2)),
    "potrf": lambda L: L.potrf,
    # conv argument lists, losses' weights and targets, norms' numbers
    "conv1d stride of 2": lambda L: L.nn.functional.conv1d(L.ones(1, 3, 4), L.ones(2, 3, 3),
                                                           stride=(1, 1)),
    "conv2d with a 1-d weight": lambda L: L.nn.functional.conv2d(L.ones(1, 3, 4, 4),
                                                                 L.ones(2, 3, 3)),
    "conv2d padding of 3": lambda L: L.nn.functional.conv2d(
        L.ones(1, 3, 4, 4), L.ones(2, 3, 3, 3), padding=(1, 1, 1)),
    "conv_transpose1d output_padding": lambda L: L.nn.functional.conv_transpose1d(
        L.ones(1, 3, 4), L.ones(3, 2, 3), output_padding=(1, 1)),
    "conv1d with a 2-d weight": lambda L: L.nn.functional.conv1d(L.ones(1, 3, 4),
                                                                 L.ones(2, 3, 3, 3)),
    "bce weight": lambda L: L.nn.functional.binary_cross_entropy(
        L.full((2, 3), 0.5), L.ones(2, 3), weight=L.ones(1, 2, 4)),
    "bce weight of more dims": lambda L: L.nn.functional.binary_cross_entropy(
        L.full((2, 3), 0.5), L.ones(2, 3), weight=L.ones(2, 1, 3)),
    "bce logits pos_weight": lambda L: L.nn.functional.binary_cross_entropy_with_logits(
        L.ones(2, 3), L.ones(2, 3), pos_weight=L.ones(5, 3)),
    "bce logits weight of more dims": lambda L: L.nn.functional.binary_cross_entropy_with_logits(
        L.ones(2, 3), L.ones(2, 3), weight=L.ones(2, 1, 3)),
    "cross_entropy long probabilities": lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 3), L.ones(2, 3, dtype=L.int64)),
    "cross_entropy probabilities weight": lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 3), L.ones(2, 3), weight=L.ones(4)),
    "batch_norm momentum None": lambda L: L.nn.functional.batch_norm(
        L.ones(2, 3), L.zeros(3), L.ones(3), momentum=None),
    "batch_norm eps str": lambda L: L.nn.functional.batch_norm(
        L.ones(2, 3), L.zeros(3), L.ones(3), eps="a"),
    "layer_norm eps None": lambda L: L.nn.functional.layer_norm(L.ones(2, 3), (3,), eps=None),
    "group_norm eps None": lambda L: L.nn.functional.group_norm(L.ones(2, 4), 2, eps=None),
    "repeat negative": lambda L: L.ones(2, 3).repeat(1, -1),
    "repeat negative of empty": lambda L: L.ones(0, 3).repeat(-1, 1),
    "invert float": lambda L: ~L.ones(2),
    "invert int": lambda L: ~L.tensor([1, 2]),
    "quantile 2.0": lambda L: L.ones(2, 3).quantile(2.0),
    "masked_scatter short source": lambda L: L.ones(2, 3).masked_scatter(
        L.ones(2, 3, dtype=L.bool), L.ones(2)),
    "zeros dtype str": lambda L: L.zeros(2, dtype="float"),
    "add alpha str": lambda L: L.ones(2).add(L.ones(2), alpha="a"),
    # index_add_ sources
    "index_add_ source shape": lambda L: L.zeros(3, 2).index_add_(0, L.tensor([0, 1]),
                                                                  L.ones(2, 3)),
    "index_add_ indices": lambda L: L.zeros(3, 2).index_add_(0, L.tensor([0, 1]),
                                                             L.ones(3, 2)),
    # device strings
    "device cuda:x": lambda L: L.device("cuda:x"),
    "device cuda:": lambda L: L.device("cuda:"),
    "device cpu:0:1": lambda L: L.device("cpu:0:1"),
    "device leading zero": lambda L: L.device("cuda:01"),
    "device negative index": lambda L: L.device("cuda", -1),
    "device index twice": lambda L: L.device("cuda:1", 1),
    "device index None": lambda L: L.device("cuda:0", None),
    "device empty": lambda L: L.device(""),
    "device space": lambda L: L.device(" cpu"),
    "device float": lambda L: L.device(1.5),
    "device str index": lambda L: L.device("cpu", "a"),
    "device bare index": lambda L: L.device(0),
    "device unknown type": lambda L: L.device("cpux"),
    "device huge index": lambda L: L.device("cuda:99999999999"),
    "device xla": lambda L: str(L.device("xla:0")),
    "ones on cuda:x": lambda L: L.ones(2, device="cuda:x"),
}


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - its type is compared
        return e
    return None


def _outcome(fn, lib):
    try:
        value = fn(lib)
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return type(e).__name__, str(e).replace("module 'fusegrad'", "module 'torch'")
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return "value", str(value.dtype), value.detach().numpy().tolist()
    if isinstance(value, tuple):
        return "value", [v.detach().numpy().tolist() for v in value]
    return "value", str(value)


@pytest.mark.parametrize("name", list(CASES))
def test_as_torch(name):
    fn = CASES[name]
    expected = _outcome(fn, torch)
    got = _outcome(fn, fg)
    if expected[0] == "value" and "dropout" in name.lower() and "long" not in name:
        return  # random values: only the error cases are compared
    assert got == expected


def test_qr_warns_as_torch():
    """`torch.qr` gives PyTorch's deprecation warning (its text, without the C++ location)."""
    torch.set_warn_always(True)  # (its warning is once per process otherwise)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.qr(torch.eye(2))
    finally:
        torch.set_warn_always(False)
    expected = str(caught[0].message).split(" (Triggered internally")[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fg.set_warn_always(True)
        try:
            fg.qr(fg.eye(2))
        finally:
            fg.set_warn_always(False)
    assert [str(w.message) for w in caught] == [expected]


def test_sort_results_match():
    """The overloads that PyTorch accepts give its values and indices."""
    data = [3., 1., 2., 1.]
    for args, kwargs in (((), {}), ((0,), {}), ((0, True), {}), ((), {"stable": True}),
                         ((), {"stable": True, "descending": True}),
                         ((), {"dim": 0, "stable": None})):
        a = torch.sort(torch.tensor(data), *args, **kwargs)
        b = fg.sort(fg.tensor(data), *args, **kwargs)
        assert a.values.tolist() == b.values.tolist() and a.indices.tolist() == \
            b.indices.tolist()
        a = torch.tensor(data).argsort(*args, **kwargs) if "dim" not in kwargs else None
        if a is not None and kwargs.get("stable", False) is not None:
            assert a.tolist() == fg.tensor(data).argsort(*args, **kwargs).tolist()
