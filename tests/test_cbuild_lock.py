"""The kernel build cache (`fusegrad._cbuild`) compiles an entry once when several processes
ask for it at the same time (test workers, distributed ranks): the first builds under a lock
on the entry, the others wait and load what it built."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest

from fusegrad import _cbuild

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or sys.platform == "win32",
                                reason="needs gcc and POSIX file locks")


def test_processes_asking_for_one_entry_compile_it_once(tmp_path):
    log = tmp_path / "calls.log"
    # A compiler that notes each call and takes its time, so that the processes overlap.
    cc = tmp_path / "cc"
    cc.write_text(f"#!/bin/sh\necho call >> {log}\nsleep 0.5\nexec gcc \"$@\"\n")
    cc.chmod(cc.stat().st_mode | stat.S_IEXEC)
    program = textwrap.dedent(f"""
        import ctypes
        from fusegrad import _cbuild
        path = _cbuild.shared_object({str(cc)!r}, ["int fg_seven(void) {{ return 7; }}"],
                                     ("-O1", "-fPIC", "-shared"), "lock_test_entry")
        print(ctypes.CDLL(path).fg_seven())
        """)
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", program], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outs]
    assert [out.strip() for out, _ in outs] == ["7", "7", "7"]
    assert log.read_text().split() == ["call"]
    assert _cbuild.read_entry(str(tmp_path / "cache" / "fg_lock_test_entry.so")) is not None
