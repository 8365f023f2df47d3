"""The modules import downward only (docs/architecture.md, "Import layers").

`tools/import_layers.py` reads every import statement with `ast` (inside functions too) and
assigns each module a layer; these tests fail on an upward import that its `ALLOWED` table
does not name with a reason, on a loop among the core's modules, and when the picture in
docs/architecture.md is not the one the script generates from the code as it is.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import fusegrad

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import import_layers as L  # noqa: E402


@pytest.fixture(scope="module")
def edges():
    """The package's import edges, read once per process that runs these tests (not while
    the tests are collected: the read parses every module)."""
    return L.import_edges()


def _show(edges) -> str:
    return "\n".join(sorted({
        f"{e.source}:{e.line} -> {e.named or e.target} "
        f"({L.LAYERS[L.layer_of(e.source)][0]} -> {L.LAYERS[L.layer_of(e.target)][0]}, "
        f"{'inside a function' if e.in_function else 'at module level'})" for e in edges}))


def test_every_module_has_a_layer():
    """A new top-level module must be placed in a layer before it can be checked."""
    for module in L.module_files():
        L.layer_of(module)


def test_no_upward_import(edges):
    """No module imports a higher layer, at module level or inside a function, except the
    commented allowances (function level only)."""
    bad = L.upward(edges)
    assert not bad, "imports running upward:\n" + _show(bad)


def test_allowances_are_current(edges):
    """Each allowance names an import that exists, inside a function."""
    assert L.stale_allowances(edges) == []


def test_no_loop_in_the_core(edges):
    """No group of core modules imports each other in a loop, the imports inside functions
    included."""
    assert L.core_loops(edges) == []


def test_picture_is_generated(edges):
    """docs/architecture.md shows the layers as the script computes them now (regenerate
    with `python tools/import_layers.py --write`)."""
    assert L.documented() == L.diagram(edges)


def test_the_checks_see_function_level_imports_and_package_inits(tmp_path):
    """The reader finds imports inside functions, resolves relative ones, and counts the
    package `__init__` an import runs; an upward one and a loop are reported."""
    root = tmp_path / "fusegrad"
    (root / "ops").mkdir(parents=True)
    (root / "_functions").mkdir()
    for package in (root, root / "_functions"):
        (package / "__init__.py").write_text("")
    (root / "_functions" / "shape.py").write_text("")
    (root / "_dtype.py").write_text("def f():\n    from .ops import conv\n")
    (root / "ops" / "__init__.py").write_text("from . import conv\n")
    (root / "ops" / "conv.py").write_text(
        "from .. import _dtype\n\ndef g():\n    from .._functions import shape\n")
    edges = {(e.source, e.target, e.in_function, bool(e.named))
             for e in L.import_edges(root)}
    assert ("fusegrad._dtype", "fusegrad.ops.conv", True, False) in edges
    assert ("fusegrad._dtype", "fusegrad.ops", True, True) in edges  # runs ops/__init__
    assert ("fusegrad.ops.conv", "fusegrad._dtype", False, False) in edges
    assert ("fusegrad.ops", "fusegrad.ops.conv", False, False) in edges
    found = L.import_edges(root)
    assert {(e.source, e.target) for e in L.upward(found)} == {
        ("fusegrad._dtype", "fusegrad.ops.conv"), ("fusegrad._dtype", "fusegrad.ops"),
        ("fusegrad.ops.conv", "fusegrad._functions.shape"),
        ("fusegrad.ops.conv", "fusegrad._functions")}
    assert L.core_loops(found) == [["fusegrad._dtype", "fusegrad.ops.conv"]]


NN_NAMES = sorted(fusegrad.ops.surface.names_with(fusegrad.ops.surface.NN_SPELLING))


def test_nn_spellings_are_the_modules_names():
    """The names `fusegrad` loads with nn are exactly those nn/_aten_aliases.py defines."""
    import fusegrad.nn._aten_aliases as aten

    assert NN_NAMES == sorted(aten.__all__)


@pytest.mark.parametrize("name", NN_NAMES + ["hardshrink", "prelu"])
def test_layer_spellings_are_nn_functional_s_where_pytorch_s_are(name):
    """`torch.conv2d is torch.nn.functional.conv2d`, and so on: the same objects (or not) as in
    PyTorch, reached through the top-level namespace."""
    import fusegrad.nn.functional as F

    ours = getattr(fusegrad, name)
    assert callable(ours)
    theirs = getattr(torch, name)
    assert (ours is getattr(F, name, None)) == \
        (theirs is getattr(torch.nn.functional, name, None)), name
