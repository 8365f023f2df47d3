"""`torch.ao.quantization`: observers, quantization configurations and dynamic
quantization."""

from __future__ import annotations

from .observer import (
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    ObserverBase,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
    UniformQuantizationObserverBase,
    default_dynamic_quant_observer,
    default_observer,
    default_per_channel_weight_observer,
    default_placeholder_observer,
    default_weight_observer,
)
from .qconfig import (
    QConfig,
    default_dynamic_qconfig,
    default_qconfig,
    float16_dynamic_qconfig,
    per_channel_dynamic_qconfig,
)
from .quantize import quantize_dynamic

__all__ = [
    "MinMaxObserver", "MovingAverageMinMaxObserver", "ObserverBase",
    "PerChannelMinMaxObserver", "PlaceholderObserver", "QConfig",
    "UniformQuantizationObserverBase", "default_dynamic_qconfig",
    "default_dynamic_quant_observer", "default_observer",
    "default_per_channel_weight_observer", "default_placeholder_observer", "default_qconfig",
    "default_weight_observer", "float16_dynamic_qconfig", "per_channel_dynamic_qconfig",
    "quantize_dynamic",
]
