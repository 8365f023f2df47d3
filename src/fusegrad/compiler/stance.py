"""The compiler's stance: how compiled functions behave for a while (`set_stance`).

- "default": capture, and recompile when guards fail;
- "force_eager": compiled functions run their Python eagerly (nothing is captured);
- "eager_on_recompile": graphs captured earlier still run, but where they do not fit, the
  code runs eagerly instead of being captured again;
- "fail_on_recompile": where captured graphs do not fit, raise instead of recompiling;
- "eager_then_compile" / "aot_eager_then_compile": a function's first call runs eagerly (or
  under the "aot_eager" backend), later calls capture as usual.

The stance is one setting for the whole process, as in PyTorch. `set_stance(...)` called
plainly sets it until changed; as a context manager it holds for the block; as a decorator
for the function's calls.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile",
           "eager_then_compile", "aot_eager_then_compile")


class Stance(NamedTuple):
    """The compiler's current stance and its options."""

    stance: str = "default"
    skip_guard_eval_unsafe: bool = False
    backend: object = None


DEFAULT = Stance()
current = DEFAULT  # compiled calls test `current is DEFAULT`, one comparison


def _set(stance: Stance) -> Stance:
    """Make `stance` current; returns the one it replaces."""
    global current
    prior, current = current, DEFAULT if stance == DEFAULT else stance
    return prior


class set_stance:  # noqa: N801 - PyTorch's name for a class used as a function
    """Set the compiler's stance (see the module docstring for the stances), as a function,
    a context manager or a decorator. `force_backend` (with the "default" stance) runs every
    compiled function under that backend instead of its own. `skip_guard_eval_unsafe` is
    accepted; guards are always checked here, which is what it trades away."""

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                 force_backend=None) -> None:
        if force_backend is not None and stance != "default":
            raise RuntimeError("non-default stance cannot have force_backend set")
        if stance not in STANCES:
            # Checked here, so a bad name never becomes the stance.
            raise RuntimeError(f"invalid torch.compile stance '{stance}'")
        self.stance = Stance(stance, bool(skip_guard_eval_unsafe), force_backend)
        self.prev = _set(self.stance)

    def __enter__(self) -> None:
        _set(self.stance)

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        _set(self.prev)

    def __call__(self, fn):
        """Decorate `fn`: its calls run under this stance. Decorating is not setting, so the
        stance `__init__` made current is taken back."""
        _set(self.prev)

        @functools.wraps(fn)
        def under_stance(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return under_stance

    def clone(self) -> set_stance:
        """A new `set_stance` of the same stance (a context manager can be entered once)."""
        return type(self)(self.stance.stance, skip_guard_eval_unsafe=
                          self.stance.skip_guard_eval_unsafe, force_backend=self.stance.backend)
