"""MNIST IDX and CIFAR python-batch readers, on small files written here in those formats.

Oracle: the arrays the files were written from (and a pure-NumPy reading of the IDX layout).
"""

import gzip
import os
import pickle
import posix
import struct

import numpy as np
import pytest

import fusegrad
from fusegrad.datasets import CIFAR10, CIFAR100, MNIST, FashionMNIST, load_batch, read_idx
from fusegrad.utils.data import DataLoader


def write_idx(path, array, gz=False):
    """Write `array` as IDX (big-endian), the way the MNIST files are laid out."""
    code = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(np.int16): 0x0B,
            np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D,
            np.dtype(np.float64): 0x0E}[array.dtype]
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    body = array.astype(array.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if gz else open
    with opener(path, "wb") as f:
        f.write(header + body)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32,
                                   np.float64])
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_round_trip(tmp_path, dtype, gz):
    rng = np.random.default_rng(0)
    array = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    path = tmp_path / ("x.idx.gz" if gz else "x.idx")
    write_idx(path, array, gz)
    out = read_idx(path)
    assert out.dtype == np.dtype(dtype) and out.shape == (3, 4, 5)
    np.testing.assert_array_equal(out, array)


def test_read_idx_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x01\x02\x03\x04rest")
    with pytest.raises(ValueError, match="is not an IDX file"):
        read_idx(bad)
    short = tmp_path / "short"
    write_idx(short, np.zeros((2, 3), np.uint8))
    short.write_bytes(short.read_bytes()[:-1])
    with pytest.raises(ValueError, match="promises 6 bytes"):
        read_idx(short)


def make_mnist(root, name="MNIST", n_train=12, n_test=5, gz=False):
    rng = np.random.default_rng(1)
    raw = root / name / "raw"
    raw.mkdir(parents=True)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        suffix = ".gz" if gz else ""
        write_idx(raw / f"{split}-images-idx3-ubyte{suffix}", images, gz)
        write_idx(raw / f"{split}-labels-idx1-ubyte{suffix}", labels, gz)
        arrays[split] = images, labels
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_reads_torchvision_layout(tmp_path, gz):
    arrays = make_mnist(tmp_path, gz=gz)
    train = MNIST(tmp_path)
    test = MNIST(str(tmp_path), train=False)
    assert len(train) == 12 and len(test) == 5
    images, labels = arrays["train"]
    np.testing.assert_array_equal(train.data.numpy(), images)
    assert train.data.dtype == fusegrad.uint8 and train.targets.dtype == fusegrad.int64
    np.testing.assert_array_equal(train.targets.numpy(), labels.astype(np.int64))
    image, target = train[3]
    assert image.shape == (1, 28, 28) and image.dtype == fusegrad.float32
    np.testing.assert_allclose(image.numpy()[0], images[3] / 255.0, rtol=1e-6)
    assert target == int(labels[3])
    np.testing.assert_array_equal(test.targets.numpy(), arrays["t10k"][1])
    assert "Number of datapoints: 12" in repr(train) and "Split: Test" in repr(test)


def test_mnist_transforms_loader_and_fashion(tmp_path):
    make_mnist(tmp_path, name="FashionMNIST")
    ds = FashionMNIST(tmp_path, transform=lambda x: x * 2, target_transform=lambda t: t + 100)
    image, target = ds[0]
    np.testing.assert_allclose(image.numpy(), ds.data.numpy()[0][None] / 255.0 * 2, rtol=1e-6)
    assert target == int(ds.targets.numpy()[0]) + 100
    batch_x, batch_y = next(iter(DataLoader(ds, batch_size=4)))
    assert batch_x.shape == (4, 1, 28, 28) and batch_y.shape == (4,)
    assert ds.classes[0] == "T-shirt/top"


def test_mnist_missing_files_and_download(tmp_path):
    with pytest.raises(RuntimeError, match="Dataset not found: train-images-idx3-ubyte"):
        MNIST(tmp_path)
    with pytest.raises(RuntimeError, match="does not download"):
        MNIST(tmp_path, download=True)


def write_batch(path, data, labels, key="labels", python2_style=True):
    """A CIFAR batch: the real files are Python 2 pickles, so keys load as bytes."""
    batch = {b"batch_label" if python2_style else "batch_label": b"testing batch",
             (key.encode() if python2_style else key): list(labels),
             (b"data" if python2_style else "data"): data}
    with open(path, "wb") as f:
        pickle.dump(batch, f, protocol=2)


def make_cifar(root, n_per_batch=4):
    rng = np.random.default_rng(2)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    data, labels = [], []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        d = rng.integers(0, 256, (n_per_batch, 3072), dtype=np.uint8)
        lab = rng.integers(0, 10, n_per_batch).tolist()
        write_batch(folder / name, d, lab, python2_style=(name != "test_batch"))
        data.append(d)
        labels.append(lab)
    names = [n.encode() for n in ["airplane", "automobile", "bird", "cat", "deer", "dog",
                                   "frog", "horse", "ship", "truck"]]
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": names, b"num_vis": 3072}, f, protocol=2)
    return data, labels


def test_cifar10_reads_batches(tmp_path):
    data, labels = make_cifar(tmp_path)
    train = CIFAR10(tmp_path)
    test = CIFAR10(tmp_path, train=False)
    assert len(train) == 20 and len(test) == 4
    expected = np.concatenate(data[:5]).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(train.data, expected)
    assert train.data.shape == (20, 32, 32, 3) and train.data.dtype == np.uint8
    assert train.targets == sum(labels[:5], [])
    image, target = train[7]
    assert image.shape == (3, 32, 32) and image.dtype == fusegrad.float32
    np.testing.assert_allclose(image.numpy(), data[1][3].reshape(3, 32, 32) / 255.0,
                               rtol=1e-6)
    assert target == labels[1][3]
    assert train.classes[0] == "airplane" and train.class_to_idx["truck"] == 9
    assert test.targets == labels[5]


def test_cifar100_fine_labels(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    rng = np.random.default_rng(3)
    d = rng.integers(0, 256, (6, 3072), dtype=np.uint8)
    write_batch(folder / "train", d, [5, 99, 0, 1, 2, 3], key="fine_labels")
    ds = CIFAR100(tmp_path)
    assert ds.targets == [5, 99, 0, 1, 2, 3] and ds.classes == []
    np.testing.assert_array_equal(ds.data[1], d[1].reshape(3, 32, 32).transpose(1, 2, 0))


class Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_cifar_refuses_code_in_pickles(tmp_path, monkeypatch):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    with open(folder / "test_batch", "wb") as f:
        pickle.dump({b"data": Exploit(), b"labels": []}, f, protocol=2)
    # Were the global resolved, unpickling would call this instead of the real os.system.
    calls = []
    monkeypatch.setattr(os, "system", calls.append)
    monkeypatch.setattr(posix, "system", calls.append)
    with pytest.raises(pickle.UnpicklingError, match="refusing the global .*system"):
        CIFAR10(tmp_path, train=False)
    assert calls == []
    objects = folder / "objects"
    with open(objects, "wb") as f:
        pickle.dump({b"data": np.array([1, "x"], dtype=object)}, f, protocol=2)
    with pytest.raises(ValueError, match="object array"):
        load_batch(objects)


def test_cifar_missing_files(tmp_path):
    with pytest.raises(RuntimeError, match="Dataset not found or corrupted"):
        CIFAR10(tmp_path)
