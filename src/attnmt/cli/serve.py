"""`attnmt serve RUN [RUN ...]`: an HTTP translation API and the attention explorer page.

    attnmt serve runs/quickstart                        # http://127.0.0.1:8000/
    attnmt serve rnn=runs/rnnsearch tf=runs/transformer --beam 5   # two runs, compared

Each run is served under its directory's name, or the NAME given as NAME=RUN. The server
listens on loopback unless `--host` says otherwise (0.0.0.0 is announced with a warning);
`--api-key` (or the ATTNMT_API_KEY environment variable) makes every /api call require
the key. docs/serving.md describes the API and the limits.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import uvicorn

from attnmt.config.checks import DEVICES
from attnmt.decoding.loading import open_model
from attnmt.errors import UserError
from attnmt.runtime import is_export
from attnmt.serve import RunDecoder, Settings, create_app
from attnmt.serve.app import API_KEY_ENV
from attnmt.serve.schemas import MAX_BEAM

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The limit flags: `Settings` field -> help (the default and the type come from Settings).
LIMITS = {
    "max_body_bytes": "a larger request body is answered 413 unread",
    "max_lines": "lines per request; more are answered 413",
    "max_line_chars": "characters per line; a longer line is answered with an error of its own",
    "queue_size": "requests waiting per model; more are answered 503 with Retry-After",
    "batch_lines": "lines of waiting requests decoded together",
    "timeout": "seconds a request may wait and decode before 504; then its decoding stops",
    "max_search_steps": "a request's beam x its lines' longest outputs; more is answered 413",
    "max_explain_passes": "sequences a request's explanation runs through the model (integrated "
    "gradients: ig_steps x target tokens); more is answered 413",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Settings()
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run directories (or checkpoints), each served under its name; NAME=RUN names it",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument(
        "--beam", type=int, default=defaults.beam, help="default beam size (1 = greedy)"
    )
    parser.add_argument(
        "--device", default="auto", choices=DEVICES, help="where the models run (default auto)"
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"require this key on every /api call (default: ${API_KEY_ENV} if set)",
    )
    limits = parser.add_argument_group("limits")
    for name, help_text in LIMITS.items():
        default = getattr(defaults, name)
        limits.add_argument(
            f"--{name.replace('_', '-')}", type=type(default), default=default, help=help_text
        )


def named_runs(specs: list[str]) -> dict[str, str]:
    """NAME -> RUN from `RUN` or `NAME=RUN` arguments; names must differ."""
    runs: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            path, name = spec, Path(spec.rstrip("/")).name or spec
        if not name or not path:
            raise UserError(f"'{spec}' is not RUN or NAME=RUN")
        if name in runs:
            raise UserError(
                f"two runs are called '{name}'; name them apart with NAME=RUN, e.g. "
                f"a={runs[name]} b={path}"
            )
        runs[name] = path
    return runs


def _load(path: str, device: str):
    """A run, or an ONNX export (`attnmt export RUN --format onnx`: onnxruntime decodes it,
    on the CPU whatever --device says, so that a GPU run and an export are served side by
    side; the page shows its attention as a run's)."""
    device = "cpu" if is_export(path) else device
    return open_model(path, device=device, spelled={"device": "--device"})


def settings_from(args: argparse.Namespace) -> Settings:
    counts = ("max_body_bytes", "max_lines", "max_line_chars", "queue_size", "batch_lines")
    for flag in (*counts, "max_search_steps", "max_explain_passes"):
        if getattr(args, flag) < 1:
            raise UserError(f"--{flag.replace('_', '-')} must be at least 1")
    if not 1 <= args.beam <= MAX_BEAM:
        raise UserError(f"--beam must be between 1 and {MAX_BEAM}, got {args.beam}")
    if args.timeout <= 0:
        raise UserError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV) or None
    return Settings(
        beam=args.beam,
        max_body_bytes=args.max_body_bytes,
        max_lines=args.max_lines,
        max_line_chars=args.max_line_chars,
        queue_size=args.queue_size,
        batch_lines=args.batch_lines,
        timeout=args.timeout,
        api_key=key,
        max_search_steps=args.max_search_steps,
        max_explain_passes=args.max_explain_passes,
    )


def build(args: argparse.Namespace) -> tuple[Any, dict[str, RunDecoder], Settings]:
    """The app of `attnmt serve ARGS`, its decoders by name and its settings (exports are
    served without torch: tests/test_serve_export.py)."""
    settings = settings_from(args)
    decoders = {
        name: RunDecoder(name, _load(path, args.device), settings)
        for name, path in named_runs(args.runs).items()
    }
    return create_app(decoders, settings), decoders, settings


def run(args: argparse.Namespace) -> int:
    app, decoders, settings = build(args)
    if args.host not in LOOPBACK:
        print(
            f"attnmt serve: warning: listening on {args.host}, reachable from other machines"
            + ("" if settings.api_key else "; nothing asks them for a key (--api-key)"),
            file=sys.stderr,
        )
    host = f"[{args.host}]" if ":" in args.host else args.host
    for name, decoder in decoders.items():
        info = decoder.info()
        print(f"serving {name}: {info.model}, step {info.step}, {decoder.loaded.run_dir}")
    print(f"the attention explorer: http://{host}:{args.port}/  (API docs: /docs; Ctrl-C stops)")
    sys.stdout.flush()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
