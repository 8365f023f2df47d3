"""`make_fx` and `export` graphs written as torch's, text for text: factories recorded as their
ATen calls (`zeros.default([3], device = device(type='cpu'), pin_memory = False)`, a literal
as `lift_fresh_copy` of a constant), `detach()` and `.data` as `detach.default`, `where`'s
numbers as `scalar_tensor` nodes, `diff`'s slices in torch's order, the activations' int
defaults, and export's layers kept whole (`linear`, `conv2d`, `batch_norm`, `layer_norm`,
`dropout`)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import copy  # noqa: E402
import io  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import check_make_fx_as_torch  # noqa: E402

import fusegrad as fg  # noqa: E402


def _assigned(y, index, value):
    """`y` after `y[index] = value`."""
    y[index] = value
    return y


# Functions of a 3x3 input whose make_fx graph is torch's (and runs as eager fusegrad).
_CALLS = {
    "zeros": lambda T, x: x + T.zeros(3),
    "zeros_dtype": lambda T, x: x + T.zeros(3, dtype=T.float64),
    "ones_2d": lambda T, x: x * T.ones(3, 3),
    "full_int": lambda T, x: x + T.full((3,), 2),
    "arange": lambda T, x: x + T.arange(3),
    "arange_start": lambda T, x: x + T.arange(1, 4),
    "arange_step": lambda T, x: x + T.arange(0, 0.75, 0.25),
    "eye": lambda T, x: x @ T.eye(3),
    "eye_m": lambda T, x: T.eye(2, 3) @ x,
    "empty_fill": lambda T, x: T.empty(3, 3).fill_(1) + x,
    "ones_like": lambda T, x: x + T.ones_like(x),
    "zeros_like": lambda T, x: T.zeros_like(x) + x,
    "empty_like": lambda T, x: T.empty_like(x).fill_(2) * x,
    "full_like": lambda T, x: T.full_like(x, 2) * x,
    "ones_like_dtype": lambda T, x: T.ones_like(x, dtype=T.int64) + x,
    "new_zeros": lambda T, x: x.new_zeros(3) + x,
    "new_ones": lambda T, x: x.new_ones((3, 3)) + x,
    "new_full": lambda T, x: x.new_full((3,), 1.5) + x,
    "tensor": lambda T, x: x + T.tensor([1., 2., 3.]),
    "tensor_int": lambda T, x: x + T.tensor([1, 2, 3]),
    "new_tensor": lambda T, x: x + x.new_tensor([1, 2, 3]),
    "as_tensor": lambda T, x: x + T.as_tensor([1., 2., 3.]),
    "diff": lambda T, x: T.diff(x),
    "diff_dim0_n2": lambda T, x: T.diff(x, n=2, dim=0),
    "diff_prepend": lambda T, x: T.diff(x, prepend=x[:1], dim=0),
    "diff_bool": lambda T, x: T.diff(x > 0),
    "where_number": lambda T, x: T.where(x > 0, x, 0.0),
    "where_int": lambda T, x: T.where(x > 0, x, 0),
    "where_left": lambda T, x: T.where(x > 0, 1.0, x),
    "where_both": lambda T, x: T.where(x > 0, 1, 0.5),
    "where_method": lambda T, x: x.where(x > 0, 2.0),
    "softplus_floats": lambda T, x: T.nn.functional.softplus(x, 1.0, 20.0),
    "softplus_module": lambda T, x: T.nn.Softplus()(x),
    "relu6": lambda T, x: T.nn.functional.relu6(x),
    "relu6_module": lambda T, x: T.nn.ReLU6()(x),
    "pad": lambda T, x: T.nn.functional.pad(x, (1, 1)),
    "mse_loss": lambda T, x: T.nn.functional.mse_loss(x, x.t()),
    "index_list": lambda T, x: x[[0, 2]],
    "index_none": lambda T, x: x[None, 1:],
    "add_inplace": lambda T, x: x.clone().add_(1),
    "view_reshape": lambda T, x: x.view(-1, 3).t().reshape(9),
    "expand": lambda T, x: x[:, :1].expand(-1, 4),
    "sum_keepdim": lambda T, x: x.sum(dim=0, keepdim=True),
    "max_dim": lambda T, x: x.max(1)[0],
    "softmax": lambda T, x: T.nn.functional.softmax(x, dim=0),
    "layer_norm": lambda T, x: T.nn.functional.layer_norm(x, (3,), x[0], x[1]),
    "cat_stack": lambda T, x: T.stack([T.cat([x, x], 1)[:, :3], x], dim=1),
    "masked_fill": lambda T, x: x.masked_fill(x > 0, 0.0),
    "chunk": lambda T, x: T.chunk(x, 3)[1],
    "split_sizes": lambda T, x: x.split([1, 2], 1)[1],
    "cross_entropy": lambda T, x: T.nn.functional.cross_entropy(x, T.tensor([0, 1, 2])),
    "detach": lambda T, x: x.detach() * 2,
    "data": lambda T, x: x.data + 1,
    "detach_inplace": lambda T, x: (x * 2).detach().add_(1),
    # a number written by indexing: a literal 0-d tensor, filled or copied in
    "setitem_row": lambda T, x: _assigned(x.clone(), 0, 1.0),
    "setitem_element": lambda T, x: _assigned(x.clone(), (0, 1), 2),
    "setitem_whole": lambda T, x: _assigned(x.clone(), Ellipsis, 2.5),
    "setitem_column": lambda T, x: _assigned(x.clone(), (slice(None), 1), 3.0) * 2,
    "setitem_tensor": lambda T, x: _assigned(x.clone(), slice(1, 3), T.tensor([1., 2., 3.])),
}


@pytest.mark.parametrize("name", list(_CALLS))
def test_make_fx_graph_text_as_torch(name):
    check_make_fx_as_torch(_CALLS[name], torch, fg, seed=2)


def _make_fx_codes(fn):
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

    from fusegrad.fx.experimental.proxy_tensor import make_fx

    x = np.ones((3, 3), np.float32)

    def traced(T, make):
        def f(x):
            return fn(T, x)
        return make(f)(T.tensor(x))

    return traced(fg, make_fx), traced(torch, torch_make_fx).code


@pytest.mark.parametrize("name,fn", [
    ("randn", lambda T, x: T.randn(3) * 0 + x),
    ("rand", lambda T, x: x + T.rand(3, 3)),
    ("randn_like", lambda T, x: T.randn_like(x)),
    ("randint", lambda T, x: x + T.randint(0, 5, (3,))),
    ("randint_high", lambda T, x: x + T.randint(5, (3, 3), dtype=T.float32)),
    ("randperm", lambda T, x: x[T.randperm(3)]),
    ("ones_like_pin_memory", lambda T, x: x + T.ones_like(x, pin_memory=False) * 0),
    ("zeros_requiring_grad", lambda T, x: T.zeros(3, requires_grad=True) + x),
])
def test_random_and_grad_factories_as_torch(name, fn):
    gm, want = _make_fx_codes(fn)
    assert gm.code.replace("fusegrad.", "torch.") == want
    out = gm(fg.ones(3, 3))
    assert tuple(out.shape) == (3, 3)
    # an unused draw stays (it moves the generator), as torch.fx keeps it
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert node.is_impure() == name.startswith("rand")


def test_factory_graphs_run_again_and_retrace():
    """A graph's factory calls make new tensors on each run and trace again to themselves."""
    from fusegrad.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda x: x + fg.arange(3) + fg.tensor([1., 2., 3.]))(fg.ones(3))
    a, b = gm(fg.ones(3)), gm(fg.ones(3))
    a.add_(1)  # (each run's result is its own)
    np.testing.assert_allclose(b.numpy(), [2., 4., 6.])
    again = make_fx(gm)(fg.ones(3))
    body = [line for line in again.code.splitlines() if "aten" in line]
    assert [line.split(" = ")[1].split("(")[0] for line in body] == [
        "fusegrad.ops.aten.arange.default", "fusegrad.ops.aten.add.Tensor",
        "fusegrad.ops.aten.lift_fresh_copy.default", "fusegrad.ops.aten.add.Tensor"]
    assert str(fg.ops.aten.zeros.default) == str(torch.ops.aten.zeros.default)
    assert fg.ops.aten.arange.start.name() == torch.ops.aten.arange.start.name()


