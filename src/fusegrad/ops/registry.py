"""The op registry: one entry per overload, holding everything any layer knows of the op.

An entry names the overload as ATen does (`sum.dim_IntList`), and holds its `kernel` (NumPy,
for eager CPU execution), its `meta` (output shape, dtype and, for views, strides: used by fake
tensors, capture and shape errors), its `derivative` (written in fusegrad ops, so it can be
differentiated again and traced), what it `save`s for backward, the PyTorch name of its
backward node, and the OpInfo-style fields the oracle tests read (`samples`, `domain`,
`tolerance`, `gradcheck`), its ONNX mapping (`onnx`: an operator name or a function, see
`ops/_onnx.py`), ATen's names of what it saves (`saved_names`) and its `lowering` for the
code generator: a function `lowering(v, *args)` that builds the op's loop IR with the
expression builder `v` (`v.add(a, b)`, `v.unary("exp", a)`, `v.reduce("sum", a, dims,
keepdim)`, `v.permute(a, dims)`, ...; see `compiler/codegen/lower.py`), or None / "extern"
for ops whose NumPy kernel is called between generated kernels. `autocast` says how CPU
autocast casts its arguments (see `_autocast`). Nothing else in fusegrad
keeps its own list of ops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..autograd.graph import node_class
from . import deferred


# Spec and Sample are plain classes with a dataclass's constructor, equality and repr:
# `dataclasses` and the code it compiles per class cost `import fusegrad` milliseconds.
class _Record:
    """Equality and repr over the fields `__match_args__` names, as a dataclass's."""

    __match_args__: tuple = ()
    __hash__ = None  # mutable, as a dataclass without `frozen`

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self.__match_args__)

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__match_args__)
        return f"{type(self).__qualname__}({fields})"


class Spec(_Record):
    """What a meta function says of one output: shape, dtype and (for views) strides."""

    __match_args__ = ("shape", "dtype", "strides", "offset")

    def __init__(self, shape: tuple, dtype: Any, strides: tuple | None = None,
                 offset: int = 0) -> None:
        self.shape = shape
        self.dtype = dtype
        self.strides = strides
        self.offset = offset  # for views: storage offset relative to the input's


class Sample(_Record):
    """One input for the oracle tests: positional args (NumPy arrays stand for tensors)."""

    __match_args__ = ("args", "kwargs", "name")

    def __init__(self, args: tuple, kwargs: dict | None = None, name: str = "") -> None:
        self.args = args
        self.kwargs = {} if kwargs is None else kwargs
        self.name = name


# Ops cheap enough to recompute in the backward rather than save (AOT's min-cut partitioner
# reads `OpDef.recomputable`), by ATen base name: elementwise arithmetic,
# comparisons, activations and casts. Everything else (matmul, convolution, reductions,
# normalisation layers, random ops, gathers and scatters) is computed once, in the forward.
_RECOMPUTABLE = frozenset("""
abs neg exp exp2 expm1 log log1p log2 log10 sqrt rsqrt reciprocal square sign sgn
sin cos tan sinh cosh tanh asin acos atan asinh acosh atanh erf erfc erfinv
sigmoid relu relu6 gelu silu mish elu celu selu softplus hardtanh hardsigmoid hardswish
leaky_relu threshold log_sigmoid logit floor ceil round trunc frac
add sub rsub mul div true_divide pow maximum minimum fmax fmin clamp clamp_min clamp_max
where masked_fill lerp addcmul addcdiv atan2 hypot remainder fmod copysign
eq ne lt le gt ge logical_and logical_or logical_xor logical_not isnan isinf
bitwise_and bitwise_or bitwise_xor bitwise_not
gelu_backward sigmoid_backward tanh_backward threshold_backward silu_backward
_to_copy clone alias detach lift_fresh_copy scalar_tensor
""".split())


_QUANTIZED_KEYS = frozenset(("kernel", "moves", "per_channel", "indexing", "refuses_number",
                             "error"))


