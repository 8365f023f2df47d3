"""fusegrad.save / fusegrad.load: PyTorch's checkpoint format both ways, atomic writes, and
a loader that refuses anything but tensors and containers."""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import torch

import fusegrad
import fusegrad.nn as fnn


def _obj(T, nn):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    return {"model": m.state_dict(), "step": 7, "lr": 0.25, "name": "run", "flags": [True, None],
            "pair": (1, 2), "big": 2 ** 40,
            "t": {"f64": T.arange(6, dtype=T.float64).reshape(2, 3).t(),
                  "half": T.ones(2, dtype=T.float16), "bf": T.ones(2, dtype=T.bfloat16),
                  "i": T.tensor([1, -2]), "b": T.tensor([True, False]),
                  "scalar": T.tensor(3.5), "empty": T.zeros(0, 3), "u8": T.tensor([7],
                                                                                  dtype=T.uint8)},
            "param": nn.Parameter(T.ones(2))}


def _same(a, b):
    if isinstance(b, torch.Tensor):
        assert isinstance(a, fusegrad.Tensor), type(a)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        assert tuple(a.shape) == tuple(b.shape)
        assert a.requires_grad == b.requires_grad
        assert isinstance(a, fnn.Parameter) == isinstance(b, torch.nn.Parameter)
        av = a.detach().float().numpy() if str(a.dtype).endswith("bfloat16") else a.detach(
            ).numpy()
        bv = b.detach().float().numpy() if b.dtype == torch.bfloat16 else b.detach().numpy()
        np.testing.assert_array_equal(av, bv)
    elif isinstance(b, dict):
        assert type(a).__name__ == type(b).__name__ and list(a) == list(b)
        for k in b:
            _same(a[k], b[k])
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert type(a) is type(b) and a == b


def test_load_torch_checkpoint(tmp_path):
    path = tmp_path / "ck.pt"
    ref = _obj(torch, torch.nn)
    torch.save(ref, path)
    got = fusegrad.load(path)
    _same(got, ref)
    assert got["model"]._metadata == ref["model"]._metadata


def test_torch_loads_fusegrad_checkpoint(tmp_path):
    path = tmp_path / "ck.pt"
    fusegrad.save(_obj(fusegrad, fnn), path)
    back = torch.load(path, weights_only=True)
    ref = _obj(torch, torch.nn)
    ref["model"] = back["model"]  # random init differs; compare structure and values below
    _same(fusegrad.load(path), back)
    assert list(back["model"]) == list(ref["model"])
    assert back["t"]["f64"].tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_round_trip_file_object_and_state_dict():
    m = fnn.Linear(4, 3)
    buf = io.BytesIO()
    fusegrad.save(m.state_dict(), buf)
    buf.seek(0)
    sd = fusegrad.load(buf)
    assert isinstance(sd, OrderedDict) and list(sd) == ["weight", "bias"]
    m2 = fnn.Linear(4, 3)
    m2.load_state_dict(sd)
    np.testing.assert_array_equal(m2.weight.detach().numpy(), m.weight.detach().numpy())


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "ck.pt"
    fusegrad.save({"a": fusegrad.ones(1)}, path)
    with pytest.raises((pickle.PicklingError, AttributeError)):
        fusegrad.save({"a": lambda: 0}, path)  # a local function: not picklable
    assert fusegrad.load(path)["a"].tolist() == [1.0]
    assert os.listdir(tmp_path) == ["ck.pt"]


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/fusegrad_pwned_marker",))


def _evil_checkpoint(payload: bytes) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/version", "3\n")
    buf.seek(0)
    return buf


@pytest.mark.parametrize("payload", [
    pickle.dumps(_Evil(), protocol=2),
    pickle.dumps({"x": _Evil()}, protocol=2),
    b"\x80\x02cbuiltins\neval\nX\x0b\x00\x00\x00print('hi')\x85R.",
    b"\x80\x02ccollections\nOrderedDict\n)R}X\x09\x00\x00\x00__class__N" + b"sb.",
])
def test_malicious_pickle_is_refused(payload):
    marker = "/tmp/fusegrad_pwned_marker"
    if os.path.exists(marker):
        os.unlink(marker)
    with pytest.raises(pickle.UnpicklingError):
        fusegrad.load(_evil_checkpoint(payload))
    assert not os.path.exists(marker)


def test_not_a_checkpoint():
    import pickle

    # PyTorch's format before 1.6 (its magic number first) is not read: said so.
    legacy = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2)
    with pytest.raises(RuntimeError, match="zip checkpoint format"):
        fusegrad.load(io.BytesIO(legacy))
    with pytest.raises(pickle.UnpicklingError, match="Unsupported operand 110"):
        fusegrad.load(io.BytesIO(b"not a zip"))


def test_optimizer_state_round_trip(tmp_path):
    m = fnn.Linear(3, 2)
    opt = fusegrad.optim.Adam(m.parameters(), lr=0.01, amsgrad=True)
    m(fusegrad.ones(4, 3)).sum().backward()
    opt.step()
    path = tmp_path / "opt.pt"
    fusegrad.save({"model": m.state_dict(), "optim": opt.state_dict()}, path)
    ck = fusegrad.load(path)
    assert ck["optim"]["param_groups"] == opt.state_dict()["param_groups"]
    opt2 = fusegrad.optim.Adam(m.parameters(), lr=0.5)
    opt2.load_state_dict(ck["optim"])
    assert opt2.param_groups[0]["lr"] == 0.01
    np.testing.assert_array_equal(opt2.state[m.weight]["exp_avg"].numpy(),
                                  opt.state[m.weight]["exp_avg"].numpy())
    th = torch.load(path, weights_only=True)
    assert th["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert th["optim"]["state"][0]["step"].item() == 1.0


def test_views_of_one_storage_stay_shared(tmp_path):
    base = torch.arange(12.0)
    torch.save({"a": base, "b": base[2:8].view(2, 3).t(), "c": base[5]}, tmp_path / "v.pt")
    got = fusegrad.load(tmp_path / "v.pt")
    np.testing.assert_array_equal(got["b"].numpy(), base[2:8].view(2, 3).t().numpy())
    assert got["b"].stride() == (1, 3) and got["c"].item() == 5.0
    got["a"][3] = 100.0
    assert got["b"][1, 0].item() == 100.0  # one storage, as in PyTorch
