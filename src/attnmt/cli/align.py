"""`attnmt align`: word alignments from a statistical aligner (eflomal), and their AER.

    attnmt align                                    # the Greek-English gold corpus
    attnmt align --src train.de --tgt train.en --out align/   # any parallel text
    attnmt align --src gold/all.src --tgt gold/all.tgt --gold gold/all.sure \
        --possible gold/all.possible --out align/             # the grammar lab's gold

Without `--src`, every verse of the Greek→English corpus with gold links (all 27 books,
`attnmt data show alignments`) is aligned at once, as unsupervised aligners are used: they
learn from the text they align, the test book included (the attention of a translation
model never sees the test book). The links are then scored against the gold ones on the
dev (Romans) and test (John) books, for each direction and each symmetrization, beside
the diagonal baseline. Written into `--out` (default runs/eflomal-grc-en):

    ids.txt                    one id per sentence pair ("John 3:16", "train.de:12")
    forward.align              eflomal's links, target words -> source words (Pharaoh i-j)
    reverse.align              source words -> target words
    grow-diag-final-and.align  the two symmetrized (--symmetrize picks the heuristic)
    report.json                the scores (gold corpus, or with --gold)

`train.guided_alignment` reads such a folder's links by id to guide a model's attention
(docs/alignment.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from attnmt.alignment.aligners import (
    ALIGNER,
    AlignedCorpus,
    align_corpus,
    gold_corpus,
    score_corpus,
)
from attnmt.alignment.links import SYMMETRIZATIONS
from attnmt.data.alignments import read_pharaoh, write_pharaoh
from attnmt.data.files import read_parallel
from attnmt.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--src", metavar="FILE", help="source text, one sentence a line")
    parser.add_argument("--tgt", metavar="FILE", help="target text, line by line with --src")
    parser.add_argument(
        "--gold",
        metavar="FILE",
        help="with --src/--tgt: gold links (Pharaoh i-j, one line a pair) to score against",
    )
    parser.add_argument(
        "--possible",
        metavar="FILE",
        help="with --gold: the possible links too (sure ones included, one line a pair), "
        "for AER with sure and possible links (Och & Ney)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="where to write (default runs/eflomal-grc-en; required with --src)",
    )
    parser.add_argument(
        "--symmetrize",
        default="grow-diag-final-and",
        choices=SYMMETRIZATIONS,
        help="how the two directions are made one (default grow-diag-final-and)",
    )
    parser.add_argument(
        "--length",
        type=float,
        default=1.0,
        metavar="X",
        help="eflomal's sampling iterations relative to its default (default 1.0)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace --out if it already holds files"
    )


def run(args: argparse.Namespace) -> int:
    if (args.src is None) != (args.tgt is None):
        raise UserError("give both --src and --tgt (parallel text), or neither (gold corpus)")
    if args.gold and not args.src:
        raise UserError("--gold scores links of --src/--tgt; the gold corpus has its own")
    if args.possible and not args.gold:
        raise UserError("--possible goes with --gold (the sure links it includes)")
    if args.length <= 0:
        raise UserError(f"--length must be positive, got {args.length}")
    if args.src and not args.out:
        raise UserError("give --out DIR: where to write the links of --src/--tgt")
    out = Path(args.out or "runs/eflomal-grc-en")
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not args.force:
        raise UserError(f"'{out}' already holds files; choose another --out or add --force")
    if args.src:
        ids, src, tgt = _read_text(Path(args.src), Path(args.tgt))
        corpus = AlignedCorpus(ids, src, tgt)
        if args.gold:
            corpus.gold = corpus.possible = _read_gold(Path(args.gold), len(ids))
        if args.possible:
            corpus.possible = _read_gold(Path(args.possible), len(ids))
            _check_possible(Path(args.possible), corpus.gold, corpus.possible)
    else:
        corpus = gold_corpus()
    print(f"aligning {len(corpus.ids):,} sentence pairs with eflomal (both directions)...")
    links = align_corpus(corpus.src, corpus.tgt, length=args.length)
    report = {
        "aligner": ALIGNER,
        "length": args.length,
        "pairs": len(corpus.ids),
        "symmetrize": args.symmetrize,
        "note": "unsupervised: trained on every pair it aligns, the scored ones included",
        "possible": args.possible,  # AER with sure and possible links when given
        "scores": score_corpus(links, corpus),
    }
    for split, table in report["scores"].items():
        _print_scores(split, table)
    _write(out, corpus.ids, links, args.symmetrize, report, replace=args.force)
    print(f"wrote {out}/ (ids.txt, forward.align, reverse.align, {args.symmetrize}.align)")
    return 0


def _read_text(src_path: Path, tgt_path: Path):
    pairs = read_parallel(src_path, tgt_path)
    ids, src, tgt = [], [], []
    for number, (s, t) in enumerate(pairs, start=1):
        if s.split() and t.split():  # as the training data: pairs with an empty side dropped
            ids.append(f"{src_path.name}:{number}")
            src.append(s.split())
            tgt.append(t.split())
    if not ids:
        raise UserError(f"{src_path} and {tgt_path} hold no pair with words on both sides")
    return ids, src, tgt


def _read_gold(path: Path, pairs: int):
    gold = read_pharaoh(path)
    if len(gold) != pairs:
        raise UserError(
            f"{path} has {len(gold)} lines but there are {pairs} sentence pairs with words on "
            "both sides; give one line of gold links per pair"
        )
    return gold


def _check_possible(path: Path, sure, possible) -> None:
    """Possible links include the sure ones (P ⊇ S), line for line."""
    for number, (s, p) in enumerate(zip(sure, possible, strict=True), start=1):
        missing = sorted(s - p)
        if missing:
            i, j = missing[0]
            raise UserError(
                f"line {number} of {path} lacks the sure link {i}-{j} of --gold; the possible "
                "links include the sure ones: give the file of both (gold/SPLIT.possible)"
            )


def _print_scores(split: str, table: dict) -> None:
    print(f"\n{split}: {table['forward']['sentences']} sentences with gold links")
    print(f"  {'links':<22}{'AER':>7}{'precision':>11}{'recall':>8}")
    for name, s in table.items():
        print(
            f"  {name:<22}{100 * s['aer']:>6.1f}%{100 * s['precision']:>10.1f}%"
            f"{100 * s['recall']:>7.1f}%"
        )


def _write(out: Path, ids, links, method: str, report: dict, *, replace: bool) -> None:
    """Write into a fresh folder beside `out`, then put it in place (nothing half-written)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        (tmp / "ids.txt").write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")
        for name in ("forward", "reverse", method):
            write_pharaoh(tmp / f"{name}.align", links[name])
        (tmp / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        if out.exists() and replace:
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        elif out.exists():  # an empty folder
            out.rmdir()
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
