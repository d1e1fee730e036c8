"""Batches of variable-length sequences, as torch.nn.utils.rnn: padding them (pad_sequence,
unpad_sequence) and packing them step by step (PackedSequence, pack_padded_sequence,
pad_packed_sequence, pack_sequence, unpack_sequence). Lengths are read on the host."""

import collections

import loom


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences of shape (L_i, *) into (L_max, B, *) (or (B, L_max, *) with
    batch_first), padding each with padding_value after its end (or before its start with
    padding_side="left"). Differentiable: gradients reach each sequence."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, loom.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: every sequence must have the trailing shape {list(trailing)}, got "
                               f"{list(s.shape)}")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = loom.full((missing, *trailing), padding_value, dtype=s.dtype, device=s.device)
            s = loom.cat([s, fill] if padding_side == "right" else [fill, s])
        padded.append(s)
    return loom.stack(padded, 0 if batch_first else 1)


class PackedSequence(collections.namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices",
                                                               "unsorted_indices"])):
    """Variable-length sequences packed time step by time step, as torch.nn.utils.rnn's: data
    (sum of lengths, *) holds step 0 of every sequence, then step 1 of those that have one, ...;
    batch_sizes (a CPU int64 tensor) how many sequences each step has; sorted_indices the batch
    order by decreasing length (None when the input was sorted) and unsorted_indices its inverse."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """The data moved or cast; the index tensors follow the data's device (batch_sizes stays on the CPU)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(data.device))
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _invert_permutation(permutation):
    order = [0] * len(permutation)
    for i, p in enumerate(permutation.tolist()):
        order[p] = i
    return loom.tensor(order, dtype=loom.int64, device=permutation.device)


def _lengths_list(lengths):
    if isinstance(lengths, loom.Tensor):
        if lengths.dim() != 1:
            raise RuntimeError(f"'lengths' argument should be a 1D tensor, but got a {lengths.dim()}D tensor")
        if lengths.device.type != "cpu" or lengths.is_lazy:
            raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got 1D "
                               f"{lengths.device} {str(lengths.dtype).split('.')[-1]} tensor")
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences of the given
    lengths. With enforce_sorted the lengths must decrease; otherwise the batch is sorted first
    and the order kept in sorted_indices. The lengths are read on the host (a CPU tensor or a list)."""
    lengths = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    if len(lengths) != input.shape[batch_dim]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={input.shape[batch_dim]})")
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable: ties keep their order
        sorted_indices = loom.tensor(order, dtype=loom.int64, device=input.device)
        input = input.index_select(batch_dim, sorted_indices)
        lengths = [lengths[i] for i in order]
    if lengths and lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if batch_first:
        input = input.transpose(0, 1)
    if lengths[0] > input.shape[0]:
        raise RuntimeError(f"Expected sequence length to be at least {lengths[0]}, got {input.shape[0]}")
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = loom.cat([input[t, :b] for t, b in enumerate(batch_sizes)])
    return PackedSequence(data, loom.tensor(batch_sizes, dtype=loom.int64, device="cpu"), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded (T, B, *) or (B, T, *), lengths (a CPU int64
    tensor)), in the batch order the sequences were packed from. total_length pads T further."""
    data, batch_sizes = sequence.data, [int(b) for b in sequence.batch_sizes.tolist()]
    longest = len(batch_sizes)
    if total_length is not None:
        if total_length < longest:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {longest}")
    else:
        total_length = longest
    batch = batch_sizes[0] if batch_sizes else 0
    trailing = tuple(data.shape[1:])
    steps, offset = [], 0
    for b in batch_sizes:
        step = data[offset:offset + b]
        offset += b
        if b < batch:
            step = loom.cat([step, loom.full((batch - b, *trailing), padding_value, dtype=data.dtype,
                                             device=data.device)])
        steps.append(step)
    for _ in range(total_length - longest):
        steps.append(loom.full((batch, *trailing), padding_value, dtype=data.dtype, device=data.device))
    padded = loom.stack(steps)
    lengths = [sum(1 for b in batch_sizes if b > i) for i in range(batch)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        order = sequence.unsorted_indices.tolist()
        lengths = [lengths[i] for i in order]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, loom.tensor(lengths, dtype=loom.int64, device="cpu")


def pack_sequence(sequences, enforce_sorted=True):
    """pack_padded_sequence of the padded sequences, with their lengths."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The sequences of a padded batch, each cut to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:n] for seq, n in zip(padded_sequences, _lengths_list(lengths))]


def unpack_sequence(packed_sequences):
    """The sequences of a PackedSequence, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
