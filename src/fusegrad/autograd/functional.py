"""Higher-level derivatives of Python functions: vjp, jvp, jacobian, hessian, hvp, vhp.

Each is built from `autograd.grad`: a Jacobian is one reverse pass per output element, a
forward product (jvp) is the transpose of a vjp (double backward with a dummy cotangent),
and a Hessian is the Jacobian of a gradient computed with `create_graph=True`.
"""

from __future__ import annotations

from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _tensor_cls():
    from .._tensor import Tensor

    return Tensor


def _as_tuple(x, arg_name: str, fn_name: str):
    """(is_tuple, items): items must all be Tensors."""
    Tensor = _tensor_cls()
    if isinstance(x, Tensor):
        return False, (x,)
    if not isinstance(x, tuple):
        if isinstance(x, list):
            x = tuple(x)
        else:
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but the given {arg_name} has type {type(x)}.")
    for i, el in enumerate(x):
        if not isinstance(el, Tensor):
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but the value at index {i} has type {type(el)}.")
    return True, x


def _outputs_as_tuple(out, fn_name: str):
    Tensor = _tensor_cls()
    if isinstance(out, Tensor):
        return False, (out,)
    if isinstance(out, (tuple, list)):
        for i, el in enumerate(out):
            if not isinstance(el, Tensor):
                raise TypeError(
                    f"The outputs of the user-provided function given to {fn_name} must be "
                    f"either a Tensor or a tuple of Tensors but the value at index {i} has "
                    f"type {type(el)}.")
        return True, tuple(out)
    raise TypeError(
        f"The outputs of the user-provided function given to {fn_name} must be either a "
        "Tensor or a tuple of Tensors but the given outputs of the user-provided function has "
        f"type {type(out)}.")


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


def _grads(outputs, inputs, grad_outputs, create_graph: bool, retain_graph: bool = True):
    """Gradients of `outputs` w.r.t. `inputs`, zeros where an input is unused."""
    from ._grad import grad

    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return tuple(x.new_zeros(x.shape) for x in inputs)
    got = grad([o for o, _ in pairs], inputs, [g for _, g in pairs], create_graph=create_graph,
               retain_graph=retain_graph, allow_unused=True)
    return tuple(g if g is not None else x.new_zeros(x.shape) for g, x in zip(got, inputs))


def _check_v(v, outputs, fn_name: str, what: str):
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError(
                f"The vector v can only be None if the {what} a single Tensor with a single "
                "element.")
        return (outputs[0].new_ones(outputs[0].shape),)
    _, v = _as_tuple(v, "v", fn_name)
    if len(v) != len(outputs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(outputs)} but got "
                           f"{len(v)}.")
    for i, (a, b) in enumerate(zip(v, outputs)):
        if tuple(a.shape) != tuple(b.shape):
            where = f"Entry {i} in " if len(outputs) > 1 else ""
            raise RuntimeError(
                f"{where}v has invalid size: should be {_size(b.shape)} but got "
                f"{_size(a.shape)}.")
    return v


def _size(shape) -> str:
    return f"torch.Size({list(shape)})"


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`."""
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph, True)
        out_tuple, outputs = _outputs_as_tuple(func(*inputs), "vjp")
        v = _check_v(v, outputs, "vjp", "user-provided function returns")
        res = _grads(outputs, inputs, v, create_graph)
    return _finish(outputs, create_graph, out_tuple), _finish(res, create_graph, is_tuple)


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v): the Jacobian-vector product, as the transpose of a vjp."""
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph, True)
        v = _check_v(v, inputs, "jvp", "input to the user-provided function is")
        out_tuple, outputs = _outputs_as_tuple(func(*inputs), "jvp")
        dummies = tuple(o.new_zeros(o.shape).requires_grad_(True) for o in outputs)
        g = _grads(outputs, inputs, dummies, create_graph=True)
        res = _grads(g, dummies, v, create_graph)
    return _finish(outputs, create_graph, out_tuple), _finish(res, create_graph, out_tuple)


def _jac_blocks(outputs, inputs, create_graph: bool):
    """blocks[i][j]: d outputs[i] / d inputs[j], shaped outputs[i].shape + inputs[j].shape."""
    from .. import _functions as F

    blocks = []
    for out in outputs:
        flat = out.reshape(-1)
        rows = [[] for _ in inputs]
        for k in range(flat.numel()):
            if out.requires_grad:
                from ._grad import grad

                got = grad(flat[k], inputs, retain_graph=True, create_graph=create_graph,
                           allow_unused=True)
            else:
                got = (None,) * len(inputs)
            for j, (g, x) in enumerate(zip(got, inputs)):
                rows[j].append(g if g is not None else x.new_zeros(x.shape))
        row = []
        for j, x in enumerate(inputs):
            shape = tuple(out.shape) + tuple(x.shape)
            if rows[j]:
                row.append(F.cat([r.reshape(-1) for r in rows[j]]).reshape(shape))
            else:
                row.append(x.new_zeros(shape))
        blocks.append(tuple(row))
    return blocks


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of `func` at `inputs` (nested like the outputs and inputs)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         f'Hint: If your function has a single output you can use "{strategy}".')
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph, True)
        out_tuple, outputs = _outputs_as_tuple(func(*inputs), "jacobian")
        blocks = _jac_blocks(outputs, inputs, create_graph)
    if not create_graph:
        blocks = [tuple(b.detach() for b in row) for row in blocks]
    if out_tuple and is_tuple:
        return tuple(blocks)
    if out_tuple:
        return tuple(row[0] for row in blocks)
    if is_tuple:
        return blocks[0]
    return blocks[0][0]


def hessian(func, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar-valued `func` at `inputs`."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        out_tuple, out = _outputs_as_tuple(func(*xs), "hessian")
        if out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out[0].numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        g = _grads(out, xs, (out[0].new_ones(out[0].shape),), create_graph=True)
        return g

    res = jacobian(gradient, inputs if is_tuple else inputs[0], create_graph=create_graph,
                   strict=strict)
    return res if is_tuple else res[0]


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T H) for a scalar-valued `func`."""
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "vhp")
        inputs = _prepare(inputs, create_graph, True)
        v = _check_v(v, inputs, "vhp", "input to the user-provided function is")
        out_tuple, outputs = _outputs_as_tuple(func(*inputs), "vhp")
        if out_tuple:
            raise RuntimeError("The function given to vhp should return a single Tensor")
        if outputs[0].numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to vhp should "
                               "contain a single element")
        g = _grads(outputs, inputs, (outputs[0].new_ones(outputs[0].shape),),
                   create_graph=True)
        res = _grads(g, inputs, v, create_graph)
    return _finish(outputs, create_graph, False), _finish(res, create_graph, is_tuple)


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), H v) for a scalar-valued `func` (H is symmetric, so this is vhp)."""
    with enable_grad():
        is_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
        inputs = _prepare(inputs, create_graph, True)
        v = _check_v(v, inputs, "hvp", "input to the user-provided function is")
        out_tuple, outputs = _outputs_as_tuple(func(*inputs), "hvp")
        if out_tuple:
            raise RuntimeError("The function given to hvp should return a single Tensor")
        if outputs[0].numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hvp should "
                               "contain a single element")
        g = _grads(outputs, inputs, (outputs[0].new_ones(outputs[0].shape),),
                   create_graph=True)
        dummies = tuple(x.new_zeros(x.shape).requires_grad_(True) for x in inputs)
        gv = _grads(g, inputs, dummies, create_graph=True)
        res = _grads(gv, dummies, v, create_graph)
    return _finish(outputs, create_graph, False), _finish(res, create_graph, is_tuple)
