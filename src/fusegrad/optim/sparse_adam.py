"""SparseAdam: Adam for sparse gradients (rows of an embedding touched in a step).

fusegrad has no sparse tensors, so every gradient it sees is dense, which SparseAdam
refuses as PyTorch does.
"""

from __future__ import annotations

from ._checks import check_betas, check_eps, check_lr
from .optimizer import Optimizer


class SparseAdam(Optimizer):
    """Adam over sparse gradients only; a dense gradient raises PyTorch's RuntimeError."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False) -> None:
        lr = check_lr(lr)
        check_eps(eps)
        check_betas(betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, maximize=maximize)
        super().__init__(params, defaults)
        sparse = [i for g in self.param_groups for i, p in enumerate(g["params"])
                  if getattr(p, "is_sparse", False)]
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense "
                             "parameter tensors")

    def _update(self, p, grad, group, state) -> None:
        raise RuntimeError("SparseAdam does not support dense gradients, please consider "
                           "Adam instead")