class OpDef:
    """A registry entry. Call `fusegrad._dispatch.call(op, *args)` to run it."""

    __slots__ = ("name", "kernel", "ufunc", "meta", "derivative", "on_arrays", "save", "node",
                 "node_cls", "differentiable", "nondiff_args", "inplace", "view", "list_arg",
                 "samples",
                 "domain", "tolerance", "gradcheck", "lowering", "onnx", "decomposition",
                 "public", "zero_grad", "saves_self_before_write", "tensor_args",
                 "metadata_only", "nondiff_outputs", "optional_tensor_args", "random",
                 "saved_names", "plain_args", "data_dependent", "permutes", "recomputable",
                 "autocast", "undefined_grads", "result_order", "save_reads_output",
                 "overlap_ok", "forward_ad", "flops", "out_of_place", "tensors_only",
                 "quantized", "write_into", "__weakref__")

    def __init__(self, name: str, *, kernel: Callable, meta: Callable,
                 derivative: Callable | None = None, save: Callable | None = None,
                 node: str | None = None, differentiable: bool = True,
                 nondiff_args: tuple = (), inplace: bool = False, view: bool = False,
                 list_arg: bool = False, samples: Callable | None = None,
                 domain: tuple | None = None, tolerance: dict | None = None,
                 gradcheck: bool = True, lowering: Any = None, onnx: Any = None,
                 decomposition: Callable | None = None, zero_grad: bool = False,
                 public: str | None = None, tensor_args: tuple = (),
                 metadata_only: bool = False, nondiff_outputs: tuple = (),
                 optional_tensor_args: tuple = (), random: bool = False,
                 saved_names: tuple = (), data_dependent: bool = False,
                 permutes: bool = False, autocast: str | None = None,
                 undefined_grads: bool = False, result_order: str | None = None,
                 overlap_ok: str | None = None, forward_ad: str | None = None,
                 flops: Callable | None = None, tensors_only: tuple = (),
                 quantized: dict | None = None, write_into: Callable | None = None):
        self.name = name
        # How a quantized tensor (`fusegrad._quantized`) takes the op, where it does not
        # refuse it (most ops: PyTorch's "Could not run ... QuantizedCPU backend"); keys:
        # "kernel" (the name of `_quantized`'s function running it), "moves" (it only moves
        # elements, as a view does: its own kernel runs on the integers, the parameters
        # kept), "per_channel" ("moves", or the name of the function running it for a
        # per-channel tensor, which moves the parameters along), "indexing" (it takes
        # integer or bool index tensors beside the quantized one), "refuses_number"
        # (PyTorch makes the quantized result first and refuses a number operand there),
        # "error" (the overload PyTorch's refusal names, where not the op's `.out`).
        if quantized is not None and not set(quantized) <= _QUANTIZED_KEYS:
            raise ValueError(f"op {name!r}: unknown quantized keys "
                             f"{sorted(set(quantized) - _QUANTIZED_KEYS)}")
        self.quantized = quantized
        # An in-place op's writer, `write_into(*arrays) -> bool`: the kernel's result
        # written straight into `self`'s array where it can (True), nothing written (False)
        # where dispatch must compute the value and copy it in (`_dispatch._inplace`).
        self.write_into = write_into
        # The names of the operands PyTorch's signature takes as Tensor only, with no
        # overload for a number (`atan2(Tensor input, Tensor other)`: ("input", "other")),
        # in order; () for most ops. The public surface refuses anything else there with
        # PyTorch's argument parser's message (`atan2(): argument 'other' (position 2) must
        # be Tensor, not int`), for the function, the method and the in-place method alike.
        self.tensors_only = tuple(tensors_only)
        # The floating point operations of a call, `flops(args, result)`, by PyTorch's
        # formula (`utils.flop_counter`); None for ops PyTorch counts as free.
        self.flops = flops
        # How forward-mode AD takes the op, where not by the transpose of its derivative
        # (`autograd.forward_ad`): "lookup" (linear in its first argument: the same op of
        # its tangent, rows PyTorch's backward leaves out included), "statistics" (PyTorch
        # refuses tangents on the running statistics in eval mode), "unsupported" (PyTorch
        # has no forward formula, though the backward gives some gradients), "product" and
        # "added_product" (linear in each of two factors, the first two arguments or the two
        # after an added first one: PyTorch's formula multiplies each factor's tangent by the
        # other's primal, zeros for a factor without tangent, so the result's tangent
        # depends on a factor's primal that requires grad).
        if forward_ad not in (None, "lookup", "statistics", "unsupported", "product",
                              "added_product"):
            raise ValueError(f"op {name!r}: unknown forward_ad rule {forward_ad!r}")
        self.forward_ad = forward_ad
        # An in-place op PyTorch lets write a tensor whose elements share memory (an expanded
        # one): "" for the fills (zero_, fill_), the text of the deprecation warning it gives
        # for the others it allows (masked_fill_, index_put_: `expanded_warning`); None (most
        # ops) refuse it.
        self.overlap_ok = overlap_ok
        # The derivative takes None for an output that received no gradient (PyTorch's
        # undefined gradient) instead of zeros: the SVD's values-only form, finite at
        # repeated singular values where the full formula divides 0 by 0.
        self.undefined_grads = undefined_grads
        # How CPU autocast casts the floating arguments: "lower" (to the autocast dtype),
        # "fp32", "promote" (to the widest), None (not at all); see `_autocast`.
        if autocast is not None and autocast not in ("lower", "fp32", "promote"):
            raise ValueError(f"op {name!r}: unknown autocast policy {autocast!r}")
        self.autocast = autocast
        # ATen's names for the entries of `save`'s tuple ("" for an entry PyTorch does not
        # save): the node shows them as `_saved_<name>` attributes, as PyTorch's nodes do.
        self.saved_names = tuple(saved_names)
        self.kernel = kernel
        # The NumPy ufunc `kernel` applies as it is to float32/float64 arrays of one dtype,
        # and to such an array and a Python number (`binary_kernel`, `unary_kernel`): the
        # recorders call it directly for those operands, a Python frame less per op.
        self.ufunc = getattr(kernel, "ufunc", None)
        self.meta = meta
        self.derivative = derivative
        # The derivative on NumPy arrays (`derivative.on_arrays`), which a backward pass that
        # records nothing runs instead where it can: `(g_array, *saved)` gives one new array,
        # a view of `g_array`, or None per entry, or None to leave the operands to
        # `derivative` (autograd.engine). An entry is never `g_array` itself: the engine
        # adds later gradients into a new array. A saved output of a plain tensor arrives as
        # its array (`unpack_saved(..., arrays=True)`): read saved tensors by `saved_array`.
        self.on_arrays = getattr(derivative, "on_arrays", None)
        self.save = save
        self.node = node
        self.differentiable = differentiable and derivative is not None
        # The Node subclass is made when the op is first recorded (`node_class_of`): making
        # ~525 classes was a fifth of `import fusegrad`.
        self.node_cls = None
        self.nondiff_args = nondiff_args
        self.inplace = inplace
        self.view = view
        self.list_arg = list_arg
        self.samples = samples
        self.domain = domain
        self.tolerance = tolerance or {}
        self.gradcheck = gradcheck and self.differentiable and not zero_grad
        self.lowering = lowering
        self.onnx = onnx
        self.decomposition = decomposition
        self.zero_grad = zero_grad  # derivative is zero almost everywhere (floor, round, ...)
        self.public = public or name.split(".")[0]
        # Positions ATen types as Tensor: a Python number there is a (wrapped) input with an
        # edge of its own, `(None, 0)`, as in PyTorch's next_functions.
        self.tensor_args = tensor_args
        # In place on the metadata only (squeeze_, transpose_): the kernel returns a view of
        # `self`'s data that becomes its data; nothing is copied.
        self.metadata_only = metadata_only
        # Layers' rules (PyTorch's): outputs after the first may be non-differentiable (saved
        # statistics get no grad_fn); an absent optional Tensor argument (a bias) still gets a
        # `(None, 0)` edge.
        self.nondiff_outputs = nondiff_outputs
        self.optional_tensor_args = optional_tensor_args
        # Samples from a distribution: the oracle compares distributions, not values.
        self.random = random
        # The output's shape depends on the input's values (nonzero): capture cannot trace it
        # with fake tensors and breaks the graph (PyTorch's `data_dependent_output` tag).
        self.data_dependent = data_dependent
        # The output is the input with its dims permuted (t, transpose, permute): ONNX export
        # keeps a folded weight's transpose visible to the MatMul/Gemm that reads it.
        self.permutes = permutes
        # Cheap enough for AOT's min-cut partitioner to recompute in the backward (the table
        # below; in-place and random ops never are).
        self.recomputable = name.partition(".")[0] in _RECOMPUTABLE
        # The memory order eager's kernel gives a new result (not a view's): "operands" (the
        # order of its tensor operands, NumPy's order "K", as ufuncs and the kernels written
        # over them do), "iterator" (PyTorch's TensorIterator's order over its operands,
        # which follows the first where their orders conflict, as kernels computing through
        # temporaries or `np.where` restore it: `_util.iterator_laid`, `iterator_ordered`) or
        # "contiguous". By default "operands" for ufuncs and the elementwise recomputable
        # ops, "contiguous" for the rest; compiled code lays its outputs out the same way
        # (`compiler/codegen/layout.py`), and a test checks the elementwise ops' declared
        # order against their kernels' results (tests/test_result_order.py).
        if result_order is None:
            result_order = "operands" if self.ufunc is not None or self.recomputable \
                else "contiguous"
        elif result_order not in ("operands", "iterator", "contiguous"):
            raise ValueError(f"op {name!r}: unknown result order {result_order!r}")
        self.result_order = result_order
        # Whether `save` reads its first argument, the op's output: an in-place op's saved
        # entry that is its result is then the output, else the written input (autograd's
        # version check). None until autograd derives it from `save`'s code on first need.
        self.save_reads_output = None
        # An in-place op whose derivative reads its input must save it before the write.
        self.saves_self_before_write = False
        # An in-place op's out-of-place entry (`inplace_variant`: `pow_.Scalar` computes as
        # `pow.Tensor_Scalar`, which its name does not say), None where not recorded.
        self.out_of_place = None
        # No list, non-differentiable or optional tensor arguments: dispatch records the
        # node with its short loop (most ops).
        self.plain_args = not (list_arg or nondiff_args or optional_tensor_args)

    def __repr__(self) -> str:
        return f"<op {self.name}>"

    def node_class_of(self) -> type | None:
        """The op's Node subclass (PyTorch's backward name), made on first use; None for an
        op that records no node."""
        cls = self.node_cls
        if cls is None and self.differentiable:
            cls = self.node_cls = node_class(self.node, self)
        return cls

    def public_function(self):
        """The public fusegrad function that runs this op (for `__fusegrad_function__`)."""
        import fusegrad

        if self.inplace:  # in-place forms exist as Tensor methods (`add_`), not functions
            return getattr(fusegrad.Tensor, self.public)
        return getattr(fusegrad, self.public, None) or getattr(fusegrad.Tensor, self.public)


