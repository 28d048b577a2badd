"""What every chapter of `notebooks/` shares: its budget, where its runs go, its clock.
    chapter = Chapter("02-bottleneck")    # budget from $ATTNMT_BUDGET: "full" or "smoke"
    steps = chapter.pick(smoke=20, full=3000)
    run = chapter.train("reverse.yaml", "rnnsearch", train={"max_steps": steps})
    chapter.done()                        # which machine made the outputs, in how long

`full` is the budget the committed notebooks were executed at (`make notebooks`); `smoke`
the one the test suite runs every notebook at (seconds each). Runs are cached under one
folder, `$ATTNMT_NOTEBOOK_RUNS` or `notebooks/runs/` (a run whose saved config is the one
asked for, trained to its last step, is loaded instead of trained again), each chapter in
its own subfolder, so no chapter needs another's files. The prepared corpora go to one
shared data cache beside them.
"""

from __future__ import annotations

import html
import importlib.metadata
import io
import os
import platform
import shutil
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from attnmt.api.runs import TrainedRun, section_overrides, train
from attnmt.config import load_config
from attnmt.config.loading import to_dict
from attnmt.devices import cpu_flags, cpu_model
from attnmt.errors import CheckpointError, UserError
from attnmt.progress import watched
from attnmt.rundir import RunDir

BUDGETS = ("smoke", "full")
ROOT = Path(__file__).resolve().parents[2]  # the repository, for an editable install


def configs_dir() -> Path:
    """The shipped configs/: beside the working directory (a clone; notebooks/ inside
    it), or the repository this package was installed from."""
    for base in (Path.cwd(), Path.cwd().parent, ROOT):
        if (base / "configs" / "quickstart.yaml").is_file():
            return base / "configs"
    raise UserError(
        "cannot find attnmt's configs/ folder: run the notebook from a clone of the "
        "repository (its notebooks/ folder), e.g. git clone ... && pip install -e ."
    )


class Chapter:
    """One notebook's budget, run folder and clock."""

    def __init__(self, name: str, budget: str | None = None) -> None:
        self.name = name
        self.budget = budget or os.environ.get("ATTNMT_BUDGET", "full")
        if self.budget not in BUDGETS:
            raise UserError(
                f"ATTNMT_BUDGET must be one of {', '.join(BUDGETS)}, got '{self.budget}'"
            )
        default = configs_dir().parent / "notebooks" / "runs"
        self.root = Path(os.environ.get("ATTNMT_NOTEBOOK_RUNS") or default)
        self.runs = self.root / name
        self.data_cache = self.root / "data-cache"
        self.started = time.perf_counter()
        self.trained: dict[str, float] = {}  # run name -> seconds spent training it here

    def pick(self, *, smoke: Any, full: Any) -> Any:
        """The value for this chapter's budget."""
        return smoke if self.budget == "smoke" else full

    def config(self, name: str) -> Path:
        """A shipped config file (configs/NAME)."""
        path = configs_dir() / name
        if not path.is_file():
            raise UserError(f"no config named {name} in {path.parent}")
        return path

    def reference(self, name: str) -> Path:
        """A committed reference run (reference/NAME, docs/reference.md): trained far past
        a chapter's budget, loaded and never trained here."""
        path = configs_dir().parent / "reference" / name
        if not (path / "reference.json").is_file():
            raise UserError(f"no reference run named {name} in {path.parent}")
        return path

    def results(self, name: str) -> Path:
        """A committed measurement (benchmarks/results/NAME; docs/results.md tells how it
        was made): a chapter reads back what took hours, e.g. the lab's claims.jsonl."""
        path = configs_dir().parent / "benchmarks" / "results" / name
        if not path.is_file():
            raise UserError(f"no committed result named {name} in {path.parent}")
        return path

    def train(self, config: str, run: str, *, progress: bool = True, **sections):
        """`attnmt.train(configs/CONFIG)` into this chapter's folder `run`, with the data
        cache shared by every chapter; an identical finished run is loaded, not retrained."""
        sections = {k: dict(v) for k, v in sections.items()}
        sections.setdefault("train", {})["run_dir"] = str(self.runs / run)
        sections.setdefault("data", {})["cache_dir"] = str(self.data_cache)
        started = time.perf_counter()
        pairs = section_overrides(sections)
        wanted = to_dict(load_config(self.config(config), pairs))
        finished = _finished(self.runs / run, wanted)
        if finished is not None:
            print(f"{run}: loaded, trained earlier ({finished.step:,} updates)")
            return finished
        if (self.runs / run).exists():  # another config or an unfinished run: start over
            shutil.rmtree(self.runs / run)
        if watched():  # a person runs the cell: the bar (or the log lines) as training goes
            result = train(self.config(config), overrides=pairs, progress=progress)
        else:  # saved outputs (`make notebooks`): one line a run; the log is its train.log
            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                result = train(self.config(config), overrides=pairs, progress=False)
        self.trained[run] = time.perf_counter() - started
        print(_trained_line(run, result, self.trained[run]))
        return result

    def done(self) -> None:
        """A line saying which machine made these outputs and how long the chapter took."""
        minutes = (time.perf_counter() - self.started) / 60
        flags = sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
        torch_version = _torch_version()
        line = (
            f"{self.name}: {minutes:.1f} min at the '{self.budget}' budget on {cpu_model()} "
            f"({os.cpu_count()} cores; {' '.join(flags) or 'no AVX2'}), Python "
            f"{platform.python_version()}, torch {torch_version}"
        )
        if self.trained:
            spent = ", ".join(f"{k} {v / 60:.1f} min" for k, v in self.trained.items())
            line += f"; training: {spent}"
        print(line)


