"""fusegrad.export (PyTorch's torch.export) against torch.export on the same models with the
same weights: signatures, outputs of `module()`, guards, dynamic dims, data-dependent
control flow, run_decompositions and save/load."""

import io

import numpy as np
import pytest
import torch

import fusegrad as fg
from fusegrad.export import Dim, ExportedProgram, dims, export, load, save
from fusegrad.export.graph_signature import InputKind, OutputKind


def _models(lib):
    nn = lib.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.bn = nn.BatchNorm2d(4)
            self.fc1 = nn.Linear(4 * 6 * 6, 5)

        def forward(self, x, *, scale=1.0):
            y = self.bn(self.conv(x)).relu().flatten(1)
            return {"out": self.fc1(y) * scale, "t": (y.sum(), y)}

    class Reshape(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x).view(x.shape[0], 3) * 2

    class Branch(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    return {"mlp": MLP, "cnn": CNN, "reshape": Reshape, "branch": Branch}


def _pair(name, train=False):
    """The same model in torch and fusegrad with the same weights."""
    torch.manual_seed(0)
    t = _models(torch)[name]()
    f = _models(fg)[name]()
    f.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    t.train(train)
    f.train(train)
    return t, f


def _np(x):
    return x.detach().numpy()


def _close(a, b, atol=1e-5):
    np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=atol)


def _specs(ep):
    sig = ep.graph_signature
    ins = [(s.kind.name, s.arg.name, s.target, s.persistent) for s in sig.input_specs]
    outs = [s.kind.name for s in sig.output_specs]
    return ins, outs


def test_mlp_signature_and_values():
    t, f = _pair("mlp")
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    te = torch.export.export(t, (torch.tensor(x),))
    fe = export(f, (fg.tensor(x),))
    assert isinstance(fe, ExportedProgram)
    assert _specs(fe) == _specs(te)
    _close(fe.module()(fg.tensor(x)), te.module()(torch.tensor(x)))
    assert [k for k, _ in fe.named_parameters()] == [k for k, _ in te.named_parameters()]
    assert list(fe.state_dict) == list(te.state_dict)
    assert fe.constants == {} and te.constants == {}
    assert "ExportedProgram:" in str(fe) and "p_fc1_weight: PARAMETER target='fc1.weight'" \
        in str(fe)


@pytest.mark.parametrize("train", [False, True])
def test_cnn_batchnorm_kwargs_dict_outputs(train):
    t, f = _pair("cnn", train)
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    te = torch.export.export(t, (torch.tensor(x),), {"scale": 2.0})
    fe = export(f, (fg.tensor(x),), {"scale": 2.0})
    assert _specs(fe) == _specs(te)
    # Exporting runs nothing on the module itself.
    _close(f.bn.running_mean, t.bn.running_mean)
    tm, fm = te.module(), fe.module()
    for _ in range(2):  # the second call sees the buffers the first updated (train mode)
        to = tm(torch.tensor(x), scale=2.0)
        fo = fm(fg.tensor(x), scale=2.0)
        assert set(fo) == set(to)
        _close(fo["out"], to["out"], 1e-4)
        _close(fo["t"][0], to["t"][0], 1e-3)
        _close(fo["t"][1], to["t"][1], 1e-4)
        _close(fm.bn.running_mean, tm.bn.running_mean)
        _close(fm.bn.running_var, tm.bn.running_var)
        assert int(fm.bn.num_batches_tracked) == int(tm.bn.num_batches_tracked)


def test_guard_on_static_shape():
    t, f = _pair("cnn")
    x = np.zeros((2, 3, 8, 8), np.float32)
    te = torch.export.export(t, (torch.tensor(x),))
    fe = export(f, (fg.tensor(x),))
    bad = np.zeros((3, 3, 8, 8), np.float32)
    with pytest.raises(Exception) as want:
        te.module()(torch.tensor(bad))
    with pytest.raises(type(want.value)) as got:
        fe.module()(fg.tensor(bad))
    assert str(got.value) == str(want.value)


