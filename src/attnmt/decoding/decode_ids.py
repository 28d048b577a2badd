"""Decoding source id lists in batches: `translate_ids`, the engine under `Translator`,
validation during training, `attnmt evaluate` and `plot`. It batches sources by length,
decodes them (greedy or beam, with the attention weights, a forced prefix and the
recorded search when asked) and detokenizes, keeping the input order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from attnmt.data.buckets import DECODE_BATCH_TOKENS, batches_by_length
from attnmt.data.vocab import EOS
from attnmt.decoding.array_ops import ArrayOps
from attnmt.decoding.hypotheses import Hypothesis
from attnmt.decoding.options import GREEDY, SearchOptions
from attnmt.decoding.search import beam_search, greedy
from attnmt.decoding.search_tree import SearchTree, StepHook
from attnmt.decoding.step_model import StepModel

if TYPE_CHECKING:  # torch tensors, or numpy arrays for an export (attnmt.runtime)
    from torch import Tensor


@dataclass
class Translation:
    """One translated sentence: text, token ids, score and (when asked) attention weights.

    Not a `Hypothesis` because it is what a *line* became: the best hypothesis with its
    text, the n-best list it won (`Hypothesis`es) and the recorded search."""

    text: str
    tokens: list[int]
    score: float
    weights: Tensor | None = None  # (T, S) RNN, (T, L, H, S) Transformer
    nbest: list[Hypothesis] | None = None
    log_prob: float | None = None  # log P(tokens, EOS | source), before the length penalty
    search: SearchTree | None = None  # the recorded search (`record_search`)


def translate_ids(
    model: StepModel,
    sources: Sequence[Sequence[int]],
    decode_text,
    options: SearchOptions = GREEDY,
    *,
    batch_tokens: int = DECODE_BATCH_TOKENS,
    progress=None,
    prefixes: Sequence[Sequence[int] | None] | None = None,
    record_search: bool = False,
    on_step: StepHook | None = None,
    exact_lengths: Sequence[int] | None = None,
) -> list[Translation]:
    """Translate source id lists (without EOS: it is added, as the batcher does) in batches,
    searched as `options` say (beam 1: greedy search).

    `prefixes` (one id list or None per source): each output begins with its forced prefix
    (sentences with prefixes of one length share a batch). `record_search` keeps each
    sentence's `SearchTree` (greedy search is then beam search with K = 1, which finds the
    same); `on_step(index, nodes)` is called with each step's new nodes, `index` the
    source's position in `sources`.
    `exact_lengths` (greedy only): output i has exactly exact_lengths[i] tokens before its
    EOS (the reference's length, say: a model's words judged apart from where it stops).

    `decode_text(ids) -> str` detokenizes; `progress` (a tqdm bar or None) is advanced by
    the number of sentences in each batch. The output keeps the input order. An output
    stops at `options.max_len_ratio` times its source length (plus 5) tokens, the EOS
    included, or at `options.max_len` tokens when that is fewer; `max_len` defaults to the
    model's `max_output_tokens` (image models: an image's source is thousands of pixels long).

    Shapes:
        Translation.weights (and those of `nbest`): (T, S) RNN, (T, L, H, S) Transformer,
        T = len(tokens) + 1 and S = len(source) + 1 (the EOS on each side), padding cut off.
    """
    ops = model.array_ops
    beam, n_best = options.beam, options.n_best
    if exact_lengths is not None and (beam, n_best, record_search) != (1, 1, False):
        raise ValueError("output lengths can be forced in greedy decoding only (beam 1)")
    if exact_lengths is not None and len(exact_lengths) != len(sources):
        raise ValueError(f"{len(exact_lengths)} output lengths for {len(sources)} sources")
    if options.max_len is None:
        options = replace(options, max_len=model.max_output_tokens)
    was_training = getattr(model, "training", False)  # a torch module; an export has none
    if was_training:
        model.eval()
    results: list[Translation | None] = [None] * len(sources)
    # Beam search multiplies the rows by K: keep the padded-token budget per beam row.
    budget = max(1, batch_tokens // beam)
    sources = [[*s, EOS] for s in sources]
    try:
        for whole in batches_by_length([len(s) for s in sources], budget):
            for batch in _by_prefix_length(whole, prefixes):
                src, src_mask = ops.pad([sources[i] for i in batch])
                prefix = None
                if prefixes is not None and prefixes[batch[0]]:
                    prefix = ops.tensor([list(prefixes[i]) for i in batch], ops.long)
                trees: list[SearchTree] | None = [] if record_search else None
                hook = None
                if on_step is not None:
                    hook = _batch_hook(on_step, batch)
                if beam == 1 and n_best == 1 and trees is None and hook is None:
                    lengths = None
                    if exact_lengths is not None:
                        lengths = ops.tensor([exact_lengths[i] for i in batch], ops.long)
                    found = greedy(
                        model, src, src_mask, options, prefix=prefix, exact_lengths=lengths
                    )
                    hyps = [[h] for h in found]
                else:
                    hyps = beam_search(
                        model, src, src_mask, options, prefix=prefix, trees=trees, on_step=hook
                    )
                _keep(results, batch, hyps, trees, sources, decode_text, n_best, ops)
            if progress is not None:
                progress.update(len(whole))
    finally:
        if was_training:
            model.train(was_training)
    return [r for r in results if r is not None]


def _by_prefix_length(batch: list[int], prefixes) -> list[list[int]]:
    """The batch split so that the sentences of each part have prefixes of one length."""
    if prefixes is None:
        return [batch]
    parts: dict[int, list[int]] = {}
    for i in batch:
        parts.setdefault(len(prefixes[i] or ()), []).append(i)
    return list(parts.values())


def _batch_hook(on_step: StepHook, batch: list[int]) -> StepHook:
    """The search's step hook (sentence = position in the batch) as the caller's (index)."""
    return lambda b, nodes: on_step(batch[b], nodes)


def _keep(results, batch, hyps, trees, sources, decode_text, n_best, ops) -> None:
    """Store a batch's hypotheses (and trees) as `Translation`s at their sources' places."""
    for position, (index, nbest) in enumerate(zip(batch, hyps, strict=True)):
        # Weights cover the batch's padded width: keep this sentence's S columns.
        width = len(sources[index])
        nbest = [_trim(h, width, ops) for h in nbest]
        best = nbest[0]
        tree = None
        if trees is not None:
            tree = trees[position]
            for node in tree.nodes:  # its weights are read cut to this sentence's S columns
                node.width = width
        results[index] = Translation(
            text=decode_text(best.tokens),
            tokens=best.tokens,
            score=best.score,
            weights=best.weights,
            nbest=nbest if n_best > 1 else None,
            log_prob=best.log_prob,
            search=tree,
        )


def _trim(hyp: Hypothesis, width: int, ops: ArrayOps) -> Hypothesis:
    """The hypothesis with its weights cut to the first `width` source positions."""
    if hyp.weights is None or hyp.weights.shape[-1] == width:
        return hyp
    return replace(hyp, weights=ops.copy(hyp.weights[..., :width]))
