"""LogisticNormal(loc, scale): a Normal(loc, scale) vector of K-1 entries stick-broken onto the
K-simplex, with a reparameterized sample."""

from loom.distributions import constraints
from loom.distributions.normal import Normal
from loom.distributions.transformed_distribution import TransformedDistribution
from loom.distributions.transforms import StickBreakingTransform


class LogisticNormal(TransformedDistribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])  # the vector needs one dimension
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(LogisticNormal, _instance))

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale
