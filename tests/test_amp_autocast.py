"""`fusegrad.autocast` / `fusegrad.amp.autocast` and the autocast state functions against
PyTorch's CPU build: regions, nesting, disabling, the decorator, dtypes, the weight cache,
per-thread state, warnings and errors, `custom_fwd`/`custom_bwd`, and the deprecated
`cuda.amp` spellings (off without CUDA)."""

from __future__ import annotations

import os
import threading
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.cuda.amp  # noqa: E402, F401  (whatever imported fusegrad.cuda before)
from fusegrad import _thread_state  # noqa: E402

LIBS = [torch, fusegrad]


def both(fn):
    """`fn(lib)` for PyTorch and fusegrad: (result, warnings as (category, text))."""
    out = []
    for lib in LIBS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = fn(lib)
            except Exception as e:  # noqa: BLE001  (compared)
                result = (type(e).__name__, str(e))
        # (Without a C compiler, compiled graphs say once that they run NumPy's kernels.)
        out.append((_plain(result), [(w.category.__name__, str(w.message).split(
            " (Triggered internally")[0]) for w in caught
            if not str(w.message).startswith("fusegrad codegen: no C compiler")]))
    return out


def _plain(x):
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    if isinstance(x, (torch.dtype, fusegrad.dtype)):
        return str(x)
    return x


def same(fn):
    a, b = both(fn)
    assert b == a


def _mats(lib):
    g = np.random.default_rng(0)
    return (lib.from_numpy(g.standard_normal((3, 4)).astype(np.float32)),
            lib.from_numpy(g.standard_normal((4, 2)).astype(np.float32)))


def test_regions_nesting_and_disabling():
    def body(lib):
        a, b = _mats(lib)
        seen = [(lib.is_autocast_enabled("cpu"), (a @ b).dtype)]
        with lib.autocast("cpu"):
            seen.append((lib.is_autocast_enabled("cpu"), lib.get_autocast_dtype("cpu"),
                         (a @ b).dtype, (a + 1).dtype, a.exp().dtype))
            with lib.autocast("cpu", enabled=False):
                seen.append((lib.is_autocast_enabled("cpu"), (a @ b).dtype))
                with lib.amp.autocast("cpu", dtype=lib.float16):
                    seen.append((lib.get_autocast_dtype("cpu"), (a @ b).dtype))
                seen.append((lib.get_autocast_dtype("cpu"), (a @ b).dtype))
            seen.append((lib.is_autocast_enabled("cpu"), (a @ b).dtype,
                         (a.double() @ b.double()).dtype))
        seen.append((lib.is_autocast_enabled("cpu"), (a @ b).dtype,
                     lib.is_autocast_enabled()))
        return seen

    same(body)
    assert _thread_state.local.modes == ()


def test_decorator_and_exceptions_restore_state():
    def body(lib):
        a, b = _mats(lib)

        @lib.autocast("cpu")
        def f(x, y):
            """Doc."""
            return x @ y

        out = [f(a, b).dtype, f.__name__, f.__doc__, (a @ b).dtype]
        try:
            with lib.autocast("cpu"):
                raise KeyError("x")
        except KeyError:
            out.append((lib.is_autocast_enabled("cpu"), (a @ b).dtype))
        return out

    same(body)


