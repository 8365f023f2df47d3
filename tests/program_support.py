"""Comparing what a program returned under torch and under fusegrad: tensors as their
dtype, shape, values, grad_fn name and requires_grad, containers recursively; compiled runs
against eager ones and graph breaks against torch's. `program_tests` makes a file of
programs' four tests from its tables (tolerances, inductor runs, known gaps, torch's breaks)."""

import collections
import contextlib
import functools
import inspect
import io
import re
import warnings

import numpy as np
import pytest


def plain(x, lib):
    """Tensors as (dtype, shape, float64 values, grad_fn name, requires_grad), dtypes as their
    names, containers recursively, so that the two runs can be compared."""
    if isinstance(x, lib.Tensor):
        d = x.detach()
        values = d.to(lib.float64).numpy() if d.is_floating_point() else d.numpy()
        name = type(x.grad_fn).__name__ if x.grad_fn is not None else None
        return ("tensor", str(x.dtype), tuple(x.shape), values, name, x.requires_grad)
    if isinstance(x, (lib.dtype, lib.device)):
        return str(x)
    if isinstance(x, dict):
        return {k: plain(v, lib) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v, lib) for v in x]
    return x


def compare(a, b, path, rtol, atol):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b[0] == "tensor", path
        assert a[1:3] == b[1:3] and a[4:] == b[4:], (path, a[1:3], b[1:3], a[4:], b[4:])
        np.testing.assert_allclose(b[3], a[3], rtol=rtol, atol=atol, err_msg=path)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), path
        for k in a:
            compare(a[k], b[k], f"{path}.{k}", rtol, atol)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]", rtol, atol)
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=rtol, abs=atol), path
    else:
        assert a == b, path


def run_program(prog, lib):
    """(recorded values made plain, the uncaught error as (type name, message) or None, the
    printed text with addresses blanked) of `prog(lib)`, warnings silenced."""
    out = io.StringIO()
    error = result = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(out):
            try:
                result = prog(lib)
            except Exception as e:  # the program's uncaught error is part of its outcome
                error = (type(e).__name__, str(e))
    return plain(result, lib), error, re.sub(r"0x[0-9a-f]+", "0x?", out.getvalue())


def observe_compiled(T, prog, compiled):
    """(what `prog(T, compiled)` recorded made plain, its printed text, (unique graphs, graph
    breaks)) of one run from a reset, compiled with backend="eager" or not, warnings
    silenced."""
    T._dynamo.reset()
    counters = T._dynamo.utils.counters
    counters.clear()
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore")
        result = prog(T, "eager" if compiled else False)
    counts = (counters["stats"]["unique_graphs"], sum(counters["graph_break"].values()))
    return plain(result, T), out.getvalue(), counts


def check_counts_as_torch(prog, fusegrad, torch, counts: dict, torch_values: bool = True):
    """Compiled fusegrad gives eager fusegrad's values and printed text, and the counts of
    graphs and breaks `counts` records for `prog` (torch.compile's, backend="eager"); where
    `torch` is installed (None on the Pythons without it), eager fusegrad gives torch's
    values (`torch_values`) and torch still gives those counts."""
    want, got = observe_compiled(fusegrad, prog, False), observe_compiled(fusegrad, prog, True)
    compare(want[0], got[0], prog.__name__, 1e-6, 1e-6)
    assert got[1] == want[1]
    assert got[2] == counts[prog.__name__], prog.__name__
    if torch is not None:
        if torch_values:
            compare(observe_compiled(torch, prog, False)[0], want[0], prog.__name__, 1e-5, 1e-6)
        assert observe_compiled(torch, prog, True)[2] == counts[prog.__name__]


def check_values_as_eager(prog, fusegrad, backend: str = "eager"):
    """`prog` compiled by fusegrad with `backend` gives eager fusegrad's values and printed
    text (warnings silenced). Under a backend that traces the graph, a result with history
    has the compiled function's node (`CompiledFunctionBackward`, as torch's): its node's
    name is not compared there."""
    want = observe_compiled(fusegrad, prog, False)
    fusegrad._dynamo.reset()
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore")
        got = plain(prog(fusegrad, backend), fusegrad)
    if backend != "eager":
        want, got = (_without_node_names(want[0]), want[1]), _without_node_names(got)
    compare(want[0], got, prog.__name__, 1e-6, 1e-6)
    assert out.getvalue() == want[1]


