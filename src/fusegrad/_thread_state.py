"""Per-thread autograd and dispatch state, kept per thread as PyTorch keeps it.

Each thread has its own grad mode, inference mode, dispatch-mode stack (fake tensors, ONNX
capture) and saved-tensor hooks. A new thread reads the class attributes of `ThreadState`:
grad on, inference off, no mode, no hooks, as a new thread in PyTorch (no `__init__` runs
per thread). Anomaly detection and the default dtype are process-wide, as in PyTorch.

Reading a thread-local attribute costs several times a slot read, and the eager fast path
asks on every op "is a mode active?", on every op with an input requiring grad "is grad mode
on?", and on every op that saves "are saved-tensor hooks set?". The answers are almost always
"grad on, nothing else" in every thread, so `active` counts, over all threads, the threads
with grad mode off and the entries of the two stacks. An empty count answers without a
thread-local read; only while some thread has grad off, a mode or hooks does a reader look at
its own thread's state:

    grad on here:     not active.grad_off or local.grad_enabled
    a mode here:      active.modes and local.modes

A count is a list of None whose length is the count: `append` and `pop` are atomic, so threads
change counts without a lock. A count may exceed what the threads hold (a thread that ends
inside `no_grad` or a mode leaves its part behind; readers then pay the thread-local read),
never fall below it: a count is raised before the state it covers changes and lowered after.
So grad mode is set only through `set_grad_enabled`, `set_inference` (and `restore`).

The stacks are tuples, replaced rather than changed in place, so a copy of a thread's
`__dict__` is a snapshot of its whole state: the backward engine takes one and puts it back
around every node it runs (`snapshot`, `restore`).
"""

from __future__ import annotations

# `threading.local` is this class; importing `threading` for it would cost `import fusegrad`
# most of a millisecond.
from _thread import _local as _thread_local


class ThreadState(_thread_local):
    """The calling thread's state; the class attributes are a new thread's values."""

    # Whether ops record history: grad mode on and inference mode off. What every op reads;
    # `grad_mode` is the grad mode itself (`is_grad_enabled()`), which `enable_grad()` may
    # turn on inside `inference_mode()` without ops recording, as in PyTorch.
    grad_enabled = True
    grad_mode = True
    inference = False
    modes = ()  # dispatch modes, innermost last
    saved_hooks = ()  # (pack, unpack) pairs of saved_tensors_hooks, innermost last
    hooks_disabled = ()  # error messages of disable_saved_tensors_hooks, innermost last
    restricted_passes = ()  # backward passes running: True for grad()/backward(inputs=)
    # The same passes as (task id, {node that runs: ...}, restricted), for the hooks that ask
    # which nodes the pass in progress runs (`autograd.graph.register_multi_grad_hook`).
    graph_tasks = ()
    # The function transforms (`torch.func`: grad, vjp, jvp, vmap, ...) running their
    # function, innermost last: custom Functions follow PyTorch's rules under them.
    transforms = ()
    # The device factories make tensors on when given none (`with torch.device(...)`,
    # `set_default_device`); None: the CPU.
    default_device = None
    device_contexts = ()  # the defaults the open `with torch.device(...)` blocks replaced
    # A custom Function's forward and jvp run at an open forward AD level: their own calls
    # make no tangents (`autograd.forward_ad`).
    forward_ad_paused = False
    multithreading = True  # `autograd.set_multithreading_enabled` (kept, not acted on)
    # Autocast (`_autocast`): the device types with autocast on, the dtypes set for them
    # ({type: dtype}, replaced rather than changed; None: the defaults), the weight cache
    # switch and the nesting depth of autocast contexts. `autocast` is the dtype CPU ops
    # autocast to while CPU autocast is on; it is None while off or while autocast's own
    # calls run (PyTorch's autocast keys excluded), and a marker sits on `modes` while it is
    # set, so that ops take dispatch's slow path only then.
    autocast = None
    autocast_enabled = frozenset()
    autocast_dtypes = None
    autocast_cache_enabled = True
    autocast_nesting = 0
    autocast_cache = None  # {id(weight): (weakref, cast)}, made on first use


class _Active:
    """Over all threads: the threads with grad mode off, and the entries of the counted
    stacks (lists of None, never rebound; each an upper bound, never below)."""

    __slots__ = ("grad_off", "modes", "saved_hooks", "default_device")

    def __init__(self):
        self.grad_off = []
        self.modes = []
        self.saved_hooks = []
        self.default_device = []  # threads with a default device set


local = ThreadState()
active = _Active()
_COUNTED = ("modes", "saved_hooks")


def set_grad_enabled(mode: bool) -> None:
    """Set this thread's grad mode (ops record only while inference mode is off too)."""
    state = local
    mode = state.grad_mode = bool(mode)
    if mode and state.inference:
        mode = False
    if state.grad_enabled is mode:  # (`_set_recording`, inline: every no_grad block asks)
        return
    if mode:
        state.grad_enabled = True
        active.grad_off.pop()
    else:
        active.grad_off.append(None)
        state.grad_enabled = False


def set_inference(mode: bool) -> None:
    """Set this thread's inference mode (ops record only while it is off and grad mode on)."""
    mode = bool(mode)
    local.inference = mode
    _set_recording(local.grad_mode and not mode)


def _set_recording(mode: bool) -> None:
    if local.grad_enabled is mode:
        return
    if mode:
        local.grad_enabled = True
        active.grad_off.pop()
    else:
        active.grad_off.append(None)
        local.grad_enabled = False


def push(stack: str, item) -> None:
    """Push `item` on this thread's counted stack `stack` ("modes" or "saved_hooks")."""
    getattr(active, stack).append(None)
    setattr(local, stack, getattr(local, stack) + (item,))


def pop(stack: str, item) -> None:
    """Remove `item` (the innermost entry equal to it) from this thread's counted `stack`."""
    items = getattr(local, stack)
    for i in range(len(items) - 1, -1, -1):
        if items[i] is item or items[i] == item:
            setattr(local, stack, items[:i] + items[i + 1:])
            getattr(active, stack).pop()
            return
    raise ValueError(f"{item!r} is not on this thread's {stack} stack")


class suspended:
    """Context manager: this thread's counted `stack` ("modes" or "saved_hooks") empty inside
    it, restored after (the compiler's tracing, which the program's saved-tensor hooks must
    not see: a checkpoint's hooks would keep its fake tensors)."""

    def __init__(self, stack: str) -> None:
        self.stack = stack

    def __enter__(self) -> None:
        self._saved = getattr(local, self.stack)
        setattr(local, self.stack, ())

    def __exit__(self, *exc) -> None:
        setattr(local, self.stack, self._saved)


def snapshot() -> dict:
    """This thread's whole state, for `restore`."""
    return dict(local.__dict__)


def restore(state: dict) -> None:
    """Make this thread's state `state` (a `snapshot`), keeping the counts in step."""
    current = local.__dict__
    if current == state:
        return
    # (count, change): +1 where grad goes off or a stack grows by one.
    changes = [(active.grad_off,
                current.get("grad_enabled", True) - state.get("grad_enabled", True))]
    for stack in _COUNTED:
        changes.append((getattr(active, stack),
                        len(state.get(stack, ())) - len(current.get(stack, ()))))
    for count, change in changes:  # raise counts before the state changes
        for _ in range(change):
            count.append(None)
    current.clear()
    current.update(state)
    for count, change in changes:  # and lower them after
        for _ in range(-change):
            count.pop()
