"""The models the AOT tests compare with PyTorch, written once for either library (`t` is
torch or fusegrad), and helpers to copy weights across."""

from __future__ import annotations

import contextlib
import logging

import numpy as np


def mlp(t):
    nn = t.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

        def forward(self, x):
            return (self.net(x),)

    return MLP()


def lenet5(t):
    nn = t.nn

    class LeNet5(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
            self.classifier = nn.Sequential(
                nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                nn.Linear(84, 10))

        def forward(self, x):
            return (self.classifier(t.flatten(self.features(x), 1)),)

    return LeNet5()


def basic_block(t, c: int = 4):
    nn = t.nn

    class BasicBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += x
            return (self.relu(out),)

    return BasicBlock()


MODELS = {"mlp": (mlp, (3, 8)), "lenet5": (lenet5, (2, 1, 28, 28)),
          "basic_block": (basic_block, (2, 4, 6, 6))}


def copy_weights(src, dst) -> None:
    """Load torch module `src`'s state into fusegrad module `dst`."""
    import fusegrad

    dst.load_state_dict({k: fusegrad.tensor(v.detach().numpy())
                         for k, v in src.state_dict().items()})


def close(a, b, tol: float) -> bool:
    """Values of two tensors (either library) agree within `tol`."""
    an = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    bn = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    return an.shape == bn.shape and np.allclose(an, bn, rtol=tol, atol=tol)


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def compiler_logs(**artifacts):
    """Turn fusegrad compiler log artifacts on and collect the messages (a list)."""
    from fusegrad.compiler import logs

    logs.set_logs(**artifacts)
    handler = _Collect()
    logs.log.addHandler(handler)
    level = logs.log.level
    logs.log.setLevel(logging.INFO)
    try:
        yield handler.messages
    finally:
        logs.log.removeHandler(handler)
        logs.log.setLevel(level)
        logs.set_logs(**dict.fromkeys(artifacts, False))
