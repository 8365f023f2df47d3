"""The compiler's user-facing marks and stance: `is_compiling`, `allow_in_graph`,
`assume_constant_result`, `set_stance`, the default backend and `recompile_limit`, checked
against eager execution of the same code and against PyTorch's own behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from compile_support import Counter, tolerances

import fusegrad

torch = pytest.importorskip("torch")


def both(fn):
    """`fn(lib)` for fusegrad and for torch."""
    return fn(fusegrad), fn(torch)


def test_is_compiling_is_true_only_while_captured():
    def run(lib):
        def f(x):
            return x + 1, lib.compiler.is_compiling(), lib.compiler.is_dynamo_compiling(), \
                lib.compiler.is_exporting()

        out = lib.compile(f, backend="eager")(lib.ones(2))
        return out[1:], (lib.compiler.is_compiling(), lib._dynamo.is_compiling())

    ours, theirs = both(run)
    assert ours == theirs == ((True, True, False), (False, False))


def test_a_branch_on_is_compiling_is_decided_while_capturing():
    counter = Counter()

    def f(x):
        if fusegrad.compiler.is_compiling():
            return x * 2
        return x * 3

    x = fusegrad.arange(4.0)
    np.testing.assert_array_equal(fusegrad.compile(f, backend=counter)(x).numpy(),
                                  x.numpy() * 2)
    np.testing.assert_array_equal(f(x).numpy(), x.numpy() * 3)
    assert counter.graphs == 1


def test_allow_in_graph_records_one_call_and_differentiates_through_it():
    @fusegrad.compiler.allow_in_graph
    def op(a, b):
        return a * b + a.sin()

    def f(x):
        return op(x, x).exp().sum()

    counter = Counter()
    compiled = fusegrad.compile(f, backend=counter)
    x = fusegrad.linspace(-1, 1, 6, dtype=fusegrad.float64, requires_grad=True)
    x2 = x.detach().requires_grad_()
    out, expected = compiled(x), f(x2)
    out.backward()
    expected.backward()
    np.testing.assert_allclose(out.item(), expected.item(), **tolerances(fusegrad.float64))
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), **tolerances(fusegrad.float64))
    graph = fusegrad.compiler.last_graphs(compiled)[0]
    assert [n.target for n in graph.graph.nodes if n.op == "call_function"][0] is op
    assert fusegrad.compiler.allow_in_graph([op, f]) == [op, f]
    with pytest.raises(AssertionError, match="allow_in_graph expects a callable"):
        fusegrad.compiler.allow_in_graph(3)


def test_assume_constant_result_keeps_the_first_answer():
    calls = []

    def scale():
        calls.append(1)
        return float(len(calls))

    fusegrad.compiler.assume_constant_result(scale)
    compiled = fusegrad.compile(lambda x: x * scale(), backend=Counter())
    x = fusegrad.ones(3)
    assert compiled(x).tolist() == [1.0, 1.0, 1.0]
    assert compiled(x).tolist() == [1.0, 1.0, 1.0]  # no guard re-reads it
    assert len(calls) == 1


def _stance_script(lib):
    """What each stance does to one compiled function, as a list of observations."""
    seen = []
    counter = Counter() if lib is fusegrad else "eager"

    def f(x):
        return x.sin() + 1, lib.compiler.is_compiling()

    cf = lib.compile(f, backend=counter)
    seen.append(cf(lib.ones(3))[1])
    with lib.compiler.set_stance("force_eager"):
        seen.append(cf(lib.ones(3))[1])
    with lib.compiler.set_stance("fail_on_recompile"):
        seen.append(cf(lib.ones(3))[1])  # the graph fits: no recompile
        try:
            cf(lib.ones(2, 2))
        except RuntimeError as e:
            seen.append(str(e).split(". filename")[0])
    with lib.compiler.set_stance("eager_on_recompile"):
        seen.append(cf(lib.ones(2, 2))[1])  # does not fit: eagerly
        seen.append(cf(lib.ones(3))[1])  # fits: the graph
    seen.append(cf(lib.ones(2, 2))[1])  # default again: recompiles

    @lib.compiler.set_stance("force_eager")
    def under(x):
        return cf(x)[1]

    seen.append(cf(lib.ones(3))[1])  # decorating did not set the stance
    seen.append(under(lib.ones(3)))
    lib.compiler.set_stance("force_eager")  # plain call: holds until changed
    seen.append(cf(lib.ones(3))[1])
    lib.compiler.set_stance("default")
    seen.append(cf(lib.ones(3))[1])
    g = lib.compile(lambda x: (x + 1, lib.compiler.is_compiling()), backend=counter)
    with lib.compiler.set_stance("eager_then_compile"):
        seen.append((g(lib.ones(1))[1], g(lib.ones(1))[1]))
    try:
        lib.compiler.set_stance("force_eager", force_backend="eager")
    except RuntimeError as e:
        seen.append(str(e))
    return seen


def test_stances_behave_as_pytorch():
    ours, theirs = both(_stance_script)
    assert ours == theirs
    assert "Detected recompile when torch.compile stance is 'fail_on_recompile'" in ours


def test_fail_on_recompile_names_the_function_and_the_guard():
    def f(x):
        return x.cos()

    cf = fusegrad.compile(f, backend=Counter())
    cf(fusegrad.ones(3))
    with fusegrad.compiler.set_stance("fail_on_recompile"), \
            pytest.raises(RuntimeError) as info:
        cf(fusegrad.ones(2, 2))
    text = str(info.value)
    assert "function name: 'f'" in text and __file__ in text
    assert "triggered by the following guard failure(s):\n    - " in text
    assert "rank" in text


def test_an_unknown_stance_is_refused_and_changes_nothing():
    with pytest.raises(RuntimeError, match="invalid torch.compile stance 'bogus'"):
        fusegrad.compiler.set_stance("bogus")
    cf = fusegrad.compile(lambda x: fusegrad.compiler.is_compiling(), backend=Counter())
    assert cf(fusegrad.ones(1)) is True


def test_force_backend_runs_every_compiled_function_under_it():
    counter, forced = Counter(), Counter()
    cf = fusegrad.compile(lambda x: x * 2, backend=counter)
    with fusegrad.compiler.set_stance(force_backend=forced):
        assert cf(fusegrad.ones(2)).tolist() == [2.0, 2.0]
    assert (counter.graphs, forced.graphs) == (0, 1)
    cf(fusegrad.ones(2))
    assert (counter.graphs, forced.graphs) == (1, 1)


def test_default_backend_is_used_when_none_is_given():
    def run(lib):
        before = lib.compiler.get_default_backend()
        lib.compiler.set_default_backend("eager")
        during = lib.compiler.get_default_backend()
        lib.compiler.set_default_backend(None)
        return before, during, lib.compiler.get_default_backend()

    ours, theirs = both(run)
    assert ours == theirs == ("inductor", "eager", "inductor")
    counter = Counter()
    fusegrad.compiler.set_default_backend(counter)
    try:
        cf = fusegrad.compile(lambda x: x + 1)
        cf(fusegrad.ones(2))
    finally:
        fusegrad.compiler.set_default_backend(None)
    assert counter.graphs == 1
    # An unknown name is taken as it is and fails at the next compile, as in PyTorch.
    fusegrad.compiler.set_default_backend("no-such-backend")
    try:
        assert fusegrad.compiler.get_default_backend() == "no-such-backend"
        with pytest.raises(fusegrad._dynamo.exc.InvalidBackend,
                           match="Invalid backend: 'no-such-backend', see "):
            fusegrad.compile(lambda x: x + 1)
    finally:
        fusegrad.compiler.set_default_backend(None)
    assert fusegrad.compiler.get_default_backend() == "inductor"


def test_recompile_limit_per_function():
    counter = Counter()
    cf = fusegrad.compile(lambda x: x + 1, backend=counter, recompile_limit=1, dynamic=False)
    with pytest.warns(UserWarning, match="recompile_limit \\(1\\)"):
        for n in (1, 2, 3):
            np.testing.assert_array_equal(cf(fusegrad.ones(n)).numpy(), np.full(n, 2.0))
    assert counter.graphs == 1


def test_cudagraph_mark_step_begin_is_callable_on_cpu():
    assert fusegrad.compiler.cudagraph_mark_step_begin() is None
    assert torch.compiler.cudagraph_mark_step_begin() is None


def test_cudagraphs_backend_runs_cpu_graphs_as_aot_eager():
    """On CPU tensors the cudagraphs backend skips CUDA graphs (saying so), as PyTorch's,
    and the values and gradients are eager's."""
    def f(x):
        return (x * 2).sin().sum()

    x = fusegrad.arange(4.0, requires_grad=True)
    y = fusegrad.arange(4.0, requires_grad=True)
    compiled = fusegrad.compile(f, backend="cudagraphs")
    compiled(x).backward()
    f(y).backward()
    assert fusegrad.equal(x.grad, y.grad)
    assert "cudagraphs" in fusegrad._dynamo.list_backends()


def test_unknown_backend_name():
    with pytest.raises(fusegrad._dynamo.exc.InvalidBackend) as info:
        fusegrad.compile(lambda x: x, backend="nosuch")
    assert str(info.value) == ("Invalid backend: 'nosuch', see `torch._dynamo.list_backends()` "
                               "for available backends.")
    assert isinstance(info.value, RuntimeError)