def test_state_functions():
    def body(lib):
        out = [lib.is_autocast_cache_enabled(), lib.get_autocast_dtype("cuda"),
               lib.get_autocast_dtype("hpu"), lib.get_autocast_cpu_dtype(),
               lib.get_autocast_gpu_dtype(), lib.is_autocast_cpu_enabled()]
        out.append((lib.autocast_increment_nesting(), lib.autocast_increment_nesting(),
                    lib.autocast_decrement_nesting(), lib.autocast_decrement_nesting()))
        lib.set_autocast_enabled("cpu", True)
        a, b = _mats(lib)
        out.append(((a @ b).dtype, lib.is_autocast_enabled("cpu")))
        lib.set_autocast_dtype("cpu", lib.float16)
        out.append(((a @ b).dtype, lib.get_autocast_dtype("cpu")))
        lib.set_autocast_dtype("cpu", lib.bfloat16)
        lib.set_autocast_enabled("cpu", False)
        lib.set_autocast_enabled(True)  # CUDA's switch: is_autocast_enabled() reads it
        out.append((lib.is_autocast_enabled(), lib.is_autocast_enabled("cpu"),
                    (a @ b).dtype))
        lib.set_autocast_enabled(False)
        lib.set_autocast_cache_enabled(False)
        out.append(lib.is_autocast_cache_enabled())
        lib.set_autocast_cache_enabled(True)
        return out

    same(body)
    assert _thread_state.local.modes == ()


@pytest.mark.parametrize("call", [
    lambda lib: lib.autocast("cuda"),
    lambda lib: lib.autocast("cpu", dtype=lib.float32),
    lambda lib: lib.autocast("cpu", dtype=lib.int32).__dict__,
    lambda lib: lib.autocast(lib.device("cpu")),
    lambda lib: lib.autocast("foo"),
    lambda lib: lib.autocast("meta"),
    lambda lib: lib.autocast("cpu")(3),
    lambda lib: lib.is_autocast_enabled("meta"),
    lambda lib: lib.is_autocast_enabled(None),
    lambda lib: lib.get_autocast_dtype("meta"),
    lambda lib: lib.set_autocast_enabled("cpu", 1),
    lambda lib: lib.set_autocast_dtype("cpu", "x"),
    lambda lib: lib.set_autocast_cache_enabled(1),
    lambda lib: lib.amp.is_autocast_available("cpu"),
    lambda lib: lib.amp.is_autocast_available("meta"),
    lambda lib: lib.amp.custom_fwd(device_type=lib.device("cpu")),
])
def test_warnings_and_errors(call):
    a, b = both(lambda lib: _describe(call(lib)))
    # The one difference allowed: the device class's own name in a message.
    assert repr(b).replace("fusegrad.device", "torch.device") == repr(a)


def _describe(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items() if k in ("fast_dtype", "device",
                                                            "_enabled", "_cache_enabled")}
    if hasattr(x, "_enabled"):
        return _describe(vars(x))
    return x if isinstance(x, (bool, str)) else type(x).__name__


def test_promote_and_float64():
    def body(lib):
        g = np.random.default_rng(1)
        f = lib.from_numpy(g.standard_normal((2, 3)).astype(np.float32))
        out = []
        with lib.autocast("cpu"):
            for combo in [(f.bfloat16(), f), (f.bfloat16(), f.bfloat16()), (f.double(), f),
                          (f.half(), f.bfloat16())]:
                try:
                    out.append((lib.cat(combo).dtype, lib.stack(combo).dtype))
                except RuntimeError as e:
                    out.append(str(e))
            out.append((f.double() @ f.double().t()).dtype)
            out.append(lib.nn.functional.mse_loss(f.bfloat16(), f.double()).dtype)
        return out

    same(body)


def test_weight_cache_one_cast_per_region():
    def body(lib):
        w = lib.nn.Parameter(lib.ones(4, 4))
        x = lib.ones(2, 4)
        out = []
        for cache in (True, False):
            with lib.autocast("cpu", cache_enabled=cache):
                y1, y2 = x @ w, x @ w
                c1, c2 = y1.grad_fn.next_functions[1][0], y2.grad_fn.next_functions[1][0]
                out.append((type(c1).__name__, c1 is c2))
                v = w.t()  # a view: never cached
                out.append((x @ v).grad_fn.next_functions[1][0] is
                            (x @ v).grad_fn.next_functions[1][0])
                with lib.no_grad():
                    out.append((x @ w).requires_grad)
            with lib.autocast("cpu"):  # a new region: a new cast
                out.append((x @ w).grad_fn.next_functions[1][0] is c1)
        return out

    same(body)
    assert _thread_state.local.autocast_cache is None


