"""Image tasks made of real handwritten digits: the UCI digits that ship with scikit-learn
(`sklearn.datasets.load_digits`: 1,797 8x8 scans from 43 writers, grey levels 0..16), no
download. Two tasks, each deterministic in a seed:

    digits     a 24x64 canvas holding 2-5 digits left to right at jittered places and
               sizes, with a few distractor fragments; the "caption" is the digit sequence
               ("3 1 4"): attention must find each digit in turn (Xu et al. 2015's task,
               at small scale)
    cluttered  one digit at a random place on a 40x40 canvas among clutter fragments; the
               label is the digit (Mnih et al. 2014's translated-and-cluttered task)

The scans are split into disjoint pools (train 70%, dev 15%, test 15%, by a seeded
shuffle of the scan indices) and every digit and fragment of a split's canvases comes from
its own pool, so no test scan is ever seen in training. The digits carry no writer ids, so
the split is by scan: writer-disjoint only as far as the shuffled order allows.

An image enters the rest of attnmt as a "sentence" of pixel tokens: one per pixel, row by
row, for its grey level (`CanvasVocab`: level L is id 4 + L); its text form is the rows as
strings of level characters "0".."9", "a".."g", joined by spaces (`canvas_text`).

    canvases = make_image_task("digits", train_size=10000)  # {"train", "dev", "test"}
    examples = to_examples("digits", canvases["test"], "test")
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from attnmt.data.synthetic import SPECIALS, SymbolVocab
from attnmt.data.types import Example
from attnmt.data.vocab import BOS, EOS, PAD
from attnmt.errors import DataError

LEVEL_CHARS = "0123456789abcdefg"  # grey level L (0..16) is written LEVEL_CHARS[L]
TASKS = ("digits", "cluttered")
CANVAS = {"digits": (24, 64), "cluttered": (40, 40)}  # (height, width)
CANVAS_FILE = "canvas.json"
POOLS = (0.70, 0.15)  # train and dev shares of the scans; the test pool takes the rest


@dataclass
class Canvas:
    """One generated image and its ground truth.

    Fields:
        pixels: grey levels 0..16, (H, W) uint8.
        digits: the labels left to right.
        boxes: per digit (top, left, bottom, right) in pixels, bottom and right exclusive.
        scans: the indices (in `load_digits`) of the scans pasted as digits.
    """

    pixels: np.ndarray
    digits: list[int]
    boxes: list[tuple[int, int, int, int]]
    scans: list[int] = field(default_factory=list)


@lru_cache(maxsize=1)
def _scans() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 UCI digit scans (N, 8, 8) float in 0..16 and their labels (N,)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:  # pragma: no cover - a dependency of attnmt
        raise DataError(
            "the image tasks need scikit-learn's digits; pip install scikit-learn"
        ) from None
    data = load_digits()
    return data.images.astype(np.float32), data.target.astype(np.int64)


def scan_pools(seed: int) -> dict[str, list[int]]:
    """The disjoint scan indices each split draws its digits and fragments from."""
    count = len(_scans()[1])
    order = list(range(count))
    random.Random(f"attnmt-images-pools:{seed}").shuffle(order)
    train_end = round(POOLS[0] * count)
    dev_end = train_end + round(POOLS[1] * count)
    return {"train": order[:train_end], "dev": order[train_end:dev_end], "test": order[dev_end:]}


def _resized(scan: np.ndarray, side: int) -> np.ndarray:
    """An 8x8 scan resampled bilinearly to side x side, as integer levels 0..16."""
    source = np.linspace(0, scan.shape[0] - 1, side)
    low = np.floor(source).astype(int)
    high = np.minimum(low + 1, scan.shape[0] - 1)
    frac = source - low
    rows = scan[low] * (1 - frac)[:, None] + scan[high] * frac[:, None]  # (side, 8)
    out = rows[:, low] * (1 - frac)[None, :] + rows[:, high] * frac[None, :]  # (side, side)
    return np.clip(np.rint(out), 0, 16).astype(np.uint8)


def _paste(canvas: np.ndarray, patch: np.ndarray, top: int, left: int) -> None:
    region = canvas[top : top + patch.shape[0], left : left + patch.shape[1]]
    np.maximum(region, patch, out=region)  # overlaps keep the brighter ink


def _fragment(rng: np.random.Generator, pool: list[int], size: int) -> np.ndarray:
    """A size x size crop with some ink of a random scan of the pool."""
    images = _scans()[0]
    for _ in range(20):
        scan = images[pool[rng.integers(len(pool))]]
        top, left = rng.integers(0, 9 - size, size=2)
        crop = scan[top : top + size, left : left + size]
        if crop.sum() >= 2 * 16:
            break
    return np.clip(np.rint(crop), 0, 16).astype(np.uint8)


def _overlaps(box: tuple[int, int, int, int], others: list[tuple[int, int, int, int]]) -> bool:
    top, left, bottom, right = box
    return any(top < b and t < bottom and left < r and l < right for t, l, b, r in others)


def _digit_string(rng: np.random.Generator, pool: list[int]) -> Canvas:
    height, width = CANVAS["digits"]
    images, labels = _scans()
    count = int(rng.integers(2, 6))
    sides = [int(rng.integers(8, 13)) for _ in range(count)]
    slack = width - sum(sides)  # shared out as gaps before, between and after the digits
    cuts = np.sort(rng.integers(0, slack + 1, size=count))
    gaps = np.diff(np.concatenate([[0], cuts]))  # the space before each digit
    canvas = np.zeros((height, width), dtype=np.uint8)
    digits, boxes, scans = [], [], []
    left = 0
    for side, gap in zip(sides, gaps, strict=True):
        left += int(gap)
        top = int(rng.integers(0, height - side + 1))
        scan = pool[rng.integers(len(pool))]
        _paste(canvas, _resized(images[scan], side), top, left)
        digits.append(int(labels[scan]))
        boxes.append((top, left, top + side, left + side))
        scans.append(scan)
        left += side
    for _ in range(int(rng.integers(1, 4))):  # distractor fragments, clear of the digits
        size = int(rng.integers(3, 5))
        for _ in range(10):
            top = int(rng.integers(0, height - size + 1))
            spot = int(rng.integers(0, width - size + 1))
            if not _overlaps((top, spot, top + size, spot + size), boxes):
                _paste(canvas, _fragment(rng, pool, size), top, spot)
                break
    return Canvas(canvas, digits, boxes, scans)


def _cluttered(rng: np.random.Generator, pool: list[int]) -> Canvas:
    height, width = CANVAS["cluttered"]
    images, labels = _scans()
    canvas = np.zeros((height, width), dtype=np.uint8)
    for _ in range(int(rng.integers(4, 9))):  # clutter anywhere (Mnih et al. 2014 §4.1)
        top, left = (int(v) for v in rng.integers(0, height - 4 + 1, size=2))
        _paste(canvas, _fragment(rng, pool, 4), top, left)
    side = int(rng.integers(10, 15))
    top = int(rng.integers(0, height - side + 1))
    left = int(rng.integers(0, width - side + 1))
    scan = pool[rng.integers(len(pool))]
    _paste(canvas, _resized(images[scan], side), top, left)
    return Canvas(canvas, [int(labels[scan])], [(top, left, top + side, left + side)], [scan])


MAKERS = {"digits": _digit_string, "cluttered": _cluttered}


def make_image_task(
    name: str, *, train_size: int, dev_size: int = 500, test_size: int = 500, seed: int = 1
) -> dict[str, list[Canvas]]:
    """The "train", "dev" and "test" canvases of the image task `name`.

    Deterministic in `seed`. Train, dev and test each draw from their own random stream
    and their own scan pool (`scan_pools`), so changing `train_size` leaves dev and test
    as they were. Raises ValueError for an unknown task (listing the valid ones) or a size
    below 1.
    """
    if name not in TASKS:
        raise ValueError(f"unknown image task {name!r}; valid: {', '.join(TASKS)}")
    sizes = {"train": train_size, "dev": dev_size, "test": test_size}
    for split, value in sizes.items():
        if value < 1:
            raise ValueError(f"{split}_size must be at least 1, got {value}")
    pools = scan_pools(seed)
    out = {}
    for split, size in sizes.items():
        rng = np.random.default_rng(
            [seed, TASKS.index(name), ("train", "dev", "test").index(split)]
        )
        out[split] = [MAKERS[name](rng, pools[split]) for _ in range(size)]
    return out


def canvas_text(pixels: np.ndarray) -> str:
    """The rows of an image as strings of level characters, joined by spaces."""
    return " ".join("".join(LEVEL_CHARS[int(v)] for v in row) for row in pixels)


def text_pixels(text: str) -> np.ndarray:
    """The image written by `canvas_text`: (H, W) uint8; DataError if malformed."""
    rows = text.split()
    if not rows or len({len(r) for r in rows}) != 1:
        raise DataError(
            "an image text must be rows of equal length separated by spaces; got "
            f"{len(rows)} row(s) of lengths {sorted({len(r) for r in rows})[:5]}"
        )
    bad = set("".join(rows)) - set(LEVEL_CHARS)
    if bad:
        raise DataError(
            f"an image text holds the grey levels {LEVEL_CHARS!r} only; found {sorted(bad)[:5]}"
        )
    return np.array([[LEVEL_CHARS.index(c) for c in row] for row in rows], dtype=np.uint8)


def digit_vocab() -> SymbolVocab:
    """The target side of the image tasks: the digits 0..9."""
    return SymbolVocab([str(d) for d in range(10)])


class CanvasVocab:
    """The source side of the image tasks: one id per pixel, 4 + its grey level, for an
    H x W canvas (ids 0..3 are PAD UNK BOS EOS, so `size` is 21)."""

    def __init__(self, height: int, width: int):
        if height < 1 or width < 1:
            raise ValueError(f"a canvas needs a positive size, got {height}x{width}")
        self.height, self.width = int(height), int(width)
        self.itos = [*SPECIALS, *LEVEL_CHARS]
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    @property
    def size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        """One id per pixel, row by row. DataError for text of another shape."""
        pixels = text_pixels(text)
        if pixels.shape != (self.height, self.width):
            raise DataError(
                f"this model reads {self.height}x{self.width} images; the text holds "
                f"{pixels.shape[0]}x{pixels.shape[1]}"
            )
        return (pixels.reshape(-1).astype(np.int64) + len(SPECIALS)).tolist()

    def decode(self, ids) -> str:
        """The text of pixel ids (stops at EOS, skips PAD and BOS), `width` per row."""
        chars = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i in (PAD, BOS):
                continue
            chars.append(self.itos[i] if len(SPECIALS) <= i < self.size else "0")
        return " ".join(
            "".join(chars[r : r + self.width]) for r in range(0, len(chars), self.width)
        )

    def pieces(self, text: str) -> list[str]:
        return list("".join(text.split()))

    def id_pieces(self, ids) -> list[str]:
        return [self.itos[int(i)] for i in ids]

    def word_of(self, text: str) -> list[int]:
        return list(range(len(self.pieces(text))))

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / CANVAS_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"height": self.height, "width": self.width}))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, directory: str | Path) -> CanvasVocab:
        path = Path(directory) / CANVAS_FILE
        try:
            meta: Any = json.loads(path.read_text(encoding="utf-8"))
            return cls(int(meta["height"]), int(meta["width"]))
        except (OSError, KeyError, TypeError, ValueError) as err:
            raise DataError(
                f"cannot read the image vocabulary '{path}' ({type(err).__name__}: {err}); "
                "it must be a file written by CanvasVocab.save"
            ) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CanvasVocab) and (self.height, self.width) == (
            other.height,
            other.width,
        )

    def __hash__(self) -> int:
        return hash((self.height, self.width))

    def __repr__(self) -> str:
        return f"CanvasVocab({self.height}x{self.width})"


def to_examples(name: str, canvases: list[Canvas], split: str) -> list[Example]:
    """Examples of canvases: the image text as source, the digits as target."""
    return [
        Example(
            src=canvas_text(c.pixels), tgt=" ".join(map(str, c.digits)), id=f"{name}.{split}:{i}"
        )
        for i, c in enumerate(canvases)
    ]


def draw_examples(canvases: list[Canvas], path: str | Path, *, title: str | None = None) -> Path:
    """Up to 8 canvases in a grid, each titled with its digits, its digit boxes framed."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    shown = canvases[:8]
    cols = min(4, len(shown)) or 1
    rows = -(-len(shown) // cols) or 1
    height, width = shown[0].pixels.shape if shown else (1, 1)
    scale = 2.4 / max(height, width)
    fig = Figure(figsize=(cols * width * scale + 0.4, rows * (height * scale + 0.5) + 0.4))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    for ax, canvas in zip(axes.flat, shown, strict=False):
        ax.imshow(canvas.pixels, cmap="gray", vmin=0, vmax=16, interpolation="nearest")
        for top, left, bottom, right in canvas.boxes:
            frame = Rectangle((left - 0.5, top - 0.5), right - left, bottom - top)
            frame.set(fill=False, edgecolor="tab:orange", linewidth=0.8)
            ax.add_patch(frame)
        ax.set_title(" ".join(map(str, canvas.digits)), fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
