"""L-BFGS with an optional strong-Wolfe line search (PyTorch's algorithm, on NumPy vectors).

All parameters are treated as one flat vector. The curvature history (`old_dirs`, `old_stps`,
`ro`, `H_diag`) and the last direction and step live in the state of the first parameter,
under PyTorch's keys, so state_dicts load both ways.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._tensor import Tensor
from ._checks import check_lr
from .optimizer import Optimizer, _view_as_real, number_lr


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to `bounds`
    (default: the interval between the points); their midpoint when the cubic has none."""
    if bounds is not None:
        lo, hi = bounds
    else:
        lo, hi = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(pos, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Find a step t along d meeting the strong Wolfe conditions: bracket, then zoom with
    cubic interpolation. Returns (loss, flat grad, t, evaluations)."""
    d_norm = float(np.abs(d).max())
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    evals = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        # Extrapolate: the next trial lies between 1.01 t and 10 t.
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f = [0, t], [f, f_new]
        bracket_g, bracket_gtd = [g, g_new], [gtd, gtd_new]

    insuf_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        # Keep the trial away from the bracket's ends unless progress stalls twice.
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new.copy(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new.copy(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


def _axpy(x: np.ndarray, alpha, y: np.ndarray) -> np.ndarray:
    """x + alpha * y as PyTorch's `add(x, y, alpha=alpha)` rounds it: once, for float32 (the
    product is exact in float64, where the sum rounds before float32, about once in 2^29
    another result); in the arrays' dtype otherwise."""
    if x.dtype == np.float32 and y.dtype == np.float32:
        return (x.astype(np.float64) + float(alpha) * y.astype(np.float64)).astype(np.float32)
    return (x + alpha * y).astype(x.dtype, copy=False)


def _arr(value):
    """A state entry as NumPy (tensors; a 0-d one as a scalar of its dtype) or a float
    (numbers)."""
    if isinstance(value, Tensor):
        return value._data.copy() if value._data.ndim else value._data[()]
    return value


def _loss_value(loss) -> float:
    """The closure's loss as a float. PyTorch reads it under no_grad, where no warning about
    converting a tensor that requires grad is given; the detached tensor gives none here."""
    return float(loss.detach() if isinstance(loss, Tensor) else loss)


def _real(a: np.ndarray) -> np.ndarray:
    """A complex array as real (real, imaginary) pairs, sharing its memory; others as is."""
    return _view_as_real(a) if a.dtype.kind == "c" else a


def _tensor(value):
    if isinstance(value, np.ndarray):
        return Tensor._make(value.copy())
    return value


class LBFGS(Optimizer):
    """Limited-memory BFGS over all parameters as one vector; `step` needs a closure that
    recomputes the loss (and its gradients)."""

    def __init__(self, params, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn: str | None = None) -> None:
        lr = check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self) -> np.ndarray:
        """All gradients as one real vector (zeros for a parameter without one), a complex
        parameter's as its real and imaginary parts, as PyTorch flattens them."""
        parts = []
        for p in self._params:
            data = _real(p._data)
            g = p.grad
            if g is not None and g._data is None:  # sparse: densified, as PyTorch's LBFGS does
                g = g.to_dense()
            parts.append(np.zeros(data.size, data.dtype) if g is None
                         else _real(g._data).reshape(-1))
        return np.concatenate(parts)

    def _add_grad(self, step: float, update: np.ndarray) -> None:
        offset = 0
        for p in self._params:
            data = _real(p._data)  # a view: a complex parameter moves in both parts
            n = data.size
            data[...] = _axpy(data, step, update[offset:offset + n].reshape(data.shape))
            p._vc[0] += 1
            offset += n

    def _set_params(self, values: list) -> None:
        for p, v in zip(self._params, values):
            p._data[...] = v
            p._vc[0] += 1

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = _loss_value(closure())
        flat_grad = self._flat_grad().copy()
        self._set_params(x)
        return loss, flat_grad

    def step(self, closure: Callable):
        """Run up to `max_iter` iterations; returns the loss of the first closure call."""
        from ..autograd import enable_grad

        def evaluate():
            with enable_grad():
                return closure()

        group = self.param_groups[0]
        lr, max_iter, max_eval = number_lr(group), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = evaluate()
        loss = _loss_value(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad().copy()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return orig_loss
        one = flat_grad.dtype.type(1)

        d, t = _arr(state.get("d")), _arr(state.get("t"))
        old_dirs = [_arr(v) for v in state.get("old_dirs") or []]
        old_stps = [_arr(v) for v in state.get("old_stps") or []]
        ro = [_arr(v) for v in state.get("ro") or []]
        H_diag = _arr(state.get("H_diag"))
        prev_flat_grad, prev_loss = _arr(state.get("prev_flat_grad")), state.get("prev_loss")
        al = [_arr(v) for v in state.get("al") or []]

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                # The curvature scalars stay in the parameters' dtype, as PyTorch's 0-d
                # tensors do (in double they round otherwise, and the iterates drift).
                ys = y @ s
                # Only pairs with positive curvature keep the inverse Hessian positive.
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(one / ys)
                    H_diag = ys / (y @ y)
                num_old = len(old_dirs)
                if "al" not in state:
                    # Entered now (the final list is stored at the end) so the state's keys
                    # come in PyTorch's order.
                    state["al"] = [None] * history_size
                if len(al) < history_size:
                    al = al + [None] * (history_size - len(al))
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = (old_stps[i] @ q) * ro[i]
                    q = _axpy(q, -al[i], old_dirs[i])
                r = q * H_diag
                for i in range(num_old):
                    be_i = (old_dirs[i] @ r) * ro[i]
                    r = _axpy(r, al[i] - be_i, old_stps[i])
                d = r
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                # (a 0-d tensor in PyTorch where the gradient is large: its dtype's rounding)
                t = min(1.0, one / np.abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = [p._data.copy() for p in self._params]

                def obj_func(x, t, d):
                    return self._directional_evaluate(evaluate, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(obj_func, x_init, t, d,
                                                                  loss, flat_grad, gtd)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = _loss_value(evaluate())
                    flat_grad = self._flat_grad().copy()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"] = _tensor(d)
        state["t"] = Tensor._make(np.array(t)) if isinstance(t, np.generic) else t
        state["old_dirs"] = [_tensor(v) for v in old_dirs]
        state["old_stps"] = [_tensor(v) for v in old_stps]
        state["ro"] = [Tensor._make(np.array(v, d.dtype)) for v in ro]
        state["H_diag"] = H_diag if isinstance(H_diag, int) else Tensor._make(
            np.array(H_diag, d.dtype))
        state["prev_flat_grad"] = _tensor(prev_flat_grad)
        state["prev_loss"] = prev_loss
        if al:
            state["al"] = [None if v is None else Tensor._make(np.array(v, d.dtype))
                           for v in al]
        return orig_loss
