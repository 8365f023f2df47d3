"""The public surface read from one place: the registry's flags and its table of composites.

Capture, fx and ONNX read what they know of a public name (factory, pure, data-dependent,
in place) from `fusegrad.ops.surface`; these tests hold that table to PyTorch: its in-place
names are PyTorch's (a trailing underscore), its data-dependent ops carry ATen's
`dynamic_output_shape` tag, and capture and fx behave on them as torch.compile and torch.fx.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import ast  # noqa: E402
import collections  # noqa: E402
import inspect  # noqa: E402
import pathlib  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad._torch_function_wrappers import implementation  # noqa: E402
from fusegrad.ops import REGISTRY, OpDef  # noqa: E402
from fusegrad.ops import spellings as SP  # noqa: E402
from fusegrad.ops import surface as S  # noqa: E402


def _public_callables():
    """(where, name) of the public callables whose names say they work in place."""
    import fusegrad.nn.functional as F
    import fusegrad.nn.init as init
    import fusegrad.nn.utils as nn_utils

    found = []
    for where, space in (("Tensor", vars(fusegrad.Tensor)), ("fusegrad", vars(fusegrad)),
                         ("nn.functional", vars(F)), ("nn.init", vars(init)),
                         ("nn.utils", {n: getattr(nn_utils, n) for n in dir(nn_utils)})):
        for name, obj in space.items():
            if name.startswith("_") or not callable(obj) or isinstance(obj, type):
                continue
            found.append((where, name))
    return found


def test_inplace_flag_is_pytorchs_trailing_underscore():
    """Every public callable named with PyTorch's in-place underscore is flagged in place,
    and every name flagged in place is spelled so."""
    inplace = S.names_with(S.INPLACE)
    missing = [f"{w}.{n}" for w, n in _public_callables() if n.endswith("_") and
               n not in inplace]
    assert not missing, f"in-place names without the flag: {missing}"
    assert all(n.endswith("_") for n in inplace), sorted(n for n in inplace
                                                         if not n.endswith("_"))


def test_data_dependent_ops_are_atens_dynamic_shape_ops():
    """A registry op flagged data-dependent has ATen's `dynamic_output_shape` tag."""
    flagged = [op for op in REGISTRY.values() if op.data_dependent]
    assert flagged
    for op in flagged:
        packet, _, overload = op.name.partition(".")
        aten = getattr(getattr(torch.ops.aten, packet), overload or "default")
        assert torch.Tag.dynamic_output_shape in aten.tags, op.name


def test_composites_are_not_registry_spellings():
    """A composite is no registry op's public spelling (its flags would be read twice), and
    every composite exists as a public name of fusegrad, Tensor or nn."""
    publics = {op.public for op in REGISTRY.values()}
    assert not set(S.COMPOSITES) & publics
    import fusegrad.nn.functional as F
    import fusegrad.nn.init as init
    import fusegrad.nn.utils as nn_utils

    spaces = (fusegrad, fusegrad._functions, fusegrad.Tensor, F, init, nn_utils)
    capture_targets = {"set_grad_enabled", "_assert_async"}  # nodes capture itself records
    for name in S.COMPOSITES:
        assert name in capture_targets or any(hasattr(s, name) for s in spaces), name


def test_flags_follow_later_registrations():
    """An op registered after the first lookup is seen by the next one."""
    assert "zz_probe_" not in S.names_with(S.INPLACE)
    REGISTRY["zz_probe_"] = OpDef("zz_probe_", kernel=abs, meta=abs, inplace=True)
    try:
        assert S.has_flag("zz_probe_", S.INPLACE)
    finally:
        del REGISTRY["zz_probe_"]
    assert not S.has_flag("zz_probe_", S.INPLACE)


@pytest.mark.parametrize("lib", [torch, fusegrad])
def test_fx_calls_untraced_predicates_and_records_factories(lib):
    """fx calls `is_tensor` (False for a proxy) instead of recording it, as torch.fx does."""
    def f(x):
        if lib.is_tensor(x):
            return x + 1
        return x * 2

    gm = lib.fx.symbolic_trace(f)
    targets = [getattr(n.target, "__name__", n.target) for n in gm.graph.nodes
               if n.op == "call_function"]
    assert targets == ["mul"]


