"""AdamW: Adam with decoupled weight decay."""

from __future__ import annotations

from .adam import Adam


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2)."""

    _SETSTATE_DEFAULTS = (("amsgrad", False), ("maximize", False), ("foreach", None),
                        ("capturable", False), ("differentiable", False),
                        ("decoupled_weight_decay", True), ("fused", None))

    # Traced under compile as Adam's (its own class must name them: a subclass may not).
    _TRACED_OPTIONS = Adam._TRACED_OPTIONS

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach=None, capturable: bool = False,
                 differentiable: bool = False, fused=None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
