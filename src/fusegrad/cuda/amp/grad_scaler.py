"""`fusegrad.cuda.amp.GradScaler`: `fusegrad.amp.GradScaler("cuda", ...)` under its deprecated
name (disabled in this build, which has no CUDA)."""

from __future__ import annotations

from ...amp._deprecated import grad_scaler_for

__all__ = ["GradScaler"]


GradScaler = grad_scaler_for("cuda", __name__)
