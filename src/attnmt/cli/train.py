"""`attnmt train CONFIG [--set section.key=value ...] [--resume] [--quiet]`.

Trains the experiment of a YAML file into its run directory (see `attnmt.training`):

    config.yaml      the resolved configuration      vocab/         the subword model(s)
    checkpoints/     step checkpoints, latest/best     metrics.jsonl  one JSON line per event
    train.log        what the progress bar said        tensorboard/   (optional)

`--resume` continues from the run's latest checkpoint exactly: same weights, optimizer
moments, learning rate, random state and next batch. Under `torchrun` every process runs
this command; they share the work (see docs/training.md).
"""

from __future__ import annotations

import argparse

from attnmt.config import add_override_argument, load_config
from attnmt.training import distributed, train


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="experiment YAML file (see configs/)")
    add_override_argument(parser)
    parser.add_argument(
        "--resume", action="store_true", help="continue the run from its latest checkpoint"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    result = train(cfg, resume=args.resume, progress=not args.quiet)
    code = 130 if result.stopped_because == "interrupted" else 0
    if distributed.launched():
        distributed.end_process(code)
    return code