@pytest.mark.parametrize("method", ["nonzero", "item", "tolist"])
def test_capture_breaks_on_data_dependent_methods(method):
    """A data-dependent method ends the graph: the compiled function runs it eagerly and
    gives eager's result, as torch.compile does."""
    def f(x):
        y = x * 2
        out = getattr(y, method)()
        return out

    for lib in (torch, fusegrad):
        lib._dynamo.reset()
    x = torch.tensor([[0.0, 1.5], [2.0, 0.0]]) if method != "item" else torch.tensor(3.0)
    want = f(x)
    got = fusegrad.compile(f, backend="eager")(fusegrad.tensor(x.numpy()))
    if isinstance(want, torch.Tensor):
        assert got.tolist() == want.tolist()
    else:
        assert got == want


def test_capture_keeps_unread_inplace_composites():
    """Dead-code elimination keeps a composite in-place call nothing reads (`x.clip_`), so
    the compiled function mutates its input as eager does."""
    def f(x):
        x.clip_(-0.5, 0.5)
        x.tril_()
        return x.sum()

    data = [[-1.0, 2.0], [0.25, -3.0]]
    t = torch.tensor(data)
    want = f(t)
    fx = fusegrad.tensor(data)
    fusegrad._dynamo.reset()
    got = fusegrad.compile(f, backend="eager")(fx)
    assert float(got) == float(want)
    assert fx.tolist() == t.tolist()


# ---------------------------------------------------------------- the generated surface


def _namespace_functions():
    """The public functions of `fusegrad` (classes, dtypes and lazy subpackages aside)."""
    lazy = fusegrad._LAZY_MODULES | set(fusegrad._LAZY_NAMES)
    return {name: getattr(fusegrad, name) for name in dir(fusegrad)
            if not name.startswith("_") and name not in lazy
            and callable(getattr(fusegrad, name))
            and not isinstance(getattr(fusegrad, name), type)}


def _tensor_methods():
    """Tensor's public methods, operators, protocols and generated properties."""
    out = {}
    for name, value in vars(fusegrad.Tensor).items():
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            continue
        if callable(value) or name in SP.METHODS:
            out[name] = value
    return out


def test_every_public_function_is_an_op_or_a_composite():
    """Each public function of fusegrad is a registry op's spelling, an alias of one, or a
    named composite."""
    unknown = sorted(n for n in _namespace_functions() if S.kind_of(n) is None)
    assert not unknown, f"public functions neither op nor composite: {unknown}"


def test_every_tensor_method_and_operator_is_an_op_or_a_composite():
    """Each Tensor method and operator is a registry op's spelling, an alias, or a named
    composite; a method made from a registry op names ops that exist."""
    unknown = []
    for name in _tensor_methods():
        entry = SP.METHODS.get(name)
        if entry is None or entry[0] in ("method", "method_of_lazy_module", "property"):
            if S.kind_of(name) is None:
                unknown.append(name)
        elif entry[0] == "function":
            if S.kind_of(entry[1]) is None:
                unknown.append(f"{name} -> {entry[1]}")
        else:
            missing = [op for op in entry[1:] if op not in REGISTRY]
            assert not missing, (name, missing)
    assert not unknown, f"Tensor methods neither op nor composite: {unknown}"


def test_table_is_what_tensor_has():
    """Every entry of the spelling table is attached as declared, and PyTorch has each
    method: a table entry torch.Tensor lacks would be a spelling PyTorch does not have
    (`slice`, which derivatives and `OpDef.public` of `slice.Tensor` use, aside). The
    `__torch_function__` wrappers are seen through."""
    F = fusegrad._functions
    for name, (form, *what) in SP.METHODS.items():
        attached = implementation(vars(fusegrad.Tensor)[name])
        if form == "function":
            assert attached is getattr(F, what[0]), name
        elif form == "property":
            assert isinstance(attached, property), name
        else:
            assert callable(attached), name
        assert hasattr(torch.Tensor, name) or name == "slice", name


def test_aliases_are_the_ops_own_functions_and_methods():
    """An alias is the same function (and method) as the op it names, as in PyTorch, where
    `torch.arcsin` behaves as `torch.asin` (beneath the `__torch_function__` wrappers, which
    report each spelling as called)."""
    F = fusegrad._functions
    import fusegrad.nn._aten_aliases as NNA
    from fusegrad.ops.surface import NN_SPELLING, has_flag

    publics = {op.public for op in REGISTRY.values()}
    for alias, name in SP.ALIASES.items():
        assert name in publics, (alias, name)
        assert hasattr(torch, alias), alias
        home = NNA if has_flag(name, NN_SPELLING) else F  # ATen's layer spellings live in nn
        assert getattr(home, alias) is getattr(home, name), alias
        assert implementation(getattr(fusegrad, alias)) is \
            implementation(getattr(fusegrad, name)), alias
        if alias in vars(fusegrad.Tensor):
            method = implementation(vars(fusegrad.Tensor)[alias])
            assert method is implementation(vars(fusegrad.Tensor)[name]), alias


