"""Checkpoints: tensors in safetensors, everything else in JSON, never code.

A checkpoint is a directory:

    checkpoints/step-00000500/
        model.safetensors       model weights, each distinct tensor once (tied weights
                                under one name, the others as aliases in its metadata)
        optimizer.safetensors   optimizer tensors (Adam moments, step counts) and RNG state
        state.json              format tag, step, config, optimizer hyper-parameters,
                                scheduler / data-iterator / RNG state, metrics

It is written into a temporary sibling directory, every file flushed to disk, and then
renamed into place, so a crash at any moment leaves either the whole checkpoint or none of
it. `latest.json` and `best.json` beside the checkpoints name the current ones (also
replaced atomically). Every file and the directory get the permissions of any new file
(0644 and 0755 under umask 022), not the 0600/0700 of temporary names. Loading reads
safetensors and JSON only: no pickle, no code.
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


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
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


def _plain_permissions(directory: Path) -> None:
    """Give `directory` and its files what a plain mkdir / open would (mkdtemp: 0700,
    mkstemp and safetensors: 0600), so a checkpoint reads like the rest of the run."""
    mask = _umask()
    for child in directory.iterdir():
        if child.is_file():
            child.chmod(0o666 & ~mask)
    directory.chmod(0o777 & ~mask)


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
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 -> a plain file's permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


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
        (tmp / "state.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
        for name in ("model.safetensors", "optimizer.safetensors", "state.json"):
            _fsync_file(tmp / name)
        _plain_permissions(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def load_checkpoint(path: str | Path, *, with_optimizer: bool = True) -> Checkpoint:
    """Load a checkpoint directory (or a run directory: its latest checkpoint).

    Raises `CheckpointError` with one clear sentence for a missing, damaged or foreign file.
    """
    path = resolve_checkpoint(path)
    state_file = path / "state.json"
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(
            f"'{state_file}' is missing or damaged ({err.__class__.__name__}); "
            "pick another checkpoint or retrain"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
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
    """A checkpoint directory from itself, a run directory, or a `checkpoints/` directory.

    Without a `latest.json` (deleted, say, because it was damaged) the latest is the
    complete step checkpoint with the highest step.
    """
    path = Path(path)
    if (path / "state.json").is_file() or (path / "model.safetensors").is_file():
        return path
    for folder in (path / "checkpoints", path):
        pointer = folder / f"{which}.json"
        if pointer.is_file():
            try:
                name = json.loads(pointer.read_text())["checkpoint"]
            except (OSError, ValueError, KeyError, TypeError):
                raise CheckpointError(f"'{pointer}' is damaged; delete it to resume") from None
            return folder / name
        steps = sorted(p for p in folder.glob("step-*") if (p / "state.json").is_file())
        if which == "latest" and steps:
            return steps[-1]
    if not path.exists():
        raise CheckpointError(f"'{path}' does not exist; give a run directory or a checkpoint")
    raise CheckpointError(f"'{path}' holds no checkpoint; train first or give a checkpoint")


class CheckpointManager:
    """Saves step checkpoints under `run_dir/checkpoints`, keeps the best and the last K."""

    def __init__(self, run_dir: str | Path, *, keep_last: int = 3, higher_is_better=True):
        self.folder = Path(run_dir) / "checkpoints"
        self.keep_last = max(1, keep_last)
        self.higher_is_better = higher_is_better

    def _pointer(self, which: str) -> dict[str, Any] | None:
        path = self.folder / f"{which}.json"
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError:
            return None

    def has_checkpoint(self) -> bool:
        """True once a checkpoint was saved (whether or not `latest.json` is intact)."""
        return any(p.is_dir() for p in self.folder.glob("step-*"))

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
        name = f"step-{step:08d}"
        path = save_checkpoint(self.folder / name, **kwargs)
        write_json_atomic(self.folder / "latest.json", {"checkpoint": name, "step": step})
        if metric is not None and self.is_better(metric):
            write_json_atomic(
                self.folder / "best.json", {"checkpoint": name, "step": step, "metric": metric}
            )
        self._prune()
        return path

    def _prune(self) -> None:
        steps = sorted(p for p in self.folder.glob("step-*") if p.is_dir())
        protected = {
            pointer["checkpoint"]
            for pointer in (self._pointer("best"), self._pointer("latest"))
            if pointer is not None
        }
        for old in steps[: -self.keep_last]:
            if old.name not in protected:
                shutil.rmtree(old, ignore_errors=True)
        # What a process killed while writing left behind (there is one writer: rank 0).
        for leftover in self.folder.glob(".step-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        for leftover in self.folder.glob(".*.json.*"):
            leftover.unlink(missing_ok=True)
