"""Inference tensors: what tensors made inside `inference_mode` are and what they refuse
outside it, against PyTorch (each scenario runs on both libraries; values or the error's
type and message must agree)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fusegrad
from fusegrad import _tensor

torch = pytest.importorskip("torch")


def _made_inside(lib):
    with lib.inference_mode():
        return lib.ones(3) * 2


def _outcome(fn, lib):
    """What `fn(lib)` gives: ("value", ...) or ("error", type name, message)."""
    try:
        out = fn(lib)
    except Exception as e:  # (any type: the type is compared)
        return ("error", type(e).__name__, str(e))
    if isinstance(out, lib.Tensor):
        return ("value", tuple(out.shape), out.detach().numpy().tolist(), out.requires_grad,
                out.grad_fn.name() if out.grad_fn is not None else None)
    return ("value", out)


def _flags_inside(lib):
    n = lib.ones(3)
    with lib.inference_mode():
        a = lib.ones(3)
        r = lib.ones(3, requires_grad=True)
        c = n + 1
        view_of_normal = n[:2]
        detached_normal = n.detach()
        view_of_inference = a[:2]
        with lib.inference_mode(False):
            nested_normal = lib.ones(2)
    return (a.is_inference(), r.is_inference(), r.requires_grad, c.is_inference(),
            view_of_normal.is_inference(), detached_normal.is_inference(),
            view_of_inference.is_inference(), nested_normal.is_inference(),
            n.is_inference(), lib.is_inference(a))


def _outside_flags(lib):
    a = _made_inside(lib)
    return (a.detach().is_inference(), a.view(3).is_inference(), a[1:].is_inference(),
            a.data.is_inference(), a.clone().is_inference(), (a + 1).is_inference(),
            lib.is_inference_mode_enabled())


def _model_output(lib):
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    with lib.inference_mode():
        out = m(lib.ones(1, 3))
    return (out.is_inference(), out.requires_grad, out.grad_fn is None,
            m.weight.is_inference())


SCENARIOS = {
    "flags inside": _flags_inside,
    "flags outside": _outside_flags,
    "a model's output": _model_output,
    "version inside": lambda lib: _version_inside(lib),
    "version outside": lambda lib: _made_inside(lib)._version,
    "normal version inside": lambda lib: _normal_write_inside(lib),
    "add_ outside": lambda lib: _made_inside(lib).add_(1),
    "add_ under no_grad": lambda lib: _under_no_grad(lib, lambda a: a.add_(1)),
    "setitem outside": lambda lib: _setitem(_made_inside(lib)),
    "copy_ outside": lambda lib: _made_inside(lib).copy_(lib.zeros(3)),
    "out= outside": lambda lib: lib.add(lib.ones(3), 1, out=_made_inside(lib)),
    "a view's add_ outside": lambda lib: _made_inside(lib)[:2].mul_(3),
    "add_ inside": lambda lib: _write_inside(lib),
    "normal written into": lambda lib: lib.zeros(3).copy_(_made_inside(lib)),
    "saved by mul": lambda lib: lib.ones(3, requires_grad=True) * _made_inside(lib),
    "saved by mul, first": lambda lib: _made_inside(lib) * lib.ones(3, requires_grad=True),
    "not saved by add": lambda lib: lib.ones(3, requires_grad=True) + _made_inside(lib),
    "saved by linear": lambda lib: lib.nn.functional.linear(
        _made_inside(lib).reshape(1, 3), lib.ones(2, 3, requires_grad=True)),
    "saved by matmul": lambda lib: _made_inside(lib) @ lib.ones(3, requires_grad=True),
    "saved by where": lambda lib: lib.where(
        lib.tensor([True, False, True]), lib.ones(3, requires_grad=True), _made_inside(lib)),
    "saved by cat-then-mul": lambda lib: lib.cat([_made_inside(lib)]) * lib.ones(
        3, requires_grad=True),
    "saved under inference_mode(False)": lambda lib: _nested_false_save(lib),
    "saved under saved-tensor hooks": lambda lib: _hooked_save(lib),
    "requires_grad_ outside": lambda lib: _made_inside(lib).requires_grad_(),
    "requires_grad = True outside": lambda lib: setattr(_made_inside(lib), "requires_grad",
                                                        True),
    "requires_grad_(False) outside": lambda lib: _made_inside(lib).requires_grad_(False),
    "requires_grad_ inside": lambda lib: _requires_grad_inside(lib),
    "Parameter of one": lambda lib: lib.nn.Parameter(_made_inside(lib)),
    "int requires_grad_": lambda lib: _int_inside(lib).requires_grad_(),
    "cloned then trained": lambda lib: _cloned(lib),
}


def _version_inside(lib):
    with lib.inference_mode():
        return lib.ones(2)._version


def _normal_write_inside(lib):
    n = lib.ones(3)
    with lib.inference_mode():
        n.add_(1)
        view = n[:2]
        view.mul_(2)
    return n._version, n.tolist(), view.is_inference()


def _under_no_grad(lib, fn):
    a = _made_inside(lib)
    with lib.no_grad():
        return fn(a)


def _setitem(a):
    a[0] = 5.0
    return a


def _write_inside(lib):
    a = _made_inside(lib)
    with lib.inference_mode():
        a.add_(1)
        a[1] = 7.0
    return a


def _nested_false_save(lib):
    a = _made_inside(lib)
    with lib.inference_mode():
        with lib.inference_mode(False):
            return lib.ones(3, requires_grad=True) * a


def _hooked_save(lib):
    a = _made_inside(lib)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        return lib.ones(3, requires_grad=True) * a


def _requires_grad_inside(lib):
    with lib.inference_mode():
        a = lib.ones(3)
        a.requires_grad_()
        return a.requires_grad, a.is_leaf


def _int_inside(lib):
    with lib.inference_mode():
        return lib.ones(3, dtype=lib.int64)


def _cloned(lib):
    w = lib.ones(3, requires_grad=True)
    loss = (w * _made_inside(lib).clone()).sum()
    loss.backward()
    return w.grad


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_as_pytorch(name):
    fn = SCENARIOS[name]
    assert _outcome(fn, fusegrad) == _outcome(fn, torch)


def test_writes_refused_leave_the_tensor_unchanged():
    a = _made_inside(fusegrad)
    for write in (lambda: a.add_(1), lambda: a.copy_(fusegrad.zeros(3)),
                  lambda: a.__setitem__(0, 9.0)):
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
            write()
    assert a.tolist() == [2.0, 2.0, 2.0]


def test_per_thread():
    """Another thread's tensors stay normal while this one is in inference mode, and this
    thread's tensors are inference tensors while another thread is not."""
    inside, outside = threading.Event(), threading.Event()
    made = {}

    def other():
        inside.wait()
        made["other"] = fusegrad.ones(2)
        outside.set()

    thread = threading.Thread(target=other)
    thread.start()
    with fusegrad.inference_mode():
        inside.set()
        outside.wait()
        made["here"] = fusegrad.ones(2)
    thread.join()
    assert not made["other"].is_inference() and made["here"].is_inference()


def test_nothing_watches_new_tensors_outside_inference_mode():
    """The hot paths pay no call per tensor once every inference context has been left."""
    with fusegrad.inference_mode():
        with fusegrad.inference_mode():
            assert "inference mode" in _tensor._watchers and _tensor._on_new is not None
        assert "inference mode" in _tensor._watchers
    # (Storage accounting, once a test turned it on for good, may still watch.)
    assert "inference mode" not in _tensor._watchers
    assert _tensor._on_new is None or _tensor._watchers


def test_decorated_generator_and_compiled_outputs():
    @fusegrad.inference_mode()
    def gen():
        yield fusegrad.ones(2)

    assert next(gen()).is_inference()

    def f(x):
        return (x * 2).sin()

    compiled = fusegrad.compile(f)
    x = fusegrad.ones(3)
    with fusegrad.inference_mode():
        out = compiled(x)
    np.testing.assert_array_equal(out.numpy(), f(x).numpy())
    assert out.is_inference()
