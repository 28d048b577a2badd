"""`attnmt.train` and `attnmt.evaluate` from Python: the run and the scores as objects
(`TrainedRun`, `Evaluation`) that show themselves in a notebook and plot their curves."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from matplotlib.figure import Figure

from attnmt.api.model import Model, load
from attnmt.config import Config, load_config
from attnmt.config.loading import to_dict
from attnmt.errors import CheckpointError, UserError
from attnmt.explain.measures import markdown_rows
from attnmt.metrics import bleu_by_length
from attnmt.plotting import length_curves_figure
from attnmt.report import evaluate_split
from attnmt.rundir import RunDir
from attnmt.service import Request
from attnmt.training import TrainResult
from attnmt.training import train as train_run
from attnmt.views.results import Table


class TrainedRun(Table):
    """What `attnmt.train` returns: the run directory, where and why it stopped, its best
    validation, and its log (`metrics`); `.load()` the model, `.plot()` the loss curve."""

    def __init__(self, result) -> None:
        self.result = result
        self.run_dir = Path(result.run_dir)
        self.data = {
            "run_dir": str(self.run_dir),
            "step": result.step,
            "seconds": round(result.elapsed, 1),
            "stopped_because": result.stopped_because,
            "best": result.best,
            "last_validation": result.last_validation,
        }

    @classmethod
    def read(cls, run_dir: str | Path, stopped_because: str = "trained earlier") -> TrainedRun:
        """A run trained earlier (`attnmt train`, `attnmt.train`, `make reference`), as
        `attnmt.train` returned it: its latest checkpoint's step and training time, its best
        dev score, its last validation and its log.

            run = attnmt.TrainedRun.read("reference/captions-soft"); run.plot()
        """
        run = RunDir(run_dir)
        try:
            state = run.state()
        except CheckpointError as e:
            raise UserError(f"{run_dir} has no readable checkpoint ({e}): is it a run?") from e
        valid = [e for e in run.metrics() if e.get("type") == "valid"]
        best = run.best()
        return cls(
            TrainResult(
                run_dir=run.path,
                step=state["step"],
                elapsed=float(state.get("progress", {}).get("elapsed", 0.0)),
                last_validation=valid[-1] if valid else None,
                best=best.get("metric") if best is not None else None,
                stopped_because=stopped_because,
            )
        )

    step = property(lambda self: self.result.step)
    best = property(lambda self: self.result.best)

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return RunDir(self.run_dir).metrics()

    def load(self, **options) -> Model:
        return load(self.run_dir, **options)

    def plot(self):
        """Training loss (and dev loss where validated) against the step."""
        events = self.metrics
        train = [(e["step"], e["loss"]) for e in events if e.get("type") == "train"]
        dev = [(e["step"], e["loss"]) for e in events if e.get("type") == "valid"]
        fig = Figure(figsize=(6, 3.5), layout="constrained")
        ax = fig.add_subplot()
        if train:
            ax.plot(*zip(*train, strict=True), label="training loss")
        if dev:
            ax.plot(*zip(*dev, strict=True), marker="o", label="dev loss")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (nats per token)")
        ax.grid(alpha=0.3)
        if train or dev:
            ax.legend()
        ax.set_title(self.run_dir.name)
        return fig


def train(
    config: str | Path | Any = None,
    *,
    resume: bool = False,
    progress: bool = True,
    overrides: Sequence[str] = (),
    **sections: Mapping[str, Any],
) -> TrainedRun:
    """Train a run as `attnmt train` does and return it (`TrainedRun`).

    `config`: a YAML file, an `attnmt.config.Config`, or None (the defaults).
    Overrides as keyword sections, `train={"max_steps": 300}, model={"attention": "dot"}`,
    and/or `overrides=["train.max_steps=300"]` as `--set` takes them. A progress bar shows
    in a terminal and in a notebook.
    """

    pairs = [*overrides, *section_overrides(sections)]
    if isinstance(config, Config):
        cfg = _apply(config, pairs) if pairs else config
    else:
        cfg = load_config(config, pairs)
    return TrainedRun(train_run(cfg, resume=resume, progress=progress))


def section_overrides(sections: Mapping[str, Any]) -> list[str]:
    """`{"train": {"max_steps": 300}}` as `--set` takes it: ["train.max_steps=300"]."""
    pairs = []
    for section, values in sections.items():
        if not isinstance(values, Mapping):
            raise UserError(
                f"{section}= must be a dict of that section's keys, e.g. "
                f"{section}={{'key': value}}; got {values!r}"
            )
        pairs += [f"{section}.{key}={json.dumps(value)}" for key, value in values.items()]
    return pairs


def _apply(cfg, pairs: Sequence[str]):
    """`pairs` (KEY=VALUE) applied to a Config, through a temporary YAML file."""

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(to_dict(cfg)), encoding="utf-8")
        return load_config(path, list(pairs))


class MarkdownText(str):
    """A markdown table as text: printed as it is, rendered as a table in a notebook."""

    def _repr_markdown_(self) -> str:
        return str(self)


class Evaluation(Table):
    """What `attnmt.evaluate` returns: BLEU, chrF, BLEU by source length, speed
    (`data`, as `attnmt evaluate` writes it) and the `hypotheses`; `.plot()` draws BLEU
    by length (Bahdanau et al.'s Figure 2)."""

    def __init__(
        self,
        result: dict[str, Any],
        hypotheses: list[str],
        name: str,
        sources: list[str] | None = None,
        references: list[list[str]] | None = None,
    ) -> None:
        self.data = result
        self.hypotheses = hypotheses
        self.name = name
        self.sources = sources or []
        self.references = references or []  # per sentence: the reference, then any others

    def by_length(self, width: int = 10) -> list[dict[str, Any]]:
        """BLEU and chrF by source length in buckets of `width` words (`data`'s own
        `bleu_by_length` is `width=10`)."""
        if width == 10 or not self.sources:
            return self.data["bleu_by_length"]
        return bleu_by_length(
            self.sources,
            self.hypotheses,
            self.references,
            width=width,
            tokenize=self.data.get("bleu_tokenizer", "13a"),
        )

    bleu = property(lambda self: self.data["bleu"])
    chrf = property(lambda self: self.data["chrf"])
    # the attention's alignment report (AER, precision, recall, the diagonal's, by
    # phenomenon) on a corpus with gold links; None elsewhere
    alignment = property(lambda self: self.data.get("alignment"))
    # `explain`'s measures: per method AER, deletion/insertion areas and curves; or None
    explanations = property(lambda self: self.data.get("explanations"))

    def explanations_table(self) -> MarkdownText:
        """The explanation methods' measures as the markdown table `attnmt evaluate
        --explain` writes (one row a method, the random order and the diagonal below)."""
        if not self.explanations:
            raise UserError("this evaluation measured no explanations; pass explain=[...]")
        return MarkdownText("\n".join(markdown_rows(self.explanations)))

    def _repr_html_(self) -> str:
        keep = ("run", "split", "step", "beam", "bleu", "chrf", "bleu_tokenizer")
        shown = {k: self.data[k] for k in keep if k in self.data}
        shown["sentences/s"] = self.data.get("speed", {}).get("sentences_per_s")
        rows = "".join(
            f"<tr><td>{row['label']}</td><td>{row.get('sentences', '')}</td>"
            f"<td>{row['bleu']:.2f}</td></tr>"
            for row in self.data.get("bleu_by_length", [])
        )
        table = Table()
        table.data = shown
        by_length = (
            "<p style='margin:0.5em 0 0.2em'>BLEU by source length (words)</p>"
            f"<table><tr><th>length</th><th>sentences</th><th>BLEU</th></tr>{rows}</table>"
        )
        return table._repr_html_() + by_length

    def plot(self, *others: Evaluation, width: int = 10, metric: str = "bleu"):
        """BLEU (or chrF) against source length, this run and any `others` (one line
        each), in buckets of `width` words."""
        curves = {e.name: e.by_length(width) for e in (self, *others)}
        title = f"{'BLEU' if metric == 'bleu' else 'chrF'} by source length"
        return length_curves_figure(curves, metric=metric, title=title)


def evaluate(
    run: str | Path | Model,
    *,
    split: str = "test",
    beam: int | None = None,
    alpha: float = Request.alpha,
    limit: int | None = None,
    max_len_ratio: float = Request.max_len_ratio,
    device: str = "auto",
    explain: str | Sequence[str] | None = None,
    explain_sentences: int = 100,
    ig_steps: int = Request.ig_steps,
    recorded: bool = False,
) -> Evaluation:
    """Decode a split of the run's corpus and score it, as `attnmt evaluate` does (no
    files written): BLEU and chrF with sacrebleu, BLEU by source length, speed; on a corpus
    with gold links (`alignments`, `grammar`) the attention's AER (`.alignment`).

    `explain` measures one or more explanation methods (attnmt.explain.METHODS) on the
    first `explain_sentences` sentences, as `attnmt evaluate --explain` does: AER against
    the gold links (the grammar lab: the exact causes), deletion and insertion areas
    against a random order (`.explanations`; `.explanations_table()` as markdown).

    `beam` is `attnmt evaluate`'s default (`Request.beam`, greedy) unless given.
    `recorded=True` decodes nothing: it reads back what `attnmt evaluate RUN --split SPLIT
    --beam BEAM` wrote into RUN/eval (a reference run's test scores, say); without `beam`,
    the one evaluation of the split recorded there, whatever its beam."""
    if recorded:
        return _recorded(run.run_dir if isinstance(run, Model) else Path(run), split, beam)
    beam = Request.beam if beam is None else beam
    model = run if isinstance(run, Model) else load(run, device=device)
    methods = [explain] if isinstance(explain, str) else list(explain or [])
    result, hypotheses, _, examples = evaluate_split(
        model.loaded,
        split,
        limit=limit,
        beam=beam,
        alpha=alpha,
        max_len_ratio=max_len_ratio,
        explain=methods,
        explain_sentences=explain_sentences,
        ig_steps=ig_steps,
    )
    references = [[ex.tgt, *ex.refs] for ex in examples]
    return Evaluation(result, hypotheses, model.name, [ex.src for ex in examples], references)


def _recorded(run_dir: Path, split: str, beam: int | None) -> Evaluation:
    """The evaluation `attnmt evaluate` wrote into RUN/eval, read back (`beam` None: the
    split's one recorded evaluation)."""
    if beam is None:
        found = sorted((run_dir / "eval").glob(f"{split}-beam*.json"))
        beams = [
            int(p.stem.rsplit("beam", 1)[1]) for p in found if p.stem.rsplit("beam", 1)[1].isdigit()
        ]
        if len(beams) != 1:
            listed = ", ".join(f"beam={b}" for b in beams) or "none"
            raise UserError(
                f"'{run_dir}' has {len(beams)} recorded {split} evaluations ({listed}); give "
                "beam= to choose one, or run `attnmt evaluate` first"
            )
        beam = beams[0]
    stem = run_dir / "eval" / f"{split}-beam{beam}"
    try:
        result = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
        hypotheses = stem.with_suffix(".txt").read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        raise UserError(
            f"'{run_dir}' has no recorded {split} evaluation at beam {beam}; run `attnmt "
            f"evaluate {run_dir} --split {split} --beam {beam}` first, or drop recorded=True"
        ) from None
    sides = [
        stem.with_name(f"{stem.name}.ref{k}.txt").read_text(encoding="utf-8").splitlines()
        for k in range(1, int(result.get("references", 1)) + 1)
    ]
    references = [list(refs) for refs in zip(*sides, strict=True)]
    return Evaluation(result, hypotheses, run_dir.name, None, references)
