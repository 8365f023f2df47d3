"""The eager kernels written in C: built once, loaded with ctypes, and absent without a
compiler (callers then keep their NumPy paths)."""

import numpy as np
import pytest

from fusegrad import _cbuild
from fusegrad.ops import _native

pytestmark = pytest.mark.skipif(_cbuild.compiler() is None, reason="needs a C compiler")


def test_a_kernel_family_builds_and_its_function_matches_numpy():
    relu = _native.function("pointwise", "relu_f32", "ppii")
    a = np.array([-2.0, -0.0, 0.0, 1.5, np.nan, -np.inf, np.inf], np.float32)
    out = np.full_like(a, 7.0)
    relu(_native.address(a), _native.address(out), 0, a.size)
    np.testing.assert_array_equal(out, np.where(a <= 0, 0, a))
    part = np.full_like(a, 7.0)
    relu(_native.address(a), _native.address(part), 3, 5)  # only [3, 5) is written
    np.testing.assert_array_equal(part, [7, 7, 7, 1.5, np.nan, 7, 7])


def test_native_kernels_off_gives_no_function():
    with _native.native_kernels(False):
        assert not _native.enabled()
        assert _native.function("pointwise", "relu_f32", "ppii") is None
    assert _native.function("pointwise", "relu_f32", "ppii") is not None


def test_a_family_that_does_not_compile_warns_and_gives_none(tmp_path, monkeypatch):
    (tmp_path / "broken.c").write_text("void f(void) { this is not C }\n")
    monkeypatch.setattr(_native, "HERE", str(tmp_path))
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_native, "_libraries", {})
    with pytest.warns(RuntimeWarning, match="'broken' could not be built"):
        assert _native.function("broken", "f", "") is None
    assert _native.library("broken") is None  # decided once


def test_without_a_compiler_there_are_no_native_kernels(monkeypatch):
    monkeypatch.setattr(_cbuild, "compiler", lambda: None)
    monkeypatch.setattr(_native, "_libraries", {})
    monkeypatch.setattr(_native, "_functions", {})
    assert _native.function("pointwise", "relu_f32", "ppii") is None


def test_address_is_the_first_element_of_any_array():
    base = np.arange(100, dtype=np.float32)
    readonly = base.copy()
    readonly.flags.writeable = False
    for a in (base, base[10:20], base.reshape(10, 10).T, readonly, base[:0], base[::2]):
        assert _native.address(a) == a.ctypes.data
