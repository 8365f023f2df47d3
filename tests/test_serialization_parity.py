"""save/load: object identity, tensor subclasses, expanded tensors, meta map_location."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import io  # noqa: E402
import pickle  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = {"fusegrad": fusegrad, "torch": torch}


class FgSub(fusegrad.Tensor):
    """A module-level fusegrad subclass (found again by pickle)."""


class TorchSub(torch.Tensor):
    """The same for torch."""


SUBCLASS = {"fusegrad": FgSub, "torch": TorchSub}


def _rt(lib, obj, **kw):
    L = LIBS[lib]
    b = io.BytesIO()
    L.save(obj, b)
    b.seek(0)
    return L.load(b, **kw)


def _identity(lib):
    L = LIBS[lib]
    a, lst = L.ones(2), [1]
    out = []
    for kw in ({}, {"weights_only": False}):
        o = _rt(lib, [a, a, lst, lst, {"x": a, "y": a}], **kw)
        out += [o[0] is o[1], o[2] is o[3], o[4]["x"] is o[4]["y"], o[0] is o[4]["x"]]
    return out


def test_identity_kept_as_torch():
    assert _identity("fusegrad") == _identity("torch") == [True] * 8


def _subclass(lib):
    x = LIBS[lib].arange(3.0).as_subclass(SUBCLASS[lib])
    x.foo = [5]
    o = _rt(lib, {"k": x, "k2": x}, weights_only=False)
    plain = _rt(lib, LIBS[lib].ones(1).as_subclass(SUBCLASS[lib]), weights_only=False)
    return [type(o["k"]).__name__[-3:], o["k"].foo, o["k"].tolist(), o["k"] is o["k2"],
            type(plain).__name__[-3:], plain.__dict__]


def test_subclass_and_its_attributes_kept_as_torch():
    assert _subclass("fusegrad") == _subclass("torch")


def _subclass_weights_only(lib):
    with pytest.raises(pickle.UnpicklingError) as info:
        _rt(lib, LIBS[lib].ones(2).as_subclass(SUBCLASS[lib]))
    msg = str(info.value)
    return msg[:msg.index("GLOBAL")]


def test_subclass_refused_by_weights_only_as_torch():
    assert _subclass_weights_only("fusegrad") == _subclass_weights_only("torch")


def test_subclass_allowed_by_safe_globals():
    with fusegrad.serialization.safe_globals([FgSub]):
        o = _rt("fusegrad", fusegrad.ones(2).as_subclass(FgSub))
    assert type(o) is FgSub and o.tolist() == [1.0, 1.0]


def _expanded(lib):
    L = LIBS[lib]
    base = L.arange(6.0)
    o = _rt(lib, [base[2:5].expand(2, 3), L.tensor(2.0).expand(2, 2), base, base.expand(3, 6)])
    return [[t.tolist(), t.stride(), t.storage_offset()] for t in o] + [
        o[0].data_ptr() - o[2].data_ptr() == 2 * 4, o[3].data_ptr() == o[2].data_ptr()]


def test_expanded_tensors_keep_storage_and_strides_as_torch():
    assert _expanded("fusegrad") == _expanded("torch")


def test_torch_reads_fusegrad_identity_and_expanded():
    b = io.BytesIO()
    a = fusegrad.arange(3.0)
    fusegrad.save({"x": a, "y": a, "e": a.expand(2, 3)}, b)
    b.seek(0)
    o = torch.load(b)
    assert o["x"] is o["y"] and o["e"].stride() == (0, 1)
    assert o["e"].tolist() == [[0.0, 1.0, 2.0]] * 2


def test_meta_map_location():
    """Loading onto the meta device gives meta tensors of the saved geometry (offsets too),
    as PyTorch's load does; the CPU still gives the values."""
    def program(L):
        b = io.BytesIO()
        x = L.arange(12.0).reshape(3, 4)
        L.save({"v": x[1:].t(), "p": L.nn.Parameter(L.ones(2))}, b)
        out = []
        for loc in ("meta", L.device("meta"), {"cpu": "meta"}):
            b.seek(0)
            got = L.load(b, map_location=loc)
            out.append([(type(t).__name__, str(t.device), tuple(t.shape), t.stride(),
                         t.storage_offset(), t.requires_grad) for t in got.values()])
        b.seek(0)
        out.append(L.load(b, map_location="cpu")["v"].tolist())
        return out

    assert program(fusegrad) == program(torch)


def _channels_last_results(lib):
    """Tensors an op made from a channels_last tensor (NumPy kept its layout, with no base
    array) and a permuted 3-D result, saved and loaded: their strides and values."""
    L = LIBS[lib]
    x = L.arange(2 * 3 * 2 * 2, dtype=L.float32).reshape(2, 3, 2, 2)
    x = x.contiguous(memory_format=L.channels_last)
    p = L.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1).contiguous().permute(1, 2, 0)
    made = [x * 2, x.clone(), x + 1, p * 1, p.neg()]
    return [[t.stride(), t.tolist()] for t in _rt(lib, made)]


def test_op_results_keep_their_layout_as_torch():
    assert _channels_last_results("fusegrad") == _channels_last_results("torch")


def test_torch_reads_layout_of_fusegrad_op_results():
    b = io.BytesIO()
    x = fusegrad.randn(4, 3, 3, 3).contiguous(memory_format=fusegrad.channels_last) * 2
    fusegrad.save(x, b)
    b.seek(0)
    o = torch.load(b)
    assert o.stride() == (27, 1, 9, 3) and o.tolist() == x.tolist()
