"""Probability distributions with PyTorch's torch.distributions interface: sampling (sample, and
rsample where the sample is a differentiable function of the parameters), log_prob, entropy, cdf
and icdf, and the KL divergences between pairs of families (kl_divergence, register_kl).

Everything is composed of loom's ops, so on device="lazy" a distribution's arithmetic joins the
step's trace like any other. Checking arguments reads values: parameters and values on a lazy
device are checked only when validate_args=True is passed (checking them by default would force a
sync at every construction and log_prob, which eager PyTorch does not pay); on other devices they
are checked as PyTorch checks them.

Families: Normal, Uniform, Laplace, Exponential, Bernoulli, Categorical, OneHotCategorical,
OneHotCategoricalStraightThrough, Geometric, Cauchy, Independent, MultivariateNormal and
LowRankMultivariateNormal (through linalg.cholesky and solve_triangular, LAPACK steps),
MixtureSameFamily; TransformedDistribution over the transforms of loom.distributions.transforms
(with biject_to / transform_to in constraint_registry) and the families built on it: LogNormal,
HalfNormal, HalfCauchy, Gumbel, Weibull, Pareto, LogisticNormal, RelaxedBernoulli,
RelaxedOneHotCategorical, Kumaraswamy; and the gamma family: Gamma, Chi2, Beta, Dirichlet, StudentT,
FisherSnedecor, drawn by Marsaglia-Tsang composed of loom's random ops (the same draws on cpu and
lazy from one seed, no sync) with the implicit reparameterization gradient (gamma.py).
ExponentialFamily gives entropy and same-family KL from a log-normalizer by autograd.

Not built: Gamma.cdf (needs igamma), Poisson, Binomial, NegativeBinomial, Multinomial,
ContinuousBernoulli, VonMises (needs i0 / i1), LKJCholesky, Wishart."""

from loom.distributions import constraints
from loom.distributions.bernoulli import Bernoulli
from loom.distributions.categorical import Categorical, OneHotCategorical
from loom.distributions.distribution import Distribution
from loom.distributions.exponential import Exponential
from loom.distributions.independent import Independent
from loom.distributions.kl import kl_divergence, register_kl
from loom.distributions.laplace import Laplace
from loom.distributions.multivariate_normal import LowRankMultivariateNormal, MultivariateNormal
from loom.distributions.normal import Normal
from loom.distributions.uniform import Uniform
from loom.distributions import transforms  # noqa: E402  (after the families: kl imports them)
from loom.distributions.cauchy import Cauchy
from loom.distributions.constraint_registry import biject_to, transform_to
from loom.distributions.geometric import Geometric
from loom.distributions.gumbel import Gumbel
from loom.distributions.half_normal import HalfCauchy, HalfNormal
from loom.distributions.log_normal import LogNormal
from loom.distributions.logistic_normal import LogisticNormal
from loom.distributions.mixture_same_family import MixtureSameFamily
from loom.distributions.one_hot_categorical_straight_through import OneHotCategoricalStraightThrough
from loom.distributions.pareto import Pareto
from loom.distributions.relaxed_bernoulli import RelaxedBernoulli
from loom.distributions.relaxed_categorical import RelaxedOneHotCategorical
from loom.distributions.transformed_distribution import TransformedDistribution
from loom.distributions.transforms import *  # noqa: F401,F403
from loom.distributions.weibull import Weibull
from loom.distributions.beta import Beta
from loom.distributions.chi2 import Chi2
from loom.distributions.dirichlet import Dirichlet
from loom.distributions.exp_family import ExponentialFamily
from loom.distributions.fishersnedecor import FisherSnedecor
from loom.distributions.gamma import Gamma
from loom.distributions.kumaraswamy import Kumaraswamy
from loom.distributions.studentT import StudentT

__all__ = ["Bernoulli", "Categorical", "Distribution", "Exponential", "Independent", "Laplace", "LowRankMultivariateNormal",
           "MultivariateNormal", "Normal",
           "OneHotCategorical", "Uniform", "constraints", "kl_divergence", "register_kl"]
__all__ += ["Cauchy", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "LogNormal", "LogisticNormal",
            "MixtureSameFamily", "OneHotCategoricalStraightThrough", "Pareto", "RelaxedBernoulli",
            "RelaxedOneHotCategorical", "TransformedDistribution", "Weibull", "biject_to", "transform_to",
            "transforms"] + transforms.__all__
__all__ += ["Beta", "Chi2", "Dirichlet", "ExponentialFamily", "FisherSnedecor", "Gamma", "Kumaraswamy", "StudentT"]
