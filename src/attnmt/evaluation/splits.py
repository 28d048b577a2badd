"""Decoding a split and scoring it: BLEU, chrF, exact match, BLEU by length and speed
(`evaluate_examples`), and the alignment error rate of the attention against gold links
(`alignment_report`). `attnmt evaluate` writes what they return with `attnmt.report`.

The model decodes the sources with the run's own vocabulary, whatever the data cache
holds; sources longer than the run's `source_limit` are cut there and listed. For AER the
model reads the reference (forced decoding), so the links are between the reference's
words, the ones the gold links index.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import torch

from attnmt.alignment.links import (
    SYMMETRIZATIONS,
    SideWords,
    alignment_scores,
    diagonal_alignment,
    source_words,
    symmetrize,
    word_view,
)
from attnmt.data.alignments import load_gold
from attnmt.data.buckets import DECODE_BATCH_TOKENS
from attnmt.data.grammar import crossings
from attnmt.data.grammar_corpus import gold_pair
from attnmt.data.synthetic import TASKS
from attnmt.data.types import Example
from attnmt.decoding.attention_choice import AttentionChoice, aligning, choose_attention
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.runs import LoadedRun
from attnmt.decoding.scoring import forced_weights
from attnmt.metrics import bleu_by_length, bleu_tokenizer, corpus_scores, tokenizer_note
from attnmt.progress import progress_bar

# Step offsets whose AER `alignment_report` tabulates (`by_offset`): does step t, t+1... align?
OFFSETS = (-1, 0, 1, 2, 3)


def evaluate_examples(
    loaded: LoadedRun,
    examples: Sequence[Example],
    *,
    split: str,
    limit: int,
    sentences: int | None = None,
    beam: int = SearchOptions.beam,
    alpha: float = SearchOptions.alpha,
    max_len_ratio: float = SearchOptions.max_len_ratio,
    batch_tokens: int = DECODE_BATCH_TOKENS,
) -> tuple[dict[str, Any], list[str]]:
    """Decode `examples` and score them; returns (the result dict, the hypotheses).

    `limit` is the source length cut (`source_limit`); `sentences` is the `--limit` the
    examples were cut to, recorded as is.
    """
    vocab = loaded.vocab
    sources, truncated = [], []
    for index, ex in enumerate(examples):
        ids = vocab.src.encode(ex.src)  # the run's vocabulary, whatever the cache holds
        if len(ids) > limit:
            truncated.append(index)
            ids = ids[:limit]
        sources.append(ids)
    bar = progress_bar(
        total=len(sources), unit="sent", desc=f"decoding {split}", dynamic_ncols=True
    )
    device = next(loaded.model.parameters()).device
    with bar:
        _synchronize(device)
        started = time.perf_counter()
        translations = translate_ids(
            loaded.model,
            sources,
            vocab.tgt.decode,
            SearchOptions(beam=beam, alpha=alpha, max_len_ratio=max_len_ratio),
            batch_tokens=batch_tokens,
            progress=bar,
        )
        _synchronize(device)
        seconds = time.perf_counter() - started
    hypotheses = [t.text for t in translations]
    references = [[ex.tgt, *ex.refs] for ex in examples]
    tokenize = bleu_tokenizer(loaded.cfg.data.tgt)
    scores = corpus_scores(hypotheses, references, tokenize=tokenize)
    by_length = bleu_by_length(
        [ex.src for ex in examples], hypotheses, references, tokenize=tokenize
    )
    cfg = loaded.cfg
    result: dict[str, Any] = {
        "run": str(loaded.run_dir),
        "checkpoint": str(loaded.checkpoint),
        "step": loaded.step,
        "model": cfg.model.name,
        "corpus": cfg.data.corpus,
        "src": cfg.data.src,
        "tgt": cfg.data.tgt,
        "split": split,
        "limit": sentences,
        "beam": beam,
        "alpha": alpha,
        "max_len_ratio": max_len_ratio,
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        **scores,
        "bleu_tokenizer": tokenize,
        "bleu_note": tokenizer_note(cfg.data.tgt),  # "" unless BLEU fell back to characters
        "bleu_by_length": by_length,
        "speed": {
            "sentences": len(examples),
            "seconds": round(seconds, 3),
            "sentences_per_s": round(len(examples) / max(seconds, 1e-9), 2),
            "output_subwords_per_s": round(
                sum(len(t.tokens) + 1 for t in translations) / max(seconds, 1e-9), 1
            ),
            "device": str(device),
            "batch_tokens": batch_tokens,
        },
        "source_limit": limit,
        "truncated": [examples[i].id or i for i in truncated],
    }
    return result, hypotheses


def _synchronize(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class GoldPair:
    """A verse (or synthetic sequence) with known links, as a run reads it."""

    index: int  # in the examples given
    src_ids: list[int]
    tgt_ids: list[int]
    source: SideWords
    target: SideWords
    links: set[tuple[int, int]]  # gold (source word, target word), the sure ones
    sizes: tuple[int, int]  # words of the source (before any length cut) and target
    possible: set[tuple[int, int]] | None = None  # P ⊇ S where known (the grammar lab)
    pair: Any = None  # the grammar lab's GrammarPair (phenomena, crossings), else None


def gold_pairs(
    loaded: LoadedRun, examples: Sequence[Example], limit: int
) -> tuple[list[GoldPair], dict[str, int]]:
    """The examples whose right links are known, with their ids and word maps: verses with
    gold links (the Greek→English corpus, turned round for English→Greek), every pair of
    the grammar lab (its sure and possible links), or every sequence of a synthetic task
    (reverse: target j is source n − 1 − j; copy: j; sort: the stable order of the
    symbols). Returns (them, how many were skipped and why)."""
    vocab = loaded.vocab
    swapped = loaded.cfg.data.swap  # English -> Greek: the gold links turned round
    task = loaded.cfg.data.corpus if loaded.cfg.data.corpus in TASKS else None
    found: list[GoldPair] = []
    skipped = {"no_gold": 0, "word_mismatch": 0}
    for index, ex in enumerate(examples):
        src_ids = vocab.src.encode(ex.src)
        tgt_ids = vocab.tgt.encode(ex.tgt)
        # The gold links index the words of the verse: the word maps must see the same.
        source = source_words(vocab.src, ex.src, len(src_ids))
        target = source_words(vocab.tgt, ex.tgt, len(tgt_ids))
        possible = pair = None
        if task is not None:
            links = synthetic_links(task, [int(w) for w in ex.src.split()])
        elif loaded.cfg.data.corpus == "grammar":
            pair = gold_pair(loaded.cfg.data, ex.id)
            if pair is None:
                skipped["no_gold"] += 1
                continue
            if (source.words, target.words) != (list(pair.src), list(pair.tgt)):
                skipped["word_mismatch"] += 1
                continue
            links, possible = pair.sure, set(pair.possible)
        else:
            verse = _gold_verse(ex.id, swapped)
            if verse is None:
                skipped["no_gold"] += 1
                continue
            if (source.words, target.words) != (verse.src, verse.tgt):
                skipped["word_mismatch"] += 1
                continue
            links = verse.links
        sizes = (len(source.words), len(target.words))
        if len(src_ids) > limit:  # links to the words cut off count as missed
            src_ids = src_ids[:limit]
            source = source_words(vocab.src, ex.src, limit)
        found.append(
            GoldPair(index, src_ids, tgt_ids, source, target, set(links), sizes, possible, pair)
        )
    return found, skipped


def phenomenon_scores(
    predicted: Sequence[set[tuple[int, int]]], gold: Sequence[GoldPair]
) -> dict[str, dict[str, Any]]:
    """Sure-only precision and recall of the links of the target words that show each
    phenomenon of the grammar lab (`attnmt.data.grammar.PHENOMENA`), and of the crossing
    links (the reordered spans, `crossings`) apart from the rest: possible links let a
    sparse aligner look good on AER, so these count sure links only.

    precision = |A ∩ S| / |A|, recall = |A ∩ S| / |S|, A and S restricted to the target
    words of the phenomenon (for "crossing": to the target words of a crossing link)."""
    counts: dict[str, list[int]] = {}  # name -> [|A|, |S|, |A ∩ S|]
    for links, g in zip(predicted, gold, strict=True):
        groups: dict[str, set[int]] = {}
        for j, name in enumerate(g.pair.phenomena):
            groups.setdefault(name, set()).add(j)
        groups["crossing"] = {j for _, j in crossings(g.pair)}
        groups["not crossing"] = set(range(len(g.pair.tgt))) - groups["crossing"]
        for name, words in groups.items():
            a = {link for link in links if link[1] in words}
            s = {link for link in g.links if link[1] in words}
            row = counts.setdefault(name, [0, 0, 0])
            row[0] += len(a)
            row[1] += len(s)
            row[2] += len(a & s)
    return {
        name: {
            "precision": round(hits / n_a, 4) if n_a else 1.0,
            "recall": round(hits / n_s, 4) if n_s else 1.0,
            "sure": n_s,
            "predicted": n_a,
        }
        for name, (n_a, n_s, hits) in sorted(counts.items())
    }


def synthetic_links(task: str, symbols: Sequence[int]) -> set[tuple[int, int]]:
    """The right links of a synthetic sequence: (source position, target position)."""
    n = len(symbols)
    if task == "reverse":
        return {(n - 1 - j, j) for j in range(n)}
    if task == "sort":
        return {(i, j) for j, i in enumerate(sorted(range(n), key=symbols.__getitem__))}
    return {(j, j) for j in range(n)}


def alignment_report(
    loaded: LoadedRun,
    examples: Sequence[Example],
    choice: AttentionChoice,
    limit: int,
    batch_tokens: int = DECODE_BATCH_TOKENS,
):
    """AER of the run's attention on `examples` (whose ids are gold verse refs).

    Returns (the report dict, the predicted links per example: None where skipped).
    """
    swapped = loaded.cfg.data.swap
    gold, skipped = gold_pairs(loaded, examples, limit)
    chosen = [g.index for g in gold]
    pairs = [(g.src_ids, g.tgt_ids) for g in gold]
    maps = [(g.source, g.target, g) for g in gold]
    if not pairs:  # nothing scored is not a perfect score
        return {"sentences": 0, "skipped": skipped, "note": "no verse could be scored"}, [
            None
        ] * len(examples)
    weights = forced_weights(loaded.model, pairs, batch_tokens=batch_tokens)

    def links_of(choice: AttentionChoice) -> list[set[tuple[int, int]]]:
        return [
            word_view(aligning(w, choice), source, target).links
            for w, (source, target, _) in zip(weights, maps, strict=True)
        ]

    sure = [g.links for g in gold]
    possible = [g.possible if g.possible is not None else g.links for g in gold]

    def scored(links: list[set[tuple[int, int]]]) -> dict[str, Any]:
        return _rounded(alignment_scores(links, sure, possible))

    predicted = links_of(choice)
    scores = scored(predicted)
    diagonal = [diagonal_alignment(*g.sizes) for g in gold]
    report: dict[str, Any] = {
        "method": "forced decoding of the reference; attention merged to words; each "
        "target word linked to its most-attended source word",
        "attention": choice.as_dict(),
        **({"swapped": True} if swapped else {}),  # English -> Greek
        **scores,
        "skipped": skipped,
        "diagonal": scored(diagonal),
    }
    if gold and gold[0].pair is not None:  # the grammar lab: where the links go wrong
        report["by_phenomenon"] = phenomenon_scores(predicted, gold)
    # Which decoder step aligns target word t: the chosen matrix read at t + k.
    report["by_offset"] = [
        {"offset": k, **scored(links_of(replace(choice, offset=k)))} for k in OFFSETS
    ]
    if choice.transformer and weights:
        rows = []
        for layer in range(1, choice.layers + 1):
            for head in [*range(1, choice.heads + 1), None]:
                pick = replace(choice, layer=layer, head=head)
                row = scored(links_of(pick))
                rows.append({"layer": layer, "head": head or "mean", **row})
        report["by_head"] = rows
    per_example: list[set[tuple[int, int]] | None] = [None] * len(examples)
    for index, links in zip(chosen, predicted, strict=True):
        per_example[index] = links
    return report, per_example


def symmetrized_report(
    loaded: LoadedRun,
    links: Sequence[set[tuple[int, int]] | None],
    examples: Sequence[Example],
    other: LoadedRun,
    other_examples: Sequence[Example],
    limit: int,
    other_limit: int,
    batch_tokens: int = DECODE_BATCH_TOKENS,
) -> dict[str, Any]:
    """AER of this run's attention links made one with those of `other`, a run of the other
    direction on the same verses (Greek -> English with English -> Greek), by each
    symmetrization heuristic of phrase-based MT (`symmetrize`).

    `links` are this run's per example (`alignment_report`'s second value); `other`'s are
    read with its own default attention (mean of the second-to-last layer, offset 0) and
    turned round. Verses either run skipped are left out of every figure, this run's own
    one direction included ("one_direction"), so that all rows score the same verses.
    """
    if loaded.cfg.data.swap == other.cfg.data.swap:
        raise ValueError("the two runs translate the same way; symmetrization needs both")
    choice = choose_attention(other.cfg.model)
    _, theirs = alignment_report(other, other_examples, choice, other_limit, batch_tokens)
    reverse = {
        ex.id: {(j, i) for i, j in found}
        for ex, found in zip(other_examples, theirs, strict=True)
        if found is not None
    }
    forward, backward, sure = [], [], []
    for ex, found in zip(examples, links, strict=True):
        if found is None or ex.id not in reverse:
            continue
        forward.append(found)
        backward.append(reverse[ex.id])
        sure.append(_gold_verse(ex.id, loaded.cfg.data.swap).links)
    report: dict[str, Any] = {
        "other_run": str(other.run_dir),
        "other_attention": choice.as_dict(),
        "sentences": len(sure),
        "one_direction": _rounded(alignment_scores(forward, sure)),
        "other_direction": _rounded(alignment_scores(backward, sure)),
    }
    for method in SYMMETRIZATIONS:
        made = [symmetrize(f, b, method) for f, b in zip(forward, backward, strict=True)]
        report[method] = _rounded(alignment_scores(made, sure))
    return report


@lru_cache(maxsize=1)
def _gold_by_ref() -> dict[str, Any]:
    """The gold verses by reference ("John 3:16"); read once per process (~2 s)."""
    return {verse.ref: verse for verse in load_gold().verses}


def _gold_verse(ref: str, swapped: bool) -> Any:
    """The gold verse `ref` as a run of that direction sees it (None if it has no links)."""
    verse = _gold_by_ref().get(ref)
    return verse.transposed() if swapped and verse is not None else verse


def _rounded(scores: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()}
