"""Greedy and beam search, batched over sentences, keeping the attention weights.

Both work with any model of `attnmt.models`, and an ONNX export, through the step
interface (`attnmt.decoding.step_model.StepModel`):

    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    log_probs, state, weights = model.step_log_probs(prev_tokens, state, memory, need_weights=...)
    memory.select(indices); state.select(indices)     # reorder / expand along batch

How to search (beam, length penalty, lengths, n-best, weights) is one `SearchOptions`.

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

Both can start after a forced prefix (`prefix`: the first target tokens are imposed, the
rest searched as usual; `begin` reads the prefix once per sentence, before the beams are
made, and `alternatives` branches N ways after it), and beam search can record the whole
search (`trees`: every candidate with its parent, scores, fate and attention row, see
`SearchTree`) and report it step by step (`on_step`, what `/api/translate/stream` sends).
Greedy search with a recorder is beam search with K = 1.

Both call `attnmt.cancel.checkpoint()` before each decoder step, so a search whose client
has left (inside the server's `stop_when`) stops within one step; elsewhere it costs one
attribute read a step.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from attnmt.cancel import checkpoint
from attnmt.data.vocab import BOS, EOS, PAD
from attnmt.decoding.array_ops import ArrayOps
from attnmt.decoding.hypotheses import Hypothesis, Start, begin, length_penalty, output_limits
from attnmt.decoding.options import BEAM, GREEDY, SearchOptions
from attnmt.decoding.search_tree import FINISHED, KEPT, PRUNED, Recorder, SearchTree, StepHook
from attnmt.decoding.step_model import StepModel, without_grad

if TYPE_CHECKING:  # torch tensors, or numpy arrays for an export (attnmt.runtime)
    from torch import Tensor

__all__ = ["alternatives", "beam_search", "greedy"]

NEVER_EMITTED = (PAD, BOS)


@without_grad
def greedy(
    model: StepModel,
    src: Tensor,
    src_mask: Tensor,
    options: SearchOptions = GREEDY,
    *,
    prefix: Tensor | None = None,
    start: Start | None = None,
    exact_lengths: Tensor | None = None,
) -> list[Hypothesis]:
    """Greedy decoding of a batch, one hypothesis per sentence, scored as beam search
    scores (`options.alpha`: the length penalty's exponent; it ranks nothing here; `beam`
    and `n_best` are not read). With `prefix`
    (or a `start` made by `begin`), the output begins with the forced tokens. With
    `exact_lengths`, sentence b has exactly exact_lengths[b] tokens before its EOS (EOS is barred
    before, forced after): a model that cannot decide where to stop is then judged on its
    words alone (Newman et al. 2020).

    Shapes:
        src, src_mask: (B, S); prefix: (B, P); exact_lengths: (B,)
    """
    ops = model.array_ops
    need_weights = options.need_weights
    batch = src.shape[0]
    if start is None:
        start = begin(model, src, src_mask, prefix, need_weights=need_weights)
    limits = output_limits(src_mask, options.max_len_ratio, options.max_len, start, ops)
    if exact_lengths is not None:
        limits = (exact_lengths + 1).clip(min=start.length + 1)  # the EOS included
    memory, state, prev = start.memory, start.state, start.prev
    finished = ops.full((batch,), False, ops.bool)
    lengths = ops.full((batch,), start.length, ops.long)
    log_probs = ops.copy(start.log_prob)
    tokens = [start.tokens[:, t] for t in range(start.length)]
    weights = []
    if start.weights is not None and need_weights:
        weights = [start.weights[:, t] for t in range(start.length)]
    for step in range(start.length, int(limits.max())):
        checkpoint()  # the server's client may have left (attnmt.cancel)
        scores, state, step_weights = model.step_log_probs(
            prev, state, memory, need_weights=need_weights
        )  # (B, V)
        scores[:, NEVER_EMITTED] = float("-inf")  # not words: never output
        if exact_lengths is not None:  # no EOS before the given length
            scores[:, EOS] = ops.where(step < limits - 1, float("-inf"), scores[:, EOS])
        best = ops.argmax(scores)
        best = ops.where(step >= limits - 1, EOS, best)
        log_probs += ops.where(finished, 0.0, ops.take(scores, best[:, None])[:, 0])
        lengths += ops.astype(~finished, ops.long)
        tokens.append(best)
        if need_weights:
            weights.append(ops.host(step_weights))
        finished |= best == EOS
        prev = best
        if bool(finished.all()):
            break
    token_table = ops.stack(tokens, 1).tolist()  # (B, T)
    weight_table = ops.stack(weights, 1) if need_weights else None  # (B, T, ...)
    out = []
    for i in range(batch):
        n = int(lengths[i])
        out.append(
            Hypothesis(
                tokens=[t for t in token_table[i][:n] if t != EOS],
                score=float(log_probs[i]) / float(length_penalty(n, options.alpha)),
                log_prob=float(log_probs[i]),
                weights=None if weight_table is None else ops.copy(weight_table[i, :n]),
            )
        )
    return out


@without_grad
def beam_search(
    model: StepModel,
    src: Tensor,
    src_mask: Tensor,
    options: SearchOptions = BEAM,
    *,
    prefix: Tensor | None = None,
    start: Start | None = None,
    trees: list[SearchTree] | None = None,
    on_step: StepHook | None = None,
) -> list[list[Hypothesis]]:
    """Beam search over a batch; returns the `options.n_best` hypotheses of each sentence,
    best first.

    Beams are kept as a flat batch of B×K rows (K = `options.beam`). A hypothesis that emits EOS
    leaves its beam for the sentence's finished list; a sentence is done when it has K
    finished hypotheses or reaches its maximum length (then its live beams are finished
    as they stand). With K = 1 this is exactly greedy decoding.

    `prefix` (or a `start` made by `begin`): every hypothesis begins with the forced
    tokens, read once per sentence before the K beams are made. `trees`: an empty list,
    filled with one `SearchTree` per sentence (the recording; off, it costs nothing);
    `on_step(sentence, nodes)` is called with each step's new nodes as they are made.

    Shapes:
        src, src_mask: (B, S); prefix: (B, P)
    """
    ops = model.array_ops
    alpha, need_weights = options.alpha, options.need_weights
    batch, k = src.shape[0], options.beam
    if start is None:
        start = begin(model, src, src_mask, prefix, need_weights=need_weights)
    limits = output_limits(src_mask, options.max_len_ratio, options.max_len, start, ops)
    expand = ops.repeat(ops.arange(batch), k)  # (B*K,)
    memory = start.memory.select(expand)
    state = start.state.select(expand)
    prev = start.prev[expand]
    # Only the first beam of each sentence is live at the start: the others are copies.
    beam_scores = ops.full((batch, k), float("-inf"), ops.float)
    beam_scores[:, 0] = start.log_prob
    history = start.tokens[expand]  # (B*K, t)
    weight_history = None  # (B*K, t, ...)
    if need_weights and start.weights is not None and start.length:
        weight_history = start.weights[ops.host_index(expand)]
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    recorder = None
    if trees is not None or on_step is not None:
        recorder = Recorder(start, k, alpha, on_step, ops)
    # A sentence leaves the batch as soon as it is done: the tensors below hold the n
    # sentences still searching, `ids` says which (the decoder no longer steps the beams
    # of finished sentences; RNNsearch beam 5 on the test book: benchmarks/README.md).
    ids = list(range(batch))
    for step in range(start.length, int(limits.max())):
        checkpoint()  # the server's client may have left (attnmt.cancel)
        n = len(ids)
        log_probs, state, step_weights = model.step_log_probs(
            prev, state, memory, need_weights=need_weights
        )
        vocab = log_probs.shape[-1]
        log_probs = log_probs.reshape(n, k, vocab)
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
        beam_top, beam_token = ops.topk(log_probs, per_beam)  # (n, K, 2K)
        candidates = (beam_scores[:, :, None] + beam_top).reshape(n, k * per_beam)
        top_scores, top_index = ops.topk(candidates, min(2 * k, k * per_beam))  # (n, 2K)
        origin = top_index // per_beam  # beam each candidate extends
        token = ops.take(beam_token.reshape(n, k * per_beam), top_index)
        if need_weights:
            step_weights = ops.astype(step_weights, ops.float)[:, None]  # (n*K, 1, ...)
            weight_history = (
                step_weights
                if weight_history is None
                else ops.cat([weight_history, step_weights], 1)
            )
        if recorder is not None:
            recorder.read_step(
                step, beam_top, beam_token, beam_scores, step_weights if need_weights else None
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
            fates = None if recorder is None else []  # (candidate, status) in rank order
            for j in range(2 * k):
                score = scores_at[b][j]
                if score == float("-inf"):
                    break
                row = b * k + origin_at[b][j]
                if token_at[b][j] == EOS:
                    if len(done) < k:
                        done.append(_finish(history[row], score, weight_history, row, alpha, ops))
                        if fates is not None:
                            fates.append((j, FINISHED))
                    elif fates is not None:
                        fates.append((j, PRUNED))
                elif live < k:
                    scores[live], rows[live], tokens[live] = score, row, token_at[b][j]
                    live += 1
                    if fates is not None:
                        fates.append((j, KEPT))
                if len(done) >= k or live >= k:
                    break
            ends = len(done) >= k or limit_at[b] or live == 0
            if recorder is not None:
                recorder.sentence(
                    ids[b], b, scores_at[b], origin_at[b], token_at[b], fates, ends, done
                )
            if ends:
                continue  # this sentence is done
            keep.append(b)
            new_scores.append(scores)
            new_rows.append(rows)
            new_tokens.append(tokens)
        if recorder is not None:
            recorder.next_rows(keep)
        if not keep:
            break
        rows = ops.tensor(new_rows, ops.long).reshape(-1)
        prev = ops.tensor(new_tokens, ops.long).reshape(-1)
        history = ops.cat([history[rows], prev[:, None]], 1)
        if weight_history is not None:
            weight_history = weight_history[rows]
        state = state.select(rows)
        beam_scores = ops.tensor(new_scores, ops.float)
        if len(keep) < n:  # the memory's rows of the sentences that go on
            kept = ops.tensor(keep, ops.long)
            memory = memory.select((kept[:, None] * k + ops.arange(k)).reshape(-1))
            limits = limits[kept]
            ids = [ids[b] for b in keep]
    results = []
    for b in range(batch):
        hyps = sorted(finished[b], key=lambda h: h.score, reverse=True)
        results.append(hyps[: options.n_best])
    if recorder is not None and trees is not None:
        trees.extend(recorder.close(results))
    return results


def _finish(
    tokens: Tensor,
    log_prob: float,
    weight_history: Tensor | None,
    row: int,
    alpha: float,
    ops: ArrayOps,
) -> Hypothesis:
    """A finished hypothesis from beam `row`: its tokens, normalised score and weights."""
    length = tokens.shape[0] + 1  # the EOS counts, as it does in greedy's score
    weights = None if weight_history is None else ops.copy(ops.host(weight_history[row]))
    return Hypothesis(
        tokens=tokens.tolist(),
        score=log_prob / float(length_penalty(length, alpha)),
        log_prob=log_prob,
        weights=weights,
    )


@without_grad
def alternatives(
    model: StepModel,
    src: Tensor,
    src_mask: Tensor,
    prefix: Tensor | None = None,
    options: SearchOptions = GREEDY,
    *,
    count: int = 5,
    min_prob: float = 0.0,
) -> list[tuple[int, float, Hypothesis]]:
    """The `count` most likely next tokens after `prefix`, each completed by the usual
    search (greedy, or beam search of `options.beam`, its best hypothesis):
    CTranslate2's `return_alternatives`.

    One sentence. The prefix is read once; the alternatives are its state copied `count`
    times, each with its token forced, and searched as one batch. An alternative whose
    probability is below `min_prob` is not expanded (CTranslate2's
    `min_alternative_expansion_prob`), but the most likely one always is. EOS among them
    is an output that ends after the prefix. Each hypothesis' score and log-probability
    are those of its whole output (prefix, alternative token and completion: what
    `attnmt score` gives it). Returns (token, its log-probability after the prefix, the
    completed hypothesis) for each, in the order of the tokens' probability.

    Shapes:
        src, src_mask: (1, S); prefix: (1, P)
    """
    if src.shape[0] != 1:
        raise ValueError(
            f"alternatives are searched for one sentence at a time, got {src.shape[0]}"
        )
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    ops = model.array_ops
    alpha, need_weights = options.alpha, options.need_weights
    start = begin(model, src, src_mask, prefix, need_weights=need_weights)
    checkpoint()
    log_probs, state, step_weights = model.step_log_probs(
        start.prev, start.state, start.memory, need_weights=need_weights
    )
    log_probs = log_probs[0]
    log_probs[list(NEVER_EMITTED)] = float("-inf")
    top, tokens = ops.topk(log_probs, min(count, log_probs.shape[0] - len(NEVER_EMITTED)))
    cut = math.log(min_prob) if min_prob > 0 else float("-inf")
    chosen = [
        (int(token), float(lp))
        for i, (token, lp) in enumerate(zip(tokens.tolist(), top.tolist(), strict=True))
        if (i == 0 or lp >= cut) and lp > float("-inf")
    ]
    row_weights = None if not need_weights else ops.host(step_weights)[:, None]  # (1, 1, ...)
    prefix_weights = start.weights if need_weights else None
    both = row_weights  # the prefix's rows and the alternative's, (1, P + 1, ...)
    if row_weights is not None and prefix_weights is not None:
        both = ops.cat([prefix_weights, row_weights], 1)
    out: list[Hypothesis | None] = [None] * len(chosen)
    searched = [i for i, (token, _) in enumerate(chosen) if token != EOS]
    for i, (token, lp) in enumerate(chosen):
        if token == EOS:  # the output ends after the prefix
            total = float(start.log_prob[0]) + lp
            out[i] = Hypothesis(
                tokens=start.tokens[0].tolist(),
                score=total / float(length_penalty(start.length + 1, alpha)),
                log_prob=total,
                weights=None if both is None else ops.copy(both[0]),
            )
    if searched:
        rows = ops.full((len(searched),), 0, ops.long)
        forced = ops.tensor([chosen[i][0] for i in searched], ops.long)
        forced_lp = ops.tensor([chosen[i][1] for i in searched], ops.float)
        branch = Start(
            memory=start.memory.select(rows),
            state=state.select(rows),
            prev=forced,
            tokens=ops.cat([start.tokens[rows], forced[:, None]], 1),
            token_log_probs=ops.cat([start.token_log_probs[rows], forced_lp[:, None]], 1),
            log_prob=start.log_prob[rows] + forced_lp,
            weights=None if both is None else both[ops.host_index(rows)],
        )
        masks = src_mask[rows]
        if options.beam == 1:
            done = greedy(model, src[rows], masks, options, start=branch)
        else:
            one = dataclasses.replace(options, n_best=1)
            done = [hyps[0] for hyps in beam_search(model, src[rows], masks, one, start=branch)]
        for i, hyp in zip(searched, done, strict=True):
            out[i] = hyp
    return [
        (token, lp, hyp) for (token, lp), hyp in zip(chosen, out, strict=True) if hyp is not None
    ]
