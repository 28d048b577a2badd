"""Greedy and beam search, batched over sentences, keeping the attention weights.

Both work with any model of `attnmt.models` through its step interface:

    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    logits, state, weights = model.step(prev_tokens, state, memory, need_weights=...)
    memory.select(indices); state.select(indices)     # reorder / expand along batch

Every hypothesis comes back with its tokens (no BOS/EOS), its score and, when asked, the
attention weights that produced each of its tokens: `(T, S)` for an RNN decoder,
`(T, L, H, S)` for the Transformer (every layer and head) — under beam search too.

Length penalty is GNMT's (Wu et al. 2016, eq. 14): lp(Y) = ((5 + |Y|) / 6)^α, and a
hypothesis is ranked by log P(Y|X) / lp(Y). α = 0 ranks by the plain log-probability.
Greedy and beam search score alike (|Y| counts the final EOS), so beam search with K = 1
gives greedy's tokens, score and log-probability.

Neither search emits PAD or BOS: they are not words (PAD is never a training target and
BOS only starts the decoder), so they are excluded at every step. `log_prob` stays the
model's own log-probability of the tokens chosen (what forced decoding of them gives).

Both call `attnmt.cancel.checkpoint()` before each decoder step, so a search whose client
has left (inside the server's `stop_when`) stops within one step; elsewhere it costs one
attribute read a step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnmt.cancel import checkpoint
from attnmt.data.vocab import BOS, EOS, PAD

NEVER_EMITTED = (PAD, BOS)


@dataclass
class Hypothesis:
    """One output sentence.

    Shapes:
        weights: (T, S) for RNN decoders, (T, L, H, S) for the Transformer, where T counts
        the tokens plus the final EOS (the step that ended the sentence has weights too).
    """

    tokens: list[int]
    score: float  # log P(tokens, EOS | source) / lp(len(tokens) + 1), greedy and beam alike
    log_prob: float  # log P(tokens, EOS | source)
    weights: Tensor | None = None


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty ((5 + length) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


def max_lengths(src_mask: Tensor, ratio: float, extra: int = 5) -> Tensor:
    """Maximum output length per sentence: ratio × source length + extra. Shapes: (B,)."""
    return (src_mask.sum(dim=1).float() * ratio).long() + extra


@torch.no_grad()
def greedy(
    model: torch.nn.Module,
    src: Tensor,
    src_mask: Tensor,
    *,
    alpha: float = 0.6,
    max_len_ratio: float = 2.0,
    max_len: int | None = None,
    need_weights: bool = False,
) -> list[Hypothesis]:
    """Greedy decoding of a batch, one hypothesis per sentence, scored as beam search
    scores (`alpha`: the length penalty's exponent; it ranks nothing here).

    Shapes:
        src, src_mask: (B, S)
    """
    batch = src.size(0)
    limits = max_lengths(src_mask, max_len_ratio)
    if max_len is not None:
        limits = limits.clamp(max=max_len)
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    prev = torch.full((batch,), BOS, dtype=torch.long, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    lengths = torch.zeros(batch, dtype=torch.long, device=src.device)
    log_probs = torch.zeros(batch, device=src.device)
    tokens, weights = [], []
    for step in range(int(limits.max())):
        checkpoint()  # the server's client may have left (attnmt.cancel)
        logits, state, step_weights = model.step(prev, state, memory, need_weights=need_weights)
        scores = torch.log_softmax(logits.float(), dim=-1)  # (B, V)
        scores[:, NEVER_EMITTED] = float("-inf")  # not words: never output
        best = scores.argmax(dim=-1)
        best = torch.where(step >= limits - 1, torch.full_like(best, EOS), best)
        log_probs += torch.where(finished, 0.0, scores.gather(1, best[:, None]).squeeze(1))
        lengths += (~finished).long()
        tokens.append(best)
        if need_weights:
            weights.append(step_weights.float().cpu())
        finished |= best == EOS
        prev = best
        if bool(finished.all()):
            break
    token_table = torch.stack(tokens, dim=1).tolist()  # (B, T)
    weight_table = torch.stack(weights, dim=1) if need_weights else None  # (B, T, ...)
    out = []
    for i in range(batch):
        n = int(lengths[i])
        out.append(
            Hypothesis(
                tokens=[t for t in token_table[i][:n] if t != EOS],
                score=float(log_probs[i]) / float(length_penalty(n, alpha)),
                log_prob=float(log_probs[i]),
                weights=None if weight_table is None else weight_table[i, :n].clone(),
            )
        )
    return out


@torch.no_grad()
def beam_search(
    model: torch.nn.Module,
    src: Tensor,
    src_mask: Tensor,
    *,
    beam_size: int = 5,
    alpha: float = 0.6,
    n_best: int = 1,
    max_len_ratio: float = 2.0,
    max_len: int | None = None,
    need_weights: bool = False,
) -> list[list[Hypothesis]]:
    """Beam search over a batch; returns the `n_best` hypotheses of each sentence, best first.

    Beams are kept as a flat batch of B×K rows (K = beam_size). A hypothesis that emits EOS
    leaves its beam for the sentence's finished list; a sentence is done when it has K
    finished hypotheses or reaches its maximum length (then its live beams are finished
    as they stand). With K = 1 this is exactly greedy decoding.

    Shapes:
        src, src_mask: (B, S)
    """
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best must be between 1 and beam_size={beam_size}, got {n_best}")
    batch, k = src.size(0), beam_size
    device = src.device
    limits = max_lengths(src_mask, max_len_ratio)
    if max_len is not None:
        limits = limits.clamp(max=max_len)
    expand = torch.arange(batch, device=device).repeat_interleave(k)  # (B*K,)
    memory = model.encode(src, src_mask).select(expand)
    state = model.init_state(memory)
    prev = torch.full((batch * k,), BOS, dtype=torch.long, device=device)
    # Only the first beam of each sentence is live at the start: the others are copies.
    beam_scores = torch.full((batch, k), float("-inf"), device=device)
    beam_scores[:, 0] = 0.0
    history = torch.empty(batch * k, 0, dtype=torch.long, device=device)  # (B*K, t)
    weight_history: Tensor | None = None  # (B*K, t, ...)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    # A sentence leaves the batch as soon as it is done: the tensors below hold the n
    # sentences still searching, `ids` says which (the decoder no longer steps the beams
    # of finished sentences; RNNsearch beam 5 on the test book: benchmarks/README.md).
    ids = list(range(batch))
    for step in range(int(limits.max())):
        checkpoint()  # the server's client may have left (attnmt.cancel)
        n = len(ids)
        logits, state, step_weights = model.step(prev, state, memory, need_weights=need_weights)
        vocab = logits.size(-1)
        log_probs = torch.log_softmax(logits.float(), dim=-1).view(n, k, vocab)
        log_probs[..., NEVER_EMITTED] = float("-inf")  # not words: never output
        at_limit = step >= limits - 1  # (n,)
        limit_at = at_limit.tolist()
        if any(limit_at):  # at a sentence's length limit only EOS may follow
            eos = log_probs[at_limit, :, EOS]  # (limited, K)
            log_probs[at_limit] = float("-inf")
            log_probs[at_limit, :, EOS] = eos
        # A sentence's best 2K candidates are among each beam's best 2K tokens, so only
        # those are added to the beam scores and ranked: (n, K, 2K), not (n, K, V) (RNNsearch
        # beam 5 on the test book: benchmarks/README.md). Take 2K so that K live beams
        # survive even if K candidates end in EOS.
        per_beam = min(2 * k, vocab)
        beam_top, beam_token = log_probs.topk(per_beam, dim=-1)  # (n, K, 2K)
        candidates = (beam_scores[:, :, None] + beam_top).view(n, k * per_beam)
        top_scores, top_index = candidates.topk(min(2 * k, k * per_beam), dim=1)  # (n, 2K)
        origin = top_index // per_beam  # beam each candidate extends
        token = beam_token.view(n, k * per_beam).gather(1, top_index)
        if need_weights:
            step_weights = step_weights.float()[:, None]  # (n*K, 1, ...)
            weight_history = (
                step_weights
                if weight_history is None
                else torch.cat([weight_history, step_weights], dim=1)
            )
        # The bookkeeping below is per sentence and candidate: on Python numbers, read from
        # the tensors once per step (each element read from a tensor costs microseconds,
        # thousands a step; RNNsearch beam 5 on 80 verses: 5-18% faster, same hypotheses).
        scores_at, origin_at, token_at = top_scores.tolist(), origin.tolist(), token.tolist()
        new_scores, new_rows, new_tokens = [], [], []  # of the sentences that go on
        keep = []  # their positions among the n
        for b in range(n):
            done = finished[ids[b]]
            scores, rows, tokens = [float("-inf")] * k, [b * k] * k, [EOS] * k
            live = 0
            for j in range(2 * k):
                score = scores_at[b][j]
                if score == float("-inf"):
                    break
                row = b * k + origin_at[b][j]
                if token_at[b][j] == EOS:
                    if len(done) < k:
                        done.append(_finish(history[row], score, weight_history, row, alpha))
                elif live < k:
                    scores[live], rows[live], tokens[live] = score, row, token_at[b][j]
                    live += 1
                if len(done) >= k or live >= k:
                    break
            if len(done) >= k or limit_at[b] or live == 0:
                continue  # this sentence is done
            keep.append(b)
            new_scores.append(scores)
            new_rows.append(rows)
            new_tokens.append(tokens)
        if not keep:
            break
        rows = torch.tensor(new_rows, dtype=torch.long, device=device).view(-1)
        prev = torch.tensor(new_tokens, dtype=torch.long, device=device).view(-1)
        history = torch.cat([history[rows], prev[:, None]], dim=1)
        if weight_history is not None:
            weight_history = weight_history[rows]
        state = state.select(rows)
        beam_scores = torch.tensor(new_scores, device=device)
        if len(keep) < n:  # the memory's rows of the sentences that go on
            kept = torch.tensor(keep, dtype=torch.long, device=device)
            memory = memory.select((kept[:, None] * k + torch.arange(k, device=device)).view(-1))
            limits = limits[kept]
            ids = [ids[b] for b in keep]
    results = []
    for b in range(batch):
        hyps = sorted(finished[b], key=lambda h: h.score, reverse=True)
        results.append(hyps[:n_best])
    return results


def _finish(
    tokens: Tensor, log_prob: float, weight_history: Tensor | None, row: int, alpha: float
) -> Hypothesis:
    """A finished hypothesis from beam `row`: its tokens, normalised score and weights."""
    length = tokens.numel() + 1  # the EOS counts, as it does in greedy's score
    weights = None if weight_history is None else weight_history[row].cpu().clone()
    return Hypothesis(
        tokens=tokens.tolist(),
        score=log_prob / float(length_penalty(length, alpha)),
        log_prob=log_prob,
        weights=weights,
    )
