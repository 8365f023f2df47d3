"""`GraphModule.to_folder` against torch.fx's: the same files, the same constructor section
of `module.py`, and a package whose module computes what the traced one does."""

from __future__ import annotations

import importlib
import os
import sys
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad as fg  # noqa: E402


def _model(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3, padding=1)
            self.bn = nn.BatchNorm1d(4)
            self.lin = nn.Linear(8, 4)
            self.act = nn.ReLU()
            self.seq = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
            self.register_buffer("buf", lib.arange(4.0))
            self.scale = nn.Parameter(lib.ones(4) * 0.5)

        def forward(self, x):
            y = self.act(self.conv(x)).flatten(1)[:, :8]
            z = self.bn(self.lin(y)) + self.buf * self.scale
            return self.seq(z).sum(1) + z.shape[0], nn.functional.gelu(z)[..., 1:]

    return Net()


def _pair():
    t = _model(torch)
    f = _model(fg)
    f.load_state_dict({k: fg.from_numpy(v.detach().numpy().copy())
                       for k, v in t.state_dict().items()})
    for m in (t, f):
        m.eval()
    return t, f


def _write(lib, module, where, package, module_name):
    """Trace `module`, write it to `<where>/<package>` (a relative folder, as a user gives
    it) and import `module_name` (None: the default name) from the package."""
    os.chdir(where)
    gm = lib.fx.symbolic_trace(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if module_name is None:
            gm.to_folder(package)
        else:
            gm.to_folder(package, module_name)
    sys.path.insert(0, str(where))
    try:
        cls = getattr(importlib.import_module(package), module_name or "FxModule")
    finally:
        sys.path.remove(str(where))
    return gm, cls, [str(w.message) for w in caught]


@pytest.fixture
def folders(tmp_path):
    from fusegrad.ops._native import native_kernels

    cwd = os.getcwd()
    (tmp_path / "t").mkdir()
    (tmp_path / "f").mkdir()
    # NumPy's kernels: building the C ones is a test of its own (tests/test_native.py).
    with native_kernels(False):
        yield tmp_path / "t", tmp_path / "f"
    os.chdir(cwd)


def _constructor(source: str) -> list[str]:
    lines = source.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("class "))
    end = next(i for i, line in enumerate(lines) if "def forward" in line)
    return [line.strip() for line in lines[start + 1:end] if line.strip()]


def test_round_trip_matches_traced_and_torch(folders):
    t_dir, f_dir = folders
    t, f = _pair()
    tgm, tcls, twarn = _write(torch, t, t_dir, "pkg_t2f_a", "MyNet")
    fgm, fcls, fwarn = _write(fg, f, f_dir, "pkg_t2f_a_fg", "MyNet")
    files_t = sorted(n for n in os.listdir(t_dir / "pkg_t2f_a") if n != "__pycache__")
    files_f = sorted(n for n in os.listdir(f_dir / "pkg_t2f_a_fg") if n != "__pycache__")
    assert files_f == files_t
    assert [w.replace("fusegrad", "torch") for w in fwarn] == twarn
    init_t = (t_dir / "pkg_t2f_a" / "__init__.py").read_text()
    assert (f_dir / "pkg_t2f_a_fg" / "__init__.py").read_text() == init_t
    ct = _constructor((t_dir / "pkg_t2f_a" / "module.py").read_text())
    cf = _constructor((f_dir / "pkg_t2f_a_fg" / "module.py").read_text())
    assert [c.replace("pkg_t2f_a_fg", "pkg_t2f_a").replace("fusegrad", "torch")
            for c in cf] == ct

    os.chdir(t_dir)  # (each reads its files by the relative paths it was given)
    tm = tcls().eval()
    os.chdir(f_dir)
    fm = fcls().eval()
    x = np.random.default_rng(0).standard_normal((3, 1, 2, 4)).astype(np.float32)
    for a, b, c in zip(fm(fg.from_numpy(x)), fgm(fg.from_numpy(x)), tm(torch.from_numpy(x))):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=0, atol=0)
        np.testing.assert_allclose(a.detach().numpy(), c.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
    assert sorted(fm.state_dict()) == sorted(fgm.state_dict())
    for k, v in fgm.state_dict().items():
        assert np.array_equal(fm.state_dict()[k].numpy(), v.numpy()), k
    # The written module trains as the traced one: parameters, not copies.
    out = fm(fg.from_numpy(x))[0].sum()
    out.backward()
    assert fm.scale.grad is not None and fm.lin.weight.grad is not None


def test_default_name_and_wrapped_function(folders):
    _, f_dir = folders
    f = _pair()[1]
    fgm, fcls, _ = _write(fg, f, f_dir, "pkg_t2f_b", None)
    assert fcls.__name__ == "FxModule"
    x = fg.randn(2, 1, 2, 4)
    np.testing.assert_allclose(fcls().eval()(x)[1].detach().numpy(),
                               fgm(x)[1].detach().numpy(), rtol=0, atol=0)
    # A global function the graph calls is imported by its module and name.
    gm = fg.fx.symbolic_trace(_uses_a_global)
    gm.to_folder(str(f_dir / "pkg_t2f_c"))
    assert "import _scaled as " in (f_dir / "pkg_t2f_c" / "module.py").read_text()
    sys.path.insert(0, str(f_dir))
    try:
        mod = importlib.import_module("pkg_t2f_c").FxModule()
    finally:
        sys.path.remove(str(f_dir))
    x = fg.randn(5)
    assert fg.equal(mod(x), gm(x))


def _scaled(a):
    return a * 3.0


fg.fx.wrap("_scaled")


def _uses_a_global(a):
    return _scaled(fg.relu(a)) + 1
