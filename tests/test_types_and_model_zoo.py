"""`fusegrad.types` and `fusegrad.utils.model_zoo` against PyTorch's: the aliases user
annotations name exist in both with the same members, and `load_url` is the hub's loader."""

from __future__ import annotations

import typing

import torch
import torch.types
import torch.utils.model_zoo

import fusegrad
import fusegrad.types
import fusegrad.utils.model_zoo


def _names(alias) -> list[str]:
    return sorted(getattr(a, "__name__", str(a)) for a in typing.get_args(alias))


def test_types_aliases_match_torch():
    for name in fusegrad.types.__all__:
        assert hasattr(torch.types, name), name
    for name in ("Number", "_size", "Device", "IntLikeType", "_TensorOrTensors"):
        ours, theirs = getattr(fusegrad.types, name), getattr(torch.types, name)
        assert _names(ours) == _names(theirs), name
    assert isinstance(3, fusegrad.types._Number) and fusegrad.types._Number == torch.types._Number
    assert fusegrad.types.Number == int | float | bool


def test_model_zoo_load_url_is_the_hub_loader():
    assert fusegrad.utils.model_zoo.load_url is fusegrad.hub.load_state_dict_from_url
    assert torch.utils.model_zoo.load_url is torch.hub.load_state_dict_from_url
