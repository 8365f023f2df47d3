"""`Module`: the base of layers and models: parameters, buffers, submodules, hooks,
state_dict and conversions, as PyTorch's `nn.Module` behaves."""

from __future__ import annotations

import functools
import itertools
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ... import _dtype
from ..._device import device as _device_cls
from ..._tensor import Tensor
from ...autograd.grad_mode import is_grad_enabled, no_grad
from ...autograd.graph import RemovableHandle
from ..parameter import Buffer, Parameter, _MetaBuffer, is_lazy
from . import _arg_errors
from . import _global_hooks as _G
from ._global_hooks import (  # noqa: F401  (PyTorch's home of these names)
    _global_backward_hooks,
    _global_backward_pre_hooks,
    _global_buffer_registration_hooks,
    _global_forward_hooks,
    _global_forward_hooks_always_called,
    _global_forward_hooks_with_kwargs,
    _global_forward_pre_hooks,
    _global_module_registration_hooks,
    _global_parameter_registration_hooks,
    register_module_backward_hook,
    register_module_buffer_registration_hook,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
    register_module_module_registration_hook,
    register_module_parameter_registration_hook,
)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What `load_state_dict(strict=False)` returns."""

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


def _tensor_type_name(value) -> str:
    """`torch.typename(value)` as PyTorch's messages show it: a tensor's legacy type name, a
    class by its own name, anything else by its class's qualified name (fusegrad's classes
    under torch's module names)."""
    if isinstance(value, Tensor):
        return f"torch.{value.dtype.legacy}Tensor"
    from ..._functions.compat_more import typename

    name = typename(value)
    return "torch" + name[len("fusegrad"):] if name.startswith("fusegrad.") else name


_HOOK_FN: list = []
_COMPLEX_MODULE_WARNING = (
    "Complex modules are a new feature under active development whose design may change, and "
    "some modules might not work as expected when using complex tensors as parameters or "
    "buffers. Please file an issue at https://github.com/pytorch/pytorch/issues/new?template="
    "bug-report.yml if a complex module does not work as expected.")
_EXTRA_STATE = "_extra_state"  # the state_dict key of `get_extra_state`, after the prefix
_EXTRA_STATE_KEY_SUFFIX = _EXTRA_STATE  # PyTorch's name for it


def __getattr__(name: str):
    """`_global_is_full_backward_hook` as `_global_hooks` holds it now (it changes when the
    first global backward hook is registered)."""
    if name == "_global_is_full_backward_hook":
        return _G._global_is_full_backward_hook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _swap_on_load() -> bool:
    from ... import __future__ as future

    return future._swap_module_params_on_conversion


def _forward_unimplemented(self, *input: Any) -> None:
    """`Module.forward` until a subclass defines it: raises NotImplementedError."""
    raise NotImplementedError(
        f'Module [{type(self).__name__}] is missing the required "forward" function')


# Evaluated, as every module's forward annotations are (this file postpones its own), so that
# `inspect.signature(Module.forward)` and traced code show types rather than strings.
_forward_unimplemented.__annotations__ = {"input": Any, "return": None}


_MTIA_MISSING = (
    "Torch not compiled with MTIA enabled. Ensure you have `import "
    "mtia.host_runtime.torch_mtia.dynamic_library` in your python src file and include "
    "`//mtia/host_runtime/torch_mtia:torch_mtia` as your target dependency!")


def _no_backend_error(kind: str, device) -> Exception:
    """What moving a tensor to a device of `kind` raises where no such backend exists: an
    index asks for the current accelerator, which is missing; else the backend's own
    error."""
    if isinstance(device, int):
        return RuntimeError("Cannot access accelerator device when none is available.")
    if kind == "ipu":
        return RuntimeError("PyTorch is not linked with support for ipu devices")
    if kind == "mtia":
        return AssertionError(_MTIA_MISSING)
    return AssertionError(f"Torch not compiled with {kind.upper()} enabled")


def _call_with_module(module_ref: weakref.ref, hook: Callable, *args):
    """A hook registered `with_module`: called with the module (held weakly) first."""
    module = module_ref()
    if module is None:
        raise RuntimeError("You are trying to call the hook of a dead Module!")
    return hook(module, *args)


def _hook_function():
    """The identity autograd Function whose node PyTorch calls BackwardHookFunctionBackward."""
    if not _HOOK_FN:
        from ...autograd.function import Function

        class BackwardHookFunction(Function):
            @staticmethod
            def forward(ctx, *args):
                ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
                return args

            @staticmethod
            def backward(ctx, *grads):
                return grads

        _HOOK_FN.append(BackwardHookFunction)
    return _HOOK_FN[0]


def _backward_hooks_of_kind(module: Module, full: bool) -> list:
    """The global and the module's backward hooks of the full kind (`full`) or of the
    deprecated `register_backward_hook` kind, the global ones first."""
    hooks = []
    if _G._global_is_full_backward_hook is full:
        hooks += _G._global_backward_hooks.values()
    if module._is_full_backward_hook is full:
        hooks += module._backward_hooks.values()
    return hooks


def _full_backward_hooks(module: Module) -> list:
    """The global and the module's backward hooks of the full kind (the global ones first)."""
    return _backward_hooks_of_kind(module, True)


def _non_full_backward_hooks(module: Module) -> list:
    """The global and the module's hooks of the deprecated `register_backward_hook` kind."""
    return _backward_hooks_of_kind(module, False)


_NON_FULL_ADVICE = "Please use register_full_backward_hook to get the documented behavior."