def _without_node_names(x):
    """A plain result (`plain`) with its tensors' grad_fn names blanked (requires_grad
    kept)."""
    if isinstance(x, tuple) and x and x[0] == "tensor":
        return x[:4] + (None if x[4] is None else "?",) + x[5:]
    if isinstance(x, (list, tuple)):
        return type(x)(_without_node_names(v) for v in x)
    if isinstance(x, dict):
        return {k: _without_node_names(v) for k, v in x.items()}
    return x


def check_program(prog, torch, fusegrad, rtol=1e-4, atol=1e-5):
    """Run `prog` with PyTorch and with fusegrad: the same printed text, no error, and the
    same recorded values (`compare`)."""
    want, want_error, want_text = run_program(prog, torch)
    got, got_error, got_text = run_program(prog, fusegrad)
    assert got_error == want_error
    assert want_error is None  # a program that fails under PyTorch tests nothing
    assert got_text == want_text
    compare(want, got, "result", rtol, atol)


def error_of(fn):
    """The (type name, message) of what `fn()` raises, or None: a program's record of a
    deliberate mistake."""
    try:
        fn()
    except Exception as e:  # (any type: the mistake's error is what is compared)
        return type(e).__name__, str(e)
    return None


def maybe_compile(torch, compiled):
    """`torch.compile` with the backend `compiled` names when a compiled run is asked for,
    else the identity (a program's `compiled` argument)."""
    if not compiled:
        return lambda m: m
    return functools.partial(torch.compile, backend=compiled)


@contextlib.contextmanager
def logged(artifact: str, starts: tuple):
    """The messages of fusegrad's log `artifact` starting with one of `starts`, logged while
    the block runs (a list, filled as they come)."""
    from fusegrad.compiler import logs

    found, emit = [], logs.emit

    def record(kind, message):
        if kind == artifact and message.startswith(starts):
            found.append(message)
        emit(kind, message)

    logs.emit = record
    try:
        yield found
    finally:
        logs.emit = emit


def compiler_fallbacks():
    """The messages of the graphs AOT autograd or the code generator gave up on (run as FX
    code or eagerly instead), logged while the block runs."""
    return logged("graph_breaks", ("AOT autograd", "inductor:"))


def break_count(lib, prog):
    """The graph breaks `prog` compiled with backend="eager" takes under `lib` (torch or
    fusegrad), summed over the reasons, and the reasons."""
    counters = lib._dynamo.utils.counters
    lib._dynamo.reset()
    counters.clear()
    _, error, _ = run_program(functools.partial(prog, compiled="eager"), lib)
    assert error is None
    assert counters["stats"]["unique_graphs"] >= 1
    # Reasons by their first line (torch's messages go on with hints and debug context), a
    # break counted under both counters counted once.
    reasons = {}
    for kind in ("graph_break", "unimplemented"):
        found = collections.Counter()
        for reason, n in counters[kind].items():
            found[reason.split("\n")[0]] += n
        for reason, n in found.items():
            reasons[reason] = max(reasons.get(reason, 0), n)
    return sum(reasons.values()), reasons


def check_breaks_within_torchs(fusegrad, prog, torch_breaks: dict) -> None:
    """`prog` under fusegrad breaks its graphs no more often than torch (`torch_breaks`: the
    programs torch breaks, by name; none where torch captures whole)."""
    count, reasons = break_count(fusegrad, prog)
    assert count <= torch_breaks.get(prog.__name__, 0), reasons


def check_torch_breaks(torch, prog, torch_breaks: dict) -> None:
    """torch breaks `prog`'s graphs at least as often as `torch_breaks` records, and captures
    the programs it does not name whole (what `check_breaks_within_torchs` relies on)."""
    count, reasons = break_count(torch, prog)
    if prog.__name__ in torch_breaks:
        assert count >= torch_breaks[prog.__name__], reasons
    else:
        assert count == 0, reasons


def check_compiled(prog, backend: str, fusegrad, gap: str | None = None) -> None:
    """`prog` compiled with `backend` gives eager fusegrad's values, text and errors; under
    AOT backends no graph runs eagerly, unless `gap` names a known fallback (then one must
    still happen: a closed gap is taken off its table)."""
    want, want_error, want_text = run_program(prog, fusegrad)
    with compiler_fallbacks() as fallbacks:
        got, got_error, got_text = run_program(functools.partial(prog, compiled=backend),
                                               fusegrad)
    assert got_error == want_error is None
    assert got_text == want_text
    compare(want, got, "compiled", 1e-5, 1e-5)
    if backend != "eager":
        # AOT autograd and the code generator compile every graph: none run eagerly
        if gap:
            assert fallbacks, f"closed, take it off its table of gaps: {gap}"
        else:
            assert not fallbacks, fallbacks


_BACKENDS = ("eager", "aot_eager", "inductor")


