"""gradcheck: compare autograd's Jacobians with central finite differences (float64)."""

from __future__ import annotations

import numpy as np


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical Jacobians differ."""


def _outputs(func, inputs):
    out = func(*inputs)
    return out if isinstance(out, (tuple, list)) else (out,)


def _numerical(func, inputs, k, eps):
    """d(outputs)/d(inputs[k]) by central differences, one column per input element.

    Grad mode stays as it is: `func` may itself differentiate (gradgradcheck's does)."""
    x = inputs[k]
    flat = x._data.reshape(-1)  # a view when x is contiguous; perturbations are in place
    if not np.shares_memory(flat, x._data):
        raise ValueError("gradcheck needs contiguous inputs")
    cols = []
    for i in range(flat.size):
        orig = flat[i].copy()
        flat[i] = orig + eps
        plus = [o._data.astype(np.float64).reshape(-1) for o in _outputs(func, inputs)]
        flat[i] = orig - eps
        minus = [o._data.astype(np.float64).reshape(-1) for o in _outputs(func, inputs)]
        flat[i] = orig
        cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    return cols


def _analytical(func, inputs, diff):
    from ._grad import grad as autograd_grad

    outs = _outputs(func, inputs)
    rows = []  # rows[j][e] = list over diff inputs of the gradient of output j, element e
    for o in outs:
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
        rows.append(per)
    return outs, rows


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
                "precision floating point or complex. ", UserWarning, stacklevel=2)
    if not check_backward_ad:
        outs, rows = _outputs(func, inputs), None
    else:
        outs, rows = _analytical(func, inputs, diff)
        if not any(isinstance(o, Tensor) and o.requires_grad for o in outs):
            # Nothing to compare with: the function must then not depend on its inputs.
            for k in diff:
                for column in _numerical(func, inputs, k, eps):
                    if any(np.any(c != 0) for c in column):
                        return _fail("Numerical gradient for function expected to be zero",
                                     raise_exception)
            return True
    for n, k in enumerate(diff):
        cols = _numerical(func, inputs, k, eps)
        forward = _forward_columns(func, inputs, k) if check_forward_ad else None
        for j, o in enumerate(outs):
            numerical = np.array([c[j] for c in cols]).reshape(inputs[k].numel(), o.numel())
            if rows is not None and o.requires_grad:  # (not: indices, statistics)
                analytical = np.array([r[n] for r in rows[j]]).T.reshape(numerical.shape) \
                    if rows[j] else np.zeros_like(numerical)
                if not np.allclose(analytical, numerical, rtol=rtol, atol=atol):
                    return _fail(_mismatch("", j, k, numerical, analytical, o),
                                 raise_exception)
            if forward is not None:
                analytical = np.array([c[j] for c in forward]).reshape(numerical.shape)
                if not np.allclose(analytical, numerical, rtol=rtol, atol=atol):
                    return _fail(_mismatch("computed with forward mode ", j, k, numerical,
                                           analytical, o), raise_exception)
    return True


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
        rng = np.random.default_rng(0)
        from .._creation import tensor

        grad_outputs = tuple(tensor(rng.standard_normal(o.shape), dtype=o.dtype,
                                    requires_grad=True) for o in outs)
    elif not isinstance(grad_outputs, (tuple, list)):
        grad_outputs = (grad_outputs,)

    def first(*args):
        xs = args[:len(inputs)]
        gos = args[len(inputs):]
        o = _outputs(func, xs)
        return autograd_grad(o, [x for x in xs if getattr(x, "requires_grad", False)], gos,
                             create_graph=True, allow_unused=True)

    return gradcheck(first, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     fast_mode=fast_mode, masked=masked)
