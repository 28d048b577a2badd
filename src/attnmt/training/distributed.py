"""Multi-process training with torchrun: gloo on CPU, NCCL on GPU.

torchrun sets RANK, LOCAL_RANK and WORLD_SIZE; without them everything is one process and
these helpers do nothing. Only rank 0 writes files and shows progress.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Context:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup(device: torch.device) -> Context:
    """Join the process group torchrun describes in the environment (if any)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Context()
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    return Context(
        rank=dist.get_rank(),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        world_size=dist.get_world_size(),
    )


def _on_backend_device(value: torch.Tensor) -> torch.Tensor:
    """NCCL reduces GPU tensors only: a CPU tensor goes to this process's GPU first."""
    if value.device.type == "cpu" and dist.get_backend() == "nccl":
        return value.to(torch.device("cuda", torch.cuda.current_device()))
    return value.clone()


def all_reduce_sum(value: torch.Tensor, ctx: Context) -> torch.Tensor:
    """Sum a tensor over every process (identity for one process); same device as `value`."""
    if ctx.enabled:
        reduced = _on_backend_device(value)
        dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
        value = reduced.to(value.device)
    return value


def barrier(ctx: Context) -> None:
    if ctx.enabled:
        dist.barrier()


def teardown(ctx: Context | None = None) -> None:
    """Leave the process group (`ctx` None: whatever `setup` joined, e.g. after a failure)."""
    if (ctx is None or ctx.enabled) and dist.is_initialized():
        dist.destroy_process_group()
