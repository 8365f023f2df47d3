"""`fusegrad.distributions`: probability distributions with sampling, reparameterised
sampling, log-densities, entropies and KL divergences, as `torch.distributions`.

Argument and sample validation is on by default (`Distribution.set_default_validate_args`
turns it off), with PyTorch's ValueError texts.
"""

from . import constraint_registry, constraints, transforms
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .chi2 import Chi2
from .constraint_registry import biject_to, transform_to
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .fishersnedecor import FisherSnedecor
from .gamma import Gamma
from .generalized_pareto import GeneralizedPareto
from .geometric import Geometric
from .gumbel import Gumbel
from .half_cauchy import HalfCauchy
from .half_normal import HalfNormal
from .independent import Independent
from .inverse_gamma import InverseGamma
from .kl import kl_divergence, register_kl
from .kumaraswamy import Kumaraswamy
from .laplace import Laplace
from .lkj_cholesky import LKJCholesky
from .log_normal import LogNormal
from .logistic_normal import LogisticNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .negative_binomial import NegativeBinomial
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .pareto import Pareto
from .poisson import Poisson
from .relaxed_bernoulli import RelaxedBernoulli
from .relaxed_categorical import RelaxedOneHotCategorical
from .studentT import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    CatTransform,
    ComposeTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StackTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from .uniform import Uniform
from .von_mises import VonMises
from .weibull import Weibull
from .wishart import Wishart

__all__ = [
    "Binomial", "CatTransform", "Cauchy", "Chi2", "ContinuousBernoulli",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "FisherSnedecor",
    "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "InverseGamma",
    "Kumaraswamy", "LogisticNormal", "LowRankMultivariateNormal", "LowerCholeskyTransform",
    "MixtureSameFamily", "Multinomial", "NegativeBinomial", "Pareto", "Poisson",
    "PositiveDefiniteTransform", "RelaxedBernoulli", "RelaxedOneHotCategorical",
    "ReshapeTransform", "StackTransform", "StickBreakingTransform", "StudentT", "VonMises",
    "Weibull", "OneHotCategoricalStraightThrough", "biject_to", "transform_to",
    "LKJCholesky", "Wishart", "constraint_registry",
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Categorical", "ComposeTransform",
    "Dirichlet", "Distribution", "ExpTransform", "Exponential",
    "ExponentialFamily", "Gamma", "Independent", "IndependentTransform", "Laplace",
    "LogNormal", "MultivariateNormal", "Normal", "OneHotCategorical", "PowerTransform",
    "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform", "TanhTransform", "Transform",
    "TransformedDistribution", "Uniform", "constraints", "identity_transform",
    "kl_divergence", "register_kl", "transforms",
]
