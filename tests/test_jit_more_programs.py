"""fusegrad.jit on the modules real programs script, against torch.jit run here: a ResNet of
torchvision-style BasicBlocks (an `Optional[nn.Module]` downsample, None in some blocks),
Optional arguments refined by `is not None`, ModuleList/ModuleDict loops, methods marked
export/ignore/unused, Final and `__constants__`; frozen modules' attributes, copies of
traced modules, uncalled traced submodules, inlined graphs and the printed code."""

import copy
import io
import warnings
from typing import Final

import numpy as np
import pytest
import torch

import fusegrad


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield


def _np(t):
    return t.detach().numpy()


def _close(a, b, tol=1e-5):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, tol)
        return
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


def _same_weights(fg_module, th_module):
    """Copy fusegrad's parameters and buffers into the torch module of the same layout."""
    th_state = th_module.state_dict()
    fg_state = fg_module.state_dict()
    assert list(fg_state) == list(th_state)
    with torch.no_grad():
        for k, v in fg_state.items():
            th_state[k].copy_(torch.tensor(_np(v)))


def _round_trip(lib, scripted):
    buf = io.BytesIO()
    lib.jit.save(scripted, buf)
    buf.seek(0)
    return lib.jit.load(buf)


# -- the programs, built for either library --------------------------------------------


