"""Ten whole programs of about thirty mixed ops each (broadcasting, views, reductions,
indexing), run under fusegrad and PyTorch: values, grad_fn names and leaf gradients agree."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from oracle import check  # noqa: E402


def _data(seed, *shapes, positive=False):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        x = rng.standard_normal(s)
        out.append(np.abs(x) + 0.5 if positive else x)
    return out


def prog_pointwise(T, x, y):
    a = x * 2 - 1
    b = (a.exp2() + y.expm1()).tanh()
    c = x.abs().log1p() + y.sinh() * 0.1 - x.atan()
    d = T.atan2(a, y + 3) * c.erf()
    e = T.minimum(d, b) + T.maximum(d, b).clamp(-0.5, 0.5)
    f = T.lerp(e, c, 0.25) + T.addcmul(a, b, c, value=0.5)
    g = T.addcdiv(f, e, (y * y + 1), value=-1.5)
    h = g.floor() + g.frac() + g.round() * 0 + (g % 0.7) + g.fmod(1.3)
    k = T.where(h > 0, (h.abs() + 1).rsqrt(), -h.cosh())
    m = k.square() + k.sgn() * k.reciprocal().nan_to_num(0.0)
    fd = x.detach() // 0.5
    loss = m.sum() + T.logical_and(a > 0, b < 0).sum() + fd.sum()
    loss.backward()
    bits = (fd.long() & 3) | (fd.long() ^ 1)
    return m, loss, h.isfinite().all(), x.trunc(), bits, ~(a > 0)


def _F(T):
    """Activation functions: torch.nn.functional, or fusegrad's functional forms."""
    if T.__name__ == "torch":
        return T.nn.functional
    from fusegrad import _functions

    return _functions


def prog_nn(T, x, w, b):
    F = _F(T)
    h = T.addmm(b, x, w)
    a = F.gelu(h) + F.silu(h) - F.softplus(h, beta=2.0) + F.mish(h) * 0.5
    a = a + F.leaky_relu(h, 0.2) + F.elu(h) + F.selu(h) + F.hardtanh(h, -0.5, 0.5)
    a = a + F.hardsigmoid(h) + F.hardswish(h) + F.logsigmoid(h) + F.gelu(h, approximate="tanh")
    n = a.norm(dim=1, keepdim=True)
    z = a / n
    v, m = T.var_mean(z, dim=0)
    s = T.std(z, dim=1, correction=0)
    lse = T.logsumexp(z, dim=1)
    loss = v.sum() + m.pow(2).sum() + s.mean() + lse.sum() + T.linalg.vector_norm(z, 3)
    loss.backward()
    return z, v, m, s, lse, loss


def prog_reductions(T, x):
    p = x.prod(1)
    q = x.amin(0) + x.amax(1, keepdim=True).squeeze(1).sum()
    mx = x.max(dim=1)
    mn = x.min(dim=0, keepdim=True)
    am = x.argmax() + x.argmin(dim=1).sum()
    cs = x.cumsum(1) + x.cumprod(0) * 0.1
    cm = x.cummax(1)
    md = x.median(dim=1)
    srt = x.sort(dim=0, descending=True)
    tk = x.topk(2, dim=1)
    kv = x.kthvalue(2, dim=1)
    ags = x.argsort(dim=1)
    loss = (p.sum() + q.sum() + mx.values.sum() + mn.values.sum() + cs.sum()
            + cm.values.sum() + md.values.sum() + srt.values[0].sum() + tk.values.sum()
            + kv.values.sum() + x.max() + x.min() + x.median() + x.var() + x.std(0).sum())
    loss.backward()
    return (p, q, mx.values, mx.indices, mn.values, am, cs, cm.indices, md.indices, srt.indices,
            tk.indices, kv.indices, ags, loss, x.all(), x.any(dim=0), x.count_nonzero(1))


