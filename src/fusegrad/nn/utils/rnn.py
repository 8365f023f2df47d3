"""Variable-length sequences for the recurrent layers: PackedSequence and the functions that
pack, pad and unpack, as `torch.nn.utils.rnn` provides them.

A PackedSequence holds the steps of a batch of sequences sorted by decreasing length, time
step after time step: `data` has one row per (step, sequence) pair that exists, and
`batch_sizes[t]` says how many sequences are still running at step t. Packing is one op
(`_pack_padded_sequence`, node `PackPaddedSequenceBackward0`); padding is composed of `full`,
slices and `copy_`, so its graph has PyTorch's `CopySlices` nodes.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ... import _creation, _dtype
from ..._dispatch import call
from ..._tensor import Tensor
from ...ops import rnn as _R

_PackedSequenceBase = namedtuple("PackedSequence_",
                                 ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of the permutation `permutation` (None stays None): `inv[perm[i]] = i`,
    scattered as PyTorch does (so the permutation must be int64, as its positions are)."""
    if permutation is None:
        return None
    out = _creation.empty_like(permutation)
    return out.scatter_(0, permutation, _creation.arange(0, permutation.numel()))


def _invert_permutation(permutation: Tensor | None) -> Tensor | None:
    if permutation is None:
        return None
    perm = permutation.numpy().astype(np.int64)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=np.int64)
    return Tensor._make(inv)


def _permute(tensor: Tensor, permutation: Tensor | None, dim: int = 1) -> Tensor:
    """`tensor` with its batch dimension reordered by `permutation` (None: unchanged)."""
    return tensor if permutation is None else tensor.index_select(dim, permutation)