def make_resnet(lib):
    nn = lib.nn

    class BasicBlock(nn.Module):
        expansion: int = 1

        def __init__(self, inplanes, planes, stride=1, downsample: nn.Module | None = None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample
            self.stride = stride

        def forward(self, x):
            identity = x
            out = self.conv1(x)
            out = self.bn1(out)
            out = self.relu(out)
            out = self.conv2(out)
            out = self.bn2(out)
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            out = self.relu(out)
            return out

    class ResNet(nn.Module):
        def __init__(self, layers=(1, 1), num_classes=3):
            super().__init__()
            self.inplanes = 8
            self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(8, layers[0])
            self.layer2 = self._make_layer(16, layers[1], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(16, num_classes)

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                    nn.BatchNorm2d(planes))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes
            for _ in range(1, blocks):
                layers.append(BasicBlock(self.inplanes, planes))
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer2(self.layer1(x))
            x = self.avgpool(x)
            x = lib.flatten(x, 1)
            return self.fc(x)

    return ResNet()


def make_programs(lib):
    """Small modules of the kinds real programs script, by name."""
    nn = lib.nn

    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(8, 8)
            self.heads = 2

        def forward(self, x, mask: lib.Tensor | None = None, scale: float | None = None):
            B, T, C = x.shape
            q = self.q(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
            att = q @ q.transpose(-2, -1)
            if scale is not None:
                att = att * scale
            if mask is not None:
                att = att.masked_fill(mask == 0, float("-inf"))
            att = lib.softmax(att, dim=-1)
            return (att @ q).transpose(1, 2).contiguous().view(B, T, C)

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
            self.norms = nn.ModuleList([nn.LayerNorm(4) for _ in range(3)])
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = lib.relu(layer(x)) + i
            for layer, norm in zip(self.layers, self.norms):
                x = norm(layer(x))
            outs: list[lib.Tensor] = []
            for _name, head in self.heads.items():
                outs.append(head(x))
            return lib.cat(outs, 1) + self.heads["a"](x).sum()

    class Marked(nn.Module):
        __constants__ = ["k"]
        fin: Final[int]

        def __init__(self):
            super().__init__()
            self.l = nn.Linear(4, 4)
            self.k = 3
            self.fin = 2

        def forward(self, x):
            if self.training:
                return self.unused_fn(x)
            return self.helper(x) * self.k + self.fin

        @lib.jit.export
        def helper(self, x):
            return self.l(x)

        @lib.jit.ignore
        def in_python(self, x):
            return x + 1

        @lib.jit.unused
        def unused_fn(self, x):
            return x.numpy()

    class Ignored(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(4, 4)

        def forward(self, x):
            return self.l(x) + self.in_python(x)

        @lib.jit.ignore
        def in_python(self, x):
            return x * 2

    return {"Masked": Masked, "Stack": Stack, "Marked": Marked, "Ignored": Ignored}


def _pair(fn):
    lib_fg = fn(fusegrad)
    lib_th = fn(torch)
    return lib_fg, lib_th


# -- 1. ResNet BasicBlocks with an Optional downsample ---------------------------------


def test_resnet_of_basic_blocks_scripts_runs_and_round_trips():
    fusegrad.manual_seed(0)
    fg, th = make_resnet(fusegrad).eval(), make_resnet(torch).eval()
    with fusegrad.no_grad():
        for m in fg.modules():
            if isinstance(m, fusegrad.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    xf, xt = fusegrad.tensor(x), torch.tensor(x)
    _close(sf(xf), st(xt))
    _close(sf(xf), fg(xf))
    loaded = _round_trip(fusegrad, sf)
    _close(loaded(xf), st(xt))
    # the block without a downsample compiles the None test away, as TorchScript does;
    # the one with it calls it: both print TorchScript's code
    for block in (sf.layer1._modules["0"], sf.layer2._modules["0"]):
        name = "layer1" if block is sf.layer1._modules["0"] else "layer2"
        assert block.code == getattr(st, name)._modules["0"].code
    assert "downsample" not in str(sf.layer1._modules["0"].graph)
    assert "prim::If" not in str(sf.layer1._modules["0"].graph)
    assert 'prim::GetAttr[name="downsample"]' in str(sf.layer2._modules["0"].graph)


def test_resnet_in_training_mode_updates_running_stats_as_torch():
    fusegrad.manual_seed(1)
    fg, th = make_resnet(fusegrad).train(), make_resnet(torch).train()
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    x = np.random.default_rng(1).standard_normal((4, 3, 8, 8)).astype(np.float32)
    _close(sf(fusegrad.tensor(x)), st(torch.tensor(x)), 1e-4)
    _close(fg.layer2[0].downsample[1].running_mean, th.layer2[0].downsample[1].running_mean)


# -- 1. other modules real programs script ---------------------------------------------


@pytest.mark.parametrize("name", ["Masked", "Stack", "Marked"])
def test_common_modules_script_like_torch(name):
    fusegrad.manual_seed(2)
    fg_cls, th_cls = make_programs(fusegrad)[name], make_programs(torch)[name]
    fg, th = fg_cls().eval(), th_cls().eval()
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    rng = np.random.default_rng(3)
    if name == "Masked":
        x = rng.standard_normal((2, 3, 8)).astype(np.float32)
        mask = np.tril(np.ones((3, 3), np.float32))
        calls = [((x,), ()), ((x, mask), ()), ((x, mask, 0.5), ())]
    else:
        calls = [((rng.standard_normal((2, 4)).astype(np.float32),), ())]
    loaded = _round_trip(fusegrad, sf)
    for args, _ in calls:
        fa = [fusegrad.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
        ta = [torch.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
        _close(sf(*fa), st(*ta))
        _close(loaded(*fa), st(*ta))
    if name == "Marked":
        x = rng.standard_normal((2, 4)).astype(np.float32)
        _close(sf.helper(fusegrad.tensor(x)), st.helper(torch.tensor(x)))
        _close(sf.in_python(fusegrad.tensor(x)), st.in_python(torch.tensor(x)))
        sf.train()
        st.train()
        with pytest.raises(Exception) as th_err:
            st(torch.tensor(x))
        with pytest.raises(Exception) as fg_err:
            sf(fusegrad.tensor(x))
        text = "This Python function is annotated to be ignored and cannot be run"
        assert text in str(th_err.value) and text in str(fg_err.value)


def test_optional_refinement_matches_torchs_graph_and_code():
    fg_cls, th_cls = make_programs(fusegrad)["Masked"], make_programs(torch)["Masked"]
    sf, st = fusegrad.jit.script(fg_cls()), torch.jit.script(th_cls())
    # `if mask is not None:` casts mask to Tensor inside the branch, as TorchScript does
    for s in (sf, st):
        graph = str(s.graph)
        assert "prim::unchecked_cast" in graph and "Tensor? = " not in graph.split(
            "prim::unchecked_cast")[1].split("\n")[0]
    assert sf.code.count("unchecked_cast(") == st.code.count("unchecked_cast(") == 2


def test_ignored_method_runs_in_python_and_is_not_saved():
    fusegrad.manual_seed(4)
    fg_cls, th_cls = make_programs(fusegrad)["Ignored"], make_programs(torch)["Ignored"]
    fg, th = fg_cls(), th_cls()
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    x = np.ones((2, 4), np.float32)
    _close(sf(fusegrad.tensor(x)), st(torch.tensor(x)))
    with pytest.raises(RuntimeError) as th_err:
        torch.jit.save(st, io.BytesIO())
    with pytest.raises(RuntimeError) as fg_err:
        fusegrad.jit.save(sf, io.BytesIO())
    first = "Could not export Python function call 'in_python'"
    assert first in str(th_err.value) and first in str(fg_err.value)


# -- 2. freezing -----------------------------------------------------------------------


def _bn_net(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()


@pytest.mark.parametrize("how", ["trace", "script"])
def test_frozen_module_attributes_match_torch(how):
    fusegrad.manual_seed(5)
    fg, th = _bn_net(fusegrad), _bn_net(torch)
    with fusegrad.no_grad():
        fg[1].running_var.uniform_(0.5, 2.0)
    _same_weights(fg, th)
    x = np.random.default_rng(5).standard_normal((1, 3, 6, 6)).astype(np.float32)
    xf, xt = fusegrad.tensor(x), torch.tensor(x)
    made = {}
    for lib, m, xx in ((fusegrad, fg, xf), (torch, th, xt)):
        c = lib.jit.trace(m, xx) if how == "trace" else lib.jit.script(m)
        made[lib.__name__] = lib.jit.freeze(c)
    a, b = made["fusegrad"], made["torch"]
    assert type(a).__name__ == type(b).__name__ == "RecursiveScriptModule"
    for f in (lambda m: hasattr(m, "training"), lambda m: len(list(m.parameters())),
              lambda m: list(m.state_dict()), lambda m: len(list(m.buffers())),
              lambda m: [n for n, _ in m.named_children()], lambda m: m.original_name):
        assert f(a) == f(b)
    _close(a(xf), b(xt))
    loaded = _round_trip(fusegrad, a)
    _close(loaded(xf), b(xt))
    assert hasattr(loaded, "training") is False
    a.train()
    b.train()
    assert a.training is b.training is True
    kept_a = fusegrad.jit.freeze(
        fusegrad.jit.script(fg) if how == "script" else fusegrad.jit.trace(fg, xf),
        preserved_attrs=["training"])
    assert kept_a.training is False


def test_frozen_script_inlines_calls_and_folds_constants():
    fusegrad.manual_seed(6)
    fg, th = _bn_net(fusegrad), _bn_net(torch)
    _same_weights(fg, th)
    a, b = fusegrad.jit.freeze(fusegrad.jit.script(fg)), torch.jit.freeze(torch.jit.script(th))
    for m in (a, b):
        text = str(m.graph)
        assert "prim::CallMethod" not in text and "prim::GetAttr" not in text
        assert "prim::If" not in text and "batch_norm" not in text  # folded into the conv
        assert "CONSTANTS.c" in m.code


# -- 3. copies of traced modules, uncalled submodules, inlined graphs ------------------


def _with_unused(lib):
    nn = lib.nn

    class W(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.unused = nn.Linear(4, 2)

        def forward(self, x):
            return self.a(x)

    return W()


def test_deepcopy_of_a_traced_module_is_a_recursive_script_module():
    fusegrad.manual_seed(7)
    fg, th = _with_unused(fusegrad), _with_unused(torch)
    _same_weights(fg, th)
    x = np.ones((2, 4), np.float32)
    tf, tt = fusegrad.jit.trace(fg, fusegrad.tensor(x)), torch.jit.trace(th, torch.tensor(x))
    cf, ct = copy.deepcopy(tf), copy.deepcopy(tt)
    for f in (lambda m: type(m).__name__, lambda m: type(m).__mro__[1].__name__,
              lambda m: [type(c).__name__ for c in m.children()], lambda m: m.training,
              lambda m: type(copy.copy(m)).__name__):
        assert f(cf) == f(ct)
    _close(cf(fusegrad.tensor(x)), ct(torch.tensor(x)))
    assert cf.a.weight is not fg.a.weight
    # the copied submodules run on their own weights (a trace's submodules cannot run)
    with fusegrad.no_grad():
        cf.a.weight.mul_(2)
    with torch.no_grad():
        ct.a.weight.mul_(2)
    _close(cf.a(fusegrad.tensor(x)), ct.a(torch.tensor(x)))
    assert cf.a.code.startswith("def forward(self,") and ct.a.code.startswith(
        "def forward(self,")
    assert [type(c).__name__ for c in tf.children()] == [type(c).__name__ for c in tt.children()]


def test_uncalled_traced_submodule_has_no_code():
    fg, th = _with_unused(fusegrad), _with_unused(torch)
    x = np.ones((2, 4), np.float32)
    tf, tt = fusegrad.jit.trace(fg, fusegrad.tensor(x)), torch.jit.trace(th, torch.tensor(x))
    errors = []
    for t in (tf, tt):
        with pytest.raises(AttributeError) as code_err:
            _ = t.unused.code
        with pytest.raises(RuntimeError) as graph_err:
            _ = t.unused.graph
        errors.append((str(code_err.value), str(graph_err.value)))
        assert "def forward" in t.a.code
    assert errors[0] == errors[1]


def test_scripted_inlined_graph_inlines_submodule_calls():
    fg, th = _with_unused(fusegrad), _with_unused(torch)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    for s in (sf, st):
        assert "prim::CallMethod" in str(s.graph)
        inlined = str(s.inlined_graph)
        assert "prim::CallMethod" not in inlined and "aten::linear" in inlined
        assert 'prim::GetAttr[name="weight"]' in inlined


# -- 4. printed code -------------------------------------------------------------------


def _functions(lib):
    Tensor = lib.Tensor

    def relu_add(x, y):
        a = lib.relu(x)
        b = a.add_(y)
        return b

    def named_then_return(x, y):
        a = lib.relu(x)
        b = lib.add(a, y)
        return b * 2

    def printed(x, y):
        z = x + y
        print(z)
        return z.sum()

    def optional(x, m: Tensor | None = None):
        if m is None:
            return x
        return x + m

    def defaulted(x, h: Tensor | None = None):
        if h is None:
            h = lib.zeros_like(x)
        return x + h

    def branches(x, y):
        if bool(x.sum() > 0):
            y = lib.relu(x)
        else:
            z = lib.relu(y)
            y = z + 1
        return y

    def raising(x, n: int):
        assert n > 0, "n must be positive"
        if n > 5:
            raise ValueError("bad")
        if n > 3:
            raise RuntimeError(f"x {n}")
        assert n < 2
        return x

    return [relu_add, named_then_return, printed, optional, defaulted, branches, raising]


def test_code_of_small_functions_is_torchs():
    for f, g in zip(_functions(fusegrad), _functions(torch)):
        assert fusegrad.jit.script(f).code == torch.jit.script(g).code


# -- 1. recurrent layers ---------------------------------------------------------------


def _recurrent(lib, kind):
    nn = lib.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 6)
            self.rnn = getattr(nn, kind)(6, 5, num_layers=2, batch_first=True,
                                         bidirectional=True)
            self.fc = nn.Linear(10, 3)

        def forward(self, tokens):
            out, _ = self.rnn(self.emb(tokens))
            return self.fc(out[:, -1])

    return Classifier()


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_classifier_scripts_like_torch(kind):
    fusegrad.manual_seed(8)
    fg, th = _recurrent(fusegrad, kind).eval(), _recurrent(torch, kind).eval()
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    tokens = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    _close(sf(fusegrad.tensor(tokens)), st(torch.tensor(tokens)))
    _close(_round_trip(fusegrad, sf)(fusegrad.tensor(tokens)), st(torch.tensor(tokens)))


@pytest.mark.parametrize("batched", [True, False])
def test_scripted_lstm_with_states_matches_torch(batched):
    fusegrad.manual_seed(9)

    def wrap(lib):
        Tensor = lib.Tensor

        class WithStates(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = lib.nn.LSTM(3, 4)

            def forward(self, x, states: tuple[Tensor, Tensor]):
                out, (h, c) = self.lstm(x, states)
                return out, h + c

        return WithStates()

    fg, th = wrap(fusegrad), wrap(torch)
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    rng = np.random.default_rng(9)
    shape = (5, 2, 3) if batched else (5, 3)
    state = (1, 2, 4) if batched else (1, 4)
    x, h, c = (rng.standard_normal(s).astype(np.float32) for s in (shape, state, state))
    xf = fusegrad.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    a = sf(xf, (fusegrad.tensor(h), fusegrad.tensor(c)))
    b = st(xt, (torch.tensor(h), torch.tensor(c)))
    _close(a[0], b[0])
    _close(a[1], b[1])
    a[0].sum().backward()
    b[0].sum().backward()
    _close(xf.grad, xt.grad)
    _close(fg.lstm.weight_hh_l0.grad, th.lstm.weight_hh_l0.grad)


# -- 1. attention and Transformer encoder layers ---------------------------------------


@pytest.mark.parametrize("norm_first,activation,batch_first",
                         [(False, "relu", False), (True, "gelu", True)])
def test_transformer_encoder_layer_scripts_like_torch(norm_first, activation, batch_first):
    fusegrad.manual_seed(10)
    kw = dict(dim_feedforward=16, dropout=0.0, activation=activation, norm_first=norm_first,
              batch_first=batch_first)
    fg = fusegrad.nn.TransformerEncoderLayer(8, 2, **kw).eval()
    th = torch.nn.TransformerEncoderLayer(8, 2, **kw).eval()
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    rng = np.random.default_rng(10)
    # (batch, sequence) or (sequence, batch); the padding mask is (batch, sequence) either way
    x = rng.standard_normal((2, 3, 8) if batch_first else (3, 2, 8)).astype(np.float32)
    pad = np.array([[False, False, True], [False, False, False]])
    _close(sf(fusegrad.tensor(x)), st(torch.tensor(x)), 1e-4)
    _close(sf(fusegrad.tensor(x), src_key_padding_mask=fusegrad.tensor(pad)),
           st(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)), 1e-4)
    loaded = _round_trip(fusegrad, sf)
    _close(loaded(fusegrad.tensor(x)), st(torch.tensor(x)), 1e-4)


def test_multihead_attention_scripts_like_torch():
    fusegrad.manual_seed(11)
    fg = fusegrad.nn.MultiheadAttention(8, 2)
    th = torch.nn.MultiheadAttention(8, 2)
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    rng = np.random.default_rng(11)
    q, k = (rng.standard_normal((3, 2, 8)).astype(np.float32) for _ in range(2))
    mask = np.triu(np.full((3, 3), -np.inf, np.float32), 1)
    a = sf(fusegrad.tensor(q), fusegrad.tensor(k), fusegrad.tensor(k),
           attn_mask=fusegrad.tensor(mask))
    b = st(torch.tensor(q), torch.tensor(k), torch.tensor(k), attn_mask=torch.tensor(mask))
    _close(a, b)
    a = sf(fusegrad.tensor(q), fusegrad.tensor(k), fusegrad.tensor(k), need_weights=False)
    b = st(torch.tensor(q), torch.tensor(k), torch.tensor(k), need_weights=False)
    _close(a[0], b[0])
    assert a[1] is None and b[1] is None


def _decoder(lib):
    nn = lib.nn
    Tensor = lib.Tensor

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTMCell(4, 5)
            self.gru = nn.GRUCell(4, 5)
            self.out = nn.Linear(5, 2)

        def forward(self, x):
            h = lib.zeros(x.size(1), 5)
            c = lib.zeros(x.size(1), 5)
            g = self.gru(x[0])
            outs: list[Tensor] = []
            for t in range(x.size(0)):
                h, c = self.lstm(x[t], (h, c))
                g = self.gru(x[t], g)
                outs.append(self.out(h + g))
            return lib.stack(outs)

    return Decoder()


def test_recurrent_cells_in_a_scripted_loop_match_torch():
    fusegrad.manual_seed(12)
    fg, th = _decoder(fusegrad), _decoder(torch)
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    x = np.random.default_rng(12).standard_normal((4, 2, 4)).astype(np.float32)
    _close(sf(fusegrad.tensor(x)), st(torch.tensor(x)))
    _close(_round_trip(fusegrad, sf)(fusegrad.tensor(x)), st(torch.tensor(x)))


def _upsampler(lib):
    nn = lib.nn

    class Up(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
            self.up1 = nn.ConvTranspose1d(2, 2, 3, stride=2)

        def forward(self, x, skip):
            y = self.up(x, output_size=skip.size())
            return y + skip, self.up1(y.flatten(2))

    return Up()


def test_transposed_convolutions_with_output_size_match_torch():
    fusegrad.manual_seed(13)
    fg, th = _upsampler(fusegrad), _upsampler(torch)
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    rng = np.random.default_rng(13)
    x, skip = rng.standard_normal((1, 3, 4, 4)), rng.standard_normal((1, 2, 8, 8))
    x, skip = x.astype(np.float32), skip.astype(np.float32)
    _close(sf(fusegrad.tensor(x), fusegrad.tensor(skip)), st(torch.tensor(x), torch.tensor(skip)))
    _close(_round_trip(fusegrad, sf)(fusegrad.tensor(x), fusegrad.tensor(skip)),
           st(torch.tensor(x), torch.tensor(skip)))


def test_transformer_encoder_stack_scripts_like_torch():
    fusegrad.manual_seed(14)

    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(8)).eval()

    fg, th = make(fusegrad), make(torch)
    _same_weights(fg, th)
    sf, st = fusegrad.jit.script(fg), torch.jit.script(th)
    rng = np.random.default_rng(14)
    x = rng.standard_normal((3, 2, 8)).astype(np.float32)
    pad = np.array([[False, False, True], [False, False, False]])
    causal = np.triu(np.full((3, 3), -np.inf, np.float32), 1)
    for kw in ({}, {"src_key_padding_mask": pad}, {"mask": causal}):
        a = sf(fusegrad.tensor(x), **{k: fusegrad.tensor(v) for k, v in kw.items()})
        b = st(torch.tensor(x), **{k: torch.tensor(v) for k, v in kw.items()})
        _close(a, b, 1e-4)
