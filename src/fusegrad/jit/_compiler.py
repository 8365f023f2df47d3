"""Compiling one Python function's AST into a graph (`FunctionCompiler`).

Variables are SSA values held in an environment (name -> Value) per block. An `if` compiles
each branch with a copy of the environment; the variables either branch rebinds become the
`prim::If`'s outputs. A loop carries the variables its body assigns that exist before it.
An early return (`if c: return a` followed by more code) is compiled by moving the code after
the `if` into the branch that does not return, so both branches end in a return and the If
yields the result, as TorchScript's exit transform does. `break` and `continue` are compiled
the same way inside a loop body, `break` also clearing the loop's go-on condition.

Names the code reads that are not variables come from the function's globals and closure:
numbers and strings become constants, fusegrad functions become `aten::` nodes, other
Python functions are scripted in turn and called with `prim::CallFunction`.
"""

from __future__ import annotations

import ast
import builtins

from ._expressions import _BINOPS, ExpressionCompiler
from ._ir import Block, Graph, Node, Value, parse_generic
from ._types import annotation_type, element_type, join
from .frontend import NotSupportedError, Source, unsupported

_INPLACE = {"add": "add_", "sub": "sub_", "mul": "mul_", "div": "div_",
            "floordiv": "floordiv_", "pow": "pow_"}
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


def _exits(stmts: list[ast.stmt]) -> bool:
    """Whether `break` or `continue` of the enclosing loop is in `stmts` (not in an inner
    loop)."""
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)):
            return True
        if isinstance(s, ast.If) and (_exits(s.body) or _exits(s.orelse)):
            return True
    return False


def _always_exits(stmts: list[ast.stmt]) -> bool:
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue, ast.Raise)):
            return True
        if isinstance(s, ast.If) and _always_exits(s.body) and _always_exits(s.orelse):
            return True
    return False


_GO_ON = "$continue"  # the variable saying whether the current loop goes on


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


