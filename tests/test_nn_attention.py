"""scaled_dot_product_attention, MultiheadAttention, TransformerEncoderLayer and
TransformerEncoder against torch: outputs, attention weights, input and parameter gradients,
masks of every kind (float64); the fused flash-attention op, PyTorch's choice of it, and the
node-name sets of attention graphs (float32 and float64). tests/test_nn_transformer.py covers
the transformer layers and stacks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nn_recurrent import compare as compare_rec
from test_nn_support import close, sync

import fusegrad
import fusegrad.nn as fnn
import fusegrad.nn.functional as F

ATOL = 1e-8


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def both(name, *args, **kwargs):
    torch.manual_seed(0)
    th = getattr(torch.nn, name)(*args, **kwargs).double()
    fg = getattr(fnn, name)(*args, **kwargs).double()
    sync(th, fg)
    return th, fg


def _tensor(a, T):
    if a is None or not isinstance(a, np.ndarray):
        return a
    return T.tensor(a, requires_grad=a.dtype.kind == "f")


def run(th, fg, arrays, kwargs=None, *, leaves=True):
    """Call both modules (or functions) with the same inputs; compare outputs and grads."""
    kwargs = kwargs or {}
    ins = {}
    for T, mod in ((torch, th), (fusegrad, fg)):
        args = [_tensor(a, T) for a in arrays]
        kw = {k: (T.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
        out = mod(*args, **kw)
        ins[T] = (args, out if isinstance(out, tuple) else (out,))
    (args_t, out_t), (args_f, out_f) = ins[torch], ins[fusegrad]
    assert len(out_t) == len(out_f)
    loss_t, loss_f = 0, 0
    for i, (a, b) in enumerate(zip(out_f, out_t)):
        if b is None:
            assert a is None, f"output {i}"
            continue
        close(a, b, ATOL, ATOL, f"output {i}")
        cot = data(*b.shape, seed=20 + i)
        loss_t = loss_t + (b * torch.tensor(cot)).sum()
        loss_f = loss_f + (a * fusegrad.tensor(cot)).sum()
    loss_t.backward()
    loss_f.backward()
    for i, (a, b) in enumerate(zip(args_f, args_t)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            close(a.grad, b.grad, ATOL, ATOL, f"input {i} grad")
    if isinstance(th, torch.nn.Module):
        th_p, fg_p = dict(th.named_parameters()), dict(fg.named_parameters())
        assert list(fg_p) == list(th_p)
        for name, p in th_p.items():
            if p.grad is None:
                assert fg_p[name].grad is None, name
            else:
                close(fg_p[name].grad, p.grad, ATOL, ATOL, f"{name}.grad")
    return out_f, out_t


# ---------------------------------------------------------------- scaled_dot_product_attention


def causal(n, m=None):
    return np.tril(np.ones((n, m or n), dtype=bool))


@pytest.mark.parametrize("kwargs", [
    {}, {"scale": 0.3}, {"is_causal": True},
    {"attn_mask": np.random.default_rng(1).random((5, 6)) > 0.3},
    {"attn_mask": data(2, 3, 5, 6, seed=4)},
])
def test_sdpa(kwargs):
    q, k, v = data(2, 3, 5, 4), data(2, 3, 6, 4, seed=1), data(2, 3, 6, 7, seed=2)
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.dtype == bool:
        mask[:, 0] = True
    run(torch.nn.functional.scaled_dot_product_attention, F.scaled_dot_product_attention,
        [q, k, v], kwargs)


def test_sdpa_fully_masked_row_is_zero_and_gqa():
    mask = np.ones((4, 5), dtype=bool)
    mask[2] = False
    out, _ = run(torch.nn.functional.scaled_dot_product_attention,
                 F.scaled_dot_product_attention,
                 [data(1, 4, 3), data(1, 5, 3, seed=1), data(1, 5, 3, seed=2)],
                 {"attn_mask": mask})
    assert np.all(out[0].detach().numpy()[:, 2] == 0)
    run(torch.nn.functional.scaled_dot_product_attention, F.scaled_dot_product_attention,
        [data(2, 4, 3, 5), data(2, 2, 6, 5, seed=1), data(2, 2, 6, 5, seed=2)],
        {"enable_gqa": True})


def test_sdpa_mask_with_causal_raises():
    for T in (torch, fusegrad):
        x = T.zeros(1, 2, 3)
        with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
            T.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=T.ones(2, 2),
                                                         is_causal=True)


# ---------------------------------------------------------------- MultiheadAttention


def kpm(n=2, s=6):
    m = np.zeros((n, s), dtype=bool)
    m[0, -2:] = True
    m[1, 1] = True
    return m


@pytest.mark.parametrize("ctor,kwargs", [
    ({}, {}),
    ({"batch_first": True}, {}),
    ({}, {"key_padding_mask": kpm()}),
    ({}, {"attn_mask": ~causal(5, 6)}),
    ({}, {"attn_mask": data(5, 6, seed=7), "average_attn_weights": False}),
    ({"batch_first": True}, {"attn_mask": ~causal(5, 6), "key_padding_mask": kpm(),
                             "need_weights": False}),
    ({}, {"attn_mask": data(4, 5, 6, seed=8), "key_padding_mask": data(2, 6, seed=9)}),
    ({}, {"need_weights": False}),
    ({"bias": False}, {"key_padding_mask": kpm()}),
    ({"kdim": 3, "vdim": 5}, {"key_padding_mask": kpm()}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"attn_mask": ~causal(5, 6),
                                                    "key_padding_mask": kpm()}),
])
def test_multihead_attention(ctor, kwargs):
    th, fg = both("MultiheadAttention", 8, 2, **ctor)
    kd, vd = ctor.get("kdim", 8), ctor.get("vdim", 8)
    if ctor.get("batch_first"):
        arrays = [data(2, 5, 8), data(2, 6, kd, seed=1), data(2, 6, vd, seed=2)]
    else:
        arrays = [data(5, 2, 8), data(6, 2, kd, seed=1), data(6, 2, vd, seed=2)]
    run(th, fg, arrays, kwargs)


def test_multihead_self_attention_causal_and_unbatched():
    th, fg = both("MultiheadAttention", 6, 3)
    mask = ~causal(4)
    x = data(4, 2, 6)
    for kw in ({"need_weights": False}, {}, {"key_padding_mask": kpm(2, 4),
                                              "need_weights": False}):
        run(th, fg, [x, x, x], {"attn_mask": mask, "is_causal": True, **kw})
    run(th, fg, [data(4, 6), data(3, 6, seed=1), data(3, 6, seed=2)],
        {"key_padding_mask": np.array([False, True, False])})
    run(th, fg, [data(4, 6), data(3, 6, seed=1), data(3, 6, seed=2)], {"need_weights": False})


def test_multihead_dropout_modes():
    """p=1 zeroes the attention weights in training mode; eval mode ignores dropout."""
    th, fg = both("MultiheadAttention", 4, 2, dropout=1.0)
    arrays = [data(3, 2, 4), data(5, 2, 4, seed=1), data(5, 2, 4, seed=2)]
    run(th, fg, arrays)
    th.eval()
    fg.eval()
    run(th, fg, arrays)


def test_multihead_init_keys_repr():
    fg = fnn.MultiheadAttention(16, 4)
    th = torch.nn.MultiheadAttention(16, 4)
    assert list(fg.state_dict()) == list(th.state_dict()) == [
        "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    assert repr(fg) == repr(th)
    w = fg.in_proj_weight.detach().numpy()
    bound = np.sqrt(6 / (16 + 48))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert not fg.in_proj_bias.detach().numpy().any()
    assert not fg.out_proj.bias.detach().numpy().any()
    for kw in ({"kdim": 3, "vdim": 5, "bias": False}, {"add_bias_kv": True}):
        assert list(fnn.MultiheadAttention(8, 2, **kw).state_dict()) == list(
            torch.nn.MultiheadAttention(8, 2, **kw).state_dict())
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        fnn.MultiheadAttention(6, 4)
    for T in (torch, fusegrad):
        with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal"):
            x = T.zeros(3, 1, 4)
            T.nn.MultiheadAttention(4, 2)(x, x, x, is_causal=True)


# ---------------------------------------------------------------- transformer encoder


@pytest.mark.parametrize("ctor,kwargs", [
    ({}, {}),
    ({"activation": "gelu", "batch_first": True}, {"src_key_padding_mask": kpm(2, 5)}),
    ({"norm_first": True}, {"src_mask": ~causal(5)}),
    ({"norm_first": True, "batch_first": True}, {"src_mask": ~causal(5), "is_causal": True}),
    ({"bias": False, "layer_norm_eps": 1e-3}, {"src_mask": data(5, 5, seed=3),
                                               "src_key_padding_mask": data(2, 5, seed=4)}),
])
def test_transformer_encoder_layer(ctor, kwargs):
    th, fg = both("TransformerEncoderLayer", 8, 2, dim_feedforward=16, dropout=0.0, **ctor)
    x = data(2, 5, 8) if ctor.get("batch_first") else data(5, 2, 8)
    run(th, fg, [x], kwargs)


def test_transformer_encoder_layer_eval_default_dropout_and_steps():
    th, fg = both("TransformerEncoderLayer", 8, 4, dim_feedforward=12)
    assert list(fg.state_dict()) == list(th.state_dict())
    assert repr(fg) == repr(th)
    th.eval()
    fg.eval()
    run(th, fg, [data(4, 3, 8)], {"src_key_padding_mask": kpm(3, 4)})
    compare_rec(th, fg, data(4, 3, 8), steps=3)


def test_transformer_encoder():
    with pytest.warns(UserWarning, match="enable_nested_tensor is True"):
        torch_layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        th = torch.nn.TransformerEncoder(torch_layer, 2, norm=torch.nn.LayerNorm(8)).double()
    with pytest.warns(UserWarning, match="enable_nested_tensor is True"):
        fg_layer = fnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        fg = fnn.TransformerEncoder(fg_layer, 2, norm=fnn.LayerNorm(8)).double()
    sync(th, fg)
    assert list(fg.state_dict()) == list(th.state_dict())
    assert fg.layers[0].linear1.weight is not fg.layers[1].linear1.weight
    x = data(5, 2, 8)
    run(th, fg, [x], {"mask": ~causal(5), "src_key_padding_mask": kpm(2, 5)})
    float_causal = np.where(causal(5), 0.0, -np.inf)
    run(th, fg, [x], {"mask": float_causal})
    run(th, fg, [x])


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_transformer_encoder_inference_zeroes_padding():
    """Eval mode without gradients: PyTorch's nested-tensor path leaves zeros (before the final
    norm) at padded positions of right-padded sequences."""
    torch.manual_seed(0)
    th = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
                                     2, norm=torch.nn.LayerNorm(8)).double().eval()
    fg = fnn.TransformerEncoder(fnn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2,
                                norm=fnn.LayerNorm(8)).double().eval()
    sync(th, fg)
    x = data(3, 5, 8)
    for m in (kpm(3, 5), np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]], bool)):
        with torch.no_grad():
            ref = th(torch.tensor(x), src_key_padding_mask=torch.tensor(m))
        with fusegrad.no_grad():
            out = fg(fusegrad.tensor(x), src_key_padding_mask=fusegrad.tensor(m))
        close(out, ref, ATOL, ATOL, "inference output")


# ---------------------------------------------------------------- node names (float32/float64)


def graph_names(t) -> set:
    """The class names of every node reachable from `t.grad_fn` (AccumulateGrad included)."""
    seen, names, stack = set(), set(), [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        names.add(type(n).__name__)
        stack += [f for f, _ in n.next_functions]
    return names


TOL = {np.float32: 2e-5, np.float64: 1e-10}


def oracle(th, fg, arrays, kwargs=None, *, dtype=np.float64, atol=None, ignore=frozenset()):
    """Call torch `th` and fusegrad `fg` (modules or functions) with the same inputs in `dtype`;
    compare every output, the node-name set of each output's graph, every input gradient and
    every parameter gradient. An int in `arrays` repeats the tensor at that index (the same
    object: self-attention). Float arrays require grad; kwargs arrays (masks) do not. Node
    names in `ignore` are left out of the comparison (known differences)."""
    atol = TOL[dtype] if atol is None else atol
    kwargs = kwargs or {}
    runs = {}
    for T, mod in ((torch, th), (fusegrad, fg)):
        args = []
        for a in arrays:
            if isinstance(a, int) and not isinstance(a, bool):
                args.append(args[a])
            elif isinstance(a, np.ndarray) and a.dtype.kind == "f":
                args.append(T.tensor(a.astype(dtype), requires_grad=True))
            elif isinstance(a, np.ndarray):
                args.append(T.tensor(a))
            else:
                args.append(a)
        kw = {k: (T.tensor(v.astype(dtype) if v.dtype.kind == "f" else v)
                  if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
        out = mod(*args, **kw)
        runs[T] = (args, out if isinstance(out, tuple) else (out,))
    (args_t, out_t), (args_f, out_f) = runs[torch], runs[fusegrad]
    assert len(out_t) == len(out_f)
    loss_t = loss_f = 0
    for i, (a, b) in enumerate(zip(out_f, out_t)):
        if b is None:
            assert a is None, f"output {i}"
            continue
        close(a, b, atol, atol, f"output {i}")
        na, nb = graph_names(a) - ignore, graph_names(b) - ignore
        assert na == nb, f"output {i} nodes: fusegrad-only {na - nb}, torch-only {nb - na}"
        cot = data(*b.shape, seed=20 + i).astype(dtype)
        loss_t = loss_t + (b * torch.tensor(cot)).sum()
        loss_f = loss_f + (a * fusegrad.tensor(cot)).sum()
    loss_t.backward()
    loss_f.backward()
    for i, (a, b) in enumerate(zip(args_f, args_t)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            close(a.grad, b.grad, atol * 10, atol * 10, f"input {i} grad")
    if isinstance(th, torch.nn.Module):
        th_p, fg_p = dict(th.named_parameters()), dict(fg.named_parameters())
        assert list(fg_p) == list(th_p)
        for name, p in th_p.items():
            if p.grad is None:
                assert fg_p[name].grad is None, name
            else:
                close(fg_p[name].grad, p.grad, atol * 10, atol * 10, f"{name}.grad")
    return out_f, out_t


SDPA = (torch.nn.functional.scaled_dot_product_attention, F.scaled_dot_product_attention)
FLASH = "ScaledDotProductFlashAttentionForCpuBackward0"
# Known differences on the composite (math) path: PyTorch scales by a Python number with
# mul.Scalar (MulBackward1), which fusegrad's registry does not have (it records mul.Tensor),
# and its batched matmul reshapes through `_reshape_alias`.
MATH_IGNORE = frozenset({"MulBackward0", "MulBackward1", "ReshapeAliasBackward0"})


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("shapes,kwargs,flash", [
    (((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)), {}, True),
    (((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)), {"is_causal": True}, True),
    (((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)), {"scale": 0.3}, True),
    (((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)), {"attn_mask": "bool2"}, True),
    (((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)), {"attn_mask": "float4"}, True),
    (((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)), {"attn_mask": "float3"}, False),
    (((2, 4, 5, 4), (2, 2, 6, 4), (2, 2, 6, 4)), {"enable_gqa": True}, True),
    (((2, 4, 5, 4), (2, 2, 6, 4), (2, 1, 6, 4)), {"enable_gqa": True}, False),
    (((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7)), {}, False),  # head sizes differ
    (((3, 5, 4), (3, 6, 4), (3, 6, 4)), {}, False),  # 3-D
    (((2, 3, 5, 4), (1, 3, 6, 4), (1, 3, 6, 4)), {}, False),  # batch broadcast
    (((1, 1, 4, 1), (1, 1, 4, 1), (1, 1, 4, 1)), {"is_causal": True}, True),
])
def test_sdpa_backend_and_nodes(shapes, kwargs, flash, dtype):
    """The flash node exactly where PyTorch's CPU backend choice is the flash kernel."""
    arrays = [data(*s, seed=i) for i, s in enumerate(shapes)]
    masks = {"bool2": np.random.default_rng(1).random((5, 6)) > 0.3,
             "float4": data(2, 1, 5, 6, seed=4), "float3": data(3, 5, 6, seed=5)}
    kwargs = {k: masks.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    out, ref = oracle(*SDPA, arrays, kwargs, dtype=dtype,
                      ignore=frozenset() if flash else MATH_IGNORE)
    assert (type(ref[0].grad_fn).__name__ == FLASH) == flash
    assert type(out[0].grad_fn).__name__ == type(ref[0].grad_fn).__name__


def test_sdpa_flash_fully_masked_rows_and_layout():
    """Rows with no allowed key give zeros (and zero gradients); the flash output is laid out
    like the query, so MultiheadAttention's permute back needs no copy."""
    mask = np.ones((5, 6), dtype=bool)
    mask[2] = False
    out, ref = oracle(*SDPA, [data(2, 3, 5, 4), data(2, 3, 6, 4, seed=1),
                              data(2, 3, 6, 4, seed=2)], {"attn_mask": mask})
    assert type(out[0].grad_fn).__name__ == FLASH
    assert not out[0].detach().numpy()[:, :, 2].any()
    q = data(5, 6, 4)
    for T in (torch, fusegrad):
        x = T.tensor(q).transpose(0, 1).view(2, 3, 5, 4)
        o = T.nn.functional.scaled_dot_product_attention(x, x, x)
        assert o.stride() == x.stride() == (12, 4, 24, 1)


def test_flash_op_with_masks_matches_aten():
    """The registry op called as `torch.ops.aten` calls it, with float masks (the registry
    walk cannot: it makes every float input require grad, which the op refuses for masks)."""
    from fusegrad import _dispatch
    from fusegrad.ops.attention import flash_attention

    aten = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    for dtype in (np.float32, np.float64):
        q, k, v = (data(2, 3, 5, 4, seed=1), data(2, 3, 6, 4, seed=2), data(2, 3, 6, 4, seed=3))
        for mask in (data(5, 6, seed=4), data(2, 1, 5, 6, seed=5),
                     np.where(causal(5, 6), 0.0, -np.inf)):
            ins_t = [torch.tensor(a.astype(dtype), requires_grad=True) for a in (q, k, v)]
            ins_f = [fusegrad.tensor(a.astype(dtype), requires_grad=True) for a in (q, k, v)]
            o_t, lse_t = aten(*ins_t, attn_mask=torch.tensor(mask.astype(dtype)))
            o_f, lse_f = _dispatch.call(flash_attention, *ins_f, 0.0, False,
                                        fusegrad.tensor(mask.astype(dtype)), None)
            tol = TOL[dtype]
            close(o_f, o_t, tol, tol, "output")
            close(lse_f, lse_t, tol, tol, "logsumexp")
            assert lse_f.grad_fn is None and lse_t.grad_fn is None
            assert lse_f.stride() == lse_t.stride()
            cot = data(*o_t.shape, seed=9).astype(dtype)
            (o_t * torch.tensor(cot)).sum().backward()
            (o_f * fusegrad.tensor(cot)).sum().backward()
            for a, b in zip(ins_f, ins_t):
                close(a.grad, b.grad, tol * 10, tol * 10, "grad")


def test_flash_gradcheck_and_double_backward_error():
    """float64 gradcheck with masks and grouped heads; double backward raises as in PyTorch
    (ATen has no derivative for the flash backward)."""
    from fusegrad.ops.attention import flash_attention

    call = fusegrad._dispatch.call
    mask = fusegrad.tensor(data(2, 1, 3, 4, seed=4))
    args = [fusegrad.tensor(data(*s, seed=i), requires_grad=True)
            for i, s in enumerate(((2, 4, 3, 2), (2, 2, 4, 2), (2, 2, 4, 2)))]
    assert fusegrad.autograd.gradcheck(
        lambda *xs: call(flash_attention, *xs, 0.0, False, mask, 0.7)[0], tuple(args))
    assert fusegrad.autograd.gradcheck(
        lambda *xs: call(flash_attention, *xs, 0.0, True, None, None)[0], tuple(args))
    for T in (torch, fusegrad):
        x = T.tensor(data(1, 2, 3, 4), requires_grad=True)
        y = T.tensor(data(1, 2, 3, 4, seed=1), requires_grad=True)
        g, = T.autograd.grad(T.nn.functional.scaled_dot_product_attention(x, y, y).sum(), x,
                             create_graph=True)
        assert type(g.grad_fn).__name__ == "NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::_scaled_dot_product_flash_"
                                               "attention_for_cpu_backward is not implemented"):
            g.sum().backward()