def prog_shapes(T, x, y):
    a = x.flatten()
    b = a.unflatten(0, (2, -1))
    c = b.movedim(0, 1).contiguous().view(-1, 2)
    d = T.stack([c, c * 2], dim=1)
    e = d.flip(0).roll(1, 0)
    f = e.repeat(1, 2, 1)
    g = T.cat(f.split(1, dim=1), dim=0)
    h = g.chunk(2, dim=0)[1]
    k = h.squeeze(1).tril() + h.squeeze(1).triu(1) * 0.5
    m = k.t().diagonal() + T.diag_embed(k[:2, 0])[:, 0]
    n = y.expand_as(T.zeros(3, 4)) + y.broadcast_to((3, 4)).tile((1, 1))
    o = n.swapaxes(0, 1).reshape(2, 6) + n.t().flatten(0).view(2, 6)
    p, q = o.unbind(0)
    r = T.outer(p, q)
    loss = m.sum() + r.sum() + (o * o).mean() + e.narrow(0, 1, 2).sum()
    loss.backward()
    return a, b, c, d, e, g, k, m, o, r, loss


def prog_indexing(T, x, v):
    i = T.tensor([2, 0, 1, 1])
    a = x[i]
    b = x[:, T.tensor([3, 0])]
    c = x[x > 0]
    d = x[1:, [0, 2]]
    e = x[..., T.tensor([0, 1])].sum(1)
    f = x.index_select(1, T.tensor([0, 2])).gather(0, T.tensor([[0, 1], [2, 0]]))
    g = x.masked_fill(x < -0.5, 0.0).masked_select(x > -1)
    h = T.zeros_like(x).scatter_add(1, T.tensor([[0, 0], [1, 3], [2, 2]]), v)
    k = x.scatter(1, T.tensor([[1], [0], [3]]), 0.5)
    m = x.new_zeros((4, 4)).index_add(0, T.tensor([0, 2, 0]), x)
    n = x.clone()
    n[T.tensor([0, 2])] = n[T.tensor([0, 2])] * 3
    n[n > 1] = 0.0
    n[1, T.tensor([0, 3])] = T.tensor(7.0, dtype=n.dtype)
    nz = T.nonzero(x > 0)
    wh = T.where(x > 0)
    loss = (a.sum() + b.pow(2).sum() + c.sum() + d.sum() + e.sum() + f.sum() + g.sum()
            + h.sum() + k.sum() + m.sum() + n.sum())
    loss.backward()
    return a, b, c, d, e, f, g, h, k, m, n, nz, wh, loss


def prog_linalg(T, a, b, c):
    m = T.mm(a, b) + T.addmm(a.new_zeros(5), a, b, beta=0.5, alpha=2.0)
    n = T.bmm(c, c.transpose(1, 2))
    o = T.baddbmm(n, c, c.transpose(1, 2), alpha=0.5)
    e1 = T.einsum("ij,jk->ik", a, b)
    e2 = T.einsum("bij,bkj->bik", c, c)
    e3 = T.einsum("ii->i", m[:, :3])
    e4 = T.einsum("i,j->ij", a[0], b[:, 0])
    td = T.tensordot(c, c, dims=([1, 2], [1, 2]))
    mv = T.mv(a, b[:, 0]) + a @ b[:, 1]
    dt = T.dot(a[0], a[1])
    nrm = T.linalg.norm(m) + T.linalg.norm(a, dim=1).sum() + T.linalg.vector_norm(b, 1)
    loss = (m.sum() + o.sum() + e1.sum() + e2.sum() + e3.sum() + e4.sum() + td.sum()
            + mv.sum() + dt + nrm)
    loss.backward()
    return m, n, o, e1, e2, e3, e4, td, mv, dt, nrm, loss


def prog_inplace(T, x, y):
    a = x * 1.0
    a.mul_(2).add_(y).sub_(0.5)
    b = a.exp() * 1.0
    b.log_()
    b.tanh_()
    c = b.clone()
    c.sigmoid_()
    c = c * 1.5
    c.addcmul_(y, y, value=0.1)
    c.lerp_(a, 0.3)
    d = c.clone()
    d[0].mul_(3)
    d[:, 1:3].div_(2)
    d.masked_fill_(d > 0.9, 0.9)
    d.scatter_(1, T.tensor([[0], [1], [2]]), 0.0)
    d.index_add_(0, T.tensor([0, 0]), y[:2])
    d.abs_()
    e = d.cumsum(0)
    e.neg_()
    loss = e.sum() + d.sum() + c.sum()
    loss.backward()
    return a, b, c, d, e, loss


