"""attnmt's training step: target tokens per second, model FLOP utilisation, and a profile.

    python benchmarks/throughput.py configs/rnnsearch.yaml --set data.batch_tokens=2048

The step is the one `attnmt train` runs (`attnmt.training.losses.batch_loss`, backward,
gradient clipping, the optimizer), on real batches of the config's corpus, in the precision
`train.precision` resolves to on this machine. FLOPs per step are counted by PyTorch's own
`torch.utils.flop_counter.FlopCounterMode` over the same batches (forward and backward; it
counts matrix products, the optimizer's and the element-wise FLOPs are left out), so

    MFU = counted FLOPs / seconds / the machine's measured matrix-product peak

in the precision the run trains in (`machine.describe()`).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from attnmt.config import load_config
from attnmt.data import TokenBatcher, prepare
from attnmt.devices import choose_precision, pick_device
from attnmt.models import build_model
from attnmt.training.distributed import Context
from attnmt.training.losses import batch_loss
from attnmt.training.run import Progress, build_optimizer, seed_everything


class Trainer:
    """A config's model, optimizer and batches, stepped exactly as `attnmt train` steps."""

    def __init__(
        self,
        config: str,
        overrides: list[str] | None = None,
        *,
        batches: int = 30,
        device: str = "cpu",
        compile: bool = False,
    ):
        self.cfg = cfg = load_config(config, list(overrides or []))
        seed_everything(cfg.train.seed)
        data = prepare(cfg.data)
        # On the CPU: denormals flushed, malloc tuned, as `attnmt train` does.
        self.device = pick_device(device)
        self.precision = choose_precision(cfg.train.precision, self.device, cfg.model.name)
        model = build_model(cfg.model, data.vocab.src_vocab_size, data.vocab.tgt_vocab_size)
        model.to(self.device).train()
        self.parameters = sum(p.numel() for p in model.parameters())
        self.optimizer = build_optimizer(cfg, model)
        # torch.compile wraps the module; parameters, optimizer and attributes stay the same.
        self.model = torch.compile(model) if compile else model
        batcher = TokenBatcher(data.train, batch_tokens=cfg.data.batch_tokens, seed=cfg.train.seed)
        self.batches = [next(batcher).to(self.device) for _ in range(batches)]

    def sync(self) -> None:
        """Wait for the GPU's queued work (a no-op on the CPU), so that a clock reads it."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def loss(self, batch) -> torch.Tensor:
        loss, _ = batch_loss(
            self.model,
            batch,
            self.cfg,
            Context(),
            Progress(),
            autocast_dtype=self.precision.autocast_dtype,
        )
        return loss

    def step(self, batch) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.loss(batch).backward()
        limit = self.cfg.train.clip_norm if self.cfg.train.clip_norm > 0 else float("inf")
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), limit)
        self.optimizer.step()


def measure(
    config: str,
    overrides: list[str] | None = None,
    *,
    steps: int = 20,
    warmup: int = 5,
    rounds: int = 2,
    peak: dict | None = None,
    device: str = "cpu",
    compile: bool = False,
) -> dict:
    """Tokens/s over `rounds` passes of `steps` batches (after `warmup` others, each timed
    alone in `first_steps_s`), FLOPs per step and MFU against `peak` (the
    `machine.describe()["peak"]` dict); on a GPU, the allocator's peak memory too."""
    trainer = Trainer(config, overrides, batches=warmup + steps, device=device, compile=compile)
    warm, timed = trainer.batches[:warmup], trainer.batches[warmup:]
    cuda = trainer.device.type == "cuda"
    first_steps = []  # each warm-up step alone: start-up costs (kernel choice, compiling)
    for batch in warm:
        started = time.perf_counter()
        trainer.step(batch)
        trainer.sync()
        first_steps.append(round(time.perf_counter() - started, 3))
    if cuda:
        torch.cuda.reset_peak_memory_stats(trainer.device)
    seconds = 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        for batch in timed:
            trainer.step(batch)
        trainer.sync()
        seconds += time.perf_counter() - started
    tokens = sum(int(b.tgt_mask.sum()) for b in timed) * rounds
    with FlopCounterMode(display=False) as counter:
        for batch in timed:
            trainer.loss(batch).backward()
    trainer.optimizer.zero_grad(set_to_none=True)
    flops = counter.get_total_flops() * rounds
    result = {
        "config": config,
        "overrides": list(overrides or []),
        "model": trainer.cfg.model.name,
        "parameters": trainer.parameters,
        "device": str(trainer.device),
        "compiled": compile,
        "precision": trainer.precision.name,
        "batch_tokens": trainer.cfg.data.batch_tokens,
        "steps": steps * rounds,
        "seconds": round(seconds, 3),
        "tokens_per_s": round(tokens / seconds, 1),
        "step_ms": round(1e3 * seconds / (steps * rounds), 2),
        "first_steps_s": first_steps,
        "gflop_per_step": round(flops / (steps * rounds) / 1e9, 3),
        "gflops": round(flops / seconds / 1e9, 2),
    }
    if cuda:  # the allocator's peak over the timed steps: the model's own tensors, exactly
        result["peak_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    if peak:
        result["peak_gflops"] = peak[trainer.precision.name]["gflops"]
        result["mfu"] = round(result["gflops"] / result["peak_gflops"], 4)
    return result


def profile(
    config: str,
    overrides: list[str] | None = None,
    *,
    steps: int = 5,
    top: int = 12,
    device: str = "cpu",
    compile: bool = False,
):
    """The top operators by self time over `steps` training steps (on a GPU, by the time
    their kernels ran there, and the share of the step the GPU was busy at all), and the
    share of the step spent outside them (Python, dispatch: what fewer, larger operations
    would save)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    trainer = Trainer(config, overrides, batches=steps + 2, device=device, compile=compile)
    cuda = trainer.device.type == "cuda"
    for batch in trainer.batches[:2]:
        trainer.step(batch)
    trainer.sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    started = time.perf_counter()
    with torch_profile(activities=activities) as prof:
        for batch in trainer.batches[2:]:
            trainer.step(batch)
        trainer.sync()
    wall_us = (time.perf_counter() - started) * 1e6
    events = prof.key_averages()
    aten = [e for e in events if e.key.startswith("aten::")]

    def self_time(e) -> float:
        return e.self_device_time_total if cuda else e.self_cpu_time_total

    ops = sorted(aten, key=self_time, reverse=True)
    in_ops = sum(e.self_cpu_time_total for e in aten)
    calls = sum(e.count for e in aten)
    result = {
        "config": config,
        "device": str(trainer.device),
        "compiled": compile,
        "precision": trainer.precision.name,
        "steps": steps,
        "step_ms": round(wall_us / steps / 1e3, 2),
        "aten_calls_per_step": round(calls / steps),
        "outside_aten_share": round(max(0.0, 1 - in_ops / wall_us), 3),
        "top": [
            {
                "op": e.key,
                "calls_per_step": round(e.count / steps, 1),
                "self_ms_per_step": round(self_time(e) / steps / 1e3, 3),
                "share": round(self_time(e) / wall_us, 3),
            }
            for e in ops[:top]
        ],
    }
    if cuda:  # kernel time over wall time: how much of the step the GPU had work
        kernels = sum(e.self_device_time_total for e in aten)
        result["gpu_busy_share"] = round(kernels / wall_us, 3)
        result["cpu_ms_per_step_in_aten"] = round(in_ops / steps / 1e3, 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="print the top operators too")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--compile", action="store_true", help="the model under torch.compile")
    parser.add_argument(
        "--mfu", action="store_true", help="measure the matrix-product peak here and add MFU"
    )
    parser.add_argument(
        "--no-fused",
        action="store_true",
        help="RNNsearch's decoder loop through the module path, not attnmt.models.fused (A/B)",
    )
    args = parser.parse_args()
    if args.no_fused:
        from attnmt.models.rnnsearch import RNNSearch

        RNNSearch._fusable = lambda self: False
    where = {"device": args.device, "compile": args.compile}
    peak = None
    if args.mfu:
        from machine import describe

        peak = describe(device=args.device)["peak"]
    print(json.dumps(measure(args.config, args.set, steps=args.steps, peak=peak, **where)))
    if args.profile:
        print(json.dumps(profile(args.config, args.set, **where)))


if __name__ == "__main__":
    main()