@pytest.mark.parametrize("args,kwargs", [
    (((1, 2, 3, 4), (1, 2, 5, 4), "double"), {}),
    (((4,), (4,), (4,)), {}),
    (((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)), {"attn_mask": "long"}),
    (((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)), {"attn_mask": "half"}),
    (((1, 4, 3, 4), (1, 3, 5, 4), (1, 3, 5, 4)), {"enable_gqa": True}),
    (((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)), {"dropout_p": -0.5}),
])
def test_sdpa_errors(args, kwargs):
    msgs = []
    for T in (torch, fusegrad):
        ins = [T.zeros(5, 4, dtype=T.float64)[:1, :1].expand(1, 2, 5, 4) if s == "double"
               else T.ones(*s) for s in args]
        kw = {k: {"long": T.ones(3, 5, dtype=T.int64), "half": T.ones(3, 5, dtype=T.float16)
                  }.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
        with pytest.raises(RuntimeError) as err:
            T.nn.functional.scaled_dot_product_attention(*ins, **kw)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


def _mha_inputs(kind, batch_first, batched=True, kdim=8, vdim=8):
    def shape(length, d):
        if not batched:
            return (length, d)
        return (2, length, d) if batch_first else (length, 2, d)

    q = data(*shape(5, 8))
    if kind == "self":
        return [q, 0, 0]
    if kind == "kv":
        return [q, data(*shape(6, kdim), seed=1), 1]
    return [q, data(*shape(6, kdim), seed=1), data(*shape(6, vdim), seed=2)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("kind", ["self", "kv", "separate"])
@pytest.mark.parametrize("ctor,kwargs", [
    ({}, {}),
    ({}, {"need_weights": False}),
    ({}, {"key_padding_mask": "kpm"}),
    ({}, {"key_padding_mask": "kpm", "need_weights": False}),
    ({}, {"attn_mask": "causal", "average_attn_weights": False}),
    ({}, {"attn_mask": "float", "need_weights": False}),
    ({"bias": False}, {"attn_mask": "causal", "key_padding_mask": "kpm"}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"attn_mask": "causal",
                                                    "key_padding_mask": "kpm"}),
    ({"add_bias_kv": True}, {"need_weights": False}),
])
def test_multihead_attention_nodes(ctor, kwargs, kind, batch_first, dtype):
    """Node-name sets, outputs, weights and all gradients as torch, in float32 and float64:
    self-attention (one packed projection), shared key/value, separate inputs."""
    src = 5 if kind == "self" else 6
    masks = {"kpm": kpm(2, src), "causal": ~causal(5, src), "float": data(5, src, seed=7)}
    kwargs = {k: masks.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    th, fg = both("MultiheadAttention", 8, 2, batch_first=batch_first, **ctor)
    if dtype == np.float32:
        th, fg = th.float(), fg.float()
    oracle(th, fg, _mha_inputs(kind, batch_first), kwargs, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("ctor,kwargs,kind,batched", [
    ({"kdim": 3, "vdim": 5}, {}, "separate", True),
    ({"kdim": 3, "vdim": 5}, {"need_weights": False}, "separate", True),
    ({"kdim": 3, "vdim": 5, "batch_first": True}, {"need_weights": False}, "separate", True),
    ({}, {}, "self", False),
    ({}, {"need_weights": False}, "self", False),
    ({"batch_first": True}, {"need_weights": False}, "kv", False),
    ({}, {"attn_mask": "square", "is_causal": True, "need_weights": False}, "self", True),
    ({"batch_first": True}, {"attn_mask": "square", "is_causal": True}, "self", True),
])
def test_multihead_attention_nodes_more(ctor, kwargs, kind, batched, dtype):
    """kdim/vdim (separate projection weights), unbatched inputs, the is_causal hint."""
    kwargs = {k: (~causal(5) if v == "square" else v) for k, v in kwargs.items()}
    th, fg = both("MultiheadAttention", 8, 2, **ctor)
    if dtype == np.float32:
        th, fg = th.float(), fg.float()
    arrays = _mha_inputs(kind, ctor.get("batch_first", False), batched, ctor.get("kdim", 8),
                         ctor.get("vdim", 8))
    oracle(th, fg, arrays, kwargs, dtype=dtype)


def test_multihead_attention_packed_self_attention_nodes():
    """The node set PyTorch records for batch-first float32 self-attention (need_weights
    True and False), spelled out."""
    th, fg = both("MultiheadAttention", 8, 2, batch_first=True)
    th, fg = th.float(), fg.float()
    x = fusegrad.tensor(data(2, 5, 8).astype(np.float32), requires_grad=True)
    common = {"AccumulateGrad", "AddBackward0", "AddmmBackward0", "CloneBackward0",
              "MmBackward0", "SelectBackward0", "SqueezeBackward1", "TBackward0",
              "TransposeBackward0", "UnsafeViewBackward0", "UnsqueezeBackward0",
              "ViewBackward0"}
    assert graph_names(fg(x, x, x)[0]) == common | {"BmmBackward0", "SoftmaxBackward0",
                                                    "MulBackward0"}
    assert graph_names(fg(x, x, x, need_weights=False)[0]) == common | {
        "PermuteBackward0", FLASH}


def _mha_outcome(lib, query_shape, key_shape, **masks):
    lib.manual_seed(0)
    m = lib.nn.MultiheadAttention(8, 2, batch_first=True)
    q, k = lib.zeros(*query_shape), lib.zeros(*key_shape)
    masks = {name: lib.zeros(*shape, dtype=lib.bool) for name, shape in masks.items()}
    try:
        out, w = m(q, k, k, **masks)
    except (AssertionError, RuntimeError) as e:
        return type(e).__name__, str(e)
    return tuple(out.shape), tuple(w.shape)


@pytest.mark.parametrize("query_shape,key_shape,masks", [
    ((2, 5, 8), (2, 5, 8), {"attn_mask": (3, 3)}),
    ((2, 5, 8), (2, 5, 8), {"attn_mask": (3, 5, 5)}),
    ((2, 5, 8), (2, 5, 8), {"attn_mask": (2, 2, 5, 5)}),
    ((2, 5, 8), (2, 5, 8), {"key_padding_mask": (2, 5, 1)}),
    ((5, 8), (5, 8), {"attn_mask": (3, 5, 5)}),
    ((5, 8), (5, 8), {"attn_mask": (2, 5, 5)}),
    ((5, 8), (5, 8), {"key_padding_mask": (2, 5)}),
    ((5, 8), (5, 8), {"key_padding_mask": (5,)}),
    ((1, 2, 5, 8), (1, 2, 5, 8), {}),
    ((2, 5, 8), (5, 8), {}),
    ((5, 8), (2, 5, 8), {}),
])
def test_multihead_attention_rank_checks(query_shape, key_shape, masks):
    assert _mha_outcome(fusegrad, query_shape, key_shape, **masks) == \
        _mha_outcome(torch, query_shape, key_shape, **masks)


def _sdpa_kernel_run(lib):
    from importlib import import_module

    attention = import_module(lib.__name__ + ".nn.attention")
    backend, kernel = attention.SDPBackend, attention.sdpa_kernel
    cuda = lib.backends.cuda
    q = lib.ones(1, 1, 3, 4, requires_grad=True)
    sdpa = lib.nn.functional.scaled_dot_product_attention
    out = [str(backend.MATH), repr(backend.FLASH_ATTENTION), int(backend.CUDNN_ATTENTION),
           list(backend.__members__)]

    def switches():
        return (cuda.flash_sdp_enabled(), cuda.math_sdp_enabled(),
                cuda.mem_efficient_sdp_enabled(), cuda.cudnn_sdp_enabled())

    for chosen, kwargs in [(backend.MATH, {}), ([backend.FLASH_ATTENTION, backend.MATH], {}),
                           (backend.EFFICIENT_ATTENTION, {}), (backend.FLASH_ATTENTION, {}),
                           ([backend.CUDNN_ATTENTION], {}), ("math", {}),
                           (backend.FLASH_ATTENTION, {"dropout_p": 0.5})]:
        try:
            with kernel(chosen) as got:
                out.append((got, switches(), sdpa(q, q, q, **kwargs).grad_fn.name()))
        except (RuntimeError, AssertionError) as e:
            out.append((type(e).__name__, str(e)))
        out.append(switches())
    return out


def test_sdpa_kernel_chooses_and_restores_as_torch():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's reasons for not using a kernel
        assert _sdpa_kernel_run(fusegrad) == _sdpa_kernel_run(torch)


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_sdpa_mask_with_causal_on_the_flash_kernel_as_torch(mask_kind):
    """Where PyTorch's CPU flash kernel takes the inputs (4-D, no dropout) it applies both
    an explicit mask and the causal one; its math path refuses the pair (test above)."""
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4))]
    mask = rng.random((3, 5)) > 0.3 if mask_kind == "bool" else \
        rng.standard_normal((3, 5)).astype(np.float32)
    results = []
    for T in (fusegrad, torch):
        q, k, v = (T.from_numpy(a.copy()).requires_grad_() for a in arrays)
        out = T.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=T.from_numpy(mask.copy()), is_causal=True)
        out.backward(T.ones_like(out))
        results.append([out.detach().numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy(),
                        type(out.grad_fn).__name__])
    assert results[0][4] == results[1][4] == "ScaledDotProductFlashAttentionForCpuBackward0"
    for a, b in zip(results[0][:4], results[1][:4]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    for T in (fusegrad, torch):  # the math path (dropout) still refuses
        x = T.ones(1, 2, 3, 4)
        with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
            T.nn.functional.scaled_dot_product_attention(
                x, x, x, attn_mask=T.ones(3, 3, dtype=T.bool), is_causal=True, dropout_p=0.5)
