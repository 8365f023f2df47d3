"""`stft` and `istft` against PyTorch: values, dtypes and shapes over the argument
combinations (centre padding modes, short and missing windows, complex input and window,
two-sided and normalized transforms, `align_to_window`, `length`), the round trip, the
gradients of a real loss for the signal and the window, the recorded nodes, the errors and
warnings in PyTorch's words, the Tensor methods and the `__torch_function__` protocol."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(0)
SIGNAL = RNG.standard_normal((3, 64))
CSIGNAL = SIGNAL + 1j * RNG.standard_normal((3, 64))
# istft's overlap-add: PyTorch records UnfoldBackwardBackward0, fusegrad an `index_add` of
# the frames flattened (a reshape below it: a view, or an unsafe view of a clone).
OVERLAP_ADD = {"UnfoldBackwardBackward0", "IndexAddBackward0"}
FLATTENING = {"ViewBackward0", "UnsafeViewBackward0", "CloneBackward0"}


def _window(kind: str, n: int, dtype):
    """A window as a NumPy array: a raised Hann window (no zeros, so NOLA holds for any
    hop), a complex one, or None."""
    if kind == "none":
        return None
    w = np.hanning(n + 2)[1:-1] + 0.05
    if kind == "complex":
        w = w * np.exp(1j * np.arange(n))
        return w.astype(np.complex64 if dtype == np.float32 else np.complex128)
    return w.astype(dtype)


def _signal(shape, complex_input: bool, dtype):
    data = CSIGNAL if complex_input else SIGNAL
    x = data[tuple(slice(0, s) for s in shape)] if len(shape) == 2 else data[0, :shape[0]]
    if complex_input:
        return x.astype(np.complex64 if dtype == np.float32 else np.complex128)
    return x.astype(dtype)


def _nodes(t) -> list:
    """Every node name reachable from `t`'s grad_fn, depth first, the overlap-add's own
    nodes left out."""
    out, seen = [], set()

    def walk(node, below_overlap_add=False):
        if node is None or node in seen:
            return
        seen.add(node)
        name = type(node).__name__
        skip = name in OVERLAP_ADD or (below_overlap_add and name in FLATTENING)
        if not skip:
            out.append(name)
        for child, _ in node.next_functions:
            walk(child, skip)

    walk(t.grad_fn)
    return out


def _run(lib, x, window, kwargs, inverse, method: bool = False):
    """stft (and istft of its result, when `inverse` is not None) with `lib`: the outputs,
    the gradients of a real loss for the signal and the window, and the recorded nodes."""
    X = lib.tensor(x, requires_grad=True)
    W = None if window is None else lib.tensor(window, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = X.stft(window=W, **kwargs) if method else lib.stft(X, window=W, **kwargs)
        outs, nodes = [y], _nodes(y)
        loss = (y.abs() if y.is_complex() else y).pow(2).sum()
        if inverse is not None:
            z = y.istft(window=W, **inverse) if method else lib.istft(y, window=W, **inverse)
            outs.append(z)
            nodes += _nodes(z)
            loss = loss + (z.abs() if z.is_complex() else z).sum()
    loss.backward()
    grads = [X.grad, None if W is None else W.grad]
    return outs, grads, nodes


def _same(th, fg, dtype) -> None:
    assert str(fg.dtype) == str(th.dtype)
    assert tuple(fg.shape) == tuple(th.shape)
    want = th.detach().resolve_conj().numpy()
    tol = 1e-5 if dtype == np.float32 else 1e-11
    scale = float(np.max(np.abs(want))) if want.size else 1.0
    np.testing.assert_allclose(fg.detach().numpy(), want, rtol=tol, atol=tol * scale)


# (signal shape, complex signal, window kind, window length, stft kwargs, istft kwargs or None)
CASES = [
    ((64,), False, "hann", 16, dict(n_fft=16, return_complex=True), dict(n_fft=16)),
    ((3, 50), False, "hann", 16, dict(n_fft=16, hop_length=5, return_complex=True),
     dict(n_fft=16, hop_length=5, length=50)),
    ((64,), False, "hann", 10, dict(n_fft=16, win_length=10, return_complex=True),
     dict(n_fft=16, win_length=10)),
    ((64,), False, "hann", 9, dict(n_fft=15, win_length=9, hop_length=3,
                                   return_complex=True),
     dict(n_fft=15, win_length=9, hop_length=3)),
    ((64,), False, "none", 16, dict(n_fft=16, return_complex=True), dict(n_fft=16)),
    ((2, 64), False, "none", 10, dict(n_fft=16, win_length=10, hop_length=3,
                                      return_complex=True), None),
    ((64,), False, "hann", 16, dict(n_fft=16, normalized=True, center=False,
                                    return_complex=True),
     dict(n_fft=16, normalized=True, center=False, length=64)),
    ((64,), False, "hann", 16, dict(n_fft=16, onesided=False, return_complex=True),
     dict(n_fft=16, onesided=False)),
    ((2, 64), False, "hann", 16, dict(n_fft=16, onesided=False, normalized=True,
                                      return_complex=True),
     dict(n_fft=16, normalized=True, return_complex=True)),
    ((2, 64), False, "hann", 16, dict(n_fft=16, return_complex=False), None),
    ((64,), False, "hann", 16, dict(n_fft=16, pad_mode="constant", return_complex=True),
     dict(n_fft=16, length=70)),
    ((64,), False, "hann", 16, dict(n_fft=16, pad_mode="circular", return_complex=True),
     dict(n_fft=16, length=20)),
    ((64,), False, "hann", 16, dict(n_fft=16, pad_mode="replicate", return_complex=True),
     None),
    ((2, 64), False, "hann", 10, dict(n_fft=16, win_length=10, center=False,
                                      align_to_window=True, return_complex=True), None),
    ((2, 64), False, "hann", 10, dict(n_fft=16, win_length=10, center=False,
                                      align_to_window=False, return_complex=True), None),
    ((64,), True, "hann", 16, dict(n_fft=16), dict(n_fft=16, return_complex=True)),
    ((2, 64), True, "none", 16, dict(n_fft=16, return_complex=False), None),
    ((64,), False, "complex", 16, dict(n_fft=16), dict(n_fft=16, return_complex=True)),
    ((64,), False, "hann", 64, dict(n_fft=64, hop_length=16, return_complex=True),
     dict(n_fft=64, hop_length=16)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_values_gradients_and_nodes_match_torch(case, dtype):
    """stft's (and istft's) outputs, the gradients of a real loss of both for the signal and
    the window, and the recorded nodes, are PyTorch's."""
    shape, complex_input, kind, win_length, kwargs, inverse = CASES[case]
    x = _signal(shape, complex_input, dtype)
    window = _window(kind, win_length, dtype)
    th_out, th_grads, th_nodes = _run(torch, x, window, kwargs, inverse)
    fg_out, fg_grads, fg_nodes = _run(fusegrad, x, window, kwargs, inverse)
    for th, fg in zip(th_out, fg_out):
        _same(th, fg, dtype)
    for th, fg in zip(th_grads, fg_grads):
        assert (th is None) == (fg is None)
        if th is not None:
            _same(th, fg, dtype)
    assert fg_nodes == th_nodes


