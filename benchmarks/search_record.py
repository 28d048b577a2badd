"""What recording the search costs: beam-search sentences/s with the recording off and on
(`Translator(record_search=...)`, what `--search-json`, the server's "search" and the stream
use), on the same sentences in one process, the two alternating.

    python benchmarks/search_record.py runs/quickstart            # 200 test verses, beam 5
    python benchmarks/search_record.py RUN --lines 100 --beam 10 --rounds 3

The sentences are the first `--lines` of the run's test split (John for the quickstart),
translated in batches as `attnmt translate` does, one thread per core given (`--threads`).
Each round times "off" then "on" (the order swapped every other round); the figure is the
median of the rounds. `--baseline` only times "off" (for a checkout without the recording:
run it with that checkout's src/ on PYTHONPATH to compare the search before and after).
Appends to benchmarks/results/search_record.jsonl with the machine's description.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import append_result, describe

from attnmt.data.preparation import decoding_split
from attnmt.decoding.runs import load_run
from attnmt.decoding.translator import Translator

RESULTS = Path(__file__).resolve().parent / "results" / "search_record.jsonl"


def timed(translator: Translator, lines: list[str], record: bool | None) -> float:
    started = time.perf_counter()
    if record is None:  # a translator that has no recording (the baseline's code)
        translator.translate(lines)
    else:
        translator.translate(lines, record=record)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", nargs="?", default="runs/quickstart")
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--baseline", action="store_true", help="time the search alone")
    parser.add_argument("--label", default="", help="a name for this code (e.g. a commit)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    loaded = load_run(args.run, device="cpu")
    lines = [ex.src for ex in decoding_split(loaded.cfg.data, "test", loaded.vocab)[: args.lines]]
    translator = Translator(loaded, beam=args.beam, need_weights=True)
    modes = {"off": None} if args.baseline else {"off": False, "on": True}
    timed(translator, lines[:10], next(iter(modes.values())))  # warm-up
    seconds: dict[str, list[float]] = {mode: [] for mode in modes}
    for round_ in range(args.rounds):
        order = list(modes) if round_ % 2 == 0 else list(reversed(modes))
        for mode in order:
            seconds[mode].append(timed(translator, lines, modes[mode]))
    record = {
        "machine": describe(),
        "run": str(args.run),
        "label": args.label,
        "lines": len(lines),
        "beam": args.beam,
        "threads": args.threads,
        "seconds": {mode: [round(s, 3) for s in values] for mode, values in seconds.items()},
        "sentences_per_s": {
            mode: round(len(lines) / statistics.median(values), 2)
            for mode, values in seconds.items()
        },
    }
    if "on" in seconds:
        record["on_over_off"] = round(
            statistics.median(seconds["on"]) / statistics.median(seconds["off"]), 3
        )
    append_result(RESULTS, record)
    print(record["sentences_per_s"], record.get("on_over_off", ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
