"""Image tasks made of real handwritten digits: the UCI digits that ship with scikit-learn
(`sklearn.datasets.load_digits`: 1,797 8x8 scans, grey levels 0..16 — the test part of the
UCI "optdigits" set, written by 13 people), no download. Two tasks, each deterministic in a
seed:

    digits     a 24x64 canvas holding 2-5 digits left to right at jittered places and
               sizes, with a few distractor fragments; the "caption" is the digit sequence
               ("3 1 4"): attention must find each digit in turn (Xu et al. 2015's task,
               at small scale)
    cluttered  one digit at a random place on a 40x40 canvas among clutter fragments; the
               label is the digit (Mnih et al. 2014's translated-and-cluttered task)

The scans are split into disjoint pools (train 70%, dev 15%, test 15%, by a seeded
shuffle of the scan indices: `scan_pools`) and every digit and fragment of a split's
canvases comes from its own pool, so no test scan is ever seen in training. The digits
carry no writer ids, so the split is by scan, not by writer: after the shuffle every pool
holds the hands of all 13 writers, and a test digit is an unseen scan of a familiar hand.

An image enters the rest of attnmt as a "sentence" of pixel tokens: one per pixel, row by
row, for its grey level (`CanvasVocab`: level L is id 4 + L); its text form is the rows as
strings of level characters "0".."9", "a".."g", joined by spaces (`canvas_text`).

    canvases = make_image_task("digits", train_size=10000)  # {"train", "dev", "test"}
    examples = to_examples("digits", canvases["test"], "test")
    draw_examples(canvases["test"], "digits.png")          # a grid, digit boxes framed

10,000 "digits" canvases take about 2.5 s of CPU on one core (after ~1 s to load the scans):
each scan is resampled to each size once (`_sized`); a canvas only draws and pastes.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from attnmt.config.corpora import CANVAS  # (height, width), named with the config's checks
from attnmt.data.synthetic import SPECIALS, SymbolVocab
from attnmt.data.types import Example
from attnmt.data.vocab import BOS, EOS, PAD
from attnmt.errors import DataError

LEVEL_CHARS = "0123456789abcdefg"  # grey level L (0..16) is written LEVEL_CHARS[L]
TASKS = ("digits", "cluttered")
CANVAS_FILE = "canvas.json"
POOLS = (0.70, 0.15)  # train and dev shares of the scans; the test pool takes the rest


@dataclass
class Canvas:
    """One generated image and its ground truth.

    Fields:
        pixels: grey levels 0..16, (H, W) uint8.
        digits: the labels left to right ("digits": 2-5 of them; "cluttered": 1).
        boxes: per digit (top, left, bottom, right) in pixels, bottom and right exclusive:
            exactly where its square was pasted.
        scans: the indices (in `load_digits`) of the scans pasted as digits, one per digit
            (empty for a canvas read back from text).
    """

    pixels: np.ndarray
    digits: list[int]
    boxes: list[tuple[int, int, int, int]]
    scans: list[int] = field(default_factory=list)


@lru_cache(maxsize=1)
def _scans() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 UCI digit scans, loaded once: scans (N, 8, 8) float32 of whole levels
    0..16 and labels (N,) int64."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:  # pragma: no cover - in attnmt's `train` extra
        raise DataError(
            "the image tasks need scikit-learn's digits: pip install 'attnmt[train]'"
        ) from None
    data = load_digits()
    scans, labels = data.images.astype(np.float32), data.target.astype(np.int64)
    scans.setflags(write=False)  # shared by every caller: nobody writes into the cache
    return scans, labels


@lru_cache(maxsize=1)
def _levels() -> np.ndarray:
    """The scans as integer grey levels, (N, 8, 8) uint8 (fragments are cut from these)."""
    levels = np.clip(np.rint(_scans()[0]), 0, 16).astype(np.uint8)
    levels.setflags(write=False)
    return levels


@cache
def _ink(size: int) -> np.ndarray:
    """The ink (sum of levels) of every size x size crop of every scan, by its top left
    corner: (N, 9 - size, 9 - size) int64."""
    windows = np.lib.stride_tricks.sliding_window_view(_levels(), (size, size), axis=(1, 2))
    return windows.sum(axis=(-2, -1), dtype=np.int64)


def scan_pools(seed: int) -> dict[str, list[int]]:
    """The disjoint scan indices each split draws its digits and fragments from:
    {"train": 70% of the 1,797 scans, "dev": 15%, "test": the rest}, by a shuffle seeded
    with `seed` (the same pools for both tasks)."""
    count = len(_scans()[1])
    order = list(range(count))
    random.Random(f"attnmt-images-pools:{seed}").shuffle(order)
    train_end = round(POOLS[0] * count)
    dev_end = train_end + round(POOLS[1] * count)
    return {"train": order[:train_end], "dev": order[train_end:dev_end], "test": order[dev_end:]}


def _resized(scans: np.ndarray, side: int) -> np.ndarray:
    """Scans resampled bilinearly (corners aligned) to side x side, as integer levels.

    Shapes:
        scans (..., 8, 8) float -> (..., side, side) uint8 in 0..16
    """
    n = scans.shape[-1]
    source = np.linspace(0, n - 1, side)
    low = np.floor(source).astype(int)
    high = np.minimum(low + 1, n - 1)
    frac = source - low
    rows = scans[..., low, :] * (1 - frac)[:, None] + scans[..., high, :] * frac[:, None]
    out = rows[..., low] * (1 - frac) + rows[..., high] * frac  # (..., side, side)
    return np.clip(np.rint(out), 0, 16).astype(np.uint8)


@cache
def _sized(side: int) -> np.ndarray:
    """Every scan at side x side, (N, side, side) uint8, made once per side (8..14)."""
    out = _resized(_scans()[0], side)
    out.setflags(write=False)
    return out


def _paste(canvas: np.ndarray, patch: np.ndarray, top: int, left: int) -> None:
    region = canvas[top : top + patch.shape[0], left : left + patch.shape[1]]
    np.maximum(region, patch, out=region)  # overlaps keep the brighter ink


def _fragment(rng: np.random.Generator, pool: list[int], size: int) -> np.ndarray:
    """A size x size crop (uint8 levels) of a random scan of the pool: the first of up to
    20 draws with some ink (levels summing to 32 or more), else the last draw."""
    levels, ink = _levels(), _ink(size)
    for _ in range(20):
        scan = pool[rng.integers(len(pool))]
        top, left = rng.integers(0, 9 - size, size=2)
        if ink[scan, top, left] >= 2 * 16:
            break
    return levels[scan, top : top + size, left : left + size]


def _overlaps(box: tuple[int, int, int, int], others: list[tuple[int, int, int, int]]) -> bool:
    top, left, bottom, right = box
    return any(top < b and t < bottom and left < r and l < right for t, l, b, r in others)


def _digit_string(rng: np.random.Generator, pool: list[int]) -> Canvas:
    """A "digits" canvas: 2-5 scans at sides 8..12, left to right with random gaps (never
    overlapping, never off the canvas) and heights, then 1-3 fragments clear of them."""
    height, width = CANVAS["digits"]
    labels = _scans()[1]
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
        _paste(canvas, _sized(side)[scan], top, left)
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
    """A "cluttered" canvas: 4-8 fragments of 4x4 anywhere, and one scan at side 10..14
    at a uniform place (fragments may cross it; the brighter ink wins)."""
    height, width = CANVAS["cluttered"]
    labels = _scans()[1]
    canvas = np.zeros((height, width), dtype=np.uint8)
    for _ in range(int(rng.integers(4, 9))):  # clutter anywhere (Mnih et al. 2014 §4.1)
        top, left = (int(v) for v in rng.integers(0, height - 4 + 1, size=2))
        _paste(canvas, _fragment(rng, pool, 4), top, left)
    side = int(rng.integers(10, 15))
    top = int(rng.integers(0, height - side + 1))
    left = int(rng.integers(0, width - side + 1))
    scan = pool[rng.integers(len(pool))]
    _paste(canvas, _sized(side)[scan], top, left)
    return Canvas(canvas, [int(labels[scan])], [(top, left, top + side, left + side)], [scan])


MAKERS = {"digits": _digit_string, "cluttered": _cluttered}


def make_image_task(
    name: str, *, train_size: int, dev_size: int = 500, test_size: int = 500, seed: int = 1
) -> dict[str, list[Canvas]]:
    """The "train", "dev" and "test" canvases of the image task `name`.

    Deterministic in `seed`. Train, dev and test each draw from their own random stream
    (`numpy.random.default_rng([seed, task, split])`) and their own scan pool
    (`scan_pools`), so changing `train_size` leaves dev and test as they were. Raises
    ValueError for an unknown task (listing the valid ones), a size that is not an integer
    of at least 1, or a negative seed.
    """
    if name not in TASKS:
        raise ValueError(f"unknown image task {name!r}; valid: {', '.join(TASKS)}")
    sizes = {"train": train_size, "dev": dev_size, "test": test_size}
    for split, value in sizes.items():
        if not _is_int(value) or value < 1:
            raise ValueError(f"{split}_size must be an integer of at least 1, got {value!r}")
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"the seed of an image task must be an integer >= 0, got {seed!r}")
    pools = scan_pools(seed)
    out = {}
    for index, (split, size) in enumerate(sizes.items()):  # train 0, dev 1, test 2
        rng = np.random.default_rng([seed, TASKS.index(name), index])
        out[split] = [MAKERS[name](rng, pools[split]) for _ in range(size)]
    return out


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


_CHAR_CODES = np.frombuffer(LEVEL_CHARS.encode("ascii"), dtype=np.uint8)  # level -> byte
_LEVEL_OF = np.full(256, 255, dtype=np.uint8)  # byte -> level (255: not a level character)
_LEVEL_OF[_CHAR_CODES] = np.arange(len(LEVEL_CHARS), dtype=np.uint8)


def canvas_text(pixels: np.ndarray) -> str:
    """The rows of an image as strings of level characters, joined by single spaces
    ("00a0... 0000... ..."). ValueError unless `pixels` is a non-empty 2-D array of
    integer levels 0..16.

    Shapes:
        pixels (H, W) -> H words of W characters
    """
    pixels = np.asarray(pixels)
    if pixels.ndim != 2 or pixels.size == 0 or pixels.dtype.kind not in "iu":
        raise ValueError(
            f"an image must be a non-empty (H, W) integer array, got {pixels.dtype} "
            f"of shape {pixels.shape}"
        )
    if pixels.min() < 0 or pixels.max() > len(LEVEL_CHARS) - 1:
        raise ValueError(
            f"grey levels must lie in 0..{len(LEVEL_CHARS) - 1}, got {pixels.min()}..{pixels.max()}"
        )
    codes = _CHAR_CODES[pixels]  # (H, W) bytes
    spaced = np.concatenate([codes, np.full((len(codes), 1), ord(" "), np.uint8)], axis=1)
    return spaced.tobytes()[:-1].decode("ascii")


def text_pixels(text: str) -> np.ndarray:
    """The image written by `canvas_text`; DataError (one sentence) for an empty text,
    rows of unequal length or a character that is not a grey level.

    Shapes:
        H words of W characters -> (H, W) uint8 in 0..16
    """
    rows = text.split()
    if not rows:
        raise DataError(
            "an image text is empty; it must be rows of grey levels "
            f"{LEVEL_CHARS!r} separated by spaces"
        )
    lengths = sorted({len(r) for r in rows})
    if len(lengths) != 1:
        raise DataError(
            f"an image text must be rows of equal length separated by spaces; its {len(rows)} "
            f"rows have the lengths {lengths[:5]}{' ...' if len(lengths) > 5 else ''}"
        )
    flat = "".join(rows)
    levels = _LEVEL_OF[np.frombuffer(flat.encode("utf-8"), dtype=np.uint8)]
    if len(levels) != len(flat) or (levels == 255).any():
        bad = sorted(set(flat) - set(LEVEL_CHARS))
        raise DataError(
            f"an image text holds only the grey levels {LEVEL_CHARS!r}; found {bad[:5]}"
        )
    return levels.reshape(len(rows), lengths[0])


def digit_vocab() -> SymbolVocab:
    """The target side of the image tasks: the digits 0..9."""
    return SymbolVocab([str(d) for d in range(10)])


class CanvasVocab:
    """The source side of the image tasks: one id per pixel, 4 + its grey level, for an
    H x W canvas (ids 0..3 are PAD UNK BOS EOS, so `size` is 21). The same interface as
    `SymbolVocab`, with a pixel as its piece and its word.

    Shapes:
        text of H words of W characters <-> H·W ids, row by row (no BOS/EOS)
    """

    def __init__(self, height: int, width: int):
        if not (_is_int(height) and _is_int(width)) or height < 1 or width < 1:
            raise ValueError(f"a canvas needs a positive integer size, got {height}x{width}")
        self.height, self.width = int(height), int(width)
        self.itos = [*SPECIALS, *LEVEL_CHARS]
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    @property
    def size(self) -> int:
        """Number of ids (specials included): 21."""
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        """One id per pixel, row by row (H·W ids). DataError for a malformed text or an
        image of another shape."""
        pixels = text_pixels(text)
        if pixels.shape != (self.height, self.width):
            raise DataError(
                f"this model reads {self.height}x{self.width} images (height x width); the "
                f"text holds a {pixels.shape[0]}x{pixels.shape[1]} image"
            )
        return (pixels.reshape(-1).astype(np.int64) + len(SPECIALS)).tolist()

    def decode(self, ids) -> str:
        """The text of pixel ids, `width` characters a row: stops at the first EOS, skips
        PAD and BOS, and writes UNK or an id out of range as level 0."""
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
        """One piece per pixel: its level character, row by row."""
        return list("".join(text.split()))

    def id_pieces(self, ids) -> list[str]:
        """The level character (or special) of every id, for plot labels."""
        return [self.itos[int(i)] for i in ids]

    def word_of(self, text: str) -> list[int]:
        """Word index of each piece: every pixel is its own word."""
        return list(range(len(self.pieces(text))))

    def save(self, directory: str | Path) -> Path:
        """Write `directory/canvas.json` {"height", "width"} (created if needed, written
        to a temporary file first and moved in place); returns its path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / CANVAS_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"height": self.height, "width": self.width}), "utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, directory: str | Path) -> CanvasVocab:
        """Read `directory/canvas.json` written by `save`; a missing or bad file is a
        DataError."""
        path = Path(directory) / CANVAS_FILE
        try:
            meta: Any = json.loads(path.read_text(encoding="utf-8"))
            return cls(meta["height"], meta["width"])
        except (OSError, KeyError, TypeError, ValueError) as err:
            raise DataError(
                f"cannot read the image vocabulary '{path}' ({type(err).__name__}: {err}); "
                "it must be a file written by CanvasVocab.save"
            ) from None

    def __eq__(self, other: object) -> bool:
        same = isinstance(other, CanvasVocab)
        return same and (self.height, self.width) == (other.height, other.width)

    def __hash__(self) -> int:
        return hash((self.height, self.width))

    def __repr__(self) -> str:
        return f"CanvasVocab({self.height}x{self.width})"


