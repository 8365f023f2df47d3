# ruff: noqa: UP006, UP035, UP045  (TorchScript reads typing.List/Optional/Tuple)
"""Programs scripted by both fusegrad.jit.script and torch.jit.script in test_jit_script.py.

The file is imported twice: as-is (with `torch` being PyTorch) and with `import torch`
replaced by `import fusegrad as torch`, so both compilers read the same source.
"""

import math
from typing import List, Optional, Tuple

import torch


def fast_function(x):
    return x * 2 + 1


def branchy(x, n: int):
    if x.sum() > 0:
        y = x * 2
    else:
        y = x - 1
    for i in range(n):
        y = y + i
    while y.sum() < 10:
        y = y * 2
    return y


def early_return(x):
    if x.sum() > 0:
        return x
    y = x * 2
    return y + 1


def helper(x, k: float):
    return torch.relu(x) * k


def calls_helper(x, y):
    z = helper(x, 0.5) + helper(y, 2.0)
    if bool(z.max() > 1):
        z = z - 1
    return z


def loops_over_values(x, sizes: List[int]):
    total = 0
    for s in sizes:
        total += s
    acc = torch.zeros_like(x[0])
    for row in x:
        if row.sum() > 0:
            acc = acc + row
        else:
            acc = acc - row * 0.5
    return acc * total, total


def optional_and_tuple(x, w: Optional[torch.Tensor], scale: float = 1.5) -> Tuple[torch.Tensor,
                                                                                    int]:
    if w is not None:
        x = x * w
    n = x.dim() + len(x.shape)
    out = x[1:, 0] * scale if x.size(0) > 1 else x[0]
    return out.tanh(), n


def bool_logic(x, flag: bool):
    if flag and x.mean() > 0 or not flag:
        return x.exp()
    return -x if x.min() < -1 else x.abs()


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.alt = torch.nn.Linear(4, 3)
        self.scale = 2.0
        self.steps = 2
        self.offset = torch.tensor([0.5, -0.5, 0.25])  # a plain tensor attribute

    def forward(self, x):
        if x.sum() > 0:
            y = self.lin(x) * self.scale
        else:
            y = self.alt(x)
        for _ in range(self.steps):
            y = torch.tanh(y)
        return y + self.offset


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(),
                                        torch.nn.Linear(5, 2))
        self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)])

    def forward(self, x):
        x = self.body(x)
        for layer in self.layers:
            x = layer(x) + x
        return self.norm(x)

    @torch.jit.export
    def norm(self, x):
        return x / (x.norm() + 1)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 6, 3), torch.nn.AvgPool2d(2))
        self.head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Dropout(0.5),
                                        torch.nn.Linear(6, 3), torch.nn.LogSoftmax(dim=1))

    def forward(self, x):
        y = self.head(self.features(x))
        if y.max() > -0.5:
            y = y * 0.5
        return y


def break_continue(x, n: int):
    total = x * 0
    for i in range(n):
        if i == 1:
            continue
        total = total + x * i
        if total.sum() > 20:
            break
        total = total + 1
    k = 0
    while k < 100:
        k += 3
        if k % 2 == 0:
            continue
        if k > 10:
            break
        total = total - 0.5
    for j in range(3):
        for m in range(3):
            if m > j:
                break
            total = total + m
    return total, k


def shifted(x, by: float = 1.0, times: int = 2):
    return (x + by) * times


def comprehensions(x, ws: List[float]):
    out = [shifted(x, times=3) * w for w in ws]
    acc = torch.zeros_like(x)
    for i, t in enumerate(out):
        acc = acc + t * i
    for a, b in zip(out, ws):
        acc = acc + a * b
    squares = [i * i for i in range(4)]
    return acc + shifted(x, by=0.5), squares


def optional_state(x, n: int, k: float):
    steps: List[int] = []
    best: Optional[torch.Tensor] = None
    for i in range(n):
        steps.append(i)
        if best is None:
            best = x * i
        else:
            best = best + x * k
    assert n < 10, "too many steps"
    if best is None:
        raise ValueError("no steps")
    return best, steps


def tensor_properties(x):
    y = (x.unsqueeze(1).T @ x.unsqueeze(1)).sum() * x
    if x.requires_grad:
        y = y * 2
    return y.to(x.dtype) + x.ndim + x.shape[-1]


def with_math(x, k: float):
    n = math.floor(k * 2.5)
    return x * math.sqrt(k) + n * math.pi
