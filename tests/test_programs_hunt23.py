"""Programs that reach for modules users import beside the core: `utils.module_tracker`
(which modules run, forward and backward, for per-module statistics),
`fx.immutable_collections` (the containers of a Node's arguments), the subgraph matcher of
`fx.passes.utils.matcher_utils` (finding and folding patterns), flex attention (score and
mask functions, block masks and their printing, packed documents), fake tensors under
`_subclasses.fake_tensor` (planning a model's memory before building it for real), the class
and input names `make_fx` gives, and the printout of an exported program. Each runs under
torch and under fusegrad, and the values and text must be the same (fusegrad's printed
graphs name its own package where torch's name `torch`, by design)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import collections  # noqa: E402
import copy  # noqa: E402
import importlib  # noqa: E402
import math  # noqa: E402
import pickle  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import check_program, error_of  # noqa: E402

import fusegrad as fg  # noqa: E402


def _mod(lib, name):
    return importlib.import_module(lib.__name__ + name)


def _error(fn):
    """`error_of(fn)` with the addresses in its message blanked."""
    found = error_of(fn)
    return found and (found[0], re.sub(r"0x[0-9a-f]+", "0x?", found[1]))


def _init(torch, module, rng, scale=0.4):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * scale,
                                 dtype=torch.float32))


def module_tracker_memory(torch):
    nn = torch.nn
    tracker = _mod(torch, ".utils.module_tracker").ModuleTracker()
    rng = np.random.default_rng(6)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.act = nn.SiLU()

        def forward(self, x):
            return x + self.act(self.fc(x))

    model = nn.Sequential(Block(), Block(), nn.Linear(4, 1))
    _init(torch, model, rng)
    mem = collections.defaultdict(int)
    seen = []

    def fw_hook(mod, inp, out):
        for name in tracker.parents:
            mem[name] += out.numel() * out.element_size()
        seen.append(("fw", type(mod).__name__, sorted(tracker.parents), tracker.is_bw))

    def bw_hook(mod, gin, gout):
        seen.append(("bw", type(mod).__name__, sorted(tracker.parents), tracker.is_bw))

    for m in model.modules():
        m.register_forward_hook(fw_hook)
        m.register_full_backward_hook(bw_hook)
    for requires_grad in (True, False):  # (without, a module's backward is never left)
        x = torch.tensor(rng.standard_normal((3, 4)), dtype=torch.float32,
                         requires_grad=requires_grad)
        with tracker:
            y = model(x)
            y.register_hook(lambda g: seen.append(("y", sorted(tracker.parents),
                                                   tracker.is_bw)))
            after_forward = sorted(tracker.parents)
            y.sum().backward()
            after_backward = sorted(tracker.parents), tracker.is_bw
        seen.append((after_forward, after_backward))
    return dict(sorted(mem.items())), seen, model[0].fc.weight.grad


def test_module_tracker():
    check_program(module_tracker_memory, torch, fg)


def immutable_node_arguments(torch):
    ic = _mod(torch, ".fx.immutable_collections")
    pytree = _mod(torch, ".utils._pytree")
    fx = _mod(torch, ".fx")
    lst, dct = ic.immutable_list([1, [2]]), ic.immutable_dict(a=[1], b=2)
    errors = [error_of(lambda: lst.append(3)), error_of(lambda: lst.__setitem__(0, 1)),
              error_of(lambda: lst.sort()), error_of(lambda: dct.update(c=1)),
              error_of(lambda: dct.pop("a")), error_of(lambda: dct.__delitem__("b"))]

    def iadd():
        x = lst
        x += [1]

    errors.append(error_of(iadd))
    copies = [type(x).__name__ for x in (copy.copy(lst), copy.deepcopy(dct), lst[:1], lst + [3],
                                         pickle.loads(pickle.dumps(lst)),
                                         pickle.loads(pickle.dumps(dct)), dct.copy())]
    leaves, spec = pytree.tree_flatten(dct)

    def f(x):
        return torch.cat([x, x], 0).sum(dim=(0,)) + x.view(2, -1).sum()

    gm = fx.symbolic_trace(f)
    kinds = [(n.name, type(n.args).__name__, [type(a).__name__ for a in n.args],
              type(n.kwargs).__name__) for n in gm.graph.nodes]
    cat = next(n for n in gm.graph.nodes if n.name == "cat")
    cat.args = ([cat.args[0][0]], 0)  # replacing the arguments as a whole is the way
    gm.recompile()
    return errors, copies, hash(ic.immutable_list([1, 2])) == hash((1, 2)), \
        hash(ic.immutable_dict(a=1, b=2)) == hash(ic.immutable_dict(b=2, a=1)), leaves, \
        str(spec).replace("fusegrad", "torch"), kinds, \
        error_of(lambda: cat.args[0].append(None)), gm(torch.ones(4))


def test_immutable_collections():
    check_program(immutable_node_arguments, torch, fg)


def subgraph_matching(torch):
    nn = torch.nn
    fx = _mod(torch, ".fx")
    mu = _mod(torch, ".fx.passes.utils.matcher_utils")
    common = _mod(torch, ".fx.passes.utils.common")

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x, y):
            a = torch.relu(x + y)
            b = torch.relu(a + self.w)
            c = torch.relu(b + 1)
            d = (a + b).sigmoid()
            e = torch.cat([c, d], 0)
            return e, torch.relu(e + 1)

    def pat(x, y):
        return torch.relu(x + y)

    def pat_literal(x):
        return torch.relu(x + 1)

    def two_results(x, y):
        s = x + y
        return s.sigmoid(), s

    gm = fx.symbolic_trace(M())

    def show(matches):
        def name(v):
            return v.name if isinstance(v, fx.Node) else v
        return [(sorted((p.name, name(g)) for p, g in m.nodes_map.items()),
                 [a.name for a in m.anchors], [name(g) for g in m.placeholder_nodes],
                 [g.name for g in m.returning_nodes]) for m in matches]

    found = []
    for p in (pat, pat_literal, two_results):
        graph = fx.symbolic_trace(p).graph
        for kw in ({}, {"ignore_literals": True}, {"match_output": True},
                   {"match_placeholder": True}):
            found.append(show(mu.SubgraphMatcher(graph, **kw).match(gm.graph)))
    found.append(show(mu.SubgraphMatcher(fx.symbolic_trace(pat).graph).match(
        gm.graph, node_name_match="relu_2")))
    dead = fx.Graph()
    x = dead.placeholder("x")
    dead.call_function(torch.relu, (x,))
    dead.output(x)
    return found, common.compare_graphs(gm.graph, fx.symbolic_trace(M()).graph), \
        common.compare_graphs(gm.graph, fx.symbolic_trace(pat).graph), \
        error_of(lambda: mu.SubgraphMatcher(dead)), \
        error_of(lambda: mu.SubgraphMatcher(fx.Graph())), repr(mu.InternalMatch([1])), \
        repr(copy.copy(mu.InternalMatch([1], {2: 3})))


def test_subgraph_matcher():
    check_program(subgraph_matching, torch, fg)


def conv_bn_folding_by_matcher(torch):
    nn = torch.nn
    fx = _mod(torch, ".fx")
    mu = _mod(torch, ".fx.passes.utils.matcher_utils")
    rng = np.random.default_rng(7)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)
            self.bn = nn.BatchNorm2d(3)
            self.fc1 = nn.Linear(12, 6)
            self.fc2 = nn.Linear(6, 6)

        def forward(self, x):
            h = torch.relu(self.bn(self.conv(x)))
            h = torch.nn.functional.adaptive_avg_pool2d(h, 2).flatten(1)
            h = torch.relu(self.fc1(h))
            return torch.relu(self.fc2(h)) + h

    class LinRelu(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(1, 1)

        def forward(self, x):
            return torch.relu(self.fc1(x))

    net = Net().eval()
    _init(torch, net, rng, 0.5)
    with torch.no_grad():
        net.bn.running_mean.copy_(torch.tensor(rng.standard_normal(3), dtype=torch.float32))
        net.bn.running_var.copy_(torch.tensor(rng.uniform(0.5, 2, 3), dtype=torch.float32))
    x = torch.tensor(rng.standard_normal((2, 2, 4, 4)), dtype=torch.float32)
    with torch.no_grad():
        before = net(x)
    gm = fx.symbolic_trace(net)
    matches = mu.SubgraphMatcher(fx.symbolic_trace(LinRelu()).graph).match(gm.graph)
    modules = dict(gm.named_modules())
    for node in list(gm.graph.nodes):  # fold each batch norm into the convolution before it
        if node.op == "call_module" and isinstance(modules[node.target], nn.BatchNorm2d):
            conv_node = node.args[0]
            conv, bn = modules[conv_node.target], modules[node.target]
            scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            with torch.no_grad():
                conv.weight.mul_(scale.view(-1, 1, 1, 1))
                conv.bias.copy_((conv.bias - bn.running_mean) * scale + bn.bias)
            node.replace_all_uses_with(conv_node)
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    with torch.no_grad():
        after = gm(x)
    return [sorted(n.name for n in m.nodes_map.values()) for m in matches], before, after, \
        [n.name for n in gm.graph.nodes]


def test_matcher_conv_bn_folding():
    check_program(conv_bn_folding_by_matcher, torch, fg)


def flex_attention_packed_documents(torch):
    fa = _mod(torch, ".nn.attention.flex_attention")
    nn = torch.nn
    rng = np.random.default_rng(8)
    doc_id = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    S, H, D = 7, 2, 4
    slopes = torch.tensor([0.5, 0.25])

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def same_doc(b, h, q_idx, kv_idx):
        return doc_id[q_idx] == doc_id[kv_idx]

    def window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= 1

    def late(b, h, q_idx, kv_idx):
        return q_idx > 2

    def alibi_softcap(score, b, h, q_idx, kv_idx):
        return 5.0 * torch.tanh((score - slopes[h] * (q_idx - kv_idx)) / 5.0)

    # (torch's switch to run the mods uncompiled: its values are the same, and faster here)
    fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
    mask_mod = fa.and_masks(causal, fa.or_masks(same_doc, window))
    bm = fa.create_block_mask(mask_mod, None, None, S, S, BLOCK_SIZE=2)
    print(bm)
    print(repr(bm))
    qkv = nn.Linear(8, 24, bias=False)
    _init(torch, qkv, rng, 0.3)
    x = torch.tensor(rng.standard_normal((2, S, 8)), dtype=torch.float32)
    with torch.no_grad():
        q, k, v = qkv(x).view(2, S, 3, H, D).permute(2, 0, 3, 1, 4)
    out, lse = fa.flex_attention(q, k, v, score_mod=alibi_softcap, block_mask=bm,
                                 return_lse=True)
    plain = fa.flex_attention(q, k, v, scale=0.3)
    # rows that keep nothing give zeros and a log-sum-exp of -inf
    late_bm = fa.create_block_mask(late, 2, None, S, S, BLOCK_SIZE=3)
    empty_rows, aux = fa.flex_attention(q, k, v, block_mask=late_bm,
                                        return_aux=fa.AuxRequest(lse=True))
    gqa = fa.flex_attention(q, k[:, :1], v[:, :1], enable_gqa=True)
    half = fa.flex_attention(q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16))
    errors = [_error(lambda: fa.flex_attention(q, k[:, :1], v[:, :1])),
              _error(lambda: fa.flex_attention(q.detach().requires_grad_(), k, v)),
              _error(lambda: fa.flex_attention(q[0], k[0], v[0])),
              _error(lambda: fa.flex_attention(q[:, :, :3], k[:, :, :3], v[:, :, :3],
                                                 block_mask=bm)),
              _error(lambda: fa.flex_attention(q, k[..., :3], v)),
              _error(lambda: fa.flex_attention(q, k, v, return_aux=fa.AuxRequest(
                  max_scores=True))),
              _error(lambda: fa.flex_attention(q, k, v, return_lse=True,
                                                 return_aux=fa.AuxRequest(lse=True))),
              _error(lambda: fa.and_masks(causal, 3)),
              _error(lambda: fa.create_mask(lambda a, b: a, 1, 1, 2, 2)),
              _error(lambda: fa.create_block_mask(alibi_softcap, 1, 1, 2, 2))]
    big = fa.create_block_mask(causal, 2, 3, 300, 280)
    from_tables = fa.BlockMask.from_kv_blocks(torch.tensor([[[1, 2]]], dtype=torch.int32),
                                              torch.tensor([[[[0, 1], [1, 0]]]],
                                                           dtype=torch.int32))
    print(big.to_string(grid_size=4, limit=2))
    print(from_tables)
    fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = False
    return out, lse, plain, empty_rows, aux.lse, aux.max_scores, gqa, half, errors, \
        fa.create_mask(mask_mod, 1, 1, S, S), fa.create_mask(alibi_softcap, None, 2, 3, 3), \
        bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.q_indices, bm.to_dense(), \
        bm.sparsity(), bm.shape, big.sparsity(), big.BLOCK_SIZE, from_tables.seq_lengths, \
        len(bm.as_tuple()), bm.as_tuple()[:2], bm.numel()


def test_flex_attention():
    check_program(flex_attention_packed_documents, torch, fg)


def test_flex_attention_gradient_of_a_captured_parameter():
    """A score_mod reading a parameter: the output's node is named as PyTorch's operator
    node, and the parameter's gradient is that of the same attention written densely."""
    fa = _mod(fg, ".nn.attention.flex_attention")
    rng = np.random.default_rng(10)
    q, k, v = [fg.tensor(rng.standard_normal((1, 2, 3, 4)).astype(np.float32))
               for _ in range(3)]
    bias = fg.nn.Parameter(fg.tensor([0.1, -0.2]))
    out = fa.flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + bias[h] * qi)
    assert type(out.grad_fn).__name__ == "FlexAttentionAutogradOpBackward"
    out.pow(2).sum().backward()
    got = bias.grad.clone()
    bias.grad = None
    qi = fg.arange(3).view(1, 1, 3, 1)
    scores = q @ k.transpose(-2, -1) / 2 + bias.view(1, 2, 1, 1) * qi
    dense = fg.softmax(scores, -1) @ v
    dense.pow(2).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), dense.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(got.numpy(), bias.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_flex_attention_compiled_matches_eager():
    """Compiled, flex attention may break the graph or run eagerly, never give other
    values."""
    fa = _mod(fg, ".nn.attention.flex_attention")
    rng = np.random.default_rng(9)
    q, k, v = [fg.tensor(rng.standard_normal((1, 2, 5, 4)).astype(np.float32))
               for _ in range(3)]
    bm = fa.create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, 5, 5, BLOCK_SIZE=2)

    def f(q, k, v):
        return fa.flex_attention(q * 2, k, v, block_mask=bm,
                                 score_mod=lambda s, b, h, qi, ki: s - 0.1 * (qi - ki)) + 1

    want = f(q, k, v)
    for backend in ("eager", "aot_eager"):
        fg._dynamo.reset()
        np.testing.assert_allclose(fg.compile(f, backend=backend)(q, k, v).numpy(),
                                   want.numpy(), rtol=1e-5, atol=1e-6)


