"""MNIST-format data sets read from local IDX files (MNIST, Fashion-MNIST).

The IDX format (LeCun's) is a big-endian header, two zero bytes, a type code, the number of
dimensions and one 32-bit size per dimension, followed by the values. The readers take the
files as torchvision lays them out (`root/MNIST/raw/train-images-idx3-ubyte`, optionally
gzipped); nothing is downloaded.
"""

from __future__ import annotations

import gzip
import pathlib
from collections.abc import Callable

import numpy as np

from .._creation import from_numpy
from ._base import FileDataset

__all__ = ["read_idx", "MNIST", "FashionMNIST"]

# IDX type code -> big-endian NumPy dtype.
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | pathlib.Path) -> np.ndarray:
    """Read one IDX file (plain or `.gz`) into a NumPy array of its shape and type.

    Raises ValueError naming the file when the header is not IDX or the size does not match
    the header.
    """
    path = pathlib.Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise ValueError(f"{path} is not an IDX file (bad magic number {raw[:4].hex()})")
    dtype = np.dtype(_IDX_TYPES[raw[2]])
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: IDX header is truncated")
    shape = tuple(int(n) for n in np.frombuffer(raw, ">u4", ndim, 4))
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(f"{path}: IDX header promises {expected} bytes of data for shape "
                         f"{shape}, the file holds {len(raw) - header}")
    return np.frombuffer(raw, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


class MNIST(FileDataset):
    """MNIST from local IDX files, shaped as torchvision's data set.

    `root` is the folder holding `MNIST/raw/` (or the raw files themselves). `data` is the
    uint8 tensor (N, 28, 28) and `targets` the int64 labels, as torchvision keeps them. An item
    is `(image, target)`: without a `transform` the image is float32 (1, 28, 28) scaled to
    [0, 1] (what torchvision's `ToTensor` would give, since fusegrad has no PIL images).
    """

    resources = {True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                 False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five",
               "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root: str | pathlib.Path, train: bool = True,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 download: bool = False) -> None:
        super().__init__(root, train, transform, target_transform, download)
        images_name, labels_name = self.resources[bool(train)]
        images = read_idx(self._find(images_name))
        labels = read_idx(self._find(labels_name))
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"{type(self).__name__}: images of shape {images.shape} do not "
                             f"pair with labels of shape {labels.shape}")
        self.data = from_numpy(np.ascontiguousarray(images, dtype=np.uint8))
        self.targets = from_numpy(labels.astype(np.int64))

    def expected_location(self, root: str | pathlib.Path) -> pathlib.Path:
        """Where torchvision keeps the raw files: `root/<ClassName>/raw`."""
        return pathlib.Path(root) / type(self).__name__ / "raw"

    @property
    def raw_folder(self) -> pathlib.Path:
        """The raw-file folder under this data set's root."""
        return self.expected_location(self.root)

    def _find(self, name: str) -> pathlib.Path:
        """The file `name` (or `name.gz`) in the raw folder, the class folder or root."""
        folders = (self.raw_folder, self.raw_folder.parent, self.root)
        for folder in folders:
            for candidate in (folder / name, folder / (name + ".gz")):
                if candidate.is_file():
                    return candidate
        raise RuntimeError(f"Dataset not found: {name} is in none of "
                           f"{', '.join(str(f) for f in folders)}")

    def __len__(self) -> int:
        return len(self.targets)

    def _item(self, index: int):
        image = self.data.numpy()[index][None].astype(np.float32) / np.float32(255)
        return from_numpy(image), int(self.targets.numpy()[index])


class FashionMNIST(MNIST):
    """Fashion-MNIST (Zalando) from local IDX files: same format and layout as `MNIST`."""

    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]