def test_inplace_functions_call_the_methods():
    """`fusegrad.relu_(x)` is `x.relu_()`, as torch.relu_ is."""
    for name in SP.INPLACE_FUNCTIONS:
        assert name in vars(fusegrad.Tensor), name
        assert SP.METHODS.get(name, ("",))[0] != "function" or \
            SP.METHODS[name][1] not in SP.INPLACE_FUNCTIONS  # no method calling itself
    x, t = fusegrad.tensor([-1.0, 2.0]), torch.tensor([-1.0, 2.0])
    assert fusegrad.relu_(x) is x and x.tolist() == torch.relu_(t).tolist()


@pytest.mark.parametrize("name", ["__add__", "__rsub__", "__iadd__", "exp_", "eq_", "__eq__",
                                  "bitwise_and_", "hypot_", "__rtruediv__", "lerp_"])
def test_generated_methods_record_pytorchs_nodes(name):
    """A method made from the table records PyTorch's node and gives PyTorch's values."""
    args = {"__add__": (2.0,), "__rsub__": (2.0,), "__iadd__": (1.5,), "exp_": (),
            "eq_": (0.5,), "__eq__": (0.5,), "hypot_": ("y",), "__rtruediv__": (3.0,),
            "lerp_": ("y", 0.25)}
    results = []
    for lib in (torch, fusegrad):
        data = [[0.5, -1.25], [2.0, 3.0]]
        if name == "bitwise_and_":
            x = lib.tensor([[3, 5], [6, 7]])
            call_args = (6,)
        else:
            leaf = lib.tensor(data, requires_grad=True)
            x = leaf * 1.0
            call_args = tuple(lib.tensor([[1.0, 2.0], [0.5, 0.25]]) if a == "y" else a
                              for a in args[name])
        out = getattr(x, name)(*call_args)
        node = type(out.grad_fn).__name__ if out.grad_fn is not None else None
        results.append((np.asarray(out.tolist(), dtype=float), node))
    (want, want_node), (got, got_node) = results
    assert got_node == want_node
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ---------------------------------------------------------------- no second list of ops

# Lists of names that are not the registry's op names although they share spellings: the
# code generator's loop IR (its own small language of unary, binary and reduction kinds),
# Python's `operator` and `math` functions, embedding_bag's mode names, and the
# functionalization rules, one branch per view op, which invert each view (file: count).
_OTHER_VOCABULARIES = {
    "compiler/codegen/c.py": 2, "compiler/codegen/ir.py": 1,
    "compiler/codegen/lower_reduce.py": 1,
    "ops/_mathlib.py": 2, "compiler/capture/builder.py": 1,
    "compiler/capture/calls.py": 2, "fx/node.py": 1,
    # Python's operator and conversion method names (`__add__`, `__index__`, `__round__`),
    # whose Python definitions capture must not run while translating.
    "compiler/capture/translator.py": 2,
    "fx/proxy.py": 2, "nn/_functional_layers.py": 1, "compiler/aot/functionalize.py": 1,
    # TorchScript's operators on Python numbers and `math` functions (`jit/_compiler.py`,
    # `_expressions.py`, `_interpreter.py`, and `_types.py`'s comparisons and the operators
    # whose result on numbers is their operand's type); what public names return is the
    # surface's (`SCRIPT_RESULTS`).
    "jit/_compiler.py": 1, "jit/_expressions.py": 1, "jit/_interpreter.py": 2,
    "jit/_types.py": 2,
    # Python's binary operator names, the cores of `__add__`, `__radd__` and `__iadd__`, and
    # the parameter names PyTorch's schemas give tensors (`tensor`, `index`).
    "_torch_function_wrappers.py": 2,
    # `calculate_gain`'s nonlinearity names (`linear`, `conv2d`, `sigmoid`)
    "nn/init.py": 1,
    # index_reduce's reduction modes (prod, mean, amax, amin), a vocabulary of its own
    "_functions/compat_layers.py": 1,
    # Inside the registry's package, what is no table of op facts: reduction modes
    # (scatter's, segment_reduce's, ONNX's reduce operators), the C math library's function
    # names, and one op module naming its overload family (`sort`'s complex refusal).
    "ops/scatter.py": 4, "ops/segment.py": 5, "ops/_onnx_mappings.py": 2, "ops/layers.py": 1,
    "ops/complex.py": 1, "ops/activation.py": 1,
    # `fusegrad.ops`' list of its lazily loaded op modules (file names, not ops).
    "ops/__init__.py": 1,
}

