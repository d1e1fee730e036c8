"""loom.nn.modules: the layer classes, one family per file as in torch.nn.modules."""

from loom.nn.modules.module import Module
from loom.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss
from loom.nn.modules.activation import (CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                                        LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, RReLU, SiLU,
                                        Sigmoid, Softmax, Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh,
                                        Tanhshrink, Threshold)
from loom.nn.modules.attention import MultiheadAttention
from loom.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from loom.nn.modules.channelshuffle import ChannelShuffle
from loom.nn.modules.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from loom.nn.modules.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from loom.nn.modules.distance import CosineSimilarity, PairwiseDistance
from loom.nn.modules.dropout import (AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d,  # noqa: F401
                                     FeatureAlphaDropout)
from loom.nn.modules.flatten import Flatten, Unflatten
from loom.nn.modules.fold import Fold, Unfold
from loom.nn.modules.instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from loom.nn.modules.linear import Bilinear, Identity, Linear
from loom.nn.modules.loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, CTCLoss,
                                  GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss,
                                  MarginRankingLoss, MSELoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss,
                                  MultiMarginLoss, NLLLoss, NLLLoss2d, PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss,
                                  TripletMarginLoss, TripletMarginWithDistanceLoss)
from loom.nn.modules.normalization import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm
from loom.nn.modules.padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,
                                     ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
                                     ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
                                     ZeroPad3d)
from loom.nn.modules.pixelshuffle import PixelShuffle, PixelUnshuffle
from loom.nn.modules.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
                                     AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d,
                                     FractionalMaxPool2d, FractionalMaxPool3d, LPPool1d, LPPool2d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from loom.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from loom.nn.modules.sparse import Embedding, EmbeddingBag
from loom.nn.modules.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from loom.nn.modules.transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                                         TransformerEncoder, TransformerEncoderLayer)

__all__ = [
    "Module", "Identity", "Linear", "Bilinear", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm",
    "LocalResponseNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
    "InstanceNorm3d", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Flatten",
    "Unflatten", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "RNNBase", "RNN",
    "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "Transformer",
    "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer",
    # convolution, pooling, padding, resampling, losses (ops-nn)
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Fold", "Unfold",
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "FractionalMaxPool2d", "FractionalMaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d", "ConstantPad1d", "ConstantPad2d",
    "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
    "PixelShuffle", "PixelUnshuffle", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "L1Loss", "MSELoss",
    "NLLLoss", "NLLLoss2d", "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss", "SmoothL1Loss", "HuberLoss",
    "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss", "SoftMarginLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
    "CosineEmbeddingLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "TripletMarginLoss",
    "TripletMarginWithDistanceLoss", "ChannelShuffle", "MultiLabelMarginLoss", "CTCLoss",
    "CosineSimilarity", "PairwiseDistance", "AdaptiveLogSoftmaxWithLoss",
]
__all__ += ["ELU", "CELU", "SELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
            "LogSigmoid", "Mish", "PReLU", "ReLU6", "RReLU", "Softmax2d", "Softmin", "Softplus", "Softshrink",
            "Softsign", "Tanhshrink", "Threshold"]  # the activations of issue 13
