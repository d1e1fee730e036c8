"""ExponentialFamily: densities p(x) = h(x) exp(<t(x), theta> - F(theta)). A family gives its
natural parameters theta (_natural_params), the log-normalizer F (_log_normalizer) and
E[log h(x)] (_mean_carrier_measure); the entropy then follows from F and its gradient (computed
by autograd), and so does the KL divergence between two members of one family (kl.py)."""

import loom
from loom.distributions.distribution import Distribution


class ExponentialFamily(Distribution):
    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        # H = F(theta) - <theta, grad F(theta)> - E[log h(x)].
        result = -self._mean_carrier_measure
        natural = [p.detach().requires_grad_() for p in self._natural_params]
        with loom.enable_grad():
            lg_normal = self._log_normalizer(*natural)
            gradients = loom.autograd.grad(lg_normal.sum(), natural, create_graph=True)
        result = result + lg_normal
        for theta, g in zip(natural, gradients):
            result = result - (theta * g).reshape(self._batch_shape + (-1,)).sum(-1)
        return result
