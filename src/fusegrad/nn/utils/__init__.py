"""`fusegrad.nn.utils`: gradient clipping, parameter vector helpers, `rnn` (packed
sequences) and `stateless` (the deprecated `functional_call`)."""

from . import rnn, stateless
from .clip_grad import clip_grad_norm_, clip_grad_value_
from .convert import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters", "rnn", "stateless"]
