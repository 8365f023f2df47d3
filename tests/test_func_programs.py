"""torch.func programs run with fusegrad in torch's place, against PyTorch run in the test:
the pytorch.org tutorials (per-sample gradients, model ensembling, Jacobians and Hessians,
neural tangent kernels, the whirlwind tour) and vmap/grad/jacrev/functional_call programs of
our own. Each case is a function of the library; both results (values, shapes, dtypes,
requires_grad, and where marked strides and grad_fn names) or both exceptions (type and
message) must agree."""

from __future__ import annotations

import copy
import functools
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad as fg  # noqa: E402

_rng = np.random.default_rng(0)
A = _rng.standard_normal((3, 4)).astype(np.float32)
S = _rng.standard_normal((3, 4, 4)).astype(np.float32)
X4 = _rng.standard_normal((4, 1, 10, 10)).astype(np.float32)
XM = _rng.standard_normal((5, 6)).astype(np.float32)

CASES: dict = {}
STRICT: set = set()  # cases whose strides and grad_fn names are compared too


def case(strict: bool = False):
    def register(fn):
        CASES[fn.__name__] = fn
        if strict:
            STRICT.add(fn.__name__)
        return fn
    return register


def _desc(obj, strict: bool):
    if isinstance(obj, (torch.Tensor, fg.Tensor)):
        out = ["T", obj.detach().numpy().astype(np.float64), str(obj.dtype).split(".")[-1],
               tuple(obj.shape), obj.requires_grad]
        if strict:
            node = obj.grad_fn
            out += [tuple(obj.stride()), None if node is None else type(node).__name__]
        return tuple(out)
    if isinstance(obj, dict):
        return "dict", [(k, _desc(v, strict)) for k, v in obj.items()]
    if isinstance(obj, (tuple, list)):
        return type(obj).__name__, [_desc(v, strict) for v in obj]
    if isinstance(obj, (torch.Size, fg.Size)):
        return "size", tuple(obj)
    return "value", repr(obj)


def _same(got, want, where="result"):
    assert got[0] == want[0], (where, got, want)
    if want[0] == "T":
        assert got[2:] == want[2:], (where, got[2:], want[2:])
        np.testing.assert_allclose(got[1], want[1], rtol=2e-5, atol=1e-6, equal_nan=True,
                                   err_msg=where)
    elif want[0] == "dict":
        assert [k for k, _ in got[1]] == [k for k, _ in want[1]], where
        for (k, g), (_, w) in zip(got[1], want[1]):
            _same(g, w, f"{where}[{k!r}]")
    elif isinstance(want[1], list):
        assert len(got[1]) == len(want[1]), where
        for i, (g, w) in enumerate(zip(got[1], want[1])):
            _same(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


def _run(fn, lib):
    torch.manual_seed(0)
    fg.manual_seed(0)
    try:
        return "ok", fn(lib)
    except Exception as e:  # noqa: BLE001 - the exception itself is compared
        return "raised", (type(e).__name__, str(e))


# ---------------------------------------------------------------- the tutorials


def _init(model, lib):
    """Parameters from a fixed NumPy stream, the same in both libraries."""
    g = np.random.default_rng(1)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(g.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    return model


def _cnn(lib):
    nn = lib.nn
    F = nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 6, 3, 1)
            self.fc1 = nn.Linear(6 * 2 * 2, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = lib.flatten(F.relu(self.conv2(x)), 1)
            return F.log_softmax(self.fc1(x), dim=1)

    return _init(Net(), lib)


@case()
def per_sample_grads_cnn(lib):
    func = lib.func
    model = _cnn(lib)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss_fn(params, buffers, sample, target):
        pred = func.functional_call(model, (params, buffers), (sample.unsqueeze(0),))
        return lib.nn.functional.nll_loss(pred, target.unsqueeze(0))

    x, y = lib.tensor(X4), lib.tensor([1, 0, 3, 2])
    per_sample = func.vmap(func.grad(loss_fn), in_dims=(None, None, 0, 0))(
        params, buffers, x, y)
    chunked = func.vmap(func.grad_and_value(loss_fn), in_dims=(None, None, 0, 0),
                        chunk_size=3)(params, buffers, x, y)
    return per_sample, chunked


@case()
def per_sample_grads_mlp(lib):
    nn, func = lib.nn, lib.func
    m = _init(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)), lib)

    def f(p, x, y):
        return nn.functional.mse_loss(func.functional_call(m, p, x), y)

    g = func.vmap(func.grad(f), (None, 0, 0))(dict(m.named_parameters()), lib.tensor(XM),
                                               lib.tensor(XM[:, :3]))
    return g, {k: v.grad_fn is not None for k, v in g.items()}


