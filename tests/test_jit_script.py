"""fusegrad.jit.script against torch.jit.script on the same source (tests/jit_programs.py):
outputs and gradients, graphs with If/Loop blocks, code, errors and warnings; save/load
round trips, and files that loading must refuse without running anything."""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import json
import pathlib
import pickle
import warnings
import zipfile

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad.serialization import load_safetensors, save_safetensors

HERE = pathlib.Path(__file__).parent


def _import(path: pathlib.Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """(fusegrad version, torch version) of jit_programs.py."""
    text = (HERE / "jit_programs.py").read_text()
    folder = tmp_path_factory.mktemp("jit_programs")
    fg_path = folder / "jit_programs_fusegrad.py"
    fg_path.write_text(text.replace("\nimport torch\n", "\nimport fusegrad as torch\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return _import(fg_path, "jit_programs_fusegrad"), _import(HERE / "jit_programs.py",
                                                                  "jit_programs_torch")


def quiet_script(lib, obj):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return lib.jit.script(obj)


def both(programs, name):
    fg, th = programs
    return quiet_script(fusegrad, getattr(fg, name)), quiet_script(torch, getattr(th, name))


def same(a, b, tol=1e-5):
    if isinstance(b, fusegrad.Tensor):
        b = torch.tensor(b.detach().numpy())
    if isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y, tol)
    elif isinstance(b, torch.Tensor):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)
    else:
        assert a == b


def pair(array, grad=False):
    array = np.asarray(array, dtype=np.float32)
    return (fusegrad.tensor(array, requires_grad=grad), torch.tensor(array, requires_grad=grad))


def copy_weights(fg_module, th_module):
    with torch.no_grad():
        for p, q in zip(fg_module.parameters(), th_module.parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))


# ------------------------------------------------------------------------------------------
# functions


def test_fast_function_outputs_gradients_graph_and_code(programs):
    fg, th = both(programs, "fast_function")
    assert isinstance(fg, fusegrad.jit.ScriptFunction)
    (x, tx) = pair([1.0, -2.0, 3.0], grad=True)
    out, tout = fg(x), th(tx)
    same(out, tout)
    same(out, programs[0].fast_function(x))  # and eager
    out.sum().backward()
    tout.sum().backward()
    same(x.grad, tx.grad)
    assert fg.code == th.code  # `return torch.add(torch.mul(x, 2), 1)`
    text = str(fg.graph)
    assert text.startswith("graph(%x : Tensor):") and "aten::mul" in text
    assert "prim::Constant[value=2]()" in text and text.rstrip().endswith("return (%4)")


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_value_branches_loops_and_early_returns(programs, sign):
    data = [0.5 * sign, 1.5 * sign, -0.25 * sign]
    for name, extra in [("branchy", (3,)), ("early_return", ()), ("calls_helper", None),
                        ("tensor_properties", ()), ("with_math", (2.0,)),
                        ("bool_logic", (True,)), ("bool_logic", (False,))]:
        fg, th = both(programs, name)
        (x, tx) = pair(data, grad=True)
        if extra is None:  # a second tensor argument
            (y, ty) = pair([2.0, -1.0, 0.5], grad=True)
            args, targs = (x, y), (tx, ty)
        else:
            args, targs = (x, *extra), (tx, *extra)
        out, tout = fg(*args), th(*targs)
        same(out, tout)
        same(out, getattr(programs[0], name)(*args))
        out.sum().backward()
        tout.sum().backward()
        same(x.grad, tx.grad)


def test_loops_over_lists_and_tensor_rows(programs):
    fg, th = both(programs, "loops_over_values")
    (x, tx) = pair([[1.0, 2.0], [-3.0, 1.0], [0.5, 0.5]], grad=True)
    out, tout = fg(x, [1, 2, 3]), th(tx, [1, 2, 3])
    same(out, tout)
    out[0].sum().backward()
    tout[0].sum().backward()
    same(x.grad, tx.grad)


@pytest.mark.parametrize("n", [0, 1, 3, 8])
def test_break_continue_enumerate_zip_and_comprehensions(programs, n):
    for name, extra in [("break_continue", (n,)), ("comprehensions", ([0.5, -1.0, 2.0][:n],))]:
        fg, th = both(programs, name)
        (x, tx) = pair([1.0, 2.0], grad=True)
        out, tout = fg(x, *extra), th(tx, *extra)
        same(out, tout)
        out[0].sum().backward()
        tout[0].sum().backward()
        same(x.grad, tx.grad)


