"""`fusegrad.nn.parallel`: `DataParallel` and `DistributedDataParallel`."""

from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
