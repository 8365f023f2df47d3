"""Capture counted as torch.compile (2.13, backend="eager") counts, where fusegrad differed:

- `explain` lists a break inside a call a frame's loop makes once, where the callee's own
  frame (captured on its own) meets it, and not again at the caller's loop: past the
  callee's recompile limit nothing more is listed;
- a `no_grad()` / `enable_grad()` wrapper the graph made, live at a graph break, is rebuilt
  as Dynamo rebuilds it: calling it later is a graph break ("Attempted to call function
  marked as skipped"), the call run for real with the wrapped function captured on its own
  frame; one returned without a break is inlined where it is called, as before.

A difference kept: torch captures `nonzero` under fullgraph=True with an unbacked size;
fusegrad raises `Unsupported` there (checked below, so that it never guesses a size).

Programs and tables as `capture_support` describes."""

import warnings

from capture_support import counts_test, fg, op_counts_test, torch
from program_support import maybe_compile

# (unique graphs, graph breaks) torch.compile(backend="eager") gives each program (3.11).
_TORCH_COUNTS = {
    "callee_past_its_limit_in_a_loop": (6, 3),
    "no_grad_lambda_called_after_a_break": (3, 2),
    "no_grad_lambda_only_called_after_a_break": (2, 2),
    "enable_grad_lambda_after_a_break": (2, 2), "no_grad_of_a_global_after_a_break": (2, 2),
    "rebuilt_wrapper_called_twice": (4, 3), "wrapper_returned_after_a_break": (2, 2),
    "wrapper_returned_without_a_break": (1, 0), "inference_mode_lambda_after_a_break": (1, 1),
}


# ---------------------------------------------------------------- a callee past its limit


def _helper(x):
    y = x * 2
    print("helper", y.shape[0])
    return y + 1


def _looping_caller(T):
    def caller(x):
        outs = []
        for i in range(5):
            outs.append(_helper(T.ones(i + 1) + x.sum()))
        return outs

    return caller


def callee_past_its_limit_in_a_loop(T, compiled):
    run = maybe_compile(T, compiled)(_looping_caller(T))
    with T._dynamo.config.patch(recompile_limit=3, automatic_dynamic_shapes=False):
        return run(T.ones(1))


def _explained(T) -> tuple:
    """(graphs, breaks, each listed reason's first line and frames) `explain` gives for
    `_looping_caller`'s function with a recompile limit of 3 and static sizes."""
    with T._dynamo.config.patch(recompile_limit=3, automatic_dynamic_shapes=False), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = T._dynamo.explain(_looping_caller(T))(T.ones(1))
    reasons = [(r.reason.splitlines()[0], tuple(f.name for f in r.user_stack))
               for r in out.break_reasons]
    return out.graph_count, out.graph_break_count, reasons


def test_explain_lists_a_callees_break_once_as_torch(capsys):
    want = (6, 5, [("Failed to trace builtin operator", ("_helper",))] * 3)
    assert _explained(fg) == want
    if torch is not None:
        assert _explained(torch) == want


# ---------------------------------------------------------------- grad-mode wrappers at a break


def no_grad_lambda_called_after_a_break(T, compiled):
    def f(x):
        g = T.no_grad()(lambda t: t * 2)
        y = g(x)
        print("mid")
        return y + 1, g(x)

    return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


def no_grad_lambda_only_called_after_a_break(T, compiled):
    def f(x):
        g = T.no_grad()(lambda t: t * 2)
        print("mid")
        return g(x) + 1

    return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


def enable_grad_lambda_after_a_break(T, compiled):
    def f(x):
        g = T.enable_grad()(lambda t: t * 2)
        print("mid")
        return g(x) + 1

    with T.no_grad():
        return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


def _triple(t):
    return t * 3


def no_grad_of_a_global_after_a_break(T, compiled):
    def f(x):
        g = T.no_grad()(_triple)
        print("mid")
        return g(x) + 1

    return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


