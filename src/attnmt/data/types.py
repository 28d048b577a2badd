"""The plain objects every part of `attnmt.data` passes around: a sentence pair
(`Example`), a padded batch (`Batch`, made by `collate`) and `pad`, the one padding
function training and decoding share. The special ids are in `attnmt.data.vocab`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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
    sources = [[*ex.src_ids, EOS] for ex in examples]
    tgt_in = [[BOS, *ex.tgt_ids] for ex in examples]
    tgt_out = [[*ex.tgt_ids, EOS] for ex in examples]
    src, src_mask = pad(sources)
    tin, tgt_mask = pad(tgt_in)
    tout, _ = pad(tgt_out)
    return Batch(src, src_mask, tin, tout, tgt_mask, list(indices or range(len(examples))))


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