class PackedSequence(_PackedSequenceBase):
    """Packed data of a batch of variable-length sequences (see the module docstring).

    `sorted_indices[i]` is the original batch position of the i-th longest sequence;
    `unsorted_indices` is its inverse (both None when the batch was already sorted).
    """

    def __new__(cls, data: Tensor, batch_sizes: Tensor | None = None,
                sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> PackedSequence:
        if unsorted_indices is None:
            unsorted_indices = _invert_permutation(sorted_indices)
        if batch_sizes is not None:
            if batch_sizes.device.type != "cpu":
                raise ValueError(
                    "batch_sizes should always be on CPU. Instances of PackedSequence should "
                    "never be created manually. They should be instantiated by functions "
                    "like pack_sequence and pack_padded_sequences in nn.utils.rnn. "
                    "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
            return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)
        # PackedSequence(data_tuple): the fields given as one tuple
        if not (isinstance(data, (list, tuple)) and len(data) == 2):
            raise TypeError("PackedSequence expects (data, batch_sizes) or a 2-tuple")
        return super().__new__(cls, data[0], data[1], sorted_indices, unsorted_indices)

    def _with_data(self, data: Tensor) -> PackedSequence:
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """The same packing with `data.to(*args, **kwargs)` (indices stay int64 on CPU)."""
        return self._with_data(self.data.to(*args, **kwargs))

    def cpu(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """This sequence (fusegrad tensors live on the CPU)."""
        return self

    def double(self) -> PackedSequence:
        """`data` as float64."""
        return self._with_data(self.data.double())

    def float(self) -> PackedSequence:
        """`data` as float32."""
        return self._with_data(self.data.float())

    def half(self) -> PackedSequence:
        """`data` as float16."""
        return self._with_data(self.data.half())

    def long(self) -> PackedSequence:
        """`data` as int64."""
        return self._with_data(self.data.long())

    def int(self) -> PackedSequence:
        """`data` as int32."""
        return self._with_data(self.data.int())

    @property
    def is_cuda(self) -> bool:
        """Always False (CPU only)."""
        return False

    def is_pinned(self) -> bool:
        """Always False (no pinned memory)."""
        return False


def _as_lengths(lengths) -> Tensor:
    """Lengths as a 1-D int64 tensor (lists, arrays and tensors of any number type)."""
    if isinstance(lengths, Tensor):
        return lengths if lengths.dtype is _dtype.int64 else lengths.to(_dtype.int64)
    return _creation.tensor(np.asarray(lengths).astype(np.int64))


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *) with batch_first) of the given lengths.

    With `enforce_sorted` the lengths must be decreasing; otherwise the batch is sorted here
    and the permutation is kept in the result.
    """
    lengths = _as_lengths(lengths)
    sorted_indices = None
    if not enforce_sorted:
        lens = lengths.numpy()
        # Sorted along the last dimension, as PyTorch's `sort`, so lengths of another rank
        # reach index_select and the op's checks (and their messages) as they do there.
        if lens.ndim:
            order = np.argsort(-lens, axis=-1, kind="stable").astype(np.int64)
            lens = np.ascontiguousarray(np.take_along_axis(lens, order, -1))
        else:
            order = np.zeros((), np.int64)
        sorted_indices = Tensor._make(order)
        lengths = Tensor._make(lens)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    steps = input.shape[1 if batch_first else 0] if input.dim() > 1 else None
    lens = lengths.numpy()
    if (steps is not None and lens.ndim == 1 and lens.size and lens.max() > steps
            and (np.diff(lens) <= 0).all()):
        # PyTorch packs the steps the input has, clamping the lengths to them, but counts
        # the batch sizes from the lengths as given.
        clamped = Tensor._make(np.minimum(lens, steps))
        data, _ = call(_R.pack_padded_sequence, input, clamped, batch_first)
        counts = (lens[None, :] > np.arange(int(lens.max()))[:, None]).sum(1)
        return PackedSequence(data, Tensor._make(counts.astype(np.int64)), sorted_indices,
                              None)
    data, batch_sizes = call(_R.pack_padded_sequence, input, lengths, batch_first)
    if batch_sizes.is_meta:  # (counted on the CPU from the lengths, as PyTorch's are)
        steps_run = int(lens.max()) if lens.size else 0
        batch_sizes = Tensor._make((lens[None, :] > np.arange(steps_run)[:, None]).sum(1)
                                   .astype(np.int64))
    return PackedSequence(data, batch_sizes, sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Undo `pack_padded_sequence`: (padded batch, lengths), in the original batch order."""
    data, batch_sizes = sequence.data, sequence.batch_sizes
    sizes = [int(b) for b in batch_sizes.tolist()]
    max_len = len(sizes)
    if total_length is not None:
        if total_length < max_len:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {max_len}")
        max_len = total_length
    batch = sizes[0] if sizes else 0
    rest = tuple(data.shape[1:])
    out = _creation.full((max_len, batch) + rest, padding_value, dtype=data.dtype,
                         device=data.device)
    # Copy runs of steps with the same batch size at once (one slice, view and copy each).
    offset, start = 0, 0
    for t in range(1, len(sizes) + 1):
        if t < len(sizes) and sizes[t] == sizes[start]:
            continue
        bs, steps = sizes[start], t - start
        chunk = data.narrow(0, offset, bs * steps).view((steps, bs) + rest)
        out.narrow(0, start, steps).narrow(1, 0, bs).copy_(chunk)
        offset += bs * steps
        start = t
    counts = np.asarray(sizes, np.int64)
    lengths = (counts[None, :] > np.arange(batch)[:, None]).sum(1).astype(np.int64)
    if batch_first:
        out = out.transpose(0, 1)
    unsorted = sequence.unsorted_indices
    if unsorted is not None:
        out = out.index_select(0 if batch_first else 1, unsorted)
        lengths = lengths[unsorted.numpy()]
    return out, Tensor._make(lengths)


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences of different lengths (L_i, *) into (L_max, B, *) (or (B, L_max, *)),
    padding each on `padding_side` with `padding_value`."""
    if padding_side not in ("left", "right"):
        raise RuntimeError("Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    sequences = list(sequences.unbind(0)) if isinstance(sequences, Tensor) else list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    max_len = max(s.shape[0] for s in sequences)
    rest = tuple(sequences[0].shape[1:])
    n = len(sequences)
    shape = (n, max_len) + rest if batch_first else (max_len, n) + rest
    out = _creation.full(shape, padding_value, dtype=sequences[0].dtype)
    for i, seq in enumerate(sequences):
        length = seq.shape[0]
        start = max_len - length if padding_side == "left" else 0
        if batch_first:
            out.select(0, i).narrow(0, start, length).copy_(seq)
        else:
            out.narrow(0, start, length).select(1, i).copy_(seq)
    return out


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences (L_i, *) (decreasing lengths unless enforce_sorted=False)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor,
                   batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its sequences (the inverse of `pad_sequence`)."""
    if not batch_first:
        # (in place, as PyTorch: the caller's tensor is left transposed)
        padded_sequences.transpose_(0, 1)
    idx = _creation.arange(padded_sequences.shape[1])
    return [seq[idx < length] for seq, length in zip(padded_sequences, lengths)]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The sequences of a PackedSequence, as a list (the inverse of `pack_sequence`)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence"]
