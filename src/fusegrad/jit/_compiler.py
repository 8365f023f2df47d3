"""Compiling one Python function's AST into a graph (`FunctionCompiler`).

Variables are SSA values held in an environment (name -> Value) per block. An `if` compiles
each branch with a copy of the environment; the variables either branch rebinds become the
`prim::If`'s outputs. A loop carries the variables its body assigns that exist before it.
An early return (`if c: return a` followed by more code) is compiled by moving the code after
the `if` into the branch that does not return, so both branches end in a return and the If
yields the result, as TorchScript's exit transform does.

Names the code reads that are not variables come from the function's globals and closure:
numbers and strings become constants, fusegrad functions become `aten::` nodes, other
Python functions are scripted in turn and called with `prim::CallFunction`.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math

from ._ir import Block, Graph, Node, Value, parse_generic
from ._types import annotation_type, element_type, join, result_type
from .frontend import FrontendError, NotSupportedError, Source, fail, unsupported

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
           ast.FloorDiv: "floordiv", ast.Mod: "remainder", ast.Pow: "pow",
           ast.MatMult: "matmul", ast.BitAnd: "__and__", ast.BitOr: "__or__",
           ast.BitXor: "__xor__", ast.LShift: "__lshift__", ast.RShift: "__rshift__"}
_INPLACE = {"add": "add_", "sub": "sub_", "mul": "mul_", "div": "div_",
            "floordiv": "floordiv_", "pow": "pow_"}
_COMPARES = {ast.Lt: "lt", ast.Gt: "gt", ast.LtE: "le", ast.GtE: "ge", ast.Eq: "eq",
             ast.NotEq: "ne", ast.Is: "__is__", ast.IsNot: "__isnot__",
             ast.In: "__contains__"}
_BUILTINS = {len: "len", int: "Int", float: "Float", bool: "Bool", abs: "abs", min: "min",
             max: "max"}
_TENSOR_ATTRS = {"shape": ("size", "List[int]"), "ndim": ("dim", "int")}
_MAX_INT = 9223372036854775807


def _may_return(stmts: list[ast.stmt]) -> bool:
    """Whether a return statement is anywhere in `stmts` (outside nested functions)."""
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Return):
                return True
    return False


def _always_returns(stmts: list[ast.stmt]) -> bool:
    for s in stmts:
        if isinstance(s, (ast.Return, ast.Raise)):
            return True
        if isinstance(s, ast.If) and _always_returns(s.body) and _always_returns(s.orelse):
            return True
    return False


def _assigned(stmts: list[ast.stmt]) -> list[str]:
    """The variable names `stmts` bind, in order of first binding."""
    out: list[str] = []
    for s in stmts:
        for n in ast.walk(s):
            targets = []
            if isinstance(n, ast.Assign):
                targets = n.targets
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)):
                targets = [n.target]
            for t in targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name) and name.id not in out:
                        out.append(name.id)
    return out


class FunctionCompiler:
    """Compiles one function (or method) into a `Graph`; `unit` compiles what it calls."""

    def __init__(self, unit, fn, source: Source, self_type: str | None = None):
        self.unit = unit
        self.fn = fn
        self.src = source
        self.self_type = self_type
        self.graph = Graph()
        self.block: Block = self.graph
        self.scope = dict(getattr(fn, "__globals__", {}))
        closure = getattr(fn, "__closure__", None) or ()
        for name, cell in zip(fn.__code__.co_freevars, closure):
            try:
                self.scope[name] = cell.cell_contents
            except ValueError:
                pass
        self.consts: dict = {}
        self.const_at = 0
        self.return_type: str | None = None

    # -- entry ---------------------------------------------------------------------------

    def compile(self, params: list[tuple[str, str]]) -> Graph:
        """Compile the body with `params` (name, type) as the graph's inputs."""
        env: dict[str, Value] = {}
        for name, type_ in params:
            v = self.graph.fresh(name, type_)
            self.graph.params.append(v)
            env[name] = v
        body = list(self.src.fdef.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant) and isinstance(
                body[0].value.value, str):
            body = body[1:]  # the docstring
        if not _always_returns(body):
            end = ast.Return(value=None)
            ast.copy_location(end, body[-1] if body else self.src.fdef)
            body.append(end)
        result = self.stmts(body, env)
        self.graph.returns = [result]
        return self.graph

    # -- emitting ------------------------------------------------------------------------

    def emit(self, kind: str, inputs: list[Value], out_types: list[str], at: ast.AST | None,
             attrs: dict | None = None, hints: list | None = None) -> Node:
        node = Node(kind, inputs, attrs, self.src.where(at) if at is not None else None)
        for i, t in enumerate(out_types):
            hint = hints[i] if hints else None
            node.outputs.append(self.graph.fresh(hint, t, node))
        self.block.nodes.append(node)
        return node

    def const(self, value, at: ast.AST | None = None, **attrs) -> Value:
        """A constant, made once per graph at its top (so every block sees it)."""
        key = (type(value).__name__, repr(value), tuple(sorted(attrs.items())))
        if key in self.consts:
            return self.consts[key]
        if attrs.get("dtype"):
            type_ = "ScalarType"
        elif isinstance(value, tuple):
            type_ = "Tuple[" + ", ".join(type(v).__name__ for v in value) + "]"
            attrs = {**attrs, "tuple": True}
            value = list(value)
        else:
            type_ = {bool: "bool", int: "int", float: "float", str: "str",
                     type(None): "NoneType"}[type(value)]
        node_attrs = dict(attrs)
        if value is not None or isinstance(value, list):
            node_attrs["value"] = value
        node = Node("prim::Constant", [], node_attrs, self.src.where(at) if at else None)
        node.outputs.append(self.graph.fresh(None, type_, node))
        self.graph.nodes.insert(self.const_at, node)
        self.const_at += 1
        self.consts[key] = node.outputs[0]
        return node.outputs[0]

    def op(self, name: str, form: str, inputs: list[Value], at: ast.AST,
           kwargs: list[str] | None = None, type_: str | None = None) -> Value:
        attrs: dict = {"form": form}
        if kwargs:
            attrs["kwargs"] = list(kwargs)
        if type_ is None:
            type_ = result_type(name, form, [v.type for v in inputs], len(inputs))
        return self.emit(f"aten::{name}", inputs, [type_], at, attrs).outputs[0]

    def in_block(self, block: Block):
        compiler = self

        class _Scope:
            def __enter__(self):
                self.saved = compiler.block
                compiler.block = block

            def __exit__(self, *exc):
                compiler.block = self.saved

        return _Scope()

    def error(self, node: ast.AST, message: str, cls=FrontendError):
        return fail(cls, self.src, node, message)

    # -- statements ----------------------------------------------------------------------

    def stmts(self, stmts: list[ast.stmt], env: dict) -> Value | None:
        """Compile a statement list; the returned value when the list returns."""
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                value = self.expr(s.value, env) if s.value is not None else self.const(None)
                self.check_return(value, s)
                return value
            if isinstance(s, ast.If) and (_may_return(s.body) or _may_return(s.orelse)):
                rest = stmts[i + 1:]
                body = s.body if _always_returns(s.body) else s.body + rest
                orelse = s.orelse if _always_returns(s.orelse) else s.orelse + rest
                return self.if_stmt(s, body, orelse, env, returning=True)
            self.stmt(s, env)
            if isinstance(s, ast.Raise):
                return None
        return None

    def check_return(self, value: Value, at: ast.AST) -> None:
        if self.return_type is None:
            self.return_type = value.type
        elif join(self.return_type, value.type) is None:
            raise self.error(at, f"Previous return statement returned a value of type "
                                 f"{self.return_type} but this return statement returns a "
                                 f"value of type {value.type}")

    def stmt(self, s: ast.stmt, env: dict) -> None:
        if isinstance(s, ast.Assign):
            value = self.expr(s.value, env)
            for target in s.targets:
                self.assign(target, value, env, s.value)
        elif isinstance(s, ast.AnnAssign):
            declared = annotation_type(s.annotation)
            value = self.expr(s.value, env) if s.value is not None else self.const(None)
            if declared and join(declared, value.type) not in (declared,):
                raise self.error(s, f"Variable '{getattr(s.target, 'id', '?')}' is annotated "
                                    f"with type {declared} but is being assigned to a value "
                                    f"of type {value.type}")
            if declared:
                value.type = declared if value.type in ("Any", "NoneType") or \
                    declared.startswith("Optional") and value.node is not None and \
                    value.node.kind != "prim::Constant" else value.type
            self.assign(s.target, value, env, s.value)
        elif isinstance(s, ast.AugAssign):
            self.aug_assign(s, env)
        elif isinstance(s, ast.Expr):
            if not (isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)):
                self.expr(s.value, env, statement=True)
        elif isinstance(s, ast.If):
            self.if_stmt(s, s.body, s.orelse, env, returning=False)
        elif isinstance(s, ast.For):
            self.for_stmt(s, env)
        elif isinstance(s, ast.While):
            self.while_stmt(s, env)
        elif isinstance(s, ast.Pass):
            pass
        elif isinstance(s, ast.Assert):
            self.assert_stmt(s, env)
        elif isinstance(s, ast.Raise):
            self.raise_stmt(s, env)
        else:
            raise unsupported(self.src, s)

    def assign(self, target: ast.AST, value: Value, env: dict, at: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if value.name.isdigit() and value.node is not None and \
                    value.node.kind != "prim::Constant":
                renamed = self.graph.fresh(target.id, value.type, value.node)
                value.name = renamed.name
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                raise unsupported(self.src, target)
            head, args = parse_generic(value.type)
            types = args if head == "Tuple" and len(args) == len(target.elts) else \
                [element_type(value.type)] * len(target.elts)
            kind = "prim::ListUnpack" if head == "List" else "prim::TupleUnpack"
            hints = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
            node = self.emit(kind, [value], types, at, hints=hints)
            for e, v in zip(target.elts, node.outputs):
                self.assign(e, v, env, at)
        elif isinstance(target, ast.Subscript):
            obj = self.expr(target.value, env)
            index = self.index(target.slice, env)
            self.emit("aten::__setitem__", [obj, index, value], [], target,
                      {"form": "operator"})
        elif isinstance(target, ast.Attribute):
            obj = self.expr(target.value, env)
            if not obj.type.startswith("__torch__."):
                raise self.error(target, "only module attributes can be assigned",
                                 NotSupportedError)
            self.emit("prim::SetAttr", [obj, value], [], target, {"name": target.attr})
        else:
            raise unsupported(self.src, target)

    def aug_assign(self, s: ast.AugAssign, env: dict) -> None:
        name = _BINOPS.get(type(s.op))
        if name is None:
            raise unsupported(self.src, s)
        if isinstance(s.target, ast.Name):
            current = self.lookup(s.target, env)
            rhs = self.expr(s.value, env)
            # a tensor is updated in place (`+=` is `add_`), a number is rebound
            if current.type == "Tensor" and name in _INPLACE:
                value = self.op(_INPLACE[name], "operator", [current, rhs], s, type_="Tensor")
            else:
                value = self.op(name, "operator", [current, rhs], s)
            self.assign(s.target, value, env, s)
        elif isinstance(s.target, ast.Subscript):
            obj = self.expr(s.target.value, env)
            index = self.index(s.target.slice, env)
            old = self.op("__getitem__", "operator", [obj, index], s,
                          type_=element_type(obj.type))
            rhs = self.expr(s.value, env)
            new = self.op(_INPLACE.get(name, name), "operator", [old, rhs], s)
            self.emit("aten::__setitem__", [obj, index, new], [], s, {"form": "operator"})
        else:
            raise unsupported(self.src, s)

    def cond(self, test: ast.expr, env: dict) -> Value:
        """A condition as a bool value (a tensor goes through `aten::Bool`)."""
        value = self.expr(test, env)
        if value.type != "bool":
            value = self.op("Bool", "operator", [value], test)
        return value

    def if_stmt(self, s: ast.If, body, orelse, env: dict, returning: bool) -> Value | None:
        cond = self.cond(s.test, env)
        node = self.emit("prim::If", [cond], [], s)
        envs, results = [], []
        for stmts in (body, orelse):
            block = Block()
            node.blocks.append(block)
            branch = dict(env)
            with self.in_block(block):
                results.append(self.stmts(stmts, branch))
            envs.append(branch)
        if returning:
            types = [r.type for r, b in zip(results, node.blocks) if r is not None]
            joined = types[0] if types else "NoneType"
            for t in types[1:]:
                joined = join(joined, t) or joined
            out = []
            for r, block in zip(results, node.blocks):
                # a branch that raises yields nothing real
                block.returns = [r if r is not None else self.uninitialized(block, joined)]
            out = self.graph.fresh(None, joined, node)
            node.outputs.append(out)
            return out
        then_env, else_env = envs
        raises = [bool(b.nodes) and b.nodes[-1].kind == "prim::RaiseException"
                  for b in node.blocks]
        for name in list(dict.fromkeys([*then_env, *else_env])):
            a, b = then_env.get(name), else_env.get(name)
            if raises[0] and b is not None:
                a = a if a is not None and name in then_env else self.uninitialized(
                    node.blocks[0], b.type)
            if raises[1] and a is not None:
                b = b if b is not None and name in else_env else self.uninitialized(
                    node.blocks[1], a.type)
            if a is None or b is None or a is b:
                if name not in env and (a is None) != (b is None):
                    env.pop(name, None)  # defined on one path only: not usable after
                continue
            joined = join(a.type, b.type)
            if joined is None:
                raise self.error(s, f"Type mismatch: {name} is set to type {a.type} in the "
                                    f"true branch and type {b.type} in the false branch")
            node.blocks[0].returns.append(a)
            node.blocks[1].returns.append(b)
            out = self.graph.fresh(name, joined, node)
            node.outputs.append(out)
            env[name] = out
        return None

    def uninitialized(self, block: Block, type_: str) -> Value:
        node = Node("prim::Uninitialized", [])
        node.outputs.append(self.graph.fresh(None, type_, node))
        block.nodes.append(node)
        return node.outputs[0]

    def loop(self, s: ast.stmt, trip: Value, cond: Value, env: dict, bind, next_cond) -> None:
        """Emit a `prim::Loop`: `bind(index, body_env)` binds the loop variable; `next_cond`
        (or None for `for`) recomputes the condition at the end of the body."""
        if _may_return(s.body):
            raise self.error(s, "return statements inside loops aren't supported",
                             NotSupportedError)
        carried = [n for n in _assigned(s.body) if n in env]
        node = self.emit("prim::Loop", [trip, cond, *[env[n] for n in carried]], [], s)
        block = Block()
        node.blocks.append(block)
        body_env = dict(env)
        index = self.graph.fresh(None, "int")
        block.params.append(index)
        for n in carried:
            v = self.graph.fresh(n, env[n].type)
            block.params.append(v)
            body_env[n] = v
        with self.in_block(block):
            bind(index, body_env)
            self.stmts(s.body, body_env)
            again = next_cond(body_env) if next_cond else self.const(True)
        block.returns = [again]
        for n in carried:
            if join(env[n].type, body_env[n].type) != env[n].type:
                raise self.error(s, f"Variable '{n}' previously had type {env[n].type} but "
                                    f"is now being assigned to a value of type "
                                    f"{body_env[n].type}")
            block.returns.append(body_env[n])
            out = self.graph.fresh(n, env[n].type, node)
            node.outputs.append(out)
            env[n] = out

    def for_stmt(self, s: ast.For, env: dict) -> None:
        if s.orelse:
            raise self.error(s, "else branches of for loops aren't supported",
                             NotSupportedError)
        if not isinstance(s.target, ast.Name):
            raise self.error(s.target, "only a single variable can be the target of a for "
                                       "loop", NotSupportedError)
        it = s.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
                it.func.id == "range" and it.func.id not in env and not it.keywords:
            args = [self.expr(a, env) for a in it.args]
            if not 1 <= len(args) <= 3:
                raise self.error(it, "range expected 1 to 3 arguments")
            if len(args) == 1:
                trip, lo, step = args[0], None, None
            else:
                lo = args[0]
                step = args[2] if len(args) == 3 else self.const(1)
                trip = self.op("__range_length", "operator", [lo, args[1], step], it)

            def bind(index, body_env):
                value = index if lo is None else self.op("__derive_index", "operator",
                                                         [index, lo, step], it)
                self.assign(s.target, value, body_env, s)

            self.loop(s, trip, self.const(True), env, bind, None)
            return
        seq = self.expr(it, env)
        if seq.type.startswith("__torch__."):
            self.unrolled_for(s, seq, env)
            return
        trip = self.op("len", "operator", [seq], it)

        def bind_item(index, body_env):
            item = self.op("__getitem__", "operator", [seq, index], it,
                           type_=element_type(seq.type))
            self.assign(s.target, item, body_env, s)

        self.loop(s, trip, self.const(True), env, bind_item, None)

    def unrolled_for(self, s: ast.For, seq: Value, env: dict) -> None:
        """`for m in self.layers:` over a ModuleList or Sequential: one copy per module."""
        module = self.unit.module_of(seq.type)
        names = module.jit_children()
        if names is None:
            raise self.error(s.iter, f"'{seq.type}' object is not iterable",
                             NotSupportedError)
        for name in names:
            child = self.emit("prim::GetAttr", [seq], [module.jit_attr_type(name)], s.iter,
                              {"name": name}).outputs[0]
            env[s.target.id] = child
            if self.stmts(s.body, env) is not None:
                raise self.error(s, "return statements inside loops aren't supported",
                                 NotSupportedError)

    def while_stmt(self, s: ast.While, env: dict) -> None:
        if s.orelse:
            raise self.error(s, "else branches of while loops aren't supported",
                             NotSupportedError)
        first = self.cond(s.test, env)
        self.loop(s, self.const(_MAX_INT), first, env, lambda i, e: None,
                  lambda body_env: self.cond(s.test, body_env))

    def assert_stmt(self, s: ast.Assert, env: dict) -> None:
        cond = self.cond(s.test, env)
        node = self.emit("prim::If", [cond], [], s)
        node.blocks += [Block(), Block()]
        with self.in_block(node.blocks[1]):
            msg = self.expr(s.msg, env) if s.msg is not None else self.const("")
            self.emit("prim::RaiseException", [msg], [], s,
                      {"exception": "AssertionError"})

    def raise_stmt(self, s: ast.Raise, env: dict) -> None:
        exc = s.exc
        name, msg = "Exception", None
        if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name):
            name = exc.func.id
            if exc.args:
                msg = self.expr(exc.args[0], env)
        elif isinstance(exc, ast.Name):
            name = exc.id
        if not isinstance(getattr(builtins, name, None), type):
            raise self.error(s, "only builtin exceptions can be raised", NotSupportedError)
        self.emit("prim::RaiseException", [msg or self.const("")], [], s,
                  {"exception": name})

    # -- expressions ---------------------------------------------------------------------

    def lookup(self, node: ast.Name, env: dict) -> Value:
        if node.id in env:
            return env[node.id]
        return self.python_value(self.python_object(node), node)

    def python_object(self, node: ast.AST):
        """The Python object a name or dotted name outside the variables refers to."""
        if isinstance(node, ast.Name):
            if node.id in self.scope:
                return self.scope[node.id]
            if hasattr(builtins, node.id):
                return getattr(builtins, node.id)
            raise self.error(node, f"undefined value {node.id}")
        if isinstance(node, ast.Attribute):
            base = self.python_object(node.value)
            if not hasattr(base, node.attr):
                raise self.error(node, f"Module '{getattr(base, '__name__', base)}' has no "
                                       f"attribute '{node.attr}'")
            return getattr(base, node.attr)
        raise self.error(node, "expected a name")

    def python_value(self, obj, at: ast.AST) -> Value:
        import fusegrad

        if obj is None or isinstance(obj, (bool, int, float, str)):
            return self.const(obj, at)
        if isinstance(obj, fusegrad.dtype):
            return self.const(None, at, dtype=str(obj).split(".")[-1])
        raise self.error(at, f"python value of type '{type(obj).__name__}' cannot be used as "
                             "a value. Perhaps it is a closed over global variable? If so, "
                             "please consider passing it in as an argument or use a local "
                             "varible instead")

    def is_python_path(self, node: ast.AST, env: dict) -> bool:
        """Whether `node` (a name or dotted name) is not a variable but a Python object."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id not in env

    def expr(self, e: ast.expr, env: dict, statement: bool = False) -> Value:
        if isinstance(e, ast.Constant):
            if e.value is Ellipsis or isinstance(e.value, (bytes, complex)):
                raise unsupported(self.src, e)
            return self.const(e.value, e)
        if isinstance(e, ast.Name):
            return self.lookup(e, env)
        if isinstance(e, ast.Attribute):
            return self.attribute(e, env)
        if isinstance(e, ast.Call):
            return self.call(e, env, statement)
        if isinstance(e, ast.BinOp):
            name = _BINOPS.get(type(e.op))
            if name is None:
                raise unsupported(self.src, e)
            return self.op(name, "operator", [self.expr(e.left, env),
                                              self.expr(e.right, env)], e)
        if isinstance(e, ast.UnaryOp):
            if isinstance(e.op, ast.USub) and isinstance(e.operand, ast.Constant) and \
                    type(e.operand.value) in (int, float):
                return self.const(-e.operand.value, e)  # `-1` is a constant, as in Python
            value = self.expr(e.operand, env)
            if isinstance(e.op, ast.UAdd):
                return value
            if isinstance(e.op, ast.Not):
                if value.type != "bool":
                    value = self.op("Bool", "operator", [value], e)
                return self.op("__not__", "operator", [value], e)
            name = "neg" if isinstance(e.op, ast.USub) else "bitwise_not"
            return self.op(name, "operator", [value], e)
        if isinstance(e, ast.Compare):
            return self.compare(e, env)
        if isinstance(e, ast.BoolOp):
            return self.bool_op(e, env)
        if isinstance(e, ast.IfExp):
            cond = self.cond(e.test, env)
            node = self.emit("prim::If", [cond], [], e)
            values = []
            for branch in (e.body, e.orelse):
                block = Block()
                node.blocks.append(block)
                with self.in_block(block):
                    values.append(self.expr(branch, env))
                block.returns = [values[-1]]
            joined = join(values[0].type, values[1].type)
            if joined is None:
                raise self.error(e, f"Type mismatch: the true branch is of type "
                                    f"{values[0].type} and the false branch of type "
                                    f"{values[1].type}")
            out = self.graph.fresh(None, joined, node)
            node.outputs.append(out)
            return out
        if isinstance(e, (ast.Tuple, ast.List)):
            items = [self.expr(x, env) for x in e.elts]
            if isinstance(e, ast.Tuple):
                type_ = "Tuple[" + ", ".join(v.type for v in items) + "]"
                return self.emit("prim::TupleConstruct", items, [type_], e).outputs[0]
            kinds = {v.type for v in items}
            type_ = f"List[{kinds.pop() if len(kinds) == 1 else 'Tensor'}]"
            return self.emit("prim::ListConstruct", items, [type_], e).outputs[0]
        if isinstance(e, ast.JoinedStr):
            return self.fstring(e, env)
        if isinstance(e, ast.Subscript):
            obj = self.expr(e.value, env)
            if obj.type.startswith("__torch__.") and isinstance(e.slice, ast.Constant):
                module = self.unit.module_of(obj.type)
                name = str(e.slice.value)
                return self.emit("prim::GetAttr", [obj], [module.jit_attr_type(name)], e,
                                 {"name": name}).outputs[0]
            index = self.index(e.slice, env)
            const_index = e.slice.value if isinstance(e.slice, ast.Constant) else None
            return self.op("__getitem__", "operator", [obj, index], e,
                           type_=element_type(obj.type, const_index))
        raise unsupported(self.src, e)

    def fstring(self, e: ast.JoinedStr, env: dict) -> Value:
        """An f-string as `aten::format` of a "{}" template, as TorchScript compiles it."""
        template, args = "", []
        for part in e.values:
            if isinstance(part, ast.Constant):
                template += str(part.value).replace("{", "{{").replace("}", "}}")
            elif part.conversion == -1 and part.format_spec is None:
                template += "{}"
                args.append(self.expr(part.value, env))
            else:
                raise self.error(part, "f-string conversions and format specifications "
                                       "aren't supported", NotSupportedError)
        return self.op("format", "operator", [self.const(template), *args], e, type_="str")

    def index(self, s: ast.expr, env: dict) -> Value:
        """An index expression as a value (slices become `prim::SliceConstruct`)."""
        if isinstance(s, ast.Slice):
            parts = [self.expr(p, env) if p is not None else self.const(None)
                     for p in (s.lower, s.upper, s.step)]
            return self.emit("prim::SliceConstruct", parts, ["Any"], s).outputs[0]
        if isinstance(s, ast.Tuple):
            items = [self.index(x, env) for x in s.elts]
            type_ = "Tuple[" + ", ".join(v.type for v in items) + "]"
            return self.emit("prim::TupleConstruct", items, [type_], s).outputs[0]
        return self.expr(s, env)

    def compare(self, e: ast.Compare, env: dict) -> Value:
        left = self.expr(e.left, env)
        result = None
        for op, right_ast in zip(e.ops, e.comparators):
            right = self.expr(right_ast, env)
            if isinstance(op, ast.NotIn):
                value = self.op("__contains__", "operator", [right, left], e)
                value = self.op("__not__", "operator", [value], e)
            elif isinstance(op, ast.In):
                value = self.op("__contains__", "operator", [right, left], e)
            else:
                value = self.op(_COMPARES[type(op)], "operator", [left, right], e)
            result = value if result is None else self.op("__and__", "operator",
                                                          [result, value], e)
            left = right
        return result

    def bool_op(self, e: ast.BoolOp, env: dict) -> Value:
        """`a and b` / `a or b`, short-circuiting through `prim::If` as TorchScript does."""
        value = self.cond(e.values[0], env)
        for rhs in e.values[1:]:
            node = self.emit("prim::If", [value], [], e)
            then, other = Block(), Block()
            node.blocks += [then, other]
            evaluated = then if isinstance(e.op, ast.And) else other
            shortcut = other if isinstance(e.op, ast.And) else then
            with self.in_block(evaluated):
                evaluated.returns = [self.cond(rhs, env)]
            shortcut.returns = [self.const(isinstance(e.op, ast.Or))]
            value = self.graph.fresh(None, "bool", node)
            node.outputs.append(value)
        return value

    def attribute(self, e: ast.Attribute, env: dict) -> Value:
        if self.is_python_path(e, env):
            return self.python_value(self.python_object(e), e)
        base = self.expr(e.value, env)
        if base.type.startswith("__torch__."):
            module = self.unit.module_of(base.type)
            type_ = module.jit_attr_type(e.attr)
            if type_ is None:
                found, value = module.jit_class_constant(e.attr)
                if found:
                    return self.const(tuple(value) if isinstance(value, list) else value, e)
            if type_ is None:
                raise self.error(e, f"Module '{module.jit_class_name()}' has no attribute "
                                    f"'{e.attr}'")
            return self.emit("prim::GetAttr", [base], [type_], e, {"name": e.attr},
                             hints=[e.attr]).outputs[0]
        if e.attr in _TENSOR_ATTRS:
            name, type_ = _TENSOR_ATTRS[e.attr]
            return self.op(name, "method", [base], e, type_=type_)
        if e.attr in ("T", "mT", "H", "mH", "real", "imag", "grad", "data"):
            raise self.error(e, f"Tensor attribute '{e.attr}' isn't supported in script",
                             NotSupportedError)
        raise self.error(e, f"unknown attribute '{e.attr}' of a value of type {base.type}")

    def arguments(self, e: ast.Call, env: dict) -> tuple[list[Value], list[str]]:
        values = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                raise unsupported(self.src, a)
            values.append(self.expr(a, env))
        names = []
        for k in e.keywords:
            if k.arg is None:
                raise self.error(k.value, "keyword argument unpacking isn't supported",
                                 NotSupportedError)
            values.append(self.expr(k.value, env))
            names.append(k.arg)
        return values, names

    def call(self, e: ast.Call, env: dict, statement: bool = False) -> Value:
        func = e.func
        if isinstance(func, ast.Attribute) and not self.is_python_path(func, env):
            base = self.expr(func.value, env)
            if base.type.startswith("__torch__."):
                return self.module_call(e, base, func.attr, env)
            args, names = self.arguments(e, env)
            return self.op(func.attr, "method", [base, *args], e, names)
        if isinstance(func, ast.Name) and func.id in env:
            callee = env[func.id]
            if callee.type.startswith("__torch__."):
                return self.module_call(e, callee, None, env)
            raise self.error(e, f"'{callee.type}' object is not callable")
        if not isinstance(func, (ast.Name, ast.Attribute)):
            raise self.error(e, "only calls of named functions are supported",
                             NotSupportedError)
        return self.python_call(e, self.python_object(func), env)

    def module_call(self, e: ast.Call, obj: Value, attr: str | None, env: dict) -> Value:
        module = self.unit.module_of(obj.type)
        if attr is not None:
            attr_type = module.jit_attr_type(attr)
            if attr_type is not None and attr_type.startswith("__torch__."):
                obj = self.emit("prim::GetAttr", [obj], [attr_type], e.func,
                                {"name": attr}, hints=[attr]).outputs[0]
                module, attr = self.unit.module_of(attr_type), None
        method = attr or "forward"
        ret = module.jit_method_type(method)
        if ret is None:
            raise self.error(e, f"Module '{module.jit_class_name()}' has no method '{method}'")
        args, names = self.arguments(e, env)
        if names:
            raise self.error(e, "keyword arguments to module methods aren't supported",
                             NotSupportedError)
        return self.emit("prim::CallMethod", [obj, *args], [ret], e,
                         {"name": method}).outputs[0]

    def python_call(self, e: ast.Call, fn, env: dict) -> Value:
        import fusegrad
        import fusegrad.nn.functional as F

        from . import _markers

        if fn is range:
            raise self.error(e, "range() can only be used as the iterable of a for loop",
                             NotSupportedError)
        if fn is print:
            args, _ = self.arguments(e, env)
            self.emit("prim::Print", args, [], e)
            return self.const(None)
        if fn is _markers.annotate:
            declared = annotation_type(e.args[0]) if e.args else None
            value = self.expr(e.args[1], env)
            if declared:
                value.type = declared
            return value
        if fn is _markers.is_scripting:
            return self.const(True, e)
        try:
            name = _BUILTINS.get(fn)
        except TypeError:  # an unhashable callable
            name = None
        if name is not None:
            args, names = self.arguments(e, env)
            type_ = {"min": None, "max": None, "abs": None}.get(name)
            return self.op(name, "operator", args, e, names, type_)
        if fn in (math.floor, math.ceil, math.sqrt, math.exp, math.log):
            raise self.error(e, f"math.{fn.__name__} isn't supported in script",
                             NotSupportedError)
        target = self.unit.callee(fn)
        if target is not None:
            kind, name, ret = target
            args, names = self.arguments(e, env)
            if names:
                raise self.error(e, "keyword arguments to scripted functions aren't "
                                    "supported", NotSupportedError)
            return self.emit(kind, args, [ret], e, {"name": name}).outputs[0]
        name = getattr(fn, "__name__", None)
        for namespace, form in ((fusegrad, "function"), (F, "functional")):
            if name and getattr(namespace, name, None) is fn:
                args, names = self.arguments(e, env)
                return self.op(name, form, args, e, names)
        raise self.error(e, f"Python builtin {fn!r} is currently not supported in "
                            "Torchscript" if inspect.isbuiltin(fn) else
                         f"Python value {fn!r} cannot be called in script",
                         NotSupportedError)
