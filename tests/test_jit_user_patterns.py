"""TorchScript patterns of user code against PyTorch: a Sequential's last layer by a negative
index, a module attribute updated with `+=`, a frozen module's preserved attributes and
methods (and nothing else left), a copy of a scripted module running its own exported
methods, and the script-time error for a Tensor method TorchScript does not have."""

from __future__ import annotations

import copy
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)

X = np.arange(24, dtype=np.float32).reshape(4, 6) / 10


def _counter(lib):
    """A module with a submodule, numbers read by forward and exported methods."""
    nn = lib.nn

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 3))
            self.version = 1
            self.scale = 2.0

        def forward(self, x):
            y = self.seq[-1](self.seq[-2](self.seq[0](x)))
            return y * self.scale + self.version

        @lib.jit.export
        def bump(self) -> int:
            self.version += 1
            return self.version

        @lib.jit.export
        def first(self, x: torch.Tensor) -> torch.Tensor:
            return self.seq[-3](x) - 1

    lib.manual_seed(0)
    return Counter().eval()


def _both(fn):
    return {lib: fn(lib) for lib in (torch, fusegrad)}


def _copy_weights(src, dst):
    dst.load_state_dict({k: fusegrad.tensor(v.numpy()) for k, v in src.state_dict().items()})


def test_negative_index_and_attribute_update():
    def run(lib):
        m = _counter(lib)
        if lib is fusegrad:
            _copy_weights(_counter(torch), m)
        sm = lib.jit.script(m)
        x = lib.tensor(X)
        out = [sm(x).detach().numpy(), sm.first(x).detach().numpy()]
        out.append((sm.bump(), sm.bump(), sm.version))
        out.append(sm(x).detach().numpy())
        return out
    results = _both(run)
    got, want = results[fusegrad], results[torch]
    for g, w in zip(got, want):
        if isinstance(w, tuple):
            assert g == w
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("keep", [(), ("version", "bump"), ("first",), ("scale",)])
def test_freeze_keeps_only_what_is_preserved(keep):
    names = ("seq", "version", "scale", "bump", "first", "training")

    def run(lib):
        m = _counter(lib)
        if lib is fusegrad:
            _copy_weights(_counter(torch), m)
        sm = lib.jit.script(m)
        fm = lib.jit.freeze(sm, preserved_attrs=list(keep))
        x = lib.tensor(X)
        out = [[hasattr(fm, n) for n in names], fm(x).detach().numpy()]
        if "bump" in keep:
            out.append((fm.bump(), fm.version, sm.version))
            out.append(fm(x).detach().numpy())
        if "first" in keep:
            out.append(fm.first(x).detach().numpy())
        return out
    results = _both(run)
    got, want = results[fusegrad], results[torch]
    assert got[0] == want[0]
    for g, w in zip(got[1:], want[1:]):
        if isinstance(w, tuple):
            assert g == w
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_copy_of_scripted_module_runs_its_own_methods():
    sm = fusegrad.jit.script(_counter(fusegrad))
    other = copy.deepcopy(sm)
    assert (other.bump(), other.bump()) == (2, 3)
    assert (other.version, sm.version) == (3, 1)
    assert sm.bump() == 2


@pytest.mark.parametrize("annotated", [False, True])
def test_python_only_tensor_method_fails_when_scripting(annotated):
    def messages(lib):
        if annotated:
            def f(x: torch.Tensor):
                return x.numpy()
        else:
            def f(x):
                return x.numpy()
        with pytest.raises(RuntimeError) as info:
            lib.jit.script(f)
        return str(info.value).split(":\n")[0]
    got = messages(fusegrad)
    assert got == messages(torch)
    assert ("(inferred)" in got) == (not annotated)
