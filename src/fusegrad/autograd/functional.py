"""Higher-level derivatives of Python functions: vjp, jvp, jacobian, hessian, hvp, vhp.

Each is built from `autograd.grad`: a reverse-mode Jacobian is one reverse pass per output
element; a forward product (jvp, and the "forward-mode" Jacobian, one column per input
element) is the transpose of a vjp (double backward with a dummy cotangent), which gives
forward mode's values, NaN and inf included; a Hessian is the Jacobian of a gradient
computed with `create_graph=True`. `strict=True` raises PyTorch's errors where an output or
a derivative does not depend on the inputs.
"""

from __future__ import annotations

from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]

_STRATEGIES = ("forward-mode", "reverse-mode")


def _tensor_cls():
    from .._tensor import Tensor

    return Tensor


def _as_tuple(x, arg_name: str, fn_name):
    """(is_tuple, items): a Tensor or a tuple of Tensors (a list is refused, as PyTorch
    refuses it)."""
    Tensor = _tensor_cls()
    if not isinstance(x, tuple):
        if isinstance(x, Tensor):
            return False, (x,)
        raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                        f"tuple of Tensors but the given {arg_name} has type {type(x)}.")
    for i, el in enumerate(x):
        if not isinstance(el, Tensor):
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but the value at index {i} has type {type(el)}.")
    return True, x


def _outputs_as_tuple(out, fn_name: str):
    return _as_tuple(out, "outputs of the user-provided function", fn_name)


def _postprocess(res, tuples):
    """`res` (nested tuples) unwrapped where the inputs or outputs were single Tensors;
    `tuples` is one flag, or (outputs flag, inputs flag) for a Jacobian."""
    if isinstance(tuples, bool):
        return res if tuples else res[0]
    out_tuple, in_tuple = tuples
    if out_tuple and in_tuple:
        return res
    if out_tuple:
        return tuple(el[0] for el in res)
    if in_tuple:
        return res[0]
    return res[0][0]


def _prepare(inputs, create_graph: bool, need_graph: bool):
    """Inputs the function is differentiated at: fresh leaves (or aliases that keep the
    caller's graph when `create_graph`)."""
    res = []
    for x in inputs:
        if create_graph and x.requires_grad:
            res.append(x.view_as(x))
        else:
            res.append(x.detach().requires_grad_(need_graph))
    return tuple(res)


def _finish(items, create_graph: bool, is_tuple: bool):
    Tensor = _tensor_cls()
    out = []
    for x in items:
        if isinstance(x, tuple):
            out.append(_finish(x, create_graph, True))
        elif isinstance(x, Tensor) and not create_graph:
            out.append(x.detach())
        else:
            out.append(x)
    return tuple(out) if is_tuple else out[0]


def _raw_grads(outputs, inputs, grad_outputs, create_graph: bool, retain_graph: bool = True):
    """Gradients of `outputs` (entries may be None) w.r.t. `inputs`; None for an input the
    differentiable outputs do not reach, all None when no output is differentiable."""
    from ._grad import grad

    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs)
             if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return tuple(grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs],
                      create_graph=create_graph, retain_graph=retain_graph, allow_unused=True))


def _grads(outputs, inputs, grad_outputs, create_graph: bool, retain_graph: bool = True):
    """Gradients of `outputs` w.r.t. `inputs`, zeros where an input is unused."""
    got = _raw_grads(outputs, inputs, grad_outputs, create_graph, retain_graph)
    return tuple(g if g is not None else x.new_zeros(x.shape) for g, x in zip(got, inputs))


