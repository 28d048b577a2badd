"""What reading one image costs the glimpses (Mnih et al. 2014's recurrent attention model)
and the CNN baseline, as the canvas grows: Mnih's claim that the RAM's computation "can be
controlled independently of the input image size" while a convolutional network's grows
with the pixels.

    python benchmarks/image_cost.py                    # sides 40, 80, 160
    python benchmarks/image_cost.py --sides 40 60 --batch 32

The shipped `configs/glimpses.yaml` and `configs/cluttered-cnn.yaml` models (random
weights: the cost does not depend on them), in eval mode, decoding greedily as `attnmt
evaluate` does (`attnmt.decoding.search.greedy`), two tokens long: the label and EOS,
what a trained model writes (an untrained one would go on to `max_output_tokens`). The
canvases are real test canvases of the cluttered task (40x40, one UCI digit among
clutter), each pasted at a seeded random place onto a black canvas of the side measured, so
the digit keeps its size and only the space around it grows. Per model and side:
matrix-product and convolution FLOPs per canvas (PyTorch's `FlopCounterMode`, which leaves
element-wise work and the sensor's resampling out) and milliseconds per batch (the mean of
`--repeats` after two warm-ups, the two models alternating within a side). The ratio
columns are the CNN over the glimpses in the same run.
One JSON line per run is appended to `benchmarks/results/image_cost.jsonl`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch
from machine import append_result
from torch.utils.flop_counter import FlopCounterMode

from attnmt.config import load_config
from attnmt.data import images
from attnmt.data.vocab import EOS
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.search import greedy
from attnmt.devices import NOTABLE_FLAGS, cpu_flags, cpu_model, pick_device
from attnmt.models import build_model
from attnmt.models.vision import FIRST_LEVEL_ID

CONFIGS = {"glimpses": "configs/glimpses.yaml", "cnn": "configs/cluttered-cnn.yaml"}
READ = 2  # tokens a reading takes: the label and EOS (what a trained model writes)
RESULTS = Path(__file__).parent / "results" / "image_cost.jsonl"


def canvases(side: int, batch: int, seed: int = 0) -> torch.Tensor:
    """`batch` test canvases of the cluttered task, each pasted at a random place onto a
    black side x side canvas, as the pixel tokens the models read (+ EOS).

    Shapes:
        -> (batch, side·side + 1) long
    """
    made = images.make_image_task("cluttered", train_size=1, dev_size=1, test_size=batch)
    height, width = images.CANVAS["cluttered"]
    if side < max(height, width):
        raise SystemExit(f"--sides must be at least {max(height, width)}, got {side}")
    rng = np.random.default_rng(seed)
    rows = []
    for canvas in made["test"]:
        big = np.zeros((side, side), dtype=np.int64)
        top, left = rng.integers(0, side - height + 1), rng.integers(0, side - width + 1)
        big[top : top + height, left : left + width] = canvas.pixels
        rows.append(np.append(big.reshape(-1) + FIRST_LEVEL_ID, EOS))
    return torch.from_numpy(np.stack(rows))


def build(name: str, side: int) -> torch.nn.Module:
    # The config as shipped, then only the image height changed: the config's own check
    # ties model.image_height to data.corpus's 40x40 canvases.
    model_cfg = dataclasses.replace(load_config(CONFIGS[name]).model, image_height=side)
    vocab = images.CanvasVocab(side, side)
    model = build_model(model_cfg, vocab.size, images.digit_vocab().size)
    return model.eval()


def measure(sides: list[int], batch: int, repeats: int) -> dict:
    pick_device("cpu")  # malloc and denormals as `attnmt evaluate` sets them
    torch.manual_seed(0)
    rows = []
    for side in sides:
        src = canvases(side, batch)
        mask = torch.ones_like(src, dtype=torch.bool)
        models = {name: build(name, side) for name in CONFIGS}
        row: dict = {"side": side}
        for name, model in models.items():
            with FlopCounterMode(display=False) as counter:
                greedy(model, src, mask, SearchOptions(max_len=READ))
            row[f"{name}_mflop_per_canvas"] = round(counter.get_total_flops() / batch / 1e6, 3)
            for _ in range(2):
                greedy(model, src, mask, SearchOptions(max_len=READ))
        times: dict[str, list[float]] = {name: [] for name in models}
        for _ in range(repeats):  # alternating, so a slow moment hits both
            for name, model in models.items():
                started = time.perf_counter()
                greedy(model, src, mask, SearchOptions(max_len=READ))
                times[name].append(time.perf_counter() - started)
        for name in models:
            row[f"{name}_ms_per_batch"] = round(sum(times[name]) / repeats * 1e3, 2)
        row["flop_ratio"] = round(row["cnn_mflop_per_canvas"] / row["glimpses_mflop_per_canvas"], 1)
        row["time_ratio"] = round(row["cnn_ms_per_batch"] / row["glimpses_ms_per_batch"], 2)
        rows.append(row)
    return {
        "batch": batch,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": cpu_model(),
        "flags": sorted(cpu_flags() & NOTABLE_FLAGS),
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", type=int, nargs="+", default=[40, 80, 160])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    result = measure(args.sides, args.batch, args.repeats)
    print(json.dumps(result, indent=1))
    if not args.no_save:
        append_result(RESULTS, result)


if __name__ == "__main__":
    main()