def _warn_non_full_backward_hook(inputs: tuple, result, grad_fn) -> None:
    """PyTorch's FutureWarnings for a deprecated backward hook that cannot see every
    gradient: outputs or inputs that are not (tuples of) tensors, outputs from another or
    from several nodes, or a forward of more than one node."""

    def warn(message: str) -> None:
        # pointing at the module's call, as PyTorch's points at its `_call_impl`
        warnings.warn(message, FutureWarning, stacklevel=4)

    if isinstance(result, Tensor):
        result = (result,)
    elif not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
        warn("Using non-full backward hooks on a Module that does not return a single Tensor "
             "or a tuple of Tensors is deprecated and will be removed in future versions. "
             f"This hook will be missing some of the grad_output. {_NON_FULL_ADVICE}")
        return
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    elif not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
        warn("Using non-full backward hooks on a Module that does not take as input a single "
             "Tensor or a tuple of Tensors is deprecated and will be removed in future "
             f"versions. This hook will be missing some of the grad_input. {_NON_FULL_ADVICE}")
        return
    out_nodes = {r.grad_fn for r in result if r.grad_fn is not None}
    if not out_nodes or (len(out_nodes) == 1 and grad_fn not in out_nodes):
        warn("Using a non-full backward hook when outputs are nested in python data structure "
             "is deprecated and will be removed in future versions. This hook will be missing "
             "some grad_output.")
    elif len(out_nodes) > 1:
        warn("Using a non-full backward hook when outputs are generated by different autograd "
             "Nodes is deprecated and will be removed in future versions. This hook will be "
             f"missing some grad_output. {_NON_FULL_ADVICE}")
    else:
        # One output node: its grad_input is the module's only when that node reads the
        # inputs directly (a leaf input, with no grad_fn, never counts as read).
        in_nodes = {i.grad_fn for i in inputs if i.grad_fn is not None}
        if in_nodes != {n[0] for n in grad_fn.next_functions}:
            warn("Using a non-full backward hook when the forward contains multiple autograd "
                 "Nodes is deprecated and will be removed in future versions. This hook will "
                 f"be missing some grad_input. {_NON_FULL_ADVICE}")


def _attach_non_full_backward_hooks(module: Module, hooks: list, args: tuple, result) -> None:
    """Register the deprecated hooks on the grad_fn of the first tensor of `result` (the
    first value of a dict, the first item of a sequence), as PyTorch does."""
    var = result
    while not isinstance(var, Tensor):
        if isinstance(var, dict):
            var = next(v for v in var.values() if isinstance(v, Tensor))
        else:
            var = var[0]
    grad_fn = var.grad_fn
    if grad_fn is None:
        return
    module_ref = weakref.ref(module)
    for hook in hooks:
        grad_fn.register_hook(functools.partial(_call_with_module, module_ref, hook))
    _warn_non_full_backward_hook(args, result, grad_fn)


class _HookedCall:
    """One hooked module call's state: the arguments (as the pre-hooks leave them), the
    result so far, and the ids of the always-call forward hooks already run."""

    __slots__ = ("args", "kwargs", "result", "called")

    def __init__(self, args: tuple, kwargs: dict) -> None:
        self.args = args
        self.kwargs = kwargs
        self.result = None
        self.called: set = set()


