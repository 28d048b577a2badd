"""Modes: how scores become weights.

- `soft`: weights = masked softmax of the scores (Bahdanau eq. 6, Luong eq. 7; Xu et al.
  2015 §4.2's deterministic soft attention); local-p multiplies by its Gaussian (Luong
  eq. 10).
- `hard`: stochastic hard attention (Xu et al. 2015 "Show, Attend and Tell" §4.1). The soft
  distribution alpha is a Multinoulli over source positions; in training one position s_t
  is sampled from it (Xu eq. 8) and the context is that position's value (Xu eq. 9), so
  weights are one-hot. `log_prob` = log alpha_{t, s_t} lets a trainer form the REINFORCE
  term `(reward - baseline) * log_prob` (Xu §4.1's learning rule also adds an entropy
  bonus, computed from `probs`). In eval mode the argmax is taken instead of a sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnmt.attention import functional as AF

MODES = ("soft", "hard")


@dataclass(frozen=True)
class ModeResult:
    """Weights from one mode.

    Shapes:
        weights (B, T, S); probs (B, T, S); log_prob (B, T) or None (soft)
    """

    weights: Tensor
    probs: Tensor
    log_prob: Tensor | None


def soft_weights(scores: Tensor, mask: Tensor | None, log_prior: Tensor | None) -> ModeResult:
    """Soft attention: alpha = masked softmax(scores), times local-p's Gaussian if any.

    `probs` is the softmax itself (rows sum to 1); `weights` is what forms the context
    (local-p: rows sum to at most 1, Luong eq. 10).

    Shapes:
        scores (B, T, S), mask (B, T|1, S) or None, log_prior (B, T, S) or None
    """
    probs = AF.masked_softmax(scores, mask)  # a_t(s), Luong eq. 7 / alpha_ij, Bahdanau eq. 6
    weights = probs if log_prior is None else probs * log_prior.exp()  # Luong eq. 10
    return ModeResult(weights=weights, probs=probs, log_prob=None)


def hard_weights(
    scores: Tensor,
    mask: Tensor | None,
    log_prior: Tensor | None,
    *,
    sample: bool,
    generator: torch.Generator | None = None,
) -> ModeResult:
    """Hard attention: one-hot weights at a sampled (`sample=True`) or argmax position.

    The distribution is the masked softmax of the scores; with local-p's Gaussian it is
    the product softmax x Gaussian renormalised, i.e. softmax(scores + log Gaussian), so
    the REINFORCE gradient also reaches the position predictor. A row with nothing to
    attend gets zero weights and `log_prob` 0.

    Shapes:
        scores (B, T, S), mask (B, T|1, S) or None, log_prior (B, T, S) or None
        -> weights (B, T, S), probs (B, T, S), log_prob (B, T)
    """
    logits = scores if log_prior is None else scores + log_prior  # (B, T, S)
    probs = AF.masked_softmax(logits, mask)  # alpha_{t,i}, Xu eq. 8: (B, T, S)
    log_probs = AF.masked_log_softmax(logits, mask)  # (B, T, S)
    # s_t ~ Multinoulli(alpha) in training, argmax in eval: (B, T)
    index = AF.sample_positions(probs, generator=generator) if sample else probs.argmax(dim=-1)
    alive = probs.sum(dim=-1) > 0  # rows with something to attend: (B, T)
    # One-hot by a scatter, not F.one_hot, whose class count a traced graph fixes (an ONNX
    # export then refuses every other source length).
    one_hot = torch.zeros_like(scores).scatter(-1, index.unsqueeze(-1), 1.0)  # (B, T, S)
    weights = one_hot * alive.unsqueeze(-1)  # s_{t,i}, Xu eq. 9: (B, T, S)
    chosen = log_probs.gather(-1, index.unsqueeze(-1)).squeeze(-1)  # log alpha_{t,s_t}: (B, T)
    log_prob = torch.where(alive, chosen, torch.zeros_like(chosen))
    return ModeResult(weights=weights, probs=probs, log_prob=log_prob)