class _MLP:
    @staticmethod
    def make(T):
        nn = T.nn

        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)

            def forward(self, x):
                return self.fc2(T.relu(self.fc1(x)))
        return MLP(), (2, 4)


class _ConvBN:
    @staticmethod
    def make(T):
        nn = T.nn

        class ConvBN(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
                self.ln, self.drop = nn.LayerNorm(5), nn.Dropout(0.0)

            def forward(self, x):
                y = self.drop(self.ln(T.relu(self.bn(self.conv(x)))))
                return y + T.ones(5)
        return ConvBN(), (1, 3, 5, 5)


class _Buffers:
    @staticmethod
    def make(T):
        nn = T.nn

        class Buffers(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("scale", T.ones(4))
                self.w = nn.Parameter(T.ones(4))

            def forward(self, input):
                return input * self.scale + self.w
        return Buffers(), (2, 4)


def _copied(f_mod, t_mod):
    """`f_mod` with `t_mod`'s parameters and buffers."""
    f_mod.load_state_dict({k: fg.tensor(v.detach().numpy())
                           for k, v in t_mod.state_dict().items()})
    return f_mod


@pytest.mark.parametrize("model,train", [(_MLP, True), (_ConvBN, True), (_ConvBN, False),
                                         (_Buffers, True)])
def test_export_keeps_layers_whole_as_torch(model, train):
    t_mod, shape = model.make(torch)
    f_mod = _copied(model.make(fg)[0], t_mod)
    t_mod.train(train)
    f_mod.train(train)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    te = torch.export.export(t_mod, (torch.tensor(x),))
    fe = fg.export.export(f_mod, (fg.tensor(x),))
    assert fe.graph_module.code.replace("fusegrad.", "torch.") == te.graph_module.code
    assert str(fe.graph_signature) == str(te.graph_signature)
    # the program runs as the module: values and, in training, batch norm's statistics
    f_eager = copy.deepcopy(f_mod)
    want = f_eager(fg.tensor(x))
    run = fe.module()
    np.testing.assert_allclose(run(fg.tensor(x)).detach().numpy(), want.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    for key, value in f_eager.state_dict().items():
        held = run
        for part in key.split("."):
            held = getattr(held, part)
        np.testing.assert_allclose(held.detach().numpy(), value.numpy(), rtol=1e-6)
    buf = io.BytesIO()  # (the layers' and factories' handles save and load)
    fg.export.save(fe, buf)
    buf.seek(0)
    back = fg.export.load(buf)
    np.testing.assert_allclose(back.module()(fg.tensor(x)).detach().numpy(),
                               fe.module()(fg.tensor(x)).detach().numpy(), rtol=1e-6)
    assert fe.graph_module.code == back.graph_module.code


def test_export_layers_decompose_to_registry_ops():
    t_mod, shape = _ConvBN.make(torch)
    f_mod = _copied(_ConvBN.make(fg)[0], t_mod)
    x = fg.tensor(np.random.default_rng(6).standard_normal(shape).astype(np.float32))
    ep = fg.export.export(f_mod, (x,)).run_decompositions()
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "aten.convolution.default" in targets
    assert not targets & {"aten.conv2d.default", "aten.batch_norm.default",
                          "aten.layer_norm.default", "aten.ones.default"}
    want = copy.deepcopy(f_mod)(x)
    np.testing.assert_allclose(ep.module()(x).detach().numpy(), want.detach().numpy(),
                               rtol=1e-5, atol=1e-5)