def test_optional_state_raise_assert_and_argument_conversion(programs):
    fg, th = both(programs, "optional_state")
    (x, tx) = pair([1.0, -2.0], grad=True)
    # an int for a float and a one-element tensor for an int convert as in TorchScript
    out, tout = fg(x, fusegrad.tensor(3), 2), th(tx, torch.tensor(3), 2)
    same(out, tout)
    out[0].sum().backward()
    tout[0].sum().backward()
    same(x.grad, tx.grad)
    for n in (0, 12):
        with pytest.raises(torch.jit.Error) as want:
            th(tx, n, 1.0)
        with pytest.raises(fusegrad.jit.Error) as got:
            fg(x, n, 1.0)
        message = "no steps" if n == 0 else "too many steps"
        assert message in str(want.value) and message in str(got.value)


def test_optional_tuple_and_defaults(programs):
    fg, th = both(programs, "optional_and_tuple")
    (x, tx), (w, tw) = pair([[1.0, 2.0], [3.0, -1.0], [0.5, 0.2]]), pair([[2.0, 1.0]] * 3)
    same(fg(x, None), th(tx, None))
    same(fg(x, w), th(tx, tw))
    same(fg(x, w, 0.25), th(tx, tw, 0.25))
    same(fg(x[:1], None), th(tx[:1], None))
    assert "Optional[Tensor]" in fg.code and "Tuple[Tensor, int]" in fg.code


def test_graph_has_if_and_loop_blocks(programs):
    fg, th = both(programs, "branchy")
    text = str(fg.graph)
    for piece in ("graph(%x : Tensor,", "%n : int):", "prim::If(", "block0():", "block1():",
                  "prim::Loop(", "aten::Bool(", "-> ("):
        assert piece in text, piece
    assert text.count("prim::Loop(") == str(th.graph).count("prim::Loop(") == 2
    code = fg.code
    assert "if bool(torch.gt(torch.sum(x), 0)):" in code and "for " in code and \
        "while " in code


def test_argument_type_errors_match_torch(programs):
    fg, th = both(programs, "branchy")
    for args in [(3, 2), (fusegrad.ones(3), 2.5)]:
        targs = tuple(torch.ones(3) if isinstance(a, fusegrad.Tensor) else a for a in args)
        with pytest.raises(RuntimeError) as want:
            th(*targs)
        with pytest.raises(RuntimeError) as got:
            fg(*args)
        assert str(got.value).splitlines()[0] == str(want.value).splitlines()[0]


# ------------------------------------------------------------------------------------------
# modules


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_module_with_a_branch_on_a_tensor_value(programs, sign):
    fg_mod, th_mod = programs[0].Gate(), programs[1].Gate()
    copy_weights(fg_mod, th_mod)
    fg, th = quiet_script(fusegrad, fg_mod), quiet_script(torch, th_mod)
    assert isinstance(fg, fusegrad.jit.ScriptModule) and isinstance(fg, fusegrad.nn.Module)
    (x, tx) = pair([[1.0 * sign, 0.5, 0.25, 2.0 * sign]], grad=True)
    out, tout = fg(x), th(tx)
    same(out, tout)
    same(out, fg_mod(x))
    out.sum().backward()
    tout.sum().backward()
    same(x.grad, tx.grad)
    for (name, p), (_, q) in zip(fg.named_parameters(), th.named_parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if q.grad is not None:
            same(p.grad, q.grad)
    # the scripted module shares the original's parameters
    assert fg.lin.weight is fg_mod.lin.weight
    assert "prim::If" in str(fg.graph) and 'prim::GetAttr[name="lin"]' in str(fg.graph)
    assert "def forward(self," in fg.code


def test_sequential_modulelist_and_exported_method(programs):
    fg_mod, th_mod = programs[0].Stack(), programs[1].Stack()
    copy_weights(fg_mod, th_mod)
    fg, th = quiet_script(fusegrad, fg_mod), quiet_script(torch, th_mod)
    (x, tx) = pair([[1.0, -2.0, 0.5], [0.1, 0.2, 0.3]])
    same(fg(x), th(tx))
    same(fg.norm(x[:, :2]), th.norm(tx[:, :2]))
    fg.eval()
    assert not fg.body.training


def test_cnn_of_library_layers(programs):
    fg_mod, th_mod = programs[0].SmallCNN().eval(), programs[1].SmallCNN().eval()
    copy_weights(fg_mod, th_mod)
    fg, th = quiet_script(fusegrad, fg_mod), quiet_script(torch, th_mod)
    data = np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32)
    (x, tx) = pair(data, grad=True)
    out, tout = fg(x), th(tx)
    same(out, tout)
    out.sum().backward()
    tout.sum().backward()
    same(x.grad, tx.grad)
    for p, q in zip(fg.parameters(), th.parameters()):
        same(p.grad, q.grad)


