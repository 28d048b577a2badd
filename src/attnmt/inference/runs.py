"""Loading a trained run for decoding: its config, vocabulary and weights.

`RUN` on the command line is a run directory (its best checkpoint is used, else the
latest) or one checkpoint directory inside `RUN/checkpoints/`. Nothing is executed on load:
the config comes from JSON/YAML, the weights from safetensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from attnmt.checkpoint import load_checkpoint, resolve_checkpoint
from attnmt.config import Config, from_dict
from attnmt.data import load_vocab
from attnmt.errors import CheckpointError
from attnmt.models import build_model


@dataclass
class LoadedRun:
    run_dir: Path
    checkpoint: Path
    step: int
    cfg: Config
    model: torch.nn.Module
    vocab: object


def find_checkpoint(path: str | Path) -> Path:
    """The checkpoint a path means: itself, or a run's best (else latest) checkpoint."""
    path = Path(path)
    if (path / "state.json").is_file():
        return path
    try:
        return resolve_checkpoint(path, "best")
    except CheckpointError:
        return resolve_checkpoint(path, "latest")


def load_run(path: str | Path, *, device: str | torch.device = "cpu") -> LoadedRun:
    """Rebuild the model of a run (eval mode) with its vocabulary."""

    checkpoint = find_checkpoint(path)
    ck = load_checkpoint(checkpoint, with_optimizer=False)
    if "config" not in ck.state:
        raise CheckpointError(f"'{checkpoint}' holds no config; it was not written by train")
    cfg = from_dict(Config, ck.state["config"])
    run_dir = checkpoint.parent.parent
    vocab_dir = run_dir / "vocab"
    if not vocab_dir.is_dir():
        raise CheckpointError(
            f"'{vocab_dir}' is missing; a run directory keeps its vocabulary beside checkpoints/"
        )
    vocab = load_vocab(vocab_dir)
    model = build_model(cfg.model, vocab.src_vocab_size, vocab.tgt_vocab_size)
    try:
        model.load_state_dict(ck.model)
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise CheckpointError(
            f"'{checkpoint}' does not fit the model its config describes ({first})"
        ) from None
    model.to(device).eval()
    return LoadedRun(run_dir, checkpoint, ck.step, cfg, model, vocab)
