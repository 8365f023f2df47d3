"""The script frontend's errors and source handling: where a function's code comes from and
how an error points at the line it is about, as TorchScript's frontend reports them."""

from __future__ import annotations

import ast
import inspect
import textwrap


class FrontendError(Exception):
    """Code the script compiler cannot compile; the message shows the source line."""


class NotSupportedError(FrontendError):
    """A Python feature the script compiler does not support."""


class UnsupportedNodeError(NotSupportedError):
    """A kind of Python statement or expression the script compiler does not support."""


# TorchScript's names for the constructs it refuses ("try blocks aren't supported").
_CONSTRUCT_NAMES = {"Try": "try blocks", "TryStar": "try blocks", "Lambda": "Lambda",
                    "Global": "global variables", "Nonlocal": "nonlocal variables",
                    "Yield": "Yield", "YieldFrom": "Yield", "Await": "Await",
                    "AsyncFunctionDef": "async function definitions",
                    "ClassDef": "class definitions", "FunctionDef": "function definitions",
                    "Delete": "del statements", "With": "with statements",
                    "GeneratorExp": "generator expressions", "ListComp": "list comprehensions",
                    "DictComp": "dict comprehensions", "SetComp": "set comprehensions",
                    "Set": "set literals", "Dict": "dict literals", "JoinedStr": "f-strings",
                    "NamedExpr": "assignment expressions", "Starred": "starred expressions",
                    "Match": "match statements", "Import": "import statements",
                    "ImportFrom": "import statements"}


class Source:
    """A function's parsed definition and where its lines are in their file."""

    def __init__(self, fn):
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise OSError(f"Can't get source for {fn}. TorchScript requires source access in "
                          "order to carry out compilation, make sure original .py files are "
                          "available.") from e
        self.file = inspect.getsourcefile(fn) or "<unknown>"
        self.first = first
        self.lines = [ln.rstrip("\n") for ln in lines]
        text = textwrap.dedent("".join(lines))
        self.indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
        where = f"{self.file}:{first}"
        try:
            tree = ast.parse(text)
        except SyntaxError:
            raise RuntimeError(f"Expected a single top-level function: {where}") from None
        if getattr(fn, "__name__", None) == "<lambda>":
            self.fdef = self._lambda(tree, fn, where)
            return
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if len(defs) != 1:
            raise RuntimeError(f"Expected a single top-level function: {where}")
        self.fdef = defs[0]

    @staticmethod
    def _lambda(tree: ast.AST, fn, where: str) -> ast.FunctionDef:
        """A lambda's body as a one-statement function (the only lambda on its lines whose
        parameters are the function's)."""
        names = list(fn.__code__.co_varnames[:fn.__code__.co_argcount])
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                 and [a.arg for a in n.args.args] == names]
        if len(found) != 1:
            raise RuntimeError(f"Expected a single top-level function: {where}")
        lam = found[0]
        ret = ast.copy_location(ast.Return(value=lam.body), lam.body)
        fdef = ast.FunctionDef(name="<lambda>", args=lam.args, body=[ret],
                               decorator_list=[], returns=None, type_params=[])
        return ast.copy_location(fdef, lam)

    def where(self, node: ast.AST) -> str:
        """`file:line:col` of `node`, as graph nodes show it."""
        line = self.first + getattr(node, "lineno", 1) - 1
        return f"{self.file}:{line}:{getattr(node, 'col_offset', 0) + self.indent}"

    def excerpt(self, node: ast.AST) -> str:
        """The lines around `node` with a `~~~ <--- HERE` marker under it."""
        lineno = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + self.indent
        end = getattr(node, "end_col_offset", None)
        text = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        if getattr(node, "end_lineno", lineno) == lineno and end is not None:
            width = max(1, end + self.indent - col)
        else:
            width = max(1, len(text) - col)
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.Expr, ast.Assign)):
            word = text[col:].split(" ")[0].rstrip(":")
            width = max(1, len(word))
        before = self.lines[max(0, lineno - 3):lineno - 1]
        after = self.lines[lineno:lineno + 2]
        out = [f'  File "{self.file}", line {self.first + lineno - 1}', *before, text,
               " " * col + "~" * width + " <--- HERE", *after]
        return "\n".join(out)


def fail(cls: type, source: Source, node: ast.AST, message: str):
    """An exception of `cls` for `message` about `node`, with the source excerpt."""
    return cls(f"{message}:\n{source.excerpt(node)}\n")


def unsupported(source: Source, node: ast.AST) -> UnsupportedNodeError:
    """The error for a construct the compiler does not take ("Lambda aren't supported")."""
    name = _CONSTRUCT_NAMES.get(type(node).__name__, type(node).__name__)
    return fail(UnsupportedNodeError, source, node, f"{name} aren't supported")