class _BackwardHook:
    """Full backward hooks of one module call: identity nodes (`BackwardHookFunctionBackward`,
    as in PyTorch) around the module's tensor inputs and outputs. The output node's pre-hook
    sees grad_output; the input node's post-hook sees grad_input and calls the hooks."""

    def __init__(self, module: Module, user_hooks: list | None = None,
                 user_pre_hooks: list | None = None) -> None:
        self.module = module
        # given: these hooks (`utils.hooks.BackwardHook`); None: the module's and the
        # global ones, read when the gradients arrive
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.n_inputs = 0
        self.in_idx: list[int] = []
        self.input_node = None
        self.n_outputs = 0
        self.out_idx: list[int] = []
        self.grad_outputs: tuple | None = None
        self.in_views: list = []  # (input as passed to forward, its version then)

    @staticmethod
    def _wrap(tensors: list):
        out = _hook_function().apply(*tensors)
        return out if isinstance(out, tuple) else (out,)

    def setup_inputs(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        # Every tensor input goes through the node once one requires grad: one without grad
        # gets a zero grad_input, as in PyTorch.
        self.in_idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not any(args[i].requires_grad for i in self.in_idx):
            self.in_idx = []
            return args
        outs = self._wrap([args[i] for i in self.in_idx])
        self.in_views = [(o, o._version) for o in outs]
        self.input_node = next(o.grad_fn for o in outs if o.grad_fn is not None)

        def hook(grad_inputs, grad_outputs):  # the name the engine's errors give, as PyTorch's
            return self._input_hook(grad_inputs, grad_outputs)

        self.input_node.register_hook(hook)
        new = list(args)
        for i, o in zip(self.in_idx, outs):
            new[i] = o
        return tuple(new)

    def check_inputs_unmodified(self) -> None:
        """PyTorch's error for a forward that wrote in place into an input it was given
        through the hook node (`nn.ReLU(inplace=True)`): those inputs are views made by a
        custom Function, which may not be modified in place (the hooks would never see the
        gradient). PyTorch raises at the write; here it is noticed by the version counter
        once the forward returns."""
        for nr, (view, version) in enumerate(self.in_views):
            if view._version != version and view.requires_grad:
                raise RuntimeError(
                    f"Output {nr} of BackwardHookFunction is a view and is being modified "
                    "inplace. This view was created inside a custom Function (or because an "
                    "input was returned as-is) and the autograd logic to handle view+inplace "
                    "would override the custom backward associated with the custom Function, "
                    "leading to incorrect gradients. This behavior is forbidden. You can fix "
                    "this by cloning the output of the custom Function.")

    def setup_outputs(self, result):
        outs = (result,) if isinstance(result, Tensor) else result
        if not isinstance(outs, tuple):
            return result
        self.n_outputs = len(outs)
        self.out_idx = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not self.out_idx:
            return result
        wrapped = self._wrap([outs[i] for i in self.out_idx])

        def hook(grads):  # the name the engine's errors give, as PyTorch's
            return self._output_prehook(grads)

        wrapped[0].grad_fn.register_prehook(hook)
        new = list(outs)
        for i, o in zip(self.out_idx, wrapped):
            new[i] = o
        return new[0] if isinstance(result, Tensor) else tuple(new)

    def _output_prehook(self, grads: tuple):
        full = [None] * self.n_outputs
        for i, g in zip(self.out_idx, grads):
            full[i] = g
        hooks = self.user_pre_hooks
        if hooks is None:
            hooks = [*_G._global_backward_pre_hooks.values(),
                     *self.module._backward_pre_hooks.values()]
        for hook in hooks:
            res = hook(self.module, tuple(full))
            if res is not None:
                # sized results only, as PyTorch's `len(result)` (an int is a TypeError)
                if len(res) != len(full):
                    raise RuntimeError("Backward pre hook returned an invalid number of "
                                       f"grad_output, got {len(res)}, but expected "
                                       f"{len(full)}")
                full = list(res)
        self.grad_outputs = tuple(full)
        if self.input_node is None:
            # No input needs a gradient: the hooks run now, with PyTorch's warning (given
            # with backward pre-hooks only too).
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to "
                "module outputs since no inputs require gradients. See "
                "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn."
                "Module.register_full_backward_hook for more details.", UserWarning,
                stacklevel=2)
            for hook in self._hooks():
                hook(self.module, (None,) * max(self.n_inputs, 1), self.grad_outputs)
        return tuple(full[i] for i in self.out_idx)

    def _hooks(self) -> list:
        if self.user_hooks is not None:
            return self.user_hooks
        return _full_backward_hooks(self.module)

    def _input_hook(self, grad_inputs: tuple, grad_outputs: tuple):
        full = [None] * self.n_inputs
        for i, g in zip(self.in_idx, grad_inputs):
            full[i] = g
        for hook in self._hooks():
            res = hook(self.module, tuple(full), self.grad_outputs)
            if res is not None:
                if len(res) != len(full):
                    raise RuntimeError("Backward hook returned an invalid number of "
                                       f"grad_input, got {len(res)}, but expected "
                                       f"{len(full)}")
                full = list(res)
        return tuple(full[i] for i in self.in_idx)


_OWN_MODULES = __name__.rsplit(".", 2)[0] + "."  # fusegrad.nn's own layers


def _made_on_device(init, code):
    """`init` (a layer's, taking `device`) run with the factories making tensors on the
    device it is given, as PyTorch's layers pass theirs to every factory: a layer built with
    `device='meta'` holds meta tensors."""
    position = code.co_varnames.index("device") - 1  # (after self)

    @functools.wraps(init)
    def made_on_device(self, *args, **kwargs):
        device = kwargs.get("device")
        if device is None and position < len(args) and position < code.co_argcount - 1:
            device = args[position]
        if device is None:
            return init(self, *args, **kwargs)
        device = _device_cls(device)
        if device.type == "cpu":
            return init(self, *args, **kwargs)
        with device:
            return init(self, *args, **kwargs)

    return made_on_device


