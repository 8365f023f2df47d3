"""What a DataLoader worker knows about itself: `WorkerInfo` and `get_worker_info` (the
worker processes themselves are run by `fusegrad.utils.data._worker`)."""

from .._worker import WorkerInfo, get_worker_info

__all__ = ["WorkerInfo", "get_worker_info"]
