"""A run directory on disk: the one place that knows its layout.

    runs/quickstart/
        config.yaml             the resolved config (defaults filled in, overrides applied)
        vocab/                  the subword models or symbol table
        train.log               what training printed
        metrics.jsonl           one JSON object a line per event (train, valid), appended
        checkpoints/
            step-00000500/      one checkpoint (`attnmt.checkpoint`): weights, optimizer,
                state.json      and the JSON state (step, config, progress, hardware...)
            latest.json         {"checkpoint": "step-00000500", "step": 500}
            best.json           the same, and the dev "metric" it was kept for

    run = RunDir("runs/quickstart")
    run.state()["step"]; run.best(); run.metrics(); run.checkpoints()

An export (`attnmt export`) is a directory of its own, told apart by its `attnmt.json`
(`RunDir(path).export_format` is "onnx" or "ctranslate2" there, None for a run).

Every JSON file is written to a temporary file, flushed and renamed into place, so a crash
never leaves half of one; `metrics.jsonl` is appended a line at a time, so a crash can cut
its last line short, and reading skips that line (any other bad line is an error). Nothing
here imports torch: the report, the server of an export and the chapters read runs without.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from attnmt.errors import CheckpointError

CONFIG = "config.yaml"
VOCAB = "vocab"
LOG = "train.log"
METRICS = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
STATE = "state.json"  # inside each checkpoint
POINTERS = ("latest", "best")  # checkpoints/latest.json, checkpoints/best.json
EXPORT_INFO = "attnmt.json"  # what an export directory holds instead of checkpoints
STEP = re.compile(r"step-(\d+)")


def step_name(step: int) -> str:
    """A step checkpoint's folder name: `step-00000500` (zero-padded: names sort by step)."""
    return f"step-{step:08d}"


def step_of(checkpoint: str | Path) -> int:
    """The step of a `step-N` checkpoint folder."""
    match = STEP.fullmatch(Path(checkpoint).name)
    if match is None:
        raise CheckpointError(f"'{checkpoint}' is not a step checkpoint (step-N)")
    return int(match[1])


def is_checkpoint(path: str | Path) -> bool:
    """Whether `path` is a checkpoint directory (it holds a state.json)."""
    return (Path(path) / STATE).is_file()


