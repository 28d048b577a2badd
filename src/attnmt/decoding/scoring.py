"""Scoring given translations: forced decoding of (source, target) pairs.

    scored = score_pairs(model, [(src_ids, tgt_ids)], alpha=0.6, need_weights=True)
    scored[0].log_prob, scored[0].token_log_probs, scored[0].score, scored[0].weights

The model reads each target as if it had written it (teacher forcing, the same pass that
`forced_weights` uses for the attention scored against gold links), and what it gives each
target subword and the final EOS is read off its log-softmax. The numbers are those of
the search: `log_prob` is log P(target, EOS | source), `score` divides it by GNMT's length
penalty as greedy and beam search do (`hypotheses.length_penalty`), so scoring a model's own
translation gives back the score `translate` printed for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attnmt.cancel import checkpoint
from attnmt.data.batching import pad_batch
from attnmt.data.buckets import DECODE_BATCH_TOKENS, batches_by_length
from attnmt.data.vocab import BOS, EOS
from attnmt.decoding.hypotheses import Hypothesis, length_penalty, score_by_steps
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.step_model import StepModel
from attnmt.errors import UserError


@torch.no_grad()
def forced_decode(
    model: torch.nn.Module,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    need_weights: bool = False,
    need_log_probs: bool = True,
    batch_tokens: int = DECODE_BATCH_TOKENS,
) -> list[tuple[Tensor | None, Tensor | None]]:
    """For each (source ids, target ids) pair, without BOS/EOS: the log-probability of each
    target subword and the final EOS (None with `need_log_probs=False`: `forced_weights`
    reads the attention only, and skips the (B, T, V) log-softmax), and (when asked) the
    attention that read them.

    Shapes:
        returns per pair: (T + 1,) log-probabilities; weights (T + 1, S + 1) RNN,
        (T + 1, L, H, S + 1) Transformer, (T + 1, M, S + 1) ensemble.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    results: list[tuple[Tensor | None, Tensor | None] | None] = [None] * len(pairs)
    sources = [[*src, EOS] for src, _ in pairs]
    targets = [[BOS, *tgt, EOS] for _, tgt in pairs]  # reads BOS..last, predicts ..EOS
    lengths = [max(len(s), len(t)) for s, t in zip(sources, targets, strict=True)]
    try:
        for batch in batches_by_length(lengths, batch_tokens):
            checkpoint()  # between batches: the server's client may have left (attnmt.cancel)
            src, src_mask = pad_batch([sources[i] for i in batch], device)
            tgt, _ = pad_batch([targets[i] for i in batch], device)
            out = model(src, src_mask, tgt[:, :-1], need_weights=need_weights)
            if need_weights and out.weights is None:
                raise UserError("this model has no attention, so it has no alignments")
            picked = None
            if need_log_probs:
                log_probs = torch.log_softmax(out.logits.float(), dim=-1)  # (B, T, V)
                picked = log_probs.gather(2, tgt[:, 1:, None]).squeeze(2).cpu()  # (B, T)
            weights = None
            if need_weights:
                weights = out.weights.float().cpu()
                if weights.dim() == 5:  # (B, L, H, T, S) -> (B, T, L, H, S)
                    weights = weights.permute(0, 3, 1, 2, 4)
            for row, index in enumerate(batch):
                t, s = len(targets[index]) - 1, len(sources[index])
                matrix = None if weights is None else weights[row, :t, ..., :s].clone()
                tokens = None if picked is None else picked[row, :t].clone()
                results[index] = (tokens, matrix)
    finally:
        model.train(was_training)
    return [r for r in results if r is not None]


def score_pairs(
    model: StepModel,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    alpha: float = SearchOptions.alpha,
    need_weights: bool = False,
    batch_tokens: int = DECODE_BATCH_TOKENS,
) -> list[Hypothesis]:
    """`forced_decode`'s log-probabilities summed and length-normalised as the search does.
    A model that is no torch module (an ONNX export, `attnmt.runtime`) has no teacher-forced
    pass: it reads each target step by step (`score_by_steps`)."""
    if not isinstance(model, torch.nn.Module):
        return score_by_steps(model, pairs, alpha=alpha, need_weights=need_weights)
    scored = []
    for (_, target), (log_probs, weights) in zip(
        pairs,
        forced_decode(model, pairs, need_weights=need_weights, batch_tokens=batch_tokens),
        strict=True,
    ):
        total = float(log_probs.double().sum())
        scored.append(
            Hypothesis(
                tokens=list(target),
                log_prob=total,
                token_log_probs=log_probs.tolist(),
                score=total / float(length_penalty(log_probs.numel(), alpha)),
                weights=weights,
            )
        )
    return scored


@torch.no_grad()
def forced_weights(
    model: torch.nn.Module,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    batch_tokens: int = DECODE_BATCH_TOKENS,
) -> list[Tensor]:
    """The attention a model pays while reading given targets (teacher forcing).

    `pairs` are (source ids, target ids), without BOS/EOS. This is how attention is scored
    against gold alignments: the links must be between the reference's words, so the model
    reads the reference instead of writing its own translation.

    Shapes:
        returns, per pair: (T + 1, S + 1) RNN or (T + 1, L, H, S + 1) Transformer, the
        row and column + 1 being the target and source EOS, as `Hypothesis.weights`.
    """
    decoded = forced_decode(
        model, pairs, need_weights=True, need_log_probs=False, batch_tokens=batch_tokens
    )
    return [weights for _, weights in decoded]


@torch.no_grad()
def self_attention_weights(model: torch.nn.Module, src_ids: Sequence[int]) -> list[Tensor]:
    """The encoder's self-attention over one source, per layer (a Transformer's).

    Shapes:
        returns, per encoder layer: (H, S + 1, S + 1), rows and columns the source subwords
        and its EOS.
    """
    if not hasattr(model, "encoder_layers"):
        raise UserError(
            f"this run's model ({type(model).__name__}) has no self-attention: its encoder "
            "is recurrent; self_attention() reads a Transformer's"
        )
    device = next(model.parameters()).device
    src, src_mask = pad_batch([[*src_ids, EOS]], device)
    memory = model.encode(src, src_mask, need_weights=True)
    return [weights[0].float().cpu() for weights in memory.self_weights]
