"""The plain objects every part of `attnmt.data` passes around: a sentence pair
(`Example`) and a padded batch (`Batch`, made by `attnmt.data.batching.collate`). Plain
dataclasses: importing them costs no torch, so preparing data never loads it (the tensors
a `Batch` holds are made in `attnmt.data.batching`). The special ids are in
`attnmt.data.vocab`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a Batch's tensors come from attnmt.data.batching
    import torch
    from torch import Tensor


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