def fake_mode_memory_planner(torch):
    ft = _mod(torch, "._subclasses.fake_tensor")
    nn = torch.nn

    def build():
        return nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.BatchNorm2d(4),
                             nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(4, 3))

    sizes = []
    with ft.FakeTensorMode(allow_non_fake_inputs=True) as mode:
        model = build()  # its parameters are fake: nothing is allocated
        x = torch.empty(2, 3, 8, 8)
        for layer in model:
            x = layer(x)
            sizes.append((type(layer).__name__, tuple(x.shape), x.numel() * x.element_size()))
        weight = model[0].weight
        facts = [isinstance(x, ft.FakeTensor), isinstance(weight, nn.Parameter),
                 weight.requires_grad, weight.is_leaf, repr(weight), repr(model[1].running_mean),
                 sorted(dict(model.named_parameters())), repr(nn.Parameter(torch.empty(2))),
                 repr(x.sum()), error_of(lambda: x.sum().item()) is not None]
    real = build()(torch.ones(2, 3, 8, 8))
    return sizes, facts, tuple(real.shape), mode.from_tensor(torch.ones(2, 3)).shape, \
        ft.FakeTensor.__name__


def test_fake_tensor_mode():
    check_program(fake_mode_memory_planner, torch, fg)


def make_fx_names(torch):
    pt = _mod(torch, ".fx.experimental.proxy_tensor")
    import functools

    def f(x, y):
        return torch.tanh(x @ y).sum()

    def star(*xs):
        return xs[0] * xs[1]

    x, y = torch.ones(2, 3), torch.ones(3, 1)
    traced = [pt.make_fx(f)(x, y), pt.make_fx(lambda a, b: a + b.sum())(x, y),
              pt.make_fx(torch.nn.Linear(3, 1))(x), pt.make_fx(functools.partial(f))(x, y),
              pt.make_fx(star)(x, x), pt.make_fx(f, tracing_mode="fake")(x, y)]
    return [(type(g).__name__, [n.name for n in g.graph.nodes if n.op == "placeholder"],
             g.print_readable(False).replace("fusegrad", "torch").splitlines()[:3])
            for g in traced]


