"""Validation during training: dev loss and perplexity by teacher forcing, then greedy
decoding scored with BLEU, chrF and exact match (sacrebleu, as `attnmt evaluate`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from attnmt.config import Config
from attnmt.data import eval_batches
from attnmt.data.buckets import DECODE_BATCH_TOKENS
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.translator import source_limit
from attnmt.metrics import bleu_tokenizer, corpus_scores
from attnmt.training.losses import vocab_cross_entropy


@torch.no_grad()
def validate(model, data, cfg: Config, device: torch.device) -> dict[str, Any]:
    """Dev loss and perplexity (teacher forcing), then greedy BLEU/chrF/exact match."""

    # Dev is never length-filtered: cut sources to what the model can read, as evaluate does.
    limit = source_limit(cfg.model)
    examples = [
        ex if len(ex.src_ids) <= limit else dataclasses.replace(ex, src_ids=ex.src_ids[:limit])
        for ex in data.dev[: cfg.train.valid_sentences or None]
    ]
    was_training = model.training
    model.eval()
    nll_sum, tokens = 0.0, 0
    for batch in eval_batches(examples, batch_tokens=cfg.data.batch_tokens):
        batch = batch.to(device)
        out = model(batch.src, batch.src_mask, batch.tgt_in, logits=False)
        nll_sum += float(vocab_cross_entropy(out, batch.tgt_out, 0.0)[0])
        tokens += int(batch.tgt_mask.sum())
    model.train(was_training)
    sources = [ex.src_ids for ex in examples]
    translations = translate_ids(
        model, sources, data.vocab.decode_tgt, batch_tokens=DECODE_BATCH_TOKENS
    )
    hyps = [t.text for t in translations]
    references = [[ex.tgt, *ex.refs] for ex in examples]
    scores = corpus_scores(hyps, references, tokenize=bleu_tokenizer(cfg.data.tgt))
    loss = nll_sum / max(1, tokens)
    examples_out = [
        {"source": ex.src, "reference": ex.tgt, "output": hyp}
        for ex, hyp in zip(examples[: cfg.train.valid_examples], hyps, strict=False)
    ]
    return {
        "loss": round(loss, 4),
        "ppl": round(math.exp(min(loss, 50.0)), 2),
        **{k: scores[k] for k in ("bleu", "chrf", "exact", "bleu_signature")},
        "examples": examples_out,
    }


def _improved(metric: str, value: float, best: float | None) -> bool:
    if best is None:
        return True
    return value < best if metric == "loss" else value > best
