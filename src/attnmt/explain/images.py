"""Explanations of the image models, over the canvas: does each method put its mass on
the digit being read? The same measure as the attention's today
(`attnmt.evaluation.vision.localisation`): with the model reading the reference, per digit,
the share of the map inside that digit's box, and whether its peak is inside.

Attributions are signed: their maps are the magnitudes, each row scaled to sum to 1, so
attention and attributions are compared on the same footing (occlusion and attention
are over the 4x4 grid cells, the gradients over pixels; `pixel_map` spreads a cell's
value over its pixels).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from attnmt.data.grid import pixel_map
from attnmt.decoding.attention_choice import AttentionChoice
from attnmt.evaluation.vision import box_mass, split_canvases
from attnmt.explain.methods import explain
from attnmt.explain.names import IG_STEPS, SIGNED


def canvas_maps(matrix: np.ndarray, height: int, width: int) -> np.ndarray:
    """A method's (T, G) or (T, H·W) matrix as (T, H, W) maps of magnitude, rows summing
    to 1 (a row of zeros stays zero)."""
    maps = np.abs(pixel_map(np.asarray(matrix, dtype=np.float64), height, width))
    totals = maps.reshape(maps.shape[0], -1).sum(axis=1)[:, None, None]
    return maps / np.where(totals > 0, totals, 1.0)


def image_explanations(
    loaded: Any,
    examples: Sequence[Any],
    methods: Sequence[str],
    choice: AttentionChoice,
    split: str,
    *,
    sentences: int = 100,
    ig_steps: int = IG_STEPS,
) -> dict[str, Any]:
    """Mass on the digit's box, peak on the digit and cost per method, on the first
    `sentences` canvases of `split`."""
    canvases = split_canvases(loaded.cfg.data, split)[:sentences]
    examples = examples[: len(canvases)]
    vocab, height = loaded.vocab, int(loaded.cfg.model.image_height)
    pairs = [(vocab.src.encode(ex.src), vocab.tgt.encode(ex.tgt)) for ex in examples]
    report: dict[str, Any] = {"sentences": len(pairs), "methods": {}, "images": True}
    for method in methods:
        explained = explain(
            loaded.model, pairs, method, choice, ig_steps=ig_steps, image_height=height
        )
        masses: list[float] = []
        peaks: list[bool] = []
        for e, canvas in zip(explained, canvases, strict=True):
            h, w = canvas.pixels.shape
            maps = canvas_maps(e.matrix.numpy()[: len(canvas.boxes)], h, w)
            masses += box_mass(maps, canvas.boxes)
            for step, (top, left, bottom, right) in enumerate(canvas.boxes[: maps.shape[0]]):
                row, col = np.unravel_index(int(maps[step].argmax()), (h, w))
                peaks.append(top <= row < bottom and left <= col < right)
        n = max(1, len(masses))
        report["methods"][method] = {
            "mass_on_digit": round(100 * sum(masses) / n, 2),
            "peak_on_digit": round(100 * sum(peaks) / n, 2),
            "digits": len(masses),
            "ms_per_sentence": round(1000 * float(np.mean([e.seconds for e in explained])), 1),
            "forward_per_sentence": round(float(np.mean([e.forward for e in explained])), 1),
            "backward_per_sentence": round(float(np.mean([e.backward for e in explained])), 1),
            "signed": method in SIGNED,
        }
    return report


def image_markdown(report: dict[str, Any]) -> list[str]:
    """The evaluation report's "Explanations" section of an image run."""
    lines = [
        "## Explanations",
        "",
        f"{report['sentences']} canvases read with their references; maps of magnitude, "
        "each step's summing to 1 (docs/explain.md).",
        "",
        "| method | mass on the digit's box (%) | peak on the digit (%) | ms/canvas "
        "| passes fwd/bwd |",
        "|---|---:|---:|---:|---:|",
    ]
    for method, row in report["methods"].items():
        lines.append(
            f"| {method} | {row['mass_on_digit']:.1f} | {row['peak_on_digit']:.1f} | "
            f"{row['ms_per_sentence']:.1f} | {row['forward_per_sentence']:.0f}/"
            f"{row['backward_per_sentence']:.0f} |"
        )
    return [*lines, ""]
