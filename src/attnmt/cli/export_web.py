"""`attnmt export RUN [RUN ...] --format web -o SITE`: text runs (or their ONNX exports) as
one static site, the explorer page translating in the browser (attnmt.export.web).

    attnmt export reference/rnnsearch-en-fr reference/transformer-en-fr --format web -o site
    python -m http.server -d site        # http://localhost:8000/

Each model is named as `attnmt serve` names it (its folder's name, or NAME=RUN), and the page
gets its ModelInfo as `attnmt serve EXPORT` describes it: the server's defaults, the export
decoded by onnxruntime (attnmt.serve.decoding). A run is loaded and checked first (text,
sentencepiece), all of them before any is exported; then exported as `--format onnx` does
(verified against PyTorch), into the site only.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from attnmt.cli.serve import named_runs
from attnmt.config.families import TEXT_MODELS
from attnmt.decoding.runs import load_run
from attnmt.errors import UserError
from attnmt.export.directory import vocab_info
from attnmt.export.onnx import export_onnx
from attnmt.export.web import build_site, site_sizes
from attnmt.runtime import is_export, load_export
from attnmt.serve import RunDecoder, Settings
from attnmt.serve.app import explorer_page
from attnmt.serve.schemas import MAX_BEAM


def site_limits(settings: Settings) -> dict:
    """site.json's "limits": the server's defaults the worker applies as `attnmt serve`
    does (no API key, queue or batching: one browser, one request at a time)."""
    limits = dataclasses.asdict(settings)
    for name in ("api_key", "queue_size", "batch_lines"):
        del limits[name]
    return {**limits, "max_beam": MAX_BEAM}


def export_web(args: argparse.Namespace) -> int:
    if args.out is None:
        raise UserError("--format web needs -o SITE, the folder to write the site to")
    if args.quantize not in (None, "float32", "int8"):
        raise UserError(
            f"--quantize {args.quantize} is for --format ctranslate2; the site's models are "
            "float32 (the default) or int8 (--quantize int8)"
        )
    quantize = None if args.quantize in (None, "float32") else args.quantize
    sources = named_runs([args.run, *args.more])
    runs = {path: _checked_run(path) for path in sources.values() if not is_export(path)}
    settings = Settings()

    def describe(name: str, folder: Path) -> dict:
        return RunDecoder(name, load_export(folder), settings).info().model_dump(mode="json")

    def export_run(path: str, folder: Path) -> None:
        loaded = runs[path]
        print(f"exporting {loaded.run_dir} (step {loaded.step}, {loaded.cfg.model.name}) to ONNX")
        export_onnx(loaded, folder, quantize=quantize)

    site = build_site(
        sources,
        args.out,
        page=explorer_page(),
        describe=describe,
        limits=site_limits(settings),
        export_run=export_run,
        force=args.force,
    )
    sizes = site_sizes(site)
    parts = ", ".join(f"{key} {size / 1e6:.1f} MB" for key, size in sorted(sizes.items()))
    models = f"{len(sources)} model{'s' if len(sources) > 1 else ''}"
    print(f"wrote the site {site}/ ({models}; {parts})")
    print(f"see it: python -m http.server -d {site}   (then http://localhost:8000/)")
    return 0


def _checked_run(path: str):
    """The run at `path`, loaded on the CPU, if the page can decode it."""
    loaded = load_run(path, device="cpu")
    if loaded.model.reads_images:
        raise UserError(
            f"'{loaded.run_dir}' reads images ({loaded.cfg.model.name}); the site's page "
            f"translates text models only ({', '.join(TEXT_MODELS)}): serve it with "
            "`attnmt serve RUN` instead"
        )
    if vocab_info(loaded)["kind"] != "sentencepiece":
        raise UserError(
            f"'{loaded.run_dir}' tokenises by symbols (a synthetic task); the site's page "
            "tokenises sentencepiece models only: serve it with `attnmt serve RUN` instead"
        )
    return loaded
