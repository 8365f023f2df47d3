"""Former home of the parameter vector helpers, now in `convert_parameters` (PyTorch's
module name); kept for imports of this path."""

from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["parameters_to_vector", "vector_to_parameters"]
