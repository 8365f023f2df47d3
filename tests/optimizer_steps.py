"""Stepping an optimizer of torch's and fusegrad's over the same parameters and gradients, and
comparing what each step left: the parameters, the optimizer's state and the learning rates."""

from __future__ import annotations

import numpy as np


class SteppedParameters:
    """Parameters of `shapes` drawn from a seed, gradients drawn for each step, the record of
    the steps taken and its comparison at `param_tol` and `state_tol` ((rtol, atol) each)."""

    def __init__(self, shapes: list, param_tol: tuple, state_tol: tuple):
        self.shapes, self.param_tol, self.state_tol = shapes, param_tol, state_tol

    def params(self, T, seed: int = 0) -> list:
        """Parameters of the library `T` (torch or fusegrad), the same values in either."""
        rng = np.random.default_rng(seed)
        return [T.nn.Parameter(T.tensor(rng.standard_normal(s).astype(np.float32)))
                for s in self.shapes]

    def grads(self, step: int) -> list:
        """The gradients (arrays) of step `step`."""
        rng = np.random.default_rng(100 + step)
        return [rng.standard_normal(s).astype(np.float32) for s in self.shapes]

    def steps(self, T, params: list, opt, steps: int, start: int = 0, sched=None) -> list:
        """`steps` steps of `opt` from step `start` (and of `sched` after each): after each,
        the parameters, each parameter's state and the groups' learning rates."""
        seen = []
        for i in range(start, start + steps):
            for p, g in zip(params, self.grads(i)):
                p.grad = T.tensor(g)
            opt.step()
            if sched is not None:
                sched.step()
            seen.append(([p.detach().numpy().copy() for p in params],
                         [{k: v.numpy().copy() for k, v in opt.state[p].items()}
                          for p in params],
                         [float(g["lr"]) for g in opt.param_groups]))
        return seen

    def assert_same(self, got: list, want: list) -> None:
        """`got` (fusegrad's steps) are `want` (torch's): the same learning rates, parameters
        and state keys, shapes, dtypes and values."""
        for (gp, gs, glr), (wp, ws, wlr) in zip(got, want, strict=True):
            assert glr == wlr
            for g, w in zip(gp, wp):
                np.testing.assert_allclose(g, w, *self.param_tol)
            for g, w in zip(gs, ws):
                assert sorted(g) == sorted(w)
                for key in w:
                    assert g[key].shape == w[key].shape and g[key].dtype == w[key].dtype, key
                    np.testing.assert_allclose(g[key], w[key], *self.state_tol)