@case()
def model_ensembling(lib):
    nn, func = lib.nn, lib.func
    models = [_init(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), lib)
              for _ in range(3)]
    for i, m in enumerate(models):
        with lib.no_grad():
            for p in m.parameters():
                p.mul_(i + 1)
    params, buffers = func.stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def fm(p, b, x):
        return func.functional_call(base, (p, b), (x,))

    same_batch = func.vmap(fm, in_dims=(0, 0, None))(params, buffers, lib.tensor(XM))
    own_batch = func.vmap(fm)(params, buffers, lib.tensor(np.stack([XM, XM * 2, XM * 3])))
    return same_batch, own_batch, {k: (v.requires_grad, v.is_leaf) for k, v in params.items()}


@case()
def ensembling_eval_batch_norm(lib):
    nn, func = lib.nn, lib.func
    models = [_init(nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3)),
                    lib).eval() for _ in range(2)]
    params, buffers = func.stack_module_state(models)
    out = func.vmap(lambda p, b, x: func.functional_call(models[0], (p, b), (x,)),
                    in_dims=(0, 0, None))(params, buffers, lib.tensor(XM))
    return out, sorted(buffers)


@case()
def jacobians_hessians(lib):
    func, F = lib.func, lib.nn.functional
    g = np.random.default_rng(2)
    weight = lib.tensor(g.standard_normal((5, 5)).astype(np.float32))
    bias = lib.tensor(g.standard_normal(5).astype(np.float32))
    x = lib.tensor(g.standard_normal(5).astype(np.float32))
    xb = lib.tensor(g.standard_normal((3, 5)).astype(np.float32))

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    return (func.jacrev(predict, argnums=2)(weight, bias, x),
            func.jacfwd(predict, argnums=2)(weight, bias, x),
            func.jacrev(predict, argnums=(0, 1))(weight, bias, x),
            func.hessian(predict, argnums=2)(weight, bias, x),
            func.jacrev(func.jacrev(predict, argnums=2), argnums=2)(weight, bias, x),
            func.vmap(func.jacrev(predict, argnums=2), in_dims=(None, None, 0))(
                weight, bias, xb),
            func.jacrev(predict, argnums=2)(weight, bias, xb),
            func.vmap(func.hessian(predict, argnums=2), in_dims=(None, None, 0))(
                weight, bias, xb))


@case()
def vjp_jvp_linearize(lib):
    func = lib.func
    x = lib.tensor(XM[0])

    def f(x):
        return (x.sin() * x).sum(0, keepdim=True) * x

    out, vjp_fn = func.vjp(f, x)
    o2, t2 = func.jvp(f, (x,), (lib.ones_like(x),))
    o3, jvp_fn = func.linearize(f, x)
    return out, vjp_fn(lib.ones_like(out)), o2, t2, o3, jvp_fn(lib.ones_like(x))


@case()
def neural_tangent_kernel(lib):
    func, nn = lib.func, lib.nn
    m = _init(nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 2)), lib)
    params = {k: v.detach() for k, v in m.named_parameters()}
    x1, x2 = lib.tensor(XM[:3]), lib.tensor(XM[3:])

    def fnet_single(params, x):
        return func.functional_call(m, params, (x.unsqueeze(0),)).squeeze(0)

    jac1 = [j.flatten(2) for j in func.vmap(func.jacrev(fnet_single), (None, 0))(
        params, x1).values()]
    jac2 = [j.flatten(2) for j in func.vmap(func.jacrev(fnet_single), (None, 0))(
        params, x2).values()]
    contraction = lib.stack([lib.einsum("Naf,Mbf->NMab", j1, j2)
                             for j1, j2 in zip(jac1, jac2)]).sum(0)

    def get_ntk(x1, x2):
        output, vjp_fn = func.vjp(lambda p: fnet_single(p, x1), params)

        def get_ntk_slice(vec):
            return func.jvp(lambda p: fnet_single(p, x2), (params,), vjp_fn(vec))[1]

        basis = lib.eye(output.numel(), dtype=output.dtype).view(output.numel(), -1)
        return func.vmap(get_ntk_slice)(basis)

    products = func.vmap(func.vmap(get_ntk, (None, 0)), (0, None))(x1, x2)
    return contraction, products


@case()
def whirlwind_tour(lib):
    func = lib.func
    g = np.random.default_rng(3)
    x = lib.tensor(0.7)
    weights = lib.tensor(g.standard_normal(5).astype(np.float32), requires_grad=True)
    examples = lib.tensor(g.standard_normal((3, 5)).astype(np.float32))
    targets = lib.tensor(g.standard_normal(3).astype(np.float32))

    def compute_loss(weights, example, target):
        return ((example.dot(weights) - target) ** 2).mean()

    xx = lib.tensor(g.standard_normal(5).astype(np.float32))
    return (func.grad(lib.sin)(x), func.grad(func.grad(lib.sin))(x),
            func.vmap(lambda v: v.dot(weights).relu())(examples),
            func.vmap(func.grad(compute_loss), in_dims=(None, 0, 0))(
                weights, examples, targets),
            func.jacrev(lib.sin)(xx), func.jacfwd(lib.sin)(xx), func.hessian(lib.sin)(xx))


