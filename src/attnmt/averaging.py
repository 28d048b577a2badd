"""Checkpoint averaging: one model whose weights are the mean of a run's last (or best) N
checkpoints (Junczys-Dowmunt et al. 2016; Vaswani et al. 2017 §6.1 average the last 5 or 20;
fairseq's `average_checkpoints.py` and JoeyNMT do the same).

    chosen = pick_checkpoints("runs/transformer", last=5)   # or best=5
    out = write_average("runs/transformer", chosen, "runs/transformer/average-last-5")
    # `attnmt translate runs/transformer/average-last-5`, evaluate, plot, serve...

The result is a run directory of its own (the run's vocabulary and config copied, one
checkpoint marked best and latest), so every command that takes RUN takes it. Its
checkpoint holds model weights only: it decodes, it does not resume training. Floating
tensors are averaged in float64 and stored in their own dtype; any other tensor (a step
counter) is taken from the newest checkpoint.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from attnmt.checkpoint import load_checkpoint, save_checkpoint
from attnmt.errors import CheckpointError
from attnmt.rundir import RunDir, is_checkpoint, read_state, step_of

LOWER_IS_BETTER = ("loss", "ppl")  # every other validation metric: higher is better


def run_checkpoints(run: str | Path) -> list[Path]:
    """The complete step checkpoints of a run, oldest first."""
    files = RunDir(run)
    if not files.checkpoints_dir.is_dir():
        if not Path(run).exists():
            raise CheckpointError(f"'{run}' does not exist; give a run directory")
        raise CheckpointError(f"'{run}' holds no checkpoints/ folder; give a run directory")
    return [p for p in files.checkpoints() if is_checkpoint(p)]


def _too_few(run: Path, have: int, want: int, which: str) -> CheckpointError:
    return CheckpointError(
        f"'{run}' has {have} {which} checkpoint(s) on disk, fewer than the {want} asked for: "
        f"training keeps the last train.keep_last checkpoints (and the best), so train with "
        f"--set train.keep_last={want} or more, or average fewer"
    )


def validation_scores(run: Path) -> dict[int, dict[str, Any]]:
    """Each validated step's dev scores, from the run's metrics (the last of a step)."""
    return {int(e["step"]): e for e in RunDir(run).metrics() if e.get("type") == "valid"}


def pick_checkpoints(
    run: str | Path, *, last: int | None = None, best: int | None = None
) -> tuple[list[Path], str]:
    """The checkpoints to average and a description ("last 5", "best 5 by dev bleu").

    `best` ranks the checkpoints written at a validation by the run's
    `train.early_stopping_metric` (checkpoints between validations have no score).
    """
    run = Path(run)
    if (last is None) == (best is None):
        raise CheckpointError("give one of --last N or --best N")
    want = last if last is not None else best
    assert want is not None
    if want < 1:
        raise CheckpointError(
            f"the number of checkpoints to average must be at least 1, got {want}"
        )
    steps = run_checkpoints(run)
    if last is not None:
        if len(steps) < last:
            raise _too_few(run, len(steps), last, "step")
        return steps[-last:], f"last {last}"
    state = read_state(steps[-1]) if steps else {}
    metric = state.get("config", {}).get("train", {}).get("early_stopping_metric", "bleu")
    scores = validation_scores(run)
    scored = [p for p in steps if metric in scores.get(step_of(p), {})]
    if len(scored) < want:
        raise _too_few(run, len(scored), want, f"validated (dev {metric})")
    lower = metric in LOWER_IS_BETTER
    ranked = sorted(scored, key=lambda p: scores[step_of(p)][metric], reverse=not lower)
    return sorted(ranked[:want], key=step_of), f"best {want} by dev {metric}"


def average_weights(paths: list[Path]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The mean of the checkpoints' model weights, and the newest checkpoint's state."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    paths = sorted(paths, key=step_of)
    first = load_checkpoint(paths[0], with_optimizer=False)
    total = {k: v.double() for k, v in first.model.items() if v.is_floating_point()}
    newest = first
    for path in paths[1:]:
        newest = load_checkpoint(path, with_optimizer=False)
        _same_tensors(paths[0], first.model, path, newest.model)
        for name in total:
            total[name] += newest.model[name].double()
    averaged = {
        name: (total[name] / len(paths)).to(value.dtype) if name in total else newest.model[name]
        for name, value in first.model.items()
    }
    return averaged, newest.state


def _same_tensors(a: Path, first: dict, b: Path, other: dict) -> None:
    """Both checkpoints hold the same tensors with the same shapes (else one sentence)."""
    if first.keys() != other.keys():
        odd = sorted(first.keys() ^ other.keys())[0]
        raise CheckpointError(
            f"'{a}' and '{b}' hold different models (tensor '{odd}' is in one only); average "
            "checkpoints of one run"
        )
    for name, value in first.items():
        if value.shape != other[name].shape:
            raise CheckpointError(
                f"'{a}' and '{b}' hold different models ('{name}' is {tuple(value.shape)} in "
                f"one, {tuple(other[name].shape)} in the other); average checkpoints of one run"
            )


def write_average(run: str | Path, paths: list[Path], out: str | Path, *, how: str = "") -> Path:
    """Average `paths` (checkpoints of `run`) into the run directory `out`; returns the
    checkpoint written. `out` must not hold a checkpoint already (nothing is overwritten)."""
    run, out = Path(run), Path(out)
    if RunDir(out).checkpoints_dir.exists():
        raise CheckpointError(
            f"'{out}' already holds checkpoints; remove it or choose another -o directory"
        )
    weights, state = average_weights(paths)
    step = int(state.get("step", 0))
    kept = {k: state[k] for k in ("config", "vocab_sizes", "hardware") if k in state}
    kept["step"] = step
    kept["averaged"] = {
        "how": how,
        "run": str(run),
        "checkpoints": [p.name for p in paths],
        "steps": [step_of(p) for p in paths],
    }
    source, target = RunDir(run), RunDir(out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source.vocab_dir, target.vocab_dir, dirs_exist_ok=True)
    if source.config_path.is_file():
        shutil.copy2(source.config_path, target.config_path)
    path = save_checkpoint(target.checkpoint_path(step), model_state=weights, state=kept)
    for pointer in ("latest", "best"):
        target.mark(pointer, step)
    return path
