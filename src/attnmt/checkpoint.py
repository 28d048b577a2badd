"""Checkpoints: tensors in safetensors, everything else in JSON, never code.

A checkpoint is a directory (where it sits in a run, and the pointers to the latest and
the best: `attnmt.rundir`):

    checkpoints/step-00000500/
        model.safetensors       model weights, each distinct tensor once (tied weights
                                under one name, the others as aliases in its metadata)
        optimizer.safetensors   optimizer tensors (Adam moments, step counts) and RNG state
        the state (JSON)        format tag, step, config, optimizer hyper-parameters,
                                scheduler / data-iterator / RNG state, metrics

It is written into a temporary sibling directory, every file flushed to disk, and then
renamed into place, so a crash at any moment leaves either the whole checkpoint or none of
it. The pointers to the latest and the best checkpoint are replaced atomically too. Every
file and the directory get the permissions of any new file (0644 and 0755 under umask
022), not the 0600/0700 of temporary names. Loading reads safetensors and JSON only: no
pickle, no code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from attnmt.errors import CheckpointError
from attnmt.rundir import (
    CHECKPOINTS,
    RunDir,
    current_umask,
    is_checkpoint,
    read_state,
    sync_dir,
    write_state,
)

FORMAT = "attnmt-checkpoint"
# 2: model.safetensors stores tied (equal) tensors once, with an "aliases" metadata entry.
VERSION = 2


@dataclass
class Checkpoint:
    """What a checkpoint holds once loaded."""

    path: Path
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any] | None
    state: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def step(self) -> int:
        return int(self.state.get("step", 0))


# --------------------------------------------------------------------------------------
# Optimizer state <-> (tensors, JSON)
# --------------------------------------------------------------------------------------


def _split_optimizer(opt_state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict]:
    """Split `optimizer.state_dict()` into flat tensors and a JSON-ready remainder."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, per_param in opt_state["state"].items():
        for name, value in per_param.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(index), {})[name] = value
    return tensors, {"param_groups": opt_state["param_groups"], "scalars": scalars}


