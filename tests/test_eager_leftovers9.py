"""Eager fidelity against torch 2.13: `bernoulli(input, p)`'s registry op (values from the
same stream, a NotImplemented node whose backward raises), rand/randn and their `_like`
forms refusing integer and bool dtypes, the class-weight and target dtype errors of nll_loss
(cross_entropy) and multi_margin_loss and nll_loss's refusal of inputs that are not
floating, and multi_margin_loss's backward traced by AOT autograd (aot_eager: eager's values
and gradients, no fallback)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad._dispatch import call
from fusegrad.ops import random as fg_random

sys.path.insert(0, str(Path(__file__).parent))
from program_support import compiler_fallbacks  # noqa: E402

LIBS = (torch, fusegrad)


def _outcome(lib, f):
    try:
        r = f(lib)
    except Exception as e:  # noqa: BLE001 (the error is the outcome compared)
        return ("error", type(e).__name__, str(e))
    return (str(r.dtype), tuple(r.shape), str(r.device), r.requires_grad)


def _same(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [_outcome(lib, f) for lib in LIBS]
    assert got[0] == got[1], got


# ---------------------------------------------------------------- bernoulli(input, p)


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("shape,order", [((3, 4), None), ((5,), None), ((), None),
                                         ((3, 4), (1, 0)), ((0, 2), None)])
def test_bernoulli_p_op_matches_torch(p, shape, order):
    """The op draws torch's bits for a seed (in the input's memory order), leaves the stream
    where torch leaves it, and its result requires grad with a NotImplemented node."""
    base = np.random.default_rng(0).random(shape).astype(np.float32)
    if order is None:
        tx, fx = torch.tensor(base), fusegrad.tensor(base)
    else:  # a transposed input: the result is row-major all the same
        tx = torch.tensor(base.transpose(order).copy()).permute(order)
        fx = fusegrad.tensor(base.transpose(order).copy()).permute(order)
    tx, fx = tx.requires_grad_(), fx.requires_grad_()
    torch.manual_seed(7)
    fusegrad.manual_seed(7)
    want = torch.bernoulli(tx, p)
    got = call(fg_random.bernoulli_p, fx, p, None)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    assert got.stride() == want.stride()
    assert (got.requires_grad, got.grad_fn.name()) == (want.requires_grad, want.grad_fn.name())
    assert torch.rand(2).tolist() == fusegrad.rand(2).tolist()


def test_bernoulli_p_backward_raises_as_torch():
    errors = []
    for lib, fn in ((torch, lambda x: torch.bernoulli(x, 0.3)),
                    (fusegrad, lambda x: call(fg_random.bernoulli_p, x, 0.3, None))):
        x = lib.rand(3, requires_grad=True)
        y = fn(x)
        with pytest.raises(RuntimeError) as e:
            y.sum().backward()
        errors.append(str(e.value))
    assert errors[0] == errors[1] == "derivative for aten::bernoulli is not implemented"


@pytest.mark.parametrize("dtype", ["int64", "bool", "complex64", "float64"])
def test_bernoulli_p_op_dtypes_as_torch(dtype):
    """Integer and bool inputs draw 0/1 in their dtype; complex ones are refused."""
    def run(lib):
        lib.manual_seed(3)
        x = lib.zeros(6, dtype=getattr(lib, dtype))
        r = torch.bernoulli(x, 0.4) if lib is torch else call(fg_random.bernoulli_p, x, 0.4,
                                                                None)
        return r

    got = [_outcome(lib, run) for lib in LIBS]
    assert got[0] == got[1], got
    if got[0][0] != "error":
        assert run(torch).tolist() == run(fusegrad).tolist()


# ---------------------------------------------------------------- rand/randn dtypes

_DTYPES = ["int64", "int32", "int16", "int8", "uint8", "bool", "float16", "bfloat16",
           "complex64"]
_RANDOM = {
    "rand": lambda T, dt, **kw: T.rand(3, 2, dtype=dt, **kw),
    "randn": lambda T, dt, **kw: T.randn(3, 2, dtype=dt, **kw),
    "rand_like": lambda T, dt, **kw: T.rand_like(T.zeros(3, 2), dtype=dt, **kw),
    "randn_like": lambda T, dt, **kw: T.randn_like(T.zeros(3, 2), dtype=dt, **kw),
    "rand_like of the input's dtype": lambda T, dt, **kw: T.rand_like(T.zeros(3, dtype=dt),
                                                                      **kw),
    "randn_like of the input's dtype": lambda T, dt, **kw: T.randn_like(T.zeros(3, dtype=dt),
                                                                        **kw),
}


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("name", sorted(_RANDOM))
def test_random_factories_refuse_integer_dtypes(name, dtype):
    _same(lambda T: _RANDOM[name](T, getattr(T, dtype)))


@pytest.mark.parametrize("extra", ["requires_grad", "meta", "out", "empty"])
@pytest.mark.parametrize("name", ["rand", "randn"])
def test_random_factories_integer_dtype_error_order(name, extra):
    """The kernel's refusal comes before requires_grad's; on the meta device randn refuses
    in its own words and rand makes the tensor; out= gives its dtype."""
    fn = getattr
    if extra == "out":
        _same(lambda T: fn(T, name)(3, out=T.zeros(3, dtype=T.int64)))
    elif extra == "empty":
        _same(lambda T: fn(T, name)(0, dtype=T.int32))
    else:
        kw = {"requires_grad": True} if extra == "requires_grad" else {"device": "meta"}
        _same(lambda T: fn(T, name)(3, dtype=T.int64, **kw))


def test_refused_random_dtype_draws_nothing():
    for lib in LIBS:
        lib.manual_seed(0)
        with pytest.raises(NotImplementedError):
            lib.randn(4, dtype=lib.int64)
    torch_next, fg_next = torch.rand(3).tolist(), fusegrad.rand(3).tolist()
    assert torch_next == fg_next


# ---------------------------------------------------------------- loss dtype errors

_WEIGHTS = ["int64", "int32", "bool", "float64", "float16", "float32"]


def _loss_call(T, kind, weight_dtype, input_dtype="float32", empty=False):
    gen = np.random.default_rng(1)
    n = 0 if empty else 4
    x = T.tensor(gen.standard_normal((n, 3)), dtype=getattr(T, input_dtype))
    t = T.tensor([0, 1, 2, 1][:n], dtype=T.int64)
    w = None if weight_dtype is None else T.tensor([1, 2, 1], dtype=getattr(T, weight_dtype))
    F = T.nn.functional
    if kind == "cross_entropy":
        return F.cross_entropy(x, t, weight=w)
    if kind == "cross_entropy none":
        return F.cross_entropy(x, t, weight=w, reduction="none")
    if kind == "cross_entropy smoothing":
        return F.cross_entropy(x, t, weight=w, label_smoothing=0.1)
    if kind == "cross_entropy probabilities":
        return F.cross_entropy(x, T.softmax(x * 2, 1), weight=w)
    if kind == "nll_loss":
        return F.nll_loss(x, t, weight=w)
    if kind == "nll_loss single":
        return F.nll_loss(x[0] if n else x.reshape(3), t[0] if n else T.tensor(0), weight=w)
    if kind == "nll_loss 2d":
        return F.nll_loss(x.reshape(n, 3, 1, 1).expand(n, 3, 2, 2), t.reshape(n, 1, 1)
                          .expand(n, 2, 2), weight=w)
    if kind == "nll_loss 3d":
        return F.nll_loss(x.reshape(n, 3, 1).expand(n, 3, 2), t.reshape(n, 1).expand(n, 2),
                          weight=w)
    return F.multi_margin_loss(x, t, weight=w)


_KINDS = ["cross_entropy", "cross_entropy none", "cross_entropy smoothing",
          "cross_entropy probabilities", "nll_loss", "nll_loss single", "nll_loss 2d",
          "nll_loss 3d", "multi_margin_loss"]


@pytest.mark.parametrize("weight", _WEIGHTS)
@pytest.mark.parametrize("kind", _KINDS)
def test_loss_weight_dtype(kind, weight):
    _same(lambda T: _loss_call(T, kind, weight))


@pytest.mark.parametrize("kind", ["nll_loss", "nll_loss 2d", "multi_margin_loss"])
def test_loss_weight_dtype_of_an_empty_batch(kind):
    """nll_loss checks the weight's dtype for an empty batch too; multi_margin_loss runs no
    kernel then."""
    if kind == "nll_loss 2d":
        _same(lambda T: T.nn.functional.nll_loss(T.zeros(0, 3, 2, 2), T.zeros(0, 2, 2).long(),
                                                 weight=T.tensor([1, 2, 3])))
    else:
        _same(lambda T: _loss_call(T, kind, "int64", empty=True))


@pytest.mark.parametrize("input_dtype", ["float64", "float16", "bfloat16", "int32", "bool",
                                         "complex64"])
@pytest.mark.parametrize("weight", [None, "float32", "int64"])
@pytest.mark.parametrize("kind", ["nll_loss", "nll_loss 2d", "multi_margin_loss"])
def test_loss_input_dtype_and_weight(kind, weight, input_dtype):
    _same(lambda T: _loss_call(T, kind, weight, input_dtype))


_ORDER = {
    "nll weight size first": lambda T: T.nn.functional.nll_loss(
        T.zeros(4, 3).int(), T.zeros(4).long(), weight=T.tensor([1, 2, 3, 4])),
    "nll target dtype first": lambda T: T.nn.functional.nll_loss(
        T.zeros(4, 3), T.zeros(4).int(), weight=T.tensor([1, 2, 3])),
    "nll 2d size mismatch first": lambda T: T.nn.functional.nll_loss(
        T.zeros(2, 3, 4, 5), T.zeros(2, 2, 5).long(), weight=T.tensor([1, 2, 3])),
    "nll 2d weight size first": lambda T: T.nn.functional.nll_loss(
        T.zeros(2, 3, 4, 5).int(), T.zeros(2, 4, 5).long(), weight=T.tensor([1, 2, 3, 4])),
    "nll 2d target dtype first": lambda T: T.nn.functional.nll_loss(
        T.zeros(2, 3, 4, 5).int(), T.zeros(2, 4, 5).int()),
    "nll weight dtype before bounds": lambda T: T.nn.functional.nll_loss(
        T.zeros(4, 3), T.tensor([0, 1, 2, 5]), weight=T.tensor([1, 2, 3])),
    "nll int input, no weight": lambda T: T.nn.functional.nll_loss(
        T.zeros(4, 3).int(), T.zeros(4).long()),
    "nll int empty input": lambda T: T.nn.functional.nll_loss(
        T.zeros(0, 3).int(), T.zeros(0).long()),
    "mm int target": lambda T: T.nn.functional.multi_margin_loss(
        T.zeros(4, 3), T.zeros(4).int()),
    "mm float target": lambda T: T.nn.functional.multi_margin_loss(
        T.zeros(4, 3), T.zeros(4).double()),
    "mm int target before weight": lambda T: T.nn.functional.multi_margin_loss(
        T.zeros(4, 3), T.zeros(4).int(), weight=T.tensor([1, 2, 3])),
    "mm weight size first": lambda T: T.nn.functional.multi_margin_loss(
        T.zeros(4, 3), T.zeros(4).int(), weight=T.tensor([1, 2, 3, 4])),
    "mm half input first": lambda T: T.nn.functional.multi_margin_loss(
        T.zeros(4, 3).half(), T.zeros(4).int()),
    "mm weight dtype before bounds": lambda T: T.nn.functional.multi_margin_loss(
        T.zeros(4, 3), T.tensor([0, 1, 2, 5]), weight=T.tensor([1, 2, 3])),
    "mm int target of an empty batch": lambda T: T.nn.functional.multi_margin_loss(
        T.zeros(0, 3), T.zeros(0).int()),
    "mm p first": lambda T: T.nn.functional.multi_margin_loss(
        T.zeros(4, 3), T.zeros(4).int(), p=3),
}


@pytest.mark.parametrize("name", sorted(_ORDER))
def test_loss_error_order(name):
    _same(_ORDER[name])


@pytest.mark.parametrize("kind", ["nll_loss", "cross_entropy", "multi_margin_loss"])
def test_matching_weight_still_computes(kind):
    """A float64 input with float64 weights: torch's values and gradients."""
    outs = []
    for T in LIBS:
        gen = np.random.default_rng(5)
        x = T.tensor(gen.standard_normal((5, 4))).requires_grad_()
        t = T.tensor([0, 3, 1, 2, 3])
        w = T.tensor([0.5, 1.0, 2.0, 1.5], dtype=T.float64)
        y = getattr(T.nn.functional, kind)(x, t, weight=w)
        y.backward()
        outs.append((y.item(), x.grad.numpy().copy()))
    assert outs[0][0] == pytest.approx(outs[1][0], rel=1e-12)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------- multi_margin_loss, AOT


