"""`out=` on the public functions: each one that takes it either writes into it as PyTorch
does or raises NotImplementedError naming itself; none ignores it."""

from __future__ import annotations

import inspect
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

# The functions that write into `out`, with a call that draws the same numbers either way.
WRITES_OUT = {
    "bernoulli": (lambda lib: (lib.full((3, 2), 0.5),), "float32"),
    "multinomial": (lambda lib: (lib.ones(2, 5), 3), "int64"),
}


def _functions_with_out():
    found = {}
    for prefix, namespace in (("fusegrad", fusegrad), ("fusegrad.linalg", fusegrad.linalg)):
        for name in dir(namespace):
            fn = getattr(namespace, name)
            if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            try:
                params = inspect.signature(fn).parameters
            except (TypeError, ValueError):
                continue
            if "out" in params:
                found[f"{prefix}.{name}"] = fn
    return found


FUNCTIONS = _functions_with_out()


def test_the_walk_finds_the_functions():
    # The surface has over two hundred of them; a walk that found few would prove little.
    assert len(FUNCTIONS) > 200
    assert {"fusegrad.add", "fusegrad.sum", "fusegrad.linalg.inv", "fusegrad.zeros"} <= \
        set(FUNCTIONS)
    assert {f"fusegrad.{name}" for name in WRITES_OUT} <= set(FUNCTIONS)


@pytest.mark.parametrize("qualname", sorted(q for q in FUNCTIONS
                                             if q.split(".", 1)[1] not in WRITES_OUT))
def test_out_is_refused(qualname):
    """Every function that does not write into `out` refuses it and leaves it unchanged."""
    fn = FUNCTIONS[qualname]
    sentinel = fusegrad.full((2,), 7.0)
    # Any value fills the required parameters: `out` is refused before they are used.
    args, kwargs = [], {}
    for p in inspect.signature(fn).parameters.values():
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            args.append(fusegrad.ones(2))
        elif p.default is p.empty and p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = fusegrad.ones(2)
    with pytest.raises(NotImplementedError) as info:
        fn(*args, out=sentinel, **kwargs)
    # The message names the function by a public name of the same object (an alias such as
    # `multiply` names `mul`).
    prefix = qualname.rsplit(".", 1)[0]
    named, _, rest = str(info.value).partition(": ")
    assert rest == "out= is not supported yet"
    assert named.rsplit(".", 1)[0] == prefix
    namespace = fusegrad.linalg if prefix.endswith("linalg") else fusegrad
    assert getattr(namespace, named.rsplit(".", 1)[1]) is fn
    assert sentinel.tolist() == [7.0, 7.0]


@pytest.mark.parametrize("call", [
    lambda T, o: T.add(T.ones(2), T.ones(2), out=o),
    lambda T, o: T.mul(T.ones(2), 3.0, out=o),
    lambda T, o: T.exp(T.ones(2), out=o),
    lambda T, o: T.sum(T.ones(2, 2), 0, out=o),
    lambda T, o: T.matmul(T.eye(2), T.ones(2), out=o),
    lambda T, o: T.where(T.ones(2) > 0, T.ones(2), T.zeros(2), out=o),
    lambda T, o: T.zeros(2, out=o),
    lambda T, o: T.arange(2.0, out=o),
    lambda T, o: T.linalg.inv(T.eye(2), out=o),
    lambda T, o: T.linalg.vector_norm(T.ones(2), out=o),
    lambda T, o: T.tensordot(T.ones(2), T.ones(2), 1, o),  # `out` by position
    lambda T, o: T.norm(T.ones(2), 2, None, False, o),
])
def test_valid_calls_do_not_ignore_out(call):
    out = fusegrad.full((2,), 7.0)
    with pytest.raises(NotImplementedError, match="out= is not supported yet"):
        call(fusegrad, out)
    assert out.tolist() == [7.0, 7.0]
    # PyTorch writes the result into `out` (the oracle for what "supported" will mean).
    theirs = torch.empty(0)  # empty: PyTorch resizes it without a warning
    result = call(torch, theirs)
    assert result is theirs


def test_out_none_and_aliases_unchanged():
    a = fusegrad.ones(3)
    assert fusegrad.add(a, a, out=None).tolist() == [2.0, 2.0, 2.0]
    assert fusegrad.tensordot(a, a, 1, None).item() == 3.0
    assert fusegrad.multiply is fusegrad.mul and fusegrad.divide is fusegrad.div
    assert str(inspect.signature(fusegrad.add)) == "(input, other, *, alpha=1, out=None)"
    assert fusegrad.zeros(1, 2, 3, 4, 5, 6, 7).shape == (1, 2, 3, 4, 5, 6, 7)


def test_compiled_call_refuses_out_too():
    for backend in ("eager", "inductor"):
        fn = fusegrad.compile(lambda a, c: fusegrad.add(a, a, out=c) * 2, backend=backend)
        c = fusegrad.zeros(3)
        with pytest.raises(NotImplementedError, match="fusegrad.add: out="):
            fn(fusegrad.ones(3), c)
        assert c.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("name", sorted(WRITES_OUT))
@pytest.mark.parametrize("empty", [False, True])
def test_functions_that_write_out_match_torch(name, empty):
    make_args, dtype = WRITES_OUT[name]
    ours_fn, theirs_fn = getattr(fusegrad, name), getattr(torch, name)
    expected = ours_fn(*make_args(fusegrad), generator=fusegrad.Generator().manual_seed(3))
    reference = theirs_fn(*make_args(torch))
    shape = (0,) if empty else tuple(reference.shape)
    ours_out = fusegrad.empty(shape, dtype=getattr(fusegrad, dtype))
    theirs_out = torch.empty(shape, dtype=getattr(torch, dtype))
    ours = ours_fn(*make_args(fusegrad), generator=fusegrad.Generator().manual_seed(3),
                   out=ours_out)
    theirs = theirs_fn(*make_args(torch), out=theirs_out)
    assert ours is ours_out and theirs is theirs_out  # the result is `out` itself
    assert tuple(ours_out.shape) == tuple(theirs_out.shape)  # resized as PyTorch resizes
    assert ours_out.dtype == expected.dtype and str(theirs_out.dtype) == f"torch.{dtype}"
    np.testing.assert_array_equal(ours_out.numpy(), expected.numpy())


@pytest.mark.parametrize("call", [
    lambda T: T.multinomial(T.ones(4), 2, out=T.zeros(2)),
    lambda T: T.multinomial(T.ones(4), 2, out=T.zeros(2, dtype=T.int32)),
    lambda T: T.bernoulli(T.full((3,), 0.5), 0.5, out=T.zeros(3)),
    lambda T: T.bernoulli(T.full((3,), 0.5, requires_grad=True), out=T.zeros(3)),
    lambda T: T.bernoulli(T.full((3,), 0.5), out=T.zeros(3, requires_grad=True)),
])
def test_bad_out_errors_match_torch(call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(fusegrad)
    assert str(ours.value) == str(theirs.value)


def test_bernoulli_out_under_no_grad_and_other_dtypes():
    for lib in (fusegrad, torch):
        with lib.no_grad():
            out = lib.zeros(3)
            assert lib.bernoulli(lib.full((3,), 1.0, requires_grad=True), out=out) is out
            assert out.tolist() == [1.0, 1.0, 1.0] and not out.requires_grad
        ints = lib.zeros(3, dtype=lib.int64)
        assert lib.bernoulli(lib.full((3,), 1.0), out=ints) is ints
        assert ints.tolist() == [1, 1, 1] and str(ints.dtype).endswith("int64")
