"""OneHotCategoricalStraightThrough: a one-hot draw whose rsample passes gradients to probs as if
the draw were probs (the straight-through estimator): value sample + probs - probs.detach()."""

from loom.distributions.categorical import OneHotCategorical
from loom.distributions.distribution import as_size


class OneHotCategoricalStraightThrough(OneHotCategorical):
    has_rsample = True

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(OneHotCategoricalStraightThrough,
                                                                                _instance))

    def rsample(self, sample_shape=()):
        draws = self.sample(as_size(sample_shape))
        probs = self._categorical.probs
        return draws + (probs - probs.detach())
