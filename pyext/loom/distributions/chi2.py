"""Chi2(df): the sum of df squared standard normals, Gamma(df / 2, 1 / 2)."""

from loom.distributions import constraints
from loom.distributions.distribution import broadcast_all
from loom.distributions.gamma import Gamma


class Chi2(Gamma):
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df_tensor,) = broadcast_all(df)
        super().__init__(0.5 * df_tensor if not isinstance(df, (int, float)) else 0.5 * df, 0.5,
                         validate_args=validate_args)
        # df is a property (of the concentration), so the base class's check skips it: checked here.
        if self._validate_args and self._should_check(self.df) and not bool(constraints.positive.check(self.df).all()):
            raise ValueError(f"Expected parameter df ({type(self.df).__name__} of shape {tuple(self.df.shape)}) of "
                             f"distribution {self!r} to satisfy the constraint GreaterThan(lower_bound=0.0), but found "
                             f"invalid values:\n{self.df}")

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(Chi2, _instance))

    @property
    def df(self):
        return self.concentration * 2
