"""MixtureSameFamily(mixture_distribution, component_distribution): a Categorical over K
components of one family, the components being the last batch dimension of
component_distribution. No reparameterized sample (choosing a component is discrete)."""

import loom
from loom.distributions import constraints
from loom.distributions.categorical import Categorical
from loom.distributions.distribution import Distribution, as_size


class MixtureSameFamily(Distribution):
    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distribtutions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        mixture_batch = tuple(mixture_distribution.batch_shape)
        component_batch = tuple(component_distribution.batch_shape[:-1])
        for a, b in zip(reversed(mixture_batch), reversed(component_batch)):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mixture_batch}) is not compatible with "
                                 f"`component_distribution.batch_shape`({component_batch})")
        k_mixture = mixture_distribution.logits.shape[-1]
        k_component = component_distribution.batch_shape[-1]
        if k_mixture != k_component:
            raise ValueError(f"`mixture_distribution component` ({k_mixture}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({k_component})")
        self._num_component = k_mixture
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(component_batch, component_distribution.event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = loom.Size(batch_shape)
        return self._expanded(MixtureSameFamily, batch_shape, _instance,
                              _component_distribution=self._component_distribution.expand(
                                  batch_shape + (self._num_component,)),
                              _mixture_distribution=self._mixture_distribution.expand(batch_shape),
                              _num_component=self._num_component, _event_ndims=self._event_ndims)

    @constraints.dependent_property
    def support(self):
        return self._component_distribution.support

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    def _weights(self):
        # The mixture's probabilities, with a trailing 1 per event dimension so that they
        # broadcast over the components' events (batch dimensions broadcast from the right).
        probs = self._mixture_distribution.probs
        return probs.reshape(tuple(probs.shape) + (1,) * self._event_ndims)

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    @property
    def mean(self):
        return (self._weights() * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        # Total variance: the expected conditional variance plus the variance of the conditional mean.
        weights = self._weights()
        dim = -1 - self._event_ndims
        mean_cond_var = (weights * self._component_distribution.variance).sum(dim)
        var_cond_mean = (weights * (self._component_distribution.mean - self._pad(self.mean)).pow(2)).sum(dim)
        return mean_cond_var + var_cond_mean

    def cdf(self, x):
        cdf_x = self._component_distribution.cdf(self._pad(x))
        return (cdf_x * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self._component_distribution.log_prob(self._pad(x))
        log_mix = loom.log_softmax(self._mixture_distribution.logits, dim=-1)
        return loom.logsumexp(log_prob_x + log_mix, dim=-1)

    def sample(self, sample_shape=()):
        sample_shape = as_size(sample_shape)
        with loom.no_grad():
            gather_dim = len(sample_shape) + len(self.batch_shape)
            event_shape = tuple(self.event_shape)
            index = self._mixture_distribution.sample(sample_shape)  # sample + batch
            components = self._component_distribution.sample(sample_shape)  # sample + batch + (K,) + event
            index = index.reshape(tuple(index.shape) + (1,) * (len(event_shape) + 1))
            index = index.expand(tuple(components.shape[:gather_dim]) + (1,) + event_shape)
            return components.gather(gather_dim, index).squeeze(gather_dim)

    def __repr__(self):
        return (f"MixtureSameFamily(\n  {self._mixture_distribution!r},\n  {self._component_distribution!r})")
