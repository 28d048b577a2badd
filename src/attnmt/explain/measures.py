"""Is an explanation true? Each method measured on the same sentences of a trained run:

- **AER** against gold links (the Greek→English verses, or a synthetic task's known
  answer), and on the grammar lab against the exact *causes* of each target word (the
  source words whose same-category substitution changes it, `GrammarPair.causes`: a
  French article's cause is its noun, not *the*): the method's matrix read exactly as
  the attention is (`aligning`'s step offset, subwords merged to words, each target word
  linked to its highest-scoring source word).
- **Deletion and insertion** (Samek et al. 2017; Petsiuk et al. 2018): source words are
  ranked by the explanation's total over the target (each word's column sum), then
  replaced by <unk> (every piece of the word; the length stays the same) in that order,
  10% of the words at a time; the curve is log p(reference) per target token. Deletion
  should fall fast (a low area), insertion, starting from an all-<unk> source and putting
  words back, rise fast (a high area). A random order per sentence is the baseline.
- **ERASER** (DeYoung et al. 2020): comprehensiveness = log p(ref | x) − log p(ref | x
  without the top k%), sufficiency = log p(ref | x) − log p(ref | only the top k%), each
  the mean over k = 10, 20, 50%; points of the two curves above.
- **Cost**: milliseconds per sentence, sequences passed forward and backward per sentence.
- On the grammar lab, two more (`model_probes`): the AER against the causes **where the
  model's own output changes** under the intervention that defines them (each source leaf
  given another item of its slot; only target words whose cause, so substituted, changes
  the model's greedy output there are scored, on sentences it translates exactly), and
  deletion/insertion with **same-category replacement** instead of <unk> (a noun by another
  noun: the sentence stays in the language the model knows; words of one-item slots, which
  have no substitute, still become <unk>).

    report = explanation_report(loaded, examples, ["attention", "occlusion"], choice, limit)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnmt.alignment.links import (
    SideWords,
    alignment_scores,
    diagonal_alignment,
    shift_rows,
    source_words,
    word_view,
)
from attnmt.data.grammar import substitutions
from attnmt.data.vocab import UNK
from attnmt.decoding.attention_choice import AttentionChoice
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.scoring import forced_decode
from attnmt.evaluation.splits import gold_pairs
from attnmt.explain.images import image_markdown
from attnmt.explain.methods import explain
from attnmt.explain.names import IG_STEPS, SIGNED

FRACTIONS = tuple(round(0.1 * k, 1) for k in range(11))  # of the source words, 0..1
ERASER_FRACTIONS = (0.1, 0.2, 0.5)


@dataclass
class Item:
    """One sentence of the measured set."""

    src_ids: list[int]
    tgt_ids: list[int]
    source: SideWords
    target: SideWords
    links: set[tuple[int, int]] | None  # gold, when known
    pair: Any = None  # the grammar lab's GrammarPair, else None


@dataclass
class Probe:
    """What substituting each cause did to the model's own output, for one lab sentence."""

    responsive: set[int] | None  # target words whose output changed; None: output wrong
    replacement: dict[int, str]  # source word -> a word of its slot (occlusion by kind)


def items_of(loaded: Any, examples: Sequence[Any], limit: int, sentences: int) -> list[Item]:
    """The first `sentences` examples with gold links (when the corpus has them; on the
    grammar lab its causes, `cause_links`), else the first `sentences` examples with their
    references."""
    gold, _ = gold_pairs(loaded, examples, limit)
    if gold:
        return [
            Item(
                g.src_ids, g.tgt_ids, g.source, g.target,
                g.links if g.pair is None else cause_links(g.pair, len(g.source.words)),
                g.pair,
            )
            for g in gold[:sentences]
        ]  # fmt: skip
    vocab, out = loaded.vocab, []
    for ex in examples[:sentences]:
        src_ids, tgt_ids = vocab.src.encode(ex.src)[:limit], vocab.tgt.encode(ex.tgt)
        source = source_words(vocab.src, ex.src, len(src_ids))
        target = source_words(vocab.tgt, ex.tgt, len(tgt_ids))
        out.append(Item(src_ids, tgt_ids, source, target, None))
    return out