def _check_requires_grad(items, kind: str, strict: bool) -> None:
    """Under `strict`, each of `items` (outputs, or derivatives of some `kind`) must depend
    on the inputs."""
    if not strict:
        return
    for i, x in enumerate(items):
        if x is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if x.requires_grad:
            continue
        if kind == "hessian":
            raise RuntimeError(
                f"The hessian of the user-provided function with respect to input {i} is "
                "independent of the input. This is not allowed in strict mode. You should "
                "ensure that your function is thrice differentiable and that the hessian "
                "depends on the inputs.")
        if kind == "jacobian":
            raise RuntimeError(
                "While computing the hessian, found that the jacobian of the user-provided "
                f"function with respect to input {i} is independent of the input. This is not "
                "allowed in strict mode. You should ensure that your function is twice "
                "differentiable and that the jacobian depends on the inputs (this would be "
                "violated by a linear function for example).")
        if kind == "grad_inputs":
            raise RuntimeError(
                f"The gradient with respect to input {i} is independent of the inputs of the "
                "user-provided function. This is not allowed in strict mode.")
        raise RuntimeError(
            f"Output {i} of the user-provided function does not require gradients. The outputs "
            "must be computed in a differentiable manner from the input when running in "
            "strict mode.")


# What `_fill_in_zeros` says, by pass, for a missing gradient and (with create_graph) for a
# gradient without history.
_MISSING = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward "
                         "mode AD.",
}
_NO_GRAPH = "The {what} of the user-provided function is independent of input {i}. This is " \
            "not allowed in strict mode when create_graph=True."


def _fill_in_zeros(grads, refs, strict: bool, create_graph: bool, stage: str) -> tuple:
    """`grads` with zeros (shaped as `refs`) for None; under `strict`, PyTorch's error
    instead, and with `create_graph` also for a gradient that has no history."""
    res = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_MISSING[stage].format(i=i))
            g = ref.new_zeros(ref.shape)
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(_NO_GRAPH.format(what=what, i=i))
        res.append(g)
    return tuple(res)


def _validate_v(v, refs, refs_tuple: bool) -> None:
    if len(v) != len(refs):
        if refs_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but "
                               f"got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, refs)):
        if tuple(a.shape) != tuple(b.shape):
            where = f"Entry {i} in " if refs_tuple else ""
            raise RuntimeError(
                f"{where}v has invalid size: should be {_size(b.shape)} but got "
                f"{_size(a.shape)}.")


def _prepare_v(v, refs, refs_tuple: bool, fn_name: str, what: str, create_graph: bool):
    """`v` checked against `refs` (as a tuple); None only for one single-element ref."""
    if v is None:
        if len(refs) != 1 or refs[0].numel() != 1:
            raise RuntimeError(
                f"The vector v can only be None if the {what} a single Tensor with a single "
                "element.")
        return (refs[0].new_ones(refs[0].shape),)
    _, v = _as_tuple(v, "v", fn_name)
    v = _prepare(v, create_graph, False)
    _validate_v(v, refs, refs_tuple)
    return v


