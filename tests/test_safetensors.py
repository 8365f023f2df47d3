"""safetensors reading and writing: round trips of every dtype, a file written by hand in the
format, the header's layout, `fusegrad.load` on a safetensors file, and malformed files
rejected without anything being run."""

from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest

import fusegrad
from fusegrad.serialization import load_safetensors, save_safetensors

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
          "uint8", "bool"]


def _sample(name, shape, seed=0):
    rng = np.random.default_rng(seed)
    dt = getattr(fusegrad, name)
    if name == "bool":
        return fusegrad.tensor(rng.integers(0, 2, shape).astype(bool))
    if name in ("float32", "float64", "float16", "bfloat16"):
        return fusegrad.tensor(rng.standard_normal(shape), dtype=dt)
    return fusegrad.tensor(rng.integers(0, 100, shape), dtype=dt)


def _equal(a, b):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.float().numpy() if a.dtype == fusegrad.bfloat16
                                  else a.numpy(),
                                  b.float().numpy() if b.dtype == fusegrad.bfloat16
                                  else b.numpy())


def test_round_trip_every_dtype(tmp_path):
    tensors = {f"t.{d}": _sample(d, (3, 2), i) for i, d in enumerate(DTYPES)}
    tensors["scalar"] = fusegrad.tensor(2.5)
    tensors["empty"] = fusegrad.zeros(0, 4)
    tensors["strided"] = fusegrad.arange(12.).reshape(3, 4).t()
    path = tmp_path / "m.safetensors"
    save_safetensors(tensors, path, metadata={"format": "pt", "note": "x"})
    got, meta = load_safetensors(path, with_metadata=True)
    assert meta == {"format": "pt", "note": "x"}
    assert set(got) == set(tensors)
    for k in tensors:
        _equal(got[k], tensors[k])
    assert fusegrad.load(path).keys() == got.keys()
    raw = path.read_bytes()
    for src in (raw, io.BytesIO(raw), str(path)):
        assert load_safetensors(src).keys() == got.keys()


def test_state_dict_round_trip():
    model = fusegrad.nn.Sequential(fusegrad.nn.Linear(3, 4), fusegrad.nn.BatchNorm1d(4))
    buf = io.BytesIO()
    save_safetensors(model.state_dict(), buf)
    fresh = fusegrad.nn.Sequential(fusegrad.nn.Linear(3, 4), fusegrad.nn.BatchNorm1d(4))
    fresh.load_state_dict(load_safetensors(buf.getvalue()))
    for (_k, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        _equal(a, b)


def _handmade(header: dict, data: bytes, pad: int = 0) -> bytes:
    head = json.dumps(header).encode() + b" " * pad
    return struct.pack("<Q", len(head)) + head + data


def test_reads_a_file_written_by_hand():
    w = np.array([[1.5, -2.0], [3.25, 0.0]], dtype="<f4")
    ids = np.array([7, -1, 2**40], dtype="<i8")
    flags = np.array([True, False, True])
    half = np.array([1.0, -0.5], dtype="<f2")
    data = w.tobytes() + ids.tobytes() + flags.tobytes() + half.tobytes()
    header = {
        "__metadata__": {"source": "hand"},
        "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
        "ids": {"dtype": "I64", "shape": [3], "data_offsets": [16, 40]},
        "flags": {"dtype": "BOOL", "shape": [3], "data_offsets": [40, 43]},
        "half": {"dtype": "F16", "shape": [2], "data_offsets": [43, 47]},
    }
    got, meta = load_safetensors(_handmade(header, data, pad=5), with_metadata=True)
    assert meta == {"source": "hand"} and list(got) == ["w", "ids", "flags", "half"]
    np.testing.assert_array_equal(got["w"].numpy(), w)
    assert got["w"].dtype == fusegrad.float32
    assert got["ids"].tolist() == [7, -1, 2**40] and got["ids"].dtype == fusegrad.int64
    assert got["flags"].tolist() == [True, False, True]
    assert got["half"].dtype == fusegrad.float16 and got["half"].tolist() == [1.0, -0.5]
    bf = np.array([0x3F80, 0xC000], dtype="<u2").tobytes()  # bfloat16 1.0, -2.0
    got = load_safetensors(_handmade({"b": {"dtype": "BF16", "shape": [2],
                                            "data_offsets": [0, 4]}}, bf))
    assert got["b"].dtype == fusegrad.bfloat16 and got["b"].float().tolist() == [1.0, -2.0]


def test_written_layout_matches_the_format():
    raw = io.BytesIO()
    save_safetensors({"b": fusegrad.tensor([1, 2], dtype=fusegrad.int32),
                      "a": fusegrad.tensor([0.5], dtype=fusegrad.float64)}, raw)
    raw = raw.getvalue()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0
    header = json.loads(raw[8:8 + n])
    assert header == {"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]},
                      "b": {"dtype": "I32", "shape": [2], "data_offsets": [8, 16]}}
    body = raw[8 + n:]
    assert body == struct.pack("<d", 0.5) + struct.pack("<ii", 1, 2)


@pytest.mark.parametrize("raw,msg", [
    (b"\x01\x00", "shorter"),
    (struct.pack("<Q", 10**9) + b"{}", "too large"),
    (struct.pack("<Q", 50) + b"{}", "longer than the file"),
    (struct.pack("<Q", 2) + b"[]", "JSON object"),
    (struct.pack("<Q", 3) + b"{x}", "invalid safetensors header"),
    (_handmade({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4),
     "the data is 4 bytes"),
    (_handmade({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
     "do not match"),
    (_handmade({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
     "gap or overlap"),
    (_handmade({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
     "unsupported"),
    (_handmade({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4),
     "invalid shape"),
    (_handmade({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}},
               b"\0" * 4), "header entry"),
    (struct.pack("<Q", 17) + b'{"a":{},"a":{}}  ', "duplicate"),
])
def test_malformed_files_are_rejected(raw, msg):
    with pytest.raises(ValueError, match=msg):
        load_safetensors(raw)


def test_write_errors():
    with pytest.raises(ValueError, match="metadata"):
        save_safetensors({"a": fusegrad.zeros(1)}, io.BytesIO(), metadata={"k": 1})
    with pytest.raises(TypeError, match="not a tensor"):
        save_safetensors({"a": np.zeros(1)}, io.BytesIO())
    with pytest.raises(ValueError, match="invalid tensor name"):
        save_safetensors({"__metadata__": fusegrad.zeros(1)}, io.BytesIO())
