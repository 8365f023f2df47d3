"""Module API details against PyTorch: lazy modules and their placeholders through
`load_state_dict`, `vector_to_parameters` aliasing, the modules and private names library
code imports (`nn.modules.utils`, `nn.common_types`, `nn.grad`, `__future__`, the layer base
classes ...), `named_modules` memos, `Module.type`, in-place writes into outputs of hooked
modules and custom Functions, and the messages of container and registration errors."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import copy  # noqa: E402
import importlib  # noqa: E402
import re  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (fusegrad, torch)


def _outcome(fn):
    """fn()'s result, or (exception type name, message with addresses and the library's
    name normalised)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        text = re.sub(r"0x[0-9a-f]+", "0x?", str(e)).replace("fusegrad", "torch")
        return type(e).__name__, text


def _both(fn):
    """fn(lib) for fusegrad and torch, compared."""
    ours, theirs = (_outcome(lambda lib=lib: fn(lib)) for lib in LIBS)
    assert ours == theirs
    return ours


def _mod(lib, name: str):
    return importlib.import_module(f"{lib.__name__}.{name}")


# ---------------------------------------------------------------- lazy modules


def test_load_state_dict_into_unmaterialised_lazy_linear():
    def run(lib):
        m = lib.nn.LazyLinear(2)
        keys = repr(m.load_state_dict({"weight": lib.ones(2, 3), "bias": lib.zeros(2)}))
        before = (type(m).__name__, m.has_uninitialized_params(), tuple(m.weight.shape),
                  type(m.weight).__name__, m.in_features)
        out = m(lib.ones(1, 3)).tolist()
        return keys, before, out, type(m).__name__, m.in_features, repr(m)

    assert _both(run)[2] == [[3.0, 3.0]]


def test_partial_lazy_load_and_its_forward_error():
    def run(lib):
        m = lib.nn.LazyLinear(2)
        keys = m.load_state_dict({"weight": lib.ones(2, 3)}, strict=False)
        state = (keys.missing_keys, keys.unexpected_keys, m.has_uninitialized_params(),
                 type(m.weight).__name__, type(m.bias).__name__)
        return state, _outcome(lambda: m(lib.ones(1, 3)))

    _both(run)


def test_lazy_sequential_loads_a_materialised_state_dict():
    def run(lib):
        nn = lib.nn
        lazy = nn.Sequential(nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d(), nn.Flatten(),
                             nn.LazyLinear(2))
        plain = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(),
                              nn.Linear(16, 2))
        with lib.no_grad():
            for i, p in enumerate(plain.parameters()):
                p.copy_(lib.arange(p.numel(), dtype=lib.float32).reshape(p.shape) / (10 + i))
        keys = list(lazy.state_dict())
        loaded = repr(lazy.load_state_dict(plain.state_dict()))
        names = [type(m).__name__ for m in lazy]
        x = lib.ones(1, 1, 4, 4) / 3
        lazy.eval()
        plain.eval()
        same = lib.equal(lazy(x), plain(x))
        return keys, loaded, names, same, [type(m).__name__ for m in lazy]

    assert _both(run)[3] is True


def test_lazy_state_dict_holds_placeholders():
    def run(lib):
        sd = lib.nn.LazyLinear(2).state_dict()
        bn = lib.nn.LazyBatchNorm1d(3).state_dict()
        return ({k: (type(v).__name__, repr(v)) for k, v in sd.items()},
                {k: type(v).__name__ for k, v in bn.items()})

    _both(run)


def test_lazy_into_lazy_and_lazy_into_plain():
    def run(lib):
        source = lib.nn.LazyLinear(2).state_dict()
        target = lib.nn.LazyLinear(2)
        keys = repr(target.load_state_dict(source))
        return keys, type(target.weight).__name__, _outcome(
            lambda: lib.nn.Linear(3, 2).load_state_dict(source))

    _both(run)


@pytest.mark.parametrize("use", ["numel", "add", "sum", "dim", "detach", "mul_", "item",
                                 "requires_grad_", "eq", "len", "nelement"])
def test_uninitialized_parameter_refuses_use(use):
    calls = {"numel": lambda p, lib: p.numel(), "add": lambda p, lib: p + 1,
             "sum": lambda p, lib: lib.sum(p), "dim": lambda p, lib: p.dim(),
             "detach": lambda p, lib: p.detach(), "mul_": lambda p, lib: p.mul_(2),
             "item": lambda p, lib: p.item(), "eq": lambda p, lib: p == p,
             "requires_grad_": lambda p, lib: p.requires_grad_(False),
             "len": lambda p, lib: len(p), "nelement": lambda p, lib: p.nelement()}

    def run(lib):
        return calls[use](lib.nn.UninitializedParameter(), lib)

    kind, message = _both(run)
    assert kind == "ValueError" and "Attempted to use an uninitialized parameter" in message