class OpRegistry(dict):
    """Op name -> OpDef. Some op modules run on first use (`ops/deferred.py`): asked for its
    whole content, the registry runs them all first, so every reader sees every op; asked for
    a name it does not hold, it runs them in turn until one has registered it. A name it
    holds is found at a plain dict's speed."""

    def _load(self, name) -> bool:
        """Run deferred op modules until one has registered `name`; whether one has."""
        return deferred.load_until(lambda: dict.__contains__(self, name))

    def __missing__(self, name: str) -> OpDef:
        if self._load(name):
            return dict.__getitem__(self, name)
        raise KeyError(name)

    def get(self, name: str, default=None):
        """The entry named `name`, or `default`."""
        op = dict.get(self, name)
        if op is None and self._load(name):
            op = dict.get(self, name)
        return default if op is None else op

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or self._load(name)

    def __iter__(self):
        deferred.load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        deferred.load_all()
        return dict.__len__(self)

    def keys(self):
        """Every op name."""
        deferred.load_all()
        return dict.keys(self)

    def values(self):
        """Every OpDef."""
        deferred.load_all()
        return dict.values(self)

    def items(self):
        """Every (name, OpDef) pair."""
        deferred.load_all()
        return dict.items(self)


REGISTRY: OpRegistry = OpRegistry()


