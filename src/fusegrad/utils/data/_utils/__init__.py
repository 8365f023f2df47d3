"""Helpers of the DataLoader, at PyTorch's module paths: `collate` (batching samples and the
`default_collate_fn_map` registry), `fetch` (reading samples for a batch) and `worker`
(`get_worker_info`)."""

from . import collate, fetch, worker

__all__ = ["collate", "fetch", "worker"]