def _strict_xfails(params: list, gaps: dict, name_of) -> list:
    """`params`, those whose program `gaps` names as strict xfails giving the gap's reason."""
    return [pytest.param(*(p if isinstance(p, tuple) else (p,)), marks=pytest.mark.xfail(
        strict=True, reason=gaps[name_of(p)])) if name_of(p) in gaps else p for p in params]


def program_tests(programs: list, torch, fusegrad, *, tolerances: dict | None = None,
                  on_inductor: set | None = None, off_inductor: frozenset | set = frozenset(),
                  eager_backend_only: frozenset | set = frozenset(),
                  aot_gaps: dict | None = None, compiled_gaps: dict | None = None,
                  torch_breaks: dict | None = None, capture_gaps: dict | None = None) -> tuple:
    """A file of programs' four tests, to bind to their names at the file's end:
    `test_program` (torch against fusegrad, at `tolerances` by name, else rtol 1e-4 and atol
    1e-5), `test_compiled_matches_eager` (each program that compiles when asked, under each
    backend, against eager fusegrad), `test_compiled_graph_breaks` (fusegrad breaks no more
    often than `torch_breaks` records) and `test_torch_graph_breaks` (torch breaks as recorded).

    A program runs on inductor when it is in `on_inductor` (every program where None) and not
    in `off_inductor`, on eager only when in `eager_backend_only`. `aot_gaps` maps (program,
    backend) to a known AOT fallback (`check_compiled`'s gap); the programs of `compiled_gaps`
    (compiled values or errors that differ) and of `capture_gaps` (more breaks than torch) are
    strict xfails giving their minimal repro, a compiled gap on its break count too."""
    tolerances, aot_gaps = tolerances or {}, aot_gaps or {}
    compiled_gaps, torch_breaks = compiled_gaps or {}, torch_breaks or {}
    break_gaps = {**(capture_gaps or {}), **compiled_gaps}
    compiled = [p for p in programs
                if "_maybe_compile(torch, compiled)" in inspect.getsource(p)]
    runs = [(p, b) for p in compiled for b in _BACKENDS
            if not (b == "inductor" and (p.__name__ in off_inductor or (
                on_inductor is not None and p.__name__ not in on_inductor)))
            and not (b != "eager" and p.__name__ in eager_backend_only)]

    @pytest.mark.parametrize("prog", programs, ids=[p.__name__ for p in programs])
    def test_program(prog):
        check_program(prog, torch, fusegrad, *tolerances.get(prog.__name__, (1e-4, 1e-5)))

    @pytest.mark.parametrize("prog,backend", _strict_xfails(runs, compiled_gaps,
                                                            lambda r: r[0].__name__),
                             ids=[f"{p.__name__}-{b}" for p, b in runs])
    def test_compiled_matches_eager(prog, backend):
        check_compiled(prog, backend, fusegrad, aot_gaps.get((prog.__name__, backend)))

    @pytest.mark.parametrize("prog", _strict_xfails(compiled, break_gaps, lambda p: p.__name__),
                             ids=[p.__name__ for p in compiled])
    def test_compiled_graph_breaks(prog):
        """fusegrad breaks no more often than torch (none where torch captures whole)."""
        check_breaks_within_torchs(fusegrad, prog, torch_breaks)

    @pytest.mark.parametrize("prog", compiled, ids=[p.__name__ for p in compiled])
    def test_torch_graph_breaks(prog):
        """torch breaks the graphs of the programs its table of breaks names, at least as often
        as recorded, and captures the others whole."""
        check_torch_breaks(torch, prog, torch_breaks)

    return test_program, test_compiled_matches_eager, test_compiled_graph_breaks, \
        test_torch_graph_breaks


def check_make_fx_as_torch(fn, torch, fusegrad, seed: int) -> None:
    """`fn(T, x)` traced by both libraries' `make_fx` on one 3x3 float32 input: the same
    graph text (fusegrad's module path read as torch's), and the GraphModule, run on the
    arguments as written, gives eager fusegrad's values."""
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

    from fusegrad.fx.experimental.proxy_tensor import make_fx

    x = np.random.default_rng(seed).standard_normal((3, 3)).astype(np.float32)

    def traced(T, make):
        def f(x):
            return fn(T, x)
        return make(f)(T.tensor(x))

    want = traced(torch, torch_make_fx).code
    gm = traced(fusegrad, make_fx)
    assert gm.code.replace("fusegrad.", "torch.") == want
    got, ref = gm(fusegrad.tensor(x)), fn(fusegrad, fusegrad.tensor(x))
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6)