def test_dynamic_dims_are_refused_and_auto_is_static():
    """A `Dim` (or Dim.DYNAMIC) is refused rather than guessed: a size the program derives
    from it (`x[: x.shape[0] // 2]`) would be computed wrong at other sizes; `Dim.AUTO`
    exports static, as PyTorch may. Dims print and compare as PyTorch's."""
    t, f = _pair("reshape")
    x = np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32)
    tb, fb = torch.export.Dim("batch", min=2, max=10), Dim("batch", min=2, max=10)
    for spec in ({"x": {0: fb}}, {"x": {0: Dim.DYNAMIC}}, ({0: fb},)):
        with pytest.raises(NotImplementedError, match="dynamic dims"):
            export(f, (fg.tensor(x),), dynamic_shapes=spec)

    class Half(fg.nn.Module):
        def forward(self, x):
            return x[: x.shape[0] // 2] * 2

    with pytest.raises(NotImplementedError):
        export(Half(), (fg.ones(8, 3),), dynamic_shapes={"x": {0: Dim("b", min=2, max=64)}})
    fe = export(f, (fg.tensor(x),), dynamic_shapes=({0: Dim.AUTO},))
    _close(fe.module()(fg.tensor(x)), t(torch.tensor(x)))
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[0\] == 4"):
        fe.module()(fg.ones(6, 4))
    assert fe.range_constraints == {}
    assert repr(fb) == repr(tb)
    assert [repr(d) for d in dims("a", "b")] == [repr(d) for d in torch.export.dims("a", "b")]


def test_bad_dynamic_shapes_keys():
    t, f = _pair("reshape")
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(Exception) as want:
        torch.export.export(t, (torch.tensor(x),),
                            dynamic_shapes={"y": {0: torch.export.Dim("b")}})
    with pytest.raises(Exception) as got:
        export(f, (fg.tensor(x),), dynamic_shapes={"y": {0: Dim("b")}})
    assert str(want.value).startswith(str(got.value))


def test_data_dependent_branch():
    t, f = _pair("branch")
    x = np.ones(3, np.float32)
    with pytest.raises(Exception) as want:
        torch.export.export(t, (torch.tensor(x),))
    with pytest.raises(Exception) as got:
        export(f, (fg.tensor(x),))
    assert type(got.value).__name__ == type(want.value).__name__
    assert type(got.value).__module__.replace("fusegrad", "torch") == \
        type(want.value).__module__
    assert str(want.value).split("\n")[0] == str(got.value).split("\n")[0]


@pytest.mark.parametrize("train", [False, True])
def test_run_decompositions(train):
    t, f = _pair("cnn", train)
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32)
    te = torch.export.export(t, (torch.tensor(x),), {"scale": 2.0}).run_decompositions()
    fe = export(f, (fg.tensor(x),), {"scale": 2.0}).run_decompositions()
    from fusegrad._decomp import is_core

    for node in fe.graph.nodes:
        op = getattr(node.target, "op", None)
        assert op is None or is_core(op), node
    assert _specs(fe) == _specs(te)
    to = te.module()(torch.tensor(x), scale=2.0)
    fo = fe.module()(fg.tensor(x), scale=2.0)
    _close(fo["out"], to["out"], 1e-4)


def test_save_load_roundtrip(tmp_path):
    t, f = _pair("cnn", True)
    x = np.random.default_rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)
    te = torch.export.export(t, (torch.tensor(x),), {"scale": 2.0})
    fe = export(f, (fg.tensor(x),), {"scale": 2.0})
    path = tmp_path / "m.pt2"
    save(fe, str(path))
    back = load(str(path))
    assert _specs(back) == _specs(te)
    _close(back.module()(fg.tensor(x), scale=2.0)["out"],
           te.module()(torch.tensor(x), scale=2.0)["out"], 1e-4)
    # through a file object too; the static guard survives
    t, f = _pair("reshape")
    x = np.random.default_rng(5).standard_normal((4, 4)).astype(np.float32)
    buf = io.BytesIO()
    save(export(f, (fg.tensor(x),)), buf)
    buf.seek(0)
    back = load(buf)
    _close(back.module()(fg.tensor(x)), t(torch.tensor(x)))
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[0\] == 4"):
        back.module()(fg.tensor(np.ones((7, 4), np.float32)))


def test_load_refuses_unknown_targets():
    import json

    from fusegrad.serialization import _safetensors_from_bytes, save_safetensors

    _, f = _pair("mlp")
    buf = io.BytesIO()
    save(export(f, (fg.ones(2, 4),)), buf)
    tensors, meta = _safetensors_from_bytes(buf.getvalue(), with_metadata=True)
    program = json.loads(meta["fusegrad.export"])
    for node in program["nodes"]:
        if node["op"] == "call_function":
            node["target"] = "fn:os.system"
    out = io.BytesIO()
    save_safetensors(tensors, out, metadata={"fusegrad.export": json.dumps(program)})
    out.seek(0)
    with pytest.raises(ValueError, match="unknown call target"):
        load(out)


def test_module_paths_and_kinds():
    assert ExportedProgram.__module__ == torch.export.ExportedProgram.__module__.replace(
        "torch", "fusegrad")
    assert Dim.__module__ == torch.export.Dim.__module__.replace("torch", "fusegrad")
    assert [k.name for k in InputKind] == [k.name for k in
                                           torch.export.graph_signature.InputKind]
    assert [k.name for k in OutputKind] == [k.name for k in
                                            torch.export.graph_signature.OutputKind]
    assert repr(Dim.AUTO) == repr(torch.export.Dim.AUTO)


def test_structure_errors():
    t, f = _pair("mlp")

    class Two(torch.nn.Module):
        def forward(self, x, ys):
            return x + ys[0]

    class FTwo(fg.nn.Module):
        def forward(self, x, ys):
            return x + ys[0]

    for shapes in ({"x": None, "ys": None}, (None, {0: None})):
        with pytest.raises(Exception) as want:
            torch.export.export(Two(), (torch.ones(3), [torch.ones(3)]), dynamic_shapes=shapes)
        with pytest.raises(Exception) as got:
            export(FTwo(), (fg.ones(3), [fg.ones(3)]), dynamic_shapes=shapes)
        assert str(want.value).startswith(str(got.value))
    # A positional argument passed by keyword to module()
    te = torch.export.export(t, (torch.ones(2, 4),))
    fe = export(f, (fg.ones(2, 4),))
    with pytest.raises(ValueError) as want:
        te.module()(x=torch.ones(2, 4))
    with pytest.raises(ValueError) as got:
        fe.module()(x=fg.ones(2, 4))
    assert str(got.value) == str(want.value)
    with pytest.raises(RuntimeError) as want:
        te(torch.ones(2, 4))
    with pytest.raises(RuntimeError) as got:
        fe(fg.ones(2, 4))
    assert str(got.value) == str(want.value)