def rebuilt_wrapper_called_twice(T, compiled):
    def f(x):
        w = x + 1
        g = T.no_grad()(lambda t: t * w)
        print("mid")
        return g(x) + 1, g(x) + 2

    return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


def _use(x, g):
    return g(x) + 1


def wrapper_returned_after_a_break(T, compiled):
    def make(x):
        g = T.no_grad()(lambda t: t * 2)
        print("mid")
        return g

    x = T.ones(2, requires_grad=True)
    return maybe_compile(T, compiled)(_use)(x, maybe_compile(T, compiled)(make)(x))


def wrapper_returned_without_a_break(T, compiled):
    def make(x):
        return T.no_grad()(lambda t: t * 2)

    x = T.ones(2, requires_grad=True)
    return maybe_compile(T, compiled)(_use)(x, maybe_compile(T, compiled)(make)(x))


def inference_mode_lambda_after_a_break(T, compiled):
    def f(x):
        g = T.inference_mode()(lambda t: t * 2)
        print("mid")
        return g(x) + 1

    out = maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))
    return out, out.is_inference()


_PROGRAMS = [callee_past_its_limit_in_a_loop, no_grad_lambda_called_after_a_break,
             no_grad_lambda_only_called_after_a_break, enable_grad_lambda_after_a_break,
             no_grad_of_a_global_after_a_break, rebuilt_wrapper_called_twice,
             wrapper_returned_after_a_break, wrapper_returned_without_a_break,
             inference_mode_lambda_after_a_break]

test_counts_as_torch = counts_test(_PROGRAMS, _TORCH_COUNTS)

# (frames, ops) torch's CompileCounter counts for each (3.11).
_TORCH_OPS = {"no_grad_lambda_called_after_a_break": (3, 5),
              "no_grad_lambda_only_called_after_a_break": (2, 2),
              "enable_grad_lambda_after_a_break": (2, 2),
              "rebuilt_wrapper_called_twice": (4, 4), "wrapper_returned_after_a_break": (2, 2),
              "wrapper_returned_without_a_break": (1, 4)}

test_op_counts_as_torch = op_counts_test(globals(), _TORCH_OPS)


def test_break_at_the_rebuilt_wrapper_worded_as_torch():
    """The reason's kind and explanation name the library function Dynamo skips."""
    fg._dynamo.reset()
    counters = fg._dynamo.utils.counters
    counters.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        no_grad_lambda_only_called_after_a_break(fg, "eager")
    skipped = [k for k in counters["graph_break"] if "skipped" in k]
    assert len(skipped) == 1
    assert skipped[0].startswith(
        "Attempted to call function marked as skipped\n  Explanation: Dynamo developers have "
        "intentionally marked that the function `set_grad_enabled.clone` in file `")


# ---------------------------------------------------------------- nonzero under fullgraph


def _nonzero_doubled(T, fullgraph: bool):
    """`nonzero(x) * 2` compiled with `fullgraph` over two inputs: the results as lists, or
    the error's type name."""
    T._dynamo.reset()
    run = T.compile(lambda x: T.nonzero(x) * 2, backend="eager", fullgraph=fullgraph)
    try:
        return [run(T.tensor(v)).tolist() for v in ([0, 1, 1, 0, 3], [1, 1, 1])]
    except Exception as e:  # (the error is the outcome compared)
        return type(e).__name__


def test_nonzero_under_fullgraph_raises_where_torch_captures():
    """torch 2.13 captures `nonzero` under fullgraph=True with an unbacked size (without
    `capture_dynamic_output_shape_ops`); fusegrad has no unbacked sizes and raises
    `Unsupported` there, never a graph with a guessed size. Without fullgraph both break
    and give eager's values."""
    want = [[[2], [4], [8]], [[0], [2], [4]]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _nonzero_doubled(fg, True) == "Unsupported"
        assert _nonzero_doubled(fg, False) == want
        if torch is not None:
            assert not torch._dynamo.config.capture_dynamic_output_shape_ops
            assert _nonzero_doubled(torch, True) == _nonzero_doubled(torch, False) == want
