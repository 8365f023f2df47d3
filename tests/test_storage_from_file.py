"""Storages and tensors mapped from files against PyTorch: `UntypedStorage.from_file`,
`FloatStorage.from_file`, `from_file` (private and shared mappings: a shared one writes
through to the file, creating or growing it), PyTorch's errors for a missing or short file,
and `is_shared` of the storages."""

from __future__ import annotations

import os
import warnings

import pytest
import torch

import fusegrad


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(16)))
    return path


def _outcome(fn):
    try:
        return fn()
    except RuntimeError as e:
        return ("RuntimeError", str(e))


def _run(lib, tmp_path, data_file):
    out = []
    s = lib.UntypedStorage.from_file(str(data_file), False, 8)
    out.append((s.nbytes(), list(s), s.is_shared()))
    s[0] = 200  # private: the file keeps its byte
    out.append(data_file.read_bytes()[:2])
    shared = lib.UntypedStorage.from_file(str(data_file), True, 16)
    shared[1] = 77
    out.append((data_file.read_bytes()[:2], shared.is_shared()))
    grown = tmp_path / f"grown_{lib.__name__}.bin"
    out.append(lib.UntypedStorage.from_file(str(grown), True, 8).nbytes())
    out.append(os.path.getsize(grown))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out.append(lib.FloatStorage.from_file(str(data_file), False, 2).tolist())
    t = lib.from_file(str(data_file), True, 4, dtype=lib.int16)
    t[3] = -5
    out.append((t.tolist(), data_file.read_bytes()[6:8], t.dtype == lib.int16))
    out.append(lib.from_file(str(data_file), size=0).tolist())
    for args in ((str(data_file), False, 32), (str(tmp_path / "missing.bin"), False, 4)):
        out.append(_outcome(lambda args=args: lib.UntypedStorage.from_file(*args).nbytes()))
    out.append(lib.ones(2).untyped_storage().is_shared())
    return out


def test_from_file_as_torch(tmp_path, data_file):
    got = _run(fusegrad, tmp_path, data_file)
    data_file.write_bytes(bytes(range(16)))
    want = _run(torch, tmp_path, data_file)
    assert got == want
