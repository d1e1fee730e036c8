"""loom.nn.utils (torch.nn.utils): gradient clipping, parameters <-> one vector, sequence
padding and packing, and the weight_norm / spectral_norm reparametrizations."""

from loom.nn.utils import rnn
from loom.nn.utils.clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_
from loom.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from loom.nn.utils.weight_norm import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
           "rnn", "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]
