"""`QConfig`: how a module's activations and weights are observed, and the defaults."""

from __future__ import annotations

from collections import namedtuple

from ... import _dtype
from ...nn.modules.module import Module
from .observer import (
    PlaceholderObserver,
    default_dynamic_quant_observer,
    default_observer,
    default_per_channel_weight_observer,
    default_weight_observer,
)


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """The observer classes (or `with_args` partials) for a module's activations and its
    weight."""

    __slots__ = ()

    def __new__(cls, activation, weight):
        if isinstance(activation, Module) or isinstance(weight, Module):
            raise ValueError(
                "QConfig received observer instance, please pass observer class instead. "
                "Use MyObserver.with_args(x=1) to override arguments to constructor if needed")
        return super().__new__(cls, activation, weight)


default_qconfig = QConfig(activation=default_observer, weight=default_weight_observer)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                  weight=default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float16_dynamic_qconfig = QConfig(
    activation=PlaceholderObserver.with_args(dtype=_dtype.float16, is_dynamic=True),
    weight=PlaceholderObserver.with_args(dtype=_dtype.float16))
