"""REINFORCE terms for hard attention (Xu et al. 2015 "Show, Attend and Tell" §4.1).

With hard attention the context is one sampled source position s_t, so the cross-entropy
gives no gradient to the scores that chose it. Xu et al. eq. 11–12 estimate that gradient
with REINFORCE: the reward is the log-likelihood of the target sentence given the sampled
positions, a moving-average baseline b reduces its variance, and an entropy bonus H[s]
keeps the attention from collapsing early:

    L = -Σ_t (R - b) · log p(s_t | a) - λ_e · Σ_t H[s_t],  R = log p(y | s̃, a) (detached)
    b ← 0.9 b + 0.1 · mean(R)                            (Xu et al. §4.1, updated per batch)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def reinforce_loss(
    attn_log_prob: Tensor,
    attn_entropy: Tensor | None,
    reward: Tensor,
    baseline: float | Tensor,
    tgt_mask: Tensor,
    *,
    entropy_weight: float,
) -> Tensor:
    """The REINFORCE surrogate of Xu et al. 2015 eq. 12, summed over sentences and steps.

    `-Σ_b Σ_t m_bt [(R_b - b) · log p(s_bt) + λ_e · H_bt]`, m the target mask. Its gradient
    is (minus) the REINFORCE estimate of eq. 12's second and third terms (λ_r = 1); the
    first term is the ordinary cross-entropy, which the caller adds. `reward` is detached
    here, so the reward itself is never differentiated. Divide by the number of target
    tokens (as the cross-entropy is) before adding.

    Args:
        attn_log_prob: log p(s_t) of each step's sampled position (`ModelOutput`).
        attn_entropy: entropy H[s_t] of each step's attention distribution, or None (no
            entropy bonus).
        reward: R = log p(y | x, s̃), the target sentence's log-likelihood.
        baseline: the moving-average baseline b (`MovingAverageBaseline.value`).
        tgt_mask: True at real target tokens (steps past a sentence's end are ignored).
        entropy_weight: λ_e.

    Shapes:
        attn_log_prob (B, T), attn_entropy (B, T), reward (B,), tgt_mask (B, T) -> ()
    """
    mask = tgt_mask.to(attn_log_prob.dtype)  # (B, T)
    advantage = (reward.detach() - baseline).to(attn_log_prob.dtype)  # R - b: (B,)
    policy = (advantage.unsqueeze(1) * attn_log_prob * mask).sum()  # Σ (R - b) log p(s_t)
    loss = -policy
    if attn_entropy is not None and entropy_weight:
        loss = loss - entropy_weight * (attn_entropy * mask).sum()  # - λ_e Σ H[s_t]
    return loss


class MovingAverageBaseline:
    """Xu et al. 2015 §4.1's baseline: b ← decay · b + (1 - decay) · mean reward.

    Plain Python state (one float and a count) with `state_dict` / `load_state_dict`, so it
    is saved with a checkpoint and restored on resume.
    """

    def __init__(self, decay: float = 0.9, value: float = 0.0) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay!r}")
        self.decay = decay
        self.value = float(value)
        self.updates = 0

    def update(self, reward: Tensor | float) -> float:
        """Move towards the batch's mean reward; returns the new baseline.

        Shapes:
            reward (B,) or a float
        """
        mean = float(reward.detach().float().mean()) if isinstance(reward, Tensor) else reward
        self.value = self.decay * self.value + (1.0 - self.decay) * float(mean)
        self.updates += 1
        return self.value

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "value": self.value, "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.decay = float(state["decay"])
        self.value = float(state["value"])
        self.updates = int(state.get("updates", 0))

    def __repr__(self) -> str:
        return f"MovingAverageBaseline(decay={self.decay}, value={self.value:.4f})"


def attention_entropy(probs: Tensor) -> Tensor:
    """Entropy H = -Σ_s p_s log p_s of each attention distribution (0 log 0 = 0, with
    finite gradients).

    Shapes:
        probs (B, T, S) -> (B, T)
    """
    tiny = torch.finfo(probs.dtype).tiny
    return -(probs * probs.clamp_min(tiny).log()).sum(dim=-1)
