"""Where a grammar-lab update's time goes (issue 59, item 4): the lab's runs are tiny
(under a million parameters), so an update may cost more in dispatching many small
operations than in arithmetic. This measures it for the models of the full plan.

    python benchmarks/lab_profile.py                 # RNNsearch and Transformer-h4, en-fr
    python benchmarks/lab_profile.py --steps 20      # more updates profiled

For each model (seed 1 of the full budget, `benchmarks/claims.py`'s overrides), one
thread, as the plan trains: after 5 warm-up updates, `--steps` updates are timed alone
(the median kept) and then profiled with torch.profiler. Printed and appended to
benchmarks/results/lab_profile.jsonl:

- seconds per update, operator calls per update (aten ops, forward and backward);
- the time inside operators' own kernels (the profiler's self CPU time, summed) against
  the update's time: the rest is Python, autograd bookkeeping and dispatch;
- the matrix products' share (addmm, mm, bmm, linear's kernels) and the top operators;
- the mean time an operator call costs: a few microseconds means dispatch-bound.

The profiler adds its own cost to every call, so the split is read from the profiled
updates and the seconds per update from the unprofiled ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import claims  # noqa: E402
from machine import append_result  # noqa: E402
from throughput import Trainer  # noqa: E402

RESULTS = BENCH / "results" / "lab_profile.jsonl"
MATMULS = {"aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::_addmm_activation"}
MODELS = ("rnnsearch-en-fr-s1", "transformer-h4-en-fr-s1", "rnnencdec-en-fr-s1")


def profile_one(spec: claims.Spec, steps: int, out: Path) -> dict:
    trainer = Trainer(str(claims.CONFIG), claims.overrides_of(spec, "full", out),
                      batches=5 + 2 * steps)  # fmt: skip
    warm, timed, profiled = (trainer.batches[:5], trainer.batches[5 : 5 + steps],
                             trainer.batches[5 + steps :])  # fmt: skip
    for batch in warm:
        trainer.step(batch)
    seconds = []
    for batch in timed:
        started = time.perf_counter()
        trainer.step(batch)
        seconds.append(time.perf_counter() - started)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        for batch in profiled:
            trainer.step(batch)
        profiled_s = time.perf_counter() - started
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    calls = sum(e.count for e in events)
    self_us = sum(e.self_cpu_time_total for e in events)
    matmul_us = sum(e.self_cpu_time_total for e in events if e.key in MATMULS)
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:8]
    return {
        "model": spec.name.removesuffix(f"-s{spec.seed}"),
        "parameters": trainer.parameters,
        "seconds_per_update": round(statistics.median(seconds), 4),
        "op_calls_per_update": round(calls / steps),
        "kernel_share": round(self_us / 1e6 / profiled_s, 3),
        "matmul_share": round(matmul_us / 1e6 / profiled_s, 3),
        "us_per_op_call": round(self_us / calls, 1),
        "profiled_seconds_per_update": round(profiled_s / steps, 4),
        "top_ops": [
            {
                "op": e.key,
                "calls_per_update": round(e.count / steps),
                "share": round(e.self_cpu_time_total / 1e6 / profiled_s, 3),
            }
            for e in top
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="updates timed, then profiled")
    parser.add_argument("--out", type=Path, default=BENCH.parent / "runs" / "lab-profile")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as the plan's runs train: one thread each
    specs = {s.name: s for s in claims.plan("full")}
    found = [profile_one(specs[name], args.steps, args.out) for name in MODELS]
    record = {"machine": claims.machine(), "threads": 1, "steps": args.steps,
              "load_average": [round(x, 2) for x in os.getloadavg()], "models": found}  # fmt: skip
    append_result(RESULTS, record)
    for m in found:
        print(f"{m['model']}: {1000 * m['seconds_per_update']:.0f} ms an update, "
              f"{m['op_calls_per_update']:,} operator calls, {m['us_per_op_call']} us a call; "
              f"operators' own time {100 * m['kernel_share']:.0f}% of the update "
              f"(matrix products {100 * m['matmul_share']:.0f}%), the rest Python, "
              "autograd and dispatch")  # fmt: skip
        for op in m["top_ops"]:
            share = f"{100 * op['share']:5.1f}%"
            print(f"    {op['op']:<32} {op['calls_per_update']:>6} calls  {share}")
    print(f"appended to {RESULTS.relative_to(BENCH.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