@case()
def maml_grad_of_grad(lib):
    nn, func = lib.nn, lib.func
    m = nn.Linear(4, 1)
    with lib.no_grad():
        m.weight.copy_(lib.tensor(A[:1]))
        m.bias.fill_(0.1)
    params = dict(m.named_parameters())
    x, y = lib.tensor(A), lib.tensor(A[:, :1])

    def inner_loss(p, x, y):
        return nn.functional.mse_loss(func.functional_call(m, p, (x,)), y)

    def outer(p, x, y):
        g = func.grad(inner_loss)(p, x, y)
        return inner_loss({k: p[k] - 0.1 * g[k] for k in p}, x, y)

    meta_grad = func.grad(outer)(params, x, y)
    loss = outer(params, x, y)
    loss.backward()
    per_task = func.vmap(outer, in_dims=(None, 0, 0))(
        params, x[:, None].expand(3, 2, 4), y[:, None].expand(3, 2, 1))
    return meta_grad, loss, {k: v.grad for k, v in params.items()}, per_task


# ---------------------------------------------------------------- vmap


@case()
def vmap_in_out_dims(lib):
    v = lib.vmap
    a = lib.tensor(A)
    return (v(lambda x, y: x * y, in_dims=(0, 1))(a, lib.tensor(A.T.copy())),
            v(lambda x, y: x + y, in_dims=(1, None), out_dims=1)(a, lib.tensor(A[:, 0])),
            v(lambda x: (x.sum(), x * 2), out_dims=(0, 1))(a),
            v(lambda x: {"a": x, "b": x.sum()})(a),
            v(lambda d: d["x"] @ d["y"], in_dims=({"x": 0, "y": None},))(
                {"x": lib.tensor(S), "y": lib.ones(4, 2)}),
            v(lambda x: x, out_dims=-1)(a),
            v(lambda x, k: x * k, in_dims=(0, None))(a, 3.0),
            v(lambda x, *, scale: x * scale)(a, scale=lib.tensor(2.0)),
            v(lambda pair: pair[0] + pair[1])([a, a]),
            v(lambda x: [x, x * 2])(a),
            v(lambda x: ((x, x.sum()), {"k": x}), out_dims=((1, 0), {"k": -1}))(a),
            v(lambda p, x: p["a"] * x + p["b"], in_dims=({"a": None, "b": 0}, 1))(
                {"a": lib.tensor(A[0, 0]), "b": lib.tensor(A[:, 0])}, a.t()),
            v(lambda x: (x > 0, x.argmax(), x.long()))(a),
            v(lib.Tensor.sum)(a), v(lib.dot)(a, a),
            v(lambda x: x * 2)(lib.ones(0, 3)),
            v(lambda x: (x, x), out_dims=(True, False))(a))


@case(strict=True)
def vmap_out_dims_strides(lib):
    a = lib.tensor(A)
    return (lib.vmap(lambda x: x * 2, out_dims=1)(a),
            lib.vmap(lambda x: (x, x.sum()), out_dims=(1, 0))(lib.tensor(S)))


@case()
def vmap_nested_and_chunks(lib):
    v = lib.vmap
    c = lib.tensor(S)
    return (v(v(lambda x: x.sum()))(c),
            v(v(lambda x, y: x * y, in_dims=(0, None)), in_dims=(None, 0))(
                lib.tensor(A), lib.tensor(A[::-1].copy())),
            v(v(v(lambda x: x ** 2)), in_dims=2)(c),
            v(lambda x: v(lambda y: y @ x)(x))(c),
            [v(lambda x: x.softmax(-1), chunk_size=k)(c) for k in (1, 2, 5)])


@case(strict=True)
def vmap_unbatched_outputs_expand(lib):
    """An output that does not depend on a mapped input is computed once and expanded."""
    w = lib.tensor(A[0], requires_grad=True)
    y = lib.tensor(A[1])
    x = lib.tensor(A)
    return (lib.vmap(lambda x, w, y: (x, w * 2, y + 1), in_dims=(0, None, None))(x, w, y),
            lib.vmap(lambda x, y: (x * y, y.sum()), in_dims=(0, None))(x, y),
            lib.vmap(lambda x, y: y, in_dims=(0, None))(x, y),
            lib.vmap(lambda x, y: y, in_dims=(0, None), out_dims=None)(x, y) is y,
            lib.vmap(lambda x: x.new_ones(()))(x),
            lib.vmap(lib.vmap(lambda a, b: a * 0 + b, in_dims=(0, None)),
                     in_dims=(None, 0))(x[0], x))


@case(strict=True)
def vmap_tensors_from_outside(lib):
    """A tensor `func` closes over is PyTorch's unbatched tensor: an in-place op on it with
    no batched argument happens once, and what is computed from it only is expanded."""
    counter = lib.zeros(())
    w = lib.tensor(A[0], requires_grad=True)
    y = lib.tensor(A[1])

    def f(x):
        counter.add_(1)
        return x + counter, w * 2, y.sum(), counter.clone()

    return lib.vmap(f)(lib.tensor(A)), counter