def expanded_warning(name: str, example: str) -> str:
    """PyTorch's warning for in-place op `name` writing an expanded tensor (`overlap_ok`)."""
    return (f"Use of {name} on expanded tensors is deprecated. Please clone() the tensor "
            f"before performing this operation. This also applies to advanced indexing e.g. "
            f"{example}")


def register(name: str, **fields) -> OpDef:
    """Declare an op overload; a second declaration of the same name is an error."""
    if dict.__contains__(REGISTRY, name):
        raise ValueError(f"op {name!r} is already registered")
    op = OpDef(name, **fields)
    dict.__setitem__(REGISTRY, name, op)
    return op


def inplace_variant(op: OpDef, name: str, *, saves_self: bool = False, **overrides) -> OpDef:
    """Register `name` (e.g. `add_.Tensor`) as the in-place form of `op`.

    The kernel computes the new value out of place; dispatch writes it into `self`, bumps the
    version and makes the new node `self`'s history. `saves_self` says the derivative reads
    the original `self`, which dispatch then snapshots before the write.
    """
    fields = dict(kernel=op.kernel, meta=op.meta, derivative=op.derivative, save=op.save,
                  node=op.node, differentiable=op.differentiable, nondiff_args=op.nondiff_args,
                  samples=_inplace_samples(op.samples), domain=op.domain, tolerance=op.tolerance,
                  gradcheck=op.gradcheck, zero_grad=op.zero_grad, tensor_args=op.tensor_args,
                  onnx=op.onnx, result_order=op.result_order)
    if name.partition(".")[0] == op.public + "_":  # (its own in-place form: `atan2_`, not
        fields["tensors_only"] = op.tensors_only  # `clamp_min_` over maximum's kernel)
    if "save" not in overrides:  # the same saved values, so the same names
        fields["saved_names"] = op.saved_names
    fields.update(overrides)
    new = register(name, inplace=True, **fields)
    new.saves_self_before_write = saves_self
    new.out_of_place = op
    return new


