"""Ops whose backward node saves an input only where a gradient needs it, as PyTorch's does:
after the op, an input (or output) changed in place breaks backward ("modified by an inplace
operation") exactly where it does in PyTorch, gradients otherwise match, and the node shows
PyTorch's `_saved_<name>` attributes (a tensor where PyTorch's holds one, None where not)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)


def _r(*shape):
    """Positive float64 values (copysign, hypot and ldexp stay away from 0)."""
    return _RNG.uniform(0.5, 1.5, shape)


def _i(values):
    return np.array(values, np.int64)


def _signed(*shape):
    return _RNG.uniform(-1.5, 1.5, shape)


def _f(lib):
    return lib.nn.functional


# name -> (function of (lib, *inputs), input arrays, positions of inputs that may require
# grad, name of the backward node whose saved values are compared)
SPECS = {
    "lerp": (lambda L, a, b, w: L.lerp(a, b, w), [_r(3, 4), _r(3, 4), _r(3, 4)], (0, 1, 2),
             "LerpBackward1"),
    "lerp_bcast": (lambda L, a, b, w: L.lerp(a, b, w), [_r(3, 4), _r(4), _r(3, 1)], (0, 1, 2),
                   "LerpBackward1"),
    "lerp_": (lambda L, a, b, w: a.clone().lerp_(b, w), [_r(3, 4), _r(3, 4), _r(3, 4)],
              (0, 1, 2), "LerpBackward1"),
    "index_add": (lambda L, a, i, s: a.index_add(0, i, s), [_r(3, 4), _i([0, 2]), _r(2, 4)],
                  (0, 2), "IndexAddBackward0"),
    "index_add_alpha": (lambda L, a, i, s: a.index_add(1, i, s, alpha=2),
                        [_r(3, 4), _i([3, 0, 3]), _r(3, 3)], (0, 2), "IndexAddBackward0"),
    "index_add_": (lambda L, a, i, s: a.clone().index_add_(0, i, s),
                   [_r(3, 4), _i([0, 2]), _r(2, 4)], (0, 2), "IndexAddBackward0"),
    "scatter_add": (lambda L, a, i, s: a.scatter_add(0, i, s),
                    [_r(3, 4), _i([[0, 2, 1, 0], [1, 1, 0, 2]]), _r(2, 4)], (0, 2),
                    "ScatterAddBackward0"),
    "scatter_add_": (lambda L, a, i, s: a.clone().scatter_add_(1, i, s),
                     [_r(3, 4), _i([[0, 3], [1, 1], [2, 0]]), _r(3, 2)], (0, 2),
                     "ScatterAddBackward0"),
    # (correction given: PyTorch's node shows the default as 1 where a dim is given, a
    # choice of the public function's overload, not of the saved values compared here)
    "var_mean": (lambda L, a: L.var_mean(a, 1, correction=1), [_r(3, 4)], (0,),
                 "VarMeanBackward0"),
    "var_mean_all": (lambda L, a: L.var_mean(a, correction=0, keepdim=True), [_r(3, 4)], (0,),
                     "VarMeanBackward0"),
    "std_mean": (lambda L, a: L.std_mean(a, 1, correction=1), [_r(3, 4)], (0,),
                 "StdMeanBackward0"),
    "hypot": (lambda L, a, b: L.hypot(a, b), [_r(3, 4), _r(3, 4)], (0, 1), "HypotBackward0"),
    "hypot_bcast": (lambda L, a, b: L.hypot(a, b), [_r(3, 4), _r(4)], (0, 1),
                    "HypotBackward0"),
    "hypot_": (lambda L, a, b: a.clone().hypot_(b), [_r(3, 4), _r(3, 4)], (0, 1),
               "HypotBackward0"),
    "copysign": (lambda L, a, b: L.copysign(a, b), [_signed(3, 4), _signed(3, 4)], (0, 1),
                 "CopysignBackward0"),
    "copysign_bcast": (lambda L, a, b: L.copysign(a, b), [_signed(3, 4), _signed(4)], (0, 1),
                       "CopysignBackward0"),
    "copysign_": (lambda L, a, b: a.clone().copysign_(b), [_signed(3, 4), _signed(3, 4)],
                  (0, 1), "CopysignBackward0"),
    "ldexp": (lambda L, a, e: L.ldexp(a, e), [_r(3, 4), _r(3, 4)], (0, 1), "LdexpBackward0"),
    "ldexp_int": (lambda L, a, e: L.ldexp(a, e), [_r(3, 4), _i([[1, -2, 0, 3]] * 3)], (0,),
                  "LdexpBackward0"),
    "bilinear": (lambda L, a, b, w, bias: _f(L).bilinear(a, b, w, bias),
                 [_r(2, 3), _r(2, 4), _r(5, 3, 4), _r(5)], (0, 1, 2, 3),
                 "TrilinearBackward0"),
    "bilinear_3d": (lambda L, a, b, w: _f(L).bilinear(a, b, w),
                    [_r(2, 2, 3), _r(2, 2, 4), _r(5, 3, 4)], (0, 1, 2), "TrilinearBackward0"),
    # (no names compared: PyTorch's node also saves the mean and rstd, recomputed here)
    "layer_norm": (lambda L, x, w, b: _f(L).layer_norm(x, (4,), w, b),
                   [_r(2, 3, 4), _r(4), _r(4)], (0, 1, 2), None),
}


def _configs(spec):
    """Every non-empty set of the differentiable inputs, as one requires-grad flag per
    input."""
    _, arrays, diff, _ = spec
    out = []
    for flags in itertools.product((False, True), repeat=len(diff)):
        if any(flags):
            rg = [False] * len(arrays)
            for k, f in zip(diff, flags):
                rg[k] = f
            out.append(tuple(rg))
    return out


def _cases():
    for name, spec in SPECS.items():
        for rg in _configs(spec):
            label = "".join("g" if f else "-" for f in rg)
            for target in [None, *range(len(spec[1])), "out"]:
                yield pytest.param(name, rg, target, id=f"{name}-{label}-{target}")


def _outputs(lib, r):
    return [o for o in (r if isinstance(r, tuple) else (r,)) if o.requires_grad]


def _run(lib, name, rg, target):
    """Run the op, change `target` (an input's position, "out" or None) in place without
    recording it, then backward: ("ok", leaf gradients) or ("error", message head)."""
    fn, arrays, _, _ = SPECS[name]
    ts = [lib.tensor(a).requires_grad_(f) for a, f in zip(arrays, rg)]
    outs = _outputs(lib, fn(lib, *ts))
    with lib.no_grad():
        if target == "out":
            for o in outs:
                o.add_(1)
        elif target is not None:
            t = ts[target]
            # An index keeps its (valid) values: only its version moves.
            t.add_(1) if t.dtype.is_floating_point else t.copy_(t.clone())
    try:
        sum(o.sum() for o in outs).backward()
    except RuntimeError as e:
        return "error", str(e).split(":")[0], None
    return "ok", None, [t.grad.numpy() if f else None for t, f in zip(ts, rg)]


@pytest.mark.parametrize("name, rg, target", list(_cases()))
def test_change_in_place_after_the_op(name, rg, target):
    got = _run(fusegrad, name, rg, target)
    want = _run(torch, name, rg, target)
    assert got[:2] == want[:2]
    if want[0] == "ok":
        for g, w in zip(got[2], want[2]):
            if w is None:
                assert g is None
            else:
                np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def _node(lib, out, node_name):
    """The node called `node_name` in the graph of `out` (searched breadth first), or None
    (bilinear with only the bias requiring grad records no product)."""
    todo, seen = [out.grad_fn], set()
    while todo:
        n = todo.pop(0)
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if type(n).__name__ == node_name:
            return n
        todo.extend(f for f, _ in n.next_functions)
    return None


def _saved(lib, name, rg):
    """The node's `_saved_*` attributes: "tensor", None or the value's type name (None
    without such a node)."""
    fn, arrays, _, node_name = SPECS[name]
    ts = [lib.tensor(a).requires_grad_(f) for a, f in zip(arrays, rg)]
    node = _node(lib, _outputs(lib, fn(lib, *ts))[0], node_name)
    if node is None:
        return None
    out = {}
    for n in dir(node):
        if n.startswith("_saved_"):
            v = getattr(node, n)
            out[n] = "tensor" if isinstance(v, lib.Tensor) else (
                None if v is None else type(v).__name__)
    return out


@pytest.mark.parametrize("name, rg", [
    pytest.param(name, rg, id=f"{name}-{''.join('g' if f else '-' for f in rg)}")
    for name, spec in SPECS.items() if spec[3] for rg in _configs(spec)])
def test_saved_names(name, rg):
    assert _saved(fusegrad, name, rg) == _saved(torch, name, rg)


def test_hypot_gradient_at_zero_matches():
    """The saved result is the denominator: 0 / 0 where both operands are 0, as PyTorch."""
    def grads(lib):
        a = lib.tensor([0.0, 3.0], dtype=lib.float64, requires_grad=True)
        b = lib.tensor([0.0, 4.0], dtype=lib.float64)
        lib.hypot(a, b).sum().backward()
        return a.grad.numpy()

    np.testing.assert_array_equal(grads(fusegrad), grads(torch))


def test_bilinear_double_backward_with_one_input_requiring_grad():
    """A gradient built from the saved partners differentiates again (create_graph)."""
    def grads(lib):
        x1 = lib.tensor(_r(2, 3), dtype=lib.float64, requires_grad=True)
        x2 = lib.tensor(np.ones((2, 4)))
        w = lib.tensor(np.ones((5, 3, 4)))
        (g,) = lib.autograd.grad(_f(lib).bilinear(x1, x2, w).pow(2).sum(), x1,
                                 create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x1)
        return gg.numpy()

    np.testing.assert_allclose(grads(fusegrad), grads(torch), rtol=1e-12)


def test_layer_norm_saves_its_bias():
    """As PyTorch's NativeLayerNormBackward0: `_saved_bias` is the bias (None without one)."""
    for lib in (fusegrad, torch):
        x = lib.tensor(_r(2, 4), requires_grad=True)
        b = lib.tensor(_r(4))
        assert _f(lib).layer_norm(x, (4,), None, b).grad_fn._saved_bias is b
        assert _f(lib).layer_norm(x, (4,)).grad_fn._saved_bias is None
