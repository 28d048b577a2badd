"""Decoding options shared by `attnmt translate`, `evaluate` and `plot`.

The flags (beam, length penalty, length limits, batch size, device, which Transformer
attention aligns), their checks, and the source-length limit that keeps a too-long line
from crashing a batch: it is truncated and reported instead.
"""

from __future__ import annotations

import argparse

import torch

from attnmt.errors import UserError

MAX_SOURCE_TOKENS = 400  # longer sources are truncated: decoding time grows with S × T


def source_limit(model_cfg, requested: int | None = None) -> int:
    """The longest source (subwords, EOS not counted) a run translates; longer are cut.

    `MAX_SOURCE_TOKENS` by default; the `location` score of an RNN can only score
    `model.max_source_len` positions, the EOS included. `requested` lowers the limit.
    """
    limit = MAX_SOURCE_TOKENS
    hard = None
    if model_cfg.name != "transformer" and model_cfg.attention == "location":
        hard = model_cfg.max_source_len - 1  # the EOS takes one position
        limit = min(limit, hard)
    if requested is not None:
        if requested < 1:
            raise UserError(f"--max-source-len must be at least 1, got {requested}")
        if hard is not None and requested > hard:
            raise UserError(
                f"--max-source-len {requested} is more than this model can read: its "
                f"location attention scores at most {hard} source subwords plus the EOS"
            )
        limit = requested
    return limit


def pick_device(name: str) -> torch.device:
    """`auto` (a GPU if there is one, else the CPU), `cpu` or `cuda`."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for but no GPU is available; use --device cpu")
    return torch.device(name)


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """The decoding flags `translate`, `evaluate` and `plot` share."""
    group = parser.add_argument_group("decoding")
    group.add_argument(
        "--beam", type=int, default=1, metavar="K", help="beam size (default 1: greedy decoding)"
    )
    group.add_argument(
        "--alpha",
        type=float,
        default=0.6,
        metavar="A",
        help="GNMT length penalty exponent for beam search (default 0.6)",
    )
    group.add_argument(
        "--max-len-ratio",
        type=float,
        default=2.0,
        metavar="R",
        help="outputs stop at R x source length + 5 subwords (default 2)",
    )
    group.add_argument(
        "--max-source-len",
        type=int,
        default=None,
        metavar="N",
        help=f"truncate longer sources to N subwords (default "
        f"{MAX_SOURCE_TOKENS}, or the model's limit if lower)",
    )
    group.add_argument(
        "--batch-tokens",
        type=int,
        default=4000,
        metavar="N",
        help="padded source subwords per batch (default 4000)",
    )
    group.add_argument(
        "--device",
        default="auto",
        choices=("auto", "cpu", "cuda"),
        help="where to decode (default auto: a GPU if there is one)",
    )
    group.add_argument(
        "--align-layer",
        type=int,
        default=None,
        metavar="L",
        help="Transformer: the decoder layer whose cross-attention aligns "
        "(1-based; default the second-to-last, or the only one)",
    )
    group.add_argument(
        "--align-head",
        type=int,
        default=None,
        metavar="H",
        help="Transformer: the head that aligns (1-based; default the mean of the layer's heads)",
    )


def check_decoding_arguments(args: argparse.Namespace) -> None:
    """One clear sentence for each impossible decoding flag."""
    if args.beam < 1:
        raise UserError(f"--beam must be at least 1, got {args.beam}")
    if args.alpha < 0:
        raise UserError(f"--alpha must be >= 0, got {args.alpha}")
    if args.max_len_ratio <= 0:
        raise UserError(f"--max-len-ratio must be positive, got {args.max_len_ratio}")
    if args.batch_tokens < 1:
        raise UserError(f"--batch-tokens must be at least 1, got {args.batch_tokens}")
    n_best = getattr(args, "n_best", 1)
    if not 1 <= n_best <= args.beam:
        raise UserError(
            f"--n-best {n_best} needs a beam at least as wide: use --beam {max(n_best, 1)} "
            f"or more (--n-best must be between 1 and --beam, which is {args.beam})"
        )
