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

    def __init__(self, config: str, overrides: list[str] | None = None, *, batches: int = 30):
        self.cfg = cfg = load_config(config, list(overrides or []))
        seed_everything(cfg.train.seed)
        data = prepare(cfg.data)
        device = pick_device("cpu")  # denormals flushed, malloc tuned, as `attnmt train`
        self.precision = choose_precision(cfg.train.precision, device, cfg.model.name)
        self.model = build_model(cfg.model, data.vocab.src_vocab_size, data.vocab.tgt_vocab_size)
        self.model.train()
        self.optimizer = build_optimizer(cfg, self.model)
        batcher = TokenBatcher(data.train, batch_tokens=cfg.data.batch_tokens, seed=cfg.train.seed)
        self.batches = [next(batcher) for _ in range(batches)]
        self.parameters = sum(p.numel() for p in self.model.parameters())

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
) -> dict:
    """Tokens/s over `rounds` passes of `steps` batches (after `warmup` others), FLOPs per
    step and MFU against `peak` (the `machine.describe()["peak"]` dict)."""
    trainer = Trainer(config, overrides, batches=warmup + steps)
    warm, timed = trainer.batches[:warmup], trainer.batches[warmup:]
    for batch in warm:
        trainer.step(batch)
    seconds = 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        for batch in timed:
            trainer.step(batch)
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
        "precision": trainer.precision.name,
        "batch_tokens": trainer.cfg.data.batch_tokens,
        "steps": steps * rounds,
        "seconds": round(seconds, 3),
        "tokens_per_s": round(tokens / seconds, 1),
        "step_ms": round(1e3 * seconds / (steps * rounds), 2),
        "gflop_per_step": round(flops / (steps * rounds) / 1e9, 3),
        "gflops": round(flops / seconds / 1e9, 2),
    }
    if peak:
        result["peak_gflops"] = peak[trainer.precision.name]["gflops"]
        result["mfu"] = round(result["gflops"] / result["peak_gflops"], 4)
    return result


def profile(config: str, overrides: list[str] | None = None, *, steps: int = 5, top: int = 12):
    """The top operators by self CPU time over `steps` training steps, and the share of the
    step spent outside them (Python, dispatch: what fewer, larger operations would save)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    trainer = Trainer(config, overrides, batches=steps + 2)
    for batch in trainer.batches[:2]:
        trainer.step(batch)
    started = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in trainer.batches[2:]:
            trainer.step(batch)
    wall_us = (time.perf_counter() - started) * 1e6
    events = prof.key_averages()
    ops = sorted(
        (e for e in events if e.key.startswith("aten::")),
        key=lambda e: e.self_cpu_time_total,
        reverse=True,
    )
    in_ops = sum(e.self_cpu_time_total for e in events if e.key.startswith("aten::"))
    calls = sum(e.count for e in events if e.key.startswith("aten::"))
    return {
        "config": config,
        "steps": steps,
        "step_ms": round(wall_us / steps / 1e3, 2),
        "aten_calls_per_step": round(calls / steps),
        "outside_aten_share": round(max(0.0, 1 - in_ops / wall_us), 3),
        "top": [
            {
                "op": e.key,
                "calls_per_step": round(e.count / steps, 1),
                "self_ms_per_step": round(e.self_cpu_time_total / steps / 1e3, 2),
                "share": round(e.self_cpu_time_total / wall_us, 3),
            }
            for e in ops[:top]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="print the top operators too")
    parser.add_argument(
        "--no-fused",
        action="store_true",
        help="RNNsearch's decoder loop through the module path, not attnmt.models.fused (A/B)",
    )
    args = parser.parse_args()
    if args.no_fused:
        from attnmt.models.rnnsearch import RNNSearch

        RNNSearch._fusable = lambda self: False
    print(json.dumps(measure(args.config, args.set, steps=args.steps), indent=1))
    if args.profile:
        print(json.dumps(profile(args.config, args.set), indent=1))


if __name__ == "__main__":
    main()
