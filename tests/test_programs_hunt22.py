"""Programs that print and rewrite FX graphs the ways users do: a traced model after
`ShapeProp` (TensorMetadata annotations in `print_readable`), graphs whose `meta['val']` a
user pass filled in (tensors with strides and devices, Python values, the precedence of the
metadata keys, declared types beside them), the graphs `torch.compile` hands a custom
backend with dynamic shapes (symbolic sizes as `Sym(...)`), `FakeTensorProp` recording each
node's fake result, a `PassManager` pipeline (class and function passes, steps, checks,
constraints, its errors), `Graph.lint` on a graph with nodes after its output, a printed
GraphModule with its `meta` copied and pickled, the errors and warnings of building a graph
wrongly, and dead-code elimination around random draws. Each runs under torch and under fusegrad,
and the values and text must be the same (fusegrad's generated code names its own package
where torch.fx writes `torch`, by design)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import copy  # noqa: E402
import importlib  # noqa: E402
import pickle  # noqa: E402
import re  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402
from program_support import check_program  # noqa: E402

import fusegrad as fg  # noqa: E402


def _fx(lib, name=""):
    return importlib.import_module(lib.__name__ + ".fx" + name)


def _as_torch(text):
    return text.replace("fusegrad", "torch")


def shape_prop_readable(torch):
    nn = torch.nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x, idx, n: int):
            h = self.lin(x)
            top = h.max(dim=1)  # a tuple: no annotation
            return h.sum(), top, h.to(torch.float64) + idx, h > 0, h.half(), \
                idx.to(torch.uint8), x.t(), h.size(0)

    gm = _fx(torch).symbolic_trace(Head())
    _fx(torch, ".passes.shape_prop").ShapeProp(gm).propagate(
        torch.ones(2, 3), torch.tensor([1, 2]), 3)
    # (TensorMetadata shows dtype and shape only, strides and device asked for or not)
    return [_as_torch(gm.print_readable(print_output=False)),
            _as_torch(gm.print_readable(False, include_stride=True, include_device=True))]


def user_filled_vals(torch):
    def f(x: torch.Tensor, n: int) -> torch.Tensor:
        return (x * n).t()

    gm = _fx(torch).symbolic_trace(f)
    texts = []
    for val in (torch.empty(4, 3, dtype=torch.bfloat16).t(), 3, [torch.empty(2)], None):
        for node in gm.graph.nodes:
            node.meta["val"] = val
            node.meta["example_value"] = torch.empty(1, dtype=torch.int16)
        texts.append(gm.print_readable(False, include_stride=True, include_device=True))
    for node in gm.graph.nodes:
        del node.meta["val"]  # then the example value annotates
    texts.append(gm.print_readable(False))
    texts.append(gm.code)  # the plain code has no annotations
    return [_as_torch(t) for t in texts]


def dynamic_backend_graph(torch):
    shown = []

    def backend(gm, example_inputs):
        text = gm.print_readable(print_output=False)
        # (the stack-trace comments are the capture's, not the printing's, business)
        shown.append("\n".join(line for line in text.splitlines() if "#" not in line))
        return gm.forward

    @torch.compile(backend=backend, dynamic=True)
    def f(x):
        return x.reshape(-1) * x.shape[0]

    a = f(torch.ones(3, 4))
    b = f(torch.ones(5, 4))
    return [_as_torch(t) for t in shown], a, b


def test_shape_prop_annotations():
    check_program(shape_prop_readable, torch, fg)


def test_meta_val_annotations_strides_and_devices():
    check_program(user_filled_vals, torch, fg)


def test_symbolic_sizes_annotated_without_specialising():
    torch._dynamo.reset()
    fg._dynamo.reset()
    check_program(dynamic_backend_graph, torch, fg)


def lint_accepts_dead_code_after_output(torch):
    fx = _fx(torch)
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(x)
    g.call_function(torch.relu, (x,))  # appended after the output: dead code, as torch.fx has it
    g.lint()
    g2 = fx.Graph()
    a = g2.placeholder("a")
    g2.output(a)
    g2.output(a)
    g2.lint()
    gm = fx.GraphModule(torch.nn.Module(), g)
    return [_as_torch(str(g)), _as_torch(gm.code), gm(torch.ones(2) * -1)]


def test_lint_accepts_nodes_after_the_output():
    check_program(lint_accepts_dead_code_after_output, torch, fg)


def fake_tensor_prop_vals(torch):
    fake_tensor_prop = _fx(torch, ".passes.fake_tensor_prop")

    def f(x, y, n: int):
        h = (x @ y).relu()
        top = h.max(dim=1)
        return h.t() * n, top.values, h.size(0), [h.sum()]

    gm = _fx(torch).symbolic_trace(f)
    prop = fake_tensor_prop.FakeTensorProp(gm)
    result = prop.propagate(torch.ones(4, 3, dtype=torch.float64),
                            torch.ones(3, 2, dtype=torch.float64), 2)

    def described(v):
        if isinstance(v, (tuple, list)):
            return [described(x) for x in v]
        if isinstance(v, torch.Tensor):
            return type(v).__name__, str(v.dtype), tuple(v.shape)
        return v

    vals = [(node.name, described(node.meta["val"])) for node in gm.graph.nodes]
    fake = prop.propagate_dont_convert_inputs(prop._mode.from_tensor(torch.ones(5, 3)),
                                              prop._mode.from_tensor(torch.ones(3, 2)), 3)
    return [vals, _as_torch(gm.print_readable(print_output=False)), described(result),
            described(fake)]


def test_fake_tensor_prop_records_vals():
    check_program(fake_tensor_prop_vals, torch, fg)


def _error(fn):
    try:
        fn()
    except Exception as e:  # (the pass manager's own error type is what is compared)
        cause = e.__cause__
        text = re.sub(r"0x[0-9a-f]+", "0x?", str(e))
        return type(e).__name__, text, type(cause).__name__ if cause else None, str(cause)
    return None


def pass_manager_pipeline(torch):
    fx = _fx(torch)
    base = _fx(torch, ".passes.infra.pass_base")
    pm = _fx(torch, ".passes.infra.pass_manager")

    class ReluToSigmoid(base.PassBase):
        def call(self, gm):
            hits = [n for n in gm.graph.nodes if n.target is torch.relu]
            for n in hits:
                n.target = torch.sigmoid  # (the manager recompiles the module)
            return base.PassResult(gm, bool(hits))

    def dce(gm):
        return base.PassResult(gm, gm.graph.eliminate_dead_code())

    rounds = []

    def note(gm):
        rounds.append(len(gm.graph.nodes))

    def mk(name):
        def p(gm):
            return base.PassResult(gm, False)
        p.__name__ = name
        return p

    gm = fx.symbolic_trace(lambda x: (torch.relu(x) + 1, x.sum())[0])
    manager = pm.PassManager([ReluToSigmoid(), dce, pm.pass_result_wrapper(note)], steps=3)
    checked = []
    manager.add_checks(lambda m: checked.append(type(m).__name__))
    result = manager(gm)
    out = [type(result).__name__, result.modified, _as_torch(result.graph_module.code),
           rounds, checked, result.graph_module(torch.tensor([0.0, 2.0]))]
    out.append(_error(lambda: pm.PassManager([lambda m: None])(gm)))
    failing = pm.PassManager([dce, mk("boom")], run_checks_after_each_pass=True)
    failing.add_checks(lambda m: (_ for _ in ()).throw(ValueError("bad module"))
                       if checked.append(1) or len(checked) > 2 else None)
    out.append(_error(lambda: failing(gm)))
    out.append(_error(lambda: failing.add_checks(lambda a, b: None)))
    a, b, c, d, e = (mk(n) for n in "abcde")
    before = pm.this_before_that_pass_constraint
    for passes, constraints in (([a, b, c, d, e], [before(e, a), before(d, a), before(b, c)]),
                                ([c, b, a], [before(a, b), before(b, c)]),
                                ([a, b], [before(a, b), before(b, a)])):
        ordered = pm.PassManager(list(passes), constraints)
        out.append(_error(ordered.solve_constraints) or [p.__name__ for p in ordered.passes])
    out.append(_error(pm.PassManager([a, b, c], [before(c, a)]).validate_constraints))
    return out


def test_pass_manager_orders_runs_and_reports_passes():
    check_program(pass_manager_pipeline, torch, fg)


def printed_graph_module_and_meta(torch):
    gm = _fx(torch).symbolic_trace(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()))
    print(gm)  # its layers, its code, and the pointer to print_readable
    gm.meta["tag"] = 1
    return [copy.deepcopy(gm).meta, copy.copy(gm).meta, pickle.loads(pickle.dumps(gm)).meta]


def test_printed_graph_module_and_its_meta():
    check_program(printed_graph_module_and_meta, torch, fg)


def graph_building_mistakes(torch):
    fx = _fx(torch)
    owner = torch.nn.Module()
    owner.sub = torch.nn.Module()
    owner.register_buffer("buf", torch.ones(1))
    g = fx.Graph(owning_module=owner)
    x = g.placeholder("x")
    errors = [_error(lambda: g.call_module("sub.missing", (x,))),
              _error(lambda: g.create_node("bogus", "x")),
              _error(lambda: g.create_node("call_function", "x")),
              _error(lambda: g.create_node("get_attr", 3))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for target in ("sub", "buf", "sub.nothing"):
            g.get_attr(target)
    loose = fx.Graph()
    y = loose.placeholder("y")
    loose.output(loose.call_module("gone", (y,)))
    gm = fx.GraphModule({"gone": torch.nn.ReLU()}, loose)
    gm.delete_submodule("gone")
    errors.append(_error(gm.graph.lint))
    return errors, [str(w.message) for w in caught], [n.name for n in g.nodes]


def test_graph_building_mistakes_are_reported_as_torch_fx_does():
    check_program(graph_building_mistakes, torch, fg)


def dead_code_keeps_random_draws(torch):
    fx = _fx(torch)

    def f(x):
        unused = [torch.randn_like(x), torch.bernoulli(x.sigmoid()), torch.rand_like(x) * 2,
                  torch.normal(x, 1.0), x.add_(0), torch.nn.functional.dropout(x, 0.5)]
        del unused
        return x * 2

    gm = fx.symbolic_trace(f)
    flags = [(n.name, n.is_impure(), n.is_impure(impure_random=False)) for n in gm.graph.nodes]
    changed = gm.graph.eliminate_dead_code()
    gm.recompile()
    return flags, changed, _as_torch(gm.code)


def test_dead_code_elimination_keeps_random_draws():
    check_program(dead_code_keeps_random_draws, torch, fg)
