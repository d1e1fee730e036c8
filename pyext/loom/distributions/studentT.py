"""StudentT(df, loc=0, scale=1), with a reparameterized sample loc + scale * Z / sqrt(V / df),
Z standard normal and V a Chi2(df) draw (so df's gradient is the gamma's implicit one)."""

import math

import loom
from loom.distributions import constraints
from loom.distributions.chi2 import Chi2
from loom.distributions.distribution import Distribution, as_size, batch_shape_of, broadcast_all


class StudentT(Distribution):
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(batch_shape_of((df, loc, scale), self.df), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(StudentT, batch_shape, _instance, df=self.df.expand(batch_shape),
                             loc=self.loc.expand(batch_shape), scale=self.scale.expand(batch_shape))
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self):
        return self.loc.masked_fill(self.df <= 1, math.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        var = self.scale.pow(2) * df / (df - 2)
        var = var.masked_fill((df <= 2) & (df > 1), math.inf)
        return var.masked_fill(df <= 1, math.nan)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(as_size(sample_shape))
        z = loom.randn(shape, dtype=self.df.dtype, device=self.df.device)
        v = self._chi2.rsample(as_size(sample_shape))
        return self.loc + self.scale * z * loom.rsqrt(v / self.df)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        log_norm = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
                    + loom.lgamma(0.5 * self.df) - loom.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * loom.log1p(y.pow(2) / self.df) - log_norm

    def entropy(self):
        half = 0.5 * self.df
        lbeta = loom.lgamma(half) + math.lgamma(0.5) - loom.lgamma(half + 0.5)
        return (self.scale.log() + (half + 0.5) * (loom.digamma(half + 0.5) - loom.digamma(half))
                + 0.5 * self.df.log() + lbeta)