def _trained_line(run: str, result: TrainedRun, seconds: float) -> str:
    """`rnnsearch: 1,000 updates in 2.1 min; dev BLEU 92.78, exact 76.0% (its log: train.log)`"""
    valid = [m for m in result.metrics if m["type"] == "valid"]
    scores = ""
    if valid:
        last = valid[-1]
        scores = f"; dev BLEU {last['bleu']:.2f}" + (
            f", exact {last['exact']:.1f}%" if "exact" in last else ""
        )
    return f"{run}: {result.step:,} updates in {seconds / 60:.1f} min{scores} (its log: train.log)"


def _torch_version() -> str:
    return importlib.metadata.version("torch")


def _finished(run_dir: Path, wanted: dict[str, Any]):
    """The `TrainedRun` of `run_dir` if it finished training with the config `wanted`."""
    try:
        state = RunDir(run_dir).state()
    except CheckpointError:
        return None
    if state.get("config") != wanted or state.get("step") != wanted["train"]["max_steps"]:
        return None
    return TrainedRun.read(run_dir, stopped_because="loaded (trained earlier)")


class table:  # noqa: N801  (used like a function: `table(rows, columns)`)
    """Rows as a table: HTML in a notebook, aligned text elsewhere (no pandas needed).

    table([("dot", 0.1, 0.9), ...], ["score", "the", "cat"]); floats show 3 decimals.
    """

    def __init__(self, rows, columns, *, digits: int = 3) -> None:
        self.columns = [str(c) for c in columns]
        self.rows = [[_cell(v, digits) for v in row] for row in rows]

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>"
            for row in self.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __repr__(self) -> str:
        widths = [max(len(x) for x in col) for col in zip(self.columns, *self.rows, strict=True)]
        lines = [self.columns, *self.rows]
        return "\n".join(
            "  ".join(v.rjust(w) for v, w in zip(line, widths, strict=True)) for line in lines
        )


def _cell(value: Any, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if hasattr(value, "item"):  # numpy scalars
        return _cell(value.item(), digits)
    return str(value)
