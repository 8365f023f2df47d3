"""`Optimizer`: parameter groups, per-parameter state, zero_grad and state_dict.

Updates work on the parameters' arrays in place (bumping their version counters), outside
autograd, as PyTorch's optimizers run under no_grad.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import _sparse, _thread_state
from .._tensor import Tensor
from ..autograd.graph import RemovableHandle
from ..ops import _parallel

__all__ = ["Optimizer", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook"]

# Elements per block of a blocked update (`Optimizer._blocked`): a few float32 blocks (a
# parameter, its gradient, its state, a work block) stay in a core's L2 cache between passes.
BLOCK = 1 << 18
# Parameters of fewer elements take an optimizer's plain whole-array passes.
BLOCKED_MIN = 1 << 16


class _RequiredParameter:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


# The devices PyTorch names in its errors for `fused=True` and `capturable=True` (every
# tensor here is a CPU tensor: fused kernels accept it, capturable updates never do).
_FUSED_DEVICES = "['mps', 'cuda', 'xpu', 'hpu', 'cpu', 'mtia', 'privateuseone']"
_CAPTURABLE_DEVICES = "['cuda', 'xpu', 'hpu', 'privateuseone']"

# Step hooks of every optimizer (`register_optimizer_step_pre_hook`), run before (pre) and
# after (post) each instance's own.
_global_optimizer_pre_hooks: OrderedDict = OrderedDict()
_global_optimizer_post_hooks: OrderedDict = OrderedDict()
_HOOK_DICTS = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
               "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
               "_optimizer_load_state_dict_pre_hooks", "_optimizer_load_state_dict_post_hooks")


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """Register `hook(optimizer, args, kwargs)`, called before every optimizer's `step`; it
    may return a new `(args, kwargs)` for the step. Returns a handle whose `remove()`
    unregisters it."""
    return _add_hook(_global_optimizer_pre_hooks, hook, False)


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """Register `hook(optimizer, args, kwargs)`, called after every optimizer's `step`.
    Returns a handle whose `remove()` unregisters it."""
    return _add_hook(_global_optimizer_post_hooks, hook, False)


def _add_hook(hooks: OrderedDict, hook: Callable, prepend: bool) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def _new_state(like: np.ndarray) -> Tensor:
    return Tensor._make(np.zeros_like(like))


# Each complex dtype's component dtype and back (torch.view_as_real, torch.view_as_complex).
_REAL_OF = {np.dtype(np.complex64): np.dtype(np.float32),
            np.dtype(np.complex128): np.dtype(np.float64)}
_COMPLEX_OF = {v: k for k, v in _REAL_OF.items()}


def _view_as_real(a: np.ndarray) -> np.ndarray:
    """A complex array's real and imaginary parts as a trailing axis of 2, sharing its memory
    (torch.view_as_real): the added axis of length 1 lets a strided array be viewed too."""
    return a[..., None].view(_REAL_OF[a.dtype])


def _view_as_complex(a: np.ndarray) -> np.ndarray:
    """The inverse of `_view_as_real` for a (..., 2) real array (copied if not contiguous)."""
    return np.ascontiguousarray(a).view(_COMPLEX_OF[a.dtype])[..., 0]


def _step_name(opt: Optimizer, fn: Callable) -> str:
    """`fn` as PyTorch names the step it wraps in a hook's error: the class whose own step it
    is (every built-in optimizer has its own there, though several share `Optimizer.step`
    here)."""
    if fn is not _base_step:
        return repr(fn)
    for cls in type(opt).__mro__:
        if "step" in cls.__dict__ or cls.__module__.startswith(__name__.rpartition(".")[0]):
            return f"<function {cls.__name__}.step at {hex(id(fn))}>"
    return repr(fn)


def _own_class(opt: Optimizer) -> str:
    """The name of `opt`'s optimizer: its first class that is fusegrad's (PyTorch's errors
    name the built-in class, a subclass's too)."""
    package = __name__.rpartition(".")[0]
    for cls in type(opt).__mro__:
        if cls.__module__.startswith(package):
            return cls.__name__
    return type(opt).__name__


def _hooked_step(fn: Callable, self: Optimizer, *args, **kwargs):
    """`fn(self, *args, **kwargs)` between the global and the optimizer's step hooks: pre
    hooks see (and may replace) the positional arguments, `self` first, and the keywords."""
    args = (self, *args)
    for hook in itertools.chain(_global_optimizer_pre_hooks.values(),
                                self._optimizer_step_pre_hooks.values()):
        result = hook(self, args, kwargs)
        if result is not None:
            if isinstance(result, tuple) and len(result) == 2:
                args, kwargs = result
            else:
                raise RuntimeError(f"{_step_name(self, fn)} must return None or a tuple of "
                                   f"(new_args, new_kwargs), but got {result}.")
    out = fn(*args, **kwargs)
    for hook in itertools.chain(self._optimizer_step_post_hooks.values(),
                                _global_optimizer_post_hooks.values()):
        hook(self, args, kwargs)
    return out


def _profiled(kind: str, fn: Callable) -> Callable:
    """`fn` (an optimizer's step or zero_grad) as one `Optimizer.step#SGD.step` block in a
    running profile, as PyTorch labels it, a step with its hooks inside the block; without
    a profiler or hooks, two checks."""
    is_step = kind == "step"

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        run = fn
        if is_step and (_global_optimizer_pre_hooks or _global_optimizer_post_hooks
                        or self._optimizer_step_pre_hooks
                        or self._optimizer_step_post_hooks):
            run = functools.partial(_hooked_step, fn)
        if _thread_state.active.modes:
            from ..profiler import record_function

            with record_function(f"Optimizer.{kind}#{type(self).__name__}.{kind}"):
                return run(self, *args, **kwargs)
        return run(self, *args, **kwargs)

    method._profiled = True
    return method


def number_lr(group: dict):
    """The group's learning rate as a number: a tensor `lr` read with `.item()`, as the
    differentiable and closure-driven updates use it (the group keeps the tensor)."""
    lr = group["lr"]
    return lr.item() if isinstance(lr, Tensor) else lr


def adam_differentiable_head(opt: Optimizer, p: Tensor, grad: Tensor, group: dict,
                             state: dict) -> tuple:
    """What the Adam family's differentiable updates (adamax, nadam, radam) start with:
    the descent direction (`Optimizer._differentiable_start`), the learning rate as a number,
    the weight decay, eps, the betas as numbers, and the step counter moved on (the tensor,
    returned). `(d_p, lr, weight_decay, eps, beta1, beta2, step_t)`."""
    from ._checks import scalar_value

    d_p = opt._differentiable_start(p, grad, group, state)
    beta1, beta2 = map(scalar_value, group["betas"])
    step_t = state["step"]
    step_t += 1
    return d_p, number_lr(group), group["weight_decay"], group["eps"], beta1, beta2, step_t


def _with_number_lr(group: dict) -> dict:
    """A copy of `group` with its tensor learning rate read as a number, for the updates
    (the group itself keeps the tensor, as PyTorch's does)."""
    group = dict(group)
    group["lr"] = number_lr(group)
    return group


class Optimizer:
    """Base class: holds `param_groups` (dicts with 'params' and options) and `state`."""

    # Whether the update of a complex parameter treats it, its gradient and its state as
    # real arrays of (real, imaginary) pairs, as PyTorch's does for the optimizers that set
    # this (SGD's arithmetic is the same either way).
    _complex_as_real = False
    # (option, value) pairs `__setstate__` gives groups that lack them, as PyTorch's
    # optimizers do in theirs (a loaded older state_dict, an unpickled optimizer).
    _SETSTATE_DEFAULTS: tuple = ()
    # Whether a loaded state's `step` saved as a Python number becomes the scalar tensor the
    # updates count in: PyTorch's optimizers with a `__setstate__` (those with defaults
    # above) convert it there, except SGD, which keeps no step; an optimizer a user writes
    # on the base class keeps the number it saved.
    _numeric_step_to_tensor = True
    # Whether a `fused=True` group checks only the first parameter with a gradient, once per
    # optimizer (PyTorch's SGD and Adagrad), rather than each parameter as its state is made.
    _fused_check_once = False
    # For optimizers with `capturable`: whether PyTorch's error lists 'xla' among the devices,
    # and what it says must be on them (each for its single-tensor, then foreach update).
    _capturable_xla: tuple[bool, bool] | None = None
    _capturable_what = ("params and state_steps", "params and state_steps")
    # Whether the optimizer updates from sparse gradients (`_update_sparse`); one that does
    # not refuses them with `_sparse_error`, before any update of the group.
    _sparse_grads = False
    # PyTorch's refusal; None: "<the optimizer's class> does not support sparse gradients".
    _sparse_error: str | None = None
    # Whether PyTorch's update reads a value of the parameter or its state (`.item()`), so
    # it cannot step a parameter on the meta device.
    _reads_values = False
    # Whether PyTorch's foreach update runs under `differentiable=True` (SGD's); the others
    # refuse it.
    _foreach_differentiable = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        for kind in ("step", "zero_grad"):
            fn = cls.__dict__.get(kind)
            if fn is not None and not getattr(fn, "_profiled", False):
                setattr(cls, kind, _profiled(kind, fn))

    def __init__(self, params: Iterable, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        for name in _HOOK_DICTS:
            setattr(self, name, OrderedDict())
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            # Named by its tensor type (torch.FloatTensor), a Parameter's too, as PyTorch does.
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {params.type()}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self) -> str:
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    def __getstate__(self) -> dict:
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        # Options an older state_dict (or pickle) lacks take the fixed defaults each PyTorch
        # optimizer sets here (not this optimizer's own values; others stay missing).
        self.defaults.setdefault("differentiable", False)
        for group in self.param_groups:
            for name, default in self._SETSTATE_DEFAULTS:
                group.setdefault(name, default)
        # Hooks are not pickled (nor deep-copied): a restored optimizer starts without them.
        for name in _HOOK_DICTS:
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own options (defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered "
                            "collections, but the ordering of tensors in sets will change "
                            "between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        # (name, tensor) pairs, as `named_parameters()` yields them, name their tensors; the
        # group then records the names, and naming must be all or nothing.
        names = [p[0] for p in param_group["params"] if isinstance(p, tuple)]
        if names:
            if len(names) != len(param_group["params"]):
                raise ValueError("all optimizer params should be with/without names. Some "
                                 "param names are missing")
            param_group["params"] = [p[1] for p in param_group["params"]]
            param_group["param_names"] = names
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                # Named as `typename` names it (a builtin without its module), as PyTorch does.
                from .._functions.compat_more import typename

                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                f"is {typename(p)}")
            # A non-leaf is stepped only when it keeps its gradient or the update is to be
            # differentiated through (meta-learning steps a clone of the parameters).
            if not (self.defaults.get("differentiable") or p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        if len({id(p) for p in param_group["params"]}) != len(param_group["params"]):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        if self.param_groups:
            named = "param_names" in param_group
            if named != ("param_names" in self.param_groups[0]):
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {'with' if named else 'without'} "
                                 "names to the optimizer")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters (to None by default)."""
        from ..nn.utils.grads import zero_grads

        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable | None = None):
        """One optimization step (subclasses implement `_update`)."""
        loss = None
        if closure is not None:
            from ..autograd import enable_grad

            with enable_grad():
                loss = closure()
        if self.defaults.get("differentiable"):
            self._differentiable_step()
            return loss
        for group in self.param_groups:
            self._step_group(group, group["params"])
        return loss

    # ---------------------------------------------------------------- traced steps
    # Capture (`fusegrad.compile`) records a call of `step()` as graph ops where the
    # optimizer's own class names the options its `_traced_update` reads (SGD, Adam, AdamW):
    # the update of each parameter with a gradient, PyTorch's single-tensor operations over
    # the parameter, its gradient and its state tensors (graph inputs). Anything else, or a
    # step `_trace_plan` refuses, runs eagerly (a graph break).
    _TRACED_OPTIONS: tuple[str, ...] | None = None

    def _trace_signature(self) -> tuple:
        """What a traced step assumes of this optimizer, compared by equality on every call
        of the compiled code: its class, its hooks, and per group the options the update
        reads (as constants of the graph: a scheduler that changes `lr` recompiles, as
        torch.compile does with a float learning rate), the number of parameters, which of
        them have a gradient and the keys of each one's state. The tensors themselves are
        guarded as graph inputs."""
        keys = (self._TRACED_OPTIONS or ()) + _TRACE_REFUSED_FLAGS
        state = self.state
        groups = tuple(
            (tuple(_option_key(g.get(k)) for k in keys),
             tuple((p.grad is None, _state_keys(state.get(p))) for p in g["params"]))
            for g in self.param_groups)
        hooked = bool(_global_optimizer_pre_hooks or _global_optimizer_post_hooks
                      or self._optimizer_step_pre_hooks or self._optimizer_step_post_hooks)
        return type(self), hooked, self.defaults.get("differentiable"), groups

    def _trace_plan(self) -> list | str:
        """The updates a traced step records, in eager's order: `(group index, parameter
        index, parameter, state keys, first, options)` per parameter with a gradient, the
        options as `_traced_update` takes them (`first`: the parameter has no state yet,
        the update makes it and returns its tensors, in the keys' order); or why this step
        cannot be traced (it then runs eagerly). Refused: another optimizer (a subclass
        too: it may change the update), hooks, differentiable/foreach/fused/capturable, a
        tensor or non-number option, parameters that are not float32/float64 dense tensors
        with a gradient of their dtype and shape, and state with other entries or not of
        the parameter's geometry."""
        cls = type(self)
        if "_TRACED_OPTIONS" not in cls.__dict__ or self._TRACED_OPTIONS is None:
            return f"{cls.__name__}.step is not traced (it runs eagerly)"
        if self._trace_signature()[1]:
            return "an optimizer step with step hooks"
        if self.defaults.get("differentiable"):
            return "an optimizer step with differentiable=True"
        plan = []
        for gi, group in enumerate(self.param_groups):
            for flag in _TRACE_REFUSED_FLAGS:
                if group.get(flag):
                    return f"an optimizer step with {flag}=True"
            options = {k: group.get(k) for k in self._TRACED_OPTIONS}
            for k, v in options.items():
                if not _is_number_data(v):
                    return f"an optimizer step with {k}={type(v).__name__}"
            for pi, p in enumerate(group["params"]):
                grad = p.grad
                if grad is None:
                    continue
                why = _traced_tensor_problem(p, grad)
                if why is not None:
                    return why
                keys = self._traced_state_keys(group)
                state = self.state.get(p)
                first = bool(keys) and not state  # (the update makes the state, in order)
                if first and not (p._data.flags.c_contiguous and grad._data.flags.c_contiguous):
                    # (its state would be made contiguous, eager's keeps the layout)
                    return "the first optimizer step of a non-contiguous parameter"
                if keys and not first and set(state) != set(keys):
                    return f"{cls.__name__}'s state of a parameter holds other entries"
                for k in keys if not first else ():
                    why = _traced_state_problem(p, k, state[k])
                    if why is not None:
                        return why
                plan.append((gi, pi, p, keys, first, self._traced_options(group)))
        return plan

    def _traced_state_keys(self, group: dict) -> tuple[str, ...]:
        """The state tensors `_traced_update` takes after the gradient, in its order."""
        return ()

    def _traced_options(self, group: dict) -> dict:
        """The keyword arguments of `_traced_update` for a parameter of `group`."""
        return {k: group[k] for k in self._TRACED_OPTIONS or ()}

    def _step_group(self, group: dict, params: list) -> None:
        """Update `params` (those of `group` with a gradient) on their arrays."""
        as_real = self._complex_as_real
        if isinstance(group.get("lr"), Tensor):
            group = _with_number_lr(group)
        self._check_group(group)
        if _sparse.made[0]:  # (only a program that made a sparse tensor pays the scan)
            self._check_sparse(group)
        if group.get("fused") or group.get("capturable"):
            self._check_flags(group)
        # A group that keeps no state gets a throwaway dict, so `self.state` (and
        # state_dict) has no empty entry PyTorch would not have.
        keeps = self._keeps_state(group)
        # What PyTorch's in-place operations add to the parameter's and the state
        # tensors' version counters (the update itself runs on their arrays).
        bump, state_bumps = self._version_bumps(group)
        for p in params:
            grad = p.grad
            if grad is not None:
                state = self.state[p] if keeps else {}
                if grad._data is None:  # sparse (the others are refused), or meta
                    if grad.is_sparse:
                        self._update_sparse(p, grad, group, state)
                    else:
                        self._update_meta(p, grad, group, state)
                elif as_real and p._data.dtype.kind == "c" and \
                        grad._data.dtype.kind == "c":
                    self._update_as_real(p, grad._data, group, state)
                else:
                    self._update(p, grad._data, group, state)
                p._vc[0] += bump
                for key, n in state_bumps:
                    state[key]._vc[0] += n

    def _differentiable_step(self) -> None:
        """`step` with `differentiable=True`: the update made of tensor operations under
        grad mode (as PyTorch runs it), so autograd records it and a later backward reaches
        the parameters' earlier values, their gradients' graphs and tensor hyperparameters."""
        from ..autograd import enable_grad

        with enable_grad():
            for group in self.param_groups:
                self._check_group(group)
                if group.get("foreach") and not self._foreach_differentiable and any(
                        p.grad is not None for p in group["params"]):
                    raise AssertionError("_foreach ops don't support autograd")
                for p in group["params"]:
                    if p.grad is not None:
                        self._update_differentiable(p, p.grad, group, self.state[p])

    def _update_differentiable(self, p: Tensor, grad: Tensor, group: dict,
                               state: dict) -> None:
        """The update of `p` as tensor operations autograd records (`differentiable=True`).
        Here, for an optimizer without one: PyTorch's error for a leaf that requires grad
        (its first in-place write to the parameter), the array update when nothing in it
        requires grad, else a refusal rather than a step without a graph."""
        if p.is_leaf and p.requires_grad:
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        if not (p.requires_grad or grad.requires_grad or any(
                isinstance(v, Tensor) and v.requires_grad for v in group.values())):
            self._step_group(group, [p])
            return
        raise NotImplementedError(f"fusegrad: {_own_class(self)} does not implement "
                                  "differentiable=True updates of tensors that require "
                                  "grad yet")

    def _differentiable_start(self, p, grad, group: dict, state: dict):
        """What every `_update_differentiable` starts with: the refusal of a complex
        parameter (not written yet), the state made on the first step, and the gradient
        with `maximize`'s sign (the direction the update descends)."""
        if p.is_complex():
            raise NotImplementedError(f"fusegrad: {type(self).__name__}'s differentiable=True "
                                      f"update of a complex parameter is not implemented yet")
        if not state:
            self._init_state(p._data, grad._data, group, state)
        return -grad if group["maximize"] else grad

    def _version_bumps(self, group: dict) -> tuple[int, tuple[tuple[str, int], ...]]:
        """How many in-place operations PyTorch's update under `group`'s options applies
        to a parameter, and to each of its state tensors (`(key, count)` pairs), in one
        step: the amounts each version counter moves. A fused update (`fused=True`) writes
        through its kernel without moving the counters, only the step counter's."""
        return 1, ()

    def _check_sparse(self, group: dict) -> None:
        """PyTorch's RuntimeError for a sparse gradient in `group`, before any of the group's
        updates, when the optimizer has no sparse update."""
        if self._sparse_grads:
            return
        for p in group["params"]:
            g = p.grad
            if g is not None and g.is_sparse:
                raise RuntimeError(self._sparse_error or
                                   f"{_own_class(self)} does not support sparse gradients")

    def _update_sparse(self, p: Tensor, grad, group: dict, state: dict) -> None:
        """The update of `p` from its sparse gradient `grad` (a SparseTensor), for the
        optimizers that set `_sparse_grads`."""
        raise NotImplementedError

    def _update_meta(self, p: Tensor, grad: Tensor, group: dict, state: dict) -> None:
        """The step of a meta parameter: nothing to compute, but the state PyTorch's update
        makes (buffers on the meta device, of the parameter's geometry; step counters on
        the CPU, counting). The update runs on a one-element stand-in of the parameter, its
        gradient and its buffers, whose counters are the state's own; the buffers it made
        or kept become meta tensors again."""
        if self._reads_values:
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        stand_in = self._meta_stand_in(p, grad, group, state, run=True)
        state.update(stand_in)

    def _init_state_of(self, p: Tensor, grad: Tensor | None, group: dict,
                       state: dict) -> None:
        """`_init_state` for parameter `p` (a meta one's state made on stand-ins)."""
        if p.is_meta:
            state.update(self._meta_stand_in(p, grad, group, state, run=False))
        else:
            self._init_state(p._data, None if grad is None else grad._data, group, state)

    def _meta_stand_in(self, p: Tensor, grad: Tensor | None, group: dict, state: dict,
                       run: bool) -> dict:
        """`state` after an update (`run`) or after `_init_state`, worked out on stand-ins:
        a one-element array per buffer (of at least one dim, so a buffer is told from a
        0-d counter), the counters themselves; each buffer made meta again."""
        from .. import _creation

        shape = (1,) * max(p.ndim, 1)
        dtype = p.dtype.np

        def stand(t):
            return Tensor._make(np.zeros(shape, dtype=t.dtype.np)) if t.is_meta else t

        proxy = Tensor._make(np.zeros(shape, dtype=dtype))
        g = np.zeros(shape, dtype=(grad if grad is not None else p).dtype.np)
        work = {k: stand(v) if isinstance(v, Tensor) else v for k, v in state.items()}
        with np.errstate(all="ignore"):  # (zeros divided by zeros: no values are kept)
            if not run:
                self._init_state(proxy._data, g, group, work)
            elif self._complex_as_real and p.is_complex() and g.dtype.kind == "c":
                self._update_as_real(proxy, g, group, work)
            else:
                self._update(proxy, g, group, work)
        out = {}
        for k, v in work.items():
            if isinstance(v, Tensor) and v._data is not None and v._data.shape == shape:
                v = _creation.zeros_like(p, dtype=v.dtype)
            out[k] = v
        return out

    def _check_flags(self, group: dict) -> None:
        """PyTorch's checks, before any update of the group, of `fused` (floating point
        parameters only) and of `capturable` (never met: it needs an accelerator, and the
        error comes once the group's state is made)."""
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        if group.get("fused"):
            # A fused update runs whether or not it is capturable.
            if self._fused_check_once:
                if self.__dict__.get("_need_device_dtype_check_for_fused", True):
                    _check_fused(params[0])
                    self._need_device_dtype_check_for_fused = False
                return
            for p in params:
                state = self.state[p]
                if not state:
                    _check_fused(p)
                    self._init_state(p._data, p.grad._data, group, state)
            return
        if self._capturable_xla is None:
            return
        for p in params:
            state = self.state[p]
            if not state:
                self._init_state_of(p, p.grad, group, state)
        which = 1 if group.get("foreach") else 0
        devices = _CAPTURABLE_DEVICES
        if self._capturable_xla[which]:
            devices = devices[:-1] + ", 'xla']"
        raise AssertionError(f"If capturable=True, {self._capturable_what[which]} must be on "
                             f"supported devices: {devices}.")

    def _init_state(self, data: np.ndarray, grad: np.ndarray, group: dict,
                    state: dict) -> None:
        """Fill the empty `state` of a parameter holding `data` (an optimizer whose update
        keeps state defines it)."""
        raise NotImplementedError

    def _update_as_real(self, p: Tensor, grad: np.ndarray, group: dict, state: dict) -> None:
        """The update of complex parameter `p` as PyTorch's: on real views of the parameter,
        its gradient and its complex state (each element a pair of reals), the state made
        complex, of the parameter's dtype, as PyTorch keeps it."""
        if not state:
            self._init_state(p._data, grad, group, state)
        views = {k: Tensor._make(_view_as_real(v._data)) for k, v in state.items()
                 if isinstance(v, Tensor) and v._data.dtype.kind == "c"}
        real = {**state, **views}
        self._update(Tensor._make(_view_as_real(p._data)), _view_as_real(grad), group, real)
        # The views were updated in place; anything the update put in their place (or
        # added) goes back, a parameter-shaped real array as a complex one.
        shape = p._data.shape + (2,)
        for k, v in real.items():
            if v is views.get(k) or v is state.get(k):
                continue
            if isinstance(v, Tensor) and v._data.dtype in _COMPLEX_OF and v._data.shape == shape:
                v = Tensor._make(_view_as_complex(v._data))
            state[k] = v

    def _keeps_state(self, group: dict) -> bool:
        """Whether the update keeps per-parameter state under `group`'s options."""
        return True

    def _check_group(self, group: dict) -> None:
        """Run, before any state changes, the first arithmetic the update does with the
        group's hyperparameters, so a bad one (a string learning rate) raises Python's own
        TypeError, as in PyTorch, with the parameters and their state untouched."""

    def _update(self, p: Tensor, grad: np.ndarray, group: dict, state: dict) -> None:
        raise NotImplementedError

    def _blocked(self, like: np.ndarray, update: Callable) -> None:
        """Call `update(i, j, tmp)` for the flat element ranges [i, j) of `like`'s size, one
        cache-sized block after another (an update's passes over a block run while it is in
        cache, instead of each pass over the whole parameter through memory), the blocks
        shared between intra-op threads; `tmp` is a work array of j - i elements, the
        block's own. Elementwise passes give each element the whole-array operations in
        their order: the same bits at every block size and thread count."""
        n = like.size
        # At most `BLOCK`, and a block per thread for a parameter of fewer blocks.
        size = min(BLOCK, -(-n // _parallel.num_threads()))
        work = self._scratch(like).reshape(-1)

        def blocks(first: int, last: int) -> None:
            # This chunk's block-sized part of the work buffer, reused for each of its blocks.
            tmp = work[first * size:first * size + size]
            for i in range(first * size, min(last * size, n), size):
                j = min(i + size, n)
                update(i, j, tmp[:j - i])

        _parallel.for_chunks(blocks, -(-n // size), n)

    def _scratch(self, like: np.ndarray) -> np.ndarray:
        """A work array shaped as `like`: a view of one flat buffer shared by all parameters
        (as large as the largest), kept outside `state` so state_dict does not see it."""
        flat = self.__dict__.get("_scratch_buf")
        if flat is None or flat.dtype != like.dtype or flat.size < like.size:
            flat = np.empty(like.size, dtype=like.dtype)
            self.__dict__["_scratch_buf"] = flat
        return flat[:like.size].reshape(like.shape)

    def state_dict(self) -> dict:
        """{'state': {index: {...}}, 'param_groups': [{options, 'params': [indices]}]}: the
        state's own tensors, not copies. Pre hooks run first; a post hook may return a
        dict to use instead."""
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        index: dict[int, int] = {}
        groups = []
        start = 0
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for i, p in enumerate(g["params"], start):
                index.setdefault(id(p), i)
            # A parameter listed twice has its first index both times, as in PyTorch.
            packed["params"] = [index[id(p)] for p in g["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {}
        for p, v in self.state.items():
            if not isinstance(p, Tensor):
                state[p] = v
            elif id(p) in index:
                state[index[id(p)]] = v
        state_dict = {"state": state, "param_groups": groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore options and state saved by `state_dict`, as PyTorch does: the groups'
        options are copies, the state's tensors are the saved ones themselves unless a cast
        to the parameter's dtype makes new ones. Pre hooks may return a dict to load
        instead; post hooks run last."""
        state_dict = state_dict.copy()  # shallow: what pre hooks see and may change
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = {}
        # Whether the saved group of each saved index is fused or capturable (its `step`
        # is then kept as float32); the first group listing an index decides.
        step_float32: dict = {}
        for g, s in zip(groups, saved):
            flag = bool(s.get("fused") or s.get("capturable"))
            for old, p in zip(s["params"], g["params"]):
                id_map[old] = p
                step_float32.setdefault(old, flag)
        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k not in id_map:
                state[k] = v
                continue
            p = id_map[k]
            state[p] = _cast_state(p, v, None, step_float32[k])
        new_groups = []
        for g, s in zip(groups, saved):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
            new_groups.append(s)
        if self._SETSTATE_DEFAULTS and self._numeric_step_to_tensor:
            for g in new_groups:
                for p in g["params"]:
                    # A step saved as a number (by older versions) becomes the scalar tensor
                    # the updates count in.
                    v = state.get(p)
                    step = v.get("step") if isinstance(v, dict) else None
                    if isinstance(step, (int, float)) and not isinstance(step, bool):
                        v["step"] = Tensor._make(np.array(float(step), dtype=np.float32))
        self.__setstate__({"state": state, "param_groups": new_groups})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Register `hook(optimizer, args, kwargs)`, called before this optimizer's `step`
        (after the global pre hooks); `args` holds the optimizer first. It may return a new
        `(args, kwargs)` for the step. Returns a handle whose `remove()` unregisters it."""
        return _add_hook(self._optimizer_step_pre_hooks, hook, False)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """Register `hook(optimizer, args, kwargs)`, called after this optimizer's `step`
        (before the global post hooks). Returns a handle whose `remove()` unregisters it."""
        return _add_hook(self._optimizer_step_post_hooks, hook, False)

    def register_state_dict_pre_hook(self, hook: Callable,
                                     prepend: bool = False) -> RemovableHandle:
        """Register `hook(optimizer)`, called as `state_dict` starts (first of those
        registered when `prepend`). Returns a handle whose `remove()` unregisters it."""
        return _add_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable,
                                      prepend: bool = False) -> RemovableHandle:
        """Register `hook(optimizer, state_dict)`, called on the dict `state_dict` made; it
        may edit it or return another to use. Returns a handle whose `remove()` unregisters
        it."""
        return _add_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable,
                                          prepend: bool = False) -> RemovableHandle:
        """Register `hook(optimizer, state_dict)`, called with a shallow copy of the dict
        passed to `load_state_dict`; it may edit it or return another to load. Returns a
        handle whose `remove()` unregisters it."""
        return _add_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable,
                                           prepend: bool = False) -> RemovableHandle:
        """Register `hook(optimizer)`, called once `load_state_dict` has loaded. Returns a
        handle whose `remove()` unregisters it."""
        return _add_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)


# Group flags under which a step is never traced (their updates differ from the
# single-tensor one, or autograd records them).
_TRACE_REFUSED_FLAGS = ("foreach", "fused", "capturable", "differentiable")


def _option_key(v):
    """An option as a traced step's signature compares it: plain data by type and value
    (a float's zero sign too), anything else by identity (never traced)."""
    if type(v) is float:
        return float, v, v == 0 and math.copysign(1.0, v)
    if type(v) is tuple:
        return tuple, tuple(_option_key(x) for x in v)
    if v is None or type(v) in (bool, int, str):
        return type(v), v
    return object, id(v)


def _state_keys(state) -> tuple | None:
    return None if state is None else tuple(state)


def _is_number_data(v) -> bool:
    """Whether option `v` is a constant a traced update may hold: None, a bool, an int, a
    float, or a tuple of those (betas)."""
    if type(v) is tuple:
        return all(_is_number_data(x) for x in v)
    return v is None or type(v) in (bool, int, float)


# The dtypes a traced update steps: float16/bfloat16 updates round as eager's kernels do
# (`_half_update`), which the graph's ops do not promise; complex ones go through real views.
_TRACED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _traced_tensor_problem(p: Tensor, grad: Tensor) -> str | None:
    """Why parameter `p` and its gradient cannot be stepped by a traced update, or None."""
    if type(p._data) is not np.ndarray or type(grad._data) is not np.ndarray:
        return "an optimizer step of a sparse or meta tensor"
    if p._data.dtype not in _TRACED_DTYPES:
        return f"an optimizer step of a {p.dtype} parameter"
    if grad._data.dtype != p._data.dtype or grad._data.shape != p._data.shape:
        return "an optimizer step with a gradient of another dtype or shape"
    return None


def _traced_state_problem(p: Tensor, key: str, value) -> str | None:
    """Why state entry `key` of parameter `p` cannot be an input of a traced update."""
    if not isinstance(value, Tensor) or type(value._data) is not np.ndarray:
        return f"an optimizer step whose {key!r} state is not a dense tensor"
    if key == "step":  # (Adam's counter: a 0-d float32 tensor)
        if value._data.shape != () or value._data.dtype != np.float32:
            return "an optimizer step whose 'step' state is not a 0-d float32 tensor"
        return None
    if value._data.dtype != p._data.dtype or value._data.shape != p._data.shape:
        return f"an optimizer step whose {key!r} state is not of its parameter's dtype and shape"
    return None


def _check_fused(p: Tensor) -> None:
    """PyTorch's refusal of a non-floating-point parameter under `fused=True`."""
    if not p.is_floating_point() or p._data is None:  # (meta: not a fused device)
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors "
                           f"of supported devices: {_FUSED_DEVICES} but {p.dtype} and "
                           f"{p.device.type}")


def _cast_state(p: Tensor, value, key, step_to_float32: bool):
    """A loaded state entry as PyTorch keeps it: tensors in dicts and sequences cast to a
    floating-point parameter's dtype (only when it differs, else the same tensor), a
    `step` left alone unless the group is fused or capturable (then float32)."""
    if isinstance(value, Tensor):
        if key == "step":
            if step_to_float32 and value.dtype is not _float32():
                return value.to(_float32())
            return value
        if value.is_meta is not p.is_meta:  # (to the parameter's device, as PyTorch's)
            value = value.to(device=p.device)
        if p.is_floating_point() and value.dtype is not p.dtype:
            return value.to(p.dtype)
        return value
    if isinstance(value, dict):
        return {k: _cast_state(p, v, k, step_to_float32) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(p, v, None, step_to_float32) for v in value)
    return value


def _float32():
    from .. import float32

    return float32


_base_step = Optimizer.step
Optimizer.step = _profiled("step", Optimizer.step)
Optimizer.zero_grad = _profiled("zero_grad", Optimizer.zero_grad)
