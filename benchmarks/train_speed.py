"""Training speed in fp32 and bf16, side by side in one process (ratios, not timings).

    python benchmarks/train_speed.py configs/rnnsearch.yaml configs/transformer.yaml

For each config: prepares its data (cached), builds its model, then times the same
training batches (forward, backward, Adam step) under fp32 and under bf16 autocast,
alternating the two so machine noise hits both alike. Prints target tokens/s and the
bf16/fp32 ratio, and appends a JSON line to benchmarks/results/train_speed.jsonl.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from machine import append_result

from attnmt.config import load_config
from attnmt.data import TokenBatcher, prepare
from attnmt.devices import NOTABLE_FLAGS, cpu_flags, cpu_model
from attnmt.models import build_model

RESULTS = Path(__file__).resolve().parent / "results" / "train_speed.jsonl"


def _step(model, optimizer, batch, precision: str) -> None:
    enabled = precision == "bf16"
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
        out = model(batch.src, batch.src_mask, batch.tgt_in)
    logits = out.logits.float()
    loss = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1), ignore_index=0
    )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def measure(config: str, steps: int, warmup: int, rounds: int) -> dict:
    cfg = load_config(config)
    data = prepare(cfg.data)
    torch.manual_seed(0)
    batcher = TokenBatcher(data.train, batch_tokens=cfg.data.batch_tokens, seed=0)
    batches = [next(batcher) for _ in range(steps)]
    tokens = sum(int(b.tgt_mask.sum()) for b in batches)
    model = build_model(cfg.model, data.vocab.src_vocab_size, data.vocab.tgt_vocab_size)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for precision in ("fp32", "bf16"):
        for batch in batches[:warmup]:
            _step(model, optimizer, batch, precision)
    seconds = {"fp32": 0.0, "bf16": 0.0}
    for _ in range(rounds):
        for precision in ("fp32", "bf16"):
            started = time.perf_counter()
            for batch in batches:
                _step(model, optimizer, batch, precision)
            seconds[precision] += time.perf_counter() - started
    rate = {p: tokens * rounds / s for p, s in seconds.items()}
    return {
        "config": config,
        "model": cfg.model.name,
        "batch_tokens": cfg.data.batch_tokens,
        "steps": steps,
        "rounds": rounds,
        "fp32_tokens_per_s": round(rate["fp32"], 1),
        "bf16_tokens_per_s": round(rate["bf16"], 1),
        "bf16_over_fp32": round(rate["bf16"] / rate["fp32"], 3),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": cpu_model(),
        "cpu_flags": sorted(cpu_flags() & NOTABLE_FLAGS),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--steps", type=int, default=20, help="timed batches per round")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for config in args.configs:
        result = measure(config, args.steps, args.warmup, args.rounds)
        print(
            f"{result['model']:<12} fp32 {result['fp32_tokens_per_s']:>8.0f} tok/s   "
            f"bf16 {result['bf16_tokens_per_s']:>8.0f} tok/s   "
            f"bf16/fp32 {result['bf16_over_fp32']:.2f}x"
        )
        append_result(RESULTS, result)


if __name__ == "__main__":
    main()
