"""`nn.utils.parametrize` against PyTorch: the class swap (`ParametrizedLinear`),
`parametrizations.weight.original`, state_dict keys and repr, chained parametrizations,
`right_inverse` on registration and assignment, originals from a sequence, buffers, the
gradient reaching `original` and an optimizer step, `cached()`, removal with and without
`leave_parametrized`, deepcopy and pickling, and the messages."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import copy  # noqa: E402
import importlib  # noqa: E402
import pickle  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402


def _rounded(value):
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, (list, tuple)):
        return type(value)(_rounded(v) for v in value)
    return value


def _story(lib) -> str:
    P = importlib.import_module(lib.__name__ + ".nn.utils.parametrize")
    nn = lib.nn
    out = []

    def T(a):
        return lib.tensor(np.asarray(a, dtype=np.float32))

    def err(f):
        try:
            f()
        except Exception as e:  # noqa: BLE001  (the error is what is compared)
            return (type(e).__name__, str(e))
        return None

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)
        def right_inverse(self, A):
            return A.triu()
    class Scale(nn.Module):
        def forward(self, X):
            return X * 2
    class Split(nn.Module):
        def forward(self, A, B):
            return A + B
        def right_inverse(self, X):
            return (X * 0.5, X * 0.5)
    lin = nn.Linear(3, 3)
    rng = np.random.default_rng(1)
    lin.weight.data = T(rng.standard_normal((3, 3)))
    lin.bias.data = T(rng.standard_normal(3))
    P.register_parametrization(lin, "weight", Symmetric())
    out.append((type(lin).__name__, P.type_before_parametrizations(lin).__name__,
                P.is_parametrized(lin), P.is_parametrized(lin, "weight"),
                P.is_parametrized(lin, "bias")))
    out.append(sorted(lin.state_dict().keys()))
    out.append([n for n, _ in lin.named_parameters()])
    out.append(repr(lin))
    out.append(lin.weight.tolist())
    out.append(lin.parametrizations.weight.original.tolist())
    out.append(type(lin.parametrizations.weight).__name__)
    P.register_parametrization(lin, "weight", Scale())
    out.append(lin.weight.tolist())
    out.append(repr(lin))
    x = T(rng.standard_normal((2, 3)))
    lin(x).pow(2).sum().backward()
    out.append(lin.parametrizations.weight.original.grad.tolist())
    opt = lib.optim.SGD(lin.parameters(), lr=0.1)
    opt.step()
    out.append(lin(x).tolist())
    # assignment through right_inverse: Scale has none
    out.append(err(lambda: setattr(lin, "weight", T(np.eye(3)))))
    with P.cached():
        a = lin.weight
        b = lin.weight
        out.append(a is b)
    out.append(lin.weight is lin.weight)
    sd = lin.state_dict()
    lin2 = nn.Linear(3, 3)
    P.register_parametrization(lin2, "weight", Symmetric())
    P.register_parametrization(lin2, "weight", Scale())
    lin2.load_state_dict(sd)
    out.append(lin2.weight.tolist() == lin.weight.tolist())
    P.remove_parametrizations(lin, "weight", leave_parametrized=True)
    out.append((type(lin).__name__, sorted(lin.state_dict().keys()), type(lin.weight).__name__,
                lin.weight.tolist()))
    out.append(err(lambda: P.remove_parametrizations(lin, "weight")))
    out.append(hasattr(lin, "parametrizations"))
    P.remove_parametrizations(lin2, "weight", leave_parametrized=False)
    out.append(lin2.weight.tolist())
    # buffer parametrization, assignment via right_inverse
    bn = nn.BatchNorm1d(2)
    P.register_parametrization(bn, "running_var", Scale(), unsafe=True)
    out.append((sorted(bn.state_dict().keys()), bn.running_var.tolist()))
    m = nn.Linear(2, 2)
    P.register_parametrization(m, "weight", Symmetric())
    m.weight = T([[1, 2], [3, 4]])
    out.append((m.weight.tolist(), m.parametrizations.weight.original.tolist()))
    # sequences from right_inverse
    m = nn.Linear(2, 2)
    m.weight.data = T([[1, 2], [3, 4]])
    P.register_parametrization(m, "weight", Split())
    out.append((sorted(m.state_dict().keys()), m.weight.tolist()))
    out.append(err(lambda: P.remove_parametrizations(m, "weight", leave_parametrized=False)))
    # errors
    class ToInt(nn.Module):
        def forward(self, X):
            return X.long()
    class Shrink(nn.Module):
        def forward(self, X):
            return X[0]
    class NoTensor(nn.Module):
        def forward(self, X):
            return 3
    m = nn.Linear(2, 2)
    out.append(err(lambda: P.register_parametrization(m, "nope", Scale())))
    out.append(err(lambda: P.register_parametrization(m, "weight", ToInt())))
    out.append(sorted(m.state_dict().keys()))
    out.append(err(lambda: P.register_parametrization(m, "weight", Shrink())))
    out.append(err(lambda: P.register_parametrization(m, "weight", NoTensor())))
    P.register_parametrization(m, "weight", Scale())
    out.append(err(lambda: P.register_parametrization(m, "weight", ToInt())))
    out.append(err(lambda: P.register_parametrization(m, "weight", Shrink())))
    P.register_parametrization(m, "weight", Shrink(), unsafe=True)
    out.append(tuple(m.weight.shape))
    out.append(err(lambda: P.ParametrizationList([], lib.ones(2))))
    out.append(err(lambda: pickle.dumps(m)))
    m3 = copy.deepcopy(m)
    out.append((type(m3).__name__, m3.weight.tolist() == m.weight.tolist()))
    text = re.sub(" at 0x[0-9a-f]+", "", repr(_rounded(out)))
    return text.replace(lib.__name__ + ".", "torch.")


def test_parametrize_matches_torch():
    assert _story(fusegrad) == _story(torch)


def test_lazy_submodules():
    import torch.nn.utils.parametrize as theirs

    ours = fusegrad.nn.utils.parametrize
    public = [n for n in theirs.__all__ if n != "transfer_parametrizations_and_params"]
    assert [n for n in public if not hasattr(ours, n)] == []


def test_submodules_load_on_first_use():
    """`import fusegrad.nn` leaves parametrize, parametrizations and prune unloaded (fusion,
    small, loads with nn.utils as PyTorch's does); the attribute imports them."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(fusegrad.__file__).resolve().parent.parent)
    code = (
        "import json, sys, fusegrad.nn\n"
        "names = ['parametrize', 'parametrizations', 'prune']\n"
        "before = [n for n in names if 'fusegrad.nn.utils.' + n in sys.modules]\n"
        "mods = [getattr(fusegrad.nn.utils, n).__name__ for n in names]\n"
        "print(json.dumps([before, mods, 'prune' in dir(fusegrad.nn.utils)]))\n")
    env = dict(os.environ, PYTHONPATH=src)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    before, mods, listed = json.loads(proc.stdout.splitlines()[-1])
    assert before == [] and listed
    assert mods == ["fusegrad.nn.utils.parametrize", "fusegrad.nn.utils.parametrizations",
                    "fusegrad.nn.utils.prune"]


def _transfer(lib):
    P = importlib.import_module(lib.__name__ + ".nn.utils.parametrize")
    PZ = importlib.import_module(lib.__name__ + ".nn.utils.parametrizations")
    src = lib.nn.Linear(3, 2)
    src.weight.data = lib.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    PZ.weight_norm(src)
    dst = lib.nn.Linear(3, 2)
    P.transfer_parametrizations_and_params(src, dst)
    bare = lib.nn.Module()
    P.transfer_parametrizations_and_params(src, bare, "weight")
    return [(type(m).__name__, sorted(m.state_dict()), _rounded(m.weight.tolist()))
            for m in (dst, bare)]


def test_transfer_parametrizations_and_params():
    assert _transfer(fusegrad) == _transfer(torch)
