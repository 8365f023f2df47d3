"""`quantize_dynamic`: swap a model's float modules for dynamically quantized ones."""

from __future__ import annotations

import copy
import warnings

from ... import _dtype
from ...nn.modules.linear import Linear as _FloatLinear
from .qconfig import default_dynamic_qconfig, float16_dynamic_qconfig


def _default_mapping() -> dict:
    from ..nn.quantized import dynamic as nnqd

    return {_FloatLinear: nnqd.Linear}


# Module types PyTorch's default dynamic mapping also quantizes, which have no quantized
# counterpart here yet: refused rather than left in floating point.
# PyTorch's notice, given at each call of its eager-mode quantization entry points.
DEPRECATION = (
    "torch.ao.quantization is deprecated and will be removed in 2.10. \n"
    "For migrations of users: \n"
    "1. Eager mode quantization (torch.ao.quantization.quantize, "
    "torch.ao.quantization.quantize_dynamic), please migrate to use torchao eager mode "
    "quantize_ API instead \n"
    "2. FX graph mode quantization (torch.ao.quantization.quantize_fx.prepare_fx,"
    "torch.ao.quantization.quantize_fx.convert_fx, please migrate to use torchao pt2e "
    "quantization API instead (prepare_pt2e, convert_pt2e) \n"
    "3. pt2e quantization has been migrated to torchao "
    "(https://github.com/pytorch/ao/tree/main/torchao/quantization/pt2e) \n"
    "see https://github.com/pytorch/ao/issues/2259 for more details")
_NOT_YET = ("LSTM", "GRU", "LSTMCell", "RNNCell", "GRUCell", "Embedding", "EmbeddingBag")


def _spec_for(qconfig_spec, dtype) -> dict:
    from ... import nn

    if qconfig_spec is None:
        if dtype is _dtype.qint8:
            return {nn.Linear: default_dynamic_qconfig, nn.LSTM: default_dynamic_qconfig,
                    nn.GRU: default_dynamic_qconfig, nn.LSTMCell: default_dynamic_qconfig,
                    nn.RNNCell: default_dynamic_qconfig, nn.GRUCell: default_dynamic_qconfig}
        if dtype is _dtype.float16:
            return dict.fromkeys((nn.Linear, nn.LSTM, nn.GRU, nn.LSTMCell, nn.RNNCell,
                                  nn.GRUCell), float16_dynamic_qconfig)
        raise ValueError(f"Don't know how to quantize with default settings for {dtype}. "
                         "Provide full qconfig please")
    if isinstance(qconfig_spec, set):
        if dtype is _dtype.qint8:
            default = default_dynamic_qconfig
        elif dtype is _dtype.float16:
            default = float16_dynamic_qconfig
        else:
            raise RuntimeError("Unknown dtype specified for quantize_dynamic: ", str(dtype))
        return dict.fromkeys(qconfig_spec, default)
    return dict(qconfig_spec)


def _propagate(module, spec: dict, inherited, prefix: str = "") -> None:
    """Give each module its qconfig: its own name's or type's entry, else its parent's."""
    qconfig = spec.get(type(module), inherited)
    qconfig = spec.get(prefix, qconfig)
    if qconfig is not None:
        module.qconfig = qconfig
    for name, child in module.named_children():
        _propagate(child, spec, qconfig, f"{prefix}.{name}" if prefix else name)


def _convert(module, mapping: dict) -> None:
    swaps = {}
    for name, child in module.named_children():
        qconfig = getattr(child, "qconfig", None)
        target = mapping.get(type(child))
        if qconfig is not None and target is not None:
            swaps[name] = target.from_float(child)
            continue
        if qconfig is not None and type(child).__name__ in _NOT_YET:
            raise NotImplementedError(
                f"quantize_dynamic: no dynamically quantized {type(child).__name__} here yet")
        _convert(child, mapping)
    for name, new in swaps.items():
        setattr(module, name, new)


def _remove_qconfig(module) -> None:
    for child in module.children():
        _remove_qconfig(child)
    if "qconfig" in module.__dict__:
        del module.qconfig


def quantize_dynamic(model, qconfig_spec=None, dtype=_dtype.qint8, mapping=None,
                     inplace: bool = False):
    """`model` (a copy unless `inplace`) in eval mode with its submodules of the types (or
    names) in `qconfig_spec` replaced by their dynamically quantized versions: weights
    quantized once, activations quantized per call."""
    warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=2)
    spec = _spec_for(qconfig_spec, dtype)
    if mapping is None:
        mapping = _default_mapping()
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    _propagate(model, spec, None)
    _convert(model, mapping)
    _remove_qconfig(model)
    return model
