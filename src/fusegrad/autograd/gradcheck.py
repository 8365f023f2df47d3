"""gradcheck: compare autograd's Jacobians with central finite differences (float64)."""

from __future__ import annotations

import numpy as np

from .. import _dtype


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical Jacobians differ."""


def _outputs(func, inputs):
    out = func(*inputs)
    return out if isinstance(out, (tuple, list)) else (out,)


def _difference(plus, minus, eps) -> np.ndarray:
    """(plus - minus) / (2 eps) in the outputs' own floating dtype, as PyTorch computes it
    (float32 outputs give float32 quotients), returned flat in float64."""
    if not np.issubdtype(plus.dtype, np.inexact):
        plus, minus = plus.astype(np.float64), minus.astype(np.float64)
    return ((plus - minus) / (2 * eps)).astype(np.float64).reshape(-1)


def _numerical(func, inputs, k, eps):
    """d(outputs)/d(inputs[k]) by central differences, one column per input element (in the
    input's logical order, whatever its strides).

    Grad mode stays as it is: `func` may itself differentiate (gradgradcheck's does)."""
    flat = inputs[k]._data.flat  # writes through to the tensor's memory
    cols = []
    for i in range(inputs[k]._data.size):
        orig = flat[i].copy()
        flat[i] = orig - eps
        minus = [o._data.copy() for o in _outputs(func, inputs)]
        flat[i] = orig + eps
        plus = [o._data.copy() for o in _outputs(func, inputs)]  # (a view of the input)
        flat[i] = orig
        cols.append([_difference(p, m, eps) for p, m in zip(plus, minus)])
    return cols


class _Rows(dict):
    """rows[j][e] = list over the differentiable inputs of the gradient of output j, element
    e; computed when first read, output by output, so that a backward failing for a later
    output does not hide a mismatch PyTorch reports for an earlier one."""

    def __init__(self, outs, inputs, diff, nondet_tol: float = 0.0):
        super().__init__()
        self.outs, self.inputs, self.diff = outs, inputs, diff
        self.nondet_tol = nondet_tol

    def __missing__(self, j: int) -> list:
        per = self._rows(j)
        if self.outs[j].requires_grad:
            _reentrant_check(per, self._rows(j), self.nondet_tol)
        self[j] = per
        return per

    def _rows(self, j: int) -> list:
        from ._grad import grad as autograd_grad

        o, inputs, diff = self.outs[j], self.inputs, self.diff
        per = []
        for e in range(o.numel()):
            if not o.requires_grad:
                per.append([np.zeros(inputs[k].numel()) for k in diff])
                continue
            seed = o.new_zeros(o.shape)
            seed._data.reshape(-1)[e] = 1
            gs = autograd_grad(o, [inputs[k] for k in diff], seed, retain_graph=True,
                               allow_unused=True)
            per.append([np.zeros(inputs[k].numel()) if g is None
                        else g._data.astype(np.float64).reshape(-1) for g, k in zip(gs, diff)])
        return per


def _analytical(func, inputs, diff, nondet_tol: float):
    outs = _outputs(func, inputs)
    return outs, _Rows(outs, inputs, diff, nondet_tol)


_NONDET_NOTE = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""


def _reentrant_check(first, second, nondet_tol: float) -> None:
    """PyTorch computes each backward twice: the results may differ by `nondet_tol`."""
    def flat(rows) -> np.ndarray:  # rows: arrays, or lists of arrays (one per input)
        parts = [np.ravel(p) for r in rows for p in (r if isinstance(r, list) else [r])]
        return np.concatenate(parts) if parts else np.zeros(0)

    a, b = flat(first), flat(second)
    if a.size and np.abs(a - b).max() > nondet_tol:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same input and "
            "grad_output multiple times gives different values, although analytical "
            f"gradient matches numerical gradient.The tolerance for nondeterminism was "
            f"{nondet_tol}." + _NONDET_NOTE)


def _forward_columns(func, inputs, k) -> list:
    """d(outputs)/d(inputs[k]) by forward-mode AD, one column per input element (a unit
    tangent each); zeros for an output without a tangent."""
    from . import forward_ad

    x = inputs[k]
    cols = []
    for i in range(x.numel()):
        with forward_ad.dual_level():
            tangent = x.detach().new_zeros(x.shape)
            tangent._data.reshape(-1)[i] = 1
            args = list(inputs)
            args[k] = forward_ad.make_dual(x, tangent)
            col = []
            for o in _outputs(func, tuple(args)):
                t = forward_ad.unpack_dual(o).tangent
                col.append(np.zeros(o.numel()) if t is None
                           else t._data.astype(np.float64).reshape(-1))
        cols.append(col)
    return cols


def _jacobian_tensor(values: np.ndarray, like):
    """`values` as a fusegrad tensor of `like`'s dtype (real part for a complex dtype), for
    the error message: PyTorch prints its Jacobians as tensors."""
    from .._creation import tensor

    dtype = like.dtype if not like.is_complex() else None
    return tensor(values, dtype=dtype)


def _fail(message: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(message)
    return False


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked=None) -> bool:
    """True if autograd's gradients of `func` at `inputs` match finite differences (every
    Jacobian entry; `fast_mode` checks the same entries). When no output requires grad, the
    finite differences must all be zero, as PyTorch requires."""
    try:
        return _gradcheck(func, inputs, eps=eps, atol=atol, rtol=rtol,
                          raise_exception=raise_exception, nondet_tol=nondet_tol,
                          check_undefined_grad=check_undefined_grad,
                          check_grad_dtypes=check_grad_dtypes,
                          check_batched_grad=check_batched_grad,
                          check_batched_forward_grad=check_batched_forward_grad,
                          check_forward_ad=check_forward_ad,
                          check_backward_ad=check_backward_ad, fast_mode=fast_mode,
                          masked=masked)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck(func, inputs, *, eps: float, atol: float, rtol: float, raise_exception: bool,
               nondet_tol: float, check_undefined_grad: bool, check_grad_dtypes: bool,
               check_batched_grad: bool, check_batched_forward_grad: bool,
               check_forward_ad: bool, check_backward_ad: bool, fast_mode: bool,
               masked) -> bool:
    from .._tensor import Tensor

    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [k for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of them have requires_grad=True.")
    for k in diff:
        if inputs[k].dtype.name not in ("float64", "complex128"):  # PyTorch's double types
            import warnings

            warnings.warn(
                f"Input #{k} requires gradient and is not a double precision floating point "
                "or complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. ", UserWarning, stacklevel=3)
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad "
                             "to be True")
    if not check_backward_ad:
        outs, rows = _outputs(func, inputs), None
    else:
        outs, rows = _analytical(func, inputs, diff, nondet_tol)
        if not any(isinstance(o, Tensor) and o.requires_grad for o in outs):
            # Nothing to compare with: the function must then not depend on its inputs.
            for k in diff:
                for column in _numerical(func, inputs, k, eps):
                    if any(np.any(c != 0) for c in column):
                        return _fail("Numerical gradient for function expected to be zero",
                                     raise_exception)
            return True
    if fast_mode:
        ok = _fast(func, inputs, diff, outs, rows, eps, atol, rtol, raise_exception,
                   check_backward_ad, check_forward_ad, nondet_tol)
    else:
        ok = _slow(func, inputs, diff, outs, rows, eps, atol, rtol, raise_exception,
                   check_forward_ad)
    if ok and check_backward_ad:
        ok = _multiplied_by_grad_output(outs, inputs, diff, raise_exception)
    if ok and check_undefined_grad and check_backward_ad:
        ok = _undefined_grads(func, inputs, diff, raise_exception)
    return ok


def _multiplied_by_grad_output(outs, inputs, diff, raise_exception: bool) -> bool:
    """PyTorch's check that zero output gradients give zero input gradients of the inputs'
    dtypes."""
    from ._grad import grad as autograd_grad

    outs = [o for o in outs if o.requires_grad]
    grads = autograd_grad(outs, [inputs[k] for k in diff], [o.new_zeros(o.shape) for o in outs],
                          allow_unused=True)
    for g, k in zip(grads, diff):
        if g is None:
            continue
        if np.any(g._data != 0):
            return _fail("backward not multiplied by grad_output", raise_exception)
        if g.dtype != inputs[k].dtype:
            return _fail("grad is incorrect type", raise_exception)
    return True


def _slow(func, inputs, diff, outs, rows, eps, atol, rtol, raise_exception,
          check_forward_ad) -> bool:
    """Every Jacobian entry, compared by np.allclose."""
    # PyTorch numbers the outputs among those that require grad and the inputs among those
    # that require grad; it checks every backward Jacobian (output by output) before any
    # forward-mode one.
    numerical = {k: _numerical(func, inputs, k, eps) for k in diff}
    grad_outs = [j for j, o in enumerate(outs) if o.requires_grad]

    def matrix(k, j):
        cols = numerical[k]
        return np.array([c[j] for c in cols]).reshape(inputs[k].numel(), outs[j].numel())

    if rows is not None:
        for i, j in enumerate(grad_outs):
            for n, k in enumerate(diff):
                num = matrix(k, j)
                analytical = np.array([r[n] for r in rows[j]]).T.reshape(num.shape) \
                    if rows[j] else np.zeros_like(num)
                if not np.allclose(analytical, num, rtol=rtol, atol=atol):
                    return _fail(_mismatch("", i, n, num, analytical, outs[j]),
                                 raise_exception)
    if check_forward_ad:
        for n, k in enumerate(diff):
            forward = _forward_columns(func, inputs, k)
            for i, j in enumerate(grad_outs):
                num = matrix(k, j)
                analytical = np.array([c[j] for c in forward]).reshape(num.shape)
                if not np.allclose(analytical, num, rtol=rtol, atol=atol):
                    return _fail(_mismatch("computed with forward mode ", i, n, num,
                                           analytical, outs[j]), raise_exception)
    return True


class _UndefinedGrad:
    """Built on first use: a Function that is the identity forward and sends back an
    undefined (None) gradient, as PyTorch's UndefinedGrad node does."""

    fn = None

    @classmethod
    def apply(cls, x):
        if cls.fn is None:
            from .function import BackwardCFunction, Function

            class UndefinedGrad(Function):
                @staticmethod
                def forward(ctx, t):
                    # A custom Function's backward gets None; built-in nodes get the zeros
                    # the engine would fill in (their derivatives here do not all take None:
                    # linalg.qr's with no gradient at all).
                    ctx.undefined = isinstance(t.grad_fn, BackwardCFunction)
                    return t.view_as(t)

                @staticmethod
                def backward(ctx, g):
                    return None if ctx.undefined else g.new_zeros(g.shape)

            cls.fn = UndefinedGrad
        return cls.fn.apply(x)


def _undefined_grads(func, inputs, diff, raise_exception: bool) -> bool:
    """PyTorch's check that backward copes with undefined output gradients: all of them at
    once, then (with several outputs) one at a time; the input gradients must then be
    None or zero."""
    import warnings

    from .._tensor import Tensor
    from ._grad import grad as autograd_grad

    def differentiable():
        return [o for o in _outputs(func, inputs) if isinstance(o, Tensor) and o.requires_grad]

    checks = [[_UndefinedGrad.apply(o) for o in differentiable()]]
    if len(checks[0]) > 1:
        for idx in range(len(checks[0])):
            checks.append([_UndefinedGrad.apply(o) if i == idx else o
                           for i, o in enumerate(differentiable())])

    def warn():
        warnings.warn("Backwards compatibility: New undefined gradient support checking "
                      "feature is enabled by default, but it may break existing callers of "
                      "this function. If this is true for you, you can call this function "
                      'with "check_undefined_grad=False" to disable the feature',
                      UserWarning, stacklevel=4)

    notes = 'Please look at "Notes about undefined output gradients" in ' \
        '"tools/autograd/derivatives.yaml"'
    for outs in checks:
        try:
            grads = autograd_grad(outs, [inputs[k] for k in diff],
                                  [o.new_zeros(o.shape) for o in outs], allow_unused=True)
        except RuntimeError as e:
            warn()
            if not raise_exception:
                return False
            raise GradcheckError("Expected backward function to handle undefined output "
                                 "grads. " + notes) from e
        if any(g is not None and bool(np.any(g._data != 0)) for g in grads):
            warn()
            return _fail("Expected all input grads to be undefined or zero when all output "
                         "grads are undefined or zero. " + notes, raise_exception)
    return True


def _unit_vector(like, generator) -> np.ndarray:
    """PyTorch's fast-mode probe for `like`: uniform [0, 1) float32 numbers drawn from
    `generator`, cast to `like`'s dtype and scaled to norm 1 (flat)."""
    from .._creation import rand

    v = rand(like.numel(), generator=generator)._data.astype(like._data.dtype)
    return v / np.sqrt((v.astype(np.float64) ** 2).sum()).astype(v.dtype)


def _fast(func, inputs, diff, outs, rows, eps, atol, rtol, raise_exception, backward,
          forward, nondet_tol: float = 0.0) -> bool:
    """PyTorch's fast mode: compare v^T J u computed by finite differences along u with the
    same number from autograd, for random unit vectors u (per input) and v (per output)."""
    from .._random import Generator

    grad_outs = [j for j, o in enumerate(outs) if o.requires_grad]
    gen = Generator()  # PyTorch draws from a fresh generator (its default seed)
    us = [_unit_vector(inputs[k], gen) for k in diff]
    vs = [_unit_vector(outs[j], gen) for j in grad_outs]

    def ju(n, k, j) -> np.ndarray:  # J u by central differences along eps * u
        data = inputs[k]._data
        orig = data.copy()
        step = (us[n] * eps).astype(data.dtype).reshape(data.shape)
        data[...] = orig - step
        minus = _outputs(func, inputs)[j]._data.copy()
        data[...] = orig + step
        plus = _outputs(func, inputs)[j]._data.copy()
        data[...] = orig
        return _difference(plus, minus, eps)

    def vj(k, j, v) -> np.ndarray:  # v^T J by autograd, v as the output's gradient
        from .._creation import tensor
        from ._grad import grad as autograd_grad

        seed = tensor(v.reshape(outs[j].shape), dtype=outs[j].dtype)
        (g,) = autograd_grad(outs[j], inputs[k], seed, retain_graph=True, allow_unused=True)
        return np.zeros(inputs[k].numel()) if g is None \
            else g._data.astype(np.float64).reshape(-1)

    def fail(mode, i, n, k, j, num: str, ana: str) -> bool:
        slow_num = np.array([c[j] for c in _numerical(func, inputs, k, eps)]).reshape(
            inputs[k].numel(), outs[j].numel())
        if mode:
            slow_ana = np.array([c[j] for c in _forward_columns(func, inputs, k)]).reshape(
                slow_num.shape)
        else:
            slow_ana = np.array([r[n] for r in rows[j]]).T.reshape(slow_num.shape)
        like = outs[j]
        max_diff = float(np.abs(slow_num - slow_ana).max())
        msg = (f"Jacobian {mode}mismatch for output {i:d} with respect to input {n:d},\n"
               f"numerical:{num}\nanalytical:{ana}\n"
               "\nThe above quantities relating the numerical and analytical jacobians are "
               "computed \nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876 "
               "for more background \nabout fast mode. Below, we recompute numerical and "
               "analytical jacobians in slow mode:\n\n"
               f"Numerical:\n {_jacobian_tensor(slow_num, like)}\n"
               f"Analytical:\n{_jacobian_tensor(slow_ana, like)}\n\n"
               f"The max per-element difference (slow mode) is: {max_diff!r}.\n")
        if np.allclose(slow_ana, slow_num, rtol=rtol, atol=atol):
            msg += _FAST_FAIL_SLOW_OK
        return _fail(msg, raise_exception)

    if backward and rows is not None:
        nums = {(n, i): float((vs[i].astype(np.float64) * ju(n, k, j)).sum())
                for n, k in enumerate(diff) for i, j in enumerate(grad_outs)}
        # every v^T J u before any comparison, output by output, as PyTorch does
        anas = {}
        for i, j in enumerate(grad_outs):
            once = [vj(k, j, vs[i]) for k in diff]
            _reentrant_check(once, [vj(k, j, vs[i]) for k in diff], nondet_tol)
            for n in range(len(diff)):
                anas[n, i] = float((once[n] * us[n].astype(np.float64)).sum())
        for n, k in enumerate(diff):
            for i, j in enumerate(grad_outs):
                num, ana = nums[n, i], anas[n, i]
                adj = atol * float(us[n].sum()) * float(vs[i].sum())
                if abs(ana - num) > adj + rtol * abs(num):
                    return fail("", i, n, k, j, repr(num), repr(ana))
    if forward:
        for n, k in enumerate(diff):
            cols = _forward_columns(func, inputs, k)
            for i, j in enumerate(grad_outs):
                num = ju(n, k, j)
                ana = np.array([c[j] for c in cols]).T @ us[n].astype(np.float64)
                adj = atol * float(us[n].sum())
                if not np.allclose(ana, num, rtol=rtol, atol=adj):
                    return fail("computed with forward mode ", i, n, k, j,
                                str(_jacobian_tensor(num, outs[j])),
                                str(_jacobian_tensor(ana, outs[j])))
    return True


_FAST_FAIL_SLOW_OK = (
    "Fast gradcheck failed but element-wise differences are small. This means that the\n"
    "test might've passed in slow_mode!\n\n"
    "If you are adding a new operator, please file an issue and then use one of the\n"
    "workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck:\n\n"
    "If the test\n"
    "- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck\n"
    "  with `fast_mode=False` as a keyword argument.\n"
    "- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test\n"
    "  to have `gradcheck_fast_mode=False`\n"
    "- is a Module test (e.g., in common_nn.py), then modify the corresponding\n"
    "  module_test entry to have `gradcheck_fast_mode=False`")


def _mismatch(mode: str, j: int, k: int, numerical, analytical, like) -> str:
    return (f"Jacobian {mode}mismatch for output {j} with respect to input {k},\n"
            f"numerical:{_jacobian_tensor(numerical, like)}\n"
            f"analytical:{_jacobian_tensor(analytical, like)}\n")


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False,
                  masked: bool = False) -> bool:
    """gradcheck of the gradient of `func` (second derivatives), with random grad_outputs.

    `check_fwd_over_rev` asks for forward-over-reverse second derivatives: they are the
    same Jacobian of the gradient, which the reverse-over-reverse check compares."""
    from ._grad import grad as autograd_grad

    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if not (check_rev_over_rev or check_fwd_over_rev):
        return True
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        # PyTorch draws them from the global generator, uniform in [-1, 1), one per output
        # that requires grad
        from ..testing import make_tensor

        grad_outputs = tuple(
            make_tensor(o.shape, dtype=o.dtype if o.is_floating_point() or o.is_complex()
                        else _dtype.float64, device=o.device, low=-1, high=1,
                        requires_grad=True)
            for o in outs if o.requires_grad)
    elif not isinstance(grad_outputs, (tuple, list)):
        grad_outputs = (grad_outputs,)

    def first(*args):
        xs = args[:len(inputs)]
        gos = args[len(inputs):]
        o = [t for t in _outputs(func, xs) if t.requires_grad]  # as PyTorch: the differentiable
        return autograd_grad(o, [x for x in xs if getattr(x, "requires_grad", False)], gos,
                             create_graph=True, allow_unused=True)

    return gradcheck(first, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     fast_mode=fast_mode, masked=masked)
