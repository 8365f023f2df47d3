"""Compiling expressions into graph nodes (`ExpressionCompiler`, the half of the function
compiler that emits values): constants are made once at the top of the graph, operators and
calls become `aten::` nodes with their `form`, module attributes `prim::GetAttr`, calls of
modules and scripted functions `prim::CallMethod`/`prim::CallFunction`, `and`/`or`/`x if c
else y` short-circuit through `prim::If`."""

from __future__ import annotations

import ast
import builtins
import inspect

from ._classes import scriptable_class
from ._ir import Block, Node, Value, parse_generic
from ._types import annotation_type, element_type, join, result_type
from .frontend import FrontendError, NotSupportedError, fail, unsupported

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
           ast.FloorDiv: "floordiv", ast.Mod: "remainder", ast.Pow: "pow",
           ast.MatMult: "matmul", ast.BitAnd: "__and__", ast.BitOr: "__or__",
           ast.BitXor: "__xor__", ast.LShift: "__lshift__", ast.RShift: "__rshift__"}
_COMPARES = {ast.Lt: "lt", ast.Gt: "gt", ast.LtE: "le", ast.GtE: "ge", ast.Eq: "eq",
             ast.NotEq: "ne", ast.Is: "__is__", ast.IsNot: "__isnot__",
             ast.In: "__contains__"}
_BUILTINS = {len: "len", int: "Int", float: "Float", bool: "Bool", abs: "abs", min: "min",
             max: "max", str: "str", sorted: "sorted"}
# math functions on numbers, with their result types (`aten::math_floor` runs `math.floor`)
_MATH = {"floor": "int", "ceil": "int", "trunc": "int", "sqrt": "float", "exp": "float",
         "log": "float", "sin": "float", "cos": "float", "tan": "float", "tanh": "float",
         "fabs": "float", "pow": "float", "isnan": "bool", "isinf": "bool",
         "isfinite": "bool"}
_TENSOR_ATTRS = {"shape": ("size", "List[int]"), "ndim": ("dim", "int")}
# tensor properties read as they are (`form="attribute"`), with their script types
TENSOR_PROPERTIES = {"T": "Tensor", "mT": "Tensor", "H": "Tensor", "mH": "Tensor",
                     "real": "Tensor", "imag": "Tensor", "data": "Tensor",
                     "grad": "Optional[Tensor]", "requires_grad": "bool", "is_leaf": "bool",
                     "is_cuda": "bool", "dtype": "ScalarType", "device": "Device"}

def _is_none(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value is None


# Tensor methods that work on Python objects (arrays, callables, storages), which
# TorchScript's Tensor type does not have.
_PYTHON_ONLY_METHODS = frozenset({
    "numpy", "apply_", "map_", "map2_", "register_hook", "register_post_accumulate_grad_hook",
    "storage", "untyped_storage", "__array__", "__reduce_ex__", "__deepcopy__"})


def _script_method(name: str) -> bool:
    """Whether scripted code may call Tensor method `name`."""
    import fusegrad

    return callable(getattr(fusegrad.Tensor, name, None)) and name not in _PYTHON_ONLY_METHODS


def _literal_key(e: ast.expr) -> int | str | None:
    """The value of an index that is a literal (`[0]`, `[-1]`, `["a"]`), else None."""
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, str)) and \
            not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and \
            isinstance(e.operand, ast.Constant) and type(e.operand.value) is int:
        return -e.operand.value
    return None


