"""Where each node of a captured graph was made: `node.meta["stack_trace"]` and the
`# File: ...` comments of `print_readable`, as torch.compile's (2.13) graphs carry them.

Each program is compiled with a backend that records every node's name and stack trace
(and the readable code of each graph); fusegrad's records must be torch's, line for line:
the program's frames only (the inlined calls of its own functions and modules, none of the
framework's), the resumed frame after a break named as Dynamo's resume function, and each
input located at the op that first reads it."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

import fusegrad as fg  # noqa: E402

try:
    import torch
except ImportError:  # (other Pythons: the checks that need no oracle run alone)
    torch = None


def elementwise(T, backend):
    def f(x, y):
        z = x.sin() + y
        return z.relu() * 2

    return T.compile(f, backend=backend)(T.ones(2), T.ones(2))


def helper(a,
           b):
    return (a * 2 +
            b.exp())


def inlined_calls(T, backend):
    nn = T.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            y = helper(self.lin(x), x)
            return y.sum(dim=0, keepdim=True), x.shape[0] + 1

    T.manual_seed(0)
    return T.compile(M(), backend=backend)(T.ones(2, 2))


def after_a_break(T, backend):
    def f(x):
        y = x * 2
        print("between the graphs")
        z = [t + 1 for t in (y, x)]
        return z[0] + z[1]

    return T.compile(f, backend=backend)(T.ones(2))


def framework_code_only(T, backend):
    nn = T.nn
    T.manual_seed(0)
    return T.compile(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), backend=backend)(T.ones(2, 2))


PROGRAMS = [elementwise, inlined_calls, after_a_break, framework_code_only]


def _recorded(T, prog):
    """[(graph's readable code, [(node name, stack trace)])] of each graph `prog` made."""
    graphs = []

    def backend(gm, example_inputs):
        code = gm.print_readable(print_output=False)
        graphs.append((code.split("\n", 1)[1],
                       [(n.name, n.meta.get("stack_trace")) for n in gm.graph.nodes]))
        return gm.forward

    T._dynamo.reset()
    prog(T, backend)
    return graphs


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_stack_traces_as_torch(prog, capsys):
    want, got = _recorded(torch, prog), _recorded(fg, prog)
    if prog is framework_code_only:  # (torch names its inputs as a call of the layer: `fn`)
        want = [(code, [t for _, t in nodes]) for code, nodes in want]
        got = [(code, [t for _, t in nodes]) for code, nodes in got]
    assert [nodes for _, nodes in got] == [nodes for _, nodes in want]
    comments = [[line.strip() for line in code.splitlines() if line.strip().startswith("#")]
                for code, _ in want]
    assert [[line.strip() for line in code.splitlines() if line.strip().startswith("#")]
            for code, _ in got] == comments


def test_program_frames_only(capsys):
    """Every node but the output is located, in this file's frames alone."""
    graphs = _recorded(fg, inlined_calls)
    assert len(graphs) == 1
    for name, trace in graphs[0][1][:-1]:
        files = [line for line in trace.splitlines() if line.startswith("  File ")]
        assert files and all(__file__ in line for line in files), (name, trace)
    assert graphs[0][1][-1] == ("output", None)
    assert "# File: " + __file__ in graphs[0][0]
    assert all(trace == "" for _, trace in _recorded(fg, framework_code_only)[0][1][:-1])
