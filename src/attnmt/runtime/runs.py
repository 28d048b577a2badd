"""An ONNX export loaded as a run: what `Translator` (and `attnmt translate`) read from a
run directory, here from an export directory, without torch.

    export = load_export("runs/quickstart/onnx")
    Translator(export, beam=5, need_weights=True).translate(["In the beginning ..."])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnmt.config import Config, from_dict
from attnmt.config.loading import TORCH_FREE_CHECKS
from attnmt.data.subwords import load_vocab
from attnmt.errors import ConfigError, UserError
from attnmt.runtime.model import OnnxModel, read_info


@dataclass
class ExportRun:
    """A `LoadedRun`'s fields, from an export: the run's model config (its decoding limits
    and attention layout), its vocabulary, and the graphs behind `OnnxModel`."""

    run_dir: Path  # the export directory
    checkpoint: Path  # the run's checkpoint it was exported from (its name)
    step: int
    cfg: Config
    model: OnnxModel
    vocab: Any
    info: dict
    members: None = None  # never an ensemble


def load_export(directory: str | Path, *, threads: int | None = None) -> ExportRun:
    """The export in `directory` (made by `attnmt export RUN --format onnx`)."""
    directory = Path(directory)
    info = read_info(directory)
    try:
        cfg = from_dict(Config, info["run_config"], checks=TORCH_FREE_CHECKS)
    except (KeyError, ConfigError) as err:
        raise UserError(f"the export '{directory}' has no readable run config: {err}") from None
    try:
        vocab = load_vocab(directory / "vocab")
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the vocabulary of the export '{directory}': {err}") from None
    return ExportRun(
        run_dir=directory,
        checkpoint=Path(info["checkpoint"]),
        step=info["step"],
        cfg=cfg,
        model=OnnxModel(directory, threads=threads),
        vocab=vocab,
        info=info,
    )
