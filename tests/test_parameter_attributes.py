"""Attributes a program sets on a parameter (`p.no_decay = True`) stay on it, travel through
pickle and `swap_tensors`, and are left behind by deepcopy, as with PyTorch's parameters."""

import copy
import pickle

import pytest
import torch

import fusegrad


def _story(lib):
    out = []
    model = lib.nn.Linear(2, 2)
    model.weight.no_decay = True
    out.append(model.weight.no_decay)
    out.append(model.to(lib.float64).weight.no_decay)  # the same parameter object
    p = lib.nn.Parameter(lib.ones(2))
    p.tag = "seen"
    out.append(pickle.loads(pickle.dumps(p)).tag)
    out.append(getattr(copy.deepcopy(p), "tag", "missing"))
    del p.tag
    out.append(hasattr(p, "tag"))
    a, b = lib.nn.Parameter(lib.ones(1)), lib.nn.Parameter(lib.zeros(1))
    a.x = 1
    lib.utils.swap_tensors(a, b)
    out.append((getattr(a, "x", None), getattr(b, "x", None)))
    c, d = lib.nn.Parameter(lib.ones(1)), lib.ones(1)
    lib.utils.swap_tensors(c, d)
    out.append((type(c).__name__, type(d).__name__))
    p.requires_grad = False
    out.append(p.requires_grad)
    return out


def test_parameter_attributes_as_torchs():
    assert _story(fusegrad) == _story(torch)


def test_unknown_and_read_only_attributes_raise():
    p = fusegrad.nn.Parameter(fusegrad.ones(2))
    with pytest.raises(AttributeError, match="'Parameter' object has no attribute 'missing'"):
        p.missing  # noqa: B018
    with pytest.raises(AttributeError):
        p.shape = (1,)
