"""Peak memory of attnmt's training step, fp32 against bf16, and where it comes from.

    python benchmarks/train_memory.py configs/rnnsearch.yaml configs/transformer.yaml \
        --batch-tokens 2048 4096 8192 --precision fp32 bf16 --label after

Each (config, precision, batch_tokens) runs in a process of its own (a peak is a process's
whole life): the model, the optimizer and `--steps` real batches of the config's corpus,
stepped exactly as `attnmt train` steps them (benchmarks/throughput.py's `Trainer`). It
reports the process's peak resident size (`ru_maxrss`, what `/usr/bin/time -v` calls
"Maximum resident set size"), the resident size before the first step (the model, the
optimizer, the data, torch itself), and, over one more step, the peak of the tensors
PyTorch held (`tensor_peak_mb`: what a GPU's `max_memory_allocated` reports, from the
profiler's memory events) and a tally of the tensors autograd saved for the backward
(`torch.autograd.graph.saved_tensors_hooks`) by dtype, with the
largest shapes: the live activations that make the peak. A view of a tensor saved twice
(the same storage) counts once. One JSON line per measurement is appended to
`benchmarks/results/train_memory.jsonl`, with the CPU.

bf16 is timed nowhere here, so it may be measured on a CPU that only emulates it (an AMD
EPYC with AVX2: each bf16 step takes seconds to minutes); the memory it needs is the same.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from collections import Counter
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results" / "train_memory.jsonl"


def rss_mb() -> float:
    """This process's resident size now, from /proc (MB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def saved_tally(trainer, batch) -> dict:
    """One whole step (the optimizer's included) on `batch`, profiled: MB of the tensors
    autograd keeps for its backward, by dtype, and the ten largest (shape, dtype, count);
    the tensors held before it (`held_mb`) and at most during it (`step_peak_mb`)."""
    seen: set[tuple[int, int]] = set()
    by_dtype: Counter = Counter()
    shapes: Counter = Counter()
    sizes: dict[tuple, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes())
        if key not in seen and storage.nbytes() > 0:
            seen.add(key)
            dtype = str(tensor.dtype).removeprefix("torch.")
            by_dtype[dtype] += storage.nbytes()
            shape = (tuple(tensor.shape), dtype)
            shapes[shape] += 1
            sizes[shape] = storage.nbytes()
        return tensor

    from torch.profiler import ProfilerActivity, profile

    before = held_mb(trainer)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        trainer.optimizer.zero_grad(set_to_none=True)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = trainer.loss(batch)
        loss.backward()
        limit = trainer.cfg.train.clip_norm if trainer.cfg.train.clip_norm > 0 else float("inf")
        torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), limit)
        trainer.optimizer.step()
    largest = sorted(shapes, key=lambda s: sizes[s] * shapes[s], reverse=True)[:10]
    return {
        "held_before_step_mb": round(before, 1),
        "tensor_peak_mb": round(before + step_peak_mb(prof), 1),
        "saved_mb": round(sum(by_dtype.values()) / 2**20, 1),
        "saved_mb_by_dtype": {k: round(v / 2**20, 1) for k, v in by_dtype.most_common()},
        "largest": [
            {
                "shape": list(s[0]),
                "dtype": s[1],
                "count": shapes[s],
                "mb": round(sizes[s] * shapes[s] / 2**20, 1),
            }
            for s in largest
        ],
    }


def held_mb(trainer) -> float:
    """MB of the tensors a training step starts from: the parameters, and the optimizer's
    state (Adam's two moments); the gradients are None between steps."""
    tensors = list(trainer.model.parameters())
    for state in trainer.optimizer.state.values():
        tensors += [v for v in state.values() if torch.is_tensor(v)]
    return sum(t.untyped_storage().nbytes() for t in tensors) / 2**20


def step_peak_mb(prof) -> float:
    """The most MB of tensors PyTorch's allocator held at once during a profiled step, above
    what it held when the step began: the running sum of the profiler's memory events
    (allocations positive, frees negative) in time order. This counts tensors only, exactly,
    as the GPU allocator's peak does; what a library allocates for itself (oneDNN's scratch
    space for emulated bf16, say) and the C allocator's slack are in the resident peak
    only."""
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    return peak / 2**20


