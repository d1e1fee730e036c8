"""FisherSnedecor(df1, df2): the F distribution, (V1 / df1) / (V2 / df2) for independent chi-square
draws, with a reparameterized sample through two gammas."""

import math

import loom
from loom.distributions import constraints
from loom.distributions.distribution import Distribution, as_size, batch_shape_of, broadcast_all
from loom.distributions.gamma import Gamma


class FisherSnedecor(Distribution):
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        # Gamma(df / 2, rate df) is chi2(df) / (2 df): the factors 2 cancel in the ratio.
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        super().__init__(batch_shape_of((df1, df2), self.df1), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(FisherSnedecor, batch_shape, _instance, df1=self.df1.expand(batch_shape),
                             df2=self.df2.expand(batch_shape))
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self):
        df2 = self.df2.masked_fill(self.df2 <= 2, math.nan)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return mode.masked_fill(self.df1 <= 2, math.nan)

    @property
    def variance(self):
        df2 = self.df2.masked_fill(self.df2 <= 4, math.nan)
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=()):
        x1 = self._gamma1.rsample(as_size(sample_shape))
        x2 = self._gamma2.rsample(as_size(sample_shape))
        tiny = loom.finfo(x2.dtype).tiny
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        h1, h2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        t1 = loom.lgamma(h1 + h2) - loom.lgamma(h1) - loom.lgamma(h2)
        t2 = h1 * ratio.log() + (h1 - 1) * loom.log(value)
        t3 = (h1 + h2) * loom.log1p(ratio * value)
        return t1 + t2 - t3