def prog_broadcast(T, x, y, z):
    a = x + y
    b = a * z - x / (z.abs() + 1)
    c = (b - y).pow(2).sum(-1, keepdim=True)
    d = b / (c + 1).sqrt()
    e = d.softmax(-1) * d.log_softmax(0)
    f = e.mean((0, 2)) + e.sum(2).amax(0)
    g = T.where(f > 0, f, f * 0.1).unsqueeze(0) * d.mean(0)[:, 0]
    h = 2 - g + 3 / (g.abs() + 1) + 2 ** g
    k = h.reshape(-1).sort().values[:2] + h.flatten().topk(2).values
    loss = k.sum() + d.var(dim=(0, 1)).sum() + b.prod(0).sum() * 0.01
    loss.backward()
    return a, b, c, d, e, f, g, h, k, loss


def prog_mixed(T, x, w):
    h = (x @ w).relu()
    h2 = h.view(2, 3, 4).permute(2, 0, 1)
    p = h2.mean(-1).t()
    q = p.cummax(1).values + p.cummin(0).values
    r = T.stack(q.unbind(1), 0).flip(1)
    s = r[T.tensor([1, 0]), :] + r[T.tensor([True, False, True, False])]
    t = T.cat([s, s.roll(1, 1)], 0).tril(1)
    u = t.logsumexp(0) + t.norm(p=1, dim=1).sum()
    sc = s.new_zeros((2, 4)).scatter(1, T.tensor([[0, 1], [2, 3]]), s)
    loss = u.sum() + sc.sum() + t.median() + t.mode(dim=0).values.sum() * 0
    loss.backward()
    return h2, p, q, r, s, t, u, sc, loss


def prog_factories(T, x):
    ar = T.arange(4, dtype=x.dtype)
    ls = T.linspace(-1, 1, 4, dtype=x.dtype)
    lg = T.logspace(0, 1, 4, dtype=x.dtype)
    ey = T.eye(3, 4, dtype=x.dtype)
    fl = T.full_like(x, 0.5) + T.zeros_like(x) + T.ones_like(x)
    gx, gy = T.meshgrid(ar, ls, indexing="ij")
    ti = T.tril_indices(3, 4)
    y = x * fl + ey - lg * ls
    z = y[ti[0], ti[1]]
    u, inv, cnt = T.unique((x * 2).round(), return_inverse=True, return_counts=True)
    bc = T.bincount(cnt)
    ss = T.searchsorted(T.sort(z).values.detach(), ar)
    bk = T.bucketize(ls.detach(), T.tensor([-0.5, 0.0, 0.5], dtype=x.dtype))
    cl = T.isclose(y, y + 1e-9)
    ok = T.allclose(y, y * 1.0) and T.equal(ss, ss)
    w = (gx * gy).sum() + z.pow(2).sum() + y.clip(-1, 1).sum() + (y.abs() + 1).log2().mean()
    w = w + y.log10().nan_to_num(0.0, 1.0, -1.0).sum() * 0.1 + T.sgn(y).sum()
    w.backward()
    return ar, ls, lg, ey, gx, gy, ti, y, z, u, inv, cnt, bc, ss, bk, cl, ok, w


PROGRAMS = [
    (prog_factories, lambda: _data(10, (3, 4))),
    (prog_pointwise, lambda: _data(1, (3, 4), (3, 4))),
    (prog_nn, lambda: _data(2, (5, 3), (3, 4), (4,))),
    (prog_reductions, lambda: _data(3, (3, 4))),
    (prog_shapes, lambda: _data(4, (3, 4), (4,))),
    (prog_indexing, lambda: _data(5, (3, 4), (3, 2))),
    (prog_linalg, lambda: _data(6, (3, 4), (4, 5), (2, 3, 4))),
    (prog_inplace, lambda: _data(7, (3, 4), (3, 4))),
    (prog_broadcast, lambda: _data(8, (2, 1, 4), (3, 4), (2, 3, 1))),
    (prog_mixed, lambda: _data(9, (6, 3), (3, 4))),
]


@pytest.mark.parametrize("prog,data", PROGRAMS, ids=[p.__name__ for p, _ in PROGRAMS])
def test_program(prog, data):
    check(prog, *data(), requires_grad=True, check_grad_fn=True, expect_error=False)
