"""Capture counted as torch.compile (2.13, backend="eager") counts, where fusegrad differed:

- `obj.name = value` where `name` is a property of the class with a Python setter (a
  module's inside `forward`, an object's from outside) inlines the setter, as Dynamo does;
- `@no_grad()` / `@enable_grad()` applied to a function defined in the frame makes the
  decorator's wrapper, inlined where it is called: one frame, one graph;
- the StopIteration of `gen.send(v)` / `gen.__next__()` on a used-up generator made in the
  graph is raised in the program, where the frame's own `try` catches it, holding what the
  generator returned.

Programs and tables as `capture_support` describes."""

import pytest
from capture_support import compile_counted, counts_test, fg, torch
from program_support import maybe_compile

# (unique graphs, graph breaks) torch.compile(backend="eager") gives each program (3.11).
_TORCH_COUNTS = {
    "module_property_setter": (1, 0), "module_setter_of_a_graph_tensor": (1, 0),
    "object_property_setter": (2, 0),  # (the second call sees another count: recompiled)
    "no_grad_decorated_def": (1, 0), "enable_grad_decorated_def": (1, 0),
    "send_to_used_up_generator": (1, 0), "used_up_generator_return_value": (1, 0),
    "dunder_next_of_used_up_generator": (1, 0),
}


# ---------------------------------------------------------------- property setters


def _scaled_module(T):
    class Scaled(T.nn.Module):
        def __init__(self):
            super().__init__()
            self._s = 1.0

        @property
        def s(self):
            return self._s

        @s.setter
        def s(self, v):
            self._s = v * 2

        def forward(self, x):
            self.s = 2.0
            return x * self.s

    return Scaled()


def module_property_setter(T, compiled):
    m = _scaled_module(T)
    run = maybe_compile(T, compiled)(m)
    x = T.ones(2, requires_grad=True)
    return [run(x), m._s, run(x), m._s]


def module_setter_of_a_graph_tensor(T, compiled):
    class Tracked(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.last = None

        @property
        def total(self):
            return self.last

        @total.setter
        def total(self, v):
            self.last = v + 1

        def forward(self, x):
            self.total = x.sum()
            return x * self.total

    m = Tracked()
    run = maybe_compile(T, compiled)(m)
    return [run(T.arange(3.0)), m.last]


class _Box:
    def __init__(self):
        self._v = 0.0
        self.calls = 0

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self.calls += 1
        self._v = value


def object_property_setter(T, compiled):
    def f(box, x):
        box.v = 3.0
        return x + box.v

    box = _Box()
    run = maybe_compile(T, compiled)(f)
    return [run(box, T.ones(2)), run(box, T.ones(2)), box.v, box.calls]


# ---------------------------------------------------------------- decorated definitions


def no_grad_decorated_def(T, compiled):
    def f(x):
        @T.no_grad()
        def h(t):
            return t * 2

        y = h(x)
        return y + 1, y.requires_grad, T.is_grad_enabled()

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2, requires_grad=True)), T.is_grad_enabled()]


def enable_grad_decorated_def(T, compiled):
    def f(x):
        with T.no_grad():
            @T.enable_grad()
            def h(t):
                return t * 2

            y = h(x)
            return y + 1, y.requires_grad, T.is_grad_enabled()

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2, requires_grad=True)), T.is_grad_enabled()]


# ---------------------------------------------------------------- used-up generators


def send_to_used_up_generator(T, compiled):
    def f(x):
        def g():
            yield 1

        it = g()
        next(it)
        try:
            it.send(x)
        except StopIteration:
            x = x + 1
        return x * 2

    return maybe_compile(T, compiled)(f)(T.ones(2))


def used_up_generator_return_value(T, compiled):
    def f(x):
        def g():
            yield 1
            return 5

        it = g()
        next(it)
        values = []
        for _ in range(2):  # (the second StopIteration holds no value)
            try:
                it.send(x)
            except StopIteration as e:
                values.append((e.value, e.args))
        return x * 2, values

    return maybe_compile(T, compiled)(f)(T.ones(2))


def dunder_next_of_used_up_generator(T, compiled):
    def f(x):
        def g():
            yield x + 1

        it = g()
        a = it.__next__()
        try:
            it.__next__()
        except StopIteration as e:
            return a * 2, e.value, e.args
        return a

    return maybe_compile(T, compiled)(f)(T.ones(2))


_PROGRAMS = [module_property_setter, module_setter_of_a_graph_tensor, object_property_setter,
             no_grad_decorated_def, enable_grad_decorated_def, send_to_used_up_generator,
             used_up_generator_return_value, dunder_next_of_used_up_generator]

test_counts_as_torch = counts_test(_PROGRAMS, _TORCH_COUNTS)


@pytest.mark.parametrize("prog", [no_grad_decorated_def, enable_grad_decorated_def],
                         ids=["no_grad", "enable_grad"])
def test_decorated_def_is_one_frame_as_torch(prog):
    assert compile_counted(fg, prog)[0] == 1
    if torch is not None:
        assert compile_counted(torch, prog)[0] == 1


def test_setter_replaced_after_capture_recaptures():
    """The property is guarded: a class whose setter changes is captured again."""
    m = _scaled_module(fg)
    run = fg.compile(m, backend="eager")
    x = fg.ones(2)
    assert run(x).tolist() == [4.0, 4.0]
    cls = type(m)
    cls.s = property(cls.s.fget, lambda self, v: setattr(self, "_s", v * 3))
    assert run(x).tolist() == [6.0, 6.0] == m(x).tolist()
