"""How high can any model read the cluttered digits? Two readers that are *told* where the
digit is, so the accuracy they reach bounds what finding it is worth on this data.

    python benchmarks/cluttered_ceiling.py              # ~30 s on one core
    python benchmarks/cluttered_ceiling.py --train 2000 # quicker, a little lower

Both are support-vector machines (scikit-learn's `SVC`, RBF kernel, C=10) over 8x8 grey
levels, scored on the task's test pool (scans never seen in training, as every attnmt
image run):

- `clean`: the UCI scans themselves (8x8, the train pool's 1,258 scans to fit), no canvas,
  no clutter: how well an unseen scan of these hands can be read at all.
- `oracle_crop`: each cluttered canvas's true digit box (where `attnmt.data.images` pasted
  it, 10-14 px a side, with whatever clutter crosses it) resampled to 8x8 (bilinear,
  corners aligned), fitted on the crops of `--train` training canvases: a reader with a
  perfect localiser, which still meets the clutter inside the box.

The glimpses (configs/glimpses.yaml) and the CNN baseline (configs/cluttered-cnn.yaml)
must find the digit first; docs/results.md sets their test accuracy against these.
One JSON line per run is appended to `benchmarks/results/cluttered_ceiling.jsonl`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from machine import append_result
from sklearn.svm import SVC

from attnmt.data import images

RESULTS = Path(__file__).parent / "results" / "cluttered_ceiling.jsonl"


def crops(canvases: list[images.Canvas]) -> tuple[np.ndarray, np.ndarray]:
    """Each canvas's digit box resampled to 8x8: features (N, 64) float, labels (N,)."""
    features = []
    for canvas in canvases:
        top, left, bottom, right = canvas.boxes[0]
        box = torch.tensor(canvas.pixels[top:bottom, left:right], dtype=torch.float32)
        small = F.interpolate(box[None, None], size=(8, 8), mode="bilinear", align_corners=True)
        features.append(small.flatten().numpy())
    return np.stack(features), np.array([c.digits[0] for c in canvases])


def measure(train: int = 8000, test: int = 500, seed: int = 1) -> dict:
    scans, labels = images._scans()
    pools = images.scan_pools(seed)
    flat = scans.reshape(len(scans), -1)
    clean = SVC(C=10, gamma="scale").fit(flat[pools["train"]], labels[pools["train"]])
    clean_accuracy = float((clean.predict(flat[pools["test"]]) == labels[pools["test"]]).mean())
    made = images.make_image_task(
        "cluttered", train_size=train, dev_size=test, test_size=test, seed=seed
    )
    fit_x, fit_y = crops(made["train"])
    test_x, test_y = crops(made["test"])
    oracle = SVC(C=10, gamma="scale").fit(fit_x, fit_y)
    return {
        "seed": seed,
        "train_canvases": train,
        "test_canvases": test,
        "test_scans": len(pools["test"]),
        "clean": round(clean_accuracy, 4),
        "oracle_crop": round(float((oracle.predict(test_x) == test_y).mean()), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=8000, help="training canvases to fit on")
    parser.add_argument("--seed", type=int, default=1, help="data.seed of the canvases")
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args()
    result = measure(args.train, seed=args.seed)
    print(json.dumps(result, indent=1))
    if not args.no_save:
        append_result(RESULTS, result)


if __name__ == "__main__":
    main()
