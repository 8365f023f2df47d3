"""Graph breaks inside `with autocast(...)` blocks: the rest of the frame resumes compiled
inside the region, as torch.compile's resume functions do (its graph counts are noted per
program, recorded on CPython 3.11 with torch 2.13).

Every graph leaves the autocast regions it entered (an AOT graph bakes the casts in and changes
no autocast state when it runs); the segment code enters the regions open at a break again
after the graph, and leaves them before a resume graph that enters them itself. Each program
runs eagerly and compiled through `Counter` (the run's FUSEGRAD_TEST_BACKEND): values, dtypes,
gradients, raised errors, the autocast and grad state left behind and the number of graphs
must agree. No torch is imported, so this file runs on CPython 3.12 and 3.13 too."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from compile_support import CAPTURES, Counter, tolerances  # noqa: E402

import fusegrad as fg  # noqa: E402
from fusegrad.compiler.capture.builder import autocast_depth, exit_autocast  # noqa: E402

BF16 = fg.bfloat16


class Boom(Exception):
    """What the programs raise."""


# ---------------------------------------------------------------- programs


def in_block(x, w):  # torch: 2 graphs
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        fg._dynamo.graph_break()
        z = (y @ w).relu()
    return z.float().sum()


def print_break(x, w):  # torch: 2 graphs
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        print("", end="")
        z = (y @ w).relu()
    return z.float().sum() + y.float().mean()


def nested_disabled(x, w):  # torch: 2 graphs
    with fg.autocast("cpu", dtype=BF16):
        a = x @ w
        with fg.autocast("cpu", enabled=False):
            b = x @ w
            fg._dynamo.graph_break()
            c = b @ w
        d = a @ w
    return c.sum() + d.float().sum() + b.sum()


def loop_break(x, w):  # torch: 0 graphs (a break in a loop: the frame runs eagerly)
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        for _ in range(2):
            y = y @ w
            fg._dynamo.graph_break()
    return y.float().sum()


def loop_after_break(x, w):  # a break, then a loop that breaks: eager from there
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        fg._dynamo.graph_break()
        for _ in range(2):
            y = y @ w
            fg._dynamo.graph_break()
        z = y @ w
    return z.float().sum() + (x @ w).sum()


def raise_caught(x, w):  # torch: 0 graphs (it does not resume inside a try block)
    try:
        with fg.autocast("cpu", dtype=BF16):
            y = x @ w
            fg._dynamo.graph_break()
            z = y @ w
            if z.shape[0] > 0:
                raise Boom(str(z.dtype))
    except Boom:
        pass
    return x.sum() * 2


def raise_out(x, w):  # torch: 1 graph; the region is left as the error leaves the frame
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        fg._dynamo.graph_break()
        z = y @ w
        raise Boom(str(z.dtype))


def _raiser(y):
    print("", end="")
    raise Boom(str(y.dtype))


def call_raises(x, w):  # the breaking call raises inside the block, caught outside it
    try:
        with fg.autocast("cpu", dtype=BF16):
            y = x @ w
            _raiser(y)
    except Boom:
        y = x @ w
    return y.sum()


def with_no_grad(x, w):  # torch: 2 graphs
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        with fg.no_grad():
            u = y @ w
            fg._dynamo.graph_break()
            v = u @ w
        z = y @ w
    return z.float().sum() + v.float().sum() * 0 + u.float().sum() * 0


def no_grad_outside(x, w):  # torch: 2 graphs
    with fg.no_grad():
        with fg.autocast("cpu", dtype=BF16):
            y = x @ w
            fg._dynamo.graph_break()
            z = y @ w
        u = z.float() @ w
    return u.sum() + (x * 2).sum()


def return_inside(x, w):  # torch: 2 graphs
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        fg._dynamo.graph_break()
        return (y @ w).float().sum()


def _helper(y, w):
    z = y @ w
    fg._dynamo.graph_break()
    return z @ w


def inlined_call(x, w):  # torch: 4 graphs (2 of the caller, 2 of the helper)
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        z = _helper(y, w)
        u = z @ w
    return u.float().sum()


def _helper_with(y, w):
    with fg.autocast("cpu", enabled=False):
        z = y.float() @ w
        fg._dynamo.graph_break()
        z = z @ w
    return z @ w


def inlined_with(x, w):  # a helper that breaks inside its own region, inside the caller's
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        z = _helper_with(y, w)
        u = z @ w
    return u.float().sum() + z.sum()


def two_breaks(x, w):  # torch: 3 graphs
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        fg._dynamo.graph_break()
        y = y @ w
        fg._dynamo.graph_break()
        y = y @ w
    return y.float().sum() + (x @ w).sum()


def as_name(x, w):  # (torch 2.13 loses `ac` in its resume function: an AttributeError)
    with fg.autocast("cpu", dtype=BF16) as ac:
        y = x @ w
        fg._dynamo.graph_break()
        z = y @ w
    return z.float().sum() * (2 if ac.fast_dtype is BF16 else 3)


def branch_on_tensor(x, w):  # the break is a branch on a tensor, written out as Python
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        if y.sum() > 0:
            z = y @ w
        else:
            z = y @ (w * 2)
    return z.float().sum()


# Kept out of pytest's assertion rewriting (it would change the `assert`'s bytecode): a try
# block inside the region whose graph raises when it runs (an assertion on tensor values), so
# the segment reruns eagerly from its start, inside the region.
_SOURCE = '''
def protected(x, w):
    with fg.autocast("cpu", dtype=BF16):
        y = x @ w
        fg._dynamo.graph_break()
        try:
            z = y @ w
            assert (z.float() > 1000).all(), "small"
        except AssertionError:
            z = y @ w * 2
    return z.float().sum()


def grad_mode_protected(x):
    try:
        with fg.no_grad():
            y = x * 2
            assert (y > 1000).all(), "small"
    except AssertionError:
        y = x * 3
    return y
'''
exec(compile(_SOURCE, "<autocast resume programs>", "exec"), globals())

# Program -> the number of graphs fusegrad makes for it.
GRAPHS = {
    in_block: 2, print_break: 2, nested_disabled: 2, loop_break: 0, loop_after_break: 1,
    raise_caught: 0, raise_out: 1, call_raises: 0, with_no_grad: 2, no_grad_outside: 2,
    return_inside: 2, inlined_call: 4, inlined_with: 4, two_breaks: 3, as_name: 2,
    branch_on_tensor: 2, protected: 2,  # noqa: F821 (made by exec above)
}



# ---------------------------------------------------------------- running


def _state() -> tuple:
    """The autocast and grad state a call leaves behind."""
    return (fg.is_autocast_enabled("cpu"), fg.get_autocast_dtype("cpu"), autocast_depth(),
            fg.is_grad_enabled())


def run(fn) -> tuple:
    """Call `fn(x, w)` on fresh tensors: (value, dtype, gradient of x, error, state after)."""
    rng = np.random.default_rng(0)
    x = fg.tensor(rng.standard_normal((4, 4)).astype(np.float32), requires_grad=True)
    w = fg.tensor(rng.standard_normal((4, 4)).astype(np.float32))
    try:
        out = fn(x, w)
    except Boom as e:
        return None, None, None, str(e), _state()
    grad = None
    if out.requires_grad:
        out.backward()
        grad = x.grad.numpy()
    return out.detach().numpy(), out.dtype, grad, None, _state()


def same(got: tuple, want: tuple) -> None:
    assert got[3] == want[3], (got[3], want[3])  # the error raised
    assert got[4] == want[4], (got[4], want[4])  # autocast and grad state after the call
    assert got[1] == want[1], (got[1], want[1])
    if want[0] is None:
        return
    tol = tolerances(want[1])
    np.testing.assert_allclose(got[0], want[0], **tol)
    assert (got[2] is None) == (want[2] is None)
    if want[2] is not None:
        np.testing.assert_allclose(got[2], want[2], **tol)


def _autocast_edges(gm) -> tuple:
    names = [getattr(n.target, "__name__", "") for n in gm.graph.nodes
             if n.op == "call_function"]
    return names.count("enter_autocast"), names.count("exit_autocast")


@pytest.fixture(autouse=True)
def _no_region_left():
    yield
    assert autocast_depth() == 0 and not fg.is_autocast_enabled("cpu")
    while autocast_depth():  # (a failure must not spill into the next test)
        exit_autocast()


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("fn", list(GRAPHS), ids=lambda f: f.__name__)
def test_resumes_compiled_inside_the_region(fn):
    want = run(fn)
    counter = Counter()
    compiled = fg.compile(fn, backend=counter)
    same(run(compiled), want)
    graphs = counter.graphs
    same(run(compiled), want)  # new tensors of the same kind: the cached segments
    assert counter.graphs == graphs, "the second call recompiled"
    assert graphs == (GRAPHS[fn] if CAPTURES else 0)
    for gm in counter.modules:  # every graph leaves the regions it enters
        enters, exits = _autocast_edges(gm)
        assert enters == exits, gm.code


def test_resumed_graph_enters_the_region():
    # The resume graph re-enters the region open at its start and leaves it where the block
    # ends: the ops after the block run outside it.
    counter = Counter()
    fg.compile(in_block, backend=counter)(*run_args())
    if not CAPTURES:
        return
    assert [_autocast_edges(gm) for gm in counter.modules] == [(1, 1), (1, 1)]
    order = [getattr(n.target, "__name__", n.target) for n in counter.modules[1].graph.nodes
             if n.op in ("call_function", "call_method")]
    assert order.index("enter_autocast") < order.index("matmul") < order.index("relu") < \
        order.index("exit_autocast") < order.index("float"), order


def run_args() -> tuple:
    rng = np.random.default_rng(1)
    return tuple(fg.tensor(rng.standard_normal((4, 4)).astype(np.float32)) for _ in range(2))


def _by_dtype(x, w, dtype):
    with fg.autocast("cpu", dtype=dtype):
        y = x @ w
        fg._dynamo.graph_break()
        z = y @ w
    return z, y


def _by_outer_dtype(x, w, dtype):
    with fg.autocast("cpu", dtype=dtype):
        with fg.autocast("cpu", enabled=False):  # autocast is off where the frame resumes
            y = x @ w
            fg._dynamo.graph_break()
            y = y @ w
        z = y @ w
    return z, y


@pytest.mark.parametrize("fn", [_by_dtype, _by_outer_dtype], ids=["inner", "outer"])
def test_resume_is_guarded_by_the_region(fn):
    # A resume point compiled inside a bfloat16 region is not reused inside a float16 one
    # (nor inside a region nested in one: the regions themselves are guarded).
    counter = Counter()
    compiled = fg.compile(fn, backend=counter)
    x, w = run_args()
    for dtype in (BF16, fg.float16, BF16):
        z, y = compiled(x, w, dtype)
        ez, ey = fn(x, w, dtype)
        assert (z.dtype, y.dtype) == (ez.dtype, ey.dtype)
        assert z.dtype == dtype
        np.testing.assert_allclose(z.float().numpy(), ez.float().numpy(), rtol=0, atol=0)
    assert counter.graphs == (4 if CAPTURES else 0)  # two per dtype, then the cache


def test_resume_under_an_outer_region():
    # Called inside an eager bfloat16 region and outside one: the frame's global autocast
    # state is guarded, the region the program opens itself is entered again after the break.
    def prog(x, w):
        y = x @ w
        with fg.autocast("cpu", dtype=BF16):
            fg._dynamo.graph_break()
            z = y @ w
        return z.float() + (x @ w)

    counter = Counter()
    compiled = fg.compile(prog, backend=counter)
    x, w = run_args()
    with fg.autocast("cpu", dtype=BF16):
        got, want = compiled(x, w), prog(x, w)
        assert fg.is_autocast_enabled("cpu") and autocast_depth() == 0
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=0, atol=0)
    got, want = compiled(x, w), prog(x, w)
    assert got.dtype == want.dtype == fg.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), **tolerances(fg.float32))
    assert counter.graphs == (4 if CAPTURES else 0)


def test_protected_rerun_starts_in_the_segments_grad_mode():
    # The graph raised after it switched grad mode off: the eager rerun of the segment starts
    # in the mode the segment started in, and the call leaves grad mode as eager does.
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    compiled = fg.compile(grad_mode_protected, backend=Counter())  # noqa: F821 (exec above)
    for _ in range(2):
        y = compiled(x)
        assert y.requires_grad and fg.is_grad_enabled()
        np.testing.assert_allclose(y.detach().numpy(), [3.0, 6.0])


def _region_off_inside(y, w):
    with fg.autocast("cpu", enabled=False):
        z = y.float() @ w
        z = z @ w
    return z @ w


def test_backward_of_a_graph_run_inside_a_region_is_eagers_to_the_bit():
    """A function compiled and called inside a bfloat16 region: its backward is traced as
    eager's backward runs (the forward's casts replayed, no autocast of its own), so the
    gradients equal eager's exactly; traced under the region, two matrix products of the
    backward ran in bfloat16 and the gradient differed in its last bit."""

    def step(f):
        fg.manual_seed(0)
        x = fg.randn(4, 4, requires_grad=True)
        w = fg.randn(4, 4)
        with fg.autocast("cpu", dtype=fg.bfloat16):
            z = f(x @ w, w)
            u = z @ w
        (u.float().sum() + z.sum()).backward()
        return z.detach().numpy(), x.grad.numpy()

    want = step(_region_off_inside)
    got = step(fg.compile(_region_off_inside, backend=Counter()))
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g, e)
