"""Every public class fusegrad shares with PyTorch lives at PyTorch's module path (mapped
`torch` -> `fusegrad`) and says so in `__module__`: pickles, safe-global lists and
`isinstance` checks written against PyTorch's paths find fusegrad's classes."""

import importlib
import inspect
import warnings

import pytest
import torch

import fusegrad

NAMESPACES = [
    "torch", "torch.nn", "torch.nn.parameter", "torch.nn.utils", "torch.nn.utils.rnn",
    "torch.nn.parallel", "torch.optim", "torch.optim.lr_scheduler", "torch.optim.swa_utils",
    "torch.utils.data", "torch.utils.checkpoint", "torch.autograd", "torch.distributions",
    "torch.fx", "torch.distributed",
]
NOT_MIRRORED: set = set()


def _shared_classes():
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated aliases warn when touched
        for ns in NAMESPACES:
            theirs = importlib.import_module(ns)
            ours = importlib.import_module(ns.replace("torch", "fusegrad", 1))
            for name in dir(theirs):
                cls = getattr(theirs, name)
                if name.startswith("_") or name in NOT_MIRRORED or not inspect.isclass(cls) \
                        or not cls.__module__.startswith("torch"):
                    continue
                mine = getattr(ours, name, None)
                if inspect.isclass(mine):
                    found.append((f"{ns}.{name}", cls.__module__, mine))
    return found


SHARED = _shared_classes()


def test_enough_classes_are_compared():
    assert len(SHARED) > 200


@pytest.mark.parametrize("public, torch_module, cls", SHARED, ids=[s[0] for s in SHARED])
def test_class_lives_at_pytorchs_path(public, torch_module, cls):
    module = torch_module.replace("torch", "fusegrad", 1)
    assert cls.__module__ == module
    assert getattr(importlib.import_module(module), cls.__name__) is cls


def test_module_files_follow_pytorchs_layout():
    for path in ("nn.modules.dropout.Dropout", "nn.modules.activation.MultiheadAttention",
                 "nn.modules.conv.Conv2d", "nn.modules.batchnorm.BatchNorm2d",
                 "nn.modules.flatten.Flatten", "optim.adam.Adam", "optim.adamw.AdamW",
                 "utils.data.dataloader.DataLoader", "fx._symbolic_trace.Tracer",
                 "distributed.distributed_c10d.ProcessGroup"):
        module, name = path.rsplit(".", 1)
        assert getattr(importlib.import_module(f"torch.{module}"), name).__name__ == name
        ours = getattr(importlib.import_module(f"fusegrad.{module}"), name)
        assert ours.__module__ == f"fusegrad.{module}"
    assert repr(fusegrad.Tensor) == repr(torch.Tensor).replace("torch", "fusegrad")
