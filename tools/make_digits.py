"""Regenerate `src/fusegrad/datasets/digits.npz` from scikit-learn's copy of the digits.

The 1,797 8x8 handwritten digits are the UCI ML hand-written digits data set
(https://archive.ics.uci.edu/dataset/80, CC BY 4.0), as scikit-learn ships them. fusegrad
stores them once, compressed, so `fusegrad.datasets.digits()` never downloads anything.

This script needs scikit-learn, which is NOT a dependency of fusegrad::

    pip install scikit-learn
    python tools/make_digits.py

It writes two uint8 arrays: `images` (1797, 8, 8) with values 0..16 and `labels` (1797,).
"""

from __future__ import annotations

import pathlib

import numpy as np

OUT = pathlib.Path(__file__).resolve().parents[1] / "src" / "fusegrad" / "datasets" / "digits.npz"


def main() -> None:
    """Load scikit-learn's digits and write them, as uint8, to the package's .npz file."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.asarray(bunch.images)
    labels = np.asarray(bunch.target)
    assert images.shape == (1797, 8, 8) and labels.shape == (1797,)
    assert images.min() >= 0 and images.max() <= 16 and np.all(images == np.round(images))
    assert set(np.unique(labels).tolist()) == set(range(10))
    np.savez_compressed(OUT, images=images.astype(np.uint8), labels=labels.astype(np.uint8))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(labels)} samples)")


if __name__ == "__main__":
    main()
