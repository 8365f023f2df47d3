"""make_fx's printed op calls and FakeTensorMode's exceptions against torch; the compiled
wrappers of functions called after a graph break against `weakref` (they die with them)."""

from __future__ import annotations

import gc
import os
import weakref

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch._subclasses.fake_tensor as torch_fake  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad._subclasses.fake_tensor as fg_fake  # noqa: E402
from fusegrad._fake import DataDependentOutputError  # noqa: E402
from fusegrad.fx.experimental.proxy_tensor import make_fx  # noqa: E402

PROGRAMS = {
    "view_sum_keepdim": lambda T, x: x.view(2, 6).sum(1, keepdim=True),
    "reductions": lambda T, x: x.sum([0, 1]) + x.mean(0).sum() + x.amax(1).sum(),
    "slice_softmax_cat": lambda T, x: T.cat([x, x], 1).narrow(1, 0, 2).softmax(-1),
    "views": lambda T, x: x.permute(1, 0).expand(2, 4, 3).transpose(1, 2).clone(),
    "max_squeeze": lambda T, x: x.max(1)[0] + x.unsqueeze(0).squeeze(0).sum(1),
}


def _body(gm) -> list[str]:
    """The printed forward's lines, fusegrad's module name read as torch's."""
    text = gm.print_readable(print_output=False).replace("fusegrad.", "torch.")
    return text.strip().splitlines()[1:]  # (the class line names the module's base)


@pytest.mark.parametrize("name", PROGRAMS)
def test_make_fx_prints_torchs_arguments(name):
    prog = PROGRAMS[name]
    x = torch.randn(3, 4)
    expected = torch_make_fx(lambda a: prog(torch, a))(x)
    xf = fusegrad.tensor(x.numpy())
    gm = make_fx(lambda a: prog(fusegrad, a))(xf)
    assert _body(gm) == _body(expected)
    # the rewritten calls compute what the program does
    assert torch.allclose(torch.from_numpy(gm(xf).numpy()), prog(torch, x), atol=1e-6)


def test_make_fx_rewritten_graph_differentiates_as_eager():
    x = fusegrad.randn(3, 4, requires_grad=True)
    f = PROGRAMS["reductions"]
    gm = make_fx(lambda a: f(fusegrad, a))(x.detach())
    (g,) = fusegrad.autograd.grad(gm(x), x)
    (want,) = fusegrad.autograd.grad(f(fusegrad, x), x)
    assert fusegrad.allclose(g, want)


DATA_DEPENDENT = {
    "nonzero": lambda T, x, m: x.nonzero(),
    "masked_select": lambda T, x, m: x.masked_select(m),
    "bool_mask_index": lambda T, x, m: x[m],
    "unique": lambda T, x, m: T.unique(x),
    "bincount": lambda T, x, m: T.bincount(m.long()),
    "argwhere": lambda T, x, m: T.argwhere(x),
    "bool": lambda T, x, m: bool(x.sum()),
    "int": lambda T, x, m: int(x.sum()),
    "item": lambda T, x, m: x.sum().item(),
    "tolist": lambda T, x, m: x.tolist(),
}


def _raised(T, fake, prog):
    with fake.FakeTensorMode():
        x = T.randn(4)
        with pytest.raises(RuntimeError) as info:
            prog(T, x, x > 0)
    return info.value


@pytest.mark.parametrize("name", DATA_DEPENDENT)
def test_fake_mode_raises_torchs_exception(name):
    want = _raised(torch, torch_fake, DATA_DEPENDENT[name])
    got = _raised(fusegrad, fg_fake, DATA_DEPENDENT[name])
    assert type(got) is getattr(fg_fake, type(want).__name__)
    assert str(got) == str(want)
    assert str(got.func) == str(want.func)
    assert isinstance(got, DataDependentOutputError)  # (what the compiler catches)


def test_fake_exception_classes_subclass_runtime_error_as_torchs():
    for name in ("DynamicOutputShapeException", "DataDependentOutputException"):
        assert issubclass(getattr(torch_fake, name), RuntimeError)
        assert issubclass(getattr(fg_fake, name), RuntimeError)


class _Big:
    pass


def _helper_holding(big):
    def helper(x):
        y = x + 1
        fusegrad._dynamo.graph_break()
        return y * (2 if big is not None else 3)
    return helper


def _caller_of(helper):
    def f(x):
        return helper(x) - 1
    return f


def test_callee_wrappers_die_with_their_function():
    fusegrad.compiler.reset()
    big = _Big()
    alive = weakref.ref(big)
    helper = _helper_holding(big)
    f = _caller_of(helper)
    compiled = fusegrad.compile(f, backend="eager")
    x = fusegrad.ones(2)
    for _ in range(2):  # the second call reuses the callee's compiled wrapper
        assert compiled(x).tolist() == f(x).tolist()
    del big, helper, f, compiled
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("form", ["counts", "input-and-counts", "method"])
def test_repeat_interleave_with_fake_counts_is_a_dynamic_output_shape(form):
    """Counts without values cannot size the result: PyTorch's fake mode raises
    DynamicOutputShapeException naming `aten.repeat_interleave.Tensor`, in each form."""

    def call(lib, x, counts):
        if form == "counts":
            return lib.repeat_interleave(counts)
        if form == "input-and-counts":
            return lib.repeat_interleave(x, counts)
        return x.repeat_interleave(counts)

    got = []
    for lib, mode in ((torch, torch_fake.FakeTensorMode), (fusegrad, fg_fake.FakeTensorMode)):
        with mode():
            x = lib.randn(4)
            with pytest.raises(Exception) as caught:
                call(lib, x, (x > 0).long())
        got.append((type(caught.value).__name__, str(caught.value)))
    assert got[0] == got[1] == ("DynamicOutputShapeException", "aten.repeat_interleave.Tensor")