# The registry's own tables, each a declarative table of the generated surface keyed by op or
# public name, as DESIGN allows beside the entries (`native_functions.yaml`'s role): the
# spellings (`spellings.py`), the composites and the flags capture, fx, ONNX and the profiler
# read (`surface.py`), `out=` (`out_facts.py`), named tuples (`named_results.py`), the
# `_foreach_*` family (`foreach.py`), `ops.aten`'s schema defaults (`overloads.py`), the
# `*_copy` forms (`view_copies.py`) and the partitioner's cheap ops (`registry.py`). A new
# table anywhere else in `ops/` (a module's own op-name -> kernel map) fails the test: such a
# fact is a field of the op's entry (`OpDef.quantized`, `OpDef.autocast`). The spelling table
# and the surface are tables through and through (None: any number).
_REGISTRY_TABLES = {
    "ops/spellings.py": None, "ops/surface.py": None, "ops/out_facts.py": 8,
    "ops/named_results.py": 1, "ops/foreach.py": 4, "ops/overloads.py": 2,
    "ops/view_copies.py": 1, "ops/registry.py": 1,
}


def _nodes(tree):
    """The nodes of `tree` in `ast.walk`'s order, read from each node's fields directly (the
    source tree's million nodes made `ast.walk`'s generators most of this module's time)."""
    todo = collections.deque([tree])
    AST = ast.AST
    while todo:
        node = todo.popleft()
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                todo.extend(v for v in value if isinstance(v, AST))
            elif isinstance(value, AST):
                todo.append(value)
        yield node


def _key_name(key) -> str | None:
    """The name a dict key spells: a string, or the function whose code it is
    (`zeros.__code__`, a table of public functions by their code)."""
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value
    if isinstance(key, ast.Attribute) and key.attr == "__code__" and \
            isinstance(key.value, ast.Name):
        return key.value.id
    return None


