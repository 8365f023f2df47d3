"""Eager leftovers checked against torch run in the test: random ops given a generator that
is no Generator, hardsigmoid's second derivative, backward inside an autocast region, rrelu's
dtypes, `return_types` as struct sequences, and the strides of pointwise results over
operands with size-1 dims."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import fusegrad as fg


def _error(fn):
    """(type name, message) of the error `fn()` raises, or None."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return type(e).__name__, str(e)
    return None


def _same_error(program):
    """`program(lib, p, x)` raises the same error (type and text) in torch and here."""
    theirs = _error(lambda: program(torch, torch.tensor([0.2, 0.3, 0.5]), torch.zeros(3)))
    ours = _error(lambda: program(fg, fg.tensor([0.2, 0.3, 0.5]), fg.zeros(3)))
    assert theirs is not None
    assert ours == theirs


# ---------------------------------------------------------------- generators

BAD_GENERATOR = {
    "randn": lambda T, p, x: T.randn(2, 3, generator=5),
    "rand_str": lambda T, p, x: T.rand(2, generator="x"),
    "rand_tuple": lambda T, p, x: T.rand((2, 3), generator=1),
    "rand_list_dtype": lambda T, p, x: T.rand([2, 3], generator=T.float32),
    "randn_size": lambda T, p, x: T.randn(size=(2, 3), generator=5),
    "randn_tensor_gen": lambda T, p, x: T.randn(2, generator=x),
    "randint": lambda T, p, x: T.randint(5, (2,), generator=1),
    "randint_low": lambda T, p, x: T.randint(1, 5, (2,), generator=1),
    "randint_dtype": lambda T, p, x: T.randint(5, (2,), generator=1, dtype=T.int32),
    "randperm": lambda T, p, x: T.randperm(4, generator=1),
    "normal_sized": lambda T, p, x: T.normal(0., 1., (2,), generator=1),
    "normal_tensors": lambda T, p, x: T.normal(p, p, generator=1),
    "normal_float_tensor": lambda T, p, x: T.normal(0., p, generator=1),
    "normal_mean": lambda T, p, x: T.normal(p, generator=1),
    "rand_like": lambda T, p, x: T.rand_like(p, generator=1),
    "randn_like": lambda T, p, x: T.randn_like(p, generator=1),
    "randint_like": lambda T, p, x: T.randint_like(p, 5, generator=1),
    "randint_like_low": lambda T, p, x: T.randint_like(p, 1, 5, generator=1),
    "uniform_": lambda T, p, x: x.uniform_(generator=1),
    "uniform_bad_range": lambda T, p, x: x.uniform_(5, 1, generator="s"),
    "normal_": lambda T, p, x: x.normal_(generator=1),
    "log_normal_": lambda T, p, x: x.log_normal_(generator=1),
    "cauchy_": lambda T, p, x: x.cauchy_(generator=1),
    "exponential_": lambda T, p, x: x.exponential_(generator=1),
    "geometric_": lambda T, p, x: x.geometric_(0.5, generator=1),
    "random_": lambda T, p, x: x.random_(generator=1),
    "random_to": lambda T, p, x: x.random_(3, generator=1),
    "random_to_kw": lambda T, p, x: x.random_(to=3, generator=1),
    "random_from_to": lambda T, p, x: x.random_(1, 3, generator=1),
    "bernoulli_": lambda T, p, x: x.bernoulli_(generator=1),
    "bernoulli_p": lambda T, p, x: x.bernoulli_(0.3, generator=1),
    "bernoulli_tensor_p": lambda T, p, x: x.bernoulli_(p, generator=1),
    "bernoulli": lambda T, p, x: T.bernoulli(p, generator=1),
    "bernoulli_float": lambda T, p, x: T.bernoulli(p, 0.5, generator=1),
    "bernoulli_out": lambda T, p, x: T.bernoulli(p, generator=1, out=x),
    "multinomial": lambda T, p, x: T.multinomial(p, 2, generator=1),
    "multinomial_method": lambda T, p, x: p.multinomial(2, True, generator=1),
    "poisson": lambda T, p, x: T.poisson(p, generator=1),
    "binomial": lambda T, p, x: T.binomial(p, p, generator=1),
    "init_uniform_": lambda T, p, x: T.nn.init.uniform_(x, generator=1),
    "init_normal_": lambda T, p, x: T.nn.init.normal_(x, generator=1),
    "init_kaiming": lambda T, p, x: T.nn.init.kaiming_uniform_(x[None], generator=1),
    "random_split": lambda T, p, x: T.utils.data.random_split(range(4), [2, 2], generator=1),
    "sampler": lambda T, p, x: list(T.utils.data.RandomSampler(range(5), generator=1)),
    "sampler_replacement": lambda T, p, x: list(T.utils.data.RandomSampler(
        range(5), replacement=True, generator=1)),
    "subset_sampler": lambda T, p, x: list(T.utils.data.SubsetRandomSampler(
        range(5), generator=1)),
    "data_loader": lambda T, p, x: list(T.utils.data.DataLoader(range(5), shuffle=True,
                                                                generator=1)),
}