def measure_here(config: str, precision: str, batch_tokens: int, steps: int) -> dict:
    """One measurement in this process (the child's side)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from throughput import Trainer

    from attnmt.devices import NOTABLE_FLAGS, cpu_flags, cpu_model

    overrides = [f"data.batch_tokens={batch_tokens}", f"train.precision={precision}"]
    trainer = Trainer(config, overrides, batches=steps + 1)
    before = rss_mb()
    for batch in trainer.batches[:steps]:
        trainer.step(batch)
    # The resident peak of the plain steps: the profiled one below holds the profiler's
    # records too.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tally = saved_tally(trainer, trainer.batches[steps])
    batch = trainer.batches[steps]
    return {
        "config": config,
        "model": trainer.cfg.model.name,
        "parameters": trainer.parameters,
        "precision": trainer.precision.name,
        "batch_tokens": batch_tokens,
        "steps": steps + 1,  # the peak resident size is of the first `steps`
        "last_batch": list(batch.tgt_out.shape),
        "rss_before_steps_mb": round(before, 1),
        "peak_rss_mb": round(peak, 1),
        **tally,
        "cpu": cpu_model(),
        "flags": sorted(cpu_flags() & NOTABLE_FLAGS),
        "torch": torch.__version__,
    }


def table(lines: list[dict]) -> str:
    """A markdown table of peak resident MB: a row per (model, batch_tokens), a column per
    (label, precision), the last measurement of each."""
    cells: dict[tuple, float] = {}
    columns: list[tuple[str, str]] = []
    rows: list[tuple[str, int]] = []
    for line in lines:
        column, row = (line["label"], line["precision"]), (line["model"], line["batch_tokens"])
        cells[row + column] = line["peak_rss_mb"]
        columns += [column] if column not in columns else []
        rows += [row] if row not in rows else []
    header = "| model | batch_tokens | " + " | ".join(f"{a} {p} MB" for a, p in columns) + " |"
    out = [header, "|---|---:|" + "---:|" * len(columns)]
    for model, tokens in rows:
        values = [cells.get((model, tokens, *c)) for c in columns]
        shown = [f"{v:,.0f}" if v is not None else "" for v in values]
        out.append(f"| {model} | {tokens:,} | " + " | ".join(shown) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--batch-tokens", nargs="+", type=int, default=[2048, 4096, 8192])
    parser.add_argument("--steps", type=int, default=2, help="steps before the tallied one")
    parser.add_argument("--label", default="", help="written with each line (before/after)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--table", action="store_true", help="print the results file as a markdown table"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="the JSON-lines file")
    args = parser.parse_args()
    if args.table:
        lines = [json.loads(x) for x in args.results.read_text(encoding="utf-8").splitlines()]
        print(table([x for x in lines if Path(x["config"]).name in
                     {Path(c).name for c in args.configs}]))  # fmt: skip
        return
    if args.child:  # one measurement: configs[0], precision[0], batch_tokens[0]
        result = measure_here(args.configs[0], args.precision[0], args.batch_tokens[0], args.steps)
        print(json.dumps(result))
        return
    for config in args.configs:
        for tokens in args.batch_tokens:
            for precision in args.precision:
                done = subprocess.run(
                    [sys.executable, __file__, config, "--child", "--precision", precision,
                     "--batch-tokens", str(tokens), "--steps", str(args.steps)],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                if done.returncode != 0:
                    sys.exit(f"{config} {precision} {tokens}: {done.stderr[-2000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                result["label"] = args.label
                args.results.parent.mkdir(parents=True, exist_ok=True)
                with args.results.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(result) + "\n")
                print(
                    f"{result['model']:12} {precision:5} {tokens:5} tokens: peak "
                    f"{result['peak_rss_mb']:7.0f} MB "
                    f"(before steps {result['rss_before_steps_mb']:.0f}),"
                    f" tensors at most {result['tensor_peak_mb']:.0f} MB,"
                    f" saved for backward {result['saved_mb']:.0f} MB "
                    f"{result['saved_mb_by_dtype']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
