"""What the file-backed data sets share: arguments, transforms and torchvision's repr."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from ..utils.data import Dataset


class FileDataset(Dataset):
    """A data set read from local files under `root`; subclasses give `_item(index)`."""

    def __init__(self, root: str | pathlib.Path, train: bool = True,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 download: bool = False) -> None:
        if download:
            raise RuntimeError(f"{type(self).__name__}: fusegrad does not download data sets; "
                               f"place the files under {self.expected_location(root)} and "
                               "pass download=False")
        self.root = pathlib.Path(root)
        self.train = train
        self.transform = transform
        self.target_transform = target_transform

    def expected_location(self, root: str | pathlib.Path) -> pathlib.Path:
        """The folder the files are read from (for messages)."""
        raise NotImplementedError

    def _item(self, index: int):
        raise NotImplementedError

    def __getitem__(self, index: int):
        image, target = self._item(index)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self) -> str:
        return "\n".join([f"Dataset {type(self).__name__}",
                          f"    Number of datapoints: {len(self)}",
                          f"    Root location: {self.root}",
                          f"    Split: {'Train' if self.train else 'Test'}"])
