"""`attnmt evaluate RUN`: decode a split, score it, and write a report into RUN/eval/.

    attnmt evaluate runs/reverse                       # test split, greedy
    attnmt evaluate runs/bible --split dev --beam 5 --limit 500

The split comes from `prepare(cfg.data)` with the run's own config (the data cache, or the
installed corpus package); the text is encoded with the run's own vocabulary. Written, for
split `test` and beam 1 (`{split}-beam{K}`):

    RUN/eval/test-beam1.json        every number below, with sacrebleu's signatures
    RUN/eval/test-beam1.md          a short markdown report
    RUN/eval/test-beam1.txt         the translations, one per line
    RUN/eval/test-beam1-length.png  BLEU by source length (and .svg)
    RUN/eval/test-beam1.align       gold-alignment corpus only: the predicted links (Pharaoh)

Scores: sacrebleu BLEU and chrF against every reference of the split, BLEU and chrF by
source length (buckets of 10 words, Bahdanau et al. 2014 Fig. 2), and the decoding speed
(sentences per second, wall clock of the decoding alone). For `data.corpus: alignments`
(Greek→English with gold links) also the alignment error rate (Och & Ney 2003): the model
reads each reference (forced decoding), its attention is merged to words and each English
word linked to its most-attended Greek word; precision, recall and AER against the gold
links, beside the diagonal baseline, and for the Transformer per layer and head.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from tqdm import tqdm

from attnmt.decode_options import (
    add_decoding_arguments,
    check_decoding_arguments,
    pick_device,
    source_limit,
)
from attnmt.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run",
        metavar="RUN",
        help="a run directory (its best checkpoint, else the latest) or a checkpoint directory",
    )
    parser.add_argument(
        "--split", default="test", choices=("test", "dev"), help="which split (default test)"
    )
    parser.add_argument(
        "--limit", type=int, default=None, metavar="N", help="only the first N sentences"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="where to write the report (default RUN/eval, where `attnmt compare` looks)",
    )
    add_decoding_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from attnmt.attention_maps import choose_attention
    from attnmt.data import prepare
    from attnmt.runs import load_run

    check_decoding_arguments(args)
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1, got {args.limit}")
    loaded = load_run(args.run, device=pick_device(args.device))
    choice = choose_attention(loaded.cfg.model, layer=args.align_layer, head=args.align_head)
    examples = prepare(loaded.cfg.data).split(args.split)[: args.limit]
    if not examples:
        raise UserError(
            f"the {args.split} split of data.corpus '{loaded.cfg.data.corpus}' is empty; "
            "evaluate another split (--split) or set its path in the run's config"
        )
    limit = source_limit(loaded.cfg.model, args.max_source_len)
    result, hypotheses = evaluate_examples(loaded, examples, args, limit)
    alignments = None
    if loaded.cfg.data.corpus == "alignments":
        if not getattr(loaded.model, "uses_attention", True):
            result["alignment"] = {"skipped": "the model has no attention"}
        else:
            result["alignment"], alignments = alignment_report(
                loaded, examples, choice, limit, args.batch_tokens
            )
    out_dir = Path(args.out) if args.out else loaded.run_dir / "eval"
    files = write_report(result, hypotheses, alignments, out_dir, loaded.run_dir.name)
    print_summary(result, files)
    return 0


# --- decoding and scores -------------------------------------------------------------------


def evaluate_examples(loaded, examples, args: argparse.Namespace, limit: int):
    """Decode `examples` and score them; returns (the result dict, the hypotheses)."""
    from attnmt.evaluate import bleu_by_length, bleu_tokenizer, corpus_scores
    from attnmt.translate import translate_ids

    vocab = loaded.vocab
    sources, truncated = [], []
    for index, ex in enumerate(examples):
        ids = vocab.src.encode(ex.src)  # the run's vocabulary, whatever the cache holds
        if len(ids) > limit:
            truncated.append(index)
            ids = ids[:limit]
        sources.append(ids)
    bar = tqdm(
        total=len(sources),
        unit="sent",
        desc=f"decoding {args.split}",
        file=sys.stderr,
        dynamic_ncols=True,
        disable=not sys.stderr.isatty(),
    )
    device = next(loaded.model.parameters()).device
    with bar:
        _synchronize(device)
        started = time.perf_counter()
        translations = translate_ids(
            loaded.model,
            sources,
            vocab.tgt.decode,
            beam_size=args.beam,
            alpha=args.alpha,
            max_len_ratio=args.max_len_ratio,
            max_tokens=args.batch_tokens,
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
        "split": args.split,
        "limit": args.limit,
        "beam": args.beam,
        "alpha": args.alpha,
        "max_len_ratio": args.max_len_ratio,
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        **scores,
        "bleu_by_length": by_length,
        "speed": {
            "sentences": len(examples),
            "seconds": round(seconds, 3),
            "sentences_per_s": round(len(examples) / max(seconds, 1e-9), 2),
            "output_subwords_per_s": round(
                sum(len(t.tokens) + 1 for t in translations) / max(seconds, 1e-9), 1
            ),
            "device": str(device),
            "batch_tokens": args.batch_tokens,
        },
        "source_limit": limit,
        "truncated": [examples[i].id or i for i in truncated],
    }
    return result, hypotheses


def _synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --- alignment error rate ------------------------------------------------------------------


def alignment_report(loaded, examples, choice, limit: int, max_tokens: int):
    """AER of the run's attention on `examples` (whose ids are gold verse refs).

    Returns (the report dict, the predicted links per example: None where skipped).
    """
    from attnmt.attention_maps import (
        AttentionChoice,
        forced_weights,
        select,
        source_words,
        word_view,
    )
    from attnmt.evaluate import alignment_scores, diagonal_alignment

    gold = _gold_by_ref()
    vocab = loaded.vocab
    chosen, pairs, maps = [], [], []
    skipped = {"no_gold": 0, "word_mismatch": 0}
    for index, ex in enumerate(examples):
        verse = gold.get(ex.id)
        if verse is None:
            skipped["no_gold"] += 1
            continue
        src_ids = vocab.src.encode(ex.src)
        tgt_ids = vocab.tgt.encode(ex.tgt)
        # The gold links index the words of the verse: the word maps must see the same.
        source = source_words(vocab.src, ex.src, len(src_ids))
        target = source_words(vocab.tgt, ex.tgt, len(tgt_ids))
        if (source.words, target.words) != (verse.src, verse.tgt):
            skipped["word_mismatch"] += 1
            continue
        if len(src_ids) > limit:  # links to the words cut off count as missed
            src_ids = src_ids[:limit]
            source = source_words(vocab.src, ex.src, limit)
        chosen.append(index)
        pairs.append((src_ids, tgt_ids))
        maps.append((source, target, verse))
    if not pairs:  # nothing scored is not a perfect score
        return {"sentences": 0, "skipped": skipped, "note": "no verse could be scored"}, [
            None
        ] * len(examples)
    weights = forced_weights(loaded.model, pairs, max_tokens=max_tokens)

    def links_of(choice: AttentionChoice) -> list[set[tuple[int, int]]]:
        return [
            word_view(select(w, choice), source, target).links
            for w, (source, target, _) in zip(weights, maps, strict=True)
        ]

    sure = [verse.links for _, _, verse in maps]
    predicted = links_of(choice)
    scores = _rounded(alignment_scores(predicted, sure))
    diagonal = [diagonal_alignment(len(v.src), len(v.tgt)) for _, _, v in maps]
    report: dict[str, Any] = {
        "method": "forced decoding of the reference; attention merged to words; each "
        "target word linked to its most-attended source word",
        "attention": choice.as_dict(),
        **scores,
        "skipped": skipped,
        "diagonal": _rounded(alignment_scores(diagonal, sure)),
    }
    if choice.transformer and weights:
        rows = []
        for layer in range(1, choice.layers + 1):
            for head in [*range(1, choice.heads + 1), None]:
                pick = AttentionChoice(True, layer, head, choice.layers, choice.heads)
                row = _rounded(alignment_scores(links_of(pick), sure))
                rows.append({"layer": layer, "head": head or "mean", **row})
        report["by_head"] = rows
    per_example: list[set[tuple[int, int]] | None] = [None] * len(examples)
    for index, links in zip(chosen, predicted, strict=True):
        per_example[index] = links
    return report, per_example


@lru_cache(maxsize=1)
def _gold_by_ref() -> dict[str, Any]:
    """The gold verses by reference ("John 3:16"); read once per process (~2 s)."""
    from attnmt.data.alignments import load_gold

    return {verse.ref: verse for verse in load_gold().verses}


def _rounded(scores: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()}


# --- files ---------------------------------------------------------------------------------


def write_report(result, hypotheses, alignments, out_dir: Path, name: str) -> list[Path]:
    """Write the JSON, markdown, translations, length plot and Pharaoh links."""
    from attnmt.checkpoint import write_json_atomic
    from attnmt.data.alignments import write_pharaoh
    from attnmt.plot import length_curves

    stem = f"{result['split']}-beam{result['beam']}"
    out_dir.mkdir(parents=True, exist_ok=True)
    files = length_curves(
        {name: result["bleu_by_length"]},
        out_dir / f"{stem}-length",
        title=f"{name}: BLEU by source length ({result['split']}, beam {result['beam']})",
    )
    text_path = out_dir / f"{stem}.txt"
    text_path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    files.append(text_path)
    if alignments is not None:
        align_path = out_dir / f"{stem}.align"
        write_pharaoh(align_path, [links or set() for links in alignments])
        result["alignment"]["file"] = align_path.name
        files.append(align_path)
    result["files"] = sorted(p.name for p in [*files, out_dir / f"{stem}.md"])
    markdown_path = out_dir / f"{stem}.md"
    markdown_path.write_text(markdown(result, f"{stem}-length.png"), encoding="utf-8")
    json_path = out_dir / f"{stem}.json"
    write_json_atomic(json_path, result)  # last: its presence marks a finished evaluation
    return [json_path, markdown_path, *files]


def markdown(result: dict[str, Any], plot_name: str) -> str:
    """The short markdown report of an evaluation result."""
    from attnmt.evaluate import markdown_table

    speed = result["speed"]
    lines = [
        f"# {result['run']}: {result['split']} split, beam {result['beam']}",
        "",
        f"Checkpoint `{result['checkpoint']}` (step {result['step']}), model "
        f"`{result['model']}`, corpus `{result['corpus']}`; {result['sentences']} sentences, "
        f"{result['references']} reference(s) each at most.",
        "",
        "| metric | score | sacrebleu signature |",
        "|---|---:|---|",
        f"| BLEU | {result['bleu']:.2f} | `{_cell(result['bleu_signature'])}` |",
        f"| chrF | {result['chrf']:.2f} | `{_cell(result['chrf_signature'])}` |",
        f"| exact match (%) | {result['exact']:.2f} | first reference |",
        "",
        "## BLEU by source length",
        "",
        markdown_table(result["bleu_by_length"]),
        f"![BLEU by source length]({plot_name})",
        "",
    ]
    alignment = result.get("alignment")
    if alignment and "aer" in alignment:
        lines += _alignment_markdown(alignment)
    lines += [
        "## Speed",
        "",
        f"{speed['sentences']} sentences decoded in {speed['seconds']:.2f} s: "
        f"{speed['sentences_per_s']:.1f} sentences/s, {speed['output_subwords_per_s']:.0f} "
        f"output subwords/s on {speed['device']} (decoding only, batches of "
        f"{speed['batch_tokens']} source subwords).",
        "",
    ]
    if result["truncated"]:
        lines += [
            f"{len(result['truncated'])} source(s) longer than {result['source_limit']} "
            "subwords were truncated.",
            "",
        ]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _alignment_markdown(alignment: dict[str, Any]) -> list[str]:
    att = alignment["attention"]
    which = "decoder attention"
    if att["layer"] is not None:
        which = f"layer {att['layer']}, head {att['head']}"
    skipped = sum(alignment["skipped"].values())
    rows = [
        "## Alignment error rate",
        "",
        f"Gold Greek→English links of {alignment['sentences']} verses ({alignment['sure']} "
        f"links{f'; {skipped} verses skipped' if skipped else ''}). The model reads the "
        f"reference (forced decoding); its attention ({which}) is merged to words and each "
        "English word is linked to its most-attended Greek word. Lower AER is better.",
        "",
        "| alignment | precision (%) | recall (%) | AER (%) |",
        "|---|---:|---:|---:|",
        _aer_row("attention", alignment),
        _aer_row("diagonal baseline", alignment["diagonal"]),
        "",
    ]
    if "by_head" in alignment:
        rows += [
            "AER (%) of each layer and head (mean: the layer's heads averaged):",
            "",
            "| layer | head | precision (%) | recall (%) | AER (%) |",
            "|---:|---:|---:|---:|---:|",
        ]
        best = min(alignment["by_head"], key=lambda r: r["aer"])
        for r in alignment["by_head"]:
            mark = " **(best)**" if r is best else ""
            rows.append(
                f"| {r['layer']} | {r['head']} | {100 * r['precision']:.1f} | "
                f"{100 * r['recall']:.1f} | {100 * r['aer']:.1f}{mark} |"
            )
        rows.append("")
    if alignment.get("file"):
        rows += [f"Predicted links (Pharaoh `i-j`): `{alignment['file']}`.", ""]
    return rows


def _aer_row(name: str, s: dict[str, Any]) -> str:
    return (
        f"| {name} | {100 * s['precision']:.1f} | {100 * s['recall']:.1f} | {100 * s['aer']:.1f} |"
    )


def print_summary(result: dict[str, Any], files: list[Path]) -> None:
    speed = result["speed"]
    print(
        f"{result['split']}: {result['sentences']} sentences, beam {result['beam']}: "
        f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}  exact {result['exact']:.1f}% "
        f"({result['references']} reference(s))"
    )
    print(f"  {result['bleu_signature']}")
    alignment = result.get("alignment")
    if alignment and "aer" in alignment:
        print(
            f"AER {100 * alignment['aer']:.1f}% (precision {100 * alignment['precision']:.1f}%, "
            f"recall {100 * alignment['recall']:.1f}%); diagonal baseline AER "
            f"{100 * alignment['diagonal']['aer']:.1f}%"
        )
        if "by_head" in alignment:
            best = min(alignment["by_head"], key=lambda r: r["aer"])
            print(
                f"  best head: layer {best['layer']} head {best['head']} "
                f"(AER {100 * best['aer']:.1f}%)"
            )
    print(f"decoding: {speed['sentences_per_s']:.1f} sentences/s on {speed['device']}")
    if result["truncated"]:
        print(f"{len(result['truncated'])} source(s) truncated to {result['source_limit']}")
    print(f"wrote {files[0].parent}/: " + ", ".join(p.name for p in files))
