"""The plain objects every part of `attnmt.data` passes around: a sentence pair
(`Example`), a padded batch (`Batch`, made by `collate`) and `pad`, the one padding
function training and decoding share. The special ids are in `attnmt.data.vocab`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from attnmt.data.vocab import BOS, EOS, PAD


@dataclass
class Example:
    """One sentence pair.

    Fields:
        src, tgt: the text (after cleaning), detokenized.
        refs: extra references beside `tgt` (e.g. Darby beside Segond); empty if none.
        src_ids, tgt_ids: subword ids, without BOS/EOS (batching adds them).
        id: where the pair comes from, e.g. "John 3:16" or "train.en:12".
    """

    src: str
    tgt: str
    refs: list[str] = field(default_factory=list)
    src_ids: list[int] = field(default_factory=list)
    tgt_ids: list[int] = field(default_factory=list)
    id: str = ""


@dataclass
class Batch:
    """Padded tensors of a list of examples (PAD = 0; masks: True = real token).

    `src` is `src_ids + [EOS]`; `tgt_in` is `[BOS] + tgt_ids`; `tgt_out` is
    `tgt_ids + [EOS]`. `indices` are the positions of the examples in the list the batch was
    drawn from.

    Shapes:
        src, src_mask: (B, S); tgt_in, tgt_out, tgt_mask: (B, T)
    """

    src: Tensor
    src_mask: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    tgt_mask: Tensor
    indices: list[int] = field(default_factory=list)

    def to(self, device: torch.device) -> Batch:
        """The same batch with its tensors on `device` (itself when they are there)."""
        if self.src.device == device:
            return self
        moved = {f: getattr(self, f).to(device) for f in _TENSORS}
        return Batch(**moved, indices=self.indices)


_TENSORS = ("src", "src_mask", "tgt_in", "tgt_out", "tgt_mask")


def collate(examples: list[Example], indices: list[int] | None = None) -> Batch:
    """Pad a list of examples into a `Batch` (see its docstring for the layout)."""
    rows = list(indices) if indices is not None else list(range(len(examples)))
    return batch_of_ids([ex.src_ids for ex in examples], [ex.tgt_ids for ex in examples], rows)


def batch_of_ids(
    sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], indices: list[int]
) -> Batch:
    """A `Batch` from id sequences (lists or numpy arrays, without BOS/EOS): `src` gets EOS,
    `tgt_in` BOS, `tgt_out` EOS, each padded with PAD to its longest row."""
    count = len(sources)
    src_len = np.fromiter(map(len, sources), np.int64, count)
    tgt_len = np.fromiter(map(len, targets), np.int64, count)
    src = np.full((count, int(src_len.max(initial=0)) + 1), PAD, dtype=np.int64)
    tgt_in = np.full((count, int(tgt_len.max(initial=0)) + 1), PAD, dtype=np.int64)
    tgt_out = tgt_in.copy()
    for row, (s, t) in enumerate(zip(sources, targets, strict=True)):
        src[row, : len(s)] = s
        tgt_in[row, 1 : len(t) + 1] = t
        tgt_out[row, : len(t)] = t
    rows = np.arange(count)
    src[rows, src_len] = EOS
    tgt_in[:, 0] = BOS
    tgt_out[rows, tgt_len] = EOS
    src_mask = np.arange(src.shape[1])[None, :] <= src_len[:, None]  # (B, S)
    tgt_mask = np.arange(tgt_in.shape[1])[None, :] <= tgt_len[:, None]  # (B, T)
    return Batch(
        torch.from_numpy(src),
        torch.from_numpy(src_mask),
        torch.from_numpy(tgt_in),
        torch.from_numpy(tgt_out),
        torch.from_numpy(tgt_mask),
        list(indices),
    )


def pad(rows: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
    """Right-pad id lists with PAD into a (B, width) tensor and its mask (True = real token).

    Shapes:
        -> ids (B, width), mask (B, width); width = the longest row (at least 1)
    """
    width = max(1, max((len(r) for r in rows), default=1))
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    lengths = torch.tensor([len(r) for r in rows])
    mask = torch.arange(width)[None, :] < lengths[:, None]  # (B, width)
    return ids, mask