def _join_optimizer(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if not key.startswith("state."):
            continue
        _, index, name = key.split(".", 2)
        state.setdefault(int(index), {})[name] = value
    for index, values in meta.get("scalars", {}).items():
        state.setdefault(int(index), {}).update(values)
    return {"state": state, "param_groups": meta["param_groups"]}


# --------------------------------------------------------------------------------------
# Atomic files
# --------------------------------------------------------------------------------------


def _plain_permissions(directory: Path) -> None:
    """Give `directory` and its files what a plain mkdir / open would (mkdtemp: 0700,
    mkstemp and safetensors: 0600), so a checkpoint reads like the rest of the run."""
    mask = current_umask()
    for child in directory.iterdir():
        if child.is_file():
            child.chmod(0o666 & ~mask)
    directory.chmod(0o777 & ~mask)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def save_checkpoint(
    path: str | Path,
    *,
    model_state: dict[str, torch.Tensor],
    optimizer_state: dict[str, Any] | None = None,
    state: dict[str, Any] | None = None,
    tensors: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write a checkpoint directory at `path` atomically and return it.

    `state` must be JSON-serialisable (config, step, scheduler and iterator state...);
    `tensors` are extra tensors (e.g. RNG states) stored beside the optimizer's.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        save_weights(tmp / "model.safetensors", model_state)
        extra = {f"extra.{k}": v.detach().cpu().contiguous() for k, v in (tensors or {}).items()}
        meta: dict[str, Any] = {"format": FORMAT, "version": VERSION, **(state or {})}
        if optimizer_state is not None:
            opt_tensors, meta["optimizer"] = _split_optimizer(optimizer_state)
            extra.update(opt_tensors)
        save_file(extra, str(tmp / "optimizer.safetensors"), metadata={"format": FORMAT})
        write_state(tmp, meta)
        for name in ("model.safetensors", "optimizer.safetensors"):
            _fsync_file(tmp / name)
        _plain_permissions(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
        sync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def load_checkpoint(path: str | Path, *, with_optimizer: bool = True) -> Checkpoint:
    """Load a checkpoint directory (or a run directory: its latest checkpoint).

    Raises `CheckpointError` with one clear sentence for a missing, damaged or foreign file.
    """
    path = resolve_checkpoint(path)
    state = read_state(path)
    if state.get("format") != FORMAT:
        raise CheckpointError(f"'{path}' is not an attnmt checkpoint (no '{FORMAT}' tag)")
    if state.get("version", 0) > VERSION:
        raise CheckpointError(
            f"'{path}' was written by a newer attnmt (format {state['version']}); upgrade attnmt"
        )
    model = load_weights(path / "model.safetensors")
    optimizer = None
    tensors: dict[str, torch.Tensor] = {}
    if with_optimizer:
        stored = load_weights(path / "optimizer.safetensors")
        tensors = {k[len("extra.") :]: v for k, v in stored.items() if k.startswith("extra.")}
        if "optimizer" in state:
            optimizer = _join_optimizer(stored, state["optimizer"])
    return Checkpoint(path=path, model=model, optimizer=optimizer, state=state, tensors=tensors)


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors, its aliases (`save_weights`) expanded into copies."""
    if not path.is_file():
        raise CheckpointError(f"'{path}' is missing; the checkpoint is incomplete")
    try:
        tensors = load_file(str(path))
        with safe_open(str(path), framework="pt") as handle:
            aliases = json.loads((handle.metadata() or {}).get("aliases", "{}"))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(
            f"'{path}' is damaged or not a safetensors file ({err}); pick another checkpoint"
        ) from None
    # Copies, not views: callers may change one name's tensor in place (averaging).
    tensors.update({name: tensors[stored].clone() for name, stored in aliases.items()})
    return tensors


def save_weights(
    path: str | Path, tensors: dict[str, torch.Tensor], *, dtype: torch.dtype | None = None
) -> None:
    """Write weights to a safetensors file, each distinct tensor once.

    Tied weights (the Transformer's shared embeddings and output layer) are one tensor under
    several names, and safetensors refuses shared storage: the first name of every group of
    equal tensors is stored and the others are recorded as its aliases in the file's
    metadata, which loading expands. Equal values are all that aliasing needs, so it is
    lossless whether or not the tensors were tied. `dtype` casts the floating-point tensors
    (fp16 for the reference runs, half the bytes).
    """
    stored: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    by_content: dict[tuple, str] = {}
    for name, value in tensors.items():
        value = value.detach().cpu()
        if dtype is not None and value.is_floating_point():
            value = value.to(dtype)
        value = value.contiguous()
        digest = hashlib.blake2b(value.reshape(-1).view(torch.uint8).numpy()).digest()
        key = (value.dtype, tuple(value.shape), digest)
        first = by_content.get(key)
        if first is not None and torch.equal(stored[first], value):
            aliases[name] = first
            continue
        by_content.setdefault(key, name)
        stored[name] = value
    metadata = {"format": FORMAT, "aliases": json.dumps(aliases)}
    # Clones: two distinct names may still share storage (views), which safetensors refuses.
    save_file({k: v.clone() for k, v in stored.items()}, str(path), metadata=metadata)


# --------------------------------------------------------------------------------------
# A run's checkpoints: latest, best, the last K
# --------------------------------------------------------------------------------------


def resolve_checkpoint(path: str | Path, which: str = "latest") -> Path:
    """A checkpoint directory from itself, a run directory, or a `checkpoints/` directory:
    the run's latest (or best) one (`RunDir.checkpoint`)."""
    path = Path(path)
    if is_checkpoint(path) or (path / "model.safetensors").is_file():
        return path
    if path.name == CHECKPOINTS and not (path / CHECKPOINTS).is_dir():
        return RunDir(path.parent).checkpoint(which)
    return RunDir(path).checkpoint(which)


class CheckpointManager:
    """Saves step checkpoints under `run_dir/checkpoints`, keeps the best and the last K."""

    def __init__(self, run_dir: str | Path, *, keep_last: int = 3, higher_is_better=True):
        self.run = RunDir(run_dir)
        self.folder = self.run.checkpoints_dir
        self.keep_last = max(1, keep_last)
        self.higher_is_better = higher_is_better

    def _pointer(self, which: str) -> dict[str, Any] | None:
        """The latest or best pointer; None where it is missing or damaged (the next save
        writes it anew)."""
        try:
            return self.run.latest() if which == "latest" else self.run.best()
        except CheckpointError:
            return None

    def has_checkpoint(self) -> bool:
        """True once a checkpoint was saved (whether or not the latest pointer is intact)."""
        return bool(self.run.checkpoints())

    @property
    def best_metric(self) -> float | None:
        pointer = self._pointer("best")
        return None if pointer is None else pointer.get("metric")

    def is_better(self, metric: float) -> bool:
        best = self.best_metric
        if best is None:
            return True
        return metric > best if self.higher_is_better else metric < best

    def save(self, step: int, *, metric: float | None = None, **kwargs: Any) -> Path:
        """Save the checkpoint of `step`; mark it best when `metric` beats the best so far."""
        path = save_checkpoint(self.run.checkpoint_path(step), **kwargs)
        self.run.mark("latest", step)
        if metric is not None and self.is_better(metric):
            self.run.mark("best", step, metric)
        self._prune()
        return path

    def _prune(self) -> None:
        steps = self.run.checkpoints()
        protected = {
            pointer["checkpoint"]
            for pointer in (self._pointer("best"), self._pointer("latest"))
            if pointer is not None
        }
        for old in steps[: -self.keep_last]:
            if old.name not in protected:
                shutil.rmtree(old, ignore_errors=True)
        # What a process killed while writing left behind (there is one writer: rank 0).
        for leftover in self.run.leftovers():
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
