"""Guided alignment: an extra loss that pulls one attention towards given word alignments.

Garg et al. 2019 ("Jointly Learning to Align and Translate with Transformer Models", §4)
supervise one cross-attention head of the Transformer's second-to-last layer with the
alignments of a statistical aligner (never gold links): for each target position t with
a link, the guide G_t spreads one unit evenly over the aligned source positions, and

    L_guide = -(1 / #guided t) Σ_t Σ_s G_ts · log A_ts,     L = L_ce + λ · L_guide

with λ = `train.guided_weight`. Here the guide comes from `attnmt align` (eflomal's links
of the training text, by sentence id), the words are mapped to subword pieces (a target
piece takes its word's links; a source word's weight is split evenly over its pieces),
and the attention supervised is the one `attnmt evaluate` reads alignments off: the RNNs'
only attention, or the Transformer's second-to-last layer, head 1.

    links = read_guide("runs/eflomal-grc-en/grow-diag-final-and.align")  # id -> links
    guide = Guide(train_examples, vocab, links)
    target = guide.targets(batch.indices, T, S)      # (B, T, S), rows sum to 1 or 0
    loss_sum, count = guided_loss(weights, target)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from attnmt.alignment.links import source_words
from attnmt.data.alignments import Link, read_pharaoh
from attnmt.data.types import Example
from attnmt.errors import DataError

IDS = "ids.txt"  # beside the links: one sentence id per line, as `attnmt align` writes


def read_guide(path: str | Path) -> dict[str, set[Link]]:
    """The links of a Pharaoh file by sentence id (`ids.txt` in the same folder)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(
            f"train.guided_alignment: '{path}' is not a file; make the links with `attnmt "
            "align` (e.g. runs/eflomal-grc-en/grow-diag-final-and.align)"
        )
    ids_path = path.parent / IDS
    if not ids_path.is_file():
        raise DataError(
            f"train.guided_alignment: no {IDS} beside '{path}'; the links are matched to "
            "training pairs by id, so use a folder written by `attnmt align`"
        )
    ids = ids_path.read_text(encoding="utf-8").splitlines()
    links = read_pharaoh(path)
    if len(ids) != len(links):
        raise DataError(
            f"train.guided_alignment: {ids_path} has {len(ids)} ids but {path} has "
            f"{len(links)} lines; write both again with `attnmt align`"
        )
    return dict(zip(ids, links, strict=True))


class Guide:
    """Subword-level guide distributions of the training examples that have links.

    For example n, `self.pairs[n]` holds arrays (t, s, w): target piece t puts weight w on
    source piece s (`None` when the example has no links). The EOS row and column are
    never guided. `offset` shifts the guide to the decoder step t + offset (a model whose
    step t attends to the source of word t − offset), as `attnmt evaluate` reads it.
    """

    def __init__(
        self,
        examples: Sequence[Example],
        vocab,
        links_by_id: dict[str, set[Link]],
        *,
        offset: int = 0,
    ) -> None:
        self.offset = offset
        self.pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = []
        self.bad_links = 0
        for ex in examples:
            links = links_by_id.get(ex.id)
            self.pairs.append(None if not links else self._pieces(ex, vocab, links))
        self.guided = sum(p is not None for p in self.pairs)

    def _pieces(self, ex: Example, vocab, links: set[Link]):
        source = source_words(vocab.src, ex.src, len(ex.src_ids))
        target = source_words(vocab.tgt, ex.tgt, len(ex.tgt_ids))
        if any(i >= len(source.words) or j >= len(target.words) for i, j in links):
            self.bad_links += 1  # links made for other words: the pair is not guided
            return None
        src_pieces: dict[int, list[int]] = {}
        for piece, word in enumerate(source.word_of):
            if word >= 0:
                src_pieces.setdefault(word, []).append(piece)
        sources_of: dict[int, list[int]] = {}
        for i, j in links:
            sources_of.setdefault(j, []).extend(src_pieces.get(i, []))
        t_idx, s_idx, weight = [], [], []
        for t, word in enumerate(target.word_of):
            pieces = sources_of.get(word) if word >= 0 else None
            if pieces and 0 <= t + self.offset < len(target.word_of) + 1:
                t_idx += [t + self.offset] * len(pieces)
                s_idx += pieces
                weight += [1.0 / len(pieces)] * len(pieces)
        if not t_idx:
            return None
        return np.array(t_idx), np.array(s_idx), np.array(weight, dtype=np.float32)

    def targets(self, indices: Sequence[int], steps: int, positions: int) -> Tensor:
        """The guide of a batch: (B, T, S), each guided row summing to 1, the others 0."""
        target = torch.zeros(len(indices), steps, positions)
        for row, index in enumerate(indices):
            found = self.pairs[index]
            if found is not None:
                t, s, w = found
                target[row, t, s] = torch.from_numpy(w)
        return target


def guided_loss(weights: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """(Σ_b,t,s G log A negated, the number of guided rows) for one batch.

    Shapes:
        weights (B, T, S) attention (rows sum to 1), target (B, T, S) -> (), ()
    """
    log_attention = torch.log(weights.float().clamp_min(1e-9))
    total = -(target * log_attention).sum()
    rows = (target.sum(dim=-1) > 0).sum()
    return total, rows