@case()
def vmap_unbatched_output_is_expanded(lib):
    r = lib.vmap(lambda x, y: y * 2, in_dims=(0, None))(lib.ones(5), lib.ones(4))
    r.add_(1)
    return r


@case()
def vmap_randomness(lib):
    a = lib.tensor(A)
    same = lib.vmap(lambda x: x * 0 + lib.rand(4), randomness="same")(a)
    different = lib.vmap(lambda x: x * 0 + lib.rand(4), randomness="different")(a)
    drop_same = lib.vmap(lambda x: lib.nn.functional.dropout(x * 0 + 1, 0.5),
                         randomness="same")(lib.ones(3, 50))
    drop_diff = lib.vmap(lambda x: lib.nn.functional.dropout(x * 0 + 1, 0.5),
                         randomness="different")(lib.ones(3, 50))
    like = lib.vmap(lambda x: lib.randn_like(x), randomness="same")(a)
    bern = lib.vmap(lambda p: lib.bernoulli(p), randomness="different")(lib.full((3, 50), 0.5))
    inplace_same = lib.vmap(lambda x: x.clone().normal_(), randomness="same")(a)
    chunked = lib.vmap(lambda x: lib.rand(4), randomness="different", chunk_size=2)(a)
    eq = [bool((r[0] == r[1]).all()) for r in (same, different, drop_same, drop_diff, like,
                                              bern, chunked)]
    return eq, inplace_same.shape, lib.vmap(
        lambda x: lib.nn.functional.dropout(x, 0.5, training=False))(a)


@case()
def vmap_random_values(lib):
    """fusegrad's generator is PyTorch's: the values of one random op under each randomness
    agree (a batch's draws in one call, as PyTorch draws them)."""
    draws = (lambda x: x + lib.rand(10), lambda x: lib.rand_like(x),
             lambda x: x.clone().uniform_(), lambda x: lib.nn.functional.dropout(x + 1, 0.3),
             lambda x: x + lib.randint(0, 10, (10,)), lambda x: x + lib.randperm(10),
             lambda x: x + lib.rand(()), lambda x: x[:4] + lib.randn(4))
    batched_draws = (lambda x: lib.bernoulli(x + 0.5), lambda x: lib.multinomial(x + 1, 3))
    x = lib.zeros(3, 10)
    return ([lib.vmap(f, randomness="different")(x) for f in draws + batched_draws],
            [lib.vmap(f, randomness="same")(x) for f in draws])


@case()
def vmap_inplace_and_views(lib):
    def f(x):
        y = x.clone()
        y[0] = 5
        y.mul_(2)
        z = y.view(2, 2)
        z.add_(1)
        return y, z.t()

    def g(x):
        x.add_(1)
        return x

    a = lib.tensor(A)
    return lib.vmap(f)(lib.tensor(A)), lib.vmap(g)(a), a


@case()
def vmap_fill_tensors_made_like_inputs(lib):
    """Tensors made from a batched one (`new_zeros`, `empty_like`) are batched: writing an
    example's values into them is allowed."""
    def via_new_zeros(x):
        out = x.new_zeros(4)
        out.copy_(x)
        return out

    def via_empty_like(x):
        out = lib.empty_like(x)
        out.copy_(x * 2)
        return out

    def via_zeros_like(x):
        out = lib.zeros_like(x)
        out[1:3] = x[:2]
        return out

    a = lib.tensor(A)
    return lib.vmap(via_new_zeros)(a), lib.vmap(via_empty_like)(a), lib.vmap(via_zeros_like)(a)


@case()
def vmap_views_of_inputs(lib):
    """Views of a mapped input come back as views of it (writes reach the input; `x` itself
    for the identity), with PyTorch's strides."""
    x = lib.arange(12.0).reshape(3, 4)
    sliced = lib.vmap(lambda t: t[1:])(x)
    sliced.add_(100)
    others = (lib.vmap(lambda t: t.view(2, 2).t())(x), lib.vmap(lambda t: t, in_dims=1)(x),
              lib.vmap(lambda t: t[::2], out_dims=1)(x), lib.vmap(lambda t: t.view(lib.int32))(x),
              lib.vmap(lambda t: x[0])(x), lib.vmap(lambda t: t.unsqueeze(0).expand(2, 4))(x))
    y = lib.arange(24.0).reshape(4, 6)
    of_view = lib.vmap(lambda t: t[1:])(y[1:, ::2])
    of_view.mul_(-1)
    ones = lib.ones(3, 4)
    leaf = lib.ones(3, 4, requires_grad=True)
    return (x, sliced, others, [t.stride() for t in (sliced,) + others], y, of_view.stride(),
            lib.vmap(lambda t: t)(x) is x, lib.vmap(lambda t: t.add_(1))(ones) is ones, ones,
            lib.vmap(lambda t: t)(leaf) is leaf)


