"""Dynamic shapes: symbolic sizes in captured graphs, as torch.compile makes them.

Automatic dynamic (the default): a recompile caused by a size change captures that size as a
symbol, so a third size reuses the second graph. `dynamic=True` makes every size symbolic,
`dynamic=False` none; `mark_dynamic` / `mark_static` pick single sizes; sizes 0 and 1 stay
static. Every compiled result is compared with eager execution, and the graph counts are the
ones torch.compile gives for the same programs (tests/test_compile_dynamic_torch.py checks
them against torch). No torch here: the 3.12/3.13 runs use this file too.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from compile_support import Counter

import fusegrad
import fusegrad.nn as nn
from fusegrad.compiler import logs


def _close(a, b) -> None:
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
        return
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def _run(fn, shapes, **options):
    """Compile `fn`, call it on random inputs of each shape (a tuple of shapes per call for
    several arguments), compare with eager; returns the backend."""
    fusegrad._dynamo.reset()  # (each case from a fresh recompile limit, as a user's)
    backend = Counter()
    compiled = fusegrad.compile(fn, backend=backend, **options)
    fusegrad.manual_seed(0)
    for shape in shapes:
        shape_list = shape if isinstance(shape[0], tuple) else (shape,)
        args = [fusegrad.randn(*s) for s in shape_list]
        _close(compiled(*args), fn(*args))
    return backend


def mlp_step(x, w):
    y = fusegrad.relu(x @ w) + 1
    return y.view(x.shape[0], -1).sum(1), y.reshape(-1, 2)


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def log_lines():
    handler = _Capture()
    logs.set_logs(recompiles=True, guards=True)
    logs.log.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logs.log.removeHandler(handler)
        logs.set_logs(recompiles=False, guards=False)


def test_three_batch_sizes_compile_twice():
    w = fusegrad.randn(4, 6)
    backend = _run(lambda x: mlp_step(x, w), [(2, 4), (3, 4), (5, 4), (7, 4)])
    assert backend.graphs == 2
    second = backend.modules[1]
    names = [n.name for n in second.graph.nodes if n.op == "placeholder"]
    # The size is an integer input named as Dynamo names it, placed before its tensor.
    assert names[:2] == ["s77", "l_x_"]
    assert "view(s77, -1)" in second.code
    assert "view(2, -1)" in backend.modules[0].code


def test_recompile_and_guard_logs(log_lines):
    w = fusegrad.randn(4, 6)

    def f(x):
        return mlp_step(x, w)

    _run(f, [(2, 4), (3, 4), (5, 4), (1, 4)])
    text = "\n".join(log_lines)
    assert "tensor 'L['x']' size mismatch at index 0. expected 2, actual 3" in text
    assert "check_tensor(L['x'], Tensor, size=[None, 4], stride=[4, 1]" in text
    assert "\n2 <= L['x'].size()[0]" in text
    # Size 1 fails the symbolic entry's range guard and is captured statically.
    assert "triggered by the following guard failure(s): 2 <= L['x'].size()[0]" in text


def test_mlp_module():
    fusegrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    backend = _run(model, [(2, 4), (3, 4), (5, 4)])
    assert backend.graphs == 2
    # Parameters stay static: the only symbol is the batch size.
    symbols = [n.name for n in backend.modules[1].graph.nodes
               if n.op == "placeholder" and n.meta.get("symbol")]
    assert len(symbols) == 1


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        y = self.pool(fusegrad.relu(self.conv(x)))
        return (self.fc(y.flatten(1)) + self.fc(y.view(x.shape[0], -1))
                + self.fc(y.reshape(y.size(0), -1)))


def test_conv_net_module():
    fusegrad.manual_seed(0)
    backend = _run(ConvNet(), [(2, 3, 8, 8), (3, 3, 8, 8), (5, 3, 8, 8)])
    assert backend.graphs == 2
    assert "reshape(s77, -1)" in backend.modules[1].code


def test_conv_net_image_size_change():
    # A change of height and width makes those sizes symbolic; the conv and pooling output
    # sizes are computed from the symbols (no guard on their values).
    class Pool(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 2, 3, padding=1, stride=2)

        def forward(self, x):
            return fusegrad.nn.functional.max_pool2d(self.conv(x), 2).sum((2, 3))

    fusegrad.manual_seed(0)
    backend = _run(Pool(), [(2, 3, 8, 8), (2, 3, 12, 12), (2, 3, 16, 16)])
    assert backend.graphs == 2
    # Sizes made dynamic after a change each get their own symbol: 16x20 is no new graph.
    backend = _run(Pool(), [(2, 3, 8, 8), (2, 3, 12, 12), (2, 3, 16, 20), (2, 3, 9, 11)])
    assert backend.graphs == 2
    # Under dynamic=True equal sizes share a symbol (duck sizing, guarded equal), as in
    # PyTorch: 16x20 recompiles once, with two symbols.
    backend = _run(Pool(), [(2, 3, 8, 8), (2, 3, 12, 12), (2, 3, 16, 20), (2, 3, 9, 11)],
                   dynamic=True)
    assert backend.graphs == 2


def test_dynamic_true_compiles_once():
    w = fusegrad.randn(4, 6)
    backend = _run(lambda x: mlp_step(x, w), [(2, 4), (3, 4), (5, 4)], dynamic=True)
    assert backend.graphs == 1


def test_dynamic_false_compiles_per_size():
    w = fusegrad.randn(4, 6)
    backend = _run(lambda x: mlp_step(x, w), [(2, 4), (3, 4), (5, 4)], dynamic=False)
    assert backend.graphs == 3


def test_automatic_dynamic_off_in_config():
    w = fusegrad.randn(4, 6)
    fusegrad._dynamo.config.automatic_dynamic_shapes = False
    try:
        backend = _run(lambda x: mlp_step(x, w), [(2, 4), (3, 4), (5, 4)])
    finally:
        fusegrad._dynamo.config.automatic_dynamic_shapes = True
    assert backend.graphs == 3


def test_mark_dynamic_and_mark_static():
    def f(x):
        return (x * 2).sum(0)

    backend = Counter()
    compiled = fusegrad.compile(f, backend=backend)
    for n in (2, 3, 5):
        x = fusegrad.randn(n, 4)
        fusegrad._dynamo.mark_dynamic(x, 0)
        _close(compiled(x), f(x))
    assert backend.graphs == 1
    backend = Counter()
    compiled = fusegrad.compile(f, backend=backend, dynamic=True)
    for n in (2, 3, 5):
        x = fusegrad.randn(n, 4)
        fusegrad._dynamo.mark_static(x, 0)
        _close(compiled(x), f(x))
    assert backend.graphs == 3
    with pytest.raises(AssertionError):
        fusegrad._dynamo.mark_dynamic(fusegrad.randn(2), 1)


def test_mark_dynamic_size_specialised_by_the_code_raises():
    from fusegrad.fx.experimental.symbolic_shapes import ConstraintViolationError

    def branch(x):
        if x.shape[0] == 4:
            return x + 1
        return x - 1

    def reshaped(x):
        return x.reshape(5, 3) * 2

    for f, n in ((branch, 4), (reshaped, 5)):
        x = fusegrad.randn(n, 3)
        fusegrad._dynamo.mark_dynamic(x, 0)
        with pytest.raises(ConstraintViolationError) as info:
            fusegrad.compile(f, backend="eager")(x)
        assert str(info.value).splitlines() == [
            "Constraints violated (L['x'].size()[0])! For more information, run with "
            'TORCH_LOGS="+dynamic".',
            f"  - You marked L['x'].size()[0] as dynamic but your code specialized it to be a "
            f"constant ({n}). If you're using mark_dynamic, either remove it or use "
            "maybe_mark_dynamic. If you're using Dim.DYNAMIC, replace it with either "
            "Dim.STATIC or Dim.AUTO."]
        # maybe_mark_dynamic lets the code specialise it; the result is eager's
        y = fusegrad.randn(n, 3)
        fusegrad._dynamo.maybe_mark_dynamic(y, 0)
        _close(fusegrad.compile(f, backend="eager")(y), f(y))
    # a marked size the code keeps symbolic compiles once for every size
    backend = Counter()
    compiled = fusegrad.compile(lambda x: x.reshape(x.shape[0] * 3) * 2, backend=backend)
    for n in (4, 6):
        x = fusegrad.randn(n, 3)
        fusegrad._dynamo.mark_dynamic(x, 0)
        _close(compiled(x), (x.reshape(n * 3) * 2))
    assert backend.graphs == 1


def test_sizes_zero_and_one_stay_static():
    def f(x):
        return x.sum(0) + x.shape[0]

    backend = _run(f, [(2, 3), (3, 3), (1, 3), (0, 3), (4, 3), (1, 3)])
    # 2, then 3 (symbolic), then 1 and 0 each static; 4 and 1 again reuse graphs.
    assert backend.graphs == 4
    for gm in backend.modules[2:]:
        assert not any(n.meta.get("symbol") for n in gm.graph.nodes)


def test_branch_on_symbolic_size_is_guarded():
    def f(x):
        if x.shape[0] > 4:
            return x * 2
        return x - 1

    backend = _run(f, [(2, 4), (3, 4), (5, 4), (7, 4), (6, 4), (4, 4)])
    assert backend.graphs == 3  # static 2, symbolic (<= 4), symbolic (> 4)


def test_equality_with_a_size_specialises():
    def f(x):
        if x.size(0) == 3:
            return x * 2
        return x - 1

    backend = _run(f, [(2, 4), (3, 4), (5, 4), (7, 4)])
    assert backend.graphs == 3


_TABLE = {1: 10.0, 2: 20.0, 3: 30.0}


@pytest.mark.parametrize("lookup", ["dict_get", "in_set", "hash"])
def test_symbolic_size_as_a_key_is_guarded(lookup):
    """A size used as a dict key, set member or hash specialises its value: a missed lookup
    compares nothing, so without that guard the graph of the first miss served every size."""
    def f(x):
        n = x.size(0)
        if lookup == "dict_get":
            return x * _TABLE.get(n, 1.0)
        if lookup == "in_set":
            return x * (2.0 if n in {1, 2, 3} else 5.0)
        return x * hash(n)

    _run(f, [(4, 2), (5, 2), (3, 2), (2, 2), (6, 2)])
    _run(f, [(4, 2), (5, 2), (3, 2), (2, 2)], dynamic=True)


def test_int_methods_of_a_symbolic_size_specialise():
    """`n.bit_length()`, `n.numerator`, `hasattr(n, "to_bytes")` of a size are the value's
    (specialised, so each value gets its graph), as they would be of an int."""
    def f(x):
        n = x.size(0)
        b = n.bit_length() if hasattr(n, "bit_length") else -1
        return x * b + n.numerator

    _run(f, [(4, 2), (5, 2), (3, 2), (2, 2), (6, 2), (9, 2), (16, 2)])
    _run(f, [(4, 2), (9, 2), (16, 2)], dynamic=True)


def test_reshape_and_view_with_symbolic_sizes():
    def f(x):
        n = x.shape[0]
        return x.reshape(-1), x.view(n, -1, 2).sum(2), x.reshape(n * 2, -1)

    assert _run(f, [(2, 4), (3, 4), (5, 4)]).graphs == 2
    assert _run(f, [(2, 4), (3, 6), (5, 8)], dynamic=True).graphs == 1


def test_size_arithmetic_and_factories():
    def f(x):
        return x.new_zeros(x.shape[0] // 2 + 1) + x.shape[0], fusegrad.ones(x.size(0), 2)

    backend = _run(f, [(2,), (3,), (5,), (8,)])
    assert backend.graphs == 2


def test_slices_aranges_repeats_and_shape_factories():
    # Sizes computed from symbols reach the graph as nodes (in slices too), never as the
    # example's values.
    def f(x):
        half = x[: x.shape[0] // 2] * 2
        return (half.sum(0), x[fusegrad.arange(x.shape[0] - 1)], fusegrad.zeros(x.shape) + x,
                x.unsqueeze(0).repeat(x.shape[0], 1, 1), x.new_ones(x.size()) * x)

    # torch.compile's counts for the same calls (test_compile_dynamic_torch.py): the slice
    # bound `x.shape[0] // 2` is guarded where it is clamped to the size.
    assert _run(f, [(2, 4), (3, 4), (5, 4), (8, 4)]).graphs == 3
    assert _run(f, [(2, 4), (3, 5), (5, 6), (8, 7)], dynamic=True).graphs == 3


def test_two_inputs_share_a_symbol():
    def f(x, y):
        return (x + y).sum(0) * x.shape[1]

    backend = _run(f, [((b, b + 2), (b, b + 2)) for b in (2, 3, 5)])
    assert backend.graphs == 2
    symbols = [n.name for n in backend.modules[1].graph.nodes if n.meta.get("symbol")]
    assert len(symbols) == 2  # x's two sizes; y's are the same symbols (guarded equal)
    compiled = fusegrad.compile(f, backend=backend)
    _run(f, [((2, 4), (2, 4)), ((3, 5), (3, 5))])
    x, y = fusegrad.randn(3, 5), fusegrad.randn(1, 5)  # broadcasting: another graph
    _close(compiled(x, y), f(x, y))


def test_symbolic_size_across_a_graph_break():
    def f(x):
        y = x * 2
        m = x.shape[0] * 2 + 1
        n = x.shape[0]
        print()  # a graph break: m, n and y are rebuilt after the first graph
        return y.sum(0) * m + n, y.view(n, -1)

    backend = _run(f, [(2, 3), (3, 3), (5, 3), (6, 3)])
    # Two graphs, each static then symbolic (m and n, ints in the frame after the break,
    # become integer inputs once they change).
    assert backend.graphs == 4
    assert any(n.name == "l_m_" for n in backend.modules[-1].graph.nodes)


def test_symbolic_size_is_an_int_to_the_program():
    def f(x, n):
        k = x.shape[0]
        if isinstance(k, int) and type(n) is int and isinstance(n, int):
            return x * k + n
        return x

    backend = Counter()
    compiled = fusegrad.compile(f, backend=backend)
    for b in (2, 3, 5):
        x = fusegrad.randn(b, 2)
        _close(compiled(x, b + 1), f(x, b + 1))
    assert backend.graphs == 2


def test_explain_shows_size_guards():
    def f(x):
        return x.view(x.shape[0], -1).sum(1)

    x = fusegrad.randn(3, 4)
    fusegrad._dynamo.mark_dynamic(x, 0)
    out = fusegrad._dynamo.explain(f)(x)
    assert out.graph_count == 1
    assert "2 <= L['x'].size()[0]" in out.out_guards


SIZE_ARITHMETIC = {
    "pow_neg_half": lambda x: x * x.shape[0] ** -0.5,
    "pow_int": lambda x: x * x.shape[0] ** 2,
    "int_pow_size": lambda x: x * 2 ** x.shape[0],
    "float_pow_size": lambda x: x * 1.5 ** x.shape[0],
    "int_of_size_times_float": lambda x: x[: int(x.shape[0] * 0.5)] * 2,
    "float_minus_size": lambda x: x * (10.5 - x.shape[0]) + (x.shape[0] % 2.5),
    "divmod": lambda x: x * divmod(x.shape[0], 3)[1],
    "abs": lambda x: x * abs(x.shape[0] - 7),
}


@pytest.mark.parametrize("name", list(SIZE_ARITHMETIC))
def test_symbolic_sizes_in_float_arithmetic_and_powers_compile(name):
    # A symbolic size in a power or beside a float (`q.size(-1) ** -0.5`) is captured (its
    # value specialised where the result is a float), not a translator failure.
    f = SIZE_ARITHMETIC[name]
    for dynamic in (True, None):
        fusegrad._dynamo.reset()
        compiled = fusegrad.compile(f, backend=Counter(), dynamic=dynamic,
                                    fullgraph=dynamic is True)
        for n in (4, 6, 9):
            x = fusegrad.arange(float(n))
            _close(compiled(x), f(x))


def test_int_of_a_symbolic_item_keeps_it_symbolic():
    # `int(n.item())` after the break: the int is an input of the resumed graph, symbolic
    # from the start with dynamic=True (int() of it no longer specialises it per value)
    def f(x, n):
        k = int(n.item())
        return x[:k] * 2

    for dynamic, most in ((True, 2), (None, 3)):
        fusegrad._dynamo.reset()
        backend = Counter()
        compiled = fusegrad.compile(f, backend=backend, dynamic=dynamic)
        for k in range(2, 14):
            x, n = fusegrad.randn(20), fusegrad.tensor(k)
            _close(compiled(x, n), f(x, n))
        assert backend.graphs <= most


# Inputs laid out densely in another order of their dims (a transpose, a permute,
# channels_last, nonzero()'s column-major result) get symbolic sizes too: their strides are
# products of the sizes in that order, and the guard checks the order.
LAYOUTS = {
    "transposed": (lambda x: x.t(), [(b, 5) for b in (3, 4, 6, 9, 13)]),
    "permuted": (lambda x: x.permute(2, 0, 1), [(3, b, 4) for b in (2, 3, 5, 7)]),
    "channels_last": (lambda x: x.contiguous(memory_format=fusegrad.channels_last),
                      [(b, 2, 6, 6) for b in (3, 4, 5, 7)]),
}


def layout_program(x):
    y = (x * 2 + x.sum(0)).relu()
    flat = x.reshape(-1)  # a copy for these layouts
    if x.is_contiguous():
        return y, flat, x.stride()
    return y * 3, flat, x.stride(), x.contiguous().view(-1)[:4]


@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("dynamic", [None, True])
def test_dense_layouts_get_symbolic_sizes(name, dynamic):
    make, shapes = LAYOUTS[name]
    # (every test compiles `layout_program`, whose recompile limit all its compiled wrappers
    # share: each starts from a reset, as a torch program would have to)
    fusegrad._dynamo.reset()
    backend = Counter()
    compiled = fusegrad.compile(layout_program, backend=backend, dynamic=dynamic)
    fusegrad.manual_seed(0)
    for shape in shapes:
        x = make(fusegrad.randn(*shape))
        out, ref = compiled(x), layout_program(x)
        assert out[2] == ref[2]  # the strides the graph read are this input's
        _close(out[:2] + out[3:], ref[:2] + ref[3:])
    assert backend.graphs == (1 if dynamic else 2)


def test_a_layout_change_recompiles_and_is_named(log_lines):
    fusegrad._dynamo.reset()  # (as above: a fresh recompile limit for `layout_program`)
    compiled = fusegrad.compile(layout_program, backend=Counter(), dynamic=True)
    for x in (fusegrad.randn(4, 3).t(), fusegrad.randn(6, 3).t(), fusegrad.randn(3, 6)):
        out, ref = compiled(x), layout_program(x)
        assert out[2] == ref[2]
        _close(out[:2] + out[3:], ref[:2] + ref[3:])
    text = "\n".join(log_lines)
    # The guard prints the strides that are products of symbolic sizes as None, as Dynamo's.
    assert "check_tensor(L['x'], Tensor, size=[None, None], stride=[1, None]" in text
    assert "tensor 'L['x']' stride mismatch at index 0. expected 1, actual 6" in text


def test_a_view_that_needs_contiguity_fails_as_eager():
    def f(x):
        return x.view(-1) * 2

    compiled = fusegrad.compile(f, backend=Counter(), dynamic=True)
    x = fusegrad.randn(4, 3).t()
    with pytest.raises(RuntimeError) as eager:
        f(x)
    with pytest.raises(RuntimeError) as captured:
        compiled(x)
    assert str(captured.value) == str(eager.value)


def test_gradients_through_transposed_inputs_of_new_sizes():
    fusegrad.manual_seed(0)  # (generated code sums in its own order: float32 rounding)
    w = fusegrad.randn(5, 3, requires_grad=True)

    def f(x):
        return ((x @ w).tanh() * x.sum(1, keepdim=True)).sum()

    backend = Counter()
    compiled = fusegrad.compile(f, backend=backend)
    for b in (3, 4, 6, 9):
        base = fusegrad.randn(5, b, requires_grad=True)
        x = base.t()
        got = fusegrad.autograd.grad(compiled(x), (base, w))
        want = fusegrad.autograd.grad(f(x), (base, w))
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
    assert backend.graphs == 2


def test_a_stepped_slice_stays_static():
    # Strides that are not products of the sizes (every other column): static sizes, one
    # graph per size, each with eager's values.
    backend = _run(lambda x: x[:, ::2] * 2 + 1, [(b, 6) for b in (3, 4, 6)])
    assert backend.graphs >= 2
    compiled = fusegrad.compile(lambda x: x * 2 + 1, backend=Counter())
    for b in (3, 4, 6):
        x = fusegrad.randn(b, 6)[:, ::2]
        _close(compiled(x), x * 2 + 1)


def _same(a, b) -> None:
    """Equal values and types, tensors equal in dtype and values (integer results exact)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, fusegrad.Tensor):
        assert a.dtype == b.dtype and fusegrad.equal(a, b), (a, b)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b, (a, b)


