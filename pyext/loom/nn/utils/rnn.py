"""Padding a batch of variable-length sequences (torch.nn.utils.rnn.pad_sequence)."""

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
