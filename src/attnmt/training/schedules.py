"""Learning-rate schedules: constant, inverse square root with warm-up ("noam"), plateau.

Each is a small object with `step(metric=None) -> lr`, `lr` and `state_dict()` /
`load_state_dict()` (plain JSON-ready values), so a resumed run continues at exactly the
learning rate it left off with.
"""

from __future__ import annotations

import math
from typing import Any

import torch


class Schedule:
    """Sets the learning rate of every parameter group of `optimizer`."""

    def __init__(self, optimizer: torch.optim.Optimizer, base_lr: float):
        self.optimizer = optimizer
        self.base_lr = base_lr
        self.steps = 0
        self.lr = self.rate(0)
        self._apply()

    def rate(self, steps: int) -> float:
        return self.base_lr

    def _apply(self) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr

    def step(self) -> float:
        """Called after each optimizer step."""
        self.steps += 1
        self.lr = self.rate(self.steps)
        self._apply()
        return self.lr

    def on_validation(self, metric: float) -> float:
        """Called after each validation with the loss; only `plateau` reacts."""
        return self.lr

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "lr": self.lr}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = int(state["steps"])
        self.lr = float(state["lr"])
        self._apply()


class NoamSchedule(Schedule):
    """Vaswani et al. 2017 §5.3: lr = base · min(n^-0.5, n · w^-1.5) · √w (peak = base at w)."""

    def __init__(self, optimizer: torch.optim.Optimizer, base_lr: float, warmup_steps: int):
        self.warmup = max(1, warmup_steps)
        super().__init__(optimizer, base_lr)

    def rate(self, steps: int) -> float:
        n = max(1, steps)
        return self.base_lr * min(n**-0.5, n * self.warmup**-1.5) * math.sqrt(self.warmup)


class PlateauSchedule(Schedule):
    """Multiply the rate by `factor` when the validation loss has not improved `patience` times."""

    def __init__(self, optimizer, base_lr: float, factor: float = 0.5, patience: int = 2):
        self.factor, self.patience = factor, patience
        self.best = math.inf
        self.bad = 0
        super().__init__(optimizer, base_lr)

    def rate(self, steps: int) -> float:
        return getattr(self, "lr", self.base_lr)

    def on_validation(self, metric: float) -> float:
        if metric < self.best:
            self.best, self.bad = metric, 0
        else:
            self.bad += 1
            if self.bad >= self.patience:
                self.lr *= self.factor
                self.bad = 0
                self._apply()
        return self.lr

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "best": self.best, "bad": self.bad}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.best, self.bad = float(state["best"]), int(state["bad"])


def build_schedule(name: str, optimizer, base_lr: float, warmup_steps: int = 4000) -> Schedule:
    if name == "constant":
        return Schedule(optimizer, base_lr)
    if name == "noam":
        return NoamSchedule(optimizer, base_lr, warmup_steps)
    if name == "plateau":
        return PlateauSchedule(optimizer, base_lr)
    raise ValueError(f"unknown schedule '{name}'; valid: constant, noam, plateau")
