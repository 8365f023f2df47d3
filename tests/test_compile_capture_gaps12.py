"""Capture counted as torch.compile (2.13, backend="eager") counts, where fusegrad differed:

- autocast regions and inference-mode blocks nested either way, split by a break inside
  either (one mechanism splits both: entered again in the stack's order, each in the grad
  mode it found); an inference-mode block inside a grad-mode block inside another resumes;
- a list from outside the graph that the graph appended to is read (a comprehension over
  it, `pop`, item assignment) with the appended items after its own, not a break;
- a resume point, or a function called for real after a break inside it, whose frame holds
  no tensor (its live locals, its stack and cells; its code names no tensor module) runs as
  plain Python, as Dynamo skips such a frame: `pack_padded_sequence` (a skipped function
  in torch) after a layer in a module's forward.

Programs take the library and whether to compile and return what they recorded; each is run
eagerly and compiled under fusegrad (values and printed text must agree); fusegrad's counts
of graphs and breaks must be torch's, recorded in _TORCH_COUNTS and checked against torch
where it is installed (the other Pythons run the fusegrad side alone)."""

import collections
import gc
import weakref

import pytest
from capture_support import counted_as_torch, fg, torch, values_as_eager
from program_support import maybe_compile

# (unique graphs, graph breaks) torch.compile(backend="eager") gives each program (3.11).
_TORCH_COUNTS = {
    "autocast_in_inference": (3, 3), "autocast_in_inference_break_after": (3, 2),
    "inference_in_autocast_break_after": (3, 3), "inference_in_autocast_both": (5, 5),
    "autocast_in_inference_in_autocast": (3, 2), "inference_in_grad_in_inference": (2, 2),
    "appended_closure_comprehension": (2, 0), "appended_global_comprehension": (2, 0),
    "appended_attribute_pop": (3, 0), "appended_then_item_assignment": (1, 0),
    "embedding_then_pack": (1, 1), "pack_then_rest": (0, 1),
    "resume_without_live_tensor": (0, 1), "resume_with_dead_tensor": (0, 1),
    "resume_with_tensor_in_list": (1, 1), "callee_without_tensor": (1, 1),
}


_check_as_torch = counted_as_torch(_TORCH_COUNTS)


def _state(T):
    return T.is_grad_enabled(), T.is_inference_mode_enabled(), T.is_autocast_enabled("cpu")


def _modes(T):  # (what a compiled frame reads without a break)
    return T.is_grad_enabled(), T.is_autocast_enabled("cpu")


# ---------------------------------------------------------------- nested blocks


def autocast_in_inference(T, compiled):
    def f(x):
        with T.inference_mode():
            y = x @ x
            with T.autocast("cpu", dtype=T.bfloat16):
                z = y @ x
                print("inside", T.is_autocast_enabled("cpu"), T.is_inference_mode_enabled())
                z = z @ x
            w = z.float() @ x
        return w, z.dtype, w.dtype, w.is_inference(), _modes(T)

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2, 2)), run(T.ones(2, 2)), _state(T)]


def autocast_in_inference_break_after(T, compiled):
    def f(x):
        with T.inference_mode():
            with T.autocast("cpu", dtype=T.bfloat16):
                z = x @ x
            print("after", T.is_autocast_enabled("cpu"), T.is_inference_mode_enabled())
            w = z.float() @ x
        return w, z.dtype, w.dtype, _modes(T)

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2, 2)), _state(T)]


def inference_in_autocast_break_after(T, compiled):
    def f(x):
        with T.autocast("cpu", dtype=T.bfloat16):
            with T.inference_mode():
                z = x @ x
            print("between", T.is_autocast_enabled("cpu"), T.is_inference_mode_enabled())
            w = z.float() @ x
        return w, z.dtype, w.dtype, z.is_inference(), _modes(T)

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2, 2, requires_grad=True)), _state(T)]


def inference_in_autocast_both(T, compiled):
    def f(x):
        with T.autocast("cpu", dtype=T.bfloat16):
            y = x @ x
            print("one", T.is_autocast_enabled("cpu"), T.is_inference_mode_enabled())
            with T.inference_mode():
                z = y @ x
                print("two", T.is_autocast_enabled("cpu"), T.is_inference_mode_enabled())
                z = z @ x
            w = z.float() @ x
        return w, z.dtype, w.dtype, z.is_inference(), _modes(T)

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2, 2, requires_grad=True)), _state(T)]


