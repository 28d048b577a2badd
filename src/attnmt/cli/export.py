"""`attnmt export RUN --format onnx|ctranslate2|web`: a trained run for another inference
engine, or runs as a static site that translates in the browser.

    attnmt export runs/quickstart --format onnx                  # RUN/onnx
    attnmt export runs/quickstart --format onnx --quantize int8  # RUN/onnx-int8
    attnmt export runs/transformer --format ctranslate2 -o exports/transformer-ct2
    attnmt export runs/transformer --quantize int8              # RUN/ctranslate2-int8
    attnmt export runs/rnnsearch runs/transformer/onnx --format web -o site

ONNX (every text family: an encoder graph and a decoder-step graph, verified against
PyTorch before they are written, decoded without torch by `attnmt translate EXPORT_DIR`)
is `attnmt.export.onnx`; CTranslate2 (Transformers only) is
`attnmt.export.ctranslate2`; the static site (the explorer page, the models' ONNX exports,
onnxruntime-web) is `attnmt.export.web`. docs/export.md shows them. This module parses,
calls one and prints where the model went.
"""

from __future__ import annotations

import argparse

from attnmt.errors import UserError

FORMATS = ("ctranslate2", "onnx", "web")
# CTranslate2's stored weight types: its ACCEPTED_MODEL_TYPES, named here so that the
# parser needs neither CTranslate2 nor torch (tests/test_onnx_export.py keeps them equal).
CT2_TYPES = (
    "float32",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
)
MAX_POSITIONS = 1024  # attnmt.export.ctranslate2.MAX_POSITIONS (a test keeps them equal)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Export a trained run for another inference engine: ONNX (every text model, "
        "decoded without torch by `attnmt translate EXPORT_DIR`) or CTranslate2 "
        "(Transformers); or text runs as a static site, the attention explorer decoding "
        "in the browser (--format web). See docs/export.md."
    )
    parser.add_argument(
        "run",
        metavar="RUN",
        help="a run directory (its best checkpoint, else the latest) or one "
        "checkpoint directory in RUN/checkpoints/; --format web: a run or an ONNX export, "
        "NAME=RUN to name it on the page",
    )
    parser.add_argument(
        "more",
        nargs="*",
        metavar="RUN2",
        help="--format web: more runs or ONNX exports, side by side on the page",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="ctranslate2",
        help="onnx: an encoder and a decoder-step graph for onnxruntime, any text model; "
        "ctranslate2: a CTranslate2 model, Transformers only (the default, as before); "
        "web: a static site (-o SITE) that translates in the browser with onnxruntime-web, "
        "text models with sentencepiece vocabularies",
    )
    parser.add_argument(
        "-o",
        "--out",
        metavar="DIR",
        default=None,
        help="the model directory to write (default RUN/onnx or RUN/ctranslate2, with "
        "-int8 etc. when quantised); --format web: the site's folder (required)",
    )
    parser.add_argument(
        "--quantize",
        "--quantization",
        dest="quantize",
        choices=CT2_TYPES,
        default=None,
        metavar="TYPE",
        help="the stored weights, both formats (default: float32, exactly ours). onnx: "
        "int8, onnxruntime's dynamic quantisation of the matrix products (weights int8, "
        "activations quantised on the fly; the differences it makes are measured and "
        "written in attnmt.json). ctranslate2: any of " + ", ".join(CT2_TYPES) + " (int8 "
        "quarters the size; CTranslate2 can also convert when it loads)",
    )
    parser.add_argument(
        "--max-positions",
        type=int,
        default=MAX_POSITIONS,
        metavar="N",
        help=f"ctranslate2: positions of the stored sinusoid table: the longest source or "
        f"output the model can read or write (default {MAX_POSITIONS})",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --out if it exists and is not empty (--format web rewrites an attnmt "
        "site without it)",
    )


def run(args: argparse.Namespace) -> int:
    if args.format == "web":
        from attnmt.cli.export_web import export_web

        return export_web(args)
    if args.more:
        raise UserError(
            f"--format {args.format} exports one run at a time, got {1 + len(args.more)}; "
            "export each apart (only --format web puts several in one site)"
        )
    from attnmt.decoding.runs import load_run

    if args.format == "onnx":
        return _onnx(args, load_run)
    if args.max_positions < 2:
        raise UserError(f"--max-positions must be at least 2, got {args.max_positions}")
    from attnmt.export.ctranslate2 import default_out, export_ctranslate2

    quantization = args.quantize or "float32"
    loaded = load_run(args.run, device="cpu")
    out = args.out if args.out is not None else default_out(loaded, quantization)
    path = export_ctranslate2(
        loaded,
        out,
        quantization=quantization,
        force=args.force,
        max_positions=args.max_positions,
    )
    print(
        f"exported {loaded.run_dir} (step {loaded.step}, {loaded.cfg.model.name}) to {path}/ "
        f"as a CTranslate2 model ({quantization})"
    )
    return 0


def _onnx(args: argparse.Namespace, load_run) -> int:
    if args.quantize not in (None, "float32", "int8"):
        raise UserError(
            f"--quantize {args.quantize} is for --format ctranslate2; an ONNX export is "
            "float32 (the default) or int8 (--quantize int8)"
        )
    quantize = None if args.quantize == "float32" else args.quantize
    from attnmt.export.onnx import default_out, export_onnx, read_written

    loaded = load_run(args.run, device="cpu")
    out = args.out if args.out is not None else default_out(loaded, quantize)
    path = export_onnx(loaded, out, quantize=quantize, force=args.force)
    info = read_written(path)
    sizes = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in info["files"].items())
    worst = info["verified"]
    print(
        f"exported {loaded.run_dir} (step {loaded.step}, {loaded.cfg.model.name}) to {path}/ "
        f"as ONNX graphs ({info['quantization']}: {sizes}); verified against PyTorch: "
        f"log-probs within {worst['log_probs']:.1e}, attention within {worst['attention']:.1e}"
    )
    if "int8_differences" in info:
        diff = info["int8_differences"]
        print(
            f"int8 changes the log-probs by up to {diff['log_probs']:.2f} and the attention "
            f"by up to {diff['attention']:.3f} on the check batch (BLEU: docs/export.md)"
        )
    return 0
