"""ChannelShuffle (torch.nn.modules.channelshuffle)."""

from loom.nn import functional as F
from loom.nn.modules.module import Module


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
