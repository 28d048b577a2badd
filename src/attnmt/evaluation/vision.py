"""What attention over images is scored and drawn with: digit accuracy, whether attention
*localises* (the share of its mass on the digit being emitted), and pictures of where a
model looked (Xu et al. 2015 Fig. 2/3: the weights upsampled onto the image; Mnih et al.
2014: the glimpse path).

The ground truth is known because the digits were placed (`attnmt.data.images`): the
canvases are made again from the run's data config, in the order of the split.

    scores = digit_scores(hypotheses, references)      # exact match, per-digit accuracy
    report = localisation(loaded, examples, canvases)  # mass on the right digit's box
    files = draw_looks(stem, pixels, digits, maps, boxes=boxes)

Shapes legend: T target steps (digits, then EOS), G grid cells, H, W image height, width.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attnmt.data import images
from attnmt.data.buckets import DECODE_BATCH_TOKENS
from attnmt.data.grid import MAX_SYMBOLS, pixel_map
from attnmt.data.preparation import decoding_split
from attnmt.data.vocab import EOS
from attnmt.decoding.records import image_record
from attnmt.decoding.scoring import forced_weights
from attnmt.decoding.translator import Translator
from attnmt.errors import DataError
from attnmt.plotting import load_arrays, save_arrays


def digit_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Sequence exact match, per-digit accuracy and right length, in percent.

    Per-digit accuracy compares position by position and divides by the longer of the two
    sequences, so a missing or an extra digit counts as a wrong one.
    """
    exact = right = total = right_length = 0
    for hyp, ref in zip(hypotheses, references, strict=True):
        h, r = hyp.split(), ref.split()
        exact += h == r
        right_length += len(h) == len(r)
        right += sum(a == b for a, b in zip(h, r, strict=False))
        total += max(len(h), len(r), 1)
    n = max(1, len(references))
    return {
        "exact": round(100 * exact / n, 2),
        "digit_accuracy": round(100 * right / max(1, total), 2),
        "right_length": round(100 * right_length / n, 2),
    }


def split_canvases(data_cfg: Any, split: str) -> list[Any]:
    """The canvases of a split of an image task, made again from the run's data config
    (the dev and test canvases do not depend on the training set's size)."""
    made = images.make_image_task(
        data_cfg.corpus,
        train_size=1,
        dev_size=data_cfg.synthetic_dev_size,
        test_size=data_cfg.synthetic_dev_size,
        seed=data_cfg.seed,
    )
    return made[split]


def image_report(
    loaded: Any,
    examples: Sequence[Any],
    hypotheses: Sequence[str],
    split: str,
    *,
    batch_tokens: int = DECODE_BATCH_TOKENS,
) -> dict[str, Any]:
    """`attnmt evaluate` on an image task: digit scores, and for a model with attention
    how much of it falls on the digit being read (`localisation`)."""
    report: dict[str, Any] = digit_scores(hypotheses, [ex.tgt for ex in examples])
    canvases = split_canvases(loaded.cfg.data, split)[: len(examples)]
    if [" ".join(map(str, c.digits)) for c in canvases] != [ex.tgt for ex in examples]:
        raise DataError(
            f"the prepared {split} split of data.corpus '{loaded.cfg.data.corpus}' differs "
            "from the canvases made again from the run's config (a stale data cache?); "
            "delete its folder under data.cache_dir and run again"
        )
    if loaded.model.uses_attention:
        report["localisation"] = localisation(loaded, examples, canvases, batch_tokens=batch_tokens)
    return report


def box_mass(maps: np.ndarray, boxes: Sequence[tuple[int, int, int, int]]) -> list[float]:
    """The attention mass inside the box of each step's digit (steps past the boxes, the
    EOS, are left out).

    Shapes:
        maps (T, H, W) -> one float per box
    """
    out = []
    for step, (top, left, bottom, right) in enumerate(boxes[: maps.shape[0]]):
        out.append(float(maps[step, top:bottom, left:right].sum()))
    return out


