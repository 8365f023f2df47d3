"""`fusegrad.distributions`: probability distributions with sampling, reparameterised
sampling, log-densities, entropies and KL divergences, as `torch.distributions`.

Argument and sample validation is on by default (`Distribution.set_default_validate_args`
turns it off), with PyTorch's ValueError texts.
"""

from . import constraints, transforms
from .constraints import Constraint
from .continuous import Exponential, Laplace, Normal, Uniform
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .distribution import Distribution, ExponentialFamily
from .gamma import Beta, Dirichlet, Gamma
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .transformed_distribution import Independent, LogNormal, TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    IndependentTransform,
    PowerTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    TanhTransform,
    Transform,
    identity_transform,
)

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Categorical", "ComposeTransform",
    "Constraint", "Dirichlet", "Distribution", "ExpTransform", "Exponential",
    "ExponentialFamily", "Gamma", "Independent", "IndependentTransform", "Laplace",
    "LogNormal", "MultivariateNormal", "Normal", "OneHotCategorical", "PowerTransform",
    "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform", "TanhTransform", "Transform",
    "TransformedDistribution", "Uniform", "constraints", "identity_transform",
    "kl_divergence", "register_kl", "transforms",
]
