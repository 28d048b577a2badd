"""`attnmt average RUN [--last N | --best N] [-o DIR]`: one model from a run's checkpoints.

    attnmt average runs/transformer --last 5        # runs/transformer/average-last-5
    attnmt evaluate runs/transformer/average-last-5 --beam 5

The averaging is `attnmt.averaging`; this module parses, calls it and prints what it
averaged and where the result went (a run directory every command takes as RUN).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnmt.averaging import pick_checkpoints, write_average

DEFAULT_LAST = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Average the weights of a run's last (or best) N checkpoints into one model, a run "
        "directory every command takes as RUN. Training keeps train.keep_last checkpoints "
        "(default 3): train with --set train.keep_last=N to average N. See docs/training.md."
    )
    parser.add_argument("run", metavar="RUN", help="a run directory made by `attnmt train`")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--last",
        type=int,
        metavar="N",
        help=f"the N newest checkpoints (default: --last {DEFAULT_LAST})",
    )
    which.add_argument(
        "--best",
        type=int,
        metavar="N",
        help="the N checkpoints with the best dev score (train.early_stopping_metric), "
        "among those written at a validation",
    )
    parser.add_argument(
        "-o",
        "--out",
        metavar="DIR",
        help="the run directory to write (default RUN/average-last-N or RUN/average-best-N)",
    )


def run(args: argparse.Namespace) -> int:
    last = DEFAULT_LAST if args.last is None and args.best is None else args.last
    chosen, how = pick_checkpoints(args.run, last=last, best=args.best)
    name = f"average-last-{last}" if last is not None else f"average-best-{args.best}"
    out = Path(args.out) if args.out else Path(args.run) / name
    path = write_average(args.run, chosen, out, how=how)
    steps = ", ".join(str(int(p.name.split("-")[1])) for p in chosen)
    print(f"averaged {len(chosen)} checkpoints of {args.run} ({how}: steps {steps}) into {path}")
    print(f"use it as a run: attnmt evaluate {out}")
    return 0
