"""Custom autograd Functions: user-written forward and backward as one graph node.

`MyFn.apply(*args)` runs `forward` without recording, then (when grad mode is on and a tensor
argument requires grad) makes one node of class `MyFnBackward` whose edges are the tensor
arguments. The node is also the `ctx` object forward saw, so attributes set on `ctx` and
`ctx.saved_tensors` are reachable from `y.grad_fn`, as in PyTorch.
"""

from __future__ import annotations

import functools
import inspect

from .. import _dtype
from .._thread_state import local as _thread_local
from . import graph as _graph
from .grad_mode import no_grad


def _tensor_cls():
    return _graph._tensor_class[0]


def _size_str(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _only_tensors(values: tuple, message: str) -> None:
    """TypeError (`message` with the position `i` and type name `kind`) for a value that is
    neither a tensor nor None."""
    Tensor = _tensor_cls()
    for i, t in enumerate(values):
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(message.format(i=i, kind=type(t).__name__))


class FunctionCtx:
    """What `forward`/`setup_context` use to pass state to `backward`."""

    def save_for_backward(self, *tensors) -> None:
        """Keep `tensors` (or None) for backward; read them back with `saved_tensors`."""
        _only_tensors(tensors, "save_for_backward can only save variables, but argument {i} "
                               "is of type {kind}")
        self._to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        """Keep `tensors` (or None) for `jvp`, which reads them back with `saved_tensors`."""
        _only_tensors(tensors, "save_for_forward expects all arguments to be tensors; but got "
                               "{i}th argument of type {kind}.")
        self._saved_for_forward = tensors

    def mark_dirty(self, *tensors) -> None:
        """Declare the inputs that forward modified in place (they are returned as outputs)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Declare outputs that have no gradient (they will not require grad)."""
        self._non_diff = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """With False, backward receives None (not zeros) for outputs that got no gradient."""
        self._materialize = bool(value)


class BackwardCFunction(_graph.Node, FunctionCtx):
    """The node of a custom Function; it is also the Function's `ctx`."""

    _forward_cls = None
    _jvp_running = False  # `jvp` is running: `saved_tensors` are those saved for forward
    # (output numbers that are views of inputs, whether several outputs are differentiable)
    _custom_views = None

    def __init__(self):
        _graph.Node.__init__(self)
        self._to_save = None
        self._versions = None
        self._dirty = ()
        self._non_diff = ()
        self._materialize = True
        self._tensor_pos = ()  # positions of the tensor arguments of forward
        self._n_args = 0
        self._in_meta = ()
        self.needs_input_grad = ()

    def __repr__(self) -> str:
        # PyTorch prints custom nodes with their Python module path (as fusegrad prints
        # torch.Size and torch.FloatTensor).
        return f"<torch.autograd.function.{type(self).__name__} object at {id(self):#x}>"

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to `save_for_backward` (checked against in-place changes), or
        in `jvp` those given to `save_for_forward`."""
        if self._jvp_running:
            return tuple(getattr(self, "_saved_for_forward", ()))
        saved = self._saved
        if saved is None:
            raise RuntimeError(_graph._FREED)
        return tuple(_graph.unpack_saved(self, saved, self._versions))

    saved_variables = saved_tensors

    @property
    def _raw_saved_tensors(self) -> tuple:
        """The tensors given to `save_for_backward`, each as a SavedTensor (to hook)."""
        saved = self._saved
        if saved is None:
            raise RuntimeError(_graph._FREED)
        return tuple(_graph.SavedTensor(self, i) for i in range(len(saved)))

    def release(self) -> None:
        if self._versions is not None:
            self._saved = None

    def apply(self, grads: list) -> list:
        cls = self._forward_cls
        backward = cls.backward
        if backward is Function.backward:
            backward = cls.vjp
        elif cls.vjp is not Function.vjp:
            raise RuntimeError(
                "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. "
                "You should only implement one of them.")
        res = backward(self, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        return self._check_grads(res)

    def _check_grads(self, res: tuple) -> list:
        name = type(self).__name__
        n = self._n_args
        if len(res) != n:
            if len(res) > n and all(g is None for g in res[n:]):
                res = res[:n]
            else:
                raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                                   f"(expected {n}, got {len(res)})")
        Tensor = _tensor_cls()
        out = []
        tensor_pos = self._tensor_pos
        for i, g in enumerate(res):
            if i not in tensor_pos:
                if g is not None:
                    raise RuntimeError(
                        f"function {name} returned a gradient different than None at position "
                        f"{i + 1}, but the corresponding forward input was not a Variable")
                continue
            if g is not None and not isinstance(g, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
            out.append(g)
        for k, (g, (shape, dt)) in enumerate(zip(out, self._in_meta)):
            if g is None:
                continue
            if tuple(g.shape) != shape:
                if not _sums_to(tuple(g.shape), shape):
                    raise RuntimeError(
                        f"Function {name} returned an invalid gradient at index {k} - got "
                        f"{_size_str(g.shape)} but expected shape compatible with "
                        f"{_size_str(shape)}")
                out[k] = g = _graph._sum_to(g, shape)
            if g._dtype is not dt and dt.category >= _dtype.FLOAT:
                out[k] = _graph.cast_grad(g, dt)
        return out


def _sums_to(shape: tuple, target: tuple) -> bool:
    """Whether a gradient of `shape` can be summed down to `target` (target expands to it)."""
    if len(target) > len(shape):
        return False
    lead = len(shape) - len(target)
    return all(t == s or t == 1 for t, s in zip(target, shape[lead:]))


class _FunctionMeta(type):
    """Gives every Function subclass its own backward node class, `<Name>Backward`."""

    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        node = type(f"{name}Backward", (BackwardCFunction,), {"_forward_cls": cls})
        node.__module__ = "fusegrad.autograd.function"
        cls._backward_cls = node


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable operations.

    Subclasses define `forward(ctx, *args)` (or `forward(*args)` plus
    `setup_context(ctx, inputs, output)`) and `backward(ctx, *grad_outputs)` as staticmethods
    and are called through `apply`.
    """

    # (a fusegrad Function that PyTorch also defines as one sets this: transforms then
    # apply a user Function's rules to it rather than running it as it is)
    _user_rules = False

    def __init__(self, *args, **kwargs):
        import warnings

        warnings.warn(
            f"{type(self)} should not be instantiated. Methods on autograd functions are all "
            "static, so you should invoke them on the class itself. Instantiating an autograd "
            "function will raise an error in a future version of PyTorch.",
            DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(*args, **kwargs):
        """The computation; override as a staticmethod."""
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Optional: save state for backward from `inputs` and `output` (separate style)."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Gradients of the inputs from those of the outputs; override as a staticmethod."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def vjp(ctx, *grad_outputs):
        """Alias of backward."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def vmap(info, in_dims, *args):
        """Optional: the Function over a batch (`info.batch_size`, `info.randomness`), with
        `in_dims` giving each argument's batch dimension (None: not batched); returns
        (outputs, out_dims). Used by `func.vmap` in place of running forward per example."""
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap staticmethod "
            "or set generate_vmap_rule=True.")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """Forward-mode derivative (not supported yet)."""
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward and, when gradients are needed, record a `<Name>Backward` node; at an
        open forward AD level, `jvp` gives the outputs' tangents."""
        if _forward_grads is not None:
            return _forward_grads(cls, args, kwargs, _apply)
        return _apply(cls, args, kwargs)


# `autograd.forward_ad.function_apply` while a forward AD level is open, else None.
_forward_grads = None


def use_forward_grads(apply) -> None:
    """Registration by `autograd.forward_ad`: how Functions apply at an open level (None
    once it closes)."""
    global _forward_grads
    _forward_grads = apply


_PACKAGE = __name__.rsplit(".", 2)[0] + "."
_FUNC_DOCS = "For more details, please see https://pytorch.org/docs/main/notes/extending.func.html"


def _under_transforms(cls, args):
    """How `cls.apply(*args)` goes under running function transforms: NotImplemented to run
    as usual, else the results of the Function's vmap rule (PyTorch's rules: a Function
    needs `setup_context` under any transform, and under vmap a `vmap` staticmethod or
    `generate_vmap_rule=True`)."""
    stack = _thread_local.transforms  # noted by the transforms (`func._common.running`)
    if not stack or cls.__module__.startswith(_PACKAGE) and not cls._user_rules:
        # fusegrad's own Functions (hooks, compiled graphs) stand for machinery PyTorch runs
        # under transforms by other means: they run as they are, save those that are
        # Functions in PyTorch too (`_user_rules`: the reentrant checkpoint).
        return NotImplemented
    if cls.setup_context is Function.setup_context:
        raise RuntimeError(
            "In order to use an autograd.Function with functorch transforms (vmap, grad, jvp, "
            "jacrev, ...), it must override the setup_context staticmethod. " + _FUNC_DOCS)
    frames = [e for e in stack if hasattr(e, "apply_rule")]  # vmap's frames
    has_rule = cls.vmap is not Function.vmap
    batched = frames or any(getattr(e, "forward_mode", None) == "batched" for e in stack)
    if batched and not has_rule and not getattr(cls, "generate_vmap_rule", False):
        raise RuntimeError(
            f"You tried to vmap over {cls.__name__}, but it does not have vmap support. Please "
            "override and implement the vmap staticmethod or set generate_vmap_rule=True. "
            + _FUNC_DOCS)
    if cls.jvp is Function.jvp and any(getattr(e, "forward_mode", False) for e in stack):
        Function.jvp(None)  # PyTorch's error: forward mode needs the Function's jvp
    if not frames:
        return NotImplemented
    if has_rule and not getattr(cls, "generate_vmap_rule", False) and stack[-1] is frames[-1]:
        return frames[-1].apply_rule(cls, args)
    # generate_vmap_rule: the forward run per example is the generated rule.
    return NotImplemented


def _bound(cls, args: tuple, kwargs: dict, separate: bool) -> tuple:
    """`args` and `kwargs` of `cls.apply` bound to `forward`'s parameters, defaults applied,
    as PyTorch binds them: a tensor given by keyword is an input like any other (its
    gradient is recorded, and `needs_input_grad` counts it). (args, remaining kwargs)."""
    signature = inspect.signature(cls.forward)
    try:
        bound = signature.bind(*args, **kwargs) if separate else \
            signature.bind(None, *args, **kwargs)
    except TypeError:
        return args, kwargs  # forward's own error, raised by the call
    bound.apply_defaults()
    return (bound.args if separate else bound.args[1:]), bound.kwargs


def _apply(cls, args, kwargs, ctx_box: list | None = None):
    from .._dispatch import _edge
    from .anomaly_mode import state as _anomaly

    if kwargs:
        args, kwargs = _bound(cls, args, kwargs, cls.setup_context is not Function.setup_context)

    transformed = _under_transforms(cls, args)
    if transformed is not NotImplemented:
        return transformed
    Tensor = _tensor_cls()
    node = cls._backward_cls()
    if ctx_box is not None:  # forward AD's `jvp` gets the same ctx
        ctx_box.append(node)
    tensor_pos = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
    node._tensor_pos = tensor_pos
    node._n_args = len(args)
    node.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
    # (grad mode, not recording: a custom Function records inside `inference_mode()` under
    # `enable_grad()`, as PyTorch's)
    record = _thread_local.grad_mode and any(node.needs_input_grad)
    separate = cls.setup_context is not Function.setup_context
    with no_grad():
        if separate:
            out = cls.forward(*args, **kwargs)
        else:
            out = cls.forward(node, *args, **kwargs)
    if separate:
        cls.setup_context(node, args, out)
    single = not isinstance(out, tuple)
    outs = (out,) if single else out
    if not record:
        return out
    node.next_functions = tuple(_edge(args[i]) for i in tensor_pos)
    node._in_meta = tuple((tuple(args[i].shape), args[i]._dtype) for i in tensor_pos)
    if _anomaly.enabled:
        from .anomaly_mode import record_traceback

        record_traceback(node)
    inputs = {id(args[i]) for i in tensor_pos}
    dirty = {id(t) for t in node._dirty}
    if dirty - {id(o) for o in outs}:
        raise RuntimeError(
            "Some elements marked as dirty during the forward method were not returned as "
            "output. The inputs that are modified inplace must all be outputs of the Function.")
    non_diff = {id(t) for t in node._non_diff}
    results = []
    meta = []
    dirty_views = []
    for i, o in enumerate(outs):
        if not isinstance(o, Tensor):
            results.append(o)
            meta.append(None)
            continue
        if id(o) in dirty:
            if o._rg and o._grad_fn is None and o._base is None:
                raise RuntimeError(
                    "a leaf Variable that requires grad has been used in an in-place operation.")
            base = o._base
            if base is not None and base._rg and base._grad_fn is None:
                raise RuntimeError(
                    "a view of a leaf Variable that requires grad is being used in an in-place "
                    "operation.")
            o._vc[0] += 1
            if o._base is not None:
                dirty_views.append(o)
        elif id(o) in inputs:
            o = _alias(o)
        meta.append((tuple(o.shape), o._dtype))
        o._output_nr = i
        if id(outs[i]) not in non_diff and o._dtype.category >= _dtype.FLOAT:
            o._rg = True
            o._grad_fn = node
        results.append(o)
    node._out_meta = tuple(meta)
    node._non_diff_nrs = tuple(i for i, o in enumerate(outs) if id(o) in non_diff)
    # Outputs that are views of inputs (an input returned as-is, or a view made in forward)
    # may not be modified in place later (`_dispatch.check_inplace_allowed`), as in PyTorch.
    views = [i for i, o in enumerate(results) if isinstance(o, Tensor) and o._base is not None
             and o._grad_fn is node and id(outs[i]) not in dirty]
    if views:
        n_diff = sum(1 for o in results if isinstance(o, Tensor) and o._grad_fn is node)
        node._custom_views = (frozenset(views), n_diff > 1)
    if node._to_save is not None:
        _graph.save_into(node, node._to_save, tuple(results))
        if node._versions is None:  # nothing but None saved: still freed after backward,
            node._versions = (None,) * len(node._saved)  # so `saved_tensors` then raises
    else:
        node._saved = ()
    node._to_save = None
    if dirty_views:
        if len(outs) != 1:
            raise NotImplementedError(
                "fusegrad: mark_dirty on a view is supported for single-output Functions only")
        _rebase_dirty_view(node, args, dirty_views[0])
    return results[0] if single else tuple(results)


def _rebase_dirty_view(node, args, view) -> None:
    """A Function modified a view in place: as for in-place ops, the base's history becomes
    CopySlices around the Function's node and the view becomes as_strided of the new base."""
    from .. import _dispatch
    from ..ops.views import as_strided

    base = view._base
    pos = next(k for k, i in enumerate(node._tensor_pos) if args[i] is view)
    cs = _graph.CopySlices()
    cs._fn = node
    cs._pos = pos
    cs._base_geom = _dispatch._geometry(base)
    cs._view_geom = _dispatch._geometry(view)
    edges = list(node.next_functions)
    del edges[pos]
    cs.next_functions = (_dispatch._edge(base),) + tuple(edges)
    cs._out_meta = ((tuple(base.shape), base._dtype),)
    base._rg = True
    base._grad_fn = cs
    base._output_nr = 0
    size, stride, offset = cs._view_geom
    view._grad_fn = None
    _dispatch._record(as_strided, (base, size, stride, offset), view)
    view._view_ver = view._vc[0]


def _alias(t):
    """A view of `t` covering all of it (what an input returned unchanged becomes)."""
    a = t._shallow_copy()
    a._base = t if t._base is None else t._base
    a._view_ver = t._vc[0]
    return a


class DelayedError(_graph.Node):
    """Node whose backward raises: marks results that must not be differentiated again."""

    __slots__ = ("msg",)

    def __init__(self, msg: str):
        super().__init__()
        self.msg = msg

    def apply(self, grads: list) -> list:
        raise RuntimeError(self.msg)

    def release(self) -> None:
        pass

    def name(self) -> str:
        """PyTorch's C++ name of the node."""
        return "torch::autograd::Error"


DelayedError.__name__ = DelayedError.__qualname__ = "Error"


def once_differentiable(fn):
    """Decorate a Function's backward that is not itself differentiable.

    Backward runs without recording; if a double backward is attempted through its results,
    it raises instead of silently giving wrong gradients.
    """

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not _thread_local.grad_mode:
            return outputs
        Tensor = _tensor_cls()
        needing = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
        if not needing:
            return outputs
        from .._dispatch import _edge

        err = DelayedError(
            "trying to differentiate twice a function that was marked with @once_differentiable")
        err.next_functions = tuple(_edge(a) for a in needing)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        wrapped = []
        for i, o in enumerate(outs):
            if isinstance(o, Tensor) and o._dtype.category >= _dtype.FLOAT:
                o = o._shallow_copy()
                o._rg = True
                o._grad_fn = err
                o._output_nr = i
            wrapped.append(o)
        err._out_meta = tuple((tuple(o.shape), o._dtype) if isinstance(o, Tensor) else None
                              for o in outs)
        return wrapped[0] if single else tuple(wrapped)

    return wrapper


class InplaceFunction(Function):
    """A Function that may work in place (`inplace` flag), kept for API compatibility."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace


class NestedIOFunction(Function):
    """Not supported (legacy API)."""
