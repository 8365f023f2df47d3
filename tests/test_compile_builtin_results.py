"""Results of Python builtins evaluated while translating (`reversed(range(3))`, `zip`,
`enumerate`, `dict(a=1)`): each call of the compiled code gets its own iterator or container,
as eager Python does, so the second and later calls give eager's results (a one-shot iterator
held as a constant was used up by the first call; a dict constant was shared by every call).

Each function runs compiled three times beside eager (backends: the run's through `Counter`,
aot_eager and inductor). No torch here: the 3.12/3.13 runs use this file too.
"""

from __future__ import annotations

import numpy as np
import pytest
from compile_support import Counter

import fusegrad
import fusegrad.nn as nn

BACKENDS = [None, "aot_eager", "inductor"]


def _same(a, b) -> None:
    if isinstance(a, fusegrad.Tensor):
        assert isinstance(b, fusegrad.Tensor) and a.shape == b.shape
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6,
                                   atol=1e-6)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert type(b) is dict and a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b


def _reversed_loop(x):
    for i in reversed(range(3)):
        x = x * 2 + i
    return x


def _reversed_arg(x, n):
    for i in reversed(range(n)):
        x = x - i
    return x


def _zip_loop(x):
    for a, b in zip((1, 2, 3), (4, 5, 6)):
        x = x * a + b
    for a, b in zip(range(3), range(1, 4)):
        x = x + a * b
    return x


def _enumerate_loop(x):
    for i, v in enumerate((2, 3)):
        x = x * v + i
    for i, v in enumerate(range(2, 4)):
        x = x - i * v
    return x


def _sum_of_reversed(x):
    return x * sum(reversed(range(3)))


def _permute_reversed(x):
    return x.permute(*reversed(range(x.dim()))) + 1


def _reshape_reversed(x):
    return x.reshape(*reversed(x.shape)) * 2


def _keep_reduced(x):
    out = x
    for d in reversed(range(x.dim())):
        out = out.sum(d, keepdim=True)
    return out


def _dict_of_zip(x):
    return x * dict(zip(("a", "b"), (1, 2)))["b"]


def _next_of_enumerate(x):
    i, v = next(enumerate((5, 6)))
    return x * v + i


def _max_of_reversed(x, n):
    return x + max(*reversed(range(n)))


CASES = [
    (_reversed_loop, ((2,),), ()), (_reversed_arg, ((2,),), (4,)), (_zip_loop, ((3,),), ()),
    (_enumerate_loop, ((3,),), ()), (_sum_of_reversed, ((2,),), ()),
    (_permute_reversed, ((2, 3, 4),), ()), (_reshape_reversed, ((2, 3),), ()),
    (_keep_reduced, ((2, 3),), ()), (_dict_of_zip, ((2,),), ()),
    (_next_of_enumerate, ((2,),), ()), (_max_of_reversed, ((2,),), (5,)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, shapes, extra", CASES, ids=[c[0].__name__ for c in CASES])
def test_builtin_results_are_fresh_on_every_call(fn, shapes, extra, backend):
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(fn, backend=Counter() if backend is None else backend)
    fusegrad.manual_seed(0)
    args = [fusegrad.randn(*s) for s in shapes] + list(extra)
    want = fn(*args)
    for _ in range(3):
        _same(compiled(*args), want)


class UNetish(nn.Module):
    """Skips consumed in reverse (a U-Net's decoder)."""

    def __init__(self):
        super().__init__()
        self.down = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.up = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        skips = []
        for layer in self.down:
            x = fusegrad.relu(layer(x))
            skips.append(x)
        for i in reversed(range(len(self.up))):
            x = self.up[i](x) + skips[i]
        return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_decoder_over_reversed_skips(backend):
    fusegrad._dynamo.reset()
    fusegrad.manual_seed(0)
    model = UNetish()
    x = fusegrad.randn(2, 4)
    compiled = fusegrad.compile(model, backend=Counter() if backend is None else backend)
    for _ in range(3):
        _same(compiled(x), model(x))


def _dict_mutated(x):
    d = dict(a=1)
    d["b"] = 2
    return x * len(d), d


def _dict_returned(x):
    return x, dict(a=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_made_by_dict_is_a_new_dict_each_call(backend):
    fusegrad._dynamo.reset()
    x = fusegrad.ones(2)
    compiled = fusegrad.compile(_dict_mutated, backend=Counter() if backend is None else backend)
    first, second = compiled(x), compiled(x)
    assert first[1] is not second[1] and first[1] == {"a": 1, "b": 2}
    first[1]["zzz"] = 0  # the caller's change reaches no later call
    _same(compiled(x), _dict_mutated(x))
    compiled = fusegrad.compile(_dict_returned, backend=Counter() if backend is None else backend)
    compiled(x)[1]["b"] = 5
    assert compiled(x)[1] == {"a": 1}
