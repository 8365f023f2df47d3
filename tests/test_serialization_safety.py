"""fusegrad.save / fusegrad.load against hostile files and as PyTorch writes files: bounded
memory for crafted checkpoints, the file modes and symbolic links `torch.save` gives, no
leftovers of killed saves, and everything `torch.load(weights_only=True)` reads (uint16,
torch.Size, torch.device, set, views at offsets sharing one storage) in both directions."""

from __future__ import annotations

import functools
import io
import os
import signal
import struct
import subprocess
import sys
import zipfile
from collections import Counter

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad.serialization import save_safetensors

_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _rezip(raw: bytes, replace: dict[str, bytes], compress=zipfile.ZIP_STORED) -> bytes:
    """`raw` (a zip) with the entries named by suffix in `replace` swapped for new bytes."""
    src = zipfile.ZipFile(io.BytesIO(raw))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compress) as z:
        for name in src.namelist():
            data = next((v for k, v in replace.items() if name.endswith(k)), None)
            z.writestr(name, src.read(name) if data is None else data)
    return out.getvalue()


def _torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _error(load, raw: bytes) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        load(io.BytesIO(raw))
    return info.type, str(info.value)


# ------------------------------------------------------------------ 8: bounded reading


@pytest.mark.parametrize("numel", [2, 8])
def test_storage_size_must_match_its_declaration(numel):
    # the pickle declares 4 float32 elements; the entry holds `numel`
    raw = _rezip(_torch_bytes({"a": torch.arange(4.0)}),
                 {"data/0": np.arange(numel, dtype=np.float32).tobytes()})
    want = _error(lambda f: torch.load(f, weights_only=True), raw)
    assert _error(fusegrad.load, raw) == want
    assert want[0] is RuntimeError and "record size" in want[1]


def _storage_bomb(path) -> None:
    """A tensor of one float whose storage entry inflates to 512 MiB."""
    pkl = zipfile.ZipFile(io.BytesIO(_torch_bytes({"a": torch.zeros(1)})))
    with zipfile.ZipFile(path, "w") as z:
        for name in pkl.namelist():
            if name.endswith("data/0"):
                info = zipfile.ZipInfo(name)
                info.compress_type = zipfile.ZIP_DEFLATED
                with z.open(info, "w") as out:
                    chunk = bytes(1 << 20)
                    for _ in range(512):
                        out.write(chunk)
            else:
                z.writestr(name, pkl.read(name))


def _pickle_bomb(path) -> None:
    """A data.pkl that inflates to 512 MiB of EMPTY_DICT opcodes."""
    path.write_bytes(_pickle_bomb_bytes())


@functools.cache
def _pickle_bomb_bytes() -> bytes:
    """The pickle bomb's file, deflated once per process (the lying bomb starts from it)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        info = zipfile.ZipInfo("archive/data.pkl")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w") as out:
            out.write(b"\x80\x02")
            chunk = b"}" * (1 << 20)
            for _ in range(512):
                out.write(chunk)
            out.write(b".")
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def _lying_pickle_bomb(path) -> None:
    """The pickle bomb, its central directory claiming 2 GiB of compressed pickle."""
    _pickle_bomb(path)
    raw = bytearray(path.read_bytes())
    at = raw.index(b"PK\x01\x02")  # data.pkl's central directory entry comes first
    assert raw[at + 46:at + 46 + 16] == b"archive/data.pkl"
    raw[at + 20:at + 24] = (2 ** 31 - 1).to_bytes(4, "little")
    path.write_bytes(bytes(raw))


def _copy_bomb(path) -> None:
    """A small pickle that copies one 50,000-entry dict into a new OrderedDict again and again
    (each copy costs the pickle 7 bytes)."""
    pk = bytearray(b"\x80\x02ccollections\nOrderedDict\nq\x00}(")
    for i in range(50_000):
        pk += b"J" + struct.pack("<i", i) + b"N"
    pk += b"uq\x01](" + b"h\x00h\x01\x85R" * ((900_000 - len(pk)) // 6) + b"e."
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", bytes(pk))
        z.writestr("archive/version", "3\n")


_MEASURE = r"""
import resource, sys
import fusegrad

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

