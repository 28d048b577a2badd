"""The training loss: cross-entropy over the target tokens (`batch_loss`), plus, for hard
attention, the REINFORCE terms below, and for soft attention, optionally, Xu et al.'s
doubly stochastic penalty (eq. 14): λ Σ_i (1 - Σ_t α_ti)² per sentence, which asks every
source position to receive about one unit of attention over the whole output.

REINFORCE terms for hard attention (Xu et al. 2015 "Show, Attend and Tell" §4.1).

With hard attention the context is one sampled source position s_t, so the cross-entropy
gives no gradient to the scores that chose it. Xu et al. eq. 11–12 estimate that gradient
with REINFORCE: the reward is the log-likelihood of the target sentence given the sampled
positions, a moving-average baseline b reduces its variance, and an entropy bonus H[s]
keeps the attention from collapsing early:

    L = -λ_r Σ_t (R - b) · log p(s_t | a) - λ_e · Σ_t H[s_t],  R = log p(y | s̃, a) (detached)
    b ← 0.9 b + 0.1 · mean(R)                            (Xu et al. §4.1, updated per batch)

R is the plain log-likelihood of the target, also when the cross-entropy is label-smoothed
(a smoothed loss is not log p(y | a, x)). With `train.reinforce_baseline: token` the
baseline follows the mean log-likelihood per target token and a sentence of n tokens is
compared with n·b, so its advantage no longer grows with its length. `train.
reinforce_weight` is λ_r; `model.hard_expectation` (the expectation in place of the sample
for some sentences, Xu's other variance trick) is in the model (attnmt.models.rnn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from attnmt.config import Config
from attnmt.data.vocab import PAD
from attnmt.training import distributed
from attnmt.training.guided import Guide, guided_loss
from attnmt.training.vocab_loss import linear_cross_entropy

if TYPE_CHECKING:  # annotations only: run.py builds on the losses here
    from attnmt.training.run import Progress


def reinforce_loss(
    attn_log_prob: Tensor,
    attn_entropy: Tensor | None,
    reward: Tensor,
    baseline: float | Tensor,
    tgt_mask: Tensor,
    *,
    entropy_weight: float,
    reinforce_weight: float = 1.0,
) -> Tensor:
    """The REINFORCE surrogate of Xu et al. 2015 eq. 12, summed over sentences and steps.

    `-Σ_b Σ_t m_bt [λ_r (R_b - b_b) · log p(s_bt) + λ_e · H_bt]`, m the target mask. Its
    gradient is (minus) the REINFORCE estimate of eq. 12's second and third terms; the
    first term is the ordinary cross-entropy, which the caller adds. `reward` is detached
    here, so the reward itself is never differentiated. Divide by the number of target
    tokens (as the cross-entropy is) before adding.

    Args:
        attn_log_prob: log p(s_t) of each step's sampled position (`ModelOutput`).
        attn_entropy: entropy H[s_t] of each step's attention distribution, or None (no
            entropy bonus).
        reward: R = log p(y | x, s̃), the target sentence's log-likelihood (B,), or one
            per step (B, T): the log-likelihood of the tokens from that step on.
        baseline: b: a number (`Progress.baseline`, b ← 0.9 b + 0.1 mean(R)), one per
            sentence (B,) (the per-token baseline times each sentence's length) or one per
            step (B, T) (times the tokens from that step on).
        tgt_mask: True at real target tokens (steps past a sentence's end are ignored).
        entropy_weight: λ_e.
        reinforce_weight: λ_r.

    Shapes:
        attn_log_prob (B, T), attn_entropy (B, T), reward (B,) or (B, T),
        tgt_mask (B, T) -> ()
    """
    mask = tgt_mask.to(attn_log_prob.dtype)  # (B, T)
    advantage = (reward.detach() - baseline).to(attn_log_prob.dtype)  # R - b: (B,) or (B, T)
    if advantage.dim() == 1:  # one reward per sentence credits every step's choice
        advantage = advantage.unsqueeze(1)  # (B, 1)
    policy = (advantage * attn_log_prob * mask).sum()  # Σ (R - b) log p(s_t)
    loss = -reinforce_weight * policy
    if attn_entropy is not None and entropy_weight:
        loss = loss - entropy_weight * (attn_entropy * mask).sum()  # - λ_e Σ H[s_t]
    return loss


def batch_loss(
    model,
    batch,
    cfg: Config,
    ctx,
    progress: Progress,
    *,
    autocast_dtype: torch.dtype | None = None,
    guide: Guide | None = None,
) -> tuple[torch.Tensor, dict]:
    """Cross-entropy over the target tokens (plus REINFORCE terms for hard attention).

    The sum over this process's tokens is divided by the token count of the *global* batch
    (all processes) times the world size, because DDP averages gradients over processes:
    the gradient is then exactly that of one process seeing the whole global batch.
    `autocast_dtype` is the resolved precision (`attnmt.devices.Precision`); without it an
    explicit `train.precision: bf16` autocasts and anything else runs in fp32. With a
    `guide`, λ·L_guide of guided alignment is added (`attnmt.training.guided`), normalised
    by the global number of guided target positions in the same way.

    Shapes:
        batch.src (B, S), batch.tgt_in / tgt_out / tgt_mask (B, T); logits (B, T, V)
    """
    dtype = autocast_dtype
    if dtype is None and cfg.train.precision == "bf16":
        dtype = torch.bfloat16
    device_type = batch.src.device.type
    penalty = cfg.train.doubly_stochastic
    # The reward "correct" reads the logits' argmax; every other loss leaves the output
    # layer to `vocab_loss`, which never makes the (B, T, V) logits.
    fuse = cfg.train.reinforce_reward != "correct"
    with torch.autocast(device_type, dtype=dtype or torch.float32, enabled=dtype is not None):
        out = model(
            batch.src,
            batch.src_mask,
            batch.tgt_in,
            need_weights=penalty > 0 or guide is not None,
            logits=not fuse,
        )
        summed, nll = vocab_cross_entropy(out, batch.tgt_out, cfg.train.label_smoothing)
    tokens = batch.tgt_mask.sum()
    global_tokens = distributed.all_reduce_sum(tokens.detach().float(), ctx)
    loss = summed / global_tokens * ctx.world_size
    stats = {"nll_sum": float(summed.detach()), "tokens": int(tokens)}
    if penalty > 0:
        loss = loss + penalty * doubly_stochastic(out.weights, batch) / global_tokens * (
            ctx.world_size
        )
    if guide is not None:
        weights = out.weights
        if weights.dim() == 5:  # Transformer (B, L, H, T, S): second-to-last layer, head 1
            weights = weights[:, max(weights.size(1) - 2, 0), 0]
        target = guide.targets(batch.indices, *weights.shape[1:]).to(weights.device)
        total, rows = guided_loss(weights, target)
        global_rows = distributed.all_reduce_sum(rows.detach().float(), ctx).clamp_min(1.0)
        loss = loss + cfg.train.guided_weight * total / global_rows * ctx.world_size
        stats["guided_sum"] = float(total.detach())
    if getattr(out, "attn_log_prob", None) is not None:
        # nll is -log p(y_t) without smoothing: the reward is log p(y | a, x)
        loss = loss + _reinforce(out, nll, batch, cfg, progress, ctx)
    return loss, stats


def vocab_cross_entropy(out, target: Tensor, label_smoothing: float) -> tuple[Tensor, Tensor]:
    """The summed (label-smoothed) cross-entropy of a forward pass's output against
    `target`, and each token's plain -log p(y_t) (no gradient; 0 at padding). From
    `features` and `output_layer` the logits are never made whole
    (`attnmt.training.vocab_loss`); from `logits`, PyTorch's cross-entropy in fp32.

    Shapes:
        out.logits (B, T, V) or out.features (B, T, F); target (B, T) -> (), (B, T)
    """
    flat = target.reshape(-1)
    if out.features is not None:
        layer = out.output_layer
        features = out.features.reshape(-1, out.features.shape[-1])  # (B·T, F)
        summed, nll = linear_cross_entropy(
            features, layer.weight, layer.bias, flat, ignore_index=PAD,
            label_smoothing=label_smoothing,
        )  # fmt: skip
        return summed, nll.view_as(target)
    logits = out.logits.to(torch.promote_types(out.logits.dtype, torch.float32))
    logits = logits.reshape(flat.shape[0], -1)  # (B·T, V), in fp32 (fp64 stays)
    summed = F.cross_entropy(
        logits, flat, ignore_index=PAD, reduction="sum", label_smoothing=label_smoothing
    )
    nll = F.cross_entropy(logits.detach(), flat, ignore_index=PAD, reduction="none")
    return summed, nll.view_as(target)


def doubly_stochastic(weights: Tensor, batch) -> Tensor:
    """Xu et al. 2015 eq. 14's Σ_b Σ_i (1 - Σ_t α_bti)², over real tokens on both sides.

    Shapes:
        weights (B, T, S) -> ()
    """
    attention = weights.float() * batch.tgt_mask[:, :, None]  # steps past the end: 0
    received = attention.sum(dim=1)  # Σ_t α_ti: (B, S)
    return (((1.0 - received) ** 2) * batch.src_mask).sum()


def _reinforce(out, nll, batch, cfg: Config, progress: Progress, ctx) -> torch.Tensor:
    """Xu et al. 2015 §4.1: reward = log-likelihood of the target, minus a moving baseline;
    or Mnih et al. 2014's: 1 for a correct output, minus a learned baseline."""
    reward = _reward(out, nll, batch, cfg.train.reinforce_reward)  # (B,)
    global_tokens = distributed.all_reduce_sum(batch.tgt_mask.sum().float(), ctx)
    if getattr(out, "reward_baseline", None) is not None:
        return _learned_baseline_loss(out, reward, cfg) / global_tokens * ctx.world_size
    kind = cfg.train.reinforce_baseline
    per_token = kind in ("token", "to-go")
    lengths = batch.tgt_mask.sum(dim=1).to(reward.dtype)  # (B,)
    baseline = progress.baseline * lengths if per_token else progress.baseline
    credit = reward
    if kind == "to-go":  # step t's choice earns log p(y_t') for t' >= t only
        mask = batch.tgt_mask.to(nll.dtype)  # (B, T)
        credit = _from_here(-(nll.detach() * mask))  # Σ_{t' >= t} log p(y_t'): (B, T)
        baseline = progress.baseline * _from_here(mask)  # b × tokens from t on: (B, T)
    loss = reinforce_loss(
        out.attn_log_prob,
        out.attn_entropy,
        credit,
        baseline,
        batch.tgt_mask,
        entropy_weight=cfg.train.entropy_weight,
        reinforce_weight=cfg.train.reinforce_weight,
    )
    observed = reward / lengths.clamp(min=1) if per_token else reward  # (B,)
    mean_reward = float(distributed.all_reduce_sum(observed.mean(), ctx)) / ctx.world_size
    progress.baseline = 0.9 * progress.baseline + 0.1 * mean_reward
    # reinforce_loss sums over sentences; scale like the cross-entropy (per target token).
    return loss / global_tokens * ctx.world_size


def _from_here(values: Tensor) -> Tensor:
    """Sums from each step to the end: out[b, t] = Σ_{t' >= t} values[b, t'].

    Shapes:
        values (B, T) -> (B, T)
    """
    return values.flip(1).cumsum(dim=1).flip(1)


def _reward(out, nll: Tensor, batch, kind: str) -> Tensor:
    """R per sentence: log p(y | x, s̃) ("likelihood"), or 1.0 when the model's top choice
    is right at every target token and 0.0 otherwise ("correct", Mnih et al. 2014 §4).

    Shapes:
        nll (B, T), batch.tgt_out (B, T) -> (B,)
    """
    if kind == "correct":
        right = (out.logits.detach().argmax(dim=-1) == batch.tgt_out) | ~batch.tgt_mask
        return right.all(dim=1).to(nll.dtype)  # (B,)
    return -(nll.detach() * batch.tgt_mask).sum(dim=1)  # (B,) log p(y | x, sampled s)


def _learned_baseline_loss(out, reward: Tensor, cfg: Config) -> Tensor:
    """REINFORCE with a learned baseline (Mnih et al. 2014 §3, eq. 2 with b_n = E[R | h_n]).

    A policy that acts N times per example (`ModelOutput.reward_baseline`): each action's
    log-probability is weighted by R - b_n, b_n predicted before that action; b_n itself
    regresses on R (squared error). Every one of the N actions counts (no target mask).

        L = -λ_r Σ_b Σ_n (R_b - b_bn) log π(l_bn)  +  Σ_b Σ_n (b_bn - R_b)²

    Shapes:
        out.attn_log_prob (B, N), out.reward_baseline (B, N), reward (B,) -> ()
    """
    baseline = out.reward_baseline.float()  # (B, N)
    target = reward.detach().to(baseline.dtype).unsqueeze(1)  # (B, 1)
    advantage = target - baseline.detach()  # R - b_n: (B, N)
    policy = (advantage * out.attn_log_prob.float()).sum()  # Σ (R - b_n) log π(l_n)
    regression = ((baseline - target) ** 2).sum()  # Σ (b_n - R)²
    return -cfg.train.reinforce_weight * policy + regression