def test_uninitialized_placeholders_allow_conversions_and_reads():
    def run(lib):
        p = lib.nn.UninitializedParameter()
        b = lib.nn.UninitializedBuffer()
        lazy = lib.nn.LazyLinear(2).double()
        return (tuple(p.size()), str(p.dtype), p.requires_grad, p.is_leaf, p.grad,
                p.is_floating_point(), type(p.double()).__name__, type(b.double()).__name__,
                type(copy.deepcopy(p)).__name__, repr(p), str(lazy.weight.dtype),
                type(lazy.weight).__name__, _outcome(lambda: p.shape),
                _outcome(lambda: copy.deepcopy(b)), nn_is_lazy(lib, p))

    _both(run)


def nn_is_lazy(lib, t) -> bool:
    return lib.nn.parameter.is_lazy(t)


def test_materialize_gives_the_final_class():
    def run(lib):
        p = lib.nn.UninitializedParameter(dtype=lib.float64)
        p.materialize((2, 3))
        b = lib.nn.UninitializedBuffer()
        b.materialize(4, dtype=lib.float16)
        return (type(p).__name__, tuple(p.shape), str(p.dtype), p.requires_grad,
                type(b).__name__, tuple(b.shape), str(b.dtype))

    _both(run)


# ---------------------------------------------------------------- vector_to_parameters


def test_vector_to_parameters_aliases_the_vector():
    def run(lib):
        m = lib.nn.Linear(2, 1)
        v = lib.arange(3.0)
        lib.nn.utils.vector_to_parameters(v, m.parameters())
        v.add_(10)
        first = (m.weight.tolist(), m.bias.tolist())
        v2 = lib.arange(3.0, dtype=lib.float64)
        lib.nn.utils.vector_to_parameters(v2, m.parameters())
        m.weight.data.fill_(7)
        return (first, str(m.weight.dtype), m.weight.requires_grad, v2.tolist(),
                type(m.weight).__name__)

    assert _both(run)[0] == ([[10.0, 11.0]], [12.0])


def test_vector_to_parameters_errors():
    _both(lambda lib: lib.nn.utils.vector_to_parameters(lib.ones(3),
                                                        lib.nn.Linear(2, 3).parameters()))
    _both(lambda lib: lib.nn.utils.vector_to_parameters([1.0], []))
    _both(lambda lib: lib.nn.utils.parameters_to_vector([1]))
    _both(lambda lib: _mod(lib, "nn.utils.convert_parameters").parameters_to_vector(
        lib.nn.Linear(2, 2).parameters()).shape)


# ---------------------------------------------------------------- modules and names


def test_modules_utils_helpers():
    def run(lib):
        u = _mod(lib, "nn.modules.utils")
        sd = {"module.a": 1, "module.b.c": 2, "x": 3}
        from collections import OrderedDict

        sd = OrderedDict(sd)
        sd._metadata = OrderedDict({"": {}, "module": {"v": 1}, "module.b": {"v": 2}})
        u.consume_prefix_in_state_dict_if_present(sd, "module.")
        return (u._single(3), u._pair(3), u._triple((1, 2, 3)), u._quadruple(0),
                u._ntuple(5, "q")(2), u._pair.__name__, u._reverse_repeat_tuple((1, 2), 2),
                u._list_with_default([None, 3], [5, 6, 7]), u._list_with_default(4, [1]),
                _outcome(lambda: u._list_with_default([1, 2], [3])), list(sd.items()),
                list(sd._metadata.items()), u.__all__)

    _both(run)


def test_common_types_are_the_aliases():
    def run(lib):
        c = _mod(lib, "nn.common_types")
        names = ["_size_1_t", "_size_2_t", "_size_3_t", "_size_any_t", "_size_2_opt_t",
                 "_ratio_2_t", "_ratio_any_t", "_scalar_or_tuple_2_t", "_maybe_indices_t",
                 "_tensor_list_t"]
        return [str(getattr(c, n)).replace("fusegrad.Tensor", "torch.Tensor") for n in names]

    _both(run)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 2),
                                                            (2, 1, 2, 1)])