@case()
def vmap_indexing(lib):
    v = lib.vmap
    a = lib.tensor(S)
    idx = lib.tensor([2, 0])
    mask = lib.tensor([True, False, True, True])
    return (v(lambda x: x[1:, ::2])(a), v(lambda x: x[idx])(a),
            v(lambda x, i: x[i], in_dims=(0, 0))(a, lib.tensor([0, 3, 1])),
            v(lambda x: x[..., None, 0])(a), v(lambda x: x[:, [1, 3]])(a),
            v(lambda x, i: x.gather(0, i))(lib.tensor(A), lib.tensor([[1, 0], [2, 3], [0, 0]])),
            v(lambda x, i: x.index_select(0, i), in_dims=(0, None))(a, idx),
            v(lambda x: x[mask])(lib.tensor(A)))


@case()
def vmap_layer_ops(lib):
    v, F = lib.vmap, lib.nn.functional
    g = np.random.default_rng(5)

    def t(*s):
        return lib.tensor(g.standard_normal(s).astype(np.float32))

    rm, rv, wt, bs = t(4), t(4).abs() + 0.5, t(4), t(4)
    emb = t(10, 3)
    return (v(lib.matmul, in_dims=(0, None))(t(3, 2, 4), t(4, 5)),
            v(lib.bmm)(t(3, 2, 2, 4), t(3, 2, 4, 3)),
            v(lambda a, k: F.conv2d(a, k, padding=1), in_dims=(0, None))(
                t(3, 2, 2, 5, 5), t(4, 2, 3, 3)),
            v(lambda a, k: F.conv2d(a, k), in_dims=(None, 0))(t(2, 2, 5, 5), t(3, 4, 2, 3, 3)),
            v(lambda a: F.batch_norm(a, rm, rv, wt, bs, training=False))(t(3, 2, 4, 3)),
            v(lambda a: F.layer_norm(a, (4,), wt, bs))(t(3, 2, 4)),
            v(lambda i: F.embedding(i, emb))(lib.tensor([[1, 2], [3, 9], [0, 0]])),
            v(lambda a, y: F.cross_entropy(a, y))(t(3, 2, 5),
                                                  lib.tensor([[1, 4], [0, 2], [3, 3]])),
            v(lambda a: F.softmax(a, -1))(t(3, 2, 4)),
            v(lambda a: F.log_softmax(a, 0))(t(3, 2, 4)),
            v(lambda q: F.scaled_dot_product_attention(q, q, q))(t(3, 4, 4)),
            v(lib.sort)(t(3, 4)), v(lambda a: lib.topk(a, 2))(t(3, 4)),
            v(lib.linalg.inv)(t(3, 4, 4) + lib.eye(4) * 6))


@case()
def batch_norm_replaced(lib):
    bn = lib.nn.BatchNorm1d(4)
    lib.func.replace_all_batch_norm_modules_(bn)
    out = lib.vmap(bn)(lib.tensor(S[:2, :3]))
    nested = lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.Sequential(lib.nn.BatchNorm1d(3)),
                               lib.nn.BatchNorm2d(2))
    same = lib.func.replace_all_batch_norm_modules_(nested) is nested
    return (out, bn.running_mean, bn.running_var, bn.num_batches_tracked,
            bn.track_running_stats, same,
            [(type(m).__name__, m.running_mean, m.track_running_stats)
             for m in nested.modules() if "BatchNorm" in type(m).__name__])


@case()
def vmap_grad_results_used_outside(lib):
    f = lib.func
    w = lib.tensor(A[0], requires_grad=True)
    g = f.vmap(f.grad(lambda w, x: (w * x).sum() ** 2), in_dims=(None, 0))(w, lib.tensor(A))
    out = f.vmap(lambda x: (x * w).sum())(lib.tensor(A))
    loss = out.pow(2).sum()
    loss.backward()
    return g.sum(0) * 3, g.mean(), loss, w.grad, out.shape, out[0]


@case(strict=True)
def vmap_grad_strides(lib):
    w = lib.tensor(A[0])
    f = lib.func
    return (lib.vmap(f.grad(lambda x: (x * w).sum()))(lib.tensor(A)),
            lib.vmap(f.grad(lambda x: (x * w).sum() + (x * w).sum() * 2))(lib.tensor(A)))


# ---------------------------------------------------------------- grad, jacobians


@case()
def grad_aux_and_argnums(lib):
    f = lib.func

    def fn(x, y, z):
        out = (x * y).sin().sum() + z
        return out, {"o": out, "xy": x * y}

    x, y, z = lib.tensor(A[0]), lib.tensor(A[1]), lib.tensor(0.5)
    return (f.grad(fn, argnums=(0, 1), has_aux=True)(x, y, z),
            f.grad(fn, argnums=(2, 0), has_aux=True)(x, y, z),
            f.grad_and_value(fn, argnums=-1, has_aux=True)(x, y, z),
            f.grad(lambda d: (d["a"] ** 2).sum() + d["b"][0].sum())({"a": x, "b": [y]}))