def test_make_fx_names():
    check_program(make_fx_names, torch, fg)


def exported_program_text(torch):
    export = _mod(torch, ".export")
    nn = torch.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor(2.0))

        def forward(self, x, y):
            return (x * self.scale + y).relu(), x.sum()

    text = str(export.export(M(), (torch.ones(2, 3), torch.ones(2, 3))))
    lines = text.replace("fusegrad", "torch").splitlines()
    start = lines.index("Graph signature: ")
    # (the graph's own lines differ: torch's records stack traces and ATen's composite ops)
    return lines[:2], [ln for ln in lines if not ln.strip()], lines[start - 1:]


def test_exported_program_printout():
    check_program(exported_program_text, torch, fg)


@pytest.mark.parametrize("mask", ["causal", "ragged"])
def test_create_block_mask_tables_match_dense(mask):
    """The block tables of a mask that leaves ragged edges (lengths not multiples of the block
    size) describe the same blocks as the dense mask does."""
    fa = _mod(fg, ".nn.attention.flex_attention")

    def mod(b, h, qi, ki):
        return (qi >= ki) if mask == "causal" else ((qi + ki) % 3 == 0) | (qi == ki)

    bm = fa.create_block_mask(mod, 1, 2, 5, 7, BLOCK_SIZE=(2, 3))
    dense = fa.create_mask(mod, 1, 2, 5, 7)
    padded = fg.nn.functional.pad(dense, (0, 2, 0, 1)).view(1, 2, 3, 2, 3, 3)
    any_kept = padded.permute(0, 1, 2, 4, 3, 5).flatten(-2).any(-1).int()
    assert bm.to_dense().tolist() == any_kept.tolist()
    assert math.isclose(bm.sparsity(), 100 * (1 - any_kept.sum().item() * 6 / 70))