class Module:
    """Base class of all layers and models."""

    _version: int = 1
    training: bool
    dump_patches: bool = False
    # None until a backward hook is registered: then True (full hooks) or False (the
    # deprecated `register_backward_hook`); the two kinds never mix on one module. A class
    # default, so that a module's __dict__ (which jit and the compiler read) holds it only
    # once a backward hook set it.
    _is_full_backward_hook: bool | None = None
    # True: `Module.__init__` passes its arguments on to the next class in the MRO (a mixin
    # after Module); False: arguments are an error.
    call_super_init: bool = False
    # the type variable of `state_dict`'s destination (annotations in subclasses name it)
    T_destination = TypeVar("T_destination", bound=dict)
    # `Module.compile` keeps its compiled forward elsewhere; PyTorch's attribute stays None
    _compiled_call_impl = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and cls.__module__.startswith(_OWN_MODULES):
            code = getattr(init, "__code__", None)
            if code is not None and "device" in code.co_varnames[:code.co_argcount +
                                                                 code.co_kwonlyargcount]:
                cls.__init__ = _made_on_device(init, code)

    def __init__(self, *args, **kwargs) -> None:
        if (args or kwargs) and not self.call_super_init:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                f"'{next(iter(kwargs))}'" if kwargs else
                f"{type(self).__name__}.__init__() takes 1 positional argument but "
                f"{len(args) + 1} were given")
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", {})
        setattr_(self, "_buffers", {})
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", {})
        setattr_(self, "_forward_pre_hooks", OrderedDict())
        setattr_(self, "_forward_pre_hooks_with_kwargs", OrderedDict())
        setattr_(self, "_forward_hooks", OrderedDict())
        setattr_(self, "_forward_hooks_with_kwargs", OrderedDict())
        setattr_(self, "_forward_hooks_always_called", OrderedDict())
        setattr_(self, "_backward_hooks", OrderedDict())
        setattr_(self, "_backward_pre_hooks", OrderedDict())
        setattr_(self, "_state_dict_hooks", OrderedDict())
        setattr_(self, "_state_dict_pre_hooks", OrderedDict())
        setattr_(self, "_load_state_dict_pre_hooks", OrderedDict())
        setattr_(self, "_load_state_dict_post_hooks", OrderedDict())
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    forward: Callable[..., Any] = _forward_unimplemented

    # ------------------------------------------------------------ calling

    def __call__(self, *args, **kwargs):
        # While a global hook exists, `_global_hooks` makes `_call_with_global_hooks` the
        # class's __call__: this path reads the module's own tables only.
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                or self._backward_pre_hooks):
            try:
                return self.forward(*args, **kwargs)
            except Exception as exc:
                # a layer given a non-tensor: PyTorch's argument parser names the argument
                # (checked here, after the failure, so that the tensor path pays nothing)
                error = _arg_errors.reported_error(self, args, kwargs, exc)
                if error is not None:
                    raise error from None
                raise
        return self._call_with_hooks(args, kwargs)

    _call_plain = __call__

    def _call_with_global_hooks(self, *args, **kwargs):
        return self._call_with_hooks(args, kwargs)

    def _slow_forward(self, *input, **kwargs):
        """The forward alone (PyTorch's path while tracing with jit)."""
        return self.forward(*input, **kwargs)

    def _get_backward_hooks(self) -> tuple[list, list]:
        """(full backward hooks, deprecated-kind backward hooks) that a call of this module
        runs: the global ones, then the module's."""
        return _full_backward_hooks(self), _non_full_backward_hooks(self)

    def _get_backward_pre_hooks(self) -> list:
        """The backward pre-hooks a call of this module runs: the global ones, then the
        module's."""
        return [*_G._global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]

    def _maybe_warn_non_full_backward_hook(self, inputs, result, grad_fn) -> None:
        """PyTorch's FutureWarnings for a deprecated backward hook that cannot see every
        gradient of this call."""
        _warn_non_full_backward_hook(inputs, result, grad_fn)

    def _replicate_for_data_parallel(self) -> Module:
        """A shallow copy for one data-parallel replica: the attributes shared, the tables of
        buffers and children copied, no parameters (the replica gets its own)."""
        replica = self.__new__(type(self))
        replica.__dict__ = self.__dict__.copy()
        replica._parameters = {}
        replica._buffers = replica._buffers.copy()
        replica._modules = replica._modules.copy()
        replica._is_replica = True
        return replica

    def _wrapped_call_impl(self, *args, **kwargs):
        """What calling the module runs (PyTorch's name for `Module.__call__`): the forward
        with the hooks around it."""
        return Module.__call__(self, *args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        """The forward with the hooks around it (as `_wrapped_call_impl`; PyTorch's compiled
        modules call this one)."""
        return Module.__call__(self, *args, **kwargs)

    def _call_with_hooks(self, args, kwargs):
        # `call` carries the arguments as the pre-hooks leave them, the result so far and
        # the always-call hooks already run: if anything fails (a pre-hook, the forward, a
        # hook), PyTorch runs the always-call forward hooks not yet run with those, then
        # re-raises.
        call = _HookedCall(args, kwargs)
        try:
            return self._run_with_hooks(call)
        except Exception:
            self._run_always_called_hooks(call)
            raise

    def _run_always_called_hooks(self, call: _HookedCall) -> None:
        """The always-call forward hooks not run yet, after a failure: their own errors are
        turned into warnings, so that the first error is the one raised."""
        hooks = [(hid, hook, False, "global module") for hid, hook in
                 _G._global_forward_hooks.items()
                 if hid in _G._global_forward_hooks_always_called]
        hooks += [(hid, hook, hid in self._forward_hooks_with_kwargs, "module")
                  for hid, hook in self._forward_hooks.items()
                  if hid in self._forward_hooks_always_called]
        for hid, hook, with_kwargs, kind in hooks:
            if hid in call.called:
                continue
            try:
                # PyTorch passes kwargs here to a module's own hooks only
                if with_kwargs:
                    res = hook(self, call.args, call.kwargs, call.result)
                else:
                    res = hook(self, call.args, call.result)
                if res is not None:
                    call.result = res
            except Exception as e:  # noqa: BLE001  (the first error is the one reported)
                warnings.warn(f"{kind} forward hook with ``always_call=True`` raised an "
                              "exception that was silenced as another error was raised in "
                              f"forward: {e}", stacklevel=3)

    def _run_with_hooks(self, call: _HookedCall):
        backward = None
        full = non_full = ()
        if self._backward_hooks or _G._global_backward_hooks:
            full, non_full = _full_backward_hooks(self), _non_full_backward_hooks(self)
        if (full or self._backward_pre_hooks or _G._global_backward_pre_hooks) \
                and is_grad_enabled():
            backward = _BackwardHook(self)
        pre_hooks = [(hook, False) for hook in _G._global_forward_pre_hooks.values()]
        pre_hooks += [(hook, hid in self._forward_pre_hooks_with_kwargs)
                      for hid, hook in self._forward_pre_hooks.items()]
        for hook, with_kwargs in pre_hooks:
            if with_kwargs:
                res = hook(self, call.args, call.kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError(
                            "forward pre-hook must return None or a tuple of (new_args, "
                            f"new_kwargs), but got {res}.")
                    call.args, call.kwargs = res
            else:
                res = hook(self, call.args)
                if res is not None:
                    call.args = res if isinstance(res, tuple) else (res,)
        if backward is not None:
            call.args = backward.setup_inputs(call.args)
        args, kwargs = call.args, call.kwargs
        try:
            result = self.forward(*args, **kwargs)
        except Exception as exc:
            error = _arg_errors.reported_error(self, args, kwargs, exc)
            if error is not None:
                raise error from None
            raise
        if backward is not None and backward.in_views:
            backward.check_inputs_unmodified()
        call.result = result
        g_hooks = _G._global_forward_hooks
        hooks = [(hid, hook, hid in _G._global_forward_hooks_with_kwargs,
                  hid in _G._global_forward_hooks_always_called)
                 for hid, hook in g_hooks.items()] if g_hooks else []
        hooks += [(hid, hook, hid in self._forward_hooks_with_kwargs,
                   hid in self._forward_hooks_always_called)
                  for hid, hook in self._forward_hooks.items()]
        for hid, hook, with_kwargs, always in hooks:
            if always:
                call.called.add(hid)
            if with_kwargs:
                res = hook(self, args, kwargs, result)
            else:
                res = hook(self, args, result)
            if res is not None:
                result = call.result = res
        if backward is not None:
            result = backward.setup_outputs(result)
        if non_full:
            _attach_non_full_backward_hooks(self, non_full, args, result)
        return result

    def _new_handle(self, hooks: OrderedDict, hook, prepend: bool,
                    extra: list | None = None) -> RemovableHandle:
        handle = RemovableHandle(hooks, extra_dict=extra)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call `hook(module, args)` before forward; it may return new args."""
        handle = self._new_handle(self._forward_pre_hooks, hook, prepend,
                                  [self._forward_pre_hooks_with_kwargs])
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """Call `hook(module, args, output)` after forward; it may return a new output."""
        handle = self._new_handle(
            self._forward_hooks, hook, prepend,
            [self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_backward_hook(self, hook) -> RemovableHandle:
        """Deprecated (use `register_full_backward_hook`): call `hook(module, grad_input,
        grad_output)` with the gradients of the autograd node that made the module's first
        output, whatever that node's inputs are; it may return new grad_input."""
        if self._is_full_backward_hook is True:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        self._is_full_backward_hook = False
        return self._new_handle(self._backward_hooks, hook, False)

    def register_full_backward_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, grad_input, grad_output)` when the gradients of the module's
        inputs are computed; it may return new grad_input."""
        if self._is_full_backward_hook is False:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        self._is_full_backward_hook = True
        return self._new_handle(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, grad_output)` before the module's backward; it may return new
        grad_output."""
        return self._new_handle(self._backward_pre_hooks, hook, prepend)

    # ------------------------------------------------------------ registration

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder) under `name`."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_tensor_type_name(param)}' object to parameter "
                            f"'{name}' (torch.nn.Parameter or None required)")
        elif param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must "
                "be created explicitly. To express '{name}' as a function of another Tensor, "
                "compute the value in the forward() method.".replace("{name}", name))
        else:
            if _G._global_parameter_registration_hooks:
                param = _G._registered(_G._global_parameter_registration_hooks, self, name,
                                       param)
            self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer (state that is not a parameter, like running statistics)."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_tensor_type_name(tensor)}' object to buffer "
                            f"'{name}' (torch Tensor or None required)")
        if _G._global_buffer_registration_hooks:
            tensor = _G._registered(_G._global_buffer_registration_hooks, self, name, tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under `name`."""
        from ..._functions.compat_more import typename

        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:  # a module's message names it, unlike a parameter's or a buffer's
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        self._check_name(name, "module")
        if _G._global_module_registration_hooks:
            module = _G._registered(_G._global_module_registration_hooks, self, name, module)
        self._modules[name] = module

    register_module = add_module

    @staticmethod
    def _check_name(name: str, what: str) -> None:
        if "." in name:
            raise KeyError(f'{what} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._drop(name, d, keep="_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_tensor_type_name(value)}' as parameter "
                                f"'{name}' (torch.nn.Parameter or None expected)")
            params[name] = None
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._drop(name, d, keep="_modules")
            if _G._global_module_registration_hooks:
                value = _G._registered(_G._global_module_registration_hooks, self, name, value)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_tensor_type_name(value)}' as child module "
                                f"'{name}' (torch.nn.Module or None expected)")
            if _G._global_module_registration_hooks:
                value = _G._registered(_G._global_module_registration_hooks, self, name, value)
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if isinstance(value, (Buffer, _MetaBuffer)):  # registers itself, kept as a tensor
            if buffers is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            self._drop(name, d, keep="_buffers")
            self.register_buffer(name, value._as_tensor(), value.persistent)
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_tensor_type_name(value)}' as buffer "
                                f"'{name}' (torch.nn.Buffer, torch.Tensor or None expected)")
            if _G._global_buffer_registration_hooks:
                value = _G._registered(_G._global_buffer_registration_hooks, self, name, value)
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _drop(self, name: str, d: dict, keep: str) -> None:
        """Forget `name` everywhere except in `keep` (one of the three registries)."""
        d.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep and name in d.get(store, ()):
                del d[store][name]
                if store == "_buffers":
                    d["_non_persistent_buffers_set"].discard(name)

    def __getattr__(self, name: str):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            items = d.get(store)
            if items is not None and name in items:
                return items[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            items = self.__dict__.get(store)
            if items is not None and name in items:
                del items[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self))
        for store in ("_parameters", "_buffers", "_modules"):
            keys += list(self.__dict__.get(store, ()))
        return sorted(set(keys))

    def __getstate__(self) -> dict:
        # The backward hook kind is a class default here until a hook sets it; PyTorch's
        # modules always hold it, and their pickled state too.
        state = dict(self.__dict__)
        state.setdefault("_is_full_backward_hook", self._is_full_backward_hook)
        return state

    def __setstate__(self, state: dict) -> None:
        # A fresh module's bookkeeping first (a pickle from PyTorch, or from an older
        # fusegrad, may lack some of it), then the saved attributes over it.
        Module.__init__(self)
        self.__dict__.update(state)

    # ------------------------------------------------------------ traversal

    def _named_members(self, get_members, prefix: str = "", recurse: bool = True,
                       remove_duplicate: bool = True):
        memo = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of this module (and its descendants when `recurse`)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs, each parameter once."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers of this module (and its descendants when `recurse`)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs."""
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def children(self) -> Iterator[Module]:
        """The direct submodules."""
        for _, m in self.named_children():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) for the direct submodules, each once."""
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self) -> Iterator[Module]:
        """This module and all its descendants, each once."""
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True):
        """(dotted name, module) for this module ('') and all descendants."""
        # `memo` holds the modules themselves (a caller may pass its own set of modules to
        # leave out); one already in it is skipped even when duplicates are kept.
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path `target` ('' is self)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Put `module` at dotted path `target`: the parent must exist; what is replaced
        must be a module; with `strict`, it must exist already."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        parent_path, _, name = target.rpartition(".")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path `target`."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path `target`."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return mod._buffers[name]

    # ------------------------------------------------------------ modes and grads

    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and its descendants; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        """Evaluation mode (`train(False)`); returns self."""
        return self.train(False)

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's forward in place (`fusegrad.compile`'s arguments): later
        calls run it through captured graphs, the hooks around it as before. (PyTorch
        compiles its call implementation; the forward is what that captures.)"""
        from ...compiler import compile as compile_fn

        forward = self.__dict__.get("forward", self.forward)  # compiled again: the original
        forward = getattr(forward, "_module_forward", forward)
        compiled = compile_fn(forward, *args, **kwargs)
        compiled._module_forward = forward
        object.__setattr__(self, "forward", compiled)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set `requires_grad` on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to None by default)."""
        from ..utils.grads import zero_grads

        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call `fn` on every descendant, then on self (children first); returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------ conversions

    def _apply(self, fn, recurse: bool = True) -> Module:
        """Convert every parameter (and its gradient) and buffer with `fn`, children first.

        As in PyTorch, `fusegrad.__future__` picks how a parameter takes the result: by
        default the parameter object stays and its data becomes the result
        (`param.data = new`, its gradient likewise, so references held elsewhere, such as
        an optimizer's, see the conversion); with overwriting on, a new Parameter replaces
        it; with swapping on, the result's contents are swapped into the existing object.
        """
        from ... import __future__ as future

        if recurse:
            for m in self.children():
                m._apply(fn)
        swap = future._swap_module_params_on_conversion
        overwrite = future._overwrite_module_params_on_conversion
        for key, param in self._parameters.items():
            if param is None:
                continue
            with no_grad():
                new = fn(param)
            grad = param._grad
            if swap:
                out = self._swap_param(key, param, new, grad)
            elif not overwrite and param.device == new.device:
                param.data = new
                out = param
            elif not overwrite:  # to or from the meta device: a new Parameter, as PyTorch's
                out = self._parameters[key] = Parameter(new, param.requires_grad)
            else:
                out = Parameter(new, param.requires_grad)
                self._parameters[key] = out
            if grad is None:
                continue
            with no_grad():
                new_grad = fn(grad)
            if swap:
                from ...utils import swap_tensors

                new_grad.requires_grad_(grad.requires_grad)
                try:
                    swap_tensors(grad, new_grad)
                except Exception as e:
                    raise RuntimeError(
                        f"_apply(): Couldn't swap {self._get_name()}.{key}.grad") from e
                out.grad = grad
            elif not overwrite and grad.device == new_grad.device:
                grad.data = new_grad
            else:
                out.grad = new_grad.requires_grad_(grad.requires_grad)
        for key, b in self._buffers.items():
            if b is not None:
                self._buffers[key] = fn(b)
        return self

    def _swap_param(self, key: str, param: Parameter, new: Tensor, grad) -> Parameter:
        """`_apply` with swapping on: `new` (as a Parameter) swapped into `param`."""
        from ...utils import swap_tensors

        if grad is not None:
            param.grad = None  # the gradient is swapped on its own, after the parameter
        try:
            swap_tensors(param, Parameter(new, requires_grad=param.requires_grad))
        except Exception as e:
            if grad is not None:
                param.grad = grad
            raise RuntimeError(f"_apply(): Couldn't swap {self._get_name()}.{key}") from e
        return param

    def to(self, *args, **kwargs) -> Module:
        """Convert floating parameters and buffers to a dtype, and/or move to a device."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() received an invalid combination of arguments - got "
                            f"({', '.join(kwargs)})")
        for a in args:
            if isinstance(a, _dtype.dtype):
                dtype = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (str, _device_cls)):
                device = a
            elif a is not None and not isinstance(a, bool):
                raise TypeError(f"to() received an invalid combination of arguments - got "
                                f"({type(a).__name__})")
        if dtype is not None:
            if dtype.is_complex:
                warnings.warn(_COMPLEX_MODULE_WARNING, stacklevel=2)
            elif not dtype.is_floating_point:
                raise TypeError("nn.Module.to only accepts floating point or complex dtypes, "
                                f"but got desired dtype={dtype}")
        if device is not None:
            device = _device_cls(device)
            device._check_available()
            if device.type == "meta" or any(not t._plain and t.is_meta for t in
                                            itertools.chain(self.parameters(), self.buffers())):
                return self._to_device(device, dtype)
        if memory_format is not None:
            # 4-D and 5-D parameters and buffers (convolution weights) take the format; the
            # others stay as they are, as in PyTorch.
            def convert(t):
                if dtype is not None and (t.is_floating_point() or t.is_complex()):
                    t = t.to(dtype)
                # (`Tensor.to`: a weight laid out anew unless it suggests the format, as
                # PyTorch's; `contiguous` would keep a 1x1 kernel's contiguous weight)
                return t.to(memory_format=memory_format) if t.dim() in (4, 5) else t

            return self._apply(convert)
        if dtype is None:
            return self
        # floating and complex tensors take the dtype (either way round, as in PyTorch);
        # integer and bool buffers keep theirs
        return self._apply(
            lambda t: t.to(dtype) if t.is_floating_point() or t.is_complex() else t)

    def _to_device(self, device, dtype) -> Module:
        """`to` onto or from the meta device: a meta module has no data to move."""
        def convert(t):
            if dtype is not None and (t.is_floating_point() or t.is_complex()):
                return t.to(device, dtype)
            return t.to(device)

        try:
            return self._apply(convert)
        except NotImplementedError as e:
            if str(e) != "Cannot copy out of meta tensor; no data!":
                raise
            raise NotImplementedError(
                f"{e} Please use torch.nn.Module.to_empty() instead of torch.nn.Module.to() "
                "when moving module from meta to a different device.") from None

    def _cast(self, dtype) -> Module:
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self) -> Module:
        """Floating parameters and buffers to float32."""
        return self._cast(_dtype.float32)

    def double(self) -> Module:
        """Floating parameters and buffers to float64."""
        return self._cast(_dtype.float64)

    def half(self) -> Module:
        """Floating parameters and buffers to float16."""
        return self._cast(_dtype.float16)

    def bfloat16(self) -> Module:
        """Floating parameters and buffers to bfloat16."""
        return self._cast(_dtype.bfloat16)

    def type(self, dst_type) -> Module:
        """All parameters and buffers to `dst_type`: a dtype, a type name
        (`"torch.DoubleTensor"`) or a legacy tensor type (`torch.FloatTensor`), as
        `Tensor.type` reads it."""
        return self._apply(lambda t: t.type(dst_type))

    def to_empty(self, *, device, recurse: bool = True) -> Module:
        """Replace every parameter's and buffer's data by uninitialised memory of the same
        shape and dtype on `device` (parameters stay the same objects); returns self."""
        from ..._creation import empty_like

        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def share_memory(self) -> Module:
        """Move parameters and buffers to shared memory (`Tensor.share_memory_`: processes
        forked afterwards update them in place, as in Hogwild training); returns self. A
        lazy module's uninitialised parameter raises, as in PyTorch."""

        def share(t):
            share_ = getattr(t, "share_memory_", None)
            return t if share_ is None else share_()

        return self._apply(share)

    def cpu(self) -> Module:
        """Self (everything lives on the CPU); a module on the meta device has no data to
        copy out."""
        for t in itertools.chain(self.parameters(), self.buffers()):
            if not t._plain and t.is_meta:
                t.cpu()  # PyTorch's NotImplementedError
        return self

    def _to_missing_backend(self, kind: str, device) -> Module:
        """Moving to a backend this build lacks: PyTorch's error from the first tensor that
        would move (a module without tensors moves trivially)."""
        for module in self.modules():
            if any(t is not None for t in module._parameters.values()) or any(
                    t is not None for t in module._buffers.values()):
                if kind == "cuda" and not isinstance(device, int):
                    _device_cls("cuda")._check_available()
                raise _no_backend_error(kind, device)
        return self

    def cuda(self, device=None) -> Module:
        """Not available: no CUDA backend exists yet."""
        return self._to_missing_backend("cuda", device)

    def xpu(self, device=None) -> Module:
        """Not available: this build has no XPU backend (PyTorch's CPU builds neither)."""
        return self._to_missing_backend("xpu", device)

    def ipu(self, device=None) -> Module:
        """Not available: this build has no IPU backend (PyTorch's CPU builds neither)."""
        return self._to_missing_backend("ipu", device)

    def mtia(self, device=None) -> Module:
        """Not available: this build has no MTIA backend (PyTorch's CPU builds neither)."""
        return self._to_missing_backend("mtia", device)

    # ------------------------------------------------------------ state dict

    def get_extra_state(self) -> Any:
        """The extra state `state_dict` stores under `<prefix>_extra_state` (picklable).
        Override it, with `set_extra_state`, in a module that has such state; the base
        method is never called."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template="
            "bug-report.yml to report this bug.")

    def set_extra_state(self, state: Any) -> None:
        """Restore the extra state that `get_extra_state` gave (`load_state_dict` calls it
        with the `<prefix>_extra_state` entry). Override it in a module that has such
        state; the base method is never called."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template="
            "bug-report.yml to report this bug.")

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        # Only a class that overrides the method has extra state (an instance attribute
        # of that name does not count, as in PyTorch).
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """An OrderedDict of parameters and persistent buffers under dotted names."""
        if args:  # the deprecated positional form (destination, prefix, keep_vars)
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead. Refer to "
                "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module."
                "state_dict for details.", FutureWarning, stacklevel=2)
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        meta = getattr(destination, "_metadata", None)
        local_metadata = {"version": self._version}
        if meta is not None:
            meta[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if res is not None:  # the public hooks edit in place only
                    raise RuntimeError("state_dict post-hook must return None")
            elif res is not None:
                destination = res
        return destination

    def _register_state_dict_hook(self, hook) -> RemovableHandle:
        """Call `hook(module, state_dict, prefix, local_metadata)` after this module's
        `state_dict` is written; it may return a replacement."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook "
                               "that was previously registered via "
                               "register_state_dict_post_hook")
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook) -> RemovableHandle:
        """Call `hook(module, state_dict, prefix, local_metadata)` after this module's
        `state_dict` is written; it edits the dict in place (returning anything is an
        error)."""
        hook._from_public_api = True  # PyTorch's mark, read by `state_dict`
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_state_dict_pre_hook(self, hook) -> RemovableHandle:
        """Call `hook(module, prefix, keep_vars)` before this module writes its entries."""
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def _register_load_state_dict_pre_hook(self, hook, with_module: bool = False
                                           ) -> RemovableHandle:
        """Call `hook(state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)` (the module first when `with_module`) before this
        module loads its entries; it may rewrite `state_dict` (old checkpoints' names)."""
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = (
            functools.partial(_call_with_module, weakref.ref(self), hook) if with_module
            else hook)
        return handle

    def register_load_state_dict_pre_hook(self, hook) -> RemovableHandle:
        """Call `hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)` before this module loads its entries."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook) -> RemovableHandle:
        """Call `hook(module, incompatible_keys)` after `load_state_dict` loaded this module
        and its children; it may edit the missing/unexpected key lists in place."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                 error_msgs)
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in list(self._parameters.items()) + list(persistent.items())
                 if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected torch.Tensor or '
                    f"Tensor-like object from checkpoint but received {type(value)}")
                continue
            lazy = is_lazy(param)
            # A placeholder of a lazy module takes any shape (its load hook materialised it
            # already when the value is real); a 0-d tensor takes a 1-element vector, as
            # checkpoints from before 0-d tensors wrote them.
            if not lazy and len(param.shape) == 0 and len(value.shape) == 1:
                value = value[0]
            if not lazy and tuple(value.shape) != tuple(param.shape):
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from "
                    f"checkpoint, the shape in current model is {param.shape}.")
                continue
            swap = _swap_on_load()
            assign = local_metadata.get("assign_to_params_buffers", False)
            if not param._plain and param.is_meta and (value._plain or not value.is_meta) \
                    and not assign:
                warnings.warn(
                    f"for {key}: copying from a non-meta parameter in the checkpoint to a meta "
                    "parameter in the current model, which is a no-op. (Did you mean to pass "
                    "`assign=True` to assign items in the state dictionary to their "
                    "corresponding key in the module instead of copying them in place?)",
                    stacklevel=3)
            try:
                if swap:
                    self._load_by_swap(param, value, assign)
                elif assign:
                    if name in self._parameters:
                        self._parameters[name] = Parameter(
                            value.detach(), requires_grad=param.requires_grad)
                    else:
                        self._buffers[name] = value
                else:
                    with no_grad():
                        param.copy_(value)
            except Exception as ex:  # noqa: BLE001  (reported with the other errors)
                error_msgs.append(
                    f'While {"swapping" if swap else "copying"} the parameter named "{key}", '
                    f"whose dimensions in the model are {param.size()} and whose dimensions in "
                    f"the checkpoint are {value.size()}, an exception occurred : {ex.args}.")
        extra_key = prefix + _EXTRA_STATE
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    name, dot, _ = key[len(prefix):].partition(".")
                    # a dotted name belongs to a child; a plain one to this module's tensors
                    if name not in (self._modules if dot else local):
                        unexpected_keys.append(key)

    @staticmethod
    def _load_by_swap(param: Tensor, value: Tensor, assign: bool) -> None:
        """`load_state_dict` with `__future__`'s swapping on: the loaded contents (the value
        itself with `assign`, else `param` after copying the value in) are swapped into the
        existing object, which so keeps its identity."""
        from ...utils import swap_tensors

        with no_grad():
            new = value.detach() if assign else param.copy_(value).detach()
        if isinstance(param, Parameter):
            new = Parameter(new, requires_grad=param.requires_grad)
        swap_tensors(param, new)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy parameters and buffers from `state_dict`; returns missing/unexpected keys."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list = []
        unexpected: list = []
        errors: list = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)

        def load(module, local_state, prefix=""):
            local_meta = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                # Told to the module through its metadata, as PyTorch does: an override of
                # `_load_from_state_dict` reads it there, and the state_dict's own metadata
                # keeps it for later loads of the same dict.
                local_meta["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state, prefix, local_meta, True, missing,
                                         unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    # Each child gets its own entries: what its pre hooks rename stays its.
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state.items()
                                 if k.startswith(child_prefix)}, child_prefix)
            keys = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, keys) is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be "
                        "modified, it should be done inplace.")

        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------ printing

    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """Extra information shown inside the module's repr (override in layers)."""
        return ""

    def _child_lines(self) -> list:
        return [f"({key}): {_addindent(repr(m), 2)}" for key, m in self._modules.items()]

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = self._child_lines()
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"


def is_module_call(f) -> bool:
    """Whether `f` is `Module.__call__` (either of the two it swaps between as global hooks
    come and go), not a class's own `__call__` (the compiler runs the former as forward
    between hooks, and inlines the latter)."""
    return f is Module._call_plain or f is Module._call_with_global_hooks
