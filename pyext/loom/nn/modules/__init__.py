"""loom.nn.modules: the layer classes, one family per file as in torch.nn.modules."""

from loom.nn.modules.module import Module
from loom.nn.modules.activation import (CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                                        LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, RReLU, SiLU,
                                        Sigmoid, Softmax, Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh,
                                        Tanhshrink, Threshold)
from loom.nn.modules.attention import MultiheadAttention
from loom.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from loom.nn.modules.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from loom.nn.modules.distance import CosineSimilarity, PairwiseDistance
from loom.nn.modules.dropout import Dropout
from loom.nn.modules.flatten import Flatten, Unflatten
from loom.nn.modules.instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from loom.nn.modules.linear import Bilinear, Identity, Linear
from loom.nn.modules.normalization import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm
from loom.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from loom.nn.modules.sparse import Embedding, EmbeddingBag
from loom.nn.modules.transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                                         TransformerEncoder, TransformerEncoderLayer)

__all__ = [
    "Module", "Identity", "Linear", "Bilinear", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm",
    "LocalResponseNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
    "InstanceNorm3d", "Dropout", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Flatten",
    "Unflatten", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "RNNBase", "RNN",
    "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "Transformer",
    "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer",
    "CosineSimilarity", "PairwiseDistance",
]
__all__ += ["ELU", "CELU", "SELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
            "LogSigmoid", "Mish", "PReLU", "ReLU6", "RReLU", "Softmax2d", "Softmin", "Softplus", "Softshrink",
            "Softsign", "Tanhshrink", "Threshold"]  # the activations of issue 13
