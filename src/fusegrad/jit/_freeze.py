"""`torch.jit.freeze` and `torch.jit.optimize_for_inference`: a scripted or traced module in
eval mode as a `RecursiveScriptModule` with its weights as constants.

The frozen copy holds the parameters and buffers as plain tensors (no gradient, not listed by
`parameters()` or `buffers()`), so the program reads them as the constants PyTorch's freezing
folds into the graph; attributes named in `preserved_attrs` stay as they were. A traced
module freezes into a `RecursiveScriptModule` without submodules (PyTorch inlines them) that
runs a frozen copy of the trace's recording; a scripted one gets methods with its
submodules' calls inlined, its attributes constants and the branches they decide dropped
(`_inline.py`), and no submodules either (unless a method still needs one). As PyTorch's,
a frozen module has no `training` flag until `train()` or `eval()` sets one (unless
`preserved_attrs` names it). With `optimize_numerics` (and in
`optimize_for_inference`), an eval-mode batch norm that only follows a convolution is
folded into its weight and bias (not one after a linear layer: see `_fused`). The module it
is made from is left unchanged.
"""

from __future__ import annotations

import copy

from ._inline import count_uses
from ._script import UNIT, RecursiveScriptModule, ScriptModule


def _set_tensor(module, name: str, value) -> None:
    """Give `module` (of a copy being frozen) the tensor `value` as attribute `name`, where
    it keeps its tensors: a parameter (until frozen) or a frozen constant."""
    from ..nn.parameter import Parameter

    if name in module._parameters:
        module._parameters[name] = Parameter(value.detach(), requires_grad=False)
        return
    if isinstance(module, ScriptModule):
        module._jit_consts[name] = value
    module.__dict__[name] = value


def _fused(layer, bn):
    """The (weight, bias) computing `bn(layer(x))`, or None when `layer` followed by `bn`
    cannot be folded (a transposed convolution, a batch norm in training or without running
    statistics, a layer without bias in a scripted program that was compiled for none)."""
    from ..nn.modules.batchnorm import _BatchNorm
    from ..nn.modules.conv import _ConvNd
    from ..nn.utils.fusion import fuse_conv_bn_weights

    origin = getattr(layer, "_jit_origin", type(layer))
    bn_origin = getattr(bn, "_jit_origin", type(bn))
    if not (isinstance(origin, type) and isinstance(bn_origin, type)
            and issubclass(bn_origin, _BatchNorm)) or bn.training or layer.training:
        return None
    mean, var = getattr(bn, "running_mean", None), getattr(bn, "running_var", None)
    weight, bias = getattr(layer, "weight", None), getattr(layer, "bias", None)
    if mean is None or var is None or weight is None:
        return None
    if bias is None and isinstance(layer, ScriptModule):
        return None
    # A linear layer followed by a batch norm is not folded: the norm's channels are its
    # input's dim 1, the layer's features its last dim, the same dim only for a 2-D input,
    # which a frozen program cannot know (PyTorch folds it anyway and, for an (N, C, L)
    # input with C equal to the features, returns other values than the module).
    if issubclass(origin, _ConvNd) and not getattr(layer, "transposed", True):
        w, b = fuse_conv_bn_weights(weight, bias, mean, var, bn.eps, bn.weight, bn.bias)
    else:
        return None
    return w.detach(), b.detach()


def _fold_fx(gm, keep: set) -> None:
    """Fold each batch norm module that only follows a convolution module in the
    recording `gm` (an FX GraphModule) into that module."""
    changed = False
    reads: dict = {}  # module name -> how many nodes call it or read its attributes
    for node in gm.graph.nodes:
        if node.op in ("call_module", "get_attr"):
            parts = str(node.target).split(".")
            for k in range(1, len(parts) + 1):
                name = ".".join(parts[:k])
                reads[name] = reads.get(name, 0) + 1
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or node.kwargs or len(node.args) != 1:
            continue
        prev = node.args[0]
        # the layer's new weights must serve this call only
        if getattr(prev, "op", None) != "call_module" or len(prev.users) != 1 or \
                prev.kwargs or {node.target, prev.target} & keep or reads[prev.target] != 1:
            continue
        layer, bn = gm.get_submodule(prev.target), gm.get_submodule(node.target)
        fused = _fused(layer, bn)
        if fused is None:
            continue
        _set_tensor(layer, "weight", fused[0])
        if "bias" in layer._parameters and layer._parameters["bias"] is None:
            del layer._parameters["bias"]  # (a bias-free layer gains one)
        _set_tensor(layer, "bias", fused[1])
        node.replace_all_uses_with(prev)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.recompile()


