"""loom.memory_format and its values, as torch's (`model.to(memory_format=torch.channels_last)`).

loom keeps every tensor in one (row-major) layout: the formats are accepted by Tensor.to,
contiguous, clone and Module.to, and change nothing."""


class memory_format:
    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "torch." + self._name

    def __reduce__(self):
        return self._name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