def localisation(
    loaded: Any,
    examples: Sequence[Any],
    canvases: Sequence[Any],
    *,
    batch_tokens: int = DECODE_BATCH_TOKENS,
) -> dict[str, Any]:
    """Does the attention look at the digit it is reading? With the model reading each
    reference (forced decoding), for every digit: the attention mass inside that digit's
    box, and whether the most attended pixel is inside it; beside what uniform attention
    would put there (the box's share of the canvas).

    Returns a dict: mass_on_digit, peak_on_digit, uniform (percent), digits (count).
    """
    vocab = loaded.vocab
    pairs = [(vocab.src.encode(ex.src), vocab.tgt.encode(ex.tgt)) for ex in examples]
    weights = forced_weights(loaded.model, pairs, batch_tokens=batch_tokens)
    masses, peaks, uniform = [], [], []
    for w, canvas in zip(weights, canvases, strict=True):
        height, width = canvas.pixels.shape
        maps = pixel_map(w.numpy()[: len(canvas.boxes)], height, width)  # (T, H, W)
        masses += box_mass(maps, canvas.boxes)
        for step, (top, left, bottom, right) in enumerate(canvas.boxes[: maps.shape[0]]):
            row, col = np.unravel_index(int(maps[step].argmax()), (height, width))
            peaks.append(top <= row < bottom and left <= col < right)
            uniform.append((bottom - top) * (right - left) / (height * width))
    n = max(1, len(masses))
    return {
        "mass_on_digit": round(100 * sum(masses) / n, 2),
        "peak_on_digit": round(100 * sum(peaks) / n, 2),
        "uniform": round(100 * sum(uniform) / n, 2),
        "digits": len(masses),
    }


def draw_looks(
    stem: Path, *drawn: Any, formats: Sequence[str] = ("png",), **options: Any
) -> list[Path]:
    """`looks_figure(*drawn, **options)`, saved as `stem.<format>` for each of `formats`."""
    fig = looks_figure(*drawn, **options)
    written = []
    for fmt in formats:
        target = Path(f"{stem}.{fmt}")
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=110)
        written.append(target)
    return written