def _replace_uses(block, old, new) -> None:
    for node in block.nodes:
        node.inputs = [new if v is old else v for v in node.inputs]
        for inner in node.blocks:
            _replace_uses(inner, old, new)
    block.returns = [new if v is old else v for v in block.returns]


def _attribute_reads(block, counts: dict) -> None:
    for node in block.nodes:
        if node.kind == "prim::GetAttr":
            name = node.attrs.get("name")
            counts[name] = counts.get(name, 0) + 1
        for inner in node.blocks:
            _attribute_reads(inner, counts)


def _fold_script(root: ScriptModule, keep: set, prefix: str = "") -> None:
    """Fold, in the `forward` of `root` (a copy) and of its submodules, each call of a batch
    norm submodule on the result of a convolution submodule's call (used only
    there, the layer read nowhere else)."""
    engine = root.__dict__.get("_jit_engine")
    if engine is not None:  # a traced submodule runs its recording
        _fold_fx(engine, {k[len(prefix):] for k in keep if k.startswith(prefix)})
        return
    for name, child in root._modules.items():
        if isinstance(child, ScriptModule) and prefix + name not in keep:
            _fold_script(child, keep, f"{prefix}{name}.")
    method = root._jit_methods.get("forward")
    if method is None or not method.graph.params:
        return
    graph = method.graph
    owner = {graph.params[0]: (prefix, root)}  # value -> (qualified name, the module it is)
    calls = {}
    counts: dict = {}
    count_uses(graph, counts)
    reads: dict = {}
    for m in root._jit_methods.values():
        _attribute_reads(m.graph, reads)
    for node in list(graph.nodes):
        if node.kind == "prim::GetAttr" and node.inputs and node.inputs[0] in owner:
            qual, mod = owner[node.inputs[0]]
            child = mod._modules.get(node.attrs.get("name"))
            if isinstance(child, ScriptModule):
                owner[node.outputs[0]] = (qual + node.attrs["name"] + ".", child)
            continue
        if node.kind != "prim::CallMethod" or node.attrs.get("name") != "forward" or \
                len(node.inputs) != 2 or node.inputs[0] not in owner:
            continue
        calls[node.outputs[0]] = node
        prev = calls.get(node.inputs[1])
        if prev is None or counts.get(node.inputs[1], 0) != 1 or prev.inputs[0] not in owner:
            continue
        (bn_qual, bn), (layer_qual, layer) = owner[node.inputs[0]], owner[prev.inputs[0]]
        if bn_qual[:-1] in keep or layer_qual[:-1] in keep:
            continue
        layer_getter = prev.inputs[0].node
        if layer_getter is None or layer_getter.kind != "prim::GetAttr" or \
                layer_getter.inputs[0] is not graph.params[0] or \
                reads.get(layer_getter.attrs.get("name")) != 1:
            continue  # the layer's new weights must serve this call only
        fused = _fused(layer, bn)
        if fused is None:
            continue
        _set_tensor(layer, "weight", fused[0])
        _set_tensor(layer, "bias", fused[1])
        graph.nodes.remove(node)
        _replace_uses(graph, node.outputs[0], node.inputs[1])
        counts = {}
        count_uses(graph, counts)
        getter = node.inputs[0].node  # the batch norm's GetAttr, now read by nothing
        if getter is not None and getter in graph.nodes and not counts.get(node.inputs[0]):
            graph.nodes.remove(getter)


def _constants_of(module, keep: set, prefix: str = "") -> None:
    inner = module.__dict__.get("_jit_engine")  # a traced submodule's recording
    if inner is not None and inner is not module:
        _constants_of(inner, keep, prefix)
    for name in list(module._parameters) + list(module._buffers):
        if prefix + name in keep:
            continue
        table = module._parameters if name in module._parameters else module._buffers
        value = table.pop(name)
        if value is not None:
            value = value.detach()
        if isinstance(module, ScriptModule):
            module._jit_consts[name] = value  # what the interpreter's attribute reads find
        module.__dict__[name] = value
    for name, child in module._modules.items():
        if child is not None and prefix + name not in keep:
            _constants_of(child, keep, f"{prefix}{name}.")


def _check_names(mod, names) -> None:
    for name in names:
        obj = mod
        for part in name.split("."):
            if not hasattr(obj, part):
                raise RuntimeError(f"Unknown name: {name}")
            obj = getattr(obj, part)


