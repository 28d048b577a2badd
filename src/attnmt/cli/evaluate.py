"""`attnmt evaluate RUN`: decode a split, score it, and write a report into RUN/eval/.

    attnmt evaluate runs/reverse                       # test split, greedy
    attnmt evaluate runs/bible --split dev --beam 5 --limit 500

The split comes from the run's own config: the data cache, or (for dev and test, when the
cache is gone) the files or the installed corpus package read again, never the training
split; the text is encoded with the run's own vocabulary. Written, for
split `test` and beam 1 (`{split}-beam{K}`):

    RUN/eval/test-beam1.json        every number below, with sacrebleu's signatures
    RUN/eval/test-beam1.md          a short markdown report
    RUN/eval/test-beam1.txt         the translations, one per line
    RUN/eval/test-beam1.ref1.txt    the references, one file per reference (.ref2.txt...)
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
from pathlib import Path
from typing import Any

from attnmt.alignment.links import SYMMETRIZATIONS
from attnmt.cli.options import (
    add_decoding_arguments,
    add_explain_arguments,
    check_decoding_arguments,
    explain_methods,
    load_decoding_run,
)
from attnmt.data.preparation import decoding_split
from attnmt.decoding.attention_choice import run_attention
from attnmt.decoding.translator import source_limit
from attnmt.errors import UserError
from attnmt.evaluation.splits import symmetrized_report
from attnmt.explain import check_method
from attnmt.report import evaluate_split, write_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="a run directory (its best checkpoint, else the latest) or a checkpoint "
        "directory; several RUNs are evaluated as one ensemble (same vocabulary)",
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
        help="where to write the report (default RUN/eval, where `attnmt compare` looks; "
        "an ensemble's: the first RUN's eval/ensemble-NAME2-NAME3...)",
    )
    parser.add_argument(
        "--symmetrize-with",
        metavar="RUN2",
        default=None,
        help="alignments corpus: a run of the other direction (data.swap); its attention "
        "links are turned round and made one with RUN's by each symmetrization heuristic",
    )
    add_decoding_arguments(parser, quantize=True, ensemble=True)
    add_explain_arguments(parser, several=True)
    parser.add_argument(
        "--explain-sentences",
        type=int,
        default=100,
        metavar="N",
        help="--explain measures the first N sentences (with gold links where the corpus "
        "has them; default 100)",
    )


def run(args: argparse.Namespace) -> int:
    args.run = args.runs[0]
    check_decoding_arguments(args)
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1, got {args.limit}")
    loaded = load_decoding_run(args)
    choice = run_attention(
        loaded, layer=args.align_layer, head=args.align_head, offset=args.align_offset
    )
    other = _other_direction(args, loaded)
    result, hypotheses, alignments, examples = evaluate_split(
        loaded,
        args.split,
        limit=args.limit,
        beam=args.beam,
        alpha=args.alpha,
        max_len_ratio=args.max_len_ratio,
        batch_tokens=args.batch_tokens,
        max_source_len=args.max_source_len,
        choice=choice,
        explain=_explain_methods(args, loaded, choice),
        explain_sentences=args.explain_sentences,
        ig_steps=args.ig_steps,
    )
    if args.quantize:  # the speed and scores are those of the quantised model
        result["quantize"] = args.quantize
    if loaded.members:
        result["ensemble"] = {
            "runs": [str(m.run_dir) for m in loaded.members],
            "checkpoints": [str(m.checkpoint) for m in loaded.members],
            "mode": args.ensemble_mode,
        }
    if other is not None and alignments is not None:
        result["alignment"]["symmetrized"] = symmetrized_report(
            loaded,
            alignments,
            examples,
            other,
            decoding_split(other.cfg.data, args.split, other.vocab)[: args.limit],
            source_limit(loaded.cfg.model, args.max_source_len),
            source_limit(other.cfg.model, args.max_source_len),
            args.batch_tokens,
        )
    out_dir = Path(args.out) if args.out else _default_out(loaded)
    references = [[ex.tgt, *ex.refs] for ex in examples]
    files = write_report(
        result, hypotheses, alignments, out_dir, loaded.run_dir.name, references=references
    )
    print_summary(result, files)
    return 0


def _explain_methods(args: argparse.Namespace, loaded, choice) -> list[str]:
    """--explain's methods ("all": every method that fits this model); none without it."""
    if not args.explain:
        return []
    methods = explain_methods(args.explain, several=True)
    if args.explain.strip() == "all":
        methods = [m for m in methods if _fits(m, loaded.model, choice)]
    return methods