def cause_links(pair: Any, source_words: int) -> set[tuple[int, int]]:
    """A grammar pair's causes as links (source word, target word): every source word whose
    substitution changes target word j (`GrammarPair.causes`), those within the first
    `source_words` (a source cut at the run's length limit loses the rest)."""
    return {(i, j) for j, found in enumerate(pair.causes) for i in found if i < source_words}


def top_k_links(word_weights: np.ndarray, gold: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Each target word j linked to its k_j highest-scoring source words, k_j being how
    many gold links (causes) it has: none for a word without a cause (ties by position).
    The number of links is the gold's, so AER measures which words, not how many.

    Shapes:
        word_weights: (T_words, S_words)
    """
    wanted: dict[int, int] = {}
    for _, j in gold:
        wanted[j] = wanted.get(j, 0) + 1
    links = set()
    for j, k in wanted.items():
        if j < len(word_weights):
            order = sorted(range(word_weights.shape[1]), key=lambda i: (-word_weights[j, i], i))
            links.update((i, j) for i in order[:k])
    return links


def one_link_floor(items: Sequence[Item]) -> dict[str, float]:
    """The lowest AER against the causes that any method linking every target word to
    exactly one source word can reach on `items`: with T target words, N0 of them without
    a cause and S cause links, at most T − N0 links can be right, so
    AER ≥ 1 − 2·(T − N0) / (T + S) (Och & Ney's AER with P = S). A percentage."""
    words = sum(len(i.target.words) for i in items)
    caused = sum(len({j for _, j in i.links or ()}) for i in items)
    links = sum(len(i.links or ()) for i in items)
    floor = 1 - 2 * caused / max(1, words + links)
    return {"aer": round(100 * floor, 2), "target_words": words,
            "without_cause": words - caused, "cause_links": links}  # fmt: skip


def word_ranking(matrix: np.ndarray, source: SideWords, target: SideWords) -> list[int]:
    """Source words, most important first: the column sums of the word-level matrix (ties
    by position)."""
    words = word_view(matrix, source, target).word_weights.sum(axis=0)  # (S_words,)
    return sorted(range(len(words)), key=lambda w: -words[w])


def masked(src_ids: Sequence[int], word_of: Sequence[int], words: set[int]) -> list[int]:
    """The source with every piece of `words` replaced by <unk>."""
    return [UNK if w in words else i for i, w in zip(src_ids, word_of, strict=True)]


def model_probes(loaded: Any, items: Sequence[Item], limit: int) -> list[Probe]:
    """For each lab sentence (`Item.pair`): one same-slot substitution per source leaf
    (`substitutions`, seeded by the sentence's index), every substituted source decoded
    greedily with the original in one batch, and the target words whose output changed
    where the substituted word is one of their causes."""
    vocab = loaded.vocab
    plans = [substitutions(item.pair, seed=n) for n, item in enumerate(items)]
    sources = []
    for item, subs in zip(items, plans, strict=True):
        sources.append(item.src_ids)
        sources += [vocab.src.encode(" ".join(sub.src))[:limit] for sub in subs]
    outputs = iter(t.text.split() for t in translate_ids(loaded.model, sources, vocab.tgt.decode))
    probes = []
    for item, subs in zip(items, plans, strict=True):
        first = next(outputs)
        right = first == list(item.pair.tgt)
        responsive: set[int] = set()
        for sub in subs:
            changed = next(outputs)
            if not right:  # its words are not the reference's: nothing to compare with
                continue
            for j, word in enumerate(first):
                moved = j >= len(changed) or changed[j] != word
                if moved and set(sub.positions) & item.pair.causes[j]:
                    responsive.add(j)
        replacement = {i: sub.src[i] for sub in subs for i in sub.positions}
        probes.append(Probe(responsive if right else None, replacement))
    return probes


def _where_output_changes(
    links: Sequence[set[tuple[int, int]]], items: Sequence[Item], probes: Sequence[Probe]
) -> dict[str, float] | None:
    """AER of `links` against the causes on the probed words only (None: no such word)."""
    chosen, gold = [], []
    for found, item, probe in zip(links, items, probes, strict=True):
        rows = probe.responsive or set()
        chosen.append({(i, j) for i, j in found if j in rows})
        gold.append({(i, j) for i, j in item.links or () if j in rows})
    if not any(gold):
        return None
    return _aer(alignment_scores(chosen, gold))


def curves(
    model: Any,
    items: Sequence[Item],
    rankings: dict[str, list[list[int]]],
    occlude: Any = None,
) -> dict:
    """Deletion and insertion curves (mean log p per reference token, at `FRACTIONS`) of
    each ranking, every variant of every sentence scored in one batched forced decoding.
    `occlude(n, words)`: sentence n's source ids with `words` taken out (default: every
    piece of them replaced by <unk>)."""
    if occlude is None:

        def occlude(n: int, words: set[int]) -> list[int]:
            return masked(items[n].src_ids, items[n].source.word_of, words)

    variants: dict[tuple[int, tuple[int, ...]], int] = {}
    pairs: list[tuple[list[int], list[int]]] = []
    plan: dict[str, list[tuple[list[int], list[int]]]] = {}

    def index(n: int, src: list[int]) -> int:
        key = (n, tuple(src))
        if key not in variants:
            variants[key] = len(pairs)
            pairs.append((src, items[n].tgt_ids))
        return variants[key]

    for name, per_item in rankings.items():
        plan[name] = []
        for n, order in enumerate(per_item):
            every = set(order)
            deleted, inserted = [], []
            for fraction in FRACTIONS:
                top = set(order[: round(fraction * len(order))])
                deleted.append(index(n, occlude(n, top)))
                inserted.append(index(n, occlude(n, every - top)))
            plan[name].append((deleted, inserted))
    decoded = forced_decode(model, pairs, need_weights=False, need_log_probs=True)
    per_token = np.array([float(lp.double().mean()) for lp, _ in decoded])
    out = {}
    for name, rows in plan.items():
        deletion = np.mean([per_token[d] for d, _ in rows], axis=0)  # (fractions,)
        insertion = np.mean([per_token[i] for _, i in rows], axis=0)
        full = deletion[0]
        at = [FRACTIONS.index(f) for f in ERASER_FRACTIONS]
        out[name] = {
            "deletion": [round(float(v), 4) for v in deletion],
            "insertion": [round(float(v), 4) for v in insertion],
            "deletion_auc": round(float(np.trapezoid(deletion, FRACTIONS)), 4),
            "insertion_auc": round(float(np.trapezoid(insertion, FRACTIONS)), 4),
            "comprehensiveness": round(float(np.mean([full - deletion[i] for i in at])), 4),
            "sufficiency": round(float(np.mean([full - insertion[i] for i in at])), 4),
        }
    return out


def explanation_report(
    loaded: Any,
    examples: Sequence[Any],
    methods: Sequence[str],
    choice: AttentionChoice,
    limit: int,
    *,
    sentences: int = 100,
    ig_steps: int = IG_STEPS,
    seed: int = 1,
) -> dict[str, Any]:
    """Every measure above for each of `methods`, on the first `sentences` examples (those
    with gold links where the corpus has them)."""
    items = items_of(loaded, examples, limit, sentences)
    if not items:
        return {"sentences": 0, "note": "no sentence to explain"}
    model = loaded.model
    pairs = [(item.src_ids, item.tgt_ids) for item in items]
    has_gold = all(item.links is not None for item in items)
    rng = random.Random(seed)
    rankings: dict[str, list[list[int]]] = {"random": []}
    for item in items:
        order = list(range(len(item.source.words)))
        rng.shuffle(order)
        rankings["random"].append(order)
    report: dict[str, Any] = {"sentences": len(items), "methods": {}}
    lab = has_gold and all(item.pair is not None for item in items)
    probes = model_probes(loaded, items, limit) if lab else None
    if has_gold:
        report["gold"] = "causes" if loaded.cfg.data.corpus == "grammar" else "links"
        sure = [item.links for item in items]
        diagonal = [diagonal_alignment(len(i.source.words), len(i.target.words)) for i in items]
        report["diagonal"] = _aer(alignment_scores(diagonal, sure))
        if lab:
            report["one_link_floor"] = one_link_floor(items)
    if probes is not None:
        exact = [p for p in probes if p.responsive is not None]
        report["where_output_changes"] = {
            "sentences": len(exact),  # translated exactly, so its words are the reference's
            "words": sum(len(p.responsive) for p in exact),
            "target_words": sum(
                len(i.target.words)
                for i, p in zip(items, probes, strict=True)
                if p.responsive is not None
            ),
            "diagonal": _where_output_changes(diagonal, items, probes),
        }
    for method in methods:
        explained = explain(model, pairs, method, choice, ig_steps=ig_steps)
        row: dict[str, Any] = {}
        if has_gold:
            views = [
                word_view(shift_rows(e.matrix.numpy(), choice.offset), i.source, i.target)
                for e, i in zip(explained, items, strict=True)
            ]
            links = [v.links for v in views]
            row.update(_aer(alignment_scores(links, sure)))
            if lab:  # as many links per target word as it has causes: no one-link floor
                top = [
                    top_k_links(v.word_weights, i.links) for v, i in zip(views, items, strict=True)
                ]
                row["top_k"] = _aer(alignment_scores(top, sure))
            if probes is not None:
                row["where_output_changes"] = _where_output_changes(links, items, probes)
        rankings[method] = [
            word_ranking(e.matrix.numpy(), i.source, i.target)
            for e, i in zip(explained, items, strict=True)
        ]
        row.update(
            {
                "ms_per_sentence": round(1000 * np.mean([e.seconds for e in explained]), 1),
                "forward_per_sentence": round(float(np.mean([e.forward for e in explained])), 1),
                "backward_per_sentence": round(float(np.mean([e.backward for e in explained])), 1),
                "signed": method in SIGNED,
            }
        )
        done = [e.completeness for e in explained if e.completeness is not None]
        if done:
            row["completeness_error"] = round(float(np.mean(done)), 5)
        report["methods"][method] = row
    faithful = curves(model, items, rankings)
    report["random"] = faithful.pop("random")
    for method, row in report["methods"].items():
        row.update(faithful[method])
        row["better_than_random"] = row["deletion_auc"] < report["random"]["deletion_auc"]
    if probes is not None:  # the same orders, each word replaced by another of its kind
        encode = loaded.vocab.src.encode

        def by_kind(n: int, words: set[int]) -> list[int]:
            swap, ids = probes[n].replacement, []
            for w, word in enumerate(items[n].source.words):
                if w not in words:
                    ids += encode(word)
                else:  # another word of its slot; <unk> where the slot has one item
                    ids += encode(swap[w]) if w in swap else [UNK]
            return ids[:limit]

        kind = curves(model, items, rankings, by_kind)
        random_kind = kind.pop("random")
        keep = ("deletion_auc", "insertion_auc")
        report["by_replacement"] = {"random": {k: random_kind[k] for k in keep}}
        for method, row in kind.items():
            report["by_replacement"][method] = {k: row[k] for k in keep}
            report["by_replacement"][method]["better_than_random"] = (
                row["deletion_auc"] < random_kind["deletion_auc"]
            )
    report["fractions"] = list(FRACTIONS)
    report["eraser_fractions"] = list(ERASER_FRACTIONS)
    report["replacement"] = "<unk> for every piece of a removed word"
    if probes is not None:
        report["by_replacement"]["replacement"] = (
            "another word of the same slot (<unk> where the slot has no other)"
        )
    return report


def _aer(scores: dict[str, Any]) -> dict[str, float]:
    return {k: round(100 * scores[k], 2) for k in ("aer", "precision", "recall")}


def markdown_rows(report: dict[str, Any]) -> list[str]:
    """The evaluation report's "Explanations" section: one row per method."""
    if not report.get("methods"):
        return []
    if report.get("images"):
        return image_markdown(report)
    gold = "diagonal" in report
    lines = [
        "## Explanations",
        "",
        f"{report['sentences']} sentences, each read with its reference (forced decoding). "
        "Deletion/insertion: mean log p per reference token as source words are replaced by "
        "<unk> in the method's order (area over 0..100% of the words; deletion lower is "
        "better, insertion higher); ERASER comprehensiveness (higher is better) and "
        "sufficiency (lower is better) at 10/20/50% of the words. docs/explain.md.",
        "",
        "| method | "
        + (f"AER vs {report.get('gold', 'links')} (%) | " if gold else "")
        + "deletion AUC | insertion AUC | compr. | suff. | vs random | ms/sentence "
        "| passes fwd/bwd |",
        "|---|" + ("---:|" if gold else "") + "---:|---:|---:|---:|---|---:|---:|",
    ]
    for method, row in report["methods"].items():
        verdict = "better" if row["better_than_random"] else "**no better than random**"
        lines.append(
            f"| {method} | "
            + (f"{row['aer']:.1f} | " if gold else "")
            + f"{row['deletion_auc']:.3f} | {row['insertion_auc']:.3f} | "
            f"{row['comprehensiveness']:.3f} | {row['sufficiency']:.3f} | {verdict} | "
            f"{row['ms_per_sentence']:.1f} | {row['forward_per_sentence']:.0f}/"
            f"{row['backward_per_sentence']:.0f} |"
        )
    rand = report["random"]
    lines.append(
        "| random order | "
        + (f"{report['diagonal']['aer']:.1f} (diagonal) | " if gold else "")
        + f"{rand['deletion_auc']:.3f} | {rand['insertion_auc']:.3f} | "
        f"{rand['comprehensiveness']:.3f} | {rand['sufficiency']:.3f} | | | |"
    )
    return [*lines, "", *_lab_rows(report)]


def _lab_rows(report: dict[str, Any]) -> list[str]:
    """The grammar lab's two refinements, one row per method (none elsewhere)."""
    probed, kind = report.get("where_output_changes"), report.get("by_replacement")
    if not probed or not kind:
        return []

    def aer(found: dict | None) -> str:
        return "—" if not found else f"{found['aer']:.1f}"

    lines = [
        f"Where the model responds ({probed['words']} of {probed['target_words']} target "
        f"words, in the {probed['sentences']} sentences it translates exactly: those whose "
        "own output changes when one of their causes is replaced by another word of its "
        "slot), and deletion by *replacement* with such a word instead of <unk>:",
        "",
        "| method | AER vs causes where the model responds (%) | deletion AUC, replacement "
        "| vs random |",
        "|---|---:|---:|---|",
    ]
    for method, row in report["methods"].items():
        moved = kind[method]
        verdict = "better" if moved["better_than_random"] else "**no better than random**"
        lines.append(
            f"| {method} | {aer(row.get('where_output_changes'))} | "
            f"{moved['deletion_auc']:.3f} | {verdict} |"
        )
    lines.append(
        f"| random order | {aer(probed.get('diagonal'))} (diagonal) | "
        f"{kind['random']['deletion_auc']:.3f} | |"
    )
    return [*lines, ""]