def _frozen(mod, keep: set, fold: bool):
    """The frozen copy of `mod` (checked by the caller)."""
    if mod.__dict__.get("_jit_frozen"):
        frozen = copy.deepcopy(mod)
    elif "_jit_engine" in mod.__dict__:  # traced: a script module running the recording
        copied = copy.deepcopy(mod)
        engine = copied.__dict__["_jit_engine"]
        frozen = RecursiveScriptModule(UNIT.type_name(mod.original_name), mod.original_name,
                                       UNIT)
        frozen.__dict__["_jit_engine"] = engine
        frozen.training = False
        for name in keep:  # kept attributes of the module itself stay reachable
            for table in ("_parameters", "_buffers", "_modules"):
                if name in getattr(copied, table):
                    getattr(frozen, table)[name] = getattr(copied, table)[name]
    else:
        frozen = copy.deepcopy(mod)
    engine = frozen.__dict__.get("_jit_engine")
    if fold:
        if engine is not None:
            _fold_fx(engine, keep)
        else:
            _fold_script(frozen, keep)
    if engine is not None:
        _constants_of(engine, keep)
    _constants_of(frozen, keep)
    _refresh_traced(frozen)
    if engine is None and not any(name in mod._modules or "." in name for name in keep):
        _inline_frozen(frozen, keep)
    frozen.__dict__["_jit_frozen"] = True
    if "training" not in keep:
        # PyTorch's frozen module has no `training` flag until train()/eval() sets one
        frozen.__dict__.pop("training", None)
    return frozen


def _inline_frozen(frozen: ScriptModule, keep: set) -> None:
    """Give a frozen scripted module `forward` and the methods `keep` names, with their
    submodules' calls inlined and their attributes constants except those `keep` names, and
    drop its submodules, its other methods and its other attributes, as PyTorch's freezing
    does; left as it is when a method still needs a submodule (a traced one's recording, a
    Python call)."""
    from ._inline import fold_attributes, inline_calls, simplify
    from ._script import Method

    methods = {}
    preserved = frozenset(keep)
    for name, method in frozen._jit_methods.items():
        if name != "forward" and name not in keep:
            continue
        graph, owner = inline_calls(frozen, name)
        if not fold_attributes(graph, owner, frozen._jit_unit, preserved):
            return
        simplify(graph)
        methods[name] = Method(name, graph, method.schema, frozen._jit_unit)
    for name in list(frozen._jit_methods):
        if name not in methods:
            del frozen._jit_methods[name]
            frozen.__dict__.pop(name, None)  # its Python binding
    frozen._jit_methods.update(methods)
    frozen._modules.clear()
    for name in list(frozen._jit_consts):
        if name not in keep:  # the program's constants now
            del frozen._jit_consts[name]
            frozen.__dict__.pop(name, None)
    frozen.__dict__["_jit_children"] = None


def _refresh_traced(module) -> None:
    """Rebuild the programs of the traced modules in a frozen copy from their (folded,
    frozen) recordings, so their code and saved form are the frozen ones."""
    for sub in module.modules():
        if "_jit_engine" in sub.__dict__ and isinstance(sub, ScriptModule):
            sub.__dict__.pop("_jit_program_cache", None)
            if sub._jit_methods.pop("forward", None) is not None:
                sub._compile_method("forward")


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    """A copy of `mod` (from `jit.script` or `jit.trace`, in eval mode) whose parameters and
    buffers are constants, as a `RecursiveScriptModule`; `preserved_attrs` names attributes
    (or submodules) kept as they are. With `optimize_numerics`, batch norms are folded into
    the convolution they follow (equal values, within rounding)."""
    if not isinstance(mod, ScriptModule):
        raise RuntimeError(
            "Freezing expects a ScriptModule as input. Please use torch.jit.script or "
            "torch.jit.trace to script your 'nn.Module'.")
    if mod.training:
        raise RuntimeError(
            "Freezing is currently only implemented for modules in eval mode. Please call "
            ".eval() on your module before freezing.")
    keep = list(preserved_attrs or ())
    _check_names(mod, keep)
    return _frozen(mod, set(keep), optimize_numerics)


def optimize_for_inference(mod, other_methods=None):
    """`mod` (a scripted or traced module) put in eval mode, as PyTorch does to the module
    given, and frozen, with batch norms folded into the convolution before them;
    `other_methods` names methods kept besides `forward`."""
    if not isinstance(mod, ScriptModule):
        raise RuntimeError(
            "optimize_for_inference expects a ScriptModule as input. Please use "
            "torch.jit.script or torch.jit.trace to script your 'nn.Module'.")
    keep = list(other_methods or ())
    _check_names(mod, keep)
    if not mod.__dict__.get("_jit_frozen"):
        mod.eval()
    return _frozen(mod, set(keep), True)