def to_examples(name: str, canvases: list[Canvas], split: str) -> list[Example]:
    """Examples of canvases: the image text as source (`canvas_text`), the digits as
    target ("3 1 4"), ids "NAME.SPLIT:I". `src_ids`/`tgt_ids` are left empty for the
    caller to fill (with `CanvasVocab` and `digit_vocab`)."""
    return [
        Example(
            src=canvas_text(c.pixels), tgt=" ".join(map(str, c.digits)), id=f"{name}.{split}:{i}"
        )
        for i, c in enumerate(canvases)
    ]


def draw_examples(canvases: list[Canvas], path: str | Path, *, title: str | None = None) -> Path:
    """Draw the first 8 canvases in a grid (4 a row, grey levels black to white), each
    titled with its digits and each digit's box framed in orange; save it as a PNG at
    `path` (its folder created if needed) and return `path`. ValueError if there is none.
    """
    from matplotlib.figure import Figure  # Agg, without pyplot's global state
    from matplotlib.patches import Rectangle

    shown = canvases[:8]
    if not shown:
        raise ValueError("draw_examples needs at least one canvas to draw")
    cols = min(4, len(shown))
    rows = -(-len(shown) // cols)
    height, width = shown[0].pixels.shape
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
    fig.savefig(path, dpi=110, format="png")
    return path