def looks_figure(
    pixels: np.ndarray,
    outputs: Sequence[str],
    maps: np.ndarray,
    *,
    boxes: Sequence[tuple[int, int, int, int]] = (),
    path: np.ndarray | None = None,
    title: str = "",
) -> Figure:
    """One panel per emitted symbol: the image in grey, the attention of that step over it
    in colour, the digit's true box (when known) as a white frame; a glimpse path (pixel
    (row, col) per glimpse) as numbered points joined by a line.

    Shapes:
        pixels (H, W) grey levels; maps (T, H, W); path (N, 2) or None
    """
    steps = max(1, min(len(outputs), maps.shape[0]))
    height, width = pixels.shape
    panel = 2.2 * width / max(height, width)
    fig = Figure(figsize=(panel * steps + 0.4, 2.4 * height / max(height, width) + 0.7))
    axes = fig.subplots(1, steps, squeeze=False)[0]
    for step, ax in enumerate(axes):
        ax.imshow(pixels, cmap="gray", vmin=0, vmax=16, interpolation="nearest")
        peak = float(maps[step].max()) or 1.0
        ax.imshow(maps[step] / peak, cmap="inferno", alpha=0.55, vmin=0, vmax=1)
        if step < len(boxes):
            top, left, bottom, right = boxes[step]
            frame = Rectangle((left - 0.5, top - 0.5), right - left, bottom - top)
            frame.set(fill=False, edgecolor="white", linewidth=1.0, linestyle="--")
            ax.add_patch(frame)
        if path is not None:
            ax.plot(path[:, 1], path[:, 0], "-o", color="cyan", markersize=3, linewidth=1)
            for n, (r, c) in enumerate(path):
                ax.annotate(str(n + 1), (c, r), color="cyan", fontsize=6)
        word = outputs[step] if step < len(outputs) else "</s>"
        ax.set_title(f"'{word}'", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def canvas_looks(loaded: Any, index: int, split: str = "test") -> Figure:
    """Where an image run looks while it reads canvas `index` of its `split`, decoded
    greedily: `looks_figure` of each output step's attention spread over the pixels (a
    glimpse model's path drawn on it), titled with what it read and the truth."""
    canvases = split_canvases(loaded.cfg.data, split)
    if not 0 <= index < len(canvases):
        raise DataError(f"the {split} split has {len(canvases)} canvases; index {index} is not one")
    canvas = canvases[index]
    example = decoding_split(loaded.cfg.data, split, loaded.vocab)[index]
    (sentence,) = Translator(loaded, beam=1, need_weights=True).translate([example.src])
    height, width = canvas.pixels.shape
    path = None
    if hasattr(loaded.model, "glimpse_path"):
        path = glimpse_path(loaded.model, loaded.vocab.src.encode(example.src))
    read = image_record(
        sentence,
        loaded.vocab,
        image=index + 1,
        height=height,
        width=width,
        longest=MAX_SYMBOLS,
        glimpses=path,
    )  # fmt: skip  (the server's answer, `attnmt.serve.images`)
    maps = np.asarray(read["attention"])  # (steps, H, W)
    outputs = [*read["text"].split(), "</s>"]
    title = f"{loaded.run_dir.name}: read '{read['text']}', true '{example.tgt}'"
    return looks_figure(canvas.pixels, outputs, maps, boxes=canvas.boxes, path=path, title=title)


@torch.no_grad()
def glimpse_path(model: Any, src_ids: Sequence[int]) -> np.ndarray:
    """Where the glimpse model looks in one image, in eval mode: (row, col) pixel
    coordinates of each glimpse's centre.

    Shapes:
        -> (N, 2)
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        src = torch.tensor([[*src_ids, EOS]], device=device)  # (1, S)
        memory = model.encode(src, torch.ones_like(src, dtype=torch.bool))
        return model.glimpse_path(memory)[0].float().cpu().numpy()  # (N, 2)
    finally:
        model.train(was_training)


def write_looks(
    stem: Path,
    weights: Any,
    source: str,
    tgt_labels: Sequence[str],
    *,
    boxes: Sequence[Sequence[int]] = (),
    path: np.ndarray | None = None,
    formats: Sequence[str] = ("png", "svg"),
    **meta: Any,
) -> list[Path]:
    """Save `stem.npz` (the attention per pixel, the pixels as source labels, the boxes and
    glimpse path in its metadata) and draw it with `draw_looks`; returns the files.

    Shapes:
        weights (T, G) or (T, H·W), T counting the EOS step
    """
    pixels = images.text_pixels(source)  # (H, W) grey levels
    height, width = pixels.shape
    maps = pixel_map(np.asarray(weights, dtype=np.float32), height, width)  # (T, H, W)
    extra = {"image": [height, width], "boxes": [list(map(int, b)) for b in boxes]}
    if path is not None:
        extra["glimpses"] = np.asarray(path, dtype=float).round(2).tolist()
    saved = save_arrays(
        Path(f"{stem}.npz"),
        maps.reshape(maps.shape[0], height * width),
        list(source.replace(" ", "")),
        list(tgt_labels),
        **extra,
        **meta,
    )
    return [saved, *redraw_looks(load_arrays(saved), stem, formats=formats)]


def redraw_looks(data: Any, stem: Path, *, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Draw plot data saved by `write_looks` (its metadata has "image": [H, W])."""
    height, width = data.meta["image"]
    pixels = np.array([images.LEVEL_CHARS.index(c) for c in data.src_tokens], dtype=np.uint8)
    maps = np.asarray(data.weights).reshape(-1, height, width)  # (T, H, W)
    path = data.meta.get("glimpses")
    title = " ".join(t for t in data.tgt_tokens if t != "</s>")
    return draw_looks(
        stem,
        pixels.reshape(height, width),
        data.tgt_tokens,
        maps,
        boxes=[tuple(b) for b in data.meta.get("boxes", [])],
        path=np.asarray(path) if path else None,
        title=f"{data.meta.get('model', '')}: {title}".strip(": ") + _explained(data.meta),
        formats=formats,
    )


def _explained(meta: dict[str, Any]) -> str:
    """The title's note for an explanation's maps (`attnmt plot --explain`)."""
    return f" ({meta['explain']}, magnitude)" if meta.get("explain") else ""