def autocast_in_inference_in_autocast(T, compiled):
    def f(x):
        with T.autocast("cpu", dtype=T.bfloat16):
            with T.inference_mode():
                with T.autocast("cpu", enabled=False):
                    z = x @ x
                    print("in", T.is_autocast_enabled("cpu"), T.is_inference_mode_enabled())
                    z = z @ x
                w = z.float() @ x
        return w, z.dtype, w.dtype, _modes(T)

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2, 2)), _state(T)]


def inference_in_grad_in_inference(T, compiled):
    def f(x):
        y = x * 2
        with T.inference_mode():
            with T.enable_grad():
                with T.inference_mode(False):
                    z = y * 2
                    print("inside", T.is_grad_enabled())
                    z = z + 1
                w = z + 1
            v = w * 2
        return v, w.requires_grad, T.is_grad_enabled(), T.is_inference_mode_enabled()

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2, requires_grad=True)), _state(T)]


_NESTED = [autocast_in_inference, autocast_in_inference_break_after,
           inference_in_autocast_break_after, inference_in_autocast_both,
           autocast_in_inference_in_autocast]


@pytest.mark.parametrize("prog", _NESTED, ids=[p.__name__ for p in _NESTED])
def test_break_in_nested_autocast_and_inference_blocks_as_torch(prog):
    _check_as_torch(prog)


def test_inference_block_in_grad_block_in_inference_block_resumes_as_torch():
    """The inner block is entered again in the grad mode it found (the grad-mode block's),
    and restores it on its exit. (Eager fusegrad records history for `enable_grad()` inside
    `inference_mode()`, where torch's eager records none: values are eager fusegrad's.)"""
    _check_as_torch(inference_in_grad_in_inference, torch_values=False)


@pytest.mark.parametrize("prog", [autocast_in_inference_in_autocast,
                                  inference_in_grad_in_inference], ids=lambda p: p.__name__)
def test_nested_blocks_split_traced_by_aot(prog):
    """(Not `is_inference()` of the block's outputs: AOT's are plain tensors, as torch's.)"""
    values_as_eager(prog, "aot_eager")


def _raises_in_nested_blocks(T, compiled):
    def f(x, bad):
        with T.autocast("cpu", dtype=T.bfloat16):
            with T.inference_mode():
                z = x @ x
                print("before")
                if bad:
                    raise ValueError("inside")
                z = z @ x
        return z

    run = maybe_compile(T, compiled)(f)
    try:
        run(T.ones(2, 2), True)
    except ValueError as e:
        caught = str(e)
    return [caught, _state(T), run(T.ones(2, 2), False), _state(T)]


def test_exception_leaving_split_blocks_restores_state_as_eager():
    values_as_eager(_raises_in_nested_blocks)


# ---------------------------------------------------------------- lists appended to

_LOG = []


def appended_closure_comprehension(T, compiled):
    acc = []

    def f(x):
        acc.append(x * 2)
        return sum([a + 1 for a in acc])

    run = maybe_compile(T, compiled)(f)
    return run(T.ones(2)), run(T.ones(2)), len(acc)


def appended_global_comprehension(T, compiled):
    _LOG.clear()

    def f(x):
        _LOG.append(x + 1)
        return T.stack([t * 2 for t in _LOG]).sum(0)

    run = maybe_compile(T, compiled)(f)
    out = [run(T.ones(2)), run(T.ones(2))]
    _LOG.clear()
    return out


