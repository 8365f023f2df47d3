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


def test_saved_parameters_keep_their_attributes_both_ways(tmp_path):
    ours = fusegrad.nn.Parameter(fusegrad.ones(2))
    ours.no_decay, ours.n = True, 3
    fusegrad.save(ours, tmp_path / "ours.pt")
    read_by_torch = torch.load(tmp_path / "ours.pt")
    assert (read_by_torch.no_decay, read_by_torch.n) == (True, 3)
    theirs = torch.nn.Parameter(torch.ones(2))
    theirs.no_decay = True
    torch.save(theirs, tmp_path / "theirs.pt")
    read_by_us = fusegrad.load(tmp_path / "theirs.pt")
    assert isinstance(read_by_us, fusegrad.nn.Parameter) and read_by_us.no_decay is True
    model = fusegrad.nn.Linear(2, 2)
    model.weight.tag = [1, 2]
    fusegrad.save(model, tmp_path / "model.pt")
    assert fusegrad.load(tmp_path / "model.pt", weights_only=False).weight.tag == [1, 2]