class FunctionCompiler(ExpressionCompiler):
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
        if result is None:  # the body only raises
            result = self.const(None)
        self.graph.returns = [result]
        return self.graph

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
            if isinstance(s, (ast.Break, ast.Continue)):
                if _GO_ON not in env:
                    raise self.error(s, f"'{'break' if isinstance(s, ast.Break) else 'continue'}"
                                        "' outside loop")
                if isinstance(s, ast.Break):
                    env[_GO_ON] = self.const(False)
                return None  # what follows in this list never runs
            if isinstance(s, ast.If) and _GO_ON in env and (_exits(s.body) or
                                                          _exits(s.orelse)):
                # the rest of the body runs only on the paths that do not leave it
                rest = stmts[i + 1:]
                body = s.body if _always_exits(s.body) else s.body + rest
                orelse = s.orelse if _always_exits(s.orelse) else s.orelse + rest
                self.if_stmt(s, body, orelse, env, returning=False)
                return None
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
            empty_list = value.node is not None and value.node.kind in (
                "prim::ListConstruct", "prim::DictConstruct") and not value.node.inputs
            if declared and not empty_list and join(declared, value.type) != declared and \
                    value.type != "Any":
                raise self.error(s, f"Variable '{getattr(s.target, 'id', '?')}' is annotated "
                                    f"with type {declared} but is being assigned to a value "
                                    f"of type {value.type}")
            if declared:
                value = self.retype(value, declared, s)
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
            owner = self.unit.module_of(obj.type)
            if hasattr(owner, "declare"):  # a script class's `__init__` declares its attributes
                owner.declare(target.attr, value.type)
            self.emit("prim::SetAttr", [obj, value], [], target, {"name": target.attr})
        else:
            raise unsupported(self.src, target)

    def aug_assign(self, s: ast.AugAssign, env: dict) -> None:
        name = _BINOPS.get(type(s.op))
        if name is None:
            raise unsupported(self.src, s)
        if isinstance(s.target, (ast.Name, ast.Attribute)):  # (`self.count += 1` too)
            current = self.lookup(s.target, env) if isinstance(s.target, ast.Name) else \
                self.expr(s.target, env)
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

    def if_stmt(self, s: ast.If, body, orelse, env: dict, returning: bool) -> Value | None:
        static = self.static_cond(s.test, env)
        if static is not None:
            # known when compiling (`self.downsample is not None` for a submodule or None):
            # only the branch taken is compiled, as TorchScript does
            return self.stmts(body if static else orelse, env)
        cond = self.cond(s.test, env)
        node = self.emit("prim::If", [cond], [], s)
        envs, results, all_casts = [], [], []
        refined = self.refinements(s.test, env)
        for stmts, names in zip((body, orelse), refined):
            block = Block()
            node.blocks.append(block)
            branch = dict(env)
            with self.in_block(block):
                all_casts.append(self.refine(names, branch, s.test))
                results.append(self.stmts(stmts, branch))
            envs.append(branch)
        for k, casts in enumerate(all_casts):
            other = envs[1 - k]
            for name, cast in casts.items():
                # a refined variable that neither branch rebinds is unchanged; one the other
                # branch sets leaves the If with the refined type (`if x is None: x = ...`)
                if envs[k].get(name) is cast and other.get(name) is env.get(name):
                    envs[k][name] = env[name]
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

    def loop(self, s: ast.stmt, trip: Value, cond: Value, env: dict, bind, next_cond,
             index_hint: str | None = None) -> None:
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
        body_env[_GO_ON] = self.const(True)
        index = self.graph.fresh(index_hint, "int")
        block.params.append(index)
        for n in carried:
            v = self.graph.fresh(n, env[n].type)
            block.params.append(v)
            body_env[n] = v
        with self.in_block(block):
            bind(index, body_env)
            self.stmts(s.body, body_env)
            go_on = body_env[_GO_ON]
            if next_cond is None:
                again = go_on
            elif go_on is self.const(True):
                again = next_cond(body_env)
            else:  # `break` may have run: the condition is not evaluated then
                check = self.emit("prim::If", [go_on], [], s.test)
                check.blocks += [Block(), Block()]
                with self.in_block(check.blocks[0]):
                    check.blocks[0].returns = [next_cond(body_env)]
                check.blocks[1].returns = [self.const(False)]
                again = self.graph.fresh(None, "bool", check)
                check.outputs.append(again)
        block.returns = [again]
        for n in carried:
            before, after = env[n].type, body_env[n].type
            joined = join(before, after)
            if joined is None or joined != before and before != "Any":
                raise self.error(s, f"Variable '{n}' previously had type {before} but is now "
                                    f"being assigned to a value of type {after}")
            block.returns.append(body_env[n])
            out = self.graph.fresh(n, joined, node)
            node.outputs.append(out)
            env[n] = out

    def for_stmt(self, s: ast.For, env: dict) -> None:
        if s.orelse:
            raise self.error(s, "else branches of for loops aren't supported",
                             NotSupportedError)
        it = s.iter
        builtin = it.func.id if isinstance(it, ast.Call) and isinstance(
            it.func, ast.Name) and it.func.id in ("range", "enumerate", "zip") and \
            it.func.id not in env and it.func.id not in self.scope and not it.keywords \
            else None
        if builtin == "range":
            self.range_for(s, it, env)
            return
        if self.modules_for(s, builtin, env):
            return
        if builtin is not None:
            seqs = [self.expr(a, env) for a in it.args[:1 if builtin == "enumerate" else None]]
            start = self.expr(it.args[1], env) if builtin == "enumerate" and \
                len(it.args) > 1 else None
            width = 2 if builtin == "enumerate" else len(seqs)
            if not seqs or not isinstance(s.target, ast.Tuple) or len(s.target.elts) != width:
                raise self.error(s.target, f"expected {width} loop variables to unpack "
                                           f"{builtin}()", NotSupportedError)
        else:
            seqs = [self.expr(it, env)]
            if seqs[0].type.startswith("__torch__."):
                self.unrolled_for(s, seqs[0], env)
                return
        trip = self.op("len", "operator", [seqs[0]], it)
        for seq in seqs[1:]:  # zip stops at the shortest
            trip = self.op("min", "operator", [trip, self.op("len", "operator", [seq], it)],
                           it, type_="int")

        def bind(index, body_env):
            items = [self.op("__getitem__", "operator", [seq, index], it,
                             type_=element_type(seq.type)) for seq in seqs]
            if builtin == "enumerate":
                count = index if start is None else self.op("add", "operator",
                                                            [index, start], it)
                items = [count, items[0]]
            if builtin is None:
                self.assign(s.target, items[0], body_env, s)
            else:
                for target, item in zip(s.target.elts, items):
                    self.assign(target, item, body_env, s)

        self.loop(s, trip, self.const(True), env, bind, None)

    def range_for(self, s: ast.For, it: ast.Call, env: dict) -> None:
        """`for i in range(...)`: the trip count and the index's value computed once."""
        if not isinstance(s.target, ast.Name):
            raise self.error(s.target, "the loop variable of a range() loop must be a name",
                             NotSupportedError)
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

        self.loop(s, trip, self.const(True), env, bind, None,
                  s.target.id if lo is None else None)

    def list_comprehension(self, e: ast.ListComp, env: dict) -> Value:
        """`[f(x) for x in xs]`: a list filled by a loop, as TorchScript compiles it (one
        `for`, no `if`; the loop variable stays inside)."""
        if len(e.generators) != 1 or e.generators[0].is_async:
            raise self.error(e, "Only a single generator is currently supported",
                             NotSupportedError)
        gen = e.generators[0]
        if gen.ifs:
            raise self.error(e, "Comprehension ifs are not supported yet", NotSupportedError)
        result = self.emit("prim::ListConstruct", [], ["List[Tensor]"], e).outputs[0]
        scope = dict(env)
        scope["$comprehension"] = result
        append = ast.Expr(ast.Call(
            func=ast.Attribute(ast.Name("$comprehension", ast.Load()), "append", ast.Load()),
            args=[e.elt], keywords=[]))
        loop = ast.For(target=gen.target, iter=gen.iter, body=[append], orelse=[])
        for node in ast.walk(loop):
            ast.copy_location(node, e) if not hasattr(node, "lineno") else None
        self.for_stmt(loop, scope)
        return result

    def modules_for(self, s: ast.For, builtin: str | None, env: dict) -> bool:
        """Unroll `for i, m in enumerate(self.layers)`, `for a, b in zip(self.x, self.y)`
        and `for k, m in self.d.items()` (`.keys()`, `.values()`) over module containers, as
        TorchScript does; False when the loop is not one of these."""
        it = s.iter
        if builtin in ("enumerate", "zip"):
            args = it.args[:1] if builtin == "enumerate" else it.args
            types = [self.peek_type(a, env) for a in args]
            if not args or not all(t and t.startswith("__torch__.") for t in types):
                return False
            if not isinstance(s.target, ast.Tuple) or len(s.target.elts) != (
                    2 if builtin == "enumerate" else len(args)):
                return False
            seqs = [self.expr(a, env) for a in args]
            start = 0
            if builtin == "enumerate" and len(it.args) > 1:
                if not isinstance(it.args[1], ast.Constant):
                    return False
                start = it.args[1].value
            modules = [self.unit.module_of(v.type) for v in seqs]
            names = [m.jit_children() or list(m._modules) for m in modules]
            rounds = []
            for k in range(min(len(n) for n in names)):
                children = [self.child(v, m, n[k], it) for v, m, n in zip(seqs, modules, names)]
                rounds.append([self.const(k + start, it), *children] if builtin == "enumerate"
                              else children)
        elif isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and \
                it.func.attr in ("items", "keys", "values") and not it.args and \
                (self.peek_type(it.func.value, env) or "").startswith("__torch__."):
            seq = self.expr(it.func.value, env)
            module = self.unit.module_of(seq.type)
            rounds = []
            for name in module.jit_children() or list(module._modules):
                key, child = self.const(name, it), self.child(seq, module, name, it)
                rounds.append({"items": [key, child], "keys": [key],
                               "values": [child]}[it.func.attr])
            if it.func.attr == "items" and not (isinstance(s.target, ast.Tuple) and
                                                len(s.target.elts) == 2):
                return False
        else:
            return False
        if _exits(s.body):
            raise self.error(s, "break and continue in a loop over modules aren't supported",
                             NotSupportedError)
        for values in rounds:
            targets = s.target.elts if len(values) > 1 else [s.target]
            for target, value in zip(targets, values):
                self.assign(target, value, env, s)
            if self.stmts(s.body, env) is not None:
                raise self.error(s, "return statements inside loops aren't supported",
                                 NotSupportedError)
        return True

    def child(self, seq: Value, module, name: str, at: ast.AST) -> Value:
        """The submodule `name` of the module value `seq`."""
        return self.emit("prim::GetAttr", [seq], [module.jit_attr_type(name)], None,
                         {"name": name}).outputs[0]

    def unrolled_for(self, s: ast.For, seq: Value, env: dict) -> None:
        """`for m in self.layers:` over a ModuleList or Sequential: one copy per module."""
        if _exits(s.body):
            raise self.error(s, "break and continue in a loop over modules aren't supported",
                             NotSupportedError)
        module = self.unit.module_of(seq.type)
        names = module.jit_children()
        if names is None and module.jit_is_dict():  # a ModuleDict: its keys
            for name in module._modules:
                env[s.target.id] = self.const(name, s.iter)
                if self.stmts(s.body, env) is not None:
                    raise self.error(s, "return statements inside loops aren't supported",
                                     NotSupportedError)
            return
        if names is None:
            raise self.error(s.iter, f"'{seq.type}' object is not iterable",
                             NotSupportedError)
        for name in names:
            env[s.target.id] = self.child(seq, module, name, s.iter)
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
        static = self.static_cond(s.test, env)
        if static is True:
            return  # (`assert self.norm is not None` of a submodule: nothing to check)
        cond = self.cond(s.test, env)
        node = self.emit("prim::If", [cond], [], s)
        node.blocks += [Block(), Block()]
        with self.in_block(node.blocks[1]):
            msg = self.expr(s.msg, env) if s.msg is not None else self.const("")
            self.emit("prim::RaiseException", [msg], [], s,
                      {"exception": "AssertionError"})
        # after `assert x is not None`, x is a T, not an Optional[T], as in TorchScript
        self.refine(self.refinements(s.test, env)[0], env, s.test)

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