@pytest.mark.parametrize("kw", [{}, {"p": 2, "margin": 0.5, "reduction": "none"},
                                {"weight": [1.0, 2.0, 0.5, 1.0, 3.0, 1.0],
                                 "reduction": "sum"}],
                         ids=["default", "p2-none", "weight-sum"])
def test_multi_margin_loss_backward_under_aot_eager(kw):
    """A graph holding multi_margin_loss compiles under aot_eager (its backward traced) and
    gives eager's values and gradients, as torch's does."""
    x0 = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)

    def f(x):
        opts = dict(kw)
        if "weight" in opts:
            opts["weight"] = fusegrad.tensor(opts["weight"])
        return (fusegrad.nn.functional.multi_margin_loss(
            x, fusegrad.tensor([0, 2, 5, 1]), **opts) * 3).sum()

    xe = fusegrad.tensor(x0).requires_grad_()
    ye = f(xe)
    ye.backward()
    fusegrad._dynamo.reset()
    xc = fusegrad.tensor(x0).requires_grad_()
    with compiler_fallbacks() as fallbacks:
        yc = fusegrad.compile(f, backend="aot_eager")(xc)
        yc.backward()
    assert fallbacks == []
    assert yc.item() == ye.item()
    np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())
    # and torch's gradient, the oracle for both
    tx = torch.tensor(x0).requires_grad_()
    topts = dict(kw)
    if "weight" in topts:
        topts["weight"] = torch.tensor(topts["weight"])
    (torch.nn.functional.multi_margin_loss(tx, torch.tensor([0, 2, 5, 1]), **topts) * 3
     ).sum().backward()
    np.testing.assert_allclose(xc.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_multi_margin_loss_backward_on_meta_still_refused():
    """On the meta device, torch has no kernel for the backward; neither has fusegrad."""
    errors = []
    for T in LIBS:
        x = T.zeros(4, 5, device="meta", requires_grad=True)
        y = T.nn.functional.multi_margin_loss(x, T.zeros(4, dtype=T.long, device="meta"))
        with pytest.raises(NotImplementedError) as e:
            y.backward()
        errors.append(str(e.value).split(":")[0])
    assert errors[0] == errors[1]


# ---------------------------------------------------------------- parser messages

_X = [[0.0, 1.0, 2.0], [3.0, 0.0, 5.0]]
_PARSER = {
    "argmax tuple dim": lambda T: T.argmax(T.tensor(_X), dim=(0, 1)),
    "argmin tuple dim": lambda T: T.argmin(T.tensor(_X), dim=(0, 1)),
    "argmax positional tuple": lambda T: T.argmax(T.tensor(_X), (0, 1)),
    "argmax method tuple": lambda T: T.tensor(_X).argmax(dim=(0,)),
    "argmin method positional tuple": lambda T: T.tensor(_X).argmin((0, 1)),
    "argmax list dim": lambda T: T.argmax(T.tensor(_X), dim=[0]),
    "argmax bool dim": lambda T: T.argmax(T.tensor(_X), True),
    "argmax tuple keepdim": lambda T: T.argmax(T.tensor(_X), 0, (1,)),
    "argmax keyword tuple keepdim": lambda T: T.argmax(T.tensor(_X), 0, keepdim=(1,)),
    "argmax int keepdim": lambda T: T.argmax(T.tensor(_X), 0, keepdim=1),
    "argmax too many": lambda T: T.argmax(T.tensor(_X), 0, True, 1),
    "argmax method too many": lambda T: T.tensor(_X).argmax(0, 1, 2),
    "argmax dim twice": lambda T: T.tensor(_X).argmax(0, dim=1),
    "argmax method dims": lambda T: T.tensor(_X).argmax(1, True),
    "argmin keepdim": lambda T: T.argmin(T.tensor(_X), -1, keepdim=True),
    "argmax none keepdim": lambda T: T.argmax(T.tensor(_X), None, True),
    "prod tuple dim": lambda T: T.prod(T.tensor(_X), dim=(0, 1)),
    "prod positional tuple": lambda T: T.prod(T.tensor(_X), (0, 1)),
    "prod method tuple": lambda T: T.tensor(_X).prod((0, 1)),
    "prod method keyword tuple": lambda T: T.tensor(_X).prod(dim=(0, 1)),
    "prod tuple with dtype": lambda T: T.prod(T.tensor(_X), (0,), dtype=T.float64),
    "prod method tuple with dtype": lambda T: T.tensor(_X).prod(dtype=T.float64, dim=(0,)),
    "prod float dim": lambda T: T.prod(T.tensor(_X), dim=0.5),
    "prod list dim": lambda T: T.prod(T.tensor(_X), dim=[0]),
    "prod positional none": lambda T: T.prod(T.tensor(_X), None),
    "prod method none": lambda T: T.tensor(_X).prod(None),
    "prod none then keepdim": lambda T: T.prod(T.tensor(_X), None, True),
    "prod tuple keepdim": lambda T: T.prod(T.tensor(_X), 0, (1,)),
    "prod int keepdim": lambda T: T.prod(T.tensor(_X), 0, keepdim=1),
    "prod method positional int keepdim": lambda T: T.tensor(_X).prod(0, 1),
    "prod positional none keepdim": lambda T: T.prod(T.tensor(_X), 0, None),
    "prod keepdim alone": lambda T: T.prod(T.tensor(_X), keepdim=True),
    "prod keepdim and dtype": lambda T: T.prod(T.tensor(_X), keepdim=True, dtype=T.float64),
    "prod too many": lambda T: T.prod(T.tensor(_X), 0, True, 1),
    "prod method too many": lambda T: T.tensor(_X).prod(0, True, 1),
    "prod dim twice": lambda T: T.prod(T.tensor(_X), 0, dim=1),
    "prod dims": lambda T: T.prod(T.tensor(_X), 1, True, dtype=T.float64),
    "prod method keepdim": lambda T: T.tensor(_X).prod(1, keepdim=True),
    "count_nonzero keepdim": lambda T: T.count_nonzero(T.tensor(_X), keepdim=True),
    "count_nonzero dim and keepdim": lambda T: T.count_nonzero(T.tensor(_X), 0,
                                                               keepdim=True),
    "count_nonzero method keepdim": lambda T: T.tensor(_X).count_nonzero(dim=0,
                                                                         keepdim=True),
    "count_nonzero tuple and keepdim": lambda T: T.count_nonzero(T.tensor(_X), dim=(0, 1),
                                                                 keepdim=False),
    "count_nonzero method keepdim alone": lambda T: T.tensor(_X).count_nonzero(keepdim=True),
    "count_nonzero none and keepdim": lambda T: T.count_nonzero(T.tensor(_X), None,
                                                                keepdim=True),
    "count_nonzero float dim": lambda T: T.count_nonzero(T.tensor(_X), dim=0.5),
    "count_nonzero positional float": lambda T: T.count_nonzero(T.tensor(_X), 0.5),
    "count_nonzero method float": lambda T: T.tensor(_X).count_nonzero(0.5),
    "count_nonzero method keyword float": lambda T: T.tensor(_X).count_nonzero(dim=0.5),
    "count_nonzero bool dim": lambda T: T.count_nonzero(T.tensor(_X), True),
    "count_nonzero method keyword bool": lambda T: T.tensor(_X).count_nonzero(dim=True),
    "count_nonzero spread dims": lambda T: T.tensor(_X).count_nonzero(0, 1),
    "count_nonzero tuple": lambda T: T.tensor(_X).count_nonzero((0, 1)),
    "count_nonzero list": lambda T: T.count_nonzero(T.tensor(_X), dim=[0, 1]),
    "count_nonzero dim": lambda T: T.count_nonzero(T.tensor(_X), 1),
    "count_nonzero all": lambda T: T.tensor(_X).count_nonzero(),
}


def _value(lib, f):
    try:
        r = f(lib)
    except Exception as e:  # noqa: BLE001 (the error is the outcome compared)
        return ("error", type(e).__name__, str(e))
    return (str(r.dtype), r.tolist())


@pytest.mark.parametrize("name", sorted(_PARSER))
def test_reduction_parser_messages(name):
    got = [_value(lib, _PARSER[name]) for lib in LIBS]
    assert got[0] == got[1], got
