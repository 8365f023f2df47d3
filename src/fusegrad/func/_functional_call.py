"""`functional_call` (a module run with other tensors in place of its parameters and buffers)
and `stack_module_state` (the states of several like modules, stacked for vmap).

`functional_call` swaps the given tensors into the module's `_parameters` and `_buffers`
(a name that is neither is set as an attribute), calls the module, and puts everything back
afterwards, on an exception too. It reads modules through their own methods only, so it
needs nothing of `nn` beyond the module it is given.
"""

from __future__ import annotations

from .._tensor import Tensor

_ABSENT = object()


def _merge(dicts) -> dict:
    if isinstance(dicts, dict):
        return dicts
    if not isinstance(dicts, (list, tuple)):
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple "
                         f"of dicts, but got {type(dicts)}")
    if not all(isinstance(d, dict) for d in dicts):
        raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                         "dictionaries")
    seen: dict = {}
    for d in dicts:
        for key in d:
            seen[key] = seen.get(key, 0) + 1
    repeated = [k for k, n in seen.items() if n > 1]
    if repeated:
        raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                         "functional call is ambiguous")
    return {k: v for d in dicts for k, v in d.items()}


def _state_names(module) -> dict:
    """id(tensor) -> every name of it among the module's parameters and buffers."""
    groups: dict = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        groups.setdefault(id(t), []).append(name)
    return groups


def _tie(module, values: dict) -> dict:
    """`values` with each given tensor also under the names tied to it."""
    out = dict(values)
    for names in _state_names(module).values():
        if len(names) < 2:
            continue
        given = sorted(n for n in names if n in values)
        if not given:
            continue
        first = values[given[0]]
        if any(values[n] is not first for n in given[1:]):
            raise ValueError(f"functional_call got multiple values for keys {given}, which "
                             "are tied. Consider using tie_weights=False")
        for n in names:
            out[n] = first
    return out


def _check_strict(module, values: dict) -> None:
    names = {n for group in _state_names(module).values() for n in group}
    unexpected = sorted(k for k in values if k not in names)
    missing = sorted(n for n in names if n not in values)
    if unexpected or missing:
        lines = []
        if unexpected:
            lines.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected) + ".")
        if missing:
            lines.append("Missing key(s): " + ", ".join(repr(k) for k in missing) + ".")
        raise RuntimeError(f"Error(s) in reparametrizing for {module._get_name()}:\n\t" +
                           "\n\t".join(lines))


def _owner(module, name: str):
    """(submodule, attribute) that dotted `name` refers to."""
    *path, attr = name.split(".")
    owner = module
    for part in path:
        child = owner._modules.get(part) if hasattr(owner, "_modules") else None
        if child is None:
            raise AttributeError(f"{owner._get_name()} has no attribute `{part}`")
        owner = child
    return owner, attr


def _swap(owner, attr: str, value):
    """Put `value` in place of `owner.attr`; returns what restores it."""
    for store in (owner._parameters, owner._buffers):
        if attr in store:
            old = store[attr]
            store[attr] = value
            return store, attr, old
    old = owner.__dict__.get(attr, _ABSENT)
    setattr(owner, attr, value)
    return owner, attr, old


def _restore(saved) -> None:
    for where, attr, old in reversed(saved):
        if isinstance(where, dict):
            where[attr] = old
        elif old is _ABSENT:
            delattr(where, attr)
        else:
            setattr(where, attr, old)


def call_with(module, values: dict, args, kwargs, tie_weights: bool, strict: bool):
    """`module(*args, **kwargs)` with `values` (name -> tensor) in place of its state."""
    if tie_weights:
        values = _tie(module, values)
    if strict:
        _check_strict(module, values)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    owners = [(_owner(module, name), value) for name, value in values.items()]
    saved: list = []
    try:
        for (owner, attr), value in owners:
            saved.append(_swap(owner, attr, value))
        return module(*args, **(kwargs or {}))
    finally:
        _restore(saved)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """`module(*args, **kwargs)` with the tensors of `parameter_and_buffer_dicts` (a dict of
    dotted names, or a tuple of such dicts with no name in two) in place of its parameters and
    buffers; the module is unchanged afterwards. `tie_weights`: a tensor given for one of
    several tied names is used for all of them; `strict`: the names must be exactly the
    module's."""
    values = _merge(parameter_and_buffer_dicts)
    return call_with(module, values, args, kwargs, tie_weights, strict)


def _stacked(tensors: list, name: str, leaf: bool) -> Tensor:
    from .._functions import stack

    needs = [t.requires_grad for t in tensors]
    if leaf and any(needs) and not all(needs):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = stack([t.detach() for t in tensors])
    if leaf and all(needs):
        result.requires_grad_(True)
    return result


def stack_module_state(models) -> tuple[dict, dict]:
    """(parameters, buffers) of `models` (like modules in the same training mode), each
    name's tensors stacked along a new first dimension; the stacked parameters are new
    leaves, requiring grad as the models' do."""
    models = list(models)
    if not models:
        raise RuntimeError(f"stack_module_state: Expected at least one model, got "
                           f"{len(models)}.")
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    params = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    stacked_params = {k: _stacked([p[k] for p in params], k, True) for k in params[0]}
    stacked_buffers = {k: _stacked([b[k] for b in buffers], k, False) for k in buffers[0]}
    return stacked_params, stacked_buffers
