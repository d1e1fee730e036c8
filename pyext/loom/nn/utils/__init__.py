"""loom.nn.utils (torch.nn.utils): gradient clipping, parameters <-> one vector, and sequence
padding."""

from loom.nn.utils import rnn
from loom.nn.utils.clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_
from loom.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
           "rnn"]