def test_autocast_is_per_thread():
    def body(lib):
        seen = {}

        def worker():
            a, b = _mats(lib)
            seen["other"] = (lib.is_autocast_enabled("cpu"), (a @ b).dtype)

        with lib.autocast("cpu"):
            t = threading.Thread(target=worker)
            t.start()
            t.join()
            a, b = _mats(lib)
            seen["here"] = (a @ b).dtype
        return sorted(seen.items())

    same(body)


def test_backward_of_autocast_graph():
    """Gradients flow back through the casts: float32 leaves get float32 gradients within
    bfloat16's rounding of PyTorch's."""
    grads = []
    for lib in LIBS:
        g = np.random.default_rng(2)
        x = lib.from_numpy(g.standard_normal((5, 4)).astype(np.float32)).requires_grad_()
        w = lib.from_numpy(g.standard_normal((3, 4)).astype(np.float32)).requires_grad_()
        with lib.autocast("cpu"):
            y = lib.nn.functional.linear(x, w).relu()
            loss = lib.nn.functional.mse_loss(y, lib.zeros(5, 3))
        loss.backward()
        grads.append((loss.dtype, x.grad.dtype, w.grad.dtype, x.grad.numpy(),
                      w.grad.numpy()))
    (ta, tb, tc, tx, tw), (fa, fb, fc, fx, fw) = grads
    assert (str(fa), str(fb), str(fc)) == (str(ta), str(tb), str(tc))
    np.testing.assert_allclose(fx, tx, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(fw, tw, rtol=2e-2, atol=2e-2)


def test_custom_fwd_and_bwd():
    def body(lib):
        class Scale(lib.autograd.Function):
            @staticmethod
            @lib.amp.custom_fwd(device_type="cpu", cast_inputs=lib.float32)
            def forward(ctx, x, w):
                ctx.save_for_backward(x, w)
                return x @ w, lib.is_autocast_enabled("cpu")

            @staticmethod
            @lib.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g, _):
                x, w = ctx.saved_tensors
                return g @ w.t(), x.t() @ g

        class Plain(lib.autograd.Function):
            @staticmethod
            @lib.amp.custom_fwd(device_type="cpu")
            def forward(ctx, x):
                return x @ x.t()

            @staticmethod
            @lib.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g):
                return (g @ g, lib.is_autocast_enabled("cpu"))[0]

        a, b = _mats(lib)
        a.requires_grad_()
        with lib.autocast("cpu"):
            out, inside = Scale.apply(a.bfloat16(), b)
            p = Plain.apply(a)
        (out.sum() + p.float().sum()).backward()
        return [out.dtype, inside, p.dtype, a.grad.dtype]

    same(body)


def test_cuda_amp_spellings_are_off_without_cuda():
    def body(lib):
        a, b = _mats(lib)
        scaler = lib.cuda.amp.GradScaler()
        with lib.cuda.amp.autocast():
            dt = (a @ b).dtype
            on = lib.is_autocast_enabled("cuda")
        loss = (a @ b).sum()
        return [scaler.is_enabled(), scaler.scale(loss) is loss, scaler.get_scale(), dt, on,
                scaler.state_dict(), type(scaler).__mro__[1].__name__]

    same(body)


def test_compiled_function_guards_on_autocast():
    """A graph captured under autocast is not reused outside it (or the other way round)."""
    def body(lib):
        compiled = lib.compile(lambda x, w: (x @ w).relu().sum(),
                               **({"backend": "aot_eager"} if lib is torch else {}))
        a, b = _mats(lib)
        out = []
        for on in (True, False, True):
            with lib.autocast("cpu", enabled=on):
                out.append(compiled(a, b).dtype)
        return out

    same(body)
