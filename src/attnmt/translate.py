"""Translating lists of sentences with a model: batching, decoding, detokenizing, order kept.

Used by validation during training and by the `translate` and `evaluate` commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnmt.decode import EOS, Hypothesis, beam_search, greedy

PAD = 0


@dataclass
class Translation:
    """One translated sentence: text, token ids, score and (when asked) attention weights."""

    text: str
    tokens: list[int]
    score: float
    weights: Tensor | None = None  # (T, S) RNN, (T, L, H, S) Transformer
    nbest: list[Hypothesis] | None = None


def pad_batch(sequences: Sequence[Sequence[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad id lists into a (B, S) tensor and its mask (True = real token)."""
    width = max(1, max(len(s) for s in sequences))
    ids = torch.full((len(sequences), width), PAD, dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    mask = torch.arange(width)[None, :] < torch.tensor([len(s) for s in sequences])[:, None]
    return ids.to(device), mask.to(device)


def batches_by_length(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Group sentence indices into batches of similar length under a padded-token budget."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = max(lengths[index], *(lengths[i] for i in current)) if current else lengths[index]
        if current and width * (len(current) + 1) > max_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


@torch.no_grad()
def translate_ids(
    model: torch.nn.Module,
    sources: Sequence[Sequence[int]],
    decode_text,
    *,
    beam_size: int = 1,
    alpha: float = 0.6,
    n_best: int = 1,
    max_len_ratio: float = 2.0,
    need_weights: bool = False,
    max_tokens: int = 4000,
    progress=None,
) -> list[Translation]:
    """Translate source id lists (without EOS: it is added, as the batcher does) in batches.

    `decode_text(ids) -> str` detokenizes; `progress` (a tqdm bar or None) is advanced by
    the number of sentences in each batch. The output keeps the input order.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    results: list[Translation | None] = [None] * len(sources)
    # Beam search multiplies the rows by K: keep the padded-token budget per beam row.
    budget = max(1, max_tokens // max(1, beam_size))
    sources = [[*s, EOS] for s in sources]
    try:
        for batch in batches_by_length([len(s) for s in sources], budget):
            src, src_mask = pad_batch([sources[i] for i in batch], device)
            if beam_size == 1 and n_best == 1:
                hyps = [
                    [h]
                    for h in greedy(
                        model, src, src_mask, max_len_ratio=max_len_ratio, need_weights=need_weights
                    )
                ]
            else:
                hyps = beam_search(
                    model,
                    src,
                    src_mask,
                    beam_size=beam_size,
                    alpha=alpha,
                    n_best=n_best,
                    max_len_ratio=max_len_ratio,
                    need_weights=need_weights,
                )
            for index, nbest in zip(batch, hyps, strict=True):
                best = nbest[0]
                results[index] = Translation(
                    text=decode_text(best.tokens),
                    tokens=best.tokens,
                    score=best.score,
                    weights=best.weights,
                    nbest=nbest if n_best > 1 else None,
                )
            if progress is not None:
                progress.update(len(batch))
    finally:
        model.train(was_training)
    return [r for r in results if r is not None]
