"""`fusegrad.datasets.digits()` (the real UCI 8x8 digits stored in the package) and the
`fusegrad demo` command that trains on them."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusegrad as torch
from fusegrad.cli import main
from fusegrad.datasets import DIGITS_FILE, digits
from fusegrad.utils.data import TensorDataset

# Samples per class 0..9 of the 1,797 digits, as scikit-learn's `load_digits` gives them.
KNOWN_COUNTS = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
# Oracles from the real data: the first image (a zero) sums to 294 gray levels (0..16 scale)
# and all images together to 561,718.
FIRST_IMAGE_SUM = 294
ALL_IMAGES_SUM = 561718

EPOCH_LINE = re.compile(
    r"^Epoch (\d{2}) \| Train Time: (\d+\.\d{2})s \| Batch Time: (\d+\.\d{4})s \| "
    r"Train ACC: (\d+\.\d{2})% \| Test ACC: (\d+\.\d{2})%$")


def test_digits_file_is_plain_uint8_arrays():
    with np.load(DIGITS_FILE, allow_pickle=False) as data:
        assert sorted(data.files) == ["images", "labels"]
        images, labels = data["images"], data["labels"]
    assert images.dtype == np.uint8 and images.shape == (1797, 8, 8)
    assert labels.dtype == np.uint8 and labels.shape == (1797,)
    assert int(images.max()) == 16 and int(images.min()) == 0
    assert np.bincount(labels, minlength=10).tolist() == KNOWN_COUNTS
    assert int(images[0].sum(dtype=np.int64)) == FIRST_IMAGE_SUM
    assert int(images.sum(dtype=np.int64)) == ALL_IMAGES_SUM
    assert labels[:10].tolist() == list(range(10))


def test_digits_tensors():
    images, labels = digits(return_tensors=True)
    assert isinstance(images, torch.Tensor) and isinstance(labels, torch.Tensor)
    assert images.shape == (1797, 1, 8, 8) and images.dtype == torch.float32
    assert labels.shape == (1797,) and labels.dtype == torch.int64
    assert float(images.min()) == 0.0 and float(images.max()) == 1.0
    assert images[0].sum().item() == pytest.approx(FIRST_IMAGE_SUM / 16)
    counts = np.bincount(labels.numpy(), minlength=10)
    assert len(counts) == 10 and counts.tolist() == KNOWN_COUNTS


def test_digits_dataset():
    ds = digits()
    assert isinstance(ds, TensorDataset) and len(ds) == 1797
    x, y = ds[5]
    assert x.shape == (1, 8, 8) and x.dtype == torch.float32
    assert y.dtype == torch.int64 and int(y) == 5
    images, labels = ds.tensors
    assert images.shape == (1797, 1, 8, 8) and labels.shape == (1797,)


def test_digits_match_scikit_learn_when_installed():
    datasets = pytest.importorskip("sklearn.datasets")
    bunch = datasets.load_digits()
    images, labels = digits(return_tensors=True)
    np.testing.assert_array_equal(labels.numpy(), bunch.target)
    np.testing.assert_array_equal(images.numpy()[:, 0] * 16, bunch.images.astype(np.float32))
    assert np.bincount(bunch.target).tolist() == KNOWN_COUNTS


def test_demo_one_epoch_mlp(capsys):
    assert main(["demo", "--epochs", "1", "--model", "mlp", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("Epoch")]
    assert len(lines) == 1, out
    match = EPOCH_LINE.match(lines[0])
    assert match, lines[0]
    epoch, _, _, train_acc, test_acc = match.groups()
    assert epoch == "00"
    assert float(train_acc) > 50.0 and float(test_acc) > 60.0  # chance is 10%


def test_demo_autograd_walkthrough(capsys):
    assert main(["demo", "--autograd"]) == 0
    out = capsys.readouterr().out
    assert "import fusegrad as torch" in out and "The backward graph of z:" in out
    assert "Epoch" not in out


def test_demo_compile_prints_compile_time_beside_eager(capsys):
    """`demo --compile`: Compile Time, then the compiled epochs and the eager ones from the
    same seed, with the same accuracies (the compiled model computes eager's values)."""
    assert main(["demo", "--compile", "--epochs", "1", "--model", "mlp", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^Compile Time: \d+\.\d\ds$", out, re.M), out
    compiled, eager = out.split("# eager")
    assert compiled.startswith("# compiled")
    rows = []
    for part in (compiled, eager):
        lines = [EPOCH_LINE.match(x) for x in part.splitlines() if x.startswith("Epoch")]
        assert len(lines) == 1 and lines[0], part
        rows.append([float(v) for v in lines[0].groups()[3:]])
    np.testing.assert_allclose(rows[0], rows[1], atol=0.5)