@pytest.mark.parametrize("name", sorted(BAD_GENERATOR))
def test_a_generator_that_is_no_generator_is_torchs_type_error(name):
    _same_error(BAD_GENERATOR[name])


def test_a_refused_generator_draws_nothing_and_real_ones_still_draw():
    for lib in (torch, fg):
        lib.manual_seed(3)
        before = lib.get_rng_state()
        with pytest.raises(TypeError):
            lib.zeros(3).uniform_(generator=1)
        assert bool((lib.get_rng_state() == before).all())
    got = {}
    for lib in (torch, fg):
        g = lib.Generator().manual_seed(7)
        got[lib.__name__] = [lib.rand(3, generator=g).numpy(),
                             lib.randint_like(lib.zeros(4), 10, generator=g).numpy(),
                             lib.zeros(3).normal_(generator=g).numpy(),
                             lib.randn_like(lib.zeros(2), generator=None).shape]
    for a, b in zip(got["torch"][:3], got["fusegrad"][:3]):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- hardsigmoid


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_hardsigmoid_second_derivative_is_not_implemented_as_in_torch(dtype):
    values = np.array([-4.0, -1.0, 0.5, 2.0, 4.0])
    seen = []
    for lib in (torch, fg):
        x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
        (g,) = lib.autograd.grad(lib.nn.functional.hardsigmoid(x).sum(), x, create_graph=True)
        seen.append((type(g.grad_fn).__name__, g.requires_grad, g.detach().numpy(),
                     _error(lambda g=g: g.sum().backward()),
                     _error(lambda g=g, x=x, lib=lib: lib.autograd.grad(g.sum(), x))))
    (tn, tr, tv, te, tge), (fn_, fr, fv, fe, fge) = seen
    assert (fn_, fr, fe, fge) == (tn, tr, te, tge)
    assert te is not None
    np.testing.assert_array_equal(fv, tv)


# ---------------------------------------------------------------- backward under autocast


def _block(lib):
    """A small transformer block with a classification head, seeded alike in both."""
    lib.manual_seed(0)
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(16)
            self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
            self.ln2 = nn.LayerNorm(16)
            self.fc1 = nn.Linear(16, 32)
            self.fc2 = nn.Linear(32, 16)
            self.head = nn.Linear(16, 5)

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            x = x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))
            return self.head(x)

    return Block()


def _block_grads(lib, inside: bool, dtype: str) -> dict:
    model = _block(lib)
    x = lib.tensor(np.random.default_rng(0).standard_normal((2, 4, 16)).astype(np.float32))
    target = lib.tensor([1, 2, 3, 4, 0, 1, 2, 3])
    with lib.autocast("cpu", dtype=getattr(lib, dtype)):
        logits = model(x)
        loss = lib.nn.functional.cross_entropy(logits.reshape(-1, 5), target) + \
            logits.float().softmax(-1).pow(2).sum()
    if inside:
        with lib.autocast("cpu", dtype=getattr(lib, dtype)):
            loss.backward()
    else:
        loss.backward()
    return {n: p.grad.float().numpy().copy() for n, p in model.named_parameters()}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_backward_inside_autocast_is_the_backward_outside_as_in_torch(dtype):
    for lib in (torch, fg):
        outside, inside = _block_grads(lib, False, dtype), _block_grads(lib, True, dtype)
        for name in outside:
            np.testing.assert_array_equal(inside[name], outside[name], err_msg=name)


def test_backward_inside_autocast_still_autocasts_matrix_products_as_torch():
    # PyTorch's backward formulas run under the caller's autocast: mm's (its gradient is
    # mm) is cast to the lower dtype there, so that gradient differs from the one outside.
    diffs = []
    for lib in (torch, fg):
        lib.manual_seed(0)
        x, w = lib.randn(4, 8), lib.randn(8, 5, requires_grad=True)
        grads = []
        for inside in (False, True):
            w.grad = None
            loss = (lib.mm(x, w) * lib.mm(x, w)).sum()
            if inside:
                with lib.autocast("cpu", dtype=lib.bfloat16):
                    loss.backward()
            else:
                loss.backward()
            grads.append(w.grad.numpy().copy())
        diffs.append(grads[1] - grads[0])
    assert np.abs(diffs[0]).max() > 0
    # (the bf16 products sum in another order here: a few float32 ulps of the gradient)
    np.testing.assert_allclose(diffs[1], diffs[0], rtol=0, atol=1e-4)


# ---------------------------------------------------------------- rrelu


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int64", "bool",
                                   "complex64"])
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("inplace", [False, True])
def test_rrelu_dtypes_as_torch(dtype, training, inplace):
    def program(lib):
        x = lib.tensor([-1.0, 2.0]).to(getattr(lib, dtype))
        out = lib.nn.functional.rrelu(x, training=training, inplace=inplace)
        return out.dtype, tuple(out.shape)

    theirs = _error(lambda: program(torch))
    assert _error(lambda: program(fg)) == theirs
    if theirs is None:
        assert str(program(fg)[0]).split(".")[-1] == str(program(torch)[0]).split(".")[-1]


