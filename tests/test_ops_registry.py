"""Walk the op registry: every entry against PyTorch's ATen op of the same name.

For each entry and each of its samples, in float32 and float64: forward values and dtype,
the grad_fn class name, every float input's gradient for a random cotangent, gradcheck in
float64 where the entry declares it, and the fake-mode meta against the kernel.

Samples of complex ops hold complex arrays whose components have the walk's dtype
(complex64 in the float32 pass). Complex values are compared as their real and imaginary
parts; a complex output's cotangent is a random complex tensor (the loss is the real inner
product of the two), so the gradients compared are PyTorch's conjugate Wirtinger ones.
"""

from __future__ import annotations

import os
import zlib

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad import _dispatch  # noqa: E402
from fusegrad._fake import DataDependentOutputError, FakeTensor  # noqa: E402
from fusegrad.ops import REGISTRY  # noqa: E402

# Registry entries that are fusegrad's own helpers, with no ATen twin: they are checked by
# gradcheck and meta only.
# (The pooling picks' layers are compared with PyTorch's in tests/test_nn_pooling_picks.py.)
NO_ATEN = {"_strided_transfer", "_fractional_max_pool2d_values", "_fractional_max_pool_indices",
           "_fractional_max_pool3d_values", "_adaptive_max_pool3d_values",
           # the per-tensor steps of `_foreach_maximum_`/`minimum_`, whose ATen twins take
           # lists (compared against torch's foreach functions in test_eager_leftovers7.py)
           "_foreach_maximum_.Scalar", "_foreach_minimum_.Scalar",
           "_foreach_maximum_.List", "_foreach_minimum_.List"}
DTYPES = [np.float32, np.float64]


def _aten(name):
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _entries():
    return sorted(n for n, op in REGISTRY.items() if op.samples is not None)


def _to_torch(x, requires_grad):
    if isinstance(x, np.ndarray):
        t = torch.from_numpy(x.copy())
        return t.requires_grad_(requires_grad and (t.is_floating_point() or t.is_complex()))
    if isinstance(x, list):
        return [_to_torch(v, requires_grad) for v in x]
    if isinstance(x, fusegrad.dtype):
        return getattr(torch, x.name)
    return x


def _to_fg(x, requires_grad):
    if isinstance(x, np.ndarray):
        t = fusegrad.from_numpy(x.copy())
        return t.requires_grad_(requires_grad and (t.is_floating_point() or t.is_complex()))
    if isinstance(x, list):
        return [_to_fg(v, requires_grad) for v in x]
    return x


def _leaves(args):
    out = []
    for a in args:
        if isinstance(a, list):
            out += _leaves(a)
        elif hasattr(a, "requires_grad") and a.requires_grad:
            out.append(a)
    return out


def _call_torch(name, args):
    fn = _aten(name)
    schema = fn._schema.arguments
    ref = next((a for a in args if isinstance(a, torch.Tensor)), None)
    pos, kw = [], {}
    for arg, value in zip(schema, args):
        if str(arg.type) == "Tensor" and isinstance(value, (int, float)) and ref is not None:
            # ATen's Tensor overloads take a number as a 0-d tensor; with the other operand's
            # dtype it promotes as Python's wrapped numbers do.
            value = torch.tensor(value, dtype=ref.dtype)
        if arg.kwarg_only:
            kw[arg.name] = value
        else:
            pos.append(value)
    return fn(*pos, **kw)


def _prepare_inplace(op, args):
    # In-place ops write into a copy (a non-leaf) so that gradients reach the sample's leaf.
    if not op.inplace:
        return args
    return (args[0].clone(),) + tuple(args[1:])


def _tol(op, dtype):
    default = 1e-4 if dtype == np.float32 else 1e-10
    return op.tolerance.get(np.dtype(dtype).name, default)


def _close(fg, th, tol, what):
    if th.is_complex() or fg.is_complex():
        a = np.asarray(fg.detach().numpy(), dtype=np.complex128)
        b = th.detach().resolve_conj().to(torch.complex128).numpy(force=True)
        assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what, equal_nan=True)
        return
    a = np.asarray(fg.detach().numpy(), dtype=np.float64)
    b = th.detach().to(torch.float64).numpy(force=True)  # force: ZeroTensor grads
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what, equal_nan=True)


