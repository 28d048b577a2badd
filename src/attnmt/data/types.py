"""The plain objects every part of `attnmt.data` passes around.

Special symbols have fixed ids in every vocabulary (sentencepiece models are trained with
these ids, synthetic vocabularies use them too), so models, decoders and batches agree:

    PAD = 0   padding (never attended to, ignored by the loss)
    UNK = 1   unknown piece
    BOS = 2   begin of sentence (the first decoder input)
    EOS = 3   end of sentence (appended to every source and target)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

PAD, UNK, BOS, EOS = 0, 1, 2, 3


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


def collate(examples: list[Example], indices: list[int] | None = None) -> Batch:
    """Pad a list of examples into a `Batch` (see its docstring for the layout)."""
    sources = [[*ex.src_ids, EOS] for ex in examples]
    tgt_in = [[BOS, *ex.tgt_ids] for ex in examples]
    tgt_out = [[*ex.tgt_ids, EOS] for ex in examples]
    src, src_mask = _pad(sources)
    tin, tgt_mask = _pad(tgt_in)
    tout, _ = _pad(tgt_out)
    return Batch(src, src_mask, tin, tout, tgt_mask, list(indices or range(len(examples))))


def _pad(rows: list[list[int]]) -> tuple[Tensor, Tensor]:
    width = max(1, max((len(r) for r in rows), default=1))
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    lengths = torch.tensor([len(r) for r in rows])
    mask = torch.arange(width)[None, :] < lengths[:, None]  # (B, width)
    return ids, mask
