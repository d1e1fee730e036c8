"""Probability distributions with PyTorch's torch.distributions interface: sampling (sample, and
rsample where the sample is a differentiable function of the parameters), log_prob, entropy, cdf
and icdf, and the KL divergences between pairs of families (kl_divergence, register_kl).

Everything is composed of loom's ops, so on device="lazy" a distribution's arithmetic joins the
step's trace like any other. Checking arguments reads values: parameters and values on a lazy
device are checked only when validate_args=True is passed (checking them by default would force a
sync at every construction and log_prob, which eager PyTorch does not pay); on other devices they
are checked as PyTorch checks them.

Families: Normal, Uniform, Laplace, Exponential, Bernoulli, Categorical, OneHotCategorical, and
Independent, MultivariateNormal and LowRankMultivariateNormal (through linalg.cholesky and
solve_triangular, LAPACK steps), TransformedDistribution with the transforms of
loom.distributions.transforms (Exp, Power, Sigmoid, Softplus, Tanh, Abs, Affine, Softmax, Compose,
Independent and any transform's .inv), and LogNormal on it. Families that need gamma-distributed samples (Gamma, Beta,
Dirichlet, ...) are not built."""

from loom.distributions import constraints, transforms
from loom.distributions.bernoulli import Bernoulli
from loom.distributions.categorical import Categorical, OneHotCategorical
from loom.distributions.distribution import Distribution
from loom.distributions.exponential import Exponential
from loom.distributions.independent import Independent
from loom.distributions.kl import kl_divergence, register_kl
from loom.distributions.laplace import Laplace
from loom.distributions.multivariate_normal import LowRankMultivariateNormal, MultivariateNormal
from loom.distributions.normal import Normal
from loom.distributions.transformed_distribution import LogNormal, TransformedDistribution
from loom.distributions.transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,
                                           IndependentTransform, PowerTransform, SigmoidTransform, SoftmaxTransform,
                                           SoftplusTransform, TanhTransform, Transform, identity_transform)
from loom.distributions.uniform import Uniform

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Categorical", "ComposeTransform", "Distribution",
           "ExpTransform", "Exponential", "Independent", "IndependentTransform", "Laplace", "LogNormal",
           "LowRankMultivariateNormal", "MultivariateNormal", "Normal", "OneHotCategorical", "PowerTransform",
           "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform", "TanhTransform", "Transform",
           "TransformedDistribution", "Uniform", "constraints", "identity_transform", "kl_divergence",
           "register_kl", "transforms"]
