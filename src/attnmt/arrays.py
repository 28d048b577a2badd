"""Tensors to numpy, defined once for every module that reads weights (alignment,
attention maps, plots). Duck-typed, so plotting never needs to import torch."""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(values: Any, dtype: Any = np.float64) -> np.ndarray:
    """A numpy copy of a numpy array, a list or a torch tensor (on any device, any dtype)."""
    if hasattr(values, "detach"):  # a torch.Tensor: leave autograd, the GPU and bf16 behind
        values = values.detach().cpu().float().numpy()
    return np.array(values, dtype=dtype)