@case()
def grad_of_grad(lib):
    f = lib.func
    x = lib.tensor(A[0])
    outer = lib.tensor(A[1], requires_grad=True)
    g = f.grad(lambda y: (y * outer).pow(2).sum())(x)
    g.sum().backward()
    return (f.grad(lambda x: f.grad(lambda y: (y ** 3).sum())(x).sum())(x),
            f.grad(f.grad(lambda t: t.sin() * t.exp()))(lib.tensor(0.3)),
            f.grad(f.grad(f.grad(lambda t: t ** 4)))(lib.tensor(1.5)),
            g, g.sum() * 2, outer.grad)


@case()
def jacobians_of_dicts(lib):
    f = lib.func
    d = {"w": lib.tensor(A), "b": lib.tensor(A[0])}
    x = lib.tensor(A[1])

    def fn(p, x):
        return (p["w"] @ x).tanh() * p["b"][:3]

    return (f.jacrev(fn)(d, x), f.jacfwd(fn)(d, x),
            f.jacrev(lambda p: {"o": fn(p, x), "s": fn(p, x).sum()})(d),
            f.jacrev(fn, argnums=(0, 1))(d, x)[0],
            f.hessian(lambda x: (x.sin() * x.cos()).sum())(x),
            f.jacrev(lambda x: (x ** 2, x.sum()), has_aux=True)(x),
            f.jacfwd(lambda x: (x ** 2, {"s": x.sum()}), has_aux=True)(x),
            f.jacrev(lambda a, b: (a * b, a + b), argnums=(0, 1))(x, x * 2),
            f.hessian(lambda a, b: (a ** 2 * b).sum() + (a * b.sin()).sum(), argnums=(0, 1))(
                x, d["b"]))


@case()
def transforms_compose(lib):
    f = lib.func
    x = lib.tensor(A)
    out, vjp_fn = f.vjp(lib.vmap(lambda t: t.softmax(0)), x)
    lin_out, jvp_fn = f.linearize(lambda a, b: (a * b, a.exp()), x[0], x[1])
    return (f.jvp(f.grad(lambda t: (t.sin() * t).sum()), (x[0],), (lib.ones(4),)),
            out, vjp_fn(lib.ones_like(out)), lin_out, jvp_fn(lib.ones(4), lib.zeros(4)),
            lib.vmap(lambda t: f.jvp(lambda a: a.sin(), (t,), (lib.ones_like(t),)))(x),
            f.vjp(lambda a, b: ((b @ a), {"a": a.sum()}), x[0], x, has_aux=True)[::2])


@case(strict=True)
def transform_results_history(lib):
    """grad_fn of results that keep history, and of what is computed from them."""
    f = lib.func
    w = lib.tensor(A[0], requires_grad=True)
    x = lib.tensor(A[1])
    j = f.jacrev(lambda x: x * w)(x)
    o, t = f.jvp(lambda x: x * w, (x,), (lib.ones(4),))
    jf, aux = f.jacfwd(lambda x: (x * w, w * 3), has_aux=True)(x)
    value = f.grad_and_value(lambda x: (x * w).sum())(x)[1]
    return (j, j + 1, f.hessian(lambda x: (x * w).pow(3).sum())(x).sum(), o, t * 2,
            f.jvp(lambda a: w, (x,), (x,))[0], jf, aux, value,
            f.vjp(lambda x: x * w, x)[0], f.grad(lambda x: ((x * w).sum(), w * 2),
                                                  has_aux=True)(x)[1])


@case()
def transforms_under_grad_modes(lib):
    """Transforms differentiate under `no_grad` and `inference_mode` (their function runs
    with grad on and inference mode off), and their results reach an outer graph."""
    f = lib.func
    x = lib.tensor(A[0])

    def cube(t):
        return (t ** 3).sum()

    def half_constant(t):
        with lib.no_grad():
            c = t * 2
        return (c * t).sum() + (t.detach() * t).sum()

    with lib.no_grad():
        under_no_grad = (f.grad(cube)(x), f.jacrev(lib.sin)(x),
                         lib.vmap(f.grad(cube))(lib.tensor(A)))
    with lib.inference_mode():
        under_inference = (f.grad(cube)(x), f.jacrev(lib.sin)(x), f.jacfwd(lib.sin)(x),
                           f.vjp(lib.sin, x)[1](x), f.jvp(lib.sin, (x,), (x,)))
        inference_input = f.grad(cube)(lib.ones(3))
    leaf = lib.tensor(A[1], requires_grad=True)
    jac = f.jacrev(lambda t: t.sin() * t)(leaf)
    hess = f.hessian(lambda t: (t.sin() * t).sum())(leaf)
    (jac.sum() + hess.trace()).backward()
    return (under_no_grad, under_inference, [t.is_inference() for t in under_inference[:3]],
            inference_input, inference_input.is_inference(), f.grad(half_constant)(x), jac,
            hess, leaf.grad)


# ---------------------------------------------------------------- functional_call


