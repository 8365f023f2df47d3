"""SparseAdam: Adam for sparse gradients (rows of an embedding touched in a step).

fusegrad has no sparse tensors, so every gradient it sees is dense, which SparseAdam
refuses as PyTorch does.
"""

from __future__ import annotations

from .._tensor import Tensor
from ._checks import check_betas
from .optimizer import Optimizer


class SparseAdam(Optimizer):
    """Adam over sparse gradients only; a dense gradient raises PyTorch's RuntimeError."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False) -> None:
        if isinstance(lr, Tensor):
            if lr.numel() != 1:
                raise ValueError("Tensor lr must be 1-element")
            lr = lr.item()
        # Both strictly positive here, unlike the other optimizers' checks.
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        check_betas(betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, maximize=maximize)
        super().__init__(params, defaults)
        # Each offender as [group index, index in the group], as PyTorch lists them.
        sparse, complex_ = [], []
        for i, group in enumerate(self.param_groups):
            for j, p in enumerate(group["params"]):
                if getattr(p, "is_sparse", False):
                    sparse.append([i, j])
                if p.is_complex():
                    complex_.append([i, j])
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense "
                             "parameter tensors")
        if complex_:
            raise ValueError(f"Complex params at indices {complex_}: SparseAdam does not "
                             "support complex parameters")

    def _update(self, p, grad, group, state) -> None:
        raise RuntimeError("SparseAdam does not support dense gradients, please consider "
                           "Adam instead")
