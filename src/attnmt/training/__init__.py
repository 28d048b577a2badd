"""Training: the loop, its losses, schedules and multi-process set-up.

    result = train(cfg, resume=False, progress=True)   # cfg: attnmt.config.Config

Modules: `loop` (steps, logging, validation and checkpoints on schedule, Ctrl-C),
`run` (set-up, saving and exact resume of one run), `losses` (cross-entropy and the
REINFORCE terms of hard attention), `validation` (dev loss, BLEU, chrF), `schedules`
(learning rates) and `distributed` (torchrun / DDP). Checkpoints are `attnmt.checkpoint`.
"""

from attnmt.training.loop import train
from attnmt.training.losses import batch_loss, reinforce_loss
from attnmt.training.run import Progress, Run, TrainResult
from attnmt.training.schedules import NoamSchedule, build_schedule
from attnmt.training.validation import validate

__all__ = [
    "NoamSchedule",
    "Progress",
    "Run",
    "TrainResult",
    "batch_loss",
    "build_schedule",
    "reinforce_loss",
    "train",
    "validate",
]
