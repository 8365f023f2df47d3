"""Top-level functions older and lower-level code calls (settings, type questions, ATen's
spellings of layers, bit shifts, small numeric helpers): values, gradients, warnings and
errors against PyTorch."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(11)


def _same(fn, *arrays, grad=True, node=True):
    outs = []
    for lib in (torch, fusegrad):
        leaves = [lib.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(lib, *leaves)
        first = out[0] if isinstance(out, (tuple, list)) else out
        if first.requires_grad:
            (first * lib.linspace(0.5, 2.0, first.numel(), dtype=first.dtype)
             .view(first.shape)).sum().backward()
        outs.append((first.detach().numpy(), str(first.dtype).split(".")[-1],
                     type(first.grad_fn).__name__, [x.grad for x in leaves]))
    (wv, wd, wn, wg), (gv, gd, gn, gg) = outs
    np.testing.assert_allclose(gv, wv, rtol=1e-10, atol=1e-10)
    assert gd == wd
    if node:
        assert gn == wn
    for w, g in zip(wg, gg):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", ["lsh", "rsh", "lsh_scalar", "rsh_neg", "uint8", "wide",
                                  "operators"])
def test_bit_shifts(case):
    a = RNG.integers(-40, 41, (3, 4))
    s = RNG.integers(0, 9, (3, 4))
    fns = {
        "lsh": lambda lib, x, y: lib.bitwise_left_shift(x, y),
        "rsh": lambda lib, x, y: lib.bitwise_right_shift(x, y),
        "lsh_scalar": lambda lib, x, y: x.bitwise_left_shift(3),
        "rsh_neg": lambda lib, x, y: x >> y,
        "uint8": lambda lib, x, y: x.abs().to(lib.uint8) << 7,
        "wide": lambda lib, x, y: lib.stack([x << (y + 60), x >> (y + 60)]),
        "operators": lambda lib, x, y: lib.stack([5 << y, 300 >> y, x.clone().__ilshift__(y),
                                                  x.clone().bitwise_right_shift_(2)]),
    }
    _same(fns[case], a, s)
    for lib in (torch, fusegrad):
        with pytest.raises(NotImplementedError, match="\"lshift_cpu\" not implemented for "
                           "'Float'"):
            lib.bitwise_left_shift(lib.ones(2), 1)


@pytest.mark.parametrize("n, increasing", [(None, False), (2, True), (4, False), (0, True)])
def test_vander(n, increasing):
    # PyTorch's own backward of vander fails (it writes into a saved tensor): values only
    _same(lambda lib, x: lib.vander(x, N=n, increasing=increasing), RNG.standard_normal(3),
          grad=False)
    _same(lambda lib, x: lib.vander(x, n, increasing), np.array([1, 2, 3]))
    for lib in (torch, fusegrad):
        with pytest.raises(RuntimeError, match="x must be a one-dimensional tensor."):
            lib.vander(lib.ones(2, 2))


def test_mvlgamma_and_deprecated_norms():
    x = RNG.uniform(2.0, 4.0, (2, 3))
    _same(lambda lib, t: lib.mvlgamma(t, 3), x, node=False)
    _same(lambda lib, t: t.mvlgamma(1), x, node=False)
    _same(lambda lib, t: (t * 1).mvlgamma_(2), x, node=False)
    _same(lambda lib, t: lib.frobenius_norm(t, (1,), True), x)
    _same(lambda lib, t: lib.frobenius_norm(t, (0, 1)), x)
    _same(lambda lib, t: lib.nuclear_norm(t), x, node=False)
    _same(lambda lib, t: lib.nuclear_norm(t.view(1, 2, 3), (1, 2), True), x, node=False)
    for lib in (torch, fusegrad):  # a warning given once, or always when asked to
        lib.set_warn_always(True)
        try:
            for _ in range(2):
                with pytest.warns(UserWarning, match="at::frobenius_norm is deprecated"):
                    lib.frobenius_norm(lib.ones(2), (0,))
        finally:
            lib.set_warn_always(False)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            lib.frobenius_norm(lib.ones(2), (0,))
        assert not seen


def test_layer_spellings():
    x = RNG.standard_normal((2, 3, 7))
    w = RNG.standard_normal((4, 3, 2))
    b = RNG.standard_normal(4)
    _same(lambda lib, t: lib.constant_pad_nd(t, [1, 2], 0.5), x)
    _same(lambda lib, t, w, b: lib.convolution(t, w, b, [2], [1], [1], False, [0], 1), x, w, b)
    _same(lambda lib, t, w: lib.convolution(t[:, :, :3], w.transpose(0, 1), None, [1], [0],
                                            [1], True, [0], 1), x[:, :3], w[:3])
    _same(lambda lib, t: lib.max_pool1d_with_indices(t, 2, 2), x)
    target = RNG.uniform(0, 1, (2, 3, 7))
    for red in (0, 1, 2):
        _same(lambda lib, t, y, red=red: lib.binary_cross_entropy_with_logits(
            t, y, None, lib.full((7,), 1.5, dtype=lib.float64), red), x, target)


def test_small_helpers():
    _same(lambda lib, t: lib.fill(t, 2.5), RNG.standard_normal(3), node=False)
    for lib in (torch, fusegrad):
        t = lib.ones(2)
        assert lib.positive(t) is t
        with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not "
                           "supported."):
            lib.positive(lib.ones(2, dtype=lib.bool))
        e = lib.empty_permuted((2, 3, 4), (0, 2, 1))
        assert e.shape == (2, 3, 4) and e.stride() == (12, 1, 3)
        got = lib.nonzero_static(lib.tensor([0, 1, 0, 2]), size=3)
        assert got.tolist() == [[1], [3], [-1]]
        got = lib.nonzero_static(lib.tensor([[0, 1], [3, 0]]), size=1, fill_value=-5)
        assert got.tolist() == [[0, 1]]
        buf = bytearray(b"\x01\x00\x00\x00\x02\x00\x00\x00")
        f = lib.frombuffer(buf, dtype=lib.int32)
        assert f.tolist() == [1, 2]
        f[0] = 7
        assert buf[0] == 7  # shares the buffer's memory
        assert lib.frombuffer(bytearray(8), dtype=lib.int16, count=2, offset=2).shape == (2,)
        with pytest.raises(ValueError, match=r"buffer length \(3 bytes\) after offset \(0 "
                           r"bytes\) must be a multiple of element size \(4\)"):
            lib.frombuffer(bytearray(3), dtype=lib.int32)
        w = lib.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
        assert lib.embedding_renorm_(w, lib.tensor([0, 0, 1]), 1.0, 2.0) is w
        np.testing.assert_allclose(w.numpy(), [[0.6, 0.8], [0.3, 0.4], [6.0, 8.0]], rtol=1e-6)
        y = lib.tensor([1.0, -2.0])
        assert lib.rrelu_(y) is y and y.tolist()[0] == 1.0


def test_settings_and_type_questions():
    for lib in (torch, fusegrad):
        assert lib.typename(lib.ones(2)) == "torch.FloatTensor"
        assert lib.typename(lib.ones(2, dtype=lib.int64)) == "torch.LongTensor"
        assert lib.typename(1.0) == "float"
        assert lib.typename(lib.nn.Linear(1, 1)) == \
            f"{lib.__name__}.nn.modules.linear.Linear"
        lib.set_warn_always(True)
        assert lib.is_warn_always_enabled()
        lib.set_warn_always(False)
        assert not lib.is_warn_always_enabled()
        try:
            lib.set_deterministic_debug_mode("warn")
            assert lib.get_deterministic_debug_mode() == 1
            assert lib.is_deterministic_algorithms_warn_only_enabled()
            lib.set_deterministic_debug_mode(2)
            assert lib.get_deterministic_debug_mode() == 2
            with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, "
                               "`error`, but got x"):
                lib.set_deterministic_debug_mode("x")
            with pytest.raises(RuntimeError, match="expected 0, 1, or 2, but got 5"):
                lib.set_deterministic_debug_mode(5)
            with pytest.raises(TypeError, match="debug_mode must be str or int, but got "
                               "<class 'float'>"):
                lib.set_deterministic_debug_mode(1.0)
        finally:
            lib.set_deterministic_debug_mode("default")
        assert lib.get_deterministic_debug_mode() == 0
        assert not lib.are_deterministic_algorithms_enabled()
        lib.set_warn_always(True)
        with pytest.warns(UserWarning, match="set_default_tensor_type\\(\\) is deprecated"):
            lib.set_default_tensor_type(lib.DoubleTensor)
        lib.set_warn_always(False)
        try:
            assert lib.get_default_dtype() == lib.float64
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lib.set_default_tensor_type("torch.FloatTensor")
                assert lib.get_default_dtype() == lib.float32
                with pytest.raises(TypeError, match="only floating-point types are supported"):
                    lib.set_default_tensor_type(lib.LongTensor)
        finally:
            lib.set_default_dtype(lib.float32)
        t = lib.ones(2)
        assert lib.get_device(t) == -1 and not lib.is_inference(t)
        assert lib.is_storage(t.untyped_storage()) and not lib.is_storage(t)
        lib.set_anomaly_enabled(True)
        assert lib.is_anomaly_enabled()
        lib.set_anomaly_enabled(False)
        assert not lib.is_anomaly_enabled()
        assert isinstance(lib.set_flush_denormal(False), bool)


@pytest.mark.parametrize("device", ["ipu", "xla"])
def test_deprecated_autocast_device_spellings(device):
    for lib in (torch, fusegrad):
        before = (lib.is_autocast_enabled(device), lib.get_autocast_dtype(device))
        try:
            with pytest.warns(DeprecationWarning, match=rf"torch.set_autocast_{device}_enabled"
                              rf"\(enabled\) is deprecated. Please use torch.set_autocast_"
                              rf"enabled\('{device}', enabled\) instead"):
                getattr(lib, f"set_autocast_{device}_enabled")(True)
            with pytest.warns(DeprecationWarning, match=rf"get_autocast_{device}_dtype\(\) is "
                              "deprecated"):
                assert getattr(lib, f"get_autocast_{device}_dtype")() == before[1]
            with pytest.warns(DeprecationWarning):
                getattr(lib, f"set_autocast_{device}_dtype")(lib.float16)
            assert lib.is_autocast_enabled(device)
            assert lib.get_autocast_dtype(device) == lib.float16
            with pytest.warns(DeprecationWarning):
                assert getattr(lib, f"is_autocast_{device}_enabled")()
        finally:
            lib.set_autocast_enabled(device, before[0])
            lib.set_autocast_dtype(device, before[1])


def _warnings_always(run) -> list[list[tuple]]:
    """The (message, category, file) of each warning `run(lib)` gives under
    `set_warn_always(True)`, for torch and for fusegrad, checked equal (PyTorch's
    "(Triggered internally at ...)" suffix left out)."""
    given = []
    for lib in (torch, fusegrad):
        lib.set_warn_always(True)
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                run(lib)
        finally:
            lib.set_warn_always(False)
        given.append([(str(w.message).split(" (Triggered")[0], w.category, w.filename)
                      for w in seen])
    assert given[0] == given[1]
    return given


@pytest.mark.parametrize("convert", ["float", "complex", "math.sqrt", "int", "item", "bool"])
def test_scalar_of_a_tensor_requiring_grad_warns_as_torch(convert):
    """float() and complex() (and so the math module) of a tensor that requires grad give
    PyTorch's warning, at the caller's line; int(), item() and bool() do not; nor does a
    tensor without grad."""
    import math

    how = {"float": float, "complex": complex, "math.sqrt": math.sqrt, "int": int,
           "item": lambda t: t.item(), "bool": bool}[convert]
    def run(lib):
        how(lib.tensor(2.0, requires_grad=True) * 1)
        how(lib.tensor(2.0))

    given = _warnings_always(run)
    assert len(given[0]) == (1 if convert in ("float", "complex", "math.sqrt") else 0)
    if given[0]:
        assert given[1][0][2] == __file__


def test_index_reduce_beta_warning_as_torch():
    """index_reduce's beta warning: once per process as PyTorch gives it, every time under
    `set_warn_always(True)`, pointing at the caller's line, for the function and the
    in-place method alike."""
    def run(lib):
        x, s, i = lib.zeros(3), lib.ones(2), lib.tensor([0, 1])
        lib.index_reduce(x, 0, i, s, "prod")
        x.index_reduce_(0, i, s, "amax")

    given = _warnings_always(run)
    assert len(given[1]) == 2 and all(w[2] == __file__ for w in given[1])