def _samples(op, dtype):
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))  # stable across processes
    return op.samples(rng, np.dtype(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", [n for n in _entries() if n not in NO_ATEN])
def test_op_matches_torch(name, dtype):
    op = REGISTRY[name]
    for k, sample in enumerate(_samples(op, dtype)):
        check_sample(op, sample, dtype, k)


def check_sample(op, sample, dtype, k=0) -> None:
    """One sample of `op` against `torch.ops.aten`: output dtypes and values, grad_fn names,
    and every float input's gradient for a random cotangent (AssertionError on a mismatch)."""
    name = op.name
    what = f"{name} sample {k} ({sample.name})"
    # Arguments the op does not differentiate (running statistics) do not require grad:
    # PyTorch refuses some of them that do.
    grad = [k not in op.nondiff_args for k in range(len(sample.args))]
    fg_inputs = tuple(_to_fg(a, g) for a, g in zip(sample.args, grad))
    th_inputs = tuple(_to_torch(a, g) for a, g in zip(sample.args, grad))
    fg_args = _prepare_inplace(op, fg_inputs)
    th_args = _prepare_inplace(op, th_inputs)
    th_outs = _as_tuple(_call_torch(name, th_args))
    fg_outs = _as_tuple(_dispatch.call(op, *fg_args))
    assert len(fg_outs) == len(th_outs), what
    tol = _tol(op, dtype)
    for fg_out, th_out in zip(fg_outs, th_outs):
        assert fg_out.dtype.name == str(th_out.dtype).split(".")[1], what
        if op.random:  # draws differ from PyTorch's: tests/test_random_ops.py compares laws
            assert tuple(fg_out.shape) == tuple(th_out.shape), what
        else:
            _close(fg_out, th_out, tol, what + " value")
        th_name = type(th_out.grad_fn).__name__ if th_out.grad_fn is not None else None
        fg_name = type(fg_out.grad_fn).__name__ if fg_out.grad_fn is not None else None
        assert fg_name == th_name, f"{what}: grad_fn {fg_name} != {th_name}"
    pairs = [(f, t) for f, t in zip(fg_outs, th_outs)
             if t.grad_fn is not None and (t.is_floating_point() or t.is_complex())]
    if not pairs:
        return
    rng = np.random.default_rng(k)
    th_loss = fg_loss = 0
    for f, t in pairs:
        if t.is_complex():  # Re <cot, out>: the real and imaginary parts' cotangents
            t, f = torch.view_as_real(t.resolve_conj()), fusegrad.view_as_real(f)
        cot = rng.standard_normal(tuple(t.shape)).astype(dtype)
        th_loss = th_loss + (t * torch.from_numpy(cot)).sum()
        fg_loss = fg_loss + (f * fusegrad.from_numpy(cot)).sum()
    try:
        th_loss.backward()
    except (RuntimeError, NotImplementedError) as th_err:
        # PyTorch records a node whose backward raises ("not implemented"): so must we.
        with pytest.raises(type(th_err)) as fg_err:
            fg_loss.backward()
        assert str(fg_err.value) == str(th_err), what
        return
    fg_loss.backward()
    for i, (a, b) in enumerate(zip(_leaves(fg_inputs), _leaves(th_inputs))):
        if b.grad is None:
            assert a.grad is None or not a.grad.numpy().any(), f"{what} grad {i}"
            continue
        assert a.grad is not None, f"{what}: no gradient for input {i}"
        _close(a.grad, b.grad, _tol(op, dtype) * 10, f"{what} grad {i}")


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


# gradcheck's cost grows with the square of a sample's size (a forward per input element, a
# backward per output element). The grid samplers' samples are checked at batch 1: of their
# two items (in input and grid) the one with the most grid coordinates outside [-1, 1], so
# that each padding mode's out-of-range points are still checked. Their every mode, padding
# and corner alignment, and their sizes but the batch, are kept; no path of theirs depends on
# the batch size, and their batches of 2 are compared with PyTorch's gradients by
# test_op_matches_torch.
_GRADCHECK_BATCH_OF_ONE = {"grid_sampler_2d", "grid_sampler_3d"}


def _gradcheck_args(name: str, args: tuple) -> tuple:
    """The arguments gradcheck takes for a sample of op `name` (see above)."""
    if name not in _GRADCHECK_BATCH_OF_ONE:
        return args
    x, grid = args[:2]
    item = int(np.argmax((np.abs(grid) > 1).reshape(len(grid), -1).sum(1)))
    return (x[item:item + 1], grid[item:item + 1]) + tuple(args[2:])


@pytest.mark.parametrize("name", [n for n in _entries()
                                  if REGISTRY[n].gradcheck and not REGISTRY[n].inplace])
def test_gradcheck(name):
    op = REGISTRY[name]
    for sample in _samples(op, np.float64):
        args = tuple(_to_fg(a, True) for a in _gradcheck_args(name, sample.args))
        leaves = _leaves(args)
        if not leaves or any(x.numel() == 0 for x in leaves):
            continue
        if any(x.is_complex() for x in leaves) or any(
                o.is_complex() for o in _as_tuple(_dispatch.call(op, *args))):
            _gradcheck_realified(op, args)
            continue
        if op.list_arg:  # gradcheck sees the list's tensors as separate inputs
            fusegrad.autograd.gradcheck(
                lambda *xs, rest=args[1:]: _dispatch.call(op, list(xs), *rest), tuple(args[0]))
        else:
            fusegrad.autograd.gradcheck(lambda *xs: _dispatch.call(op, *xs), args)


def _gradcheck_realified(op, args) -> None:
    """gradcheck of an op with complex inputs or outputs, seen as a real function: each
    complex input is given as its `view_as_real` pairs, each complex output returned so
    (the gradient this checks is then the conjugate Wirtinger one, as PyTorch's)."""
    cplx = [isinstance(a, fusegrad.Tensor) and a.is_complex() for a in args]
    reals = tuple(fusegrad.view_as_real(a.detach()).clone().requires_grad_() if c else a
                  for a, c in zip(args, cplx))

    def fn(*xs):
        full = [fusegrad.view_as_complex(x) if c else x for x, c in zip(xs, cplx)]
        outs = _as_tuple(_dispatch.call(op, *full))
        return tuple(fusegrad.view_as_real(o) if o.is_complex() else o for o in outs)

    fusegrad.autograd.gradcheck(fn, reals)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", _entries())
def test_meta_matches_kernel(name, dtype):
    op = REGISTRY[name]
    for k, sample in enumerate(_samples(op, dtype)):
        args = tuple(_to_fg(a, False) for a in sample.args)
        reals = _as_tuple(_dispatch.call(op, *args) if not op.inplace else _dispatch.call(
            op, args[0].clone(), *args[1:]))
        try:
            fakes = _as_tuple(_dispatch.call(op, *tuple(_fake(a) for a in sample.args)))
        except DataDependentOutputError:  # nonzero, masked_select: no shape without data
            continue
        what = f"{name} sample {k}"
        assert len(fakes) == len(reals), what
        for fake, real in zip(fakes, reals):
            assert isinstance(fake, FakeTensor), name
            assert tuple(fake.shape) == tuple(real.shape), what
            assert fake.dtype is real.dtype, what
            if op.view and real.numel():  # empty arrays have no meaningful strides in NumPy
                assert fake.stride() == real.stride(), f"{what}: strides"
                assert fake.storage_offset() == real.storage_offset(), f"{what}: offset"


def _fake(a):
    if isinstance(a, np.ndarray):
        return FakeTensor.from_tensor(fusegrad.from_numpy(a))
    if isinstance(a, list):
        return [_fake(x) for x in a]
    return a


def test_every_entry_is_complete():
    """Every op has a meta, samples, and a derivative unless marked non-differentiable."""
    for name, op in REGISTRY.items():
        assert op.meta is not None, name
        assert op.samples is not None, name
        if op.node is not None:
            assert op.derivative is not None, name
        if op.differentiable:
            assert op.node_class_of().__name__ == op.node, name


def test_ops_doc_lists_every_entry():
    """docs/ops.md is generated from the registry; regenerate it (tools/gen_ops_doc.py)
    whenever an op is added or removed."""
    import re
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "ops.md").read_text()
    listed = set(re.findall(r"^\| `([^`]+)` \|", doc, flags=re.M))
    assert listed == set(REGISTRY), sorted(listed ^ set(REGISTRY))