def copy_variant(op: OpDef, name: str, node: str | None = None) -> OpDef:
    """Register `name` (e.g. `permute_copy`) as the copying form of view op `op`: the same
    result in fresh memory, differentiated as the view (node `<view node>_copy`, as ATen's
    generated copy variants name theirs, unless `node` is given)."""
    import numpy as np

    def kernel(*args, **kwargs):
        out = op.kernel(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(np.array(o, copy=True, order="C") for o in out)
        return np.array(out, copy=True, order="C")

    def meta(*args, **kwargs):  # the view's shapes and dtypes, in new (contiguous) memory
        out = op.meta(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(Spec(o.shape, o.dtype) for o in out)
        return Spec(out.shape, out.dtype)

    return register(name, kernel=kernel, meta=meta, derivative=op.derivative, save=op.save,
                    node=node or (f"{op.node}_copy" if op.node else None),
                    differentiable=op.differentiable, nondiff_args=op.nondiff_args,
                    samples=op.samples, domain=op.domain, tolerance=op.tolerance,
                    gradcheck=op.gradcheck, tensor_args=op.tensor_args,
                    saved_names=op.saved_names, list_arg=op.list_arg,
                    result_order="contiguous")


def _inplace_samples(samples):
    """The samples of an out-of-place op whose first argument can hold the result."""
    import numpy as np

    def inplace(rng, dtype):
        out = []
        for s in samples(rng, dtype):
            shapes = [np.shape(a) for a in s.args[:2]]
            if np.broadcast_shapes(*shapes) == shapes[0]:
                out.append(s)
        return out

    return None if samples is None else inplace
