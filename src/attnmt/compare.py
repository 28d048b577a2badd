"""`attnmt compare RUN RUN ...`: one table and one BLEU-by-length plot for several runs.

    attnmt evaluate runs/rnnsearch; attnmt evaluate runs/transformer
    attnmt compare runs/rnnsearch runs/transformer --out results

Reads, for each run, its evaluation of the split (`RUN/eval/{split}-beam{K}.json`, written
by `attnmt evaluate`; the most recent one unless `--beam` picks one), its training log
(`RUN/metrics.jsonl`: training tokens per second) and its latest checkpoint's
`state.json` (steps and training time). Nothing is decoded and no model is loaded.
Written into `--out` (default `compare/`):

    compare-{split}.md          the table (also printed) and the plot
    compare-{split}.json        the same rows
    compare-{split}-length.png  every run's BLEU by source length (and .svg)
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from attnmt.errors import DataError, UserError

COLUMNS = (
    ("run", "run"),
    ("model", "model"),
    ("step", "steps"),
    ("bleu", "BLEU"),
    ("chrf", "chrF"),
    ("aer", "AER (%)"),
    ("parameters", "parameters"),
    ("training_time", "training time"),
    ("tokens_per_s", "train tokens/s"),
    ("sentences_per_s", "decode sent/s"),
    ("beam", "beam"),
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
    from attnmt.plot import length_curves

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
        summarize(path, name, _read_json(evaluations[path]))  # type: ignore[arg-type]
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
    table = markdown_table(rows)
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


def find_evaluation(run_dir: Path, split: str, beam: int | None) -> Path | None:
    """The run's evaluation JSON of `split` (with `beam`, else the most recent one)."""
    pattern = f"{split}-beam{beam}.json" if beam else f"{split}-beam*.json"
    found = sorted((run_dir / "eval").glob(pattern), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def run_names(runs: list[Path]) -> list[str]:
    """Directory names, or the paths where two runs share a name."""
    names = [p.name or str(p) for p in runs]
    return [str(p) if names.count(n) > 1 else n for p, n in zip(runs, names, strict=True)]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(
            f"{path} cannot be read ({type(err).__name__}); run `attnmt evaluate` again"
        ) from None


def training_summary(run_dir: Path) -> dict[str, Any]:
    """Steps and training time (latest checkpoint), median training tokens/s (metrics)."""
    from attnmt.checkpoint import resolve_checkpoint
    from attnmt.errors import CheckpointError

    summary: dict[str, Any] = {"trained_steps": None, "training_seconds": None}
    try:
        state = json.loads((resolve_checkpoint(run_dir, "latest") / "state.json").read_text())
        summary["trained_steps"] = int(state.get("step", 0))
        summary["training_seconds"] = float(state.get("progress", {}).get("elapsed", 0.0))
    except (CheckpointError, OSError, ValueError, TypeError, AttributeError):
        pass
    rates = []
    try:
        with open(run_dir / "metrics.jsonl", encoding="utf-8") as handle:
            for line in handle:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line still being written by a running training
                if isinstance(event, dict) and event.get("type") == "train":
                    rates.append(float(event.get("tokens_per_s", 0.0)))
    except OSError:
        pass
    summary["tokens_per_s"] = round(statistics.median(rates), 1) if rates else None
    return summary


def summarize(run_dir: Path, name: str, evaluation: dict[str, Any]) -> dict[str, Any]:
    """One table row from an evaluation JSON and the run's training records."""
    alignment = evaluation.get("alignment") or {}
    training = training_summary(run_dir)
    return {
        "run": name,
        "path": str(run_dir),
        "model": evaluation.get("model"),
        "step": evaluation.get("step"),
        "bleu": evaluation.get("bleu"),
        "chrf": evaluation.get("chrf"),
        "aer": round(100 * alignment["aer"], 1) if "aer" in alignment else None,
        "parameters": evaluation.get("parameters"),
        **training,
        "training_time": _duration(training["training_seconds"]),
        "sentences_per_s": (evaluation.get("speed") or {}).get("sentences_per_s"),
        "beam": evaluation.get("beam"),
        "sentences": evaluation.get("sentences"),
        "bleu_signature": evaluation.get("bleu_signature"),
        "bleu_by_length": evaluation.get("bleu_by_length", []),
        "evaluation": str(run_dir / "eval" / f"{evaluation['split']}-beam{evaluation['beam']}"),
    }


def _duration(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The comparison as a markdown table; a value a run does not have is "—"."""

    def cell(key: str, value: Any) -> str:
        if value is None:
            return "—"
        if key in ("parameters", "tokens_per_s"):
            return f"{value:,.0f}"
        if isinstance(value, float):
            return f"{value:.1f}" if key in ("aer", "sentences_per_s") else f"{value:.2f}"
        return str(value).replace("|", "\\|")

    header = "| " + " | ".join(title for _, title in COLUMNS) + " |"
    rule = "|" + "|".join("---" if key in ("run", "model") else "---:" for key, _ in COLUMNS) + "|"
    body = ["| " + " | ".join(cell(k, row.get(k)) for k, _ in COLUMNS) + " |" for row in rows]
    return "\n".join([header, rule, *body]) + "\n"
