"""`attnmt export RUN --format ctranslate2`: a trained Transformer as a CTranslate2 model.

    attnmt export runs/transformer --format ctranslate2 --out exports/transformer-ct2
    attnmt export runs/transformer --quantization int8      # RUN/ctranslate2-int8

The converting itself is `attnmt.inference.export` (every weight mapped, our vocabulary
ids kept, `attnmt.json` beside the model); docs/export.md shows how to translate with the
result. This module parses, calls it and prints where the model went.
"""

from __future__ import annotations

import argparse

from attnmt.errors import UserError
from attnmt.inference import load_run
from attnmt.inference.export import (
    FORMATS,
    MAX_POSITIONS,
    QUANTIZATIONS,
    default_out,
    export_ctranslate2,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Export a trained Transformer run for another inference engine: CTranslate2 "
        "(int8/fp16 CPU and GPU kernels). See docs/export.md."
    )
    parser.add_argument(
        "run",
        metavar="RUN",
        help="a run directory (its best checkpoint, else the latest) or one "
        "checkpoint directory in RUN/checkpoints/",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="ctranslate2",
        help="the engine to export for (default ctranslate2)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="the model directory to write (default RUN/ctranslate2, or "
        "RUN/ctranslate2-QUANTIZATION when quantised)",
    )
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default="float32",
        help="the weights' type in the exported model (default float32: exactly ours; "
        "int8 quarters the size; CTranslate2 can also convert when it loads, compute_type)",
    )
    parser.add_argument(
        "--max-positions",
        type=int,
        default=MAX_POSITIONS,
        metavar="N",
        help=f"positions of the stored sinusoid table: the longest source or output the "
        f"model can read or write (default {MAX_POSITIONS})",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace --out if it exists and is not empty"
    )


def run(args: argparse.Namespace) -> int:
    if args.max_positions < 2:
        raise UserError(f"--max-positions must be at least 2, got {args.max_positions}")
    loaded = load_run(args.run, device="cpu")
    out = args.out if args.out is not None else default_out(loaded, args.quantization)
    path = export_ctranslate2(
        loaded,
        out,
        quantization=args.quantization,
        force=args.force,
        max_positions=args.max_positions,
    )
    print(
        f"exported {loaded.run_dir} (step {loaded.step}, {loaded.cfg.model.name}) to {path}/ "
        f"as a CTranslate2 model ({args.quantization})"
    )
    return 0
