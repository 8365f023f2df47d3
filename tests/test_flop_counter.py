"""`utils.flop_counter.FlopCounterMode` against torch's: totals, per-module and per-op counts
(forward and backward), and the printed table, on the same programs."""

from __future__ import annotations

import contextlib
import importlib
import io
import warnings

import pytest
import torch

import fusegrad as fg


def _cnn(T):
    return T.nn.Sequential(T.nn.Conv2d(3, 4, 3, padding=1), T.nn.ReLU(), T.nn.Flatten(),
                           T.nn.Linear(4 * 8 * 8, 10))


def _nested(T):
    return T.nn.Sequential(T.nn.Sequential(T.nn.Linear(4, 4),
                                           T.nn.Sequential(T.nn.Linear(4, 4))))


def _cnn_training(T):
    model = _cnn(T)
    model(T.randn(2, 3, 8, 8, requires_grad=True)).sum().backward()


def _matrix_products(T):
    a = T.randn(2, 3, 4, requires_grad=True)
    T.bmm(a, T.randn(2, 4, 5))
    T.baddbmm(T.randn(2, 3, 5), a, T.randn(2, 4, 5)).sum().backward()
    q = T.randn(2, 3, 5, 8, requires_grad=True)
    T.nn.functional.scaled_dot_product_attention(q, q, q).sum().backward()


def _convolutions(T):
    F = T.nn.functional
    F.conv_transpose2d(T.randn(1, 2, 5, 5, requires_grad=True),
                       T.randn(2, 3, 3, 3, requires_grad=True), stride=2).sum().backward()
    F.conv1d(T.randn(2, 4, 9), T.randn(6, 2, 3), groups=2)
    x = T.randn(1, 2, 6, 6)  # only the weight's gradient
    F.conv2d(x, T.randn(3, 2, 3, 3, requires_grad=True), stride=2, dilation=2).sum().backward()


def _ops_outside_modules(T):
    y = T.nn.Linear(4, 3)(T.randn(2, 4))
    T.mm(y, T.randn(3, 5))


def _two_top_modules(T):
    a, b = T.nn.Linear(64, 64), T.nn.Sequential(T.nn.Linear(64, 64))
    b(a(T.randn(300, 64)))


def _nested_calls(T):
    _nested(T)(T.randn(2, 4))


def _nothing_counted(T):
    T.randn(3, 3) + 1


PROGRAMS = [_cnn_training, _matrix_products, _convolutions, _ops_outside_modules,
            _two_top_modules, _nested_calls, _nothing_counted]


def _counted(T, program, depth):
    mode = importlib.import_module(T.__name__ + ".utils.flop_counter").FlopCounterMode
    T.manual_seed(0)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), mode(depth=depth) as counter:
        program(T)
    counts = {name: {str(op).split(".")[-1]: n for op, n in ops.items()}
              for name, ops in counter.get_flop_counts().items()}
    return (printed.getvalue(), counter.get_total_flops(), counts,
            [counter.get_table(d) for d in (1, 3)])


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_counts_and_table_match_torch(program, depth):
    assert _counted(fg, program, depth) == _counted(torch, program, depth)


def _formulas(T):
    module = importlib.import_module(T.__name__ + ".utils.flop_counter")

    def custom(a_shape, b_shape, out_shape=None):
        return 7

    with module.FlopCounterMode(display=False, custom_mapping={T.ops.aten.mm: custom}) as c:
        T.mm(T.randn(2, 3), T.randn(3, 4))
        T.bmm(T.randn(2, 3, 3), T.randn(2, 3, 4))
    return c.get_total_flops()


def test_custom_mapping_matches_torch():
    assert _formulas(fg) == _formulas(torch)


def test_mods_argument_warns_as_torch():
    messages = []
    for T in (torch, fg):
        module = importlib.import_module(T.__name__ + ".utils.flop_counter")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module.FlopCounterMode(mods=T.nn.Linear(2, 2), display=False)
        messages.append([(w.category, str(w.message)) for w in caught])
    assert messages[0] == messages[1]
