"""`attnmt compare RUN RUN ...`: one table and one BLEU-by-length plot for several runs.

    attnmt evaluate runs/rnnsearch; attnmt evaluate runs/transformer
    attnmt compare runs/rnnsearch runs/transformer --out results

Reads, for each run, its evaluation of the split (`RUN/eval/{split}-beam{K}.json`, written
by `attnmt evaluate`; the most recent one unless `--beam` picks one), its training log
(training tokens per second) and its latest checkpoint's state (steps and training time),
through `attnmt.rundir.RunDir`. Nothing is decoded and no model is loaded.
Written into `--out` (default `compare/`):

    compare-{split}.md          the table (also printed) and the plot
    compare-{split}.json        the same rows
    compare-{split}-length.png  every run's BLEU by source length (and .svg)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from attnmt.errors import UserError
from attnmt.plotting import length_curves
from attnmt.report import (
    comparison_table,
    find_evaluation,
    read_evaluation,
    run_names,
    summarize,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories to compare")
    parser.add_argument(
        "--split", default="test", choices=("test", "dev"), help="which split (default test)"
    )
    parser.add_argument(
        "--beam",
        type=int,
        default=None,
        metavar="K",
        help="compare the evaluations with this beam (default: each run's most recent)",
    )
    parser.add_argument(
        "--out", default="compare", metavar="DIR", help="where to write (default compare/)"
    )


def run(args: argparse.Namespace) -> int:

    runs = [Path(r) for r in args.runs]
    for path in runs:
        if not path.is_dir():
            raise UserError(f"'{path}' is not a directory; give run directories")
    evaluations = {path: find_evaluation(path, args.split, args.beam) for path in runs}
    missing = [path for path, found in evaluations.items() if found is None]
    if missing:
        beam = f" --beam {args.beam}" if args.beam else ""
        commands = "; ".join(f"attnmt evaluate {p} --split {args.split}{beam}" for p in missing)
        raise UserError(
            f"no {args.split} evaluation{f' with beam {args.beam}' if args.beam else ''} in "
            f"{', '.join(str(p) for p in missing)}; make it with `{commands}`"
        )
    names = run_names(runs)
    rows = [
        summarize(path, name, read_evaluation(evaluations[path]))  # type: ignore[arg-type]
        for path, name in zip(runs, names, strict=True)
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"compare-{args.split}"
    plots = length_curves(
        {row["run"]: row["bleu_by_length"] for row in rows},
        out / f"{stem}-length",
        title=f"BLEU by source length ({args.split})",
    )
    table = comparison_table(rows)
    print(table, end="")
    (out / f"{stem}.md").write_text(
        f"# Comparison on the {args.split} split\n\n{table}\n"
        f"![BLEU by source length]({stem}-length.png)\n\n"
        + "".join(f"- {row['run']}: `{row['evaluation']}`\n" for row in rows),
        encoding="utf-8",
    )
    (out / f"{stem}.json").write_text(
        json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    written = [out / f"{stem}.md", out / f"{stem}.json", *plots]
    print("wrote " + ", ".join(str(p) for p in written))
    return 0
