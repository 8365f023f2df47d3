"""Warnings PyTorch gives for deprecated or degenerate calls: the same text and category,
as often (every call, or once per process), naming the user's line as PyTorch's do (no
frame of fusegrad's own, such as the protocol's wrappers)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

import fusegrad

torch = pytest.importorskip("torch")


def _given(lib, fn, times: int) -> list[tuple[str, str, int]]:
    """(category, text before PyTorch's build-path suffix, line) of each warning of
    `times` calls of `fn(lib)`, under a fresh once-per-process record for fusegrad."""
    fusegrad._warn._state.given.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(times):
            fn(lib)
    return [(w.category.__name__, str(w.message).split(" (Triggered internally")[0],
             w.filename) for w in caught]


CASES = {
    "grid_sample default align_corners":
        lambda L: L.nn.functional.grid_sample(L.ones(1, 1, 2, 2), L.zeros(1, 2, 2, 2)),
    "affine_grid default align_corners":
        lambda L: L.nn.functional.affine_grid(L.eye(2, 3)[None], [1, 1, 2, 2]),
    "upsample deprecated": lambda L: L.nn.functional.upsample(L.ones(1, 1, 2, 2),
                                                              scale_factor=2),
    "resize deprecated": lambda L: L.ones(4).resize(2, 2),
    "resize_as deprecated": lambda L: L.ones(4).resize_as(L.ones(2, 2)),
    "std without degrees of freedom": lambda L: L.ones(1).std(),
    "var without degrees of freedom": lambda L: L.ones(2, 2).var(1, correction=2),
    "var_mean without degrees of freedom": lambda L: L.var_mean(L.ones(1)),
    "std_mean without degrees of freedom": lambda L: L.std_mean(L.ones(1)),
    "var of nothing": lambda L: L.ones(0).var(),
    "T of a vector": lambda L: L.ones(3).T,
    "T of a 0-d tensor": lambda L: L.ones(()).T,
    "mT of a 0-d tensor": lambda L: L.ones(()).mT,
    "chain_matmul deprecated": lambda L: L.chain_matmul(L.eye(2), L.eye(2)),
    "lu deprecated": lambda L: L.lu(L.eye(2)),
    "range deprecated": lambda L: L.range(0, 2),
    "autocast getter deprecated": lambda L: L.get_autocast_cpu_dtype(),
    "autocast setter deprecated": lambda L: L.set_autocast_cpu_enabled(False),
    "sparse invariants unchecked": lambda L: L.sparse_coo_tensor(L.tensor([[0], [1]]),
                                                                 L.ones(1), (2, 2)),
}


@pytest.fixture(scope="module")
def torch_warnings() -> dict:
    """PyTorch's warnings for each case, from a fresh process: its once-per-process warnings
    may have been given already in this one."""
    script = (f"import json, runpy; ns = runpy.run_path({__file__!r}); import torch; "
              "print(json.dumps({k: ns['_given'](torch, f, 2) for k, f in ns['CASES'].items()}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    return {k: [tuple(w) for w in v] for k, v in json.loads(out.splitlines()[-1]).items()}


@pytest.mark.parametrize("name", list(CASES))
def test_warning_as_torch(name, torch_warnings):
    """Same categories and texts as PyTorch's over two calls, each naming this file
    (PyTorch's functions written in Python may name their own file: those are skipped)."""
    fn = CASES[name]
    theirs = torch_warnings[name]
    ours = _given(fusegrad, fn, 2)
    assert [w[:2] for w in ours] == [w[:2] for w in theirs]
    assert ours, "PyTorch warns here"
    for (_, _, their_file), (_, _, our_file) in zip(theirs, ours):
        if their_file == __file__:
            assert our_file == __file__


def test_no_warning_where_torch_gives_none():
    """Enough degrees of freedom, and T of a matrix: no warning, as in PyTorch."""
    for fn in (lambda L: L.ones(2).std(), lambda L: L.ones(1).var(correction=0),
               lambda L: L.ones(2, 3).T):
        assert _given(fusegrad, fn, 1) == _given(torch, fn, 1) == []


def test_mT_of_a_0d_tensor_is_itself():
    """As PyTorch's: the tensor itself (no node), not an error."""
    for lib in (fusegrad, torch):
        x = lib.tensor(1.5, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert x.mT is x