before = status("VmRSS:")
# Keep a loader that does inflate everything from taking the machine's memory.
limit = status("VmSize:") + (2 << 30)
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
try:
    fusegrad.load(sys.argv[1])
    outcome = "loaded"
except MemoryError:
    outcome = "MemoryError"
except Exception as exc:
    outcome = type(exc).__name__
print(outcome, status("VmHWM:") - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("make", [_storage_bomb, _pickle_bomb, _lying_pickle_bomb,
                                  _copy_bomb])
def test_small_crafted_file_cannot_take_much_memory(tmp_path, make):
    path = tmp_path / "bomb.pt"
    make(path)
    assert path.stat().st_size <= 1 << 20
    res = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True,
                         text=True, env=_ENV, timeout=300)
    assert res.returncode == 0, res.stderr
    outcome, grown = res.stdout.split()
    # refused (the storage is not what the pickle declares / the pickle's budget runs out),
    # and the peak stayed within 64 MiB of the resident size after import
    assert outcome in ("RuntimeError", "UnpicklingError"), res.stdout
    assert int(grown) < 64 << 20, f"load grew the peak RSS by {int(grown) >> 20} MiB"


def test_large_plain_data_still_loads(tmp_path):
    # a checkpoint holding many non-tensor objects stays within the pickle's budget
    ref = {"vocab": {f"tok{i}": i for i in range(50_000)}, "w": torch.ones(3)}
    torch.save(ref, tmp_path / "big.pt")
    got = fusegrad.load(tmp_path / "big.pt")
    assert got["vocab"] == ref["vocab"] and got["w"].tolist() == [1.0, 1.0, 1.0]


# ------------------------------------------------------------------ 9: writing files


def _save_st(obj, path):
    save_safetensors(obj, path)


_WRITERS = [fusegrad.save, _save_st]


@pytest.mark.parametrize("writer", _WRITERS)
@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_file_mode_is_what_torch_save_gives(tmp_path, writer, umask):
    old = os.umask(umask)
    try:
        torch.save({"a": torch.ones(1)}, tmp_path / "ref.pt")
        writer({"a": fusegrad.ones(1)}, tmp_path / "ck.pt")
    finally:
        os.umask(old)
    assert (tmp_path / "ck.pt").stat().st_mode == (tmp_path / "ref.pt").stat().st_mode
    assert (tmp_path / "ck.pt").stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("writer", _WRITERS)
def test_existing_file_keeps_its_mode(tmp_path, writer):
    for name in ("ref.pt", "ck.pt"):
        (tmp_path / name).write_bytes(b"old")
        os.chmod(tmp_path / name, 0o640)
    torch.save({"a": torch.ones(1)}, tmp_path / "ref.pt")
    writer({"a": fusegrad.ones(1)}, tmp_path / "ck.pt")
    assert (tmp_path / "ck.pt").stat().st_mode == (tmp_path / "ref.pt").stat().st_mode


@pytest.mark.parametrize("writer", _WRITERS)
@pytest.mark.parametrize("exists", [True, False])
def test_saving_to_a_symlink_writes_its_target(tmp_path, writer, exists):
    for lib, save in (("torch", torch.save), ("fusegrad", writer)):
        folder = tmp_path / lib
        (folder / "sub").mkdir(parents=True)
        if exists:
            (folder / "sub" / "target.pt").write_bytes(b"old")
        os.symlink("sub/target.pt", folder / "link.pt")
        mod = torch if lib == "torch" else fusegrad
        save({"a": mod.ones(2)}, folder / "link.pt")
        assert os.path.islink(folder / "link.pt")
        assert os.readlink(folder / "link.pt") == "sub/target.pt"
        assert sorted(os.listdir(folder)) == ["link.pt", "sub"]
        assert os.listdir(folder / "sub") == ["target.pt"]
    got = fusegrad.load(tmp_path / "fusegrad" / "sub" / "target.pt")
    assert got["a"].tolist() == [1.0, 1.0]


_KILLED_WRITER = r"""
import sys, time
import fusegrad
import fusegrad.serialization as serialization

def stalled(out, obj):
    out.write(bytes(8 << 20))
    out.flush()
    print("writing", flush=True)
    time.sleep(120)

serialization._write_zip = stalled
fusegrad.save({"a": fusegrad.ones(3)}, sys.argv[1])
"""


