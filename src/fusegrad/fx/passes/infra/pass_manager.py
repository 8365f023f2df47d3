"""`PassManager`: run a list of graph passes in an order their constraints allow, repeated
up to `steps` times while they keep changing the module, with optional checks after each.

Its behaviour is torch.fx's: a pass is any callable taking the module and returning a
`PassResult` (`pass_result_wrapper` adapts one that returns the module or None); a
constraint `c(a, b)` is False when pass `a` must not run before pass `b`; a failing pass
(or a failing check after it) is reported as an `Exception` naming it and the passes before
it, the original error as its cause.
"""

from __future__ import annotations

import collections
import functools
import inspect
from collections.abc import Callable
from typing import Any

from ...graph_module import GraphModule
from .pass_base import PassResult

__all__ = ["PassManager", "pass_result_wrapper", "this_before_that_pass_constraint"]


def _pass_name(fn: Any) -> str:
    return fn.__name__ if inspect.isfunction(fn) else type(fn).__name__


def pass_result_wrapper(fn: Callable | None) -> Callable | None:
    """`fn` made to return a PassResult: a module it returns (or, for None, the module it
    was given) counts as modified."""
    if fn is None:
        return None

    @functools.wraps(fn)
    def wrapped_fn(gm: Any) -> PassResult:
        res = fn(gm)
        if res is None:
            return PassResult(gm, True)
        if isinstance(res, PassResult):
            return res
        return PassResult(res, True)

    if not inspect.isfunction(fn):
        wrapped_fn.__name__ = type(fn).__name__
    return wrapped_fn


def this_before_that_pass_constraint(this: Callable, that: Callable) -> Callable:
    """A constraint that `this` runs before `that`."""

    def depends_on(a: Callable, b: Callable) -> bool:
        return not (a == that and b == this)

    return depends_on


def _validate_pass_schedule_constraint(constraint: Callable, passes: list) -> None:
    for i, a in enumerate(passes):
        # (the second index counts from the pass after `a`, as torch.fx reports it)
        for j, b in enumerate(passes[i + 1:]):
            if constraint(a, b):
                continue
            raise RuntimeError(f"pass schedule constraint violated. Expected {a} before {b} "
                               f"but found {a} at index {i} and {b} at index {j} in pass list.")


def _topological_sort_passes(passes: list, constraints: list) -> list:
    """`passes` ordered so that every constraint holds: Kahn's algorithm, ready passes taken
    first-in first-out from their order in `passes`."""
    if not constraints:
        return passes
    # a pass `b` must run before each pass in after[b]
    after: dict = {p: [] for p in passes}
    waiting: dict = dict.fromkeys(passes, 0)
    for a in passes:
        for b in passes:
            if a == b:
                continue
            for constraint in constraints:
                if not constraint(a, b):
                    after[b].append(a)
                    waiting[a] += 1
    ready = collections.deque(p for p in passes if waiting[p] == 0)
    done: dict = dict.fromkeys(passes, False)
    ordered = []
    while ready:
        p = ready.popleft()
        ordered.append(p)
        done[p] = True
        for later in after[p]:
            if not done[later]:
                waiting[later] -= 1
                if waiting[later] == 0:
                    ready.append(later)
    cycle = [p for p, n in waiting.items() if n != 0]
    if cycle:
        raise RuntimeError(f"Circular dependency detected within the following passes: {cycle}")
    return ordered


class PassManager:
    """Run `passes` (callables from module to PassResult) on a module, ordered by
    `constraints`, `steps` rounds at most (stopping after a round that changes nothing);
    with `run_checks_after_each_pass`, the check (`add_checks`) runs after each pass as well
    as before the first."""

    steps: int = 1
    _validated: bool = False

    def __init__(self, passes: list | None = None, constraints: list | None = None,
                 steps: int | None = None, run_checks_after_each_pass: bool = False,
                 suppress_check_failures: bool = False) -> None:
        self.passes = passes or []
        self.constraints = constraints or []
        self.steps = steps if steps else 1
        self.run_checks_after_each_pass = run_checks_after_each_pass
        self.suppress_check_failures = suppress_check_failures
        self._validated = False

    def add_pass(self, _pass: Callable) -> None:
        """Append a pass (the order is checked again before the next run)."""
        self.passes.append(_pass)
        self._validated = False

    def add_constraint(self, constraint: Callable) -> None:
        """Add an ordering constraint (the passes are ordered again before the next run)."""
        self.constraints.append(constraint)
        self._validated = False

    def validate_constraints(self) -> None:
        """Raise if the passes' current order breaks a constraint."""
        if self._validated:
            return
        for constraint in self.constraints:
            _validate_pass_schedule_constraint(constraint, self.passes)
        self._validated = True

    def solve_constraints(self) -> None:
        """Reorder the passes so that every constraint holds (RuntimeError on a cycle)."""
        self.passes = _topological_sort_passes(self.passes, self.constraints)
        self._validated = True

    def add_checks(self, check: Callable) -> None:
        """Use `check(module)` as the check run before the passes (and after each one with
        `run_checks_after_each_pass`)."""
        if len(inspect.signature(check).parameters) != 1:
            raise TypeError("PassManager check function should only take in one variable, "
                            "a module")
        self.check = check

    def check(self, module: Any) -> None:
        """The check run on the module: none until `add_checks` gives one."""

    def __call__(self, module: Any) -> PassResult:
        """Run the passes on `module`; the last module and whether any round changed it."""
        if not self._validated:
            self.solve_constraints()
        self.check(module)
        overall_modified = False
        for _ in range(self.steps):
            modified = False
            for i, fn in enumerate(self.passes):
                fn_name = _pass_name(fn)
                try:
                    res = fn(module)
                    if not isinstance(res, PassResult) and not hasattr(res, "graph_module"):
                        raise TypeError(f"The result of the pass {fn_name} should be type "
                                        "PassResult.Please wrap it with pass_result_wrapper()")
                    module = res.graph_module
                    modified = modified or res.modified
                    if isinstance(module, GraphModule):
                        module.recompile()
                    if self.run_checks_after_each_pass:
                        self.check(module)
                except Exception as e:
                    before = [_pass_name(p) for p in self.passes[:i]]
                    raise Exception(  # noqa: TRY002 (torch.fx raises a plain Exception)
                        f"An error occurred when running the '{fn_name}' pass after the "
                        f"following passes: {before}") from e
            overall_modified = overall_modified or modified
            if not modified:
                break
        return PassResult(module, overall_modified)
