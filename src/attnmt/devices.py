"""Which device runs the model: one choice for training, decoding and every command.

    device = pick_device("auto")                 # CUDA, else Apple mps, else the CPU
    device = pick_device("cuda", local_rank=1)   # one process of a torchrun job

`auto` takes the first of CUDA, Apple's `mps` and the CPU that PyTorch reports usable.
An explicit device that is not there is a clear error naming the option that asked for it.
"""

from __future__ import annotations

import torch

from attnmt.errors import UserError

DEVICES = ("auto", "cpu", "cuda", "mps")


def mps_available() -> bool:
    """Whether PyTorch can run on Apple's Metal backend here."""
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def pick_device(name: str, *, local_rank: int = 0, option: str = "train.device") -> torch.device:
    """The torch device for `name` (one of `DEVICES`); `option` names the setting in errors."""
    if name not in DEVICES:
        raise UserError(f"{option} must be one of {', '.join(DEVICES)}, got '{name}'")
    if name == "auto":
        if torch.cuda.is_available():
            name = "cuda"
        elif mps_available():
            name = "mps"
        else:
            name = "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"{option} is 'cuda' but no GPU is visible; use 'cpu' or 'auto'")
        return torch.device("cuda", local_rank)
    if name == "mps":
        if not mps_available():
            raise UserError(
                f"{option} is 'mps' but this PyTorch has no usable Apple GPU; use 'auto'"
            )
        return torch.device("mps")
    return torch.device("cpu")