def appended_attribute_pop(T, compiled):
    class M(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.hist = []

        def forward(self, x):
            self.hist.append(x * 2)
            if len(self.hist) > 2:
                self.hist.pop(0)
            return sum([h.sum() for h in self.hist])

    m = M()
    run = maybe_compile(T, compiled)(m)
    return [run(T.ones(2) * i) for i in range(4)], [h.tolist() for h in m.hist]


def appended_then_item_assignment(T, compiled):
    acc = [T.zeros(2)]

    def f(x):
        acc.append(x * 2)
        acc[0] = acc[-1] + 1
        return sum([a.sum() for a in acc])

    run = maybe_compile(T, compiled)(f)
    return run(T.ones(2)), [a.tolist() for a in acc]


_APPENDED = [appended_closure_comprehension, appended_global_comprehension,
             appended_attribute_pop, appended_then_item_assignment]


@pytest.mark.parametrize("prog", _APPENDED, ids=[p.__name__ for p in _APPENDED])
def test_list_read_after_the_graph_appended_to_it_as_torch(prog):
    _check_as_torch(prog)


# ---------------------------------------------------------------- frames without tensors


def embedding_then_pack(T, compiled):
    nn = T.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 3)

        def forward(self, x, lengths):
            e = self.emb(x)
            packed = nn.utils.rnn.pack_padded_sequence(e, lengths, batch_first=True)
            return packed.data * 2, packed.batch_sizes

    m = M()
    with T.no_grad():
        m.emb.weight.copy_(T.arange(30.).reshape(10, 3) / 10)
    return maybe_compile(T, compiled)(m)(T.tensor([[1, 2, 3], [4, 5, 0]]), T.tensor([3, 2]))