class ExpressionCompiler:
    """Emits nodes into `self.block` of `self.graph` for the function `self.src`."""

    # the parameters whose type is Tensor for want of an annotation (for error messages)
    inferred: frozenset = frozenset()

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

    def retype(self, value: Value, type_: str, at: ast.AST) -> Value:
        """`value` seen as the annotated `type_` (`x: Optional[Tensor] = None`): a constant
        of its own, or an unchecked cast; shared values keep their type."""
        node = value.node
        if value.type == type_:
            return value
        if node is not None and node.kind == "prim::ListConstruct" and not node.inputs:
            value.type = type_  # an empty list literal: its type is its annotation's
            return value
        if join(type_, value.type) != type_ and value.type != "Any":
            raise self.error(at, f"Expected a value of type '{type_}' but found a value of "
                                 f"type '{value.type}'")
        if node is not None and node.kind == "prim::Constant":
            copy = Node("prim::Constant", [], dict(node.attrs), node.source)
            copy.outputs.append(self.graph.fresh(None, type_, copy))
            self.graph.nodes.insert(self.const_at, copy)
            self.const_at += 1
            return copy.outputs[0]
        return self.emit("prim::unchecked_cast", [value], [type_], at).outputs[0]

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

    def cond(self, test: ast.expr, env: dict) -> Value:
        """A condition as a bool value (a tensor goes through `aten::Bool`)."""
        value = self.expr(test, env)
        if value.type != "bool":
            value = self.op("Bool", "operator", [value], test)
        return value

    # -- conditions known when compiling, and Optional refinement ------------------------

    def peek_type(self, e: ast.expr, env: dict) -> str | None:
        """The type of a variable or a module attribute (`self.downsample`) without emitting
        anything; None for other expressions."""
        if isinstance(e, ast.Name):
            return env[e.id].type if e.id in env else None
        if isinstance(e, ast.Attribute):
            base = self.peek_type(e.value, env)
            if base is not None and base.startswith("__torch__."):
                return self.unit.module_of(base).jit_attr_type(e.attr)
        return None

    def static_cond(self, test: ast.expr, env: dict) -> bool | None:
        """The value of a condition TorchScript decides while compiling: `x is None` (or
        `is not`) where x's type is NoneType or not Optional, `not`, `and`/`or` of such,
        `hasattr(self, name)` and `torch.jit.is_scripting()`; None when it is not known."""
        from . import _markers

        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.static_cond(test.operand, env)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):
            parts = [self.static_cond(v, env) for v in test.values]
            short = isinstance(test.op, ast.Or)  # the value that decides the whole
            for part in parts:
                if part is None:
                    return None
                if part is short:
                    return short
            return not short
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
                isinstance(test.ops[0], (ast.Is, ast.IsNot)):
            left, right = test.left, test.comparators[0]
            if _is_none(left):
                left, right = right, left
            if not _is_none(right):
                return None
            type_ = self.peek_type(left, env)
            if type_ is None or type_ == "Any" or type_.startswith("Optional["):
                return None
            return (type_ == "NoneType") == isinstance(test.ops[0], ast.Is)
        if isinstance(test, ast.Call) and not test.keywords and \
                isinstance(test.func, (ast.Name, ast.Attribute)) and \
                self.is_python_path(test.func, env):
            try:
                fn = self.python_object(test.func)
            except FrontendError:
                return None
            if fn is _markers.is_scripting and not test.args:
                return True
            if fn is isinstance and len(test.args) == 2:
                return self.isinstance_static(test, env)
            if fn is hasattr and len(test.args) == 2 and isinstance(
                    test.args[1], ast.Constant) and isinstance(test.args[1].value, str):
                base = self.peek_type(test.args[0], env)
                if base is not None and base.startswith("__torch__."):
                    module = self.unit.module_of(base)
                    return module.jit_attr_type(test.args[1].value) is not None or \
                        module.jit_class_constant(test.args[1].value)[0]
        return None

    def refinements(self, test: ast.expr, env: dict) -> tuple[list[str], list[str]]:
        """The Optional variables `test` shows are not None: (in the true branch, in the
        false branch), as `x is not None` and `x is None` (and `and` of such) refine."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            names = [n for v in test.values for n in self.refinements(v, env)[0]]
            return list(dict.fromkeys(names)), []
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
                isinstance(test.ops[0], (ast.Is, ast.IsNot)):
            left, right = test.left, test.comparators[0]
            if _is_none(left):
                left, right = right, left
            if _is_none(right) and isinstance(left, ast.Name) and left.id in env and \
                    env[left.id].type.startswith("Optional["):
                names = [left.id]
                return (names, []) if isinstance(test.ops[0], ast.IsNot) else ([], names)
        if self.optional_isinstance(test, env):  # `isinstance(y, Tensor)` of Optional[Tensor]
            return [test.args[0].id], []
        return [], []

    def isinstance_types(self, e: ast.Call, env: dict) -> tuple[str | None, list[str]]:
        """(the type of `isinstance`'s first argument where known, the script types its
        second names: a class or a tuple of classes)."""
        import fusegrad

        names = {fusegrad.Tensor: "Tensor", int: "int", float: "float", str: "str",
                 bool: "bool", list: "List", dict: "Dict", tuple: "Tuple"}
        classes = e.args[1].elts if isinstance(e.args[1], ast.Tuple) else [e.args[1]]
        types = []
        for c in classes:
            try:
                obj = self.python_object(c)
                types.append(names[obj])
            except (FrontendError, KeyError, TypeError):
                raise self.error(c, "Unsupported type in isinstance", NotSupportedError) \
                    from None
        return self.peek_type(e.args[0], env), types

    def isinstance_static(self, e: ast.Call, env: dict) -> bool | None:
        """`isinstance(v, T)` where v's type decides it (None for an Optional of one of the
        types, decided when running)."""
        type_, types = self.isinstance_types(e, env)
        if type_ is None or type_ == "Any":
            return None
        head = parse_generic(type_)[0]
        if head == "Optional" and parse_generic(parse_generic(type_)[1][0])[0] in types:
            return None
        return head in types

    def optional_isinstance(self, e: ast.expr, env: dict) -> bool:
        """Whether `e` is `isinstance(name, T)` of a variable of type Optional[T]."""
        if not (isinstance(e, ast.Call) and len(e.args) == 2 and not e.keywords and
                isinstance(e.args[0], ast.Name) and e.args[0].id in env and
                isinstance(e.func, ast.Name) and self.is_python_path(e.func, env)):
            return False
        try:
            if self.python_object(e.func) is not isinstance:
                return False
        except FrontendError:
            return False
        type_ = env[e.args[0].id].type
        return type_.startswith("Optional[") and self.isinstance_static(e, env) is None

    def refine(self, names: list[str], env: dict, at: ast.AST) -> dict:
        """Rebind each of `names` in `env` to its value cast from Optional[T] to T."""
        casts = {}
        for name in names:
            inner = parse_generic(env[name].type)[1][0]
            cast = self.emit("prim::unchecked_cast", [env[name]], [inner], at,
                             hints=[name]).outputs[0]
            env[name] = casts[name] = cast
        return casts

    # -- expressions ---------------------------------------------------------------------

    def own_class(self) -> type | None:
        """The class whose method is being compiled, when it is a script class."""
        self_type = getattr(self, "self_type", None)
        if self_type is None or self_type not in self.unit.modules:
            return None
        return getattr(self.unit.module_of(self_type), "cls", None)

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
            own = self.own_class()
            if own is not None and own.__name__ == node.id:
                return own  # a class's methods name it before the class statement binds it
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
            static = self.static_cond(e.test, env)
            if static is not None:
                return self.expr(e.body if static else e.orelse, env)
            refined = self.refinements(e.test, env)
            cond = self.cond(e.test, env)
            node = self.emit("prim::If", [cond], [], e)
            values = []
            for branch, names in zip((e.body, e.orelse), refined):
                block = Block()
                node.blocks.append(block)
                with self.in_block(block):
                    scope = dict(env)
                    self.refine(names, scope, e.test)
                    values.append(self.expr(branch, scope))
                block.returns = [values[-1]]
            joined = join(values[0].type, values[1].type)
            if joined is None:
                raise self.error(e, f"if-expression's true branch has type {values[0].type} "
                                    f"but false branch has type {values[1].type}",
                                 RuntimeError)
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
        if isinstance(e, ast.Dict):
            if any(k is None for k in e.keys):
                raise self.error(e, "dict unpacking isn't supported", NotSupportedError)
            inputs = []
            for k, v in zip(e.keys, e.values):
                inputs += [self.expr(k, env), self.expr(v, env)]
            keys, values = {v.type for v in inputs[::2]}, {v.type for v in inputs[1::2]}
            # an empty dict is Dict[str, Tensor] unless annotated, as in TorchScript
            key = keys.pop() if len(keys) == 1 else "str"
            value = values.pop() if len(values) == 1 else "Tensor"
            return self.emit("prim::DictConstruct", inputs, [f"Dict[{key}, {value}]"],
                             e).outputs[0]
        if isinstance(e, ast.ListComp):
            return self.list_comprehension(e, env)
        if isinstance(e, ast.JoinedStr):
            return self.fstring(e, env)
        if isinstance(e, ast.Subscript):
            obj = self.expr(e.value, env)
            key = _literal_key(e.slice)
            if obj.type.startswith("__torch__.") and key is not None:
                module = self.unit.module_of(obj.type)
                name = str(key)
                children = module.jit_children()
                if isinstance(key, int) and children is not None:
                    # a Sequential's or ModuleList's child by position, counted from the end
                    # for a negative literal as in Python
                    if not -len(children) <= key < len(children):
                        raise self.error(e, f"Index {key} out of range of length "
                                            f"{len(children)}")
                    name = children[key]
                return self.emit("prim::GetAttr", [obj], [module.jit_attr_type(name)], e,
                                 {"name": name}).outputs[0]
            index = self.index(e.slice, env)
            const_index = e.slice.value if isinstance(e.slice, ast.Constant) else None
            sliced = isinstance(e.slice, ast.Slice) and (
                obj.type in ("Tensor", "str") or obj.type.startswith("List["))
            return self.op("__getitem__", "operator", [obj, index], e,
                           type_=obj.type if sliced else element_type(obj.type, const_index))
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
            # (a module attribute's read has no source line in TorchScript's graphs)
            return self.emit("prim::GetAttr", [base], [type_], None, {"name": e.attr},
                             hints=[e.attr]).outputs[0]
        if e.attr in _TENSOR_ATTRS:
            name, type_ = _TENSOR_ATTRS[e.attr]
            return self.op(name, "method", [base], e, type_=type_)
        if e.attr in TENSOR_PROPERTIES:
            return self.op(e.attr, "attribute", [base], e, type_=TENSOR_PROPERTIES[e.attr])
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
            # (checked on parameters only: other values' types are partly guesses)
            if base.type == "Tensor" and base in self.graph.params and \
                    not _script_method(func.attr):
                inferred = base.name in self.inferred
                shown = "Tensor (inferred)" if inferred else "Tensor"
                raise self.error(func, f"\n'{shown}' object has no attribute or method "
                                       f"'{func.attr}'.", RuntimeError)
            args, names = self.arguments(e, env)
            if func.attr == "append" and args and base.node is not None and \
                    base.node.kind == "prim::ListConstruct" and not base.node.inputs and \
                    base.type == "List[Tensor]":
                # an empty list not annotated takes its items' type
                base.type = f"List[{args[0].type}]"
            return self.op(func.attr, "method", [base, *args], e, names)
        if isinstance(func, ast.Name) and func.id in env:
            callee = env[func.id]
            if callee.type.startswith("__torch__."):
                return self.module_call(e, callee, None, env)
            raise self.error(e, f"'{callee.type}' object is not callable")
        if isinstance(func, ast.Subscript):  # `self.heads["a"](x)`, `self.layers[0](x)`
            callee = self.expr(func, env)
            if callee.type.startswith("__torch__."):
                return self.module_call(e, callee, None, env)
        if not isinstance(func, (ast.Name, ast.Attribute)):
            raise self.error(e, "only calls of named functions are supported",
                             NotSupportedError)
        return self.python_call(e, self.python_object(func), env)

    def module_call(self, e: ast.Call, obj: Value, attr: str | None, env: dict) -> Value:
        module = self.unit.module_of(obj.type)
        if attr is not None:
            attr_type = module.jit_attr_type(attr)
            if attr_type is not None and attr_type.startswith("__torch__."):
                obj = self.emit("prim::GetAttr", [obj], [attr_type], None,
                                {"name": attr}, hints=[attr]).outputs[0]
                module, attr = self.unit.module_of(attr_type), None
        method = attr or "forward"
        static = module.jit_static_method(method)
        if static is not None:  # `self.helper(x)` of a staticmethod: a plain function call
            return self.python_call(e, static, env)
        left = module.jit_python_method(method)
        if left is not None:
            return self.python_method_call(e, obj, module, method, left, env)
        ret = module.jit_method_type(method)
        if ret is None:
            raise self.error(e, f"Module '{module.jit_class_name()}' has no method '{method}'")
        args, names = self.arguments(e, env)
        args = self.bind(e, method, module.jit_method_schema(method), args, names, skip=1)
        return self.emit("prim::CallMethod", [obj, *args], [ret], e,
                         {"name": method}).outputs[0]

    def new_object(self, e: ast.Call, script_class, env: dict) -> Value:
        """`Pair(a, b)` of a class compiled for script: a new object, then its `__init__`;
        `Out(a, b)` of a NamedTuple class: a tuple of its type."""
        args, names = self.arguments(e, env)
        fields = getattr(script_class, "fields", None)
        if fields is not None:
            given = dict(zip(names, args[len(args) - len(names):]))
            values = list(args[:len(args) - len(names)])
            for field in fields[len(values):]:
                if field not in given:
                    raise self.error(e, f"Argument {field} not provided")
                values.append(given.pop(field))
            if given or len(values) != len(fields):
                raise self.error(e, f"{script_class.cls.__name__}() takes {len(fields)} "
                                    f"arguments")
            return self.emit("prim::TupleConstruct", values, [script_class.type_name], e,
                             {"type": script_class.type_name}).outputs[0]
        args = self.bind(e, "__init__", script_class.jit_method_schema("__init__"), args,
                         names, skip=1)
        obj = self.emit("prim::CreateObject", [], [script_class.type_name], e,
                        {"type": script_class.type_name}).outputs[0]
        self.emit("prim::CallMethod", [obj, *args], ["NoneType"], e, {"name": "__init__"})
        return obj

    def python_method_call(self, e: ast.Call, obj: Value, module, method: str, fn,
                           env: dict) -> Value:
        """A call of a method left to Python: a `jit.ignore`d one runs in Python
        (`prim::PythonOp`, given the script module as `self`), a `jit.unused` one raises
        when reached, as TorchScript compiles them."""
        from ._markers import IGNORE
        from ._script import _return_annotation

        ret = annotation_type(_return_annotation(fn)) or "Tensor"
        args, names = self.arguments(e, env)
        if names:
            raise self.error(e, f"keyword arguments to {method}() aren't supported",
                             NotSupportedError)
        if getattr(fn, IGNORE, False):
            name = f"{module.jit_class_name()}.{method}"
            self.unit.python_ops[name] = fn
            return self.emit("prim::PythonOp", [obj, *args], [ret], e,
                             {"name": name}).outputs[0]
        message = self.const("This Python function is annotated to be ignored and cannot "
                             "be run")
        self.emit("prim::RaiseException", [message], [], e, {"exception": "RuntimeError"})
        node = Node("prim::Uninitialized", [])
        node.outputs.append(self.graph.fresh(None, ret, node))
        self.block.nodes.append(node)
        return node.outputs[0]

    def bind(self, e: ast.Call, name: str, schema, args: list[Value], names: list[str],
             skip: int = 0) -> list[Value]:
        """A call's arguments in the callee's parameter order, its defaults filled in."""
        if schema is None:
            if names:
                raise self.error(e, f"keyword arguments to {name}() aren't supported",
                                 NotSupportedError)
            return args
        params = schema.params[skip:]
        npos = len(args) - len(names)
        if npos > len(params):
            raise self.error(e, f"{name}() expected at most {len(params)} argument(s) but "
                                f"received {npos} argument(s)")
        out, given = list(args[:npos]), dict(zip(names, args[npos:]))
        for pname, _ in params[npos:]:
            if pname in given:
                out.append(given.pop(pname))
            elif pname in schema.defaults:
                default = schema.defaults[pname]
                out.append(self.const(tuple(default) if isinstance(default, list)
                                      else default, e))
            else:
                raise self.error(e, f"Argument {pname} not provided")
        if given:
            raise self.error(e, f"{name}() got an unexpected keyword argument "
                                f"'{next(iter(given))}'")
        return out

    def python_call(self, e: ast.Call, fn, env: dict) -> Value:
        import fusegrad
        import fusegrad.nn.functional as F

        from . import _markers, fork, wait

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
            return self.retype(value, declared, e) if declared else value
        if fn is _markers.is_scripting:
            return self.const(True, e)
        if fn is fork and e.args:
            # the task runs where it is forked (the same values): its call's value stands
            # for the future, which `wait` gives back
            task = ast.Call(func=e.args[0], args=e.args[1:], keywords=e.keywords)
            ast.copy_location(task, e)
            return self.call(task, env)
        if fn is wait and len(e.args) == 1:
            return self.expr(e.args[0], env)
        if fn is isinstance and len(e.args) == 2 and not e.keywords:
            static = self.isinstance_static(e, env)
            if static is not None:
                return self.const(static, e)
            return self.op("__isnot__", "operator", [self.expr(e.args[0], env),
                                                     self.const(None)], e)
        try:
            name = _BUILTINS.get(fn)
        except TypeError:  # an unhashable callable
            name = None
        if name is not None:
            args, names = self.arguments(e, env)
            return self.op(name, "operator", args, e, names)
        if getattr(fn, "__module__", None) == "math" and fn.__name__ in _MATH:
            args, names = self.arguments(e, env)
            return self.op(f"math_{fn.__name__}", "operator", args, e, names,
                           type_=_MATH[fn.__name__])
        if inspect.isclass(fn) and scriptable_class(fn):
            return self.new_object(e, self.unit.script_class(fn), env)
        target = self.unit.callee(fn)
        if target is not None:
            kind, name, ret = target
            args, names = self.arguments(e, env)
            schema = self.unit.functions[name].schema if kind == "prim::CallFunction" \
                else None
            args = self.bind(e, name.rsplit(".", 1)[-1], schema, args, names)
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
