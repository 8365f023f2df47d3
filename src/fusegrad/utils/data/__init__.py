"""`fusegrad.utils.data`: datasets, samplers and the DataLoader."""

from . import _utils, dataloader, dataset, distributed, sampler
from ._worker import WorkerInfo, get_worker_info
from .dataloader import DataLoader, _DatasetKind, default_collate, default_convert
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .distributed import DistributedSampler
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = ["DataLoader", "default_collate", "default_convert", "ChainDataset", "ConcatDataset",
           "Dataset", "StackDataset",
           "IterableDataset", "Subset", "TensorDataset", "random_split", "BatchSampler",
           "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "WorkerInfo", "get_worker_info", "DistributedSampler"]
