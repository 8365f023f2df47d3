"""Small `torch.func` utilities: `debug_unwrap` and `replace_all_batch_norm_modules_`."""

from __future__ import annotations


def debug_unwrap(tensor, *, recurse: bool = True):
    """The plain tensor behind a transform's wrapper. fusegrad's transforms hand `func` plain
    tensors (vmap runs it per example, the others on tape leaves), so this is `tensor`
    itself."""
    return tensor


def replace_all_batch_norm_modules_(root):
    """Make every batch-norm module in `root` stop tracking running statistics (in place),
    so that it normalises with batch statistics under vmap; returns `root`."""
    from ..nn.modules.batchnorm import _BatchNorm

    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