def _fits(method: str, model, choice) -> bool:
    try:
        check_method(method, model, choice)
    except UserError:
        return False
    return True


def _default_out(loaded) -> Path:
    """RUN/eval; an ensemble's next to its first run's, named after the other members (so
    the first run's own report is never overwritten)."""
    if not loaded.members:
        return loaded.run_dir / "eval"
    others = "-".join(m.run_dir.name for m in loaded.members[1:])
    return loaded.run_dir / "eval" / f"ensemble-{others}"


def _other_direction(args: argparse.Namespace, loaded) -> Any:
    """The run `--symmetrize-with` names, checked to be the other direction; or None."""
    if not args.symmetrize_with:
        return None
    if loaded.cfg.data.corpus != "alignments":
        raise UserError(
            f"--symmetrize-with needs gold alignments; {args.run} was trained on "
            f"'{loaded.cfg.data.corpus}': use it with runs of data.corpus alignments"
        )
    _needs_attention(args.run, loaded)
    other = load_decoding_run(argparse.Namespace(**{**vars(args), "runs": [args.symmetrize_with]}))
    if other.cfg.data.corpus != "alignments" or other.cfg.data.swap == loaded.cfg.data.swap:
        way = "English -> Greek" if loaded.cfg.data.swap else "Greek -> English"
        raise UserError(
            f"--symmetrize-with {args.symmetrize_with} must translate the alignments corpus "
            f"the other way from {args.run} ({way}): train it with --set data.swap="
            f"{str(not loaded.cfg.data.swap).lower()}"
        )
    _needs_attention(args.symmetrize_with, other)
    return other


def _needs_attention(run: str, loaded) -> None:
    if not loaded.model.uses_attention:
        raise UserError(f"--symmetrize-with: {run} has no attention to read links from")


# --- decoding and scores -------------------------------------------------------------------


# --- alignment error rate ------------------------------------------------------------------


# --- files ---------------------------------------------------------------------------------


def print_summary(result: dict[str, Any], files: list[Path]) -> None:
    speed = result["speed"]
    print(
        f"{result['split']}: {result['sentences']} sentences, beam {result['beam']}: "
        f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}  exact {result['exact']:.1f}% "
        f"({result['references']} reference(s))"
    )
    print(f"  {result['bleu_signature']}")
    if result.get("bleu_note"):  # e.g. Japanese BLEU on characters: MeCab is missing
        print(f"  {result['bleu_note']}")
    pictures = result.get("images")
    if pictures:
        print(
            f"digits: exact {pictures['exact']:.1f}%  per digit {pictures['digit_accuracy']:.1f}%"
            f"  right length {pictures['right_length']:.1f}%"
        )
        where = pictures.get("localisation")
        if where:
            print(
                f"  attention on the digit being read: {where['mass_on_digit']:.1f}% of the "
                f"mass (uniform: {where['uniform']:.1f}%), peak inside its box "
                f"{where['peak_on_digit']:.1f}% of {where['digits']} digits"
            )
    alignment = result.get("alignment")
    if alignment and "aer" in alignment:
        print(
            f"AER {100 * alignment['aer']:.1f}% (precision {100 * alignment['precision']:.1f}%, "
            f"recall {100 * alignment['recall']:.1f}%); diagonal baseline AER "
            f"{100 * alignment['diagonal']['aer']:.1f}%"
        )
        if "by_offset" in alignment:
            shifts = ", ".join(
                f"{r['offset']:+d}: {100 * r['aer']:.1f}%" for r in alignment["by_offset"]
            )
            print(f"  AER reading target t off decoder step t+k: {shifts}")
        if "by_head" in alignment:
            best = min(alignment["by_head"], key=lambda r: r["aer"])
            print(
                f"  best head: layer {best['layer']} head {best['head']} "
                f"(AER {100 * best['aer']:.1f}%)"
            )
        both = alignment.get("symmetrized")
        if both:
            rows = ", ".join(
                f"{name} {100 * both[name]['aer']:.1f}%"
                for name in ("one_direction", "other_direction", *SYMMETRIZATIONS)
            )
            print(f"  with {both['other_run']} ({both['sentences']} verses), AER: {rows}")
    print(f"decoding: {speed['sentences_per_s']:.1f} sentences/s on {speed['device']}")
    if result["truncated"]:
        print(f"{len(result['truncated'])} source(s) truncated to {result['source_limit']}")
    print(f"wrote {files[0].parent}/: " + ", ".join(p.name for p in files))