def test_shapes_dtypes_and_layout():
    """Frequencies before frames, complex64 for float32, complex128 for float64 or a float64
    window, and the output a transposed view of contiguous frames as PyTorch's."""
    for lib in (torch, fusegrad):
        x = lib.tensor(SIGNAL, dtype=lib.float32)
        w = lib.hann_window(16)
        y = lib.stft(x, 16, window=w, return_complex=True)
        assert tuple(y.shape) == (3, 9, 17) and y.dtype == lib.complex64
        assert tuple(y.stride()) == (153, 1, 9)
        assert lib.stft(x[0], 16, window=w, return_complex=True).shape == (9, 17)
        assert lib.stft(x.double(), 16, window=w, return_complex=True).dtype == lib.complex128
        assert lib.stft(x, 16, window=w.double(), return_complex=True).dtype == lib.complex128
        assert lib.stft(x, 16, 4, window=w, center=False,
                        return_complex=True).shape == (3, 9, 13)
        assert lib.stft(x, 16, window=w, onesided=False,
                        return_complex=True).shape == (3, 16, 17)
        real = lib.stft(x, 16, window=w, return_complex=False)
        assert tuple(real.shape) == (3, 9, 17, 2) and real.dtype == lib.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_round_trip(dtype):
    """istft(stft(x)) gives x back (batched and not, with and without `length`)."""
    tol = 1e-5 if dtype == np.float32 else 1e-12
    x = fusegrad.tensor(SIGNAL.astype(dtype))
    w = fusegrad.hann_window(16, dtype=x.dtype)
    y = fusegrad.stft(x, 16, hop_length=4, window=w, return_complex=True)
    np.testing.assert_allclose(fusegrad.istft(y, 16, 4, window=w).numpy(), x.numpy(),
                               rtol=tol, atol=tol)
    z = fusegrad.istft(y[1], 16, 4, window=w, length=60)
    np.testing.assert_allclose(z.numpy(), x[1, :60].numpy(), rtol=tol, atol=tol)
    short = fusegrad.hann_window(12, dtype=x.dtype)
    y = x.stft(20, hop_length=5, win_length=12, window=short, return_complex=True)
    back = y.istft(20, hop_length=5, win_length=12, window=short, length=64)
    np.testing.assert_allclose(back.numpy(), x.numpy(), rtol=tol, atol=tol)


