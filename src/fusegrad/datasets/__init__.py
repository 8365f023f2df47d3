"""`fusegrad.datasets`: small real data sets stored inside fusegrad (nothing is downloaded).

`digits()` gives the 1,797 8x8 handwritten digits of the UCI ML hand-written digits data set
(CC BY 4.0), as scikit-learn ships them. The file `digits.npz` next to this module was made
once from scikit-learn's copy by `tools/make_digits.py`.

`MNIST`/`FashionMNIST` (IDX files) and `CIFAR10`/`CIFAR100` (the python batches) read the
files torchvision would download from a local folder, with torchvision's layout and fields.
"""

from __future__ import annotations

import pathlib

import numpy as np

from .._creation import from_numpy
from ..utils.data import TensorDataset
from .cifar import CIFAR10, CIFAR100, load_batch
from .mnist import MNIST, FashionMNIST, read_idx

__all__ = ["digits", "DIGITS_FILE", "MNIST", "FashionMNIST", "read_idx", "CIFAR10", "CIFAR100",
           "load_batch"]

DIGITS_FILE = pathlib.Path(__file__).resolve().parent / "digits.npz"


def _load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The stored arrays: uint8 images (1797, 8, 8) with values 0..16, uint8 labels (1797,)."""
    with np.load(DIGITS_FILE, allow_pickle=False) as data:
        return data["images"], data["labels"]


def digits(*, return_tensors: bool = False):
    """The 1,797 real 8x8 handwritten digits (classes 0..9), ready for a CNN.

    Images are float32 of shape (N, 1, 8, 8), the 0..16 gray levels scaled to [0, 1]; labels
    are int64 of shape (N,). By default this returns a `fusegrad.utils.data.TensorDataset`
    whose samples are `(image, label)` pairs (like a torchvision data set, so it goes straight
    into `random_split` and `DataLoader`; `dataset.tensors` holds the two full tensors). With
    `return_tensors=True` it returns the tuple `(images, labels)` instead.

    Data: UCI ML hand-written digits (E. Alpaydin, C. Kaynak), CC BY 4.0,
    https://archive.ics.uci.edu/dataset/80 (the copy scikit-learn ships).
    """
    images, labels = _load_digits_arrays()
    x = from_numpy((images.astype(np.float32) / np.float32(16.0))[:, None, :, :])
    y = from_numpy(labels.astype(np.int64))
    if return_tensors:
        return x, y
    return TensorDataset(x, y)
