"""Reports of evaluations, as files and tables: what `attnmt evaluate` writes into
RUN/eval/ and what `attnmt compare` reads back from several runs.

    files = write_report(result, hypotheses, alignments, out_dir, name)  # .json/.md/.txt/...
    rows = [summarize(run_dir, name, evaluation) for ...]                 # one row a run
    print(comparison_table(rows))

`result` is the dict `evaluate_split` returns: `evaluate_examples`'s scores, BLEU by
length and speed, with the pictures' report (image corpora), each explanation method's
measures (when asked) and the attention's alignment report (corpora with gold links) added.
The command line and `attnmt.evaluate` both take it from `evaluate_split`.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnmt.alignment.links import SYMMETRIZATIONS
from attnmt.config import IMAGE_CORPORA
from attnmt.data.alignments import write_pharaoh
from attnmt.data.buckets import DECODE_BATCH_TOKENS
from attnmt.data.preparation import decoding_split
from attnmt.decoding.attention_choice import AttentionChoice, run_attention
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.translator import source_limit
from attnmt.errors import CheckpointError, DataError, UserError
from attnmt.evaluation.splits import alignment_report, evaluate_examples
from attnmt.evaluation.vision import image_report
from attnmt.explain import check_method, explanation_report
from attnmt.explain.images import image_explanations
from attnmt.explain.measures import markdown_rows
from attnmt.explain.names import IG_STEPS
from attnmt.metrics import markdown_table, reference_streams
from attnmt.plotting import length_curves
from attnmt.rundir import RunDir, write_json_atomic

# corpora whose pairs come with word links: their evaluation scores the attention as an aligner
GOLD_CORPORA = ("alignments", "grammar")


def evaluate_split(
    loaded: Any,
    split: str = "test",
    *,
    limit: int | None = None,
    beam: int = SearchOptions.beam,
    alpha: float = SearchOptions.alpha,
    max_len_ratio: float = SearchOptions.max_len_ratio,
    batch_tokens: int = DECODE_BATCH_TOKENS,
    max_source_len: int | None = None,
    choice: AttentionChoice | None = None,
    explain: Sequence[str] = (),
    explain_sentences: int = 100,
    ig_steps: int = IG_STEPS,
) -> tuple[dict[str, Any], list[str], list | None, list]:
    """Decode the first `limit` sentences of a run's `split` and measure them: the scores,
    BLEU by length and speed; on an image corpus where the model looked; each of `explain`'s
    methods on the first `explain_sentences` (against the gold links or causes where the
    corpus has them); on a corpus with gold links the attention's AER (`choice`: which
    layer/head aligns, the run's default when None). Returns the result, the hypotheses,
    the predicted links (None without gold) and the examples decoded."""
    if limit is not None and limit < 1:
        raise UserError(f"limit must be at least 1, got {limit}")
    if explain and explain_sentences < 1:
        raise UserError(f"explain_sentences must be at least 1, got {explain_sentences}")
    choice = choice or run_attention(loaded)
    for method in explain:
        check_method(method, loaded.model, choice)
    examples = decoding_split(loaded.cfg.data, split, loaded.vocab)[:limit]
    if not examples:
        raise UserError(
            f"the {split} split of data.corpus '{loaded.cfg.data.corpus}' is empty; "
            "evaluate another split or set its path in the run's config"
        )
    words = source_limit(loaded.cfg.model, max_source_len)
    result, hypotheses = evaluate_examples(
        loaded, examples, split=split, limit=words, sentences=limit, beam=beam, alpha=alpha,
        max_len_ratio=max_len_ratio, batch_tokens=batch_tokens,
    )  # fmt: skip
    image = loaded.cfg.data.corpus in IMAGE_CORPORA
    if explain:
        kw = {"sentences": explain_sentences, "ig_steps": ig_steps}
        result["explanations"] = (
            image_explanations(loaded, examples, explain, choice, split, **kw)
            if image
            else explanation_report(loaded, examples, explain, choice, words, **kw)
        )
    if image:  # per symbol read, where the model looked
        result["images"] = image_report(
            loaded, examples, hypotheses, split, batch_tokens=batch_tokens
        )
    alignments = None
    if loaded.cfg.data.corpus in GOLD_CORPORA:
        if not loaded.model.uses_attention:
            result["alignment"] = {"skipped": "the model has no attention"}
        else:
            result["alignment"], alignments = alignment_report(
                loaded, examples, choice, words, batch_tokens
            )
    return result, hypotheses, alignments, examples


def write_report(
    result, hypotheses, alignments, out_dir: Path, name: str, references=None
) -> list[Path]:
    """Write the JSON, markdown, translations, length plot and Pharaoh links, and with
    `references` (a list per sentence) one file per reference stream, `{stem}.ref1.txt`...:
    line i is sentence i's k-th reference, an empty line where it has none (sacrebleu's
    None: no reference, not an empty one). The scores can be recomputed from these files
    with sacrebleu alone (docs/decoding.md)."""

    stem = f"{result['split']}-beam{result['beam']}"
    out_dir.mkdir(parents=True, exist_ok=True)
    files = length_curves(
        {name: result["bleu_by_length"]},
        out_dir / f"{stem}-length",
        title=f"{name}: BLEU by source length ({result['split']}, beam {result['beam']})",
    )
    text_path = out_dir / f"{stem}.txt"
    text_path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    files.append(text_path)
    for k, stream in enumerate(reference_streams(references or []), start=1):
        ref_path = out_dir / f"{stem}.ref{k}.txt"
        ref_path.write_text("".join((r or "") + "\n" for r in stream), encoding="utf-8")
        files.append(ref_path)
    if alignments is not None:
        align_path = out_dir / f"{stem}.align"
        write_pharaoh(align_path, [links or set() for links in alignments])
        result["alignment"]["file"] = align_path.name
        files.append(align_path)
    result["files"] = sorted(p.name for p in [*files, out_dir / f"{stem}.md"])
    markdown_path = out_dir / f"{stem}.md"
    markdown_path.write_text(markdown(result, f"{stem}-length.png"), encoding="utf-8")
    json_path = out_dir / f"{stem}.json"
    write_json_atomic(json_path, result)  # last: its presence marks a finished evaluation
    return [json_path, markdown_path, *files]


def markdown(result: dict[str, Any], plot_name: str) -> str:
    """The short markdown report of an evaluation result."""

    speed = result["speed"]
    lines = [
        f"# {result['run']}: {result['split']} split, beam {result['beam']}",
        "",
        f"Checkpoint `{result['checkpoint']}` (step {result['step']}), model "
        f"`{result['model']}`, corpus `{result['corpus']}`; {result['sentences']} sentences, "
        f"{result['references']} reference(s) each at most.",
        "",
        "| metric | score | sacrebleu signature |",
        "|---|---:|---|",
        f"| BLEU | {result['bleu']:.2f} | `{_cell(result['bleu_signature'])}` |",
        f"| chrF | {result['chrf']:.2f} | `{_cell(result['chrf_signature'])}` |",
        f"| exact match (%) | {result['exact']:.2f} | first reference |",
        "",
        *([result["bleu_note"], ""] if result.get("bleu_note") else []),
        "## BLEU by source length",
        "",
        markdown_table(result["bleu_by_length"]),
        f"![BLEU by source length]({plot_name})",
        "",
    ]
    alignment = result.get("alignment")
    if alignment and "aer" in alignment:
        lines += _alignment_markdown(alignment)
    if result.get("explanations"):
        lines += markdown_rows(result["explanations"])
    lines += [
        "## Speed",
        "",
        f"{speed['sentences']} sentences decoded in {speed['seconds']:.2f} s: "
        f"{speed['sentences_per_s']:.1f} sentences/s, {speed['output_subwords_per_s']:.0f} "
        f"output subwords/s on {speed['device']} (decoding only, batches of "
        f"{speed['batch_tokens']} source subwords).",
        "",
    ]
    if result["truncated"]:
        lines += [
            f"{len(result['truncated'])} source(s) longer than {result['source_limit']} "
            "subwords were truncated.",
            "",
        ]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _alignment_markdown(alignment: dict[str, Any]) -> list[str]:
    att = alignment["attention"]
    which = "decoder attention"
    if att["layer"] is not None:
        which = f"layer {att['layer']}, head {att['head']}"
    if att.get("offset"):
        which += f", weights of step t{att['offset']:+d} for target word t"
    skipped = sum(alignment["skipped"].values())
    source, target = ("English", "Greek") if alignment.get("swapped") else ("Greek", "English")
    rows = [
        "## Alignment error rate",
        "",
        f"Gold {source}→{target} links of {alignment['sentences']} verses ({alignment['sure']} "
        f"links{f'; {skipped} verses skipped' if skipped else ''}). The model reads the "
        f"reference (forced decoding); its attention ({which}) is merged to words and each "
        f"{target} word is linked to its most-attended {source} word. Lower AER is better.",
        "",
        "| alignment | precision (%) | recall (%) | AER (%) |",
        "|---|---:|---:|---:|",
        _aer_row("attention", alignment),
        _aer_row("diagonal baseline", alignment["diagonal"]),
        "",
    ]
    if "by_offset" in alignment:
        rows += [
            "AER (%) when target word t is read off the weights of decoder step t + k:",
            "",
            "| k | " + " | ".join(f"{r['offset']:+d}" for r in alignment["by_offset"]) + " |",
            "|---|" + "---:|" * len(alignment["by_offset"]),
            "| AER (%) | " + " | ".join(f"{100 * r['aer']:.1f}" for r in alignment["by_offset"])
            + " |",
            "",
        ]  # fmt: skip
    if "by_head" in alignment:
        rows += [
            "AER (%) of each layer and head (mean: the layer's heads averaged):",
            "",
            "| layer | head | precision (%) | recall (%) | AER (%) |",
            "|---:|---:|---:|---:|---:|",
        ]
        best = min(alignment["by_head"], key=lambda r: r["aer"])
        for r in alignment["by_head"]:
            mark = " **(best)**" if r is best else ""
            rows.append(
                f"| {r['layer']} | {r['head']} | {100 * r['precision']:.1f} | "
                f"{100 * r['recall']:.1f} | {100 * r['aer']:.1f}{mark} |"
            )
        rows.append("")
    both = alignment.get("symmetrized")
    if both:
        rows += [
            f"Made one with the attention of `{both['other_run']}` (the other direction, its "
            f"links turned round), on the {both['sentences']} verses both runs scored:",
            "",
            "| alignment | precision (%) | recall (%) | AER (%) |",
            "|---|---:|---:|---:|",
            _aer_row("this direction", both["one_direction"]),
            _aer_row("the other direction", both["other_direction"]),
            *(_aer_row(name, both[name]) for name in SYMMETRIZATIONS),
            "",
        ]
    if alignment.get("file"):
        rows += [f"Predicted links (Pharaoh `i-j`): `{alignment['file']}`.", ""]
    return rows


def _aer_row(name: str, s: dict[str, Any]) -> str:
    return (
        f"| {name} | {100 * s['precision']:.1f} | {100 * s['recall']:.1f} | {100 * s['aer']:.1f} |"
    )


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


def find_evaluation(run_dir: Path, split: str, beam: int | None) -> Path | None:
    """The run's evaluation JSON of `split` (with `beam`, else the most recent one)."""
    pattern = f"{split}-beam{beam}.json" if beam else f"{split}-beam*.json"
    found = sorted((run_dir / "eval").glob(pattern), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def run_names(runs: list[Path]) -> list[str]:
    """Directory names, or the paths where two runs share a name."""
    names = [p.name or str(p) for p in runs]
    return [str(p) if names.count(n) > 1 else n for p, n in zip(runs, names, strict=True)]


def read_evaluation(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(
            f"{path} cannot be read ({type(err).__name__}); run `attnmt evaluate` again"
        ) from None


def training_summary(run_dir: Path) -> dict[str, Any]:
    """Steps and training time (latest checkpoint), median training tokens/s (metrics)."""

    run = RunDir(run_dir)
    summary: dict[str, Any] = {"trained_steps": None, "training_seconds": None}
    try:
        state = run.state()
        summary["trained_steps"] = int(state.get("step", 0))
        summary["training_seconds"] = float(state.get("progress", {}).get("elapsed", 0.0))
    except (CheckpointError, ValueError, TypeError, AttributeError):
        pass
    events = run.metrics()  # a training still running: its last line may be cut short
    rates = [float(e.get("tokens_per_s", 0.0)) for e in events if e.get("type") == "train"]
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


def comparison_table(rows: list[dict[str, Any]]) -> str:
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