def test_nn_grad_matches_torch(nd, stride, padding, dilation, groups):
    rng = np.random.default_rng(nd * 10 + stride + groups)
    cin = 2 * groups
    x = rng.standard_normal((2, cin) + (6,) * nd).astype(np.float32)
    w = rng.standard_normal((4, cin // groups) + (3,) * nd).astype(np.float32)
    name = f"conv{nd}d"
    results = []
    for lib in LIBS:
        G = _mod(lib, "nn.grad")
        xt, wt = lib.tensor(x), lib.tensor(w)
        y = getattr(lib.nn.functional, name)(xt, wt, None, stride, padding, dilation, groups)
        g = lib.tensor(np.linspace(-1, 1, y.numel(), dtype=np.float32).reshape(tuple(y.shape)))
        gi = getattr(G, name + "_input")(xt.shape, wt, g, stride, padding, dilation, groups)
        gw = getattr(G, name + "_weight")(xt, wt.shape, g, stride, padding, dilation, groups)
        results.append((gi.numpy(), gw.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_nn_grad_is_the_autograd_gradient():
    x = fusegrad.randn(1, 2, 5, 5, requires_grad=True)
    w = fusegrad.randn(3, 2, 3, 3, requires_grad=True)
    y = fusegrad.nn.functional.conv2d(x, w, stride=2, padding=1)
    g = fusegrad.randn_like(y)
    gx, gw = fusegrad.autograd.grad(y, (x, w), g)
    G = fusegrad.nn.grad
    np.testing.assert_allclose(G.conv2d_input(x.shape, w, g, 2, 1).detach().numpy(),
                               gx.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(G.conv2d_weight(x, w.shape, g, 2, 1).detach().numpy(),
                               gw.numpy(), rtol=1e-5, atol=1e-5)


def _conversion(lib, label: str):
    m = lib.nn.Linear(2, 2)
    p = m.weight
    m(lib.ones(1, 2)).sum().backward()
    g = p.grad
    m.double()
    return (label, m.weight is p, m.weight.grad is g, str(p.dtype), str(m.weight.dtype),
            str(m.weight.grad.dtype), type(m.weight).__name__, m.weight.requires_grad,
            m.weight.grad.requires_grad)


def test_future_switches_and_module_conversion():
    def run(lib):
        fut = _mod(lib, "__future__")
        out = [fut.get_overwrite_module_params_on_conversion(),
               fut.get_swap_module_params_on_conversion(), _conversion(lib, "default")]
        try:
            fut.set_overwrite_module_params_on_conversion(True)
            out.append(_conversion(lib, "overwrite"))
            m = lib.nn.Linear(2, 2)
            p = m.weight
            m.float()
            out.append(m.weight is p)
        finally:
            fut.set_overwrite_module_params_on_conversion(False)
        try:
            fut.set_swap_module_params_on_conversion(True)
            out.append(_conversion(lib, "swap"))
            m = lib.nn.Linear(2, 2)
            p = m.weight
            sd = {"weight": lib.ones(2, 2, dtype=lib.float64), "bias": lib.zeros(2)}
            m.load_state_dict(sd)
            out.append((m.weight is p, str(m.weight.dtype), m.weight.tolist()))
            m.load_state_dict(sd, assign=True)
            out.append((m.weight is p, str(m.weight.dtype), m.weight.requires_grad))
        finally:
            fut.set_swap_module_params_on_conversion(False)
        return out

    _both(run)


def test_default_conversion_keeps_version_and_attributes():
    def run(lib):
        m = lib.nn.Linear(2, 2)
        m.weight.no_decay = True
        v = m.weight._version
        m.half()
        return m.weight._version - v, m.weight.no_decay, str(m.weight.dtype)

    _both(run)


def test_memory_format_helpers():
    def run(lib):
        u = lib.nn.utils
        m = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.Sequential(
            lib.nn.ConvTranspose2d(4, 2, 3)), lib.nn.Conv3d(1, 1, 2))
        back = u.convert_conv2d_weight_memory_format(m, lib.channels_last)
        u.memory_format.convert_conv3d_weight_memory_format(m, lib.channels_last_3d)
        return (back is m, m[0].weight.stride(), m[1][0].weight.stride(), m[2].weight.stride(),
                m[0].weight.is_contiguous(memory_format=lib.channels_last))

    _both(run)


def test_named_member_accessor():
    def run(lib):
        A = _mod(lib, "nn.utils._named_member_accessor")
        m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2))
        a = A.NamedMemberAccessor(m)
        w = a.get_tensor("0.weight")
        new = lib.zeros(2, 2)
        old = a.swap_tensor("0.weight", new)
        swapped = (old is w, m[0].weight is new, type(m[0].weight).__name__)
        a.set_tensor("0.weight", w)
        originals, missing = a.swap_tensors_dict({"0.bias": lib.ones(2), "extra": lib.ones(1)},
                                                 allow_missing=True)
        return (swapped, m[0].weight is w, sorted(originals), missing,
                a.check_keys(["0.weight", "nope"]), _outcome(lambda: a.get_tensor("0.nope")),
                _outcome(lambda: a.get_submodule("5")), _outcome(
                    lambda: a.swap_tensors_dict({"zzz": lib.ones(1)})),
                _outcome(lambda: A.set_tensor(m, "a.b", None)),
                _outcome(lambda: A.swap_submodule(m, "9", lib.nn.ReLU())),
                [n for n, _ in a.named_tensors()])

    _both(run)


def test_transformer_private_helpers():
    def run(lib):
        T = _mod(lib, "nn.modules.transformer")
        mask = T._generate_square_subsequent_mask(3)
        bool_mask = lib.triu(lib.ones(3, 3, dtype=lib.bool), 1)
        clones = T._get_clones(lib.nn.Linear(2, 2), 3)
        return (mask.tolist(), str(mask.dtype), T._detect_is_causal_mask(mask),
                T._detect_is_causal_mask(bool_mask), T._detect_is_causal_mask(mask, size=4),
                T._detect_is_causal_mask(None, True), T._detect_is_causal_mask(mask, False),
                T._get_activation_fn("relu").__name__, _outcome(
                    lambda: T._get_activation_fn("tanh")), type(clones).__name__,
                len(clones), clones[0] is not clones[1],
                T._get_seq_len(lib.ones(5, 2, 3), False), T._get_seq_len(lib.ones(5, 2, 3), True),
                T._get_seq_len(lib.ones(5, 3), True))

    _both(run)


BASES = [
    ("nn.modules.pooling", "_MaxPoolNd", ["MaxPool1d", "MaxPool2d", "MaxPool3d"], (2,)),
    ("nn.modules.pooling", "_AvgPoolNd", ["AvgPool1d", "AvgPool2d", "AvgPool3d"], (2,)),
    ("nn.modules.pooling", "_AdaptiveAvgPoolNd",
     ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d"], (2,)),
    ("nn.modules.pooling", "_AdaptiveMaxPoolNd",
     ["AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"], (2,)),
    ("nn.modules.pooling", "_LPPoolNd", ["LPPool1d", "LPPool2d", "LPPool3d"], (2, 2)),
    ("nn.modules.dropout", "_DropoutNd", ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
                                          "AlphaDropout", "FeatureAlphaDropout"], ()),
    ("nn.modules.batchnorm", "_NormBase", ["BatchNorm1d", "BatchNorm2d", "InstanceNorm1d",
                                           "InstanceNorm3d", "SyncBatchNorm"], (3,)),
    ("nn.modules.batchnorm", "_BatchNorm", ["BatchNorm1d", "BatchNorm3d"], (3,)),
    ("nn.modules.conv", "_ConvNd", ["Conv1d", "Conv2d", "ConvTranspose3d"], (2, 2, 1)),
]


@pytest.mark.parametrize("module,base,classes,args", BASES)
def test_layer_base_classes(module, base, classes, args):
    def run(lib):
        cls = getattr(_mod(lib, module), base)
        out = []
        for name in classes:
            m = getattr(lib.nn, name)(*args)
            out.append((name, isinstance(m, cls), [c.__name__ for c in type(m).__mro__
                                                   if c.__name__ != "object"], repr(m)))
        return out

    _both(run)


def test_concrete_layers_are_not_each_others_subclasses():
    def run(lib):
        nn = lib.nn
        return (isinstance(nn.MaxPool1d(2), nn.MaxPool2d), isinstance(nn.Dropout2d(), nn.Dropout),
                isinstance(nn.AvgPool3d(2), nn.AvgPool2d),
                isinstance(nn.AdaptiveAvgPool1d(2), nn.AdaptiveAvgPool2d),
                isinstance(nn.LazyBatchNorm1d(), nn.BatchNorm1d),
                isinstance(nn.LazyInstanceNorm2d(), nn.InstanceNorm2d),
                nn.InstanceNorm1d(3)._version, nn.InstanceNorm1d(3).state_dict()._metadata[""])

    _both(run)


def test_subclassing_the_bases_with_torchs_arguments():
    def run(lib):
        conv = _mod(lib, "nn.modules.conv")
        pool = _mod(lib, "nn.modules.pooling")
        drop = _mod(lib, "nn.modules.dropout")

        class MyConv(conv._ConvNd):
            def __init__(self):
                super().__init__(2, 4, (3,), (1,), (0,), (1,), False, (0,), 1, True, "zeros")

        class MyPool(pool._MaxPoolNd):
            def forward(self, x):
                return lib.nn.functional.max_pool1d(x, self.kernel_size, self.stride)

        class MyDrop(drop._DropoutNd):
            def forward(self, x):
                return x * (1 - self.p)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")

            class Old(conv._ConvTransposeMixin):
                pass

            old = Old(2, 2, (3, 3), (1, 1), (0, 0), (1, 1), True, (0, 0), 1, True, "zeros")
        mine = MyConv()
        return (repr(mine), tuple(mine.weight.shape), repr(MyPool(2)),
                MyPool(2)(lib.arange(4.0).reshape(1, 1, 4)).tolist(), repr(MyDrop(0.25)),
                repr(old), [(w.category.__name__, str(w.message)) for w in caught])

    _both(run)


def test_conv_forward_and_output_padding():
    def run(lib):
        lib.manual_seed(0)
        c = lib.nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect")
        x = lib.ones(1, 2, 4, 4)
        ct = lib.nn.ConvTranspose2d(2, 2, 3, stride=2)
        return (lib.equal(c._conv_forward(x, c.weight, c.bias), c(x)),
                c._conv_forward(x, c.weight * 0, None).abs().sum().item(),
                c._reversed_padding_repeated_twice,
                ct._output_padding(lib.ones(1, 2, 4, 4), [10, 10], ct.stride, ct.padding,
                                   ct.kernel_size, 2, ct.dilation),
                ct._output_padding(lib.ones(1, 2, 4, 4), None, ct.stride, ct.padding,
                                   ct.kernel_size, 2),
                repr(lib.nn.ConvTranspose2d(1, 1, 3, padding="same")),
                _outcome(lambda: lib.nn.LazyConv2d(3, 3)(lib.ones(1, 1, 2))))

    _both(run)


def test_embedding_fill_padding_idx_and_init_helpers():
    def run(lib):
        e = lib.nn.Embedding(4, 2, padding_idx=1)
        with lib.no_grad():
            e.weight.fill_(3)
        e._fill_padding_idx_with_zero()
        bag = lib.nn.EmbeddingBag(3, 2, padding_idx=0)
        with lib.no_grad():
            bag.weight.fill_(1)
        bag._fill_padding_idx_with_zero()
        init = lib.nn.init
        t = lib.empty(200)
        init._no_grad_trunc_normal_(t, 0.0, 1.0, -0.5, 0.5)
        u = init._no_grad_uniform_(lib.empty(50), 2.0, 3.0)
        n = init._no_grad_normal_(lib.empty(3), 0.0, 0.0)
        f = init._no_grad_fill_(lib.empty(2), 4.0)
        z = init._no_grad_zero_(lib.ones(2))
        return (e.weight.tolist(), bag.weight.tolist(), bool((t.abs() <= 0.5).all()),
                bool(((u >= 2) & (u < 3)).all()), n.tolist(), f.tolist(), z.tolist())

    _both(run)


def test_invert_permutation_and_clip_grad_privates():
    def run(lib):
        r = lib.nn.utils.rnn
        cg = lib.nn.utils.clip_grad
        ps = [lib.nn.Parameter(lib.ones(2) * 3)]
        ps[0].grad = lib.ones(2) * 4
        total = cg._get_total_norm([p.grad for p in ps])
        cg._clip_grads_with_norm_(ps, 1.0, total)
        return (r.invert_permutation(lib.tensor([2, 0, 1])).tolist(), r.invert_permutation(None),
                _outcome(lambda: r.invert_permutation(lib.tensor([1, 0], dtype=lib.int32))),
                total.item(), [round(v, 5) for v in ps[0].grad.tolist()],
                lib.nn.utils.get_total_norm is cg._get_total_norm,
                lib.nn.utils.clip_grads_with_norm_.__name__, cg.__all__,
                lib.nn.utils.clip_grad_norm is cg.clip_grad_norm)

    _both(run)


def test_hooks_module_helpers():
    def run(lib):
        H = _mod(lib, "utils.hooks")
        lin = lib.nn.Linear(2, 2)
        seen = []
        bh = H.BackwardHook(
            lin, [lambda m, gi, go: seen.append(("hook", [tuple(g.shape) for g in gi]))],
            [lambda m, go: seen.append(("pre", len(go)))])
        x = lib.ones(3, 2, requires_grad=True)
        y = bh.setup_output_hook(lin(*bh.setup_input_hook((x,))))
        name = y.grad_fn.name()
        y.sum().backward()
        t = lib.ones(1, requires_grad=True)

        def h(g):
            return g

        t.register_hook(h)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            H.warn_if_has_hooks(t)
            first = len(caught)
            H.unserializable_hook(h)
            H.warn_if_has_hooks(t)
        return (name, seen, first, len(caught), H.__all__,
                _outcome(lambda: H.RemovableHandle({})),
                _outcome(lambda: H.RemovableHandle(lin._forward_hooks, extra_dict={})),
                type(H.RemovableHandle(lin._forward_hooks)).__name__)

    _both(run)


def test_module_call_impl_super_init_and_backends():
    def run(lib):
        nn = lib.nn
        m = nn.Linear(2, 2)
        log = []

        class Mixin:
            def __init__(self, *args, **kwargs):
                log.append((args, kwargs))
                super().__init__()

        class Passing(nn.Module, Mixin):
            call_super_init = True

        class Plain(nn.Module, Mixin):
            pass

        Passing()
        Plain()
        return (nn.Module.call_super_init, tuple(m._call_impl(lib.ones(1, 2)).shape),
                tuple(m._wrapped_call_impl(lib.ones(1, 2)).shape), log,
                _outcome(lambda: nn.Module(1)), _outcome(lambda: nn.Module(a=1)),
                _outcome(lambda: m.xpu()), _outcome(lambda: m.mtia()), _outcome(lambda: m.ipu()),
                _outcome(lambda: m.xpu(0)), _outcome(lambda: m.cuda()),
                _outcome(lambda: m.cuda(0)), repr(nn.ReLU().xpu()), repr(nn.ReLU().cuda()),
                repr(nn.Module().forward), nn.Module.forward.__qualname__,
                _mod(lib, "nn.modules.module")._EXTRA_STATE_KEY_SUFFIX,
                _mod(lib, "nn.modules.module")._global_is_full_backward_hook,
                _outcome(lambda: nn.Module()(1)), hasattr(lib.nn, "attention"))

    _both(run)


def test_module_private_helpers():
    def run(lib):
        m = lib.nn.Linear(1, 1)

        def full(*a):
            return None

        def pre(*a):
            return None

        m.register_full_backward_hook(full)
        m.register_full_backward_pre_hook(pre)
        replica = lib.nn.Linear(1, 1)._replicate_for_data_parallel()
        ml = lib.nn.ModuleList([lib.nn.ReLU()] * 3)
        return (m._get_backward_hooks() == ([full], []), m._get_backward_pre_hooks() == [pre],
                replica._is_replica, replica._parameters, lib.nn.Module._compiled_call_impl,
                str(lib.nn.Module.T_destination), ml._get_abs_string_index(-1),
                _outcome(lambda: ml._get_abs_string_index(5)),
                tuple(m._slow_forward(lib.ones(1, 1)).shape),
                lib.nn.GRU(2, 2)._weights_have_changed(),
                sorted(lib.nn.Module().__getstate__()))

    _both(run)


def test_rnn_checking_methods():
    def run(lib):
        nn = lib.nn
        lstm = nn.LSTM(3, 4, 2, batch_first=True, proj_size=2)
        gru = nn.GRU(3, 4, bidirectional=True)
        x = lib.ones(5, 6, 3)
        p = lib.tensor([2, 0, 1])
        h = lib.arange(6.0).reshape(1, 3, 2)
        return (lstm.get_expected_hidden_size(x, None), lstm.get_expected_cell_size(x, None),
                gru.get_expected_hidden_size(lib.ones(7, 3), lib.tensor([3, 2, 2])),
                _outcome(lambda: lstm.check_forward_args(
                    x, (lib.ones(2, 5, 2), lib.ones(2, 5, 4)), None)),
                _outcome(lambda: lstm.check_forward_args(
                    x, (lib.ones(2, 5, 4), lib.ones(2, 5, 4)), None)),
                _outcome(lambda: lstm.check_forward_args(
                    x, (lib.ones(2, 5, 2), lib.ones(2, 5, 2)), None)),
                _outcome(lambda: gru.check_forward_args(x, lib.ones(1, 6, 4), None)),
                _outcome(lambda: gru.check_forward_args(x.double(), lib.ones(2, 6, 4), None)),
                _outcome(lambda: gru.check_forward_args(lib.ones(5, 3), lib.ones(2, 6, 4), None)),
                _outcome(lambda: gru.check_forward_args(lib.ones(5, 6, 2), lib.ones(2, 6, 4),
                                                        None)),
                gru.permute_hidden(h, p).tolist(),
                [t.tolist() for t in lstm.permute_hidden((h, h + 1), p)],
                gru.permute_hidden(h, None) is h)

    _both(run)


def test_nn_namespace_helpers():
    def run(lib):
        nn = lib.nn
        red = nn._reduction
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            legacy = [red.legacy_get_string(a, b) for a in (None, True, False)
                      for b in (None, True, False)]
        return (nn.factory_kwargs(None), nn.factory_kwargs({"dtype": 1, "device": "cpu"}),
                nn.factory_kwargs({"factory_kwargs": {"dtype": 2}}),
                _outcome(lambda: nn.factory_kwargs({"foo": 1})),
                _outcome(lambda: nn.factory_kwargs({"dtype": 1, "factory_kwargs": {"dtype": 2}})),
                [red.get_enum(r) for r in ("none", "mean", "sum")],
                _outcome(lambda: red.get_enum("max")), legacy, len(caught),
                red.legacy_get_enum(False, True, emit_warning=False),
                [hasattr(nn, n) for n in ("attention", "grad", "common_types", "modules",
                                          "parameter")])

    _both(run)


# ---------------------------------------------------------------- named_modules memo


def test_named_modules_memo_holds_modules():
    def run(lib):
        nn = lib.nn
        lin = nn.Linear(2, 2)
        seq = nn.Sequential(lin, nn.ReLU())
        memo = {lin}
        first = [n for n, _ in seq.named_modules(memo=memo)]
        memo2 = set()
        second = [n for n, _ in seq.named_modules(memo=memo2)]
        keep = [n for n, _ in seq.named_modules(memo={lin}, remove_duplicate=False)]
        shared = nn.Sequential(lin, lin)
        return (first, lin in memo, len(memo), second, lin in memo2, seq in memo2, keep,
                [n for n, _ in shared.named_modules()],
                [n for n, _ in shared.named_modules(remove_duplicate=False)],
                [n for n, _ in shared.named_parameters()],
                [n for n, _ in shared.named_parameters(remove_duplicate=False)],
                _outcome(lambda: list(seq.named_parameters(memo=set()))))

    _both(run)


# ---------------------------------------------------------------- Module.type


@pytest.mark.parametrize("dst", ["torch.DoubleTensor", "float16", "FloatTensor", "int64"])
def test_module_type(dst):
    def run(lib):
        target = {"torch.DoubleTensor": "torch.DoubleTensor", "float16": lib.float16,
                  "FloatTensor": lib.FloatTensor, "int64": lib.int64}[dst]
        m = lib.nn.Linear(2, 2)
        p = m.weight
        bn = lib.nn.BatchNorm1d(2)
        out = _outcome(lambda: (str(m.type(target).weight.dtype), m.weight is p))
        if dst != "int64":
            bn.type(target)
        return out, str(bn.running_mean.dtype), str(bn.num_batches_tracked.dtype)

    _both(run)


# ---------------------------------------------------------------- in place into hooked outputs


def _hooked_linear(lib, requires_grad: bool = True):
    lin = lib.nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda m, gi, go: None)
    return lin(lib.ones(1, 2, requires_grad=requires_grad))


@pytest.mark.parametrize("write", ["mul_", "add_", "zero_", "copy_", "select", "view",
                                   "detach", "no_grad", "no_grad_input"])
def test_inplace_into_full_hook_output(write):
    def run(lib):
        if write == "no_grad":
            lin = lib.nn.Linear(2, 2)
            lin.register_full_backward_hook(lambda m, gi, go: None)
            with lib.no_grad():
                y = lin(lib.ones(1, 2))
                y.mul_(2)
            return y.grad_fn
        y = _hooked_linear(lib, write != "no_grad_input")
        if write in ("mul_", "no_grad_input"):
            y.mul_(2)
        elif write == "add_":
            y.add_(1)
        elif write == "zero_":
            y.zero_()
        elif write == "copy_":
            y.copy_(lib.zeros(1, 2))
        elif write == "select":
            y[0].mul_(2)
        elif write == "view":
            y.view(2).mul_(2)
        elif write == "detach":  # a detached alias may be written (no autograd involved)
            y.detach().mul_(2)
        return "written"

    _both(run)


def test_inplace_into_outputs_of_multi_output_hooked_module_and_functions():
    def run(lib):
        class Two(lib.nn.Module):
            def forward(self, x):
                return x * 2, x * 3

        t = Two()
        t.register_full_backward_hook(lambda m, gi, go: None)
        a, b = t(lib.ones(2, requires_grad=True))

        class AsIs(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        class Pair(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x, x * 2

            @staticmethod
            def backward(ctx, g, h):
                return g + h

        class ViewOf(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view(2)

            @staticmethod
            def backward(ctx, g):
                return g

        class Fresh(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return g

        leaf = lib.ones(2, requires_grad=True)
        return (_outcome(lambda: b.mul_(2)), _outcome(lambda: lib.relu_(a)),
                _outcome(lambda: AsIs.apply(leaf * 1).mul_(2)),
                _outcome(lambda: Pair.apply(leaf * 1)[0].mul_(2)),
                _outcome(lambda: ViewOf.apply(leaf * 1).mul_(2)),
                _outcome(lambda: AsIs.apply(leaf * 1)[:1].add_(1)),
                _outcome(lambda: Fresh.apply(leaf * 1).mul_(2).tolist()),
                _outcome(lambda: AsIs.apply(lib.ones(2)).mul_(2).tolist()))

    _both(run)


# ---------------------------------------------------------------- messages


def test_registration_and_container_messages():
    def run(lib):
        nn = lib.nn
        m = nn.Module()
        m.x = 3
        seq = nn.Sequential(nn.Linear(1, 1))
        return [_outcome(f) for f in (
            lambda: m.add_module("a.b", nn.ReLU()),
            lambda: m.add_module("", nn.ReLU()),
            lambda: m.register_buffer("a.b", None),
            lambda: m.register_parameter("a.b", None),
            lambda: nn.ModuleDict({"a.b": nn.ReLU()}),
            lambda: m.add_module("t", lib.ones(1)),
            lambda: m.add_module(1, None),
            lambda: m.get_buffer("nope"),
            lambda: m.get_buffer("x"),
            lambda: seq.get_buffer("0.nope"),
            lambda: seq.get_buffer("0.weight"),
            lambda: nn.ModuleDict().update([("c",)]),
            lambda: nn.ModuleDict().update(5),
            lambda: nn.ModuleDict().update([("c", nn.ReLU(), 1)]),
            lambda: nn.ModuleDict().update([5]),
            lambda: list(nn.ModuleDict().update({"b": nn.ReLU(), "a": nn.Tanh()}) or ()),
        )]

    _both(run)
    d = [lib.nn.ModuleDict() for lib in LIBS]
    for x, lib in zip(d, LIBS):
        x.update({"b": lib.nn.ReLU(), "a": lib.nn.Tanh()})
        x.update(lib.nn.ModuleDict({"c": lib.nn.ReLU()}))
    assert list(d[0]) == list(d[1])


def test_state_dict_positional_arguments_warn():
    def run(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            positional = list(lib.nn.Linear(1, 1).state_dict(None, "z."))
            keywords = list(lib.nn.Linear(1, 1).state_dict(prefix="z."))
        return positional, keywords, [(w.category.__name__, str(w.message)) for w in caught]

    assert len(_both(run)[2]) == 1


def test_backward_hook_results_are_checked_as_torchs():
    def run(lib):
        def hook(m, gi, go):
            return (lib.ones(3),)

        def pre_hook(m, go):
            return (lib.ones(3),)

        out = []
        for register, fn in (("register_full_backward_pre_hook", lambda m, go: 3),
                             ("register_full_backward_hook", hook),
                             ("register_full_backward_pre_hook", pre_hook),
                             ("register_full_backward_hook",
                              lambda m, gi, go: (lib.ones(2), lib.ones(2)))):
            lin = lib.nn.Linear(2, 2)
            getattr(lin, register)(fn)
            out.append(_outcome(lambda lin=lin: lin(lib.ones(1, 2, requires_grad=True))
                                .sum().backward()))
        return out

    _both(run)


def test_conversion_keeps_grad_identity_and_getstate():
    def run(lib):
        m = lib.nn.Linear(2, 2)
        m(lib.ones(1, 2)).sum().backward()
        g = m.weight.grad
        m.double()
        hooked = lib.nn.Linear(1, 1)
        hooked.register_full_backward_hook(lambda *a: None)
        return (m.weight.grad is g, str(g.dtype), "_is_full_backward_hook"
                in lib.nn.Linear(1, 1).__getstate__(),
                hooked.__getstate__()["_is_full_backward_hook"])

    _both(run)


def test_instance_norm_mismatch_warning_and_old_checkpoint():
    def run(lib):
        norm = lib.nn.InstanceNorm1d(3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            norm(lib.ones(2, 4, 5))
        from collections import OrderedDict

        sd = OrderedDict({"running_mean": lib.zeros(3), "running_var": lib.ones(3)})
        sd._metadata = OrderedDict({"": {}})
        return ([str(w.message) for w in caught],
                _outcome(lambda: lib.nn.InstanceNorm1d(3).load_state_dict(sd)))

    _both(run)