def test_rrelu_refused_half_draws_nothing():
    for lib in (torch, fg):
        before = lib.get_rng_state()
        with pytest.raises(NotImplementedError):
            lib.nn.RReLU()(lib.tensor([-1.0, 2.0], dtype=lib.float16))
        assert bool((lib.get_rng_state() == before).all())


# ---------------------------------------------------------------- return_types


def _max(lib):
    return lib.max(lib.tensor([[1.0, 5.0], [3.0, 2.0]]), 0)


def test_return_types_are_struct_sequences_as_torchs():
    theirs, ours = _max(torch), _max(fg)
    T, F = type(theirs), type(ours)

    def public(names):
        return sorted(n for n in names if not n.startswith("__"))

    assert public(dir(ours)) == public(dir(theirs))
    for attr in ("n_fields", "n_sequence_fields", "n_unnamed_fields", "__match_args__"):
        assert getattr(F, attr) == getattr(T, attr)
    for attr in ("_fields", "_asdict", "_replace", "_make", "foo"):
        assert hasattr(ours, attr) == hasattr(theirs, attr)
        assert _error(lambda a=attr: getattr(ours, a)) == \
            _error(lambda a=attr: getattr(theirs, a))
    # fields by name and by index, unpacking, slicing, equality, repr
    values, indices = ours
    assert values is ours.values is ours[0] and indices is ours[-1]
    assert isinstance(ours[0:1], tuple) and type(ours[0:1]) is tuple
    assert ours == (ours[0], ours[1]) and len(ours) == len(theirs) == 2
    assert repr(ours) == repr(theirs)
    # read-only fields, no other attributes
    for lib_result in (ours, theirs):
        assert _error(lambda r=lib_result: setattr(r, "values", 1)) == \
            ("AttributeError", "readonly attribute")
    assert _error(lambda: setattr(ours, "foo", 1)) == _error(lambda: setattr(theirs, "foo", 1))
    # the constructor: one sequence (a dict may follow), PyTorch's errors otherwise
    for args, kwargs in [(([1, 2],), {}), (([1, 2], {}), {}), ((), {"sequence": [1, 2]}),
                         ((), {}), ((5,), {}), (([1, 2, 3],), {}), (([1, 2], {}, 3), {}),
                         (([1, 2],), {"foo": 1})]:
        t_err = _error(lambda a=args, k=kwargs: T(*a, **k))
        assert _error(lambda a=args, k=kwargs: F(*a, **k)) == t_err
        if t_err is None:
            assert tuple(F(*args, **kwargs)) == tuple(T(*args, **kwargs))
    # pickling and copying by reference, as `cls((values...), {})`
    assert ours.__reduce__()[1][1] == theirs.__reduce__()[1][1] == {}
    for again in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours), copy.copy(ours)):
        assert type(again) is F
        assert [v.tolist() for v in again] == [v.tolist() for v in theirs]


def test_return_types_still_map_and_rebuild():
    ours = _max(fg)
    mapped = fg.utils._pytree.tree_map(lambda t: t + 1, ours)
    assert type(mapped) is type(ours)
    assert mapped.values.tolist() == (_max(torch).values + 1).tolist()
    assert type(ours)._fields == ("values", "indices")  # fusegrad's own readers' view


# ---------------------------------------------------------------- strides


STRIDED = {
    "t_unsqueeze0": lambda T: T.arange(6).reshape(2, 3).t().unsqueeze(0),
    "t_unsqueeze1": lambda T: T.arange(6).reshape(2, 3).t().unsqueeze(1),
    "t_unsqueeze2": lambda T: T.arange(6).reshape(2, 3).t().unsqueeze(2),
    "permuted_ones": lambda T: T.arange(12).reshape(1, 3, 4).permute(2, 0, 1),
    "two_ones": lambda T: T.arange(6).reshape(2, 3).t().unsqueeze(0).unsqueeze(2),
}
# Off eager's float32/float64 fast path (integers, half types): those take TensorIterator's
# layout; the fast path keeps NumPy's (see the report of this change).
SLOW_PATH_OPS = {
    "add_int": lambda a: a + 1,
    "mul_self_int": lambda a: a * a,
    "gt_int": lambda a: a > 2,
    "abs_int": lambda a: a.abs(),
    "sqrt_int": lambda a: a.sqrt(),
    "add_half": lambda a: a + a,
    "sigmoid_half": lambda a: a.sigmoid(),
}


@pytest.mark.parametrize("op", sorted(SLOW_PATH_OPS))
@pytest.mark.parametrize("layout", sorted(STRIDED))
def test_pointwise_strides_over_size1_dims_as_torch(layout, op):
    got = []
    for lib in (torch, fg):
        a = STRIDED[layout](lib)
        if op.endswith("half"):  # a view of a half tensor, with the same strides
            base = lib.arange(a.numel()).to(lib.float16)
            a = base.as_strided(tuple(a.shape), a.stride())
        out = SLOW_PATH_OPS[op](a)
        got.append((tuple(out.shape), out.stride(), out.tolist()))
    assert got[1] == got[0]
