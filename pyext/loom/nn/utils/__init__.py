"""loom.nn.utils (torch.nn.utils): gradient clipping, parameters <-> one vector, sequence
padding and packing, the weight_norm / spectral_norm reparametrizations by hooks, and
parametrizations (parametrize.py: register_parametrization; parametrizations.py: weight_norm and
spectral_norm as parametrizations), stateless.functional_call, pruning by masks (prune.py),
folding an eval-mode batch norm into the layer before it (fusion.py) and skip_init."""

from loom.nn.utils import fusion, init, parametrizations, parametrize, prune, rnn, stateless
from loom.nn.utils.clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_
from loom.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from loom.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from loom.nn.utils.init import skip_init
from loom.nn.utils.weight_norm import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
           "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights",
           "skip_init", "fusion", "init", "parametrizations", "parametrize", "prune", "rnn", "stateless",
           "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]