def _tied(lib):
    nn = lib.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 4)
            self.out = nn.Linear(4, 5, bias=False)
            self.out.weight = self.emb.weight
            self.register_buffer("scale", lib.tensor(2.0))

        def forward(self, i):
            return self.out(self.emb(i)) * self.scale

    m = M()
    with lib.no_grad():
        m.emb.weight.copy_(lib.tensor(np.arange(20, dtype=np.float32).reshape(5, 4) / 10))
    return m


@case()
def functional_call_tied_and_buffers(lib):
    fc = lib.func.functional_call
    m = _tied(lib)
    w = lib.ones(5, 4)
    i = lib.tensor([1, 3])
    lin = lib.nn.Linear(4, 2)
    rm, rv = lib.zeros(4), lib.ones(4)
    bn = lib.nn.BatchNorm1d(4)
    bn_out = fc(bn, {"running_mean": rm, "running_var": rv}, (lib.tensor(A),))
    return (fc(m, {"emb.weight": w}, (i,)), fc(m, {"out.weight": w}, (i,)),
            fc(m, {"emb.weight": w}, (i,), tie_weights=False),
            fc(m, {"scale": lib.tensor(3.0)}, i), m(i), m.scale,
            fc(lin, {"weight": lib.ones(2, 4), "bias": lib.ones(2)}, (lib.ones(4),),
               strict=True),
            fc(lin, {"weight": lib.ones(2, 4), "foo": lib.ones(1)}, (lib.ones(4),)),
            hasattr(lin, "foo"), bn_out, rm, rv, bn.running_mean, bn.num_batches_tracked)


@case()
def functional_call_kwargs_and_grad(lib):
    m = lib.nn.MultiheadAttention(4, 2, batch_first=True)
    p = {k: v.detach() * 0 + 0.1 for k, v in m.named_parameters()}
    x = lib.tensor(A[None])
    lin = lib.nn.Linear(4, 2)
    q = {k: v.detach() * 0 + 0.2 for k, v in lin.named_parameters()}
    g = lib.func.grad(lambda q, x: lib.func.functional_call(lin, q, (x,)).pow(2).sum())(
        q, lib.tensor(A))
    return lib.func.functional_call(m, p, (x, x, x), {"need_weights": False}), g


# ---------------------------------------------------------------- errors


