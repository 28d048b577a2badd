"""Scores: sacrebleu BLEU and chrF against every reference, and exact match.

References come as one list per sentence (the first is the main reference; the others are
extra ones, e.g. Darby beside Segond). sacrebleu takes reference *streams*, so sentences
with fewer references are padded with None, which sacrebleu skips.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sacrebleu


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists -> sacrebleu's list of streams (padded with None)."""
    width = max((len(refs) for refs in references), default=1)
    return [[refs[i] if i < len(refs) else None for refs in references] for i in range(width)]


def corpus_scores(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> dict:
    """BLEU, chrF (with their sacrebleu signatures) and exact match of a whole corpus."""
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} reference lists; "
            "they must be one per sentence"
        )
    if not hypotheses:
        return {"bleu": 0.0, "chrf": 0.0, "exact": 0.0, "sentences": 0}
    streams = reference_streams(references)
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(list(hypotheses), streams)
    chrf_score = chrf.corpus_score(list(hypotheses), streams)
    exact = sum(
        h.strip() == refs[0].strip() for h, refs in zip(hypotheses, references, strict=True)
    )
    result: dict[str, Any] = {
        "bleu": round(bleu_score.score, 2),
        "chrf": round(chrf_score.score, 2),
        "exact": round(100.0 * exact / len(hypotheses), 2),
        "sentences": len(hypotheses),
        "references": len(streams),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }
    return result