def _size(shape) -> str:
    return f"torch.Size({list(shape)})"


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`."""
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph, True)
        out_tuple, outputs = _outputs_as_tuple(func(*inputs), "vjp")
        _check_requires_grad(outputs, "outputs", strict)
        v = _prepare_v(v, outputs, out_tuple, "vjp", "user-provided function returns",
                       create_graph)
        got = _raw_grads(outputs, inputs, v, create_graph)
        res = _fill_in_zeros(got, inputs, strict, create_graph, "back")
    return _finish(outputs, create_graph, out_tuple), _finish(res, create_graph, is_tuple)


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v): the Jacobian-vector product, as the transpose of a vjp."""
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph, True)
        v = _prepare_v(v, inputs, is_tuple, "jvp", "input to the user-provided function is",
                       create_graph)
        out_tuple, outputs = _outputs_as_tuple(func(*inputs), "jvp")
        _check_requires_grad(outputs, "outputs", strict)
        # J^T u is linear in the dummy cotangents u, so its derivative in u along v is J v.
        dummies = tuple(o.new_zeros(o.shape).requires_grad_(True) for o in outputs)
        grad_inputs = _raw_grads(outputs, inputs, dummies, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
        got = _raw_grads(grad_inputs, dummies, v, create_graph)
        res = _fill_in_zeros(got, outputs, strict, create_graph, "back_trick")
    return _finish(outputs, create_graph, out_tuple), _finish(res, create_graph, out_tuple)


def _jac_blocks(outputs, inputs, create_graph: bool, strict: bool = False):
    """blocks[i][j]: d outputs[i] / d inputs[j], shaped outputs[i].shape + inputs[j].shape,
    one reverse pass per output element."""
    from .. import _functions as F
    from ._grad import grad

    blocks = []
    for i, out in enumerate(outputs):
        flat = out.reshape(-1)
        rows = [[] for _ in inputs]
        for k in range(flat.numel()):
            if out.requires_grad:
                got = grad(flat[k], inputs, retain_graph=True, create_graph=create_graph,
                           allow_unused=True)
            else:
                got = (None,) * len(inputs)
            for j, (g, x) in enumerate(zip(got, inputs)):
                if g is None:
                    if strict:
                        raise RuntimeError(
                            f"Output {i} of the user-provided function is independent of "
                            f"input {j}. This is not allowed in strict mode.")
                    g = x.new_zeros(x.shape)
                elif strict and create_graph and not g.requires_grad:
                    # PyTorch names the output's index here.
                    raise RuntimeError(_NO_GRAPH.format(what="jacobian", i=i))
                rows[j].append(g)
        row = []
        for j, x in enumerate(inputs):
            shape = tuple(out.shape) + tuple(x.shape)
            if rows[j]:
                row.append(F.cat([r.reshape(-1) for r in rows[j]]).reshape(shape))
            else:
                row.append(x.new_zeros(shape))
        blocks.append(tuple(row))
    return blocks


def _basis(inputs) -> list:
    """One tangent tuple per element of all `inputs` together: a one-hot tensor for the
    input holding the element, zeros for the others (forward mode's standard basis)."""
    tangents = []
    for j, x in enumerate(inputs):
        for k in range(x.numel()):
            parts = []
            for m, y in enumerate(inputs):
                t = y.new_zeros(y.shape)
                if m == j:
                    t._data.reshape(-1)[k] = 1
                parts.append(t)
            tangents.append(tuple(parts))
    return tangents


def _forward_blocks(outputs, inputs, dummies, transposed) -> list:
    """blocks[i][j] (a list per output) from Jacobian-vector products along the standard
    basis: `transposed` is J^T u for the dummy cotangents `dummies` (None for an output
    without one), so each column is one
    more reverse pass. Laid out as forward mode lays it out (columns stacked, then moved
    last), so strides match PyTorch's."""
    from .. import _functions as F

    numels = [x.numel() for x in inputs]
    total = sum(numels)
    live = [u for u in dummies if u is not None]
    columns = []
    for t in _basis(inputs):
        got = iter(_raw_grads(transposed, live, t, create_graph=False))
        # An output that cannot carry a tangent (integer) has no dummy: no column entry.
        columns.append([next(got) if u is not None else None for u in dummies])
    blocks = []
    for i, out in enumerate(outputs):
        col = [c[i] for c in columns]
        if total == 0 or all(c is None for c in col):
            # An output that does not depend on the inputs: zeros broadcast over the columns.
            stacked = out.new_zeros(out.shape).unsqueeze(0).expand(total, *out.shape)
        else:
            stacked = F.stack([c if c is not None else out.new_zeros(out.shape)
                               for c in col])
        blocks.append(column_blocks(stacked, tuple(out.shape), inputs, numels))
    return blocks


def column_blocks(stacked, out_shape: tuple, inputs, numels) -> list:
    """The Jacobian blocks of one output, one per input, from its columns stacked along dim
    0 (one per input element, inputs in order, `numels` each): each block with the input's
    dims last, as PyTorch's forward mode lays them out (its strides), shaped
    `out_shape + input.shape`."""
    row = []
    start = 0
    for x, n in zip(inputs, numels):
        part = stacked[start:start + n]
        start += n
        part = part.permute(*range(1, part.dim()), 0)
        row.append(part.reshape(out_shape + tuple(x.shape)))
    return row


def _jacfwd(func, inputs, strict: bool, vectorize: bool):
    if strict:
        raise RuntimeError(
            'torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` '
            'are not supported together (yet). Please either set `strict=False` or '
            '`strategy="reverse-mode"`.')
    is_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    if not vectorize:
        # PyTorch's message, missing space included.
        raise NotImplementedError(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
            "only implemented for `vectorize=True`.")
    with enable_grad():
        xs = tuple(x.detach().requires_grad_(True) for x in inputs)
        out_tuple, outputs = _as_tuple(func(*xs), "outputs", None)
        dummies = tuple(o.new_zeros(o.shape).requires_grad_(True)
                        if o.is_floating_point() or o.is_complex() else None
                        for o in outputs)
        live = [(o, u) for o, u in zip(outputs, dummies) if u is not None]
        transposed = _raw_grads([o for o, _ in live], xs, [u for _, u in live],
                                create_graph=True)
        blocks = _forward_blocks(outputs, xs, dummies, transposed)
    blocks = [[b.detach() for b in row] for row in blocks]
    # PyTorch hands forward-mode blocks back in lists where the inputs were a tuple.
    if out_tuple:
        return blocks if is_tuple else tuple(row[0] for row in blocks)
    return blocks[0] if is_tuple else blocks[0][0]


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of `func` at `inputs` (nested like the outputs and inputs);
    `strategy="forward-mode"` (with `vectorize=True`) builds it column by column."""
    if strategy not in _STRATEGIES:
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                'torch.autograd.functional.jacobian: `create_graph=True` and `strategy='
                '"forward-mode"` are not supported together (yet). Please either set '
                '`create_graph=False` or `strategy="reverse-mode"`.')
        return _jacfwd(func, inputs, strict, vectorize)
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph, True)
        out_tuple, outputs = _outputs_as_tuple(func(*inputs), "jacobian")
        _check_requires_grad(outputs, "outputs", strict)
        if vectorize and strict:
            raise RuntimeError(
                "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are "
                "not supported together. Please either set `strict=False` or "
                "`vectorize=False`.")
        blocks = _jac_blocks(outputs, inputs, create_graph, strict)
    if not create_graph:
        blocks = [tuple(b.detach() for b in row) for row in blocks]
    return _postprocess(tuple(blocks), (out_tuple, is_tuple))


def hessian(func, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar-valued `func` at `inputs`: the Jacobian (with
    `outer_jacobian_strategy`) of its gradient."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in _STRATEGIES:
        raise AssertionError('Expected strategy to be either "forward-mode" or '
                             '"reverse-mode".')

    def single_output(*xs):
        out = func(*xs)
        out_tuple, outs = _outputs_as_tuple(out, "hessian")
        _check_requires_grad(outs, "outputs", strict)
        if out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.squeeze()

    def gradient(*xs):
        jac = jacobian(single_output, xs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(gradient, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _postprocess(res, (is_tuple, is_tuple))


def _scalar_output(func, inputs, strict: bool, fn_name: str):
    """`func(*inputs)` as a 1-tuple, checked to be one single-element Tensor."""
    out_tuple, outputs = _outputs_as_tuple(func(*inputs), fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    if out_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                           "contain a single element")
    return outputs


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T H) for a scalar-valued `func`."""
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "vhp")
        inputs = _prepare(inputs, create_graph, True)
        v = _prepare_v(v, inputs, is_tuple, "vhp", "input to the user-provided function is",
                       create_graph)
        outputs = _scalar_output(func, inputs, strict, "vhp")
        jac = _raw_grads(outputs, inputs, (outputs[0].new_ones(outputs[0].shape),),
                         create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        got = _raw_grads(jac, inputs, v, create_graph)
        res = _fill_in_zeros(got, inputs, strict, create_graph, "double_back")
    return _finish(outputs, create_graph, False), _finish(res, create_graph, is_tuple)


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), H v) for a scalar-valued `func`, by the double backward trick."""
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
        inputs = _prepare(inputs, create_graph, True)
        v = _prepare_v(v, inputs, is_tuple, "hvp", "input to the user-provided function is",
                       create_graph)
        outputs = _scalar_output(func, inputs, strict, "hvp")
        jac = _raw_grads(outputs, inputs, (outputs[0].new_ones(outputs[0].shape),),
                         create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        dummies = tuple(x.new_zeros(x.shape).requires_grad_(True) for x in inputs)
        double_back = _raw_grads(jac, inputs, dummies, create_graph=True)
        got = _raw_grads(double_back, dummies, v, create_graph)
        res = _fill_in_zeros(got, inputs, strict, create_graph, "double_back_trick")
    return _finish(outputs, create_graph, False), _finish(res, create_graph, is_tuple)
