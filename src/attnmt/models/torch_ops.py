"""torch's spelling of the array operations the searches use (`attnmt.decoding.array_ops
.ArrayOps`), for one device: what `Seq2Seq.array_ops` gives (numpy's, for an ONNX export, is
`attnmt.runtime.arrays`)."""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from attnmt.data.batching import pad_batch


class TorchOps:
    long, bool, float = torch.long, torch.bool, torch.float32

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def no_grad(self) -> torch.no_grad:
        return torch.no_grad()

    def full(self, shape, value, dtype) -> Tensor:
        return torch.full(shape, value, dtype=dtype, device=self.device)

    def tensor(self, data, dtype) -> Tensor:
        return torch.tensor(data, dtype=dtype, device=self.device)

    def arange(self, n: int) -> Tensor:
        return torch.arange(n, device=self.device)

    def repeat(self, x: Tensor, times: int) -> Tensor:
        return x.repeat_interleave(times)

    def topk(self, x: Tensor, k: int) -> tuple[Tensor, Tensor]:
        return x.topk(k, dim=-1)

    def take(self, x: Tensor, index: Tensor) -> Tensor:
        return x.gather(1, index)

    def argmax(self, x: Tensor) -> Tensor:
        return x.argmax(dim=-1)

    def cat(self, xs: list[Tensor], axis: int) -> Tensor:
        return torch.cat(xs, dim=axis)

    def stack(self, xs: list[Tensor], axis: int) -> Tensor:
        return torch.stack(xs, dim=axis)

    def where(self, condition: Tensor, x, y) -> Tensor:
        return torch.where(condition, x, y)

    def astype(self, x: Tensor, dtype) -> Tensor:
        return x.to(dtype)

    def copy(self, x: Tensor) -> Tensor:
        return x.clone()

    def host(self, x: Tensor) -> Tensor:
        return x.float().cpu()

    def host_index(self, x: Tensor) -> Tensor:
        return x.cpu()

    def pad(self, rows) -> tuple[Tensor, Tensor]:
        return pad_batch(rows, self.device)


@functools.cache
def torch_ops(device: torch.device) -> TorchOps:
    return TorchOps(device)
