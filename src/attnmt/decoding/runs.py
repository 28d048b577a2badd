"""Loading a trained run for decoding: its config, vocabulary and weights.

`RUN` on the command line is a run directory (its best checkpoint is used, else the
latest) or one checkpoint directory inside `RUN/checkpoints/`. Nothing is executed on load:
the config comes from JSON/YAML, the weights from safetensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from attnmt.checkpoint import load_checkpoint, resolve_checkpoint
from attnmt.config import Config, TrainConfig, from_dict
from attnmt.data import load_vocab
from attnmt.errors import CheckpointError, ConfigError
from attnmt.models import build_model
from attnmt.models.base import Seq2Seq
from attnmt.rundir import RunDir, is_checkpoint


@dataclass
class LoadedRun:
    run_dir: Path
    checkpoint: Path
    step: int
    cfg: Config
    model: Seq2Seq  # an `Ensemble` too (attnmt.decoding.ensemble)
    vocab: object
    members: list[LoadedRun] | None = None  # an ensemble's runs (`inference.ensemble`)


def find_checkpoint(path: str | Path) -> Path:
    """The checkpoint a path means: itself, or a run's best (else latest) checkpoint."""
    path = Path(path)
    if path.is_file():
        example = "runs/quickstart"
        if path.suffix in (".yaml", ".yml"):
            example = _run_dir_of(path) or TrainConfig().run_dir  # where it trains to
            raise CheckpointError(
                f"'{path}' is a config file; RUN is a run directory such as {example}, "
                "made by `attnmt train`"
            )
        raise CheckpointError(
            f"'{path}' is a file; RUN is a run directory such as {example}, made by "
            "`attnmt train` (or one of its checkpoints/step-N directories)"
        )
    if is_checkpoint(path):
        return path
    kind = RunDir(path).export_format
    if kind is not None:
        raise CheckpointError(
            f"'{path}' is an export ({kind}), not a run; this needs the run it was exported "
            "from (its attnmt.json names it as run_dir)"
        )
    try:
        return resolve_checkpoint(path, "best")
    except CheckpointError:
        return resolve_checkpoint(path, "latest")


def _run_dir_of(config_file: Path) -> str | None:
    """The `train.run_dir` a YAML config names, if it can be read (for a hint only)."""
    try:
        tree = yaml.safe_load(config_file.read_text(encoding="utf-8"))
        run_dir = tree["train"]["run_dir"]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, TypeError, KeyError):
        return None
    return run_dir if isinstance(run_dir, str) and run_dir else None


def load_run(path: str | Path, *, device: str | torch.device = "cpu") -> LoadedRun:
    """Rebuild the model of a run (eval mode) with its vocabulary."""

    checkpoint = find_checkpoint(path)
    ck = load_checkpoint(checkpoint, with_optimizer=False)
    if "config" not in ck.state:
        raise CheckpointError(f"'{checkpoint}' holds no config; it was not written by train")
    try:
        cfg = from_dict(Config, ck.state["config"])
    except ConfigError as err:
        raise CheckpointError(
            f"the config saved in '{checkpoint}' is refused by this version of attnmt: {err}"
        ) from None
    run = RunDir.of(checkpoint)
    vocab_dir = run.vocab_dir
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
    return LoadedRun(run.path, checkpoint, ck.step, cfg, model, vocab)
