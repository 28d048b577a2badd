"""Decoding options shared by `attnmt translate`, `evaluate` and `plot`: the flags (beam,
length penalty, length limits, batch size, device, which Transformer attention aligns;
int8 quantisation for `translate` and `evaluate`) and their checks, and loading the run
they decode. The source-length limit itself is `attnmt.decoding.translator.source_limit`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from attnmt.config.checks import DECODER_QUANTIZATIONS as QUANTIZATIONS
from attnmt.config.checks import DEVICES
from attnmt.config.checks import ENSEMBLE_MODES as MODES
from attnmt.data.buckets import DECODE_BATCH_TOKENS
from attnmt.decoding.loading import open_model
from attnmt.decoding.translator import MAX_SOURCE_TOKENS
from attnmt.errors import DataError, UserError
from attnmt.explain.names import METHODS
from attnmt.service import Request, as_flag

if TYPE_CHECKING:
    from attnmt.decoding.runs import LoadedRun
    from attnmt.runtime.runs import ExportRun


def add_decoding_arguments(
    parser: argparse.ArgumentParser,
    *,
    quantize: bool = False,
    ensemble: bool = False,
    search: bool = True,
) -> None:
    """The decoding flags `translate`, `evaluate`, `score` and `plot` share (`quantize`:
    --quantize; `ensemble`: --ensemble-mode, for commands that take several RUNs; `search`:
    --beam and --max-len-ratio, which `score` has no use for)."""
    group = parser.add_argument_group("decoding")
    if ensemble:
        group.add_argument(
            "--ensemble-mode",
            choices=MODES,
            default=MODES[0],
            help="several RUNs decode as one: the mean of their next-token log-probabilities "
            "(log-linear, default) or the log of their mean probability (linear)",
        )
    if search:
        group.add_argument(
            "--beam",
            type=int,
            default=Request.beam,
            metavar="K",
            help=f"beam size (default {Request.beam}: greedy decoding)",
        )
    group.add_argument(
        "--alpha",
        type=float,
        default=Request.alpha,
        metavar="A",
        help=f"GNMT length penalty exponent for beam search (default {Request.alpha})",
    )
    if search:
        group.add_argument(
            "--max-len-ratio",
            type=float,
            default=Request.max_len_ratio,
            metavar="R",
            help="outputs stop at R x source length + 5 subwords "
            f"(default {Request.max_len_ratio:g})",
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
        default=DECODE_BATCH_TOKENS,
        metavar="N",
        help="padded tokens per batch: sentences x the longest source in subwords "
        f"(default {DECODE_BATCH_TOKENS}; beam search divides it by K)",
    )
    group.add_argument(
        "--device",
        default="auto",
        choices=DEVICES,
        help="where to decode (default auto: CUDA, else Apple mps, else the CPU)",
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
    group.add_argument(
        "--align-offset",
        type=int,
        default=None,
        metavar="K",
        help="read target word t's links off decoder step t+K (default: the model family's, "
        "0; docs/alignment.md)",
    )
    if quantize:
        group.add_argument(
            "--quantize",
            choices=QUANTIZATIONS,
            default=None,
            help="int8: PyTorch dynamic quantisation of the linear maps, on the CPU only "
            "(--device auto then means the CPU); default: none, fp32",
        )


def add_explain_arguments(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """--explain (one method, or with `several` a comma-separated list) and --ig-steps."""
    group = parser.add_argument_group("explanations (docs/explain.md)")
    group.add_argument(
        "--explain",
        metavar="LIST" if several else "METHOD",
        default=None,
        help=(
            "measure these explanation methods, comma-separated (all: 'all'): AER against "
            "gold links, deletion/insertion, ERASER, cost; "
            if several
            else "show this explanation instead of the attention (links, JSON, plots): "
        )
        + ", ".join(METHODS),
    )
    group.add_argument(
        "--ig-steps",
        type=int,
        default=Request.ig_steps,
        metavar="K",
        help=f"integrated gradients: steps from the zero baseline (default {Request.ig_steps})",
    )


def explain_methods(text: str | None, *, several: bool = False) -> list[str]:
    """The methods --explain names, checked (`UserError` naming the valid ones)."""
    if text is None:
        return []
    names = list(METHODS) if several and text.strip() == "all" else text.split(",")
    names = [n.strip() for n in names if n.strip()]
    unknown = [n for n in names if n not in METHODS]
    if unknown or not names or (len(names) > 1 and not several):
        what = f"{unknown[0]!r} is not a method" if unknown else "give one method"
        raise UserError(f"--explain: {what}; choose among {', '.join(METHODS)}")
    return names


def check_decoding_arguments(args: argparse.Namespace) -> None:
    """One clear sentence for each impossible decoding flag."""
    Request(
        beam=getattr(args, "beam", Request.beam),
        alpha=args.alpha,
        n_best=getattr(args, "n_best", Request.n_best),
        max_len_ratio=getattr(args, "max_len_ratio", Request.max_len_ratio),
    ).check(as_flag)  # the search's checks are the service's, named as flags
    if args.batch_tokens < 1:
        raise UserError(f"--batch-tokens must be at least 1, got {args.batch_tokens}")
    quantize = getattr(args, "quantize", None)
    if quantize and args.device in ("cuda", "mps"):
        raise UserError(
            f"--quantize {quantize} runs on the CPU only (PyTorch's dynamic quantisation has "
            f"no {args.device} kernels); use --device cpu, or leave out --quantize"
        )


def load_decoding_run(args: argparse.Namespace) -> LoadedRun | ExportRun:
    """The run `args.run` (or the ensemble of `args.runs`) on the device `--device` names,
    quantised if `--quantize` asks; or an ONNX export (`attnmt.runtime`, no torch), which
    cannot explain (`--explain` needs the run's gradients)."""
    from attnmt.runtime.model import is_export

    runs = getattr(args, "runs", None) or [args.run]
    if getattr(args, "explain", None) and is_export(runs[0]):
        raise UserError(
            "--explain works with a run, not an ONNX export (explanations need the model's "
            "gradients and attention in torch); give the run itself, or leave out --explain"
        )
    return open_model(
        runs,
        device=getattr(args, "device", "auto"),
        quantize=getattr(args, "quantize", None),
        ensemble_mode=getattr(args, "ensemble_mode", MODES[0]),
        layer=getattr(args, "align_layer", None),
        head=getattr(args, "align_head", None),
        spelled={"device": "--device", "quantize": "--quantize", "ensemble": "several runs"},
    )


def split_runs(paths: list[str], most_inputs: int) -> tuple[list[str], list[str]]:
    """RUN [RUN ...] followed by up to `most_inputs` input files: the runs are the leading
    directories; what follows them (files, '-', or nothing) is input. The first path is
    always a RUN (a wrong one gets load_run's sentence)."""
    runs = [paths[0]]
    for path in paths[1:]:
        if not Path(path).is_dir():
            break
        runs.append(path)
    inputs = paths[len(runs) :]
    if len(inputs) > most_inputs:
        extra = inputs[0]
        raise UserError(
            f"'{extra}' is neither a run directory nor one of the {most_inputs} input file(s) "
            f"expected after the runs; give RUN [RUN ...] then the input"
        )
    return runs, inputs


@contextmanager
def open_output(path: str | None) -> Iterator[TextIO]:
    """Standard output (made UTF-8), or the file `-o` names (one sentence if it cannot be)."""
    if path is None:
        if (sys.stdout.encoding or "").lower().replace("-", "") != "utf8":
            with suppress(AttributeError, ValueError):
                sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
        yield sys.stdout
        return
    try:
        handle = open(path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115
    except OSError as err:
        raise DataError(f"{path}: cannot be written ({err.strerror}); check the path") from None
    with handle:
        yield handle
