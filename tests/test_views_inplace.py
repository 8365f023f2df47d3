"""Views (storage sharing, strides, _base, version counters) and in-place ops, compared with
torch."""

import numpy as np
import pytest
import torch
from oracle import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    check,
    graph_signature,
    randn,
    sample,
)

import fusegrad

# ----------------------------------------------------------------------------------------------
# strides and contiguity
# ----------------------------------------------------------------------------------------------

VIEWS = {
    "identity": lambda T, x: x,
    "transpose": lambda T, x: x.transpose(0, 2),
    "transpose_neg": lambda T, x: x.transpose(-1, -2),
    "permute": lambda T, x: x.permute(1, 2, 0),
    "mT": lambda T, x: x.mT,
    "expand": lambda T, x: x[:, :1].expand(2, 5, 4),
    "expand_new_dims": lambda T, x: x[0, 0].expand(3, 2, 4),
    "slice": lambda T, x: x[:, 1:],
    "slice_step": lambda T, x: x[:, ::2, 1::2],
    "slice_last": lambda T, x: x[..., 1:3],
    "select": lambda T, x: x[1],
    "select_mid": lambda T, x: x[:, 2],
    "select_last": lambda T, x: x[..., -1],
    "select_all": lambda T, x: x[1, 2, 3],
    "unsqueeze0": lambda T, x: x.unsqueeze(0),
    "unsqueeze_mid": lambda T, x: x.unsqueeze(1),
    "unsqueeze_end": lambda T, x: x.unsqueeze(-1),
    "unsqueeze_of_transpose": lambda T, x: x.transpose(0, 1).unsqueeze(1),
    "unsqueeze_of_slice": lambda T, x: x[:, ::2].unsqueeze(2),
    "none_index": lambda T, x: x[:, None, ::3],
    "view": lambda T, x: x.view(6, 4),
    "view_neg": lambda T, x: x.view(-1),
    "reshape_view": lambda T, x: x.reshape(4, 6),
    "squeeze": lambda T, x: x[:1, :, 2:3].squeeze(),
    "squeeze_dim": lambda T, x: x[:, :1].squeeze(1),
    "t_of_select": lambda T, x: x[0].t(),
    "T_2d": lambda T, x: x[1].T,
    "view_of_slice": lambda T, x: x[1:].view(3, 4),
    "view_after_transpose_last": lambda T, x: x[:, :, 0].view(6),
    "contiguous_of_t": lambda T, x: x.transpose(0, 1).contiguous(),
    "expand_then_slice": lambda T, x: x[:, :1].expand(2, 3, 4)[:, 1:],
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_strides_and_contiguity(name):
    def prog(T, x):
        v = VIEWS[name](T, x)
        return (v.shape, v.stride(), [v.stride(d) for d in range(v.dim())], v.is_contiguous(),
                v, v._base is x, x._base)
    check(prog, randn(2, 3, 4), dtype="float32")


def test_strides_zero_d_and_empty():
    def prog(T):
        a = T.tensor(1.0)
        b = T.zeros(0, 3)
        c = T.zeros(2, 0, 3)
        return (a.stride(), a.is_contiguous(), b.stride(), b.is_contiguous(), c.stride(),
                c.t().is_contiguous() if c.dim() == 2 else c.transpose(0, 2).is_contiguous(),
                a.unsqueeze(0).stride(), T.zeros(1, 3).t().is_contiguous())
    check(prog)


@pytest.mark.parametrize("dt", ["float32", "int64"])
def test_contiguous_copies_noncontiguous(dt):
    def prog(T, x):
        t = x.t()
        c = t.contiguous()
        same = x.contiguous() is x
        c.add_(1)
        return c, c.stride(), c.is_contiguous(), x, same, c._base is None, t._base is x
    check(prog, sample((2, 3), dt, 1), dtype=dt)


# ----------------------------------------------------------------------------------------------
# writes through views
# ----------------------------------------------------------------------------------------------

WRITES = {
    "view_add": lambda T, x: x.view(-1).add_(1),
    "view_neg_mul": lambda T, x: x.view(4, -1).mul_(2),
    "select_fill": lambda T, x: x[0].fill_(5),
    "select_zero": lambda T, x: x[:, 1].zero_(),
    "slice_step_add": lambda T, x: x[:, ::2].add_(T.ones(2, 2, 4)),
    "transpose_mul": lambda T, x: x.transpose(0, 2).mul_(T.arange(2.0)),
    "permute_copy": lambda T, x: x.permute(2, 0, 1).copy_(T.arange(24.0).view(4, 2, 3)),
    "select_chain": lambda T, x: x[1][2][3].fill_(-7),
    "none_slice": lambda T, x: x[None, :, 1:2].zero_(),
    "unsqueeze_add": lambda T, x: x.unsqueeze(1).add_(x.unsqueeze(1)),
    "reshape_view_fill": lambda T, x: x.reshape(6, 4)[::3].fill_(9),
    "squeeze_copy": lambda T, x: x[:1].squeeze(0).copy_(T.zeros(3, 4)),
    "view_of_view_add": lambda T, x: x.view(6, 4)[1:3].view(-1).add_(100),
    "ellipsis_mul": lambda T, x: x[..., 3].mul_(0),
    "mT_fill": lambda T, x: x.mT[0].fill_(3),
}


@pytest.mark.parametrize("name", list(WRITES))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_write_through_view_shows_in_base(name, dt):
    def prog(T, x):
        other = x.view(-1)
        r = WRITES[name](T, x)
        return x, other, r, x._version, other._version, r._version
    check(prog, randn(2, 3, 4), dtype=dt)


def test_write_base_shows_in_views():
    def prog(T, x):
        v1 = x.view(-1)
        v2 = x[1]
        v3 = x.t()
        v4 = x[:, 1:2].expand(3, 4)
        x.mul_(10)
        x.add_(T.ones(4))
        return v1, v2, v3, v4, [v._version for v in (x, v1, v2, v3, v4)]
    check(prog, randn(3, 4), dtype="float32")


def test_view_neg_one_shares_storage():
    def prog(T, x):
        v = x.view(-1)
        v.add_(1)
        w = v.view(2, 3)
        x.mul_(2)
        return x, v, w, v._base is x, w._base is x, w._version
    check(prog, randn(2, 3), dtype="float32")


def test_reshape_copies_only_when_needed():
    def prog(T, x):
        r_view = x.reshape(-1)
        r_copy = x.t().reshape(-1)
        r_view.add_(1)
        r_copy.mul_(0)
        return x, r_view, r_copy, r_view._base is x, r_copy._base is None, x._version
    check(prog, randn(2, 3), dtype="float32")


def test_detach_and_data_sharing_and_versions():
    def prog(T, x):
        d = x.detach()
        d.add_(1)
        v_after_detach = x._version
        x.data.mul_(2)
        v_after_data = x._version
        return x, d, v_after_detach, v_after_data, d._version
    check(prog, randn(3), requires_grad=True, dtype="float32")


def test_expand_then_clone_is_independent():
    def prog(T, x):
        e = x.expand(3, 4)
        c = e.clone()
        c.add_(1)
        return x, e.stride(), c.stride(), c, e._base is x
    check(prog, randn(1, 4), dtype="float32")


# ----------------------------------------------------------------------------------------------
# version counter
# ----------------------------------------------------------------------------------------------

def test_version_counter_shared_by_views():
    def prog(T, x):
        versions = []
        v = x.view(-1)
        s = x[0]
        versions.append((x._version, v._version, s._version))
        v.add_(1)
        versions.append((x._version, v._version, s._version))
        s.mul_(2)
        versions.append((x._version, v._version, s._version))
        x.zero_()
        x.fill_(3)
        c = x.clone()
        versions.append((x._version, v._version, s._version, c._version))
        c.copy_(x)
        versions.append((x._version, c._version))
        _ = x + 1
        versions.append((x._version,))
        return versions
    check(prog, randn(2, 3), dtype="float32")


def test_version_of_new_tensors():
    def prog(T, x):
        return [t._version for t in (x, x * 2, x.view(-1), T.zeros(2), x.clone(), x[0])]
    check(prog, randn(2, 3), dtype="float32")


# ----------------------------------------------------------------------------------------------
# in-place op semantics
# ----------------------------------------------------------------------------------------------

INPLACE = {
    "add_tensor": lambda T, x, y: x.add_(y),
    "add_scalar": lambda T, x, y: x.add_(2),
    "add_bcast": lambda T, x, y: x.add_(y[0]),
    "add_zero_d": lambda T, x, y: x.add_(y[0, 0]),
    "mul_tensor": lambda T, x, y: x.mul_(y),
    "mul_scalar": lambda T, x, y: x.mul_(0.5),
    "zero": lambda T, x, y: x.zero_(),
    "fill_scalar": lambda T, x, y: x.fill_(2.25),
    "fill_int": lambda T, x, y: x.fill_(3),
    "fill_zero_d_tensor": lambda T, x, y: x.fill_(y[1, 1]),
    "copy": lambda T, x, y: x.copy_(y),
    "copy_bcast": lambda T, x, y: x.copy_(y[1]),
    "copy_other_dtype": lambda T, x, y: x.copy_(T.tensor([[1, 2, 3], [4, 5, 6]])),
    "copy_bool": lambda T, x, y: x.copy_(y > 0),
    "copy_double": lambda T, x, y: x.copy_(y.double()),
    "copy_self_view": lambda T, x, y: x.copy_(x[1:2].expand(2, 3)),
}


@pytest.mark.parametrize("name", list(INPLACE))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_inplace_ops(name, dt):
    def prog(T, x, y):
        r = INPLACE[name](T, x, y)
        return r is x, x, x._version, y._version, x.dtype
    check(prog, randn(2, 3, seed=1), randn(2, 3, seed=2), dtype=dt)


@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_inplace_dtype_rules(dt):
    def prog(T, x):
        out = []
        for f in (lambda t: t.add_(1), lambda t: t.mul_(2), lambda t: t.add_(True),
                  lambda t: t.add_(T.tensor(1)), lambda t: t.mul_(T.tensor([2], dtype=T.int8)),
                  lambda t: t.fill_(1.5), lambda t: t.copy_(T.tensor([1.7, -0.2, 3.9])),
                  lambda t: t.zero_(), lambda t: t.add_(1.5), lambda t: t.mul_(T.ones(3))):
            t = x.clone()
            try:
                f(t)
                out.append((t, t.dtype, t._version))
            except RuntimeError as e:
                out.append(str(e))
        return out
    check(prog, sample((3,), dt, 3), dtype=dt)


def test_inplace_on_empty_and_zero_d():
    def prog(T, x, z):
        x.add_(1)
        x.mul_(z)
        z.add_(2)
        z.mul_(z)
        z.fill_(T.tensor(4.0))
        return x, z, x._version, z._version
    check(prog, randn(0, 3), np.array(1.5), dtype="float32")


# ----------------------------------------------------------------------------------------------
# in-place ops and autograd
# ----------------------------------------------------------------------------------------------

def test_inplace_on_nonleaf_graph_and_grads():
    def prog(T, x, y):
        a = x.sin()
        a.add_(y)
        n1 = graph_signature(a.grad_fn, (x, y))
        a.mul_(y)
        a.add_(x)
        n2 = graph_signature(a.grad_fn, (x, y))
        a.sum().backward()
        return a, a._version, x.grad, y.grad, n1, n2
    check(prog, randn(3, seed=1), randn(3, seed=2), requires_grad=True)


def test_inplace_on_view_of_nonleaf():
    def prog(T, x, y):
        a = x.clone()
        a[0].mul_(y)
        v = a[:, 1:]
        v.add_(y[:2])
        sig = graph_signature(a.grad_fn, (x, y))
        (a * a).sum().backward()
        return a, a._version, x.grad, y.grad, sig
    check(prog, randn(3, 3, seed=3), randn(3, seed=4), requires_grad=True)


def test_inplace_view_then_base_grads():
    def prog(T, x):
        a = x.clone()
        v = a.view(-1)
        v.mul_(3)
        a.sin().sum().backward()
        return x.grad, a._version, v._version
    check(prog, randn(2, 2), requires_grad=True)


def test_inplace_zero_and_fill_grads():
    def prog(T, x, y):
        a = x * y
        a[1].zero_()
        b = x + 1
        b[0].fill_(2.0)
        (a + b).sum().backward()
        return a, b, x.grad, y.grad
    check(prog, randn(2, 3, seed=5), randn(2, 3, seed=6), requires_grad=True)


def test_copy_into_nonleaf_grads():
    def prog(T, x, y):
        a = x * 2
        a.copy_(y * 3)
        a.sum().backward()
        return a, x.grad, y.grad, type(a.grad_fn).__name__
    check(prog, randn(3, seed=7), randn(3, seed=8), requires_grad=True)


def test_inplace_on_leaf_under_no_grad():
    def prog(T, w, g):
        with T.no_grad():
            w.add_(g)
            w.mul_(0.5)
            w[0].fill_(1.0)
            w.copy_(w * 2)
        ver = w._version
        (w * w).sum().backward()
        return w, ver, w.is_leaf, w.grad_fn, w.grad
    check(prog, randn(3), randn(3), requires_grad=(True, False))


def test_inplace_makes_tensor_require_grad():
    def prog(T, c, x):
        c.add_(x)
        r = (c.requires_grad, c.is_leaf, type(c.grad_fn).__name__)
        c.sum().backward()
        return r, x.grad
    check(prog, randn(3), randn(3), requires_grad=(False, True))


# ----------------------------------------------------------------------------------------------
# failed in-place ops leave everything unchanged
# ----------------------------------------------------------------------------------------------

INPLACE_ERRORS = {
    "int_add_float": (lambda T, x, y: x.long().add_(1.5), None),
    "int_view_add_float": (lambda T, x, y: _int_view(T, x).add_(y), None),
    "int_mul_float_tensor": (lambda T, x, y: _int_inplace(T, x, y), None),
    "bool_add_int": (lambda T, x, y: (x > 0).add_(2), None),
    "add_shape": (lambda T, x, y: x[0].add_(y), None),
    "mul_shape": (lambda T, x, y: x.mul_(y[:, :2]), None),
    "copy_shape": (lambda T, x, y: x.copy_(y[:, :2]), None),
    "fill_nonscalar": (lambda T, x, y: x.fill_(y), None),
    "add_to_expanded": (lambda T, x, y: x[:, :1].expand(2, 3).add_(1), None),
    "leaf_add": (lambda T, x, y: x.add_(1), True),
    "leaf_mul_view": (lambda T, x, y: x[1].mul_(2), True),
    "leaf_zero_view": (lambda T, x, y: x.view(-1).zero_(), True),
    "leaf_copy": (lambda T, x, y: x.copy_(y), True),
}


def _int_view(T, x):
    return x.long()[0]


def _int_inplace(T, x, y):
    i = x.long()
    return i.view(-1).mul_(y.view(-1))


@pytest.mark.parametrize("name", list(INPLACE_ERRORS))
def test_inplace_errors_leave_state(name):
    prog, rg = INPLACE_ERRORS[name]

    def wrapped(T, x, y):
        return prog(T, x, y)
    check(wrapped, randn(2, 3, seed=1), randn(2, 3, seed=2), requires_grad=(bool(rg), False),
          dtype="float32", expect_error=True, full_message=True)


def test_failed_inplace_on_shared_storage_leaves_views():
    def prog(T, x, y):
        v = x.view(-1)
        i = x.long()
        errs = []
        for f in (lambda: i.add_(0.5), lambda: v.add_(y), lambda: x.mul_(y[:2]),
                  lambda: x[0].copy_(y)):
            try:
                f()
            except RuntimeError as e:
                errs.append(str(e))
        return errs, x, v, i, x._version, v._version, i._version
    check(prog, randn(2, 3, seed=3), randn(4, seed=4), dtype="float32")


# ----------------------------------------------------------------------------------------------
# views created before an in-place op on their base (autograd)
# ----------------------------------------------------------------------------------------------

def test_view_grad_after_base_modified_in_place():
    def prog(T, x):
        a = x.clone()
        v = a[0]
        w = a[1:].t() if a.dim() == 2 else a[1:]
        a.mul_(2)
        (v.sum() * 3 + (w * w).sum()).backward()
        return x.grad, v, w, v._version, a._version
    check(prog, randn(3, 2), requires_grad=True)


def test_view_grad_fn_after_base_modified_in_place():
    def prog(T, x):
        a = x.clone()
        v = a[0]
        a.mul_(2)
        return type(v.grad_fn).__name__, v.requires_grad, v._base is a
    check(prog, randn(3), requires_grad=True)


def test_inplace_copy_into_view_of_non_requiring_base():
    def prog(T, x):
        buf = T.zeros(2, 3, dtype=x.dtype)
        buf[0].copy_(x)
        buf[1].add_(x * 2)
        r = (buf.requires_grad, buf.is_leaf, type(buf.grad_fn).__name__)
        (buf * buf).sum().backward()
        return r, buf, x.grad
    check(prog, randn(3), requires_grad=True)


def test_saved_view_modified_through_base_error():
    def prog(T, x):
        a = x.clone()
        v = a[1:]
        y = v.sin()
        a.add_(1)
        y.sum().backward()
    check(prog, randn(3), requires_grad=True, dtype="float32", expect_error=True,
          full_message=True)


def test_grad_accumulates_in_place():
    def prog(T, x):
        (x * 2).sum().backward()
        g = x.grad
        (x * 3).sum().backward()
        return x.grad is g, g
    check(prog, randn(3), requires_grad=True)


def test_sibling_view_grad_after_inplace_on_other_view():
    def prog(T, x, y):
        a = x.clone()
        row = a[0]
        col = a[:, 1]
        row.mul_(y)
        (col * T.arange(3.0, dtype=x.dtype)).sum().backward()
        return x.grad, y.grad, col, a._version
    check(prog, randn(3, 3, seed=1), randn(3, seed=2), requires_grad=True)


def test_view_of_view_grad_after_base_modified():
    def prog(T, x):
        a = x.clone()
        v = a.view(-1)[1:5].view(2, 2)
        a.add_(x)
        (v * v).sum().backward()
        return x.grad, v
    check(prog, randn(2, 3), requires_grad=True)


def test_fill_and_copy_gradients_flow_to_value():
    def prog(T, x, v, y):
        a = x * 1
        a[0].fill_(v)
        b = x.clone()
        b.copy_(y[0])
        (a * a).sum().backward(retain_graph=True)
        (b * x).sum().backward()
        return a, b, x.grad, v.grad, y.grad
    check(prog, randn(2, 3, seed=1), np.array(0.7), randn(1, 3, seed=2), requires_grad=True)


@pytest.mark.parametrize("method", ["addcmul_", "addcdiv_"])
@pytest.mark.parametrize("grads", [(False, False), (True, False), (False, True), (True, True)])
def test_addc_inplace_saves_only_what_backward_needs(method, grads):
    """An operand is saved only for the other operand's gradient, so writing into a view
    through detached operands that share its storage is no version error (as in torch)."""
    results = []
    for lib in (fusegrad, torch):
        lib.manual_seed(0)
        base = lib.tensor([0.5, 1.0, 1.5, 2.0], requires_grad=True)
        t1 = lib.tensor([1.0, 2.0, 3.0], requires_grad=grads[0])
        t2 = lib.tensor([2.0, 4.0, 5.0], requires_grad=grads[1])
        view = (base * 1)[1:]
        getattr(view, method)(view.detach(), view.detach() + 1)  # detached: never saved
        getattr(view, method)(t1 * 1, t2 * 1, value=0.5)
        view.sum().backward()
        results.append([x.grad.numpy().copy() if x.grad is not None else None
                        for x in (base, t1, t2)])
    for ours, theirs in zip(*results):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def _no_grad_views(lib):
    """A view made under no_grad of a tensor that requires grad: it requires grad too, has no
    history and no edge, and an in-place write with grad mode on is refused."""
    x = lib.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    with lib.no_grad():
        views = [x[0], x.view(12), x.t(), x[1:], x.unsqueeze(0), x[0, 1], x.reshape(12),
                 x[0].expand(2, 4)]
    out = [(v.requires_grad, v.grad_fn is None, v.is_leaf) for v in views]
    a = views[0]
    m = a * 2
    out.append([(None if f is None else f.name(), n) for f, n in m.grad_fn.next_functions])
    m.sum().backward()
    out.append((x.grad, a.grad))
    with pytest.raises(RuntimeError) as err:
        a.mul_(2)
    out.append(str(err.value))
    with lib.no_grad():
        a.mul_(2)
    z = lib.zeros(3)
    with lib.no_grad():
        zv = z[0]
    zv.requires_grad_()
    (zv * 3).backward()
    out.append((zv.requires_grad, zv.grad.item()))
    return out


def test_views_made_under_no_grad_require_grad_without_history_as_torch():
    assert _no_grad_views(fusegrad) == _no_grad_views(torch)


def _multi_output_writes(lib):
    out = []
    for split in (lambda t: t.unbind(), lambda t: t.split(1), lambda t: t.chunk(2),
                  lambda t: t.unsafe_split(1), lambda t: t.split([1, 1])):
        for leaf in (False, True):
            t = lib.ones(2, 3, requires_grad=True)
            view = split(t if leaf else t * 1)[1]
            try:
                view.mul_(2)
                out.append("allowed")
            except RuntimeError as e:
                out.append(str(e))
    plain = lib.ones(2, 3).unbind()[0]
    plain.mul_(2)
    t = lib.ones(2, 3, requires_grad=True) * 1
    with lib.no_grad():
        t.unbind()[0].mul_(2)
    return out, plain.tolist(), t.tolist()


def test_in_place_write_into_one_of_several_output_views_is_refused_as_torch():
    assert _multi_output_writes(fusegrad) == _multi_output_writes(torch)