# ------------------------------------------------------------------------------------------
# errors and warnings


def _no_try(x):
    try:
        y = x
    except Exception:
        y = x
    return y


def _star(x, *args):
    return x


def _lambda_inside(x):
    f = lambda t: t  # noqa: E731
    return f(x)


@pytest.mark.parametrize("fn", [_no_try, _star, _lambda_inside])
def test_unsupported_constructs_raise_like_torch(fn):
    with pytest.raises(Exception) as want:
        quiet_script(torch, fn)
    with pytest.raises(fusegrad.jit.NotSupportedError) as got:
        quiet_script(fusegrad, fn)
    assert type(got.value).__name__ == type(want.value).__name__
    mine, theirs = str(got.value).splitlines(), str(want.value).splitlines()
    assert mine[0] == theirs[0]  # "try blocks aren't supported:"
    assert mine[1] == theirs[1]  # the File "...", line N pointer
    assert "<--- HERE" in str(got.value)


def test_script_and_trace_warn_as_torch():
    def f(x):
        return x + 1

    for lib in (fusegrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.jit.script(f)
            lib.jit.trace(f, lib.ones(2))
        messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
        if lib is fusegrad:
            mine = messages
        else:
            assert mine == messages


def test_ignore_export_is_scripting_annotate():
    @fusegrad.jit.ignore
    def python_side(x):
        return x * 3

    def f(x):
        if fusegrad.jit.is_scripting():
            y = fusegrad.jit.annotate(fusegrad.Tensor, python_side(x))
        else:
            y = x
        return y

    scripted = quiet_script(fusegrad, f)
    same(scripted(fusegrad.ones(2)), torch.ones(2) * 3)
    same(f(fusegrad.ones(2)), torch.ones(2))
    with pytest.raises(RuntimeError, match="Could not export Python function call"):
        scripted.save(pathlib.Path("/nonexistent/never-written.pt"))


# ------------------------------------------------------------------------------------------
# save / load


def test_function_save_load_round_trip(programs, tmp_path):
    fg, _ = both(programs, "calls_helper")
    path = tmp_path / "f.pt"
    fg.save(str(path))
    loaded = fusegrad.jit.load(str(path))
    x, y = fusegrad.tensor([0.5, -1.0, 2.0]), fusegrad.tensor([1.0, 1.0, -2.0])
    same(loaded(x, y), torch.tensor(fg(x, y).detach().numpy()))
    assert str(loaded.graph) == str(fg.graph) and loaded.code == fg.code


def test_module_save_load_round_trip_keeps_outputs_and_gradients(programs, tmp_path):
    fg = quiet_script(fusegrad, programs[0].Gate())
    path = tmp_path / "m.pt"
    fusegrad.jit.save(fg, path)
    loaded = fusegrad.jit.load(path)
    assert isinstance(loaded, fusegrad.jit.ScriptModule)
    for sign in (1.0, -1.0):
        x = fusegrad.tensor([[sign, 0.5, 0.25, 2.0 * sign]])
        same(loaded(x), torch.tensor(fg(x).detach().numpy()))
    loaded(fusegrad.ones(1, 4)).sum().backward()
    assert loaded.lin.weight.grad is not None and loaded.lin.weight.requires_grad
    assert sorted(dict(loaded.named_parameters())) == sorted(dict(fg.named_parameters()))
    cnn = quiet_script(fusegrad, programs[0].SmallCNN().eval())
    cnn.save(tmp_path / "cnn.pt")
    cnn_again = fusegrad.jit.load(tmp_path / "cnn.pt")
    assert not cnn_again.training and not cnn_again.features[1].training
    image = fusegrad.randn(2, 1, 8, 8)
    same(cnn_again(image), torch.tensor(cnn(image).detach().numpy()))
    same(cnn_again.features[1].running_var, torch.tensor(cnn.features[1].running_var.numpy()))
    stack = quiet_script(fusegrad, programs[0].Stack())
    stack.save(tmp_path / "s.pt")
    again = fusegrad.jit.load(tmp_path / "s.pt")
    x = fusegrad.randn(2, 3)
    same(again(x), torch.tensor(stack(x).detach().numpy()))
    same(again.norm(x), torch.tensor(stack.norm(x).detach().numpy()))


def test_trace_result_saves_and_loads(tmp_path):
    model = fusegrad.nn.Sequential(fusegrad.nn.Linear(4, 3), fusegrad.nn.ReLU())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = fusegrad.jit.trace(model, fusegrad.randn(2, 4))

        def f(x):
            if x.sum() > 0:
                return x * 2
            return x

        traced_f = fusegrad.jit.trace(f, fusegrad.ones(3))
    traced.save(tmp_path / "t.pt")
    loaded = fusegrad.jit.load(tmp_path / "t.pt")
    x = fusegrad.randn(5, 4)
    same(loaded(x), torch.tensor(model(x).detach().numpy()))
    traced_f.save(tmp_path / "f.pt")
    same(fusegrad.jit.load(tmp_path / "f.pt")(-fusegrad.ones(3)), -torch.ones(3) * 2)


def test_loading_uses_no_pickle_eval_or_import(programs, tmp_path, monkeypatch):
    fg = quiet_script(fusegrad, programs[0].Gate())
    fg.save(tmp_path / "m.pt")
    x = fusegrad.ones(1, 4)
    # A first load and call outside the check: fusegrad compiles its own protocol wrappers
    # on their first call (code of its own, not the file's).
    fusegrad.jit.load(tmp_path / "m.pt")(x)

    def forbidden(*args, **kwargs):
        raise AssertionError("loading ran code")

    for obj, name in [(pickle, "loads"), (pickle, "load"), (pickle, "Unpickler"),
                      (builtins, "eval"), (builtins, "exec"), (builtins, "compile"),
                      (importlib, "import_module")]:
        monkeypatch.setattr(obj, name, forbidden)
    loaded = fusegrad.jit.load(tmp_path / "m.pt")
    out = loaded(x)
    monkeypatch.undo()  # (the comparison's own failure report compiles code)
    same(out, torch.tensor(fg(x).detach().numpy()))


def _rewrite(path, edit):
    tensors, meta = load_safetensors(str(path), with_metadata=True)
    program = json.loads(meta["fusegrad.jit"])
    edit(program)
    save_safetensors(tensors, str(path), metadata={"fusegrad.jit": json.dumps(program)})


def _first_node(program):
    return program["root"]["methods"]["forward"]["graph"]["nodes"]


@pytest.mark.parametrize("edit", [
    # a node naming a function outside fusegrad's tensor ops
    lambda p: _first_node(p)[-1].update(kind="aten::system", attrs={"form": "function"}),
    lambda p: _first_node(p)[-1].update(kind="aten::save", attrs={"form": "function"}),
    lambda p: _first_node(p)[-1].update(kind="aten::__import__", attrs={"form": "operator"}),
    lambda p: _first_node(p)[-1].update(kind="aten::_unsafe", attrs={"form": "method"}),
    # a call back into Python, which only exists in memory
    lambda p: _first_node(p)[-1].update(kind="prim::PythonOp", attrs={"name": "os.system"}),
    # a value used before it is defined
    lambda p: _first_node(p)[0].update(inputs=["nowhere"]),
    # an If without its second block
    lambda p: [n["blocks"].pop() for n in _first_node(p) if n["kind"] == "prim::If"],
    # a Python attribute smuggled in as a module attribute or method
    lambda p: p["root"]["constants"].update(__class__=1),
    lambda p: p["root"]["methods"].update(__init__=p["root"]["methods"]["forward"]),
])
def test_crafted_files_are_refused(programs, tmp_path, edit):
    fg = quiet_script(fusegrad, programs[0].Gate())
    path = tmp_path / "m.pt"
    fg.save(path)
    _rewrite(path, edit)
    with pytest.raises(RuntimeError, match="invalid program"):
        fusegrad.jit.load(path)


class _Payload:
    """Unpickling this creates the marker file: it must never happen."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_torchscript_archives_are_refused_unread(programs, tmp_path):
    th = quiet_script(torch, programs[1].Gate())
    path = tmp_path / "torch.pt"
    th.save(str(path))
    with pytest.raises(RuntimeError, match="PyTorch TorchScript archive"):
        fusegrad.jit.load(path)
    marker = tmp_path / "ran"
    crafted = tmp_path / "crafted.pt"
    with zipfile.ZipFile(crafted, "w") as z:
        z.writestr("archive/constants.pkl", pickle.dumps(_Payload(str(marker))))
        z.writestr("archive/code/__torch__.py", "import os\nos.system('echo pwned')\n")
    with pytest.raises(RuntimeError, match="PyTorch TorchScript archive"):
        fusegrad.jit.load(crafted)
    assert not marker.exists()