def _errors():
    def ones(lib):
        return lib.tensor(A)

    def tied_conflict(lib):
        return lib.func.functional_call(
            _tied(lib), {"emb.weight": lib.ones(5, 4), "out.weight": lib.zeros(5, 4)},
            (lib.tensor([1]),))

    return {
        "nonzero": lambda L: L.vmap(lambda x: x.nonzero())(ones(L)),
        # Reads of a batched tensor into Python values
        "item": lambda L: L.vmap(lambda x: x.sum().item())(ones(L)),
        "float": lambda L: L.vmap(lambda x: L.tensor(float(x.sum())))(ones(L)),
        "control_flow": lambda L: L.vmap(lambda x: x if x.sum() > 0 else -x)(ones(L)),
        "tolist": lambda L: L.vmap(lambda x: L.tensor(x.tolist()))(ones(L)),
        "data": lambda L: L.vmap(lambda x: (x * 2).data)(ones(L)),
        "unique": lambda L: L.vmap(lambda x: x.unique())(ones(L)),
        "boolean_mask": lambda L: L.vmap(lambda x: x[x > 0])(ones(L)),
        "boolean_mask_put": lambda L: L.vmap(lambda x: x.clone().__setitem__(x > 0, 0.0))(
            ones(L)),
        "batch_norm_training": lambda L: L.vmap(L.nn.BatchNorm1d(4))(L.tensor(S[:2, :3])),
        "random_error": lambda L: L.vmap(lambda x: x + L.rand(()))(ones(L)),
        "dropout_error": lambda L: L.vmap(lambda x: L.nn.functional.dropout(x, 0.5))(ones(L)),
        "random_in_grad": lambda L: L.vmap(L.func.grad(lambda x: (x * L.rand(4)).sum()))(
            ones(L)),
        "jacfwd_random": lambda L: L.func.jacfwd(lambda x: x * L.rand(4))(ones(L)[0]),
        "same_batched_input": lambda L: L.vmap(lambda p: L.bernoulli(p), randomness="same")(
            L.full((3, 5), 0.5)),
        "same_batched_inplace_arg": lambda L: L.vmap(
            lambda x: x.clone().bernoulli_(x * 0.5), randomness="same")(ones(L)),
        "randomness_value": lambda L: L.vmap(lambda x: x, randomness="foo")(ones(L)),
        "out_none_batched": lambda L: L.vmap(lambda x: x * 0, out_dims=None)(ones(L)),
        "out_none_partial_name": lambda L: L.vmap(
            functools.partial(lambda x, y: x * y, y=2), out_dims=None)(ones(L)),
        "different_inplace_random_outside": lambda L: L.vmap(
            functools.partial(lambda z, x: z.normal_() + x, L.zeros(4)),
            randomness="different")(ones(L)),
        "batched_into_outside": lambda L: L.vmap(
            functools.partial(lambda z, x: z.mul_(x), L.zeros(4)))(ones(L)),
        "out_none_random": lambda L: L.vmap(lambda x: L.rand(2), randomness="different",
                                            out_dims=None)(ones(L)),
        "sizes": lambda L: L.vmap(lambda x, y: x + y)(ones(L), L.ones(4, 4)),
        "in_dims_structure": lambda L: L.vmap(lambda x, y: x + y, in_dims=(0,))(
            ones(L), L.ones(3, 4)),
        "in_dims_range": lambda L: L.vmap(lambda x: x, in_dims=2)(ones(L)),
        "in_dims_non_tensor": lambda L: L.vmap(lambda x, k: x, in_dims=(0, 0))(ones(L), 2),
        "in_dims_bool": lambda L: L.vmap(lambda x: x, in_dims=True)(L.ones(2, 3)),
        "in_dims_bool_range": lambda L: L.vmap(lambda x: x, in_dims=(True,))(L.ones(3)),
        "in_dims_list": lambda L: L.vmap(lambda x: x, in_dims=[0])(ones(L)),
        "no_tensor": lambda L: L.vmap(lambda x: x, in_dims=None)(ones(L)),
        "out_dims_structure": lambda L: L.vmap(lambda x: (x, x), out_dims=(0, 0, 0))(ones(L)),
        "out_dims_range": lambda L: L.vmap(lambda x: x, out_dims=2)(ones(L)),
        "out_dims_type": lambda L: L.vmap(lambda x: x, out_dims="a")(ones(L)),
        "non_tensor_output": lambda L: L.vmap(lambda x: 3)(ones(L)),
        "chunk_size": lambda L: L.vmap(lambda x: x, chunk_size=0)(ones(L)),
        "inplace_unbatched_self": lambda L: L.vmap(lambda y, z: z.mul_(y), in_dims=(0, None))(
            ones(L), L.zeros(4)),
        "grad_non_scalar": lambda L: L.func.grad(lambda x: x * 2)(ones(L)),
        "grad_non_tensor": lambda L: L.func.grad(lambda x: 2.0)(ones(L)),
        "grad_aux_missing": lambda L: L.func.grad(lambda x: x.sum(), has_aux=True)(ones(L)),
        "grad_aux_non_tensor": lambda L: L.func.grad(lambda x: (x.sum(), 3), has_aux=True)(
            ones(L)),
        "grad_argnums": lambda L: L.func.grad(lambda x: x.sum(), argnums=1)(ones(L)),
        "grad_argnums_list": lambda L: L.func.grad(lambda x: x.sum(), argnums=[0])(ones(L)),
        "vjp_shape": lambda L: L.func.vjp(lambda a: a * 2, ones(L)[0])[1](L.ones(3)),
        "vjp_structure": lambda L: L.func.vjp(lambda a: (a * 2, a), ones(L)[0])[1](L.ones(4)),
        "jvp_primals": lambda L: L.func.jvp(lambda a: a, ones(L), ones(L)),
        "jvp_shape": lambda L: L.func.jvp(lambda a: a, (ones(L)[0],), (L.ones(3),)),
        "jacrev_integer_output": lambda L: L.func.jacrev(lambda x: (x > 0).long())(ones(L)),
        "vjp_integer_output": lambda L: L.func.vjp(lambda x: (x * 2, x.long()), ones(L)),
        "jacrev_chunk": lambda L: L.func.jacrev(lambda x: x, chunk_size=0)(L.ones(2)),
        "functional_call_tied": tied_conflict,
        "functional_call_missing": lambda L: L.func.functional_call(
            _tied(L), {"emb.weight": L.ones(5, 4)}, (L.tensor([1]),), strict=True),
        "functional_call_unexpected": lambda L: L.func.functional_call(
            L.nn.Linear(4, 2), {"weight": L.ones(2, 4), "bias": L.ones(2), "foo": L.ones(1)},
            (L.ones(4),), strict=True),
        "functional_call_duplicate": lambda L: L.func.functional_call(
            L.nn.Linear(4, 2), ({"weight": L.ones(2, 4)}, {"weight": L.ones(2, 4)}),
            (L.ones(4),)),
        "stack_module_state_empty": lambda L: L.func.stack_module_state([]),
        "stack_module_state_modes": lambda L: L.func.stack_module_state(
            [L.nn.Linear(2, 2), L.nn.Linear(2, 2).eval()]),
    }


@pytest.mark.parametrize("name", list(_errors()))
def test_error(name):
    fn = _errors()[name]
    raised = []
    for lib in (torch, fg):
        with pytest.raises(Exception) as info:
            fn(lib)
        raised.append((type(info.value).__name__, str(info.value)))
    assert raised[1] == raised[0]


@pytest.mark.parametrize("name", list(CASES))
def test_program(name):
    fn = CASES[name]
    want, got = _run(fn, torch), _run(fn, fg)
    assert got[0] == want[0], (got, want)
    if want[0] == "raised":
        assert got[1] == want[1]
        return
    strict = name in STRICT
    _same(_desc(got[1], strict), _desc(want[1], strict))
