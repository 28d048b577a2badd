"""What a search starts from and what it returns: `Hypothesis` (an output with its score
and weights), GNMT's length penalty, the output length limits, and `Start`, the decoder
positioned after a forced prefix (`begin` reads the prefix once per sentence, before any
beam or alternative is made from it). `attnmt.decoding.search` runs the searches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnmt.cancel import checkpoint
from attnmt.data.vocab import BOS, EOS
from attnmt.decoding.array_ops import ArrayOps
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.step_model import StepModel, without_grad

if TYPE_CHECKING:  # torch tensors or numpy arrays (an export decoded by attnmt.runtime)
    from torch import Tensor


@dataclass
class Hypothesis:
    """One output sentence: searched, or given and scored (forced decoding).

    Shapes:
        weights: (T, S) for RNN decoders, (T, L, H, S) for the Transformer, (T, M, S) for
        an ensemble, where T counts the tokens plus the final EOS (the step that ended the
        sentence has weights too); token_log_probs: T floats (each token, then EOS).
    """

    tokens: list[int]
    score: float  # log P(tokens, EOS | source) / lp(len(tokens) + 1), greedy and beam alike
    log_prob: float  # log P(tokens, EOS | source)
    weights: Tensor | None = None
    node: int | None = None  # its finished node in the recorded `SearchTree`, if recorded
    token_log_probs: list[float] | None = None  # a scored one's, token by token


@dataclass
class Start:
    """The decoder positioned after a forced prefix (`begin`), one row per sentence: the
    encoder's output and the state are computed once and shared by every beam and
    alternative made from them.

    Shapes:
        prev (B,): the last token read next (BOS, or the prefix's last); tokens and
        token_log_probs (B, P); log_prob (B,); weights (B, P, ...) or None.
    """

    memory: Any
    state: Any
    prev: Tensor
    tokens: Tensor
    token_log_probs: Tensor
    log_prob: Tensor
    weights: Tensor | None

    @property
    def length(self) -> int:
        return self.tokens.shape[1]

    def select(self, rows: Tensor) -> Start:
        return Start(
            memory=self.memory.select(rows),
            state=self.state.select(rows),
            prev=self.prev[rows],
            tokens=self.tokens[rows],
            token_log_probs=self.token_log_probs[rows],
            log_prob=self.log_prob[rows],
            weights=None if self.weights is None else self.weights[rows],
        )


@without_grad
def begin(
    model: StepModel,
    src: Tensor,
    src_mask: Tensor,
    prefix: Tensor | None = None,
    *,
    need_weights: bool = False,
) -> Start:
    """Encode the batch and read a forced `prefix` (the same length for every sentence;
    None: none), keeping what the model gave each forced token: its log-probability (the
    model's own, as `attnmt score` reads it) and its attention row.

    Shapes:
        src, src_mask: (B, S); prefix: (B, P) target ids without BOS/EOS
    """
    ops = model.array_ops
    batch = src.shape[0]
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    prev = ops.full((batch,), BOS, ops.long)
    if prefix is None:
        prefix = ops.full((batch, 0), 0, ops.long)
    picked, weights = [], []
    for t in range(prefix.shape[1]):
        checkpoint()
        log_probs, state, step_weights = model.step_log_probs(
            prev, state, memory, need_weights=need_weights
        )
        prev = prefix[:, t]
        picked.append(ops.take(log_probs, prev[:, None])[:, 0])
        if need_weights:
            weights.append(ops.host(step_weights))
    token_log_probs = ops.stack(picked, 1) if picked else ops.full((batch, 0), 0.0, ops.float)
    return Start(
        memory=memory,
        state=state,
        prev=prev,
        tokens=prefix,
        token_log_probs=token_log_probs,
        log_prob=token_log_probs.sum(1),
        weights=ops.stack(weights, 1) if weights else None,
    )


def output_limits(
    src_mask: Tensor, ratio: float, max_len: int | None, start: Start, ops: ArrayOps
) -> Tensor:
    """Each sentence's maximum output length (EOS included): `max_lengths`, capped at
    `max_len`, and always room for the forced prefix and an EOS after it."""
    limits = max_lengths(src_mask, ratio, ops)
    if max_len is not None:
        limits = limits.clip(max=max_len)
    return limits.clip(min=start.length + 1)


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


def max_lengths(src_mask: Tensor, ratio: float, ops: ArrayOps, extra: int = 5) -> Tensor:
    """Maximum output length per sentence: ratio × source length + extra. Shapes: (B,)."""
    lengths = ops.astype(src_mask.sum(1), ops.float)
    return ops.astype(lengths * ratio, ops.long) + extra


def score_by_steps(
    model: StepModel,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    alpha: float = SearchOptions.alpha,
    need_weights: bool = False,
) -> list[Hypothesis]:
    """Forced decoding one pair at a time through the step interface: `begin` reads the
    target as a prefix, one more step reads its EOS. What `attnmt.decoding.scoring`'s
    teacher forcing gives, for a model with steps only (an ONNX export).

    Shapes:
        pairs: (source ids, target ids) without BOS/EOS -> `Hypothesis`es as `score_pairs`'s
    """
    ops = model.array_ops
    out = []
    for source, target in pairs:
        src, mask = ops.pad([[*source, EOS]])
        prefix = ops.tensor([list(target)], ops.long) if target else None
        start = begin(model, src, mask, prefix, need_weights=need_weights)
        checkpoint()
        log_probs, _, step_weights = model.step_log_probs(
            start.prev, start.state, start.memory, need_weights=need_weights
        )
        eos = float(log_probs[0, EOS])
        token_log_probs = [*start.token_log_probs[0].tolist(), eos]
        total = sum(token_log_probs)
        weights = None
        if need_weights:
            last = ops.host(step_weights)[:, None]  # (1, 1, ...)
            rows = last if start.weights is None else ops.cat([start.weights, last], 1)
            weights = rows[0]
        out.append(
            Hypothesis(
                tokens=list(target),
                log_prob=total,
                token_log_probs=token_log_probs,
                score=total / float(length_penalty(len(token_log_probs), alpha)),
                weights=weights,
            )
        )
    return out