def test_integer_tensors_with_a_symbolic_int_keep_their_dtype():
    # A dynamic int (or size) is an int in type promotion: `x + n` stays int64, and what
    # follows its dtype (a branch, cat with an int tensor) goes as eagerly.
    def f(x, n):
        y = x + n
        if y.is_floating_point():
            y = y * 0.5
        z = fusegrad.full((3,), n)
        return (y, z, fusegrad.cat([y, z]), str((x + n).dtype), fusegrad.where(x > 1, n, 0),
                x.long().clamp(min=n), x.int().add(n), n - x, x // n, x + x.shape[0])

    compiled = fusegrad.compile(f, backend=Counter())
    x = fusegrad.tensor([1, 2, 3])
    for n in (2, 3, 7):
        _same(compiled(x, n), f(x, n))


def test_repr_of_symbolic_values_is_their_value():
    # str(tuple(x.shape)) reprs each size: the program sees numbers, not symbol names.
    def f(x, t):
        n = x.shape[0]
        # (percent formats: what programs write)
        return (str(tuple(x.shape)), repr(n), f"{x.shape}", str([n]),
                "%r" % n, str(np.array([n]).dtype), "%r" % t,  # noqa: UP031
                {t: 1}, x * t)

    compiled = fusegrad.compile(f, backend=Counter(), dynamic=True)
    for n, t in ((3, 0.5), (5, 1.5), (6, 2.5)):
        x = fusegrad.randn(n, 2)
        _same(compiled(x, t), f(x, t))


def test_tensors_made_of_symbolic_sizes_stay_symbolic():
    # `tensor(x.shape)` and friends are graph ops on the sizes (as Dynamo's `_refs.tensor`),
    # not constants guarded per size: one graph for every size.
    def f(x, t):
        n = x.shape[0]
        return (x * 2, fusegrad.tensor(x.shape), fusegrad.tensor([n, 3]) + 1,
                x / fusegrad.tensor(x.shape[-1]).sqrt(), fusegrad.tensor([[n], [n * 2]]),
                fusegrad.tensor(t) * x.sum(), fusegrad.as_tensor([n - 1]))

    backend = Counter()
    compiled = fusegrad.compile(f, backend=backend, dynamic=True)
    for n, t in ((3, 0.5), (5, 1.5), (7, 2.5), (4, 3.5)):
        x = fusegrad.randn(n, n + 1)
        _same(compiled(x, t), f(x, t))
    assert backend.graphs == 1


def test_a_negative_base_of_a_power_keeps_its_brackets():
    # Generated code `-4 ** x` would be `-(4 ** x)`.
    def f(x, n):
        return n ** x, (-2.0) ** x.float()

    for dynamic in (True, False):
        fusegrad._dynamo.reset()
        backend = Counter()
        compiled = fusegrad.compile(f, backend=backend, dynamic=dynamic)
        x = fusegrad.tensor([0, 1, 2, 3])
        for n in (-4, -3, 5):
            _same(compiled(x, n), f(x, n))
    assert "(-2.0) **" in backend.modules[0].code


def test_a_returned_shape_keeps_its_symbols():
    """`return y, x.shape` of a dynamic size: the shape is made again from the symbol's value
    each call (it was specialised, which `mark_dynamic` refuses with ConstraintViolation)."""
    counter = Counter()

    def f(x):
        return x * 1, x.shape, (x.shape[0] + 1, 3)

    compiled = fusegrad.compile(f, backend=counter)
    for n in (2, 3, 4):
        x = fusegrad.ones(n)
        fusegrad._dynamo.mark_dynamic(x, 0)
        y, shape, pair = compiled(x)
        assert type(shape) is fusegrad.Size and shape == (n,) and pair == (n + 1, 3)
        np.testing.assert_array_equal(y.numpy(), np.ones(n))
    assert counter.graphs == 1


def test_split_of_a_dynamic_dim_keeps_it_symbolic():
    """`x.split(2)` of a dim marked dynamic: the pieces' count is guarded (one graph per count,
    as torch.compile's), the last piece's size stays an expression of the dim (it was fixed,
    which mark_dynamic refuses with ConstraintViolationError)."""
    counter = Counter()

    def f(x):
        return x.split(2)[-1] * 2, len(x.split(2)), x.split(2)[0] + 1

    compiled = fusegrad.compile(f, backend=counter)
    for n in (4, 6, 4, 6):  # (a last piece of 1 would fix the size, as in torch.compile)
        x = fusegrad.arange(float(n))
        fusegrad._dynamo.mark_dynamic(x, 0)
        got, want = compiled(x), f(x)
        assert got[1] == want[1]
        for a, b in ((got[0], want[0]), (got[2], want[2])):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert counter.graphs == 2  # two pieces, three
