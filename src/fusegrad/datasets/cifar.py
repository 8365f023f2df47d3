"""CIFAR-10 and CIFAR-100 read from the local "python version" batches.

The batches are pickles of dicts holding a uint8 array and label lists. Unpickling an
arbitrary file can run code, so they are read through an unpickler that resolves only the
globals a NumPy array needs; anything else in the file is refused before it is called.
"""

from __future__ import annotations

import pathlib
import pickle
from collections.abc import Callable

import numpy as np

from .._creation import from_numpy
from ._base import FileDataset

__all__ = ["load_batch", "CIFAR10", "CIFAR100"]

_RECONSTRUCT = np.zeros(0).__reduce__()[0]  # NumPy's array rebuilder, wherever it lives
_SCALAR = np.float64(0).__reduce__()[0]


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """What protocol-2 pickles written by Python 3 call to rebuild `bytes` objects."""
    if encoding.replace("-", "").lower() not in ("latin1", "latin_1", "iso88591"):
        raise pickle.UnpicklingError(f"refusing to decode bytes with codec {encoding!r}")
    return text.encode("latin1")


_ALLOWED = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy.core.multiarray", "scalar"): _SCALAR,
    ("numpy._core.multiarray", "scalar"): _SCALAR,
    ("_codecs", "encode"): _latin1_encode,
}


class _ArrayUnpickler(pickle.Unpickler):
    """Resolves only NumPy's array/dtype rebuilders: containers, numbers, strings and arrays
    load; any other global (a function to call, a class to build) is refused."""

    def find_class(self, module: str, name: str):
        found = _ALLOWED.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(
                f"refusing the global {module}.{name}: a CIFAR batch holds only arrays, "
                "lists, numbers and strings")
        return found


def _text_keys(value):
    """Python 2 pickles come back with bytes keys and strings: make keys `str`."""
    if isinstance(value, dict):
        return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in value.items()}
    return value


def load_batch(path: str | pathlib.Path) -> dict:
    """Load one CIFAR batch file safely into a dict with `str` keys (`data`, `labels`, ...).

    Object arrays are refused (they are how a pickle would smuggle arbitrary objects in).
    """
    path = pathlib.Path(path)
    with open(path, "rb") as f:
        try:
            batch = _ArrayUnpickler(f, encoding="bytes").load()
        except pickle.UnpicklingError as e:
            raise pickle.UnpicklingError(f"{path}: {e}") from None
    batch = _text_keys(batch)
    if not isinstance(batch, dict):
        raise ValueError(f"{path}: a CIFAR batch is a dict, found {type(batch).__name__}")
    for key, value in batch.items():
        if isinstance(value, np.ndarray) and value.dtype.hasobject:
            raise ValueError(f"{path}: entry {key!r} is an object array; refused")
    return batch


class CIFAR10(FileDataset):
    """CIFAR-10 from `root/cifar-10-batches-py`, shaped as torchvision's data set.

    `data` is a uint8 NumPy array (N, 32, 32, 3) and `targets` a list of ints, as torchvision
    keeps them. An item is `(image, target)`: without a `transform` the image is a float32
    tensor (3, 32, 32) scaled to [0, 1] (what torchvision's `ToTensor` gives).
    """

    base_folder = "cifar-10-batches-py"
    train_list = [f"data_batch_{i}" for i in range(1, 6)]
    test_list = ["test_batch"]
    meta = ("batches.meta", "label_names")
    labels_key = "labels"

    def __init__(self, root: str | pathlib.Path, train: bool = True,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 download: bool = False) -> None:
        super().__init__(root, train, transform, target_transform, download)
        folder = self.root / self.base_folder
        names = self.train_list if train else self.test_list
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise RuntimeError(f"Dataset not found or corrupted: {folder} lacks "
                               f"{', '.join(missing)}")
        data, targets = [], []
        for name in names:
            batch = load_batch(folder / name)
            images = np.asarray(batch["data"], dtype=np.uint8)
            labels = batch.get(self.labels_key, batch.get("fine_labels"))
            if images.ndim != 2 or images.shape[1] != 3 * 32 * 32 or labels is None \
                    or len(labels) != len(images):
                raise ValueError(f"{folder / name}: expected data of shape (N, 3072) and N "
                                 f"{self.labels_key}, found {images.shape}")
            data.append(images.reshape(-1, 3, 32, 32))
            targets.extend(int(t) for t in labels)
        self.data = np.concatenate(data).transpose(0, 2, 3, 1).copy()  # HWC, as torchvision
        self.targets = targets
        self.classes = self._classes(folder)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def _classes(self, folder: pathlib.Path) -> list[str]:
        """Class names from the meta file when present."""
        path = folder / self.meta[0]
        if not path.is_file():
            return []
        names = load_batch(path).get(self.meta[1], [])
        return [n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in names]

    def __len__(self) -> int:
        return len(self.data)

    def expected_location(self, root: str | pathlib.Path) -> pathlib.Path:
        """The extracted batches' folder: `root/cifar-10-batches-py`."""
        return pathlib.Path(root) / self.base_folder

    def _item(self, index: int):
        image = self.data[index].transpose(2, 0, 1).astype(np.float32) / np.float32(255)
        return from_numpy(image), self.targets[index]


class CIFAR100(CIFAR10):
    """CIFAR-100 from `root/cifar-100-python` (fine labels), as torchvision's data set."""

    base_folder = "cifar-100-python"
    train_list = ["train"]
    test_list = ["test"]
    meta = ("meta", "fine_label_names")
    labels_key = "fine_labels"
