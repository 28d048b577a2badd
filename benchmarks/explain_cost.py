"""What integrated gradients (32 steps) and gradient × input cost for one sentence,
before and after one forward pass per integration step (issue 39).

    python benchmarks/explain_cost.py                         # RNNsearch and Transformer
    python benchmarks/explain_cost.py --models luong --repeats 3 --threads 1

The shipped `configs/quickstart.yaml` RNNsearch (4,000 subwords, as the quickstart's joint
vocabulary), `configs/transformer.yaml` Transformer (8,000) and, on request,
`configs/luong-global-general.yaml` Luong (4,000), randomly initialised (the cost
depends on the shapes only), in eval mode, explaining one 32-word English sentence of
47 source subwords with a 37-subword reference (docs/results.md's note on the cost):
random ids of those lengths, seeded. "before" is `path_gradients(copies=True)`, what
every model took until commit 8f91b1f: each (target t, step α_k) a copy of the sentence
cut after t, T·K copies forward and backward in batches; "after" is
`path_gradients(copies=False)`, one forward pass per step and every target's gradient
from it, the library's default for every model but those with an LSTM (Luong's, which
keep the copies: `--models luong` shows why). Integrated gradients include the two
endpoint passes of the completeness error, as `integrated_gradients` does.

Before and after alternate within each repeat (their order swapped every repeat), so a
slow moment of a shared machine hits both; per model and method, the median, lowest and
highest wall-clock and process CPU seconds, the ratio of the medians, and the largest
difference between the two attribution matrices (against the largest entry). The first
call of each is a warm-up, untimed, whose growth of the process's peak resident memory
is reported (after first, so the growth is its own). One JSON line per run is appended
to `benchmarks/results/explain_cost.jsonl`.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from machine import append_result
from torch import Tensor

from attnmt.config import load_config
from attnmt.devices import NOTABLE_FLAGS, cpu_flags, cpu_model, pick_device
from attnmt.explain.gradients import endpoint_log_probs, path_gradients
from attnmt.models import build_model

ROOT = Path(__file__).resolve().parents[1]
MODELS = {  # name -> config, vocabulary size (the config's data.vocab_size)
    "rnnsearch": (ROOT / "configs" / "quickstart.yaml", 4000),
    "transformer": (ROOT / "configs" / "transformer.yaml", 8000),
    "luong": (ROOT / "configs" / "luong-global-general.yaml", 4000),
}
SOURCE, TARGET = 47, 37  # subwords of the 32-word sentence (without EOS)
SMOKE = ["model.embed_size=8", "model.hidden_size=16", "model.ff_size=32", "model.heads=2"]
RESULTS = Path(__file__).parent / "results" / "explain_cost.jsonl"


def integrated_gradients_by(copies: bool, model, src_ids, tgt_ids, steps: int) -> Tensor:
    """As `integrated_gradients`: the path (by copies or not), then the two endpoints."""
    alphas = [(k + 0.5) / steps for k in range(steps)]
    matrix = path_gradients(model, src_ids, tgt_ids, alphas, copies=copies).matrix
    endpoint_log_probs(model, src_ids, tgt_ids)  # what the completeness error needs
    return matrix


# --- the measurement ------------------------------------------------------------------------


def build(name: str, smoke: bool) -> tuple[torch.nn.Module, list[int], list[int]]:
    """The model with seeded random weights, and the sentence's random source and target."""
    config, vocab = MODELS[name]
    cfg = load_config(config, SMOKE if smoke else [])
    torch.manual_seed(0)
    vocab = 50 if smoke else vocab
    model = build_model(cfg.model, vocab, vocab).eval()
    gen = torch.Generator().manual_seed(1)
    source, target = (6, 5) if smoke else (SOURCE, TARGET)
    src = torch.randint(4, vocab, (source,), generator=gen).tolist()
    tgt = torch.randint(4, vocab, (target,), generator=gen).tolist()
    return model, src, tgt


def _timed(run: Callable[[], Tensor]) -> tuple[float, float, Tensor]:
    wall, cpu = time.perf_counter(), time.process_time()
    matrix = run()
    return time.perf_counter() - wall, time.process_time() - cpu, matrix


def _peak_growth_mb(run: Callable[[], object]) -> float:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024  # kB -> MB


def _summary(seconds: list[float]) -> dict:
    return {
        "median": round(statistics.median(seconds), 3),
        "min": round(min(seconds), 3),
        "max": round(max(seconds), 3),
    }


def measure_model(name: str, steps: int, repeats: int, smoke: bool) -> list[dict]:
    model, src, tgt = build(name, smoke)
    runs = {
        "integrated-gradients": {
            "before": lambda: integrated_gradients_by(True, model, src, tgt, steps),
            "after": lambda: integrated_gradients_by(False, model, src, tgt, steps),
        },
        "grad-input": {
            "before": lambda: path_gradients(model, src, tgt, [1.0], copies=True).matrix,
            "after": lambda: path_gradients(model, src, tgt, [1.0], copies=False).matrix,
        },
    }
    rows = []
    for method, sides in runs.items():
        memory = {side: _peak_growth_mb(sides[side]) for side in ("after", "before")}
        wall: dict[str, list[float]] = {"before": [], "after": []}
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        matrices = {}
        for repeat in range(repeats):
            order = ("before", "after") if repeat % 2 == 0 else ("after", "before")
            for side in order:
                took, used, matrices[side] = _timed(sides[side])
                wall[side].append(took)
                cpu[side].append(used)
        scale = float(matrices["before"].abs().max())
        rows.append(
            {
                "model": name,
                "method": method,
                "steps": steps if method == "integrated-gradients" else 1,
                "source_subwords": len(src),
                "target_subwords": len(tgt),
                "wall_s": {side: _summary(wall[side]) for side in wall},
                "cpu_s": {side: _summary(cpu[side]) for side in cpu},
                "speedup_wall": round(
                    statistics.median(wall["before"]) / statistics.median(wall["after"]), 2
                ),
                "speedup_cpu": round(
                    statistics.median(cpu["before"]) / statistics.median(cpu["after"]), 2
                ),
                "peak_memory_growth_mb": {side: round(memory[side], 1) for side in memory},
                "max_difference": float((matrices["after"] - matrices["before"]).abs().max()),
                "largest_entry": scale,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def measure(models: list[str], steps: int, repeats: int, threads: int | None, smoke: bool) -> dict:
    pick_device("cpu")  # malloc and denormals as `attnmt evaluate` sets them
    if threads:
        torch.set_num_threads(threads)
    rows = [row for name in models for row in measure_model(name, steps, repeats, smoke)]
    return {
        "date": time.strftime("%Y-%m-%d"),
        "cpu": cpu_model(),
        "flags": sorted(cpu_flags() & NOTABLE_FLAGS),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "repeats": repeats,
        "smoke": smoke,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", nargs="+", choices=list(MODELS), default=["rnnsearch", "transformer"]
    )
    parser.add_argument("--steps", type=int, default=32, help="integrated gradients' steps")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="default: torch's")
    parser.add_argument("--smoke", action="store_true", help="toy sizes, printed only")
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    result = measure(args.models, args.steps, args.repeats, args.threads, args.smoke)
    if not (args.no_save or args.smoke):
        append_result(RESULTS, result)


if __name__ == "__main__":
    main()