def test_methods_are_the_functions():
    """`x.stft(...)` and `y.istft(...)` give the functions' results and gradients."""
    x = _signal((2, 64), False, np.float64)
    window = _window("hann", 16, np.float64)
    kwargs, inverse = dict(n_fft=16, hop_length=4, return_complex=True), dict(n_fft=16)
    th_out, th_grads, _ = _run(torch, x, window, kwargs, inverse, method=True)
    fg_out, fg_grads, _ = _run(fusegrad, x, window, kwargs, inverse, method=True)
    for th, fg in zip([*th_out, *th_grads], [*fg_out, *fg_grads]):
        _same(th, fg, np.float64)


def test_protocol_handlers_get_torchs_arguments():
    """A `__torch_function__` subclass sees `Tensor.stft` / `Tensor.istft` with their
    defaults by keyword (PyTorch writes them in Python), `torch.stft` likewise, and
    `torch.istft` with the arguments given (it is a builtin)."""
    def handled(lib) -> list:
        calls = []

        class Logged(lib.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                calls.append((func.__name__, len(args), sorted(kwargs or {})))
                return super().__torch_function__(func, types, args, kwargs or {})

        x = lib.tensor(SIGNAL[0], dtype=lib.float32).as_subclass(Logged)
        w = lib.hann_window(16)
        lib.stft(x, 16, window=w, return_complex=True)
        y = x.stft(16, window=w, return_complex=True)
        lib.istft(y, 16, window=w)
        y.istft(16, window=w)
        return [c for c in calls if c[0] in ("stft", "istft")]

    assert handled(fusegrad) == handled(torch)


# ---------------------------------------------------------------- errors and warnings


def _outcome(lib, expr: str):
    """(exception type, message) of `expr` with `t` bound to `lib`, or the result's shape
    and dtype; warnings silenced."""
    env = {"t": lib, "x": lib.tensor(SIGNAL[0], dtype=lib.float32),
           "w": lib.hann_window(16), "np": np}
    env["Y"] = lib.stft(env["x"], 16, window=env["w"], return_complex=True)
    env["C"] = lambda *s: lib.zeros(s, dtype=lib.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = eval(expr, env)
        except Exception as e:  # noqa: BLE001 - the type is compared
            return type(e).__name__, str(e).split(" (Triggered")[0]
    return tuple(r.shape), str(r.dtype)


ERRORS = [
    # stft: the Python layer, then the checks in order
    "t.stft(x, 16, window=w)",
    "t.stft(x, 16, window=w, align_to_window=True, return_complex=True)",
    "t.stft(t.randn(2, 2, 4), 16, align_to_window=False, return_complex=True)",
    "t.stft(x[:5], 16, window=w, return_complex=True)",
    "t.stft(t.tensor(1.), 16, return_complex=True)",
    "t.stft(t.randn(0), 16, window=w, return_complex=True)",
    "t.stft(x, 16, window=w, pad_mode='foo', return_complex=True)",
    "t.stft(x[:5], 16, pad_mode='circular', return_complex=True)",
    "t.stft(t.randn(2, 2, 64), 16, window=w, return_complex=True)",
    "t.stft(t.randn(2, 2, 64), 16, center=False, return_complex=True)",
    "t.stft(t.arange(64), 16, window=w, return_complex=True)",
    "t.stft(t.arange(64), 16, return_complex=False)",
    "t.stft(t.arange(64), 16)",
    "t.stft(x, 100, center=False, return_complex=True)",
    "t.stft(x[:10], 16, 4, 10, t.ones(10), center=False, return_complex=True)",
    "t.stft(x, 0, return_complex=True)",
    "t.stft(x, -4, return_complex=True)",
    "t.stft(x, 16, hop_length=0, window=w, return_complex=True)",
    "t.stft(x, 2, return_complex=True)",
    "t.stft(x, 16, win_length=20, return_complex=True)",
    "t.stft(x, 16, win_length=0, return_complex=True)",
    "t.stft(x, 16, window=t.ones(10), return_complex=True)",
    "t.stft(x, 16, win_length=10, window=w, return_complex=True)",
    "t.stft(x, 16, window=t.ones(4, 4), return_complex=True)",
    "t.stft(x.to(t.complex64), 16, window=w, onesided=True)",
    "t.stft(x, 16, window=w.to(t.complex64), onesided=True, return_complex=True)",
    "t.stft(x.to(t.complex64), 16, window=w, onesided=True, return_complex=False)",
    "t.stft(x.half(), 16, window=w.half(), return_complex=True)",
    # stft: accepted combinations
    "t.stft(x, 16, window=w.to(t.complex64))",
    "t.stft(x, 16, window=t.ones(16, dtype=t.long), return_complex=True)",
    "t.stft(x[:16], 16, window=w, center=False, return_complex=True)",
    "t.stft(x[:9], 16, window=w, return_complex=True)",
    "t.stft(x[:5], 16, pad_mode='constant', return_complex=True)",
    "t.stft(x.t(), 16, window=w, return_complex=True)",
    "t.stft(x, 16, 4, 10, t.ones(10), center=False, align_to_window=True, "
    "return_complex=True)",
    "t.stft(x[:16], 16, 4, 10, t.ones(10), center=False, align_to_window=True, "
    "return_complex=True)",
    # istft
    "t.istft(Y.real, 16, window=w)",
    "t.istft(t.view_as_real(Y), 16)",
    "t.istft(C(), 16)",
    "t.istft(Y[0], 16, window=w)",
    "t.istft(Y[None, None], 16, window=w)",
    "t.istft(C(9, 0), 16)",
    "t.istft(C(0, 9, 17), 16, window=w)",
    "t.istft(C(9, 0), 20, hop_length=0)",
    "t.istft(Y, 20, window=t.ones(20))",
    "t.istft(Y, 16, window=w, onesided=False)",
    "t.istft(C(16, 17), 16, window=w, onesided=True)",
    "t.istft(Y, 16, hop_length=0, window=w)",
    "t.istft(Y, 16, hop_length=17, window=w)",
    "t.istft(Y, 16, win_length=17)",
    "t.istft(Y, 16, win_length=0)",
    "t.istft(Y, 16, window=t.ones(10))",
    "t.istft(Y, 16, window=t.ones(4, 4))",
    "t.istft(Y, 16, hop_length=16, window=w)",
    "t.istft(Y, 16, window=t.zeros(16))",
    "t.istft(Y.to(t.complex128), 16, window=w.double(), center=False)",
    "t.istft(Y, 16, window=w, length=0)",
    "t.istft(Y, 16, window=w, return_complex=True)",
    "t.istft(C(16, 17), 16, window=w.to(t.complex64))",
    "t.istft(Y, 16, window=w.to(t.complex64))",
    # istft: accepted combinations and the NOLA threshold (the squared window's sum)
    "t.istft(Y, 16, window=w, length=100)",
    "t.istft(Y, 16, window=w, length=10)",
    "t.istft(Y, 16, win_length=10, window=t.ones(10))",
    "t.istft(Y, 16, window=t.ones(16, dtype=t.long))",
    "t.istft(Y, 16, window=w.double())",
    "t.istft(t.randn(16, 17, dtype=t.complex64), 16, window=w)",
    "t.istft(t.randn(16, 17, dtype=t.complex64), 16, window=w, return_complex=True)",
    "t.istft(C(9, 3), 16, hop_length=8, window=t.cat([t.full((8,), 3e-6), t.ones(8)]), "
    "center=False)",
    "t.istft(C(9, 3), 16, hop_length=8, window=t.cat([t.full((8,), 4e-6), t.ones(8)]), "
    "center=False)",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_errors_and_accepted_arguments_match_torch(expr):
    """Each call raises PyTorch's exception with PyTorch's message, in PyTorch's order of
    checks, or gives PyTorch's shape and dtype."""
    assert _outcome(fusegrad, expr) == _outcome(torch, expr)


def _warnings(lib, run) -> list:
    lib.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                run(lib)
            except RuntimeError:
                pass
    finally:
        lib.set_warn_always(False)
    return [(w.category, str(w.message).split(" (Triggered")[0]) for w in seen]


WARNING_RUNS = [
    lambda t: t.stft(t.randn(64), 16, return_complex=True),
    lambda t: t.randn(64).stft(16, window=t.ones(16), return_complex=False),
    lambda t: t.stft(t.randn(64), 16, return_complex=False),
    lambda t: t.stft(t.randn(64), 16),  # warns, then raises
    lambda t: t.stft(t.arange(64), 16, return_complex=False),  # both, then raises
    lambda t: t.stft(t.randn(64), 16, window=t.ones(3), return_complex=True),  # neither
    lambda t: t.istft(t.stft(t.randn(64), 16, window=t.ones(16), return_complex=True), 16),
    lambda t: t.istft(t.zeros(9, 5), 16),  # warns, then raises
    lambda t: t.istft(t.zeros(9, 5, dtype=t.complex64), 16, window=t.ones(3)),  # raises
]


@pytest.mark.parametrize("run", range(len(WARNING_RUNS)))
def test_warnings_match_torch(run):
    """The missing-window and `return_complex=False` warnings: PyTorch's text (its
    "Triggered internally" suffix aside), given where PyTorch gives them."""
    assert _warnings(fusegrad, WARNING_RUNS[run]) == _warnings(torch, WARNING_RUNS[run])


def test_warnings_are_given_once_at_the_callers_line():
    """Given once per process unless `set_warn_always(True)`, and attributed to the line
    that called stft or istft."""
    fusegrad.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            fusegrad.randn(64).stft(16, return_complex=False)
    finally:
        fusegrad.set_warn_always(False)
    assert [w.filename for w in seen] == [__file__, __file__]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(2):
            fusegrad.stft(fusegrad.randn(64), 16, return_complex=False)
    assert len(seen) <= 2  # at most once each (none if an earlier test gave them)