def pack_then_rest(T, compiled):
    nn = T.nn

    def f(e, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(e, lengths, batch_first=True)
        return packed.data * 2

    return maybe_compile(T, compiled)(f)(T.ones(2, 3, 2), T.tensor([3, 2]))


def resume_without_live_tensor(T, compiled):
    def f(x):
        n = x.shape[0]
        print("n", n)
        return T.ones(n) * 2

    return maybe_compile(T, compiled)(f)(T.ones(3))


def resume_with_dead_tensor(T, compiled):
    def f(x):
        n = int(x.shape[0])
        print("n", n)
        y = T.zeros(n) + n
        return y

    return maybe_compile(T, compiled)(f)(T.ones(3))


def resume_with_tensor_in_list(T, compiled):
    def f(x):
        xs = [x, x]
        print("b")
        return xs[0] * 2

    return maybe_compile(T, compiled)(f)(T.ones(3))


def _grad_and_inference(T):
    return T.is_grad_enabled(), T.is_inference_mode_enabled()


def callee_without_tensor(T, compiled):
    def f(x):
        y = x + 1
        return y, _grad_and_inference(T)

    return maybe_compile(T, compiled)(f)(T.ones(2))


_TENSORLESS = [embedding_then_pack, pack_then_rest, resume_without_live_tensor,
               resume_with_dead_tensor, resume_with_tensor_in_list, callee_without_tensor]


@pytest.mark.parametrize("prog", _TENSORLESS, ids=[p.__name__ for p in _TENSORLESS])
def test_frame_without_tensors_skipped_as_torch(prog):
    _check_as_torch(prog)


@pytest.mark.skipif(torch is None, reason="compares with torch's frame filter")
def test_namedtuples_as_dynamo_counts_them():
    from torch._dynamo.utils import is_namedtuple

    from fusegrad.compiler.capture.frame_filter import _is_namedtuple

    Pair = collections.namedtuple("Pair", "a b")

    class Sub(Pair):
        pass

    class OwnNew(Pair):
        def __new__(cls, a):
            return super().__new__(cls, a, a)

    pairs = [(Pair(1, 2),) * 2, (Sub(1, 2),) * 2, (OwnNew(1),) * 2, ((1, 2),) * 2,
             (fg.nn.utils.rnn.pack_padded_sequence(fg.ones(2, 2, 1), [2, 1], batch_first=True),
              torch.nn.utils.rnn.pack_padded_sequence(torch.ones(2, 2, 1), [2, 1],
                                                      batch_first=True)),
             (fg.ones(2).max(0), torch.ones(2).max(0))]
    for ours, theirs in pairs:
        assert _is_namedtuple(ours) == is_namedtuple(theirs), type(theirs)


def test_skipped_resume_keeps_nothing_alive():
    """A rest run as plain Python holds no reference to the frame's values afterwards."""
    class Box:
        pass

    def f(x, box):
        n = x.shape[0]
        print("n", n)
        return [n, type(box).__name__]

    run = fg.compile(f, backend="eager")
    box = Box()
    ref = weakref.ref(box)
    assert run(fg.ones(2), box) == f(fg.ones(2), box)
    del box
    gc.collect()
    assert ref() is None


# ---------------------------------------------------------------- graph input order

_GT = {}


def _input_programs(T):
    """(name, callable, arguments) of small modules and functions whose graphs' inputs mix
    parameters, buffers, arguments, list items, globals and closure cells."""
    nn = T.nn
    T.manual_seed(0)
    _GT[T.__name__] = T.ones(2)
    key = T.__name__
    scale = T.ones(2) * 3

    class Holder:
        pass

    held = Holder()
    held.t = T.ones(2)

    class Linear(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x).relu()

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(2, 3), nn.Linear(3, 2)

        def forward(self, x, y):
            return self.b(self.a(x)) + y

    class State(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(T.ones(2))
            self.register_buffer("m", T.zeros(2))
            self.bn = nn.BatchNorm1d(2)

        def forward(self, x):
            return self.bn(x * self.w + self.m)

    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.t = T.ones(2)

        def forward(self, x, xs):
            a = x + 1
            b = xs[1] * self.t
            c = _GT[key] * scale + held.t
            return self.fc(a) + b + c + xs[0]

    def later_first(x, y):
        return T.add(scale, x) + y * 2

    return [("linear", Linear(), (T.ones(1, 2),)),
            ("two", Two(), (T.ones(1, 2), T.ones(1, 2))),
            ("state", State(), (T.ones(3, 2),)),
            ("mixed", Mixed(), (T.ones(2), [T.ones(2), T.ones(2)])),
            ("later_first", later_first, (T.ones(2), T.ones(2)))]


# The placeholders of torch 2.13's graph (backend recording `gm`) for each program.
_TORCH_INPUTS = {
    "linear": ["l_self_modules_fc_parameters_weight_", "l_self_modules_fc_parameters_bias_",
               "l_x_"],
    "two": ["l_self_modules_a_parameters_weight_", "l_self_modules_a_parameters_bias_", "l_x_",
            "l_self_modules_b_parameters_weight_", "l_self_modules_b_parameters_bias_",
            "l_y_"],
    "state": ["l_self_parameters_w_", "l_x_", "l_self_buffers_m_",
              "l_self_modules_bn_buffers_num_batches_tracked_",
              "l_self_modules_bn_buffers_running_mean_",
              "l_self_modules_bn_buffers_running_var_",
              "l_self_modules_bn_parameters_weight_", "l_self_modules_bn_parameters_bias_"],
    "mixed": ["l_x_", "l_xs_1_", "l_self_t", "g_gt_{lib}_", "l_scale_", "l_held_t",
              "l_self_modules_fc_parameters_weight_", "l_self_modules_fc_parameters_bias_",
              "l_xs_0_"],
    "later_first": ["l_scale_", "l_x_", "l_y_"],
}


def _graph_inputs(T, prog: str) -> tuple:
    """The placeholder names of the graph `prog` captures and its result."""
    name, fn, args = next(p for p in _input_programs(T) if p[0] == prog)
    seen = []

    def backend(gm, example_inputs):
        seen.append([n.name for n in gm.graph.nodes if n.op == "placeholder"])
        return gm.forward

    T._dynamo.reset()
    out = T.compile(fn, backend=backend)(*args)
    assert len(seen) == 1
    return seen[0], out


@pytest.mark.parametrize("prog", sorted(_TORCH_INPUTS))
def test_graph_inputs_in_first_use_order_as_torch(prog):
    """Parameters where they are read, other inputs where an op first uses them; a closure's
    tensor named after its variable. The values are eager's (the inputs are bound by
    position from the graph's order)."""
    names, out = _graph_inputs(fg, prog)
    assert names == [n.format(lib="fusegrad") for n in _TORCH_INPUTS[prog]]
    name, fn, args = next(p for p in _input_programs(fg) if p[0] == prog)
    assert fg.allclose(out, fn(*args))
    if torch is not None:
        assert _graph_inputs(torch, prog)[0] == [n.format(lib="torch")
                                                 for n in _TORCH_INPUTS[prog]]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_graph_inputs_reordered_bound_by_position_under_aot(backend):
    """The traced backends bind the reordered inputs by position: values and parameter
    gradients as eager's."""
    results = []
    for compiled in (False, True):
        name, fn, args = _input_programs(fg)[3]
        run = fg.compile(fn, backend=backend) if compiled else fn
        fg._dynamo.reset()
        out = run(*args)
        out.sum().backward()
        results.append((out.detach(), fn.fc.weight.grad.clone(), fn.fc.bias.grad.clone()))
    for want, got in zip(*results):
        assert fg.allclose(want, got, atol=1e-6)