def _temp_files(folder) -> list[str]:
    return [n for n in os.listdir(folder) if n.startswith(".fusegrad-save-")]


def test_killed_save_leaves_nothing_behind(tmp_path):
    target = tmp_path / "ck.pt"
    fusegrad.save({"a": fusegrad.zeros(2)}, target)
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(target)],
                                stdout=subprocess.PIPE, text=True, env=_ENV)
        try:
            assert proc.stdout.readline().strip() == "writing"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
    # Either the temporary file never had a name (O_TMPFILE), or the next save into the folder
    # removes what the dead writers left.
    fusegrad.save({"b": fusegrad.ones(1)}, tmp_path / "other.pt")
    assert sorted(os.listdir(tmp_path)) == ["ck.pt", "other.pt"]
    assert fusegrad.load(target)["a"].tolist() == [0.0, 0.0]  # the old file is intact


def test_temporary_file_of_a_live_process_is_kept(tmp_path):
    from fusegrad import _atomic_write

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=_ENV)
    dead = subprocess.Popen([sys.executable, "-c", "pass"], env=_ENV)
    dead.wait()
    try:
        def name(pid):
            return f"{_atomic_write.PREFIX}{_atomic_write._HOST}-{pid}-0123456789ab.tmp"

        for pid in (live.pid, dead.pid, os.getpid()):
            (tmp_path / name(pid)).write_bytes(b"partial")
        (tmp_path / ".fusegrad-save-other").write_bytes(b"not ours to judge")
        fusegrad.save({"a": fusegrad.ones(1)}, tmp_path / "ck.pt")
        assert sorted(_temp_files(tmp_path)) == sorted(
            [name(live.pid), name(os.getpid()), ".fusegrad-save-other"])
    finally:
        live.kill()
        live.wait()


# ------------------------------------------------------------------ 11: what PyTorch loads


def test_loads_what_torch_weights_only_loads(tmp_path):
    base = torch.arange(10).to(torch.uint16)
    ref = {"u16": torch.tensor([1, 2, 65535], dtype=torch.uint16), "u16_view": base[3:7],
           "size": torch.Size([2, 3]), "dev": torch.device("cpu"), "set": {1, 2, 3},
           "empty_size": torch.Size([])}
    torch.save(ref, tmp_path / "ck.pt")
    oracle = torch.load(tmp_path / "ck.pt", weights_only=True)
    got = fusegrad.load(tmp_path / "ck.pt")
    for key in ("u16", "u16_view"):
        assert str(got[key].dtype) == str(oracle[key].dtype) == "torch.uint16"
        assert got[key].tolist() == oracle[key].tolist()
        assert got[key].storage_offset() == oracle[key].storage_offset()
    assert isinstance(got["size"], fusegrad.Size) and got["size"] == oracle["size"]
    assert got["empty_size"] == fusegrad.Size([])
    assert isinstance(got["dev"], fusegrad.device) and str(got["dev"]) == str(oracle["dev"])
    assert got["set"] == oracle["set"] and type(got["set"]) is set


def test_loads_the_plain_python_values_torch_weights_only_loads(tmp_path):
    ref = {"bytes": b"ab\xff\x00", "ba": bytearray(b"xy"), "c": 1.5 - 2j,
           "counter": Counter("abracadabra"), "empty": Counter()}
    torch.save(ref, tmp_path / "p.pt")
    oracle = torch.load(tmp_path / "p.pt", weights_only=True)
    got = fusegrad.load(tmp_path / "p.pt")
    assert got == oracle
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in oracle.items()}


def test_negative_storage_offset_is_refused_as_torch_refuses_it():
    raw = _torch_bytes({"a": torch.arange(4.0)})
    pkl = zipfile.ZipFile(io.BytesIO(raw)).read("archive/data.pkl")
    old = b"K\x00K\x04\x85"  # storage offset 0, size (4,)
    assert pkl.count(old) == 1
    raw = _rezip(raw, {"data.pkl": pkl.replace(old, b"J\xff\xff\xff\xffK\x02\x85")})
    want = _error(lambda f: torch.load(f, weights_only=True), raw)
    assert want == (RuntimeError, "Tensor: invalid storage offset -1")
    assert _error(fusegrad.load, raw) == want