def read_state(checkpoint: str | Path) -> dict[str, Any]:
    """A checkpoint's state.json (step, config, progress, hardware...).

    Raises:
        CheckpointError: the file is missing, damaged, or not a JSON object.
    """
    path = Path(checkpoint) / STATE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise CheckpointError(
            f"'{path}' is missing or damaged ({err.__class__.__name__}); "
            "pick another checkpoint or retrain"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(f"'{checkpoint}' is not an attnmt checkpoint ({path} is no object)")
    return state


def write_state(checkpoint: str | Path, state: dict[str, Any]) -> None:
    """Write a checkpoint's state.json atomically."""
    write_json_atomic(Path(checkpoint) / STATE, state)


class RunDir:
    """The files of one run directory (see the module's docstring for the layout).

    Paths are attributes; reading a file is a method, and a missing file reads as None
    (or [] for the metrics) where a run may not have it yet. A damaged file is a
    `CheckpointError` naming it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.config_path = self.path / CONFIG
        self.vocab_dir = self.path / VOCAB
        self.log_path = self.path / LOG
        self.metrics_path = self.path / METRICS
        self.checkpoints_dir = self.path / CHECKPOINTS

    @classmethod
    def of(cls, checkpoint: str | Path) -> RunDir:
        """The run a checkpoint belongs to (`RUN/checkpoints/step-N` -> `RUN`)."""
        return cls(Path(checkpoint).parent.parent)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # --- what kind of directory -----------------------------------------------------------

    @property
    def export_format(self) -> str | None:
        """The format of the export this directory is, "onnx" or "ctranslate2" (its
        `attnmt.json` says; `attnmt.export`), else None: a run, or neither."""
        try:
            info = json.loads((self.path / EXPORT_INFO).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        kind = info.get("format") if isinstance(info, dict) else None
        return kind if isinstance(kind, str) else None

    # --- checkpoints ----------------------------------------------------------------------

    def checkpoint_path(self, step: int) -> Path:
        """Where the checkpoint of `step` is (or goes): `checkpoints/step-00000500`."""
        return self.checkpoints_dir / step_name(step)

    def checkpoints(self) -> list[Path]:
        """The step checkpoint folders, in step order (each written aside and renamed into
        place, so a folder is whole; those damaged by hand may lack their state.json)."""
        if not self.checkpoints_dir.is_dir():
            return []
        found = [p for p in self.checkpoints_dir.iterdir() if STEP.fullmatch(p.name) and p.is_dir()]
        return sorted(found, key=step_of)

    def leftovers(self) -> list[Path]:
        """What a writer killed mid-way left in checkpoints/: the temporary folder of a
        checkpoint (`.step-N.xxxx`) or file of a pointer (`.latest.json.xxxx`)."""
        if not self.checkpoints_dir.is_dir():
            return []
        return sorted(
            p
            for p in self.checkpoints_dir.iterdir()
            if p.name.startswith((".step-", *(f".{name}.json." for name in POINTERS)))
        )

    def latest(self) -> dict[str, Any] | None:
        """checkpoints/latest.json ({"checkpoint", "step"}), None before the first save."""
        return self._pointer("latest")

    def best(self) -> dict[str, Any] | None:
        """checkpoints/best.json ({"checkpoint", "step", "metric"}: the best validation's
        checkpoint and score), None before the first validation that saved one."""
        return self._pointer("best")

    def _pointer(self, which: str) -> dict[str, Any] | None:
        path = self.checkpoints_dir / f"{which}.json"
        try:
            pointer = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, ValueError):
            pointer = None
        if not isinstance(pointer, dict) or not isinstance(pointer.get("checkpoint"), str):
            raise CheckpointError(f"'{path}' is damaged; delete it to resume")
        return pointer

    def mark(self, which: str, step: int, metric: float | None = None) -> None:
        """Make the checkpoint of `step` the run's "latest" or "best" (with its `metric`)."""
        if which not in POINTERS:
            raise ValueError(f"which must be one of {POINTERS}, got {which!r}")
        pointer: dict[str, Any] = {"checkpoint": step_name(step), "step": step}
        if metric is not None:
            pointer["metric"] = metric
        write_json_atomic(self.checkpoints_dir / f"{which}.json", pointer)

    def checkpoint(self, which: str = "latest") -> Path:
        """The checkpoint folder latest.json or best.json names. Without a latest.json
        (deleted, say, because it was damaged) the latest is the newest step folder that
        holds a state.json.

        Raises:
            CheckpointError: no such checkpoint, the directory is missing, or the pointer
                is damaged.
        """
        pointer = self._pointer(which)
        if pointer is not None:
            return self.checkpoints_dir / pointer["checkpoint"]
        steps = [p for p in self.checkpoints() if is_checkpoint(p)]
        if which == "latest" and steps:
            return steps[-1]
        if not self.path.exists():
            raise CheckpointError(
                f"'{self.path}' does not exist; give a run directory or a checkpoint"
            )
        raise CheckpointError(
            f"'{self.path}' holds no checkpoint; train first or give a checkpoint"
        )

    def state(self, which: str = "latest") -> dict[str, Any]:
        """The state.json of the latest (or best) checkpoint: step, config, progress..."""
        return read_state(self.checkpoint(which))

    # --- the metrics log ------------------------------------------------------------------

    def metrics(self) -> list[dict[str, Any]]:
        """The training log, one dict per event of metrics.jsonl ([] before the first).

        The trainer appends a line at a time, so a crash (or a training still writing) can
        leave the last line cut short: a last line that does not parse is left out. Any
        other line that is not a JSON object was damaged by something else.

        Raises:
            CheckpointError: a line before the last is not a JSON object (file and line named).
        """
        try:
            data = self.metrics_path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as err:
            path = self.metrics_path
            raise CheckpointError(f"'{path}' cannot be read ({err.strerror})") from None
        lines = [(n, line) for n, line in enumerate(data.split(b"\n"), 1) if line.strip()]
        events = []
        for n, line in lines:
            try:
                event = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as err:
                event, why = None, err.__class__.__name__
            else:
                why = "not a JSON object"
            if isinstance(event, dict):
                events.append(event)
            elif n != lines[-1][0]:
                raise CheckpointError(
                    f"'{self.metrics_path}' line {n} is damaged ({why}); only a crashed run's "
                    f"last line may be cut short: mend or delete line {n}"
                )
        return events

    def append_metrics(self, event: dict[str, Any]) -> None:
        """Add one event to metrics.jsonl (one line, written at once)."""
        with open(self.metrics_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event, ensure_ascii=False) + "\n")

    def trim_metrics(self, step: int) -> None:
        """Keep the events up to `step` (a resumed run logs the later ones again) and drop a
        last line cut short by a crash; the file is replaced whole."""
        if not self.metrics_path.is_file():
            return
        kept = [
            json.dumps(event, ensure_ascii=False) + "\n"
            for event in self.metrics()
            if isinstance(event.get("step"), int) and event["step"] <= step
        ]
        tmp = self.metrics_path.with_name(self.metrics_path.name + ".tmp")
        tmp.write_text("".join(kept), encoding="utf-8")
        tmp.replace(self.metrics_path)


# --------------------------------------------------------------------------------------
# Atomic files
# --------------------------------------------------------------------------------------


def sync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename into it) to disk, where the system allows."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def current_umask() -> int:
    """The process's umask: from /proc where Linux shows it, else by setting it and putting
    it straight back (the only portable way to read it)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to `path` via a flushed temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp's 0600 -> a plain file's permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    sync_dir(path.parent)
