"""`fusegrad.utils.tensorboard`: importable only where the tensorboard package is.

As in PyTorch, importing this module without tensorboard installed raises the
ModuleNotFoundError of `import tensorboard`, which programs catch to run without logging.
fusegrad has no event-file writer of its own, so with tensorboard installed the import raises
an ImportError that says so.
"""

import tensorboard  # noqa: F401  (raises ModuleNotFoundError when absent, as PyTorch does)

raise ImportError("fusegrad.utils.tensorboard has no SummaryWriter; log with the tensorboard "
                  "package directly")