def test_loaded_views_report_their_storage_offset(tmp_path):
    base = torch.arange(24.0)
    views = {"base": base, "row": base[4:10], "t": base[2:14].view(3, 4).t(),
             "step": base[1::3], "elem": base[7], "i64": torch.arange(9)[5:]}
    torch.save(views, tmp_path / "v.pt")
    oracle = torch.load(tmp_path / "v.pt", weights_only=True)
    got = fusegrad.load(tmp_path / "v.pt")
    for k, v in oracle.items():
        assert got[k].storage_offset() == v.storage_offset(), k
        assert got[k].stride() == v.stride(), k
        np.testing.assert_array_equal(got[k].numpy(), v.numpy())


def _storage_ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def test_torch_loads_fusegrad_views_sharing_one_storage(tmp_path):
    base = fusegrad.arange(24.0)
    u16 = fusegrad.from_numpy(np.arange(12, dtype=np.uint16))
    ours = {"base": base, "row": base[4:10], "t": base[2:14].view(3, 4).t(),
            "step": base[1::3], "elem": base[7], "u16": u16[5:], "u16_all": u16,
            "alone": fusegrad.ones(2, 2)}
    fusegrad.save(ours, tmp_path / "v.pt")
    back = torch.load(tmp_path / "v.pt", weights_only=True)
    # what torch.save writes for the same views is the oracle for offsets and sharing
    tbase = torch.arange(24.0)
    tu16 = torch.arange(12).to(torch.uint16)
    ref = {"base": tbase, "row": tbase[4:10], "t": tbase[2:14].view(3, 4).t(),
           "step": tbase[1::3], "elem": tbase[7], "u16": tu16[5:], "u16_all": tu16,
           "alone": torch.ones(2, 2)}
    torch.save(ref, tmp_path / "ref.pt")
    ref = torch.load(tmp_path / "ref.pt", weights_only=True)
    for k in ref:
        assert back[k].dtype == ref[k].dtype, k
        assert back[k].storage_offset() == ref[k].storage_offset(), k
        assert back[k].stride() == ref[k].stride(), k
        assert back[k].untyped_storage().nbytes() == ref[k].untyped_storage().nbytes(), k
        assert torch.equal(back[k], ref[k]), k
    groups = [["base", "row", "t", "step", "elem"], ["u16", "u16_all"], ["alone"]]
    for group in groups:
        assert len({_storage_ptr(back[k]) for k in group}) == 1
    assert len({_storage_ptr(back[g[0]]) for g in groups}) == 3
    back["base"][5] = -1.0
    assert back["row"][1].item() == -1.0  # one storage, as torch.save's own file gives
    # and fusegrad reads its own file back with the same sharing
    again = fusegrad.load(tmp_path / "v.pt")
    again["base"][5] = -1.0
    assert again["row"][1].item() == -1.0 and again["t"].storage_offset() == 2


def test_save_writes_size_device_and_set_as_torch_does(tmp_path):
    fusegrad.save({"size": fusegrad.Size([4, 5]), "dev": fusegrad.device("cpu"),
                   "set": {3, 4}, "shape": fusegrad.ones(2, 3).shape}, tmp_path / "c.pt")
    back = torch.load(tmp_path / "c.pt", weights_only=True)
    assert type(back["size"]) is torch.Size and back["size"] == torch.Size([4, 5])
    assert back["shape"] == torch.Size([2, 3]) and type(back["shape"]) is torch.Size
    assert back["dev"] == torch.device("cpu") and back["set"] == {3, 4}
    got = fusegrad.load(tmp_path / "c.pt")
    assert type(got["size"]) is fusegrad.Size and got["set"] == {3, 4}


def test_one_buffer_as_two_dtypes_is_refused_as_torch_refuses_it():
    x = torch.arange(4.0)
    with pytest.raises(RuntimeError) as want:
        torch.save([x, x.view(torch.int32)], io.BytesIO())
    arr = np.arange(4, dtype=np.float32)
    with pytest.raises(RuntimeError) as got:
        fusegrad.save([fusegrad.from_numpy(arr), fusegrad.from_numpy(arr.view(np.int32))],
                      io.BytesIO())
    assert str(got.value) == str(want.value)
