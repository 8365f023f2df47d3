"""`make_fx` at PyTorch's spelling (torch.fx.experimental.proxy_tensor)."""

from ...compiler.aot.make_fx import make_fx

__all__ = ["make_fx"]