def _string_collections(tree):
    """The string elements of each literal collection (and `"a b c".split()`) in `tree`,
    leaving out `__all__`, which lists a module's exports."""
    exports = set()
    found = []  # (node, line, strings), in walk order
    for node in _nodes(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                exports.update(id(n) for n in ast.walk(node.value))
        elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            found.append((node, node.lineno, [i.value for i in node.elts if
                                              isinstance(i, ast.Constant)
                                              and isinstance(i.value, str)]))
        elif isinstance(node, ast.Dict):
            found.append((node, node.lineno, [_key_name(k) for k in node.keys
                                              if _key_name(k) is not None]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "split" and isinstance(node.func.value, ast.Constant) and \
                isinstance(node.func.value.value, str):
            found.append((node, node.lineno, node.func.value.value.split()))
    for node, line, strings in found:
        if id(node) not in exports:
            yield line, strings


def _op_name_lists(source: str, names: set) -> list:
    """(line, names) of each collection in `source` holding three or more op names (an
    overload's name, `zeros.default`, as its op's)."""
    found = []
    for line, strings in _string_collections(ast.parse(source)):
        hits = [s for s in strings if s in names or s.partition(".")[0] in names]
        if len(hits) >= 3:
            found.append((line, hits))
    return found


def _op_names() -> set:
    """The registry's op names and public spellings, and the composites with ATen calls
    (the factories, the layers export keeps whole)."""
    return {op.public for op in REGISTRY.values()} | set(REGISTRY) | set(SP.ALIASES) | \
        set(S.ATEN_CALLS)


def test_no_op_name_list_outside_the_registry():
    """No module keeps a collection of op names beside the registry's own tables: what a
    layer needs to know of an op is a field of its entry, a surface flag or an entry of the
    spelling table."""
    root = pathlib.Path(fusegrad.__file__).parent
    names = _op_names()
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        lists = _op_name_lists(path.read_text(encoding="utf-8"), names)
        if rel in _REGISTRY_TABLES and _REGISTRY_TABLES[rel] is None:
            continue
        allowed = _REGISTRY_TABLES.get(rel, 0) + _OTHER_VOCABULARIES.get(rel, 0)
        if len(lists) != allowed:
            found[rel] = lists
    assert not found, f"op-name lists outside the registry: {found}"


def test_op_name_list_detector_finds_the_old_lists():
    """The detector flags the kinds of lists the layers used to keep (capture's factories and
    data-dependent methods, fx's predicates, a `"a b c".split()` table, factories by their
    code, ATen call names, an op -> kernel map)."""
    names = _op_names()
    source = (
        'DATA_DEPENDENT = {"item", "tolist", "nonzero", "unique", "masked_select"}\n'
        'INPLACE = ("exp_", "log_", "relu_")\n'
        'TABLE = frozenset("abs neg exp sigmoid".split())\n'
        'METHODS = {"sum": 1, "mean": 2, "amax": 3}\n'
        '__all__ = ["add", "sub", "mul"]\n'
        'OTHER = ("alpha", "beta", "gamma")\n'
        'READERS = {zeros.__code__: 1, ones.__code__: 2, arange.__code__: 3}\n'
        'CALLS = {"zeros.default": 1, "arange.start": 2, "linear.default": 3}\n'
        'KERNELS = {"mean.dim": "_mean", "cat": "_cat", "fill_.Scalar": "_fill"}\n')
    assert sorted(line for line, _ in _op_name_lists(source, names)) == [1, 2, 3, 4, 7, 8, 9]


# ---------------------------------------------------------------- the protocol's facts


def _wrapped(space) -> list:
    """The names of `space` behind a `__torch_function__` wrapper."""
    return [n for n in dir(space) if hasattr(getattr(space, n), "_torch_function_info")]


def test_protocol_python_and_c_flags_are_pytorchs():
    """The functions flagged as written in Python are PyTorch's Python functions (and every
    routed one of `torch.functional` is flagged); the nn.functional functions flagged C are
    PyTorch's builtins (and every routed builtin is flagged), as are the Tensor methods."""
    import fusegrad.nn.functional as F

    python = S.names_with(S.PYTHON_FUNCTION)
    assert python and all(inspect.isfunction(getattr(torch, n)) for n in python), \
        sorted(n for n in python if not inspect.isfunction(getattr(torch, n)))
    assert not [n for n in _wrapped(fusegrad) if n not in python and
                getattr(getattr(torch, n, None), "__module__", None) == "torch.functional"]
    c_level = S.names_with(S.C_FUNCTIONAL)
    assert c_level and not [n for n in c_level if inspect.isfunction(getattr(TF, n))]
    assert not [n for n in _wrapped(F) if hasattr(TF, n) and n not in c_level and
                not inspect.isfunction(getattr(TF, n))]
    methods = S.names_with(S.PYTHON_METHOD)
    assert methods and all(inspect.isfunction(getattr(torch.Tensor, n)) for n in methods)


def test_protocol_unrouted_helpers_are_none_pytorch_overrides():
    """A helper flagged unrouted is left unwrapped and is none of the functions PyTorch lets
    a handler override; every public function PyTorch lets it override is routed."""
    overridable = torch.overrides.get_testing_overrides()
    unrouted = S.names_with(S.NOT_ROUTED)
    assert not [n for n in unrouted if getattr(torch, n, None) in overridable]
    assert not [n for n in unrouted if n in _wrapped(fusegrad)]
    assert not [n for n, fn in _namespace_functions().items()
                if getattr(torch, n, None) in overridable and n not in _wrapped(fusegrad)]


def test_protocol_self_only_methods_take_no_other_tensor():
    """A method flagged self-only (plain tensors call it unchecked) takes no tensor but self
    in any of its ATen schemas, and PyTorch's Tensor has it (`slice`, the method of
    `slice.Tensor`'s public spelling, aside)."""
    for name in sorted(S.names_with(S.SELF_ONLY)):
        assert hasattr(torch.Tensor, name) or name == "slice", name
        for schema in torch._C._jit_get_schemas_for_operator(f"aten::{name}"):
            others = [a for a in schema.arguments[1:] if "Tensor" in str(a.type) and
                      not (a.alias_info and a.alias_info.is_write)]  # `out=` aside
            assert not others, (name, str(schema))


def _reporting_subclass(lib, method: str, reported: list) -> type:
    """A subclass of `lib.Tensor` whose handler notes whether it got `lib.Tensor.<method>`."""
    class Logged(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            reported.append((func is getattr(lib.Tensor, method), func.__name__))
            return super().__torch_function__(func, types, args, kwargs or {})

    return Logged


@pytest.mark.parametrize("expr, method", [(lambda x: +x, "positive"),
                                          (lambda x: 1 / x, "__rdiv__"),
                                          (lambda x: x + 1, "add"), (lambda x: -x, "neg")])
def test_operators_report_pytorchs_methods(expr, method):
    """An operator on a subclass reports the method PyTorch's does (`+x`: `positive`, `1 / x`:
    `__rdiv__`), which both libraries' Tensor have."""
    want = expr(torch.tensor([1.0, 2.0])).tolist()
    for lib in (torch, fusegrad):
        reported: list = []
        x = lib.tensor([1.0, 2.0]).as_subclass(_reporting_subclass(lib, method, reported))
        got = expr(x)
        assert reported[0] == (True, method), lib
        assert got.tolist() == want
