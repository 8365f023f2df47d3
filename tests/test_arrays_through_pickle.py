"""Tensors whose arrays came through pickle compute as tensors made in the process do.

An unpickled NumPy array carries a dtype object equal to NumPy's own but separate from it,
and NumPy's operations pass it on to their results. fusegrad's kernels recognise their
common cases by identity, so such arrays (a DataLoader worker's batches, pickled tensors and
state dicts, the constants and buffers of a compiled graph read back from the disk cache)
took the general paths: a float32 product went to OpenBLAS instead of fusegrad's own kernel
and gave other bits than the same product of the same values made in the process. The
oracle here is the same computation on tensors that never went through pickle."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import fusegrad
from fusegrad.compiler.codegen import build
from fusegrad.ops import _sgemm

# A product the float32 kernel takes (a 64-sample batch through a 784x128 layer) where it
# is built, and that OpenBLAS sums in another order.
_SHAPES = ((64, 784), (784, 128))


def _operands(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s).astype(np.float32) for s in _SHAPES)


def _product_bits(x, w) -> bytes:
    return ((x @ w).relu() * 2.0).sum(0).numpy().tobytes()


@pytest.mark.parametrize("how", ["tensor", "state_dict", "array"])
def test_unpickled_tensors_compute_the_bits_of_fresh_ones(how):
    x0, w0 = _operands()
    x, w = fusegrad.from_numpy(x0.copy()), fusegrad.from_numpy(w0.copy())
    if how == "tensor":
        xu = pickle.loads(pickle.dumps(x))
    elif how == "state_dict":
        xu = pickle.loads(pickle.dumps({"x": x}))["x"]
    else:  # an array a program unpickled itself, given to from_numpy and to tensor
        arr = pickle.loads(pickle.dumps(x0))
        xu = fusegrad.from_numpy(arr)
        assert _product_bits(fusegrad.tensor(arr), w) == _product_bits(x, w)
    np.testing.assert_array_equal(xu.numpy(), x0)
    assert _product_bits(xu, w) == _product_bits(x, w)
    # A gradient through the unpickled tensor, as through the fresh one.
    grads = []
    for t in (x, xu):
        leaf = t.detach().requires_grad_()
        (leaf @ w).tanh().sum().backward()
        grads.append(leaf.grad.numpy().tobytes())
    assert grads[0] == grads[1]


def test_data_loader_worker_batches_compute_the_bits_of_in_process_ones():
    x0, w0 = _operands(1)
    w = fusegrad.from_numpy(w0)
    data = fusegrad.utils.data.TensorDataset(fusegrad.from_numpy(x0), fusegrad.arange(64))
    results = []
    for workers in (0, 2):
        loader = fusegrad.utils.data.DataLoader(data, batch_size=32, num_workers=workers)
        results.append([_product_bits(xb, w) for xb, _ in loader])
    assert results[0] == results[1]


_CHILD = """
import hashlib, sys
import numpy as np
import fusegrad
rng = np.random.default_rng(0)
x, w = (fusegrad.from_numpy(rng.standard_normal(s).astype(np.float32))
        for s in ((64, 784), (784, 128)))
f = fusegrad.compile(lambda x, w: ((x * 2.0) @ w).relu(), backend="inductor")
got = f(x, w).numpy().tobytes()
want = ((x * 2.0) @ w).relu().numpy().tobytes()
print(hashlib.sha256(got).hexdigest(), got == want)
"""


@pytest.mark.skipif(build.compiler() is None, reason="no C compiler")
def test_a_compiled_graph_read_back_from_the_disk_cache_computes_as_when_built(tmp_path):
    """A graph compiled in one process and read back from the disk cache in the next gives
    the bits it gave when built, and eager's."""
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    outs = []
    for _ in range(2):  # built, then read back
        p = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        outs.append(p.stdout.split())
    assert list(tmp_path.joinpath("cache").glob("graph_*.pkl"))
    assert outs[0] == outs[1]
    assert outs[0][1] == "True"


def test_the_product_here_is_one_the_own_kernel_takes_where_it_is_built():
    """(What makes the bit checks above meaningful: where the float32 kernel is built, the
    product goes to it, and OpenBLAS's bits for it differ.)"""
    if not _sgemm._available():
        pytest.skip("no AVX-512 build of the kernel or not an Intel CPU")
    x0, w0 = _operands()
    own = _sgemm.product(x0, w0, None)
    assert own is not None
    assert own.tobytes() != np.matmul(x0, w0).tobytes()
