"""Pictures of attention and of BLEU by length, drawn from saved arrays, never a live model.

`heatmap` draws one attention matrix in the style of Bahdanau et al. (2014), Fig. 3: source
words across the top, target words down the left, one grey cell per weight with 0 black
and 1 white (the paper's shading, matplotlib's "gray" map on a fixed 0..1 scale, so
pictures compare across sentences). `heatmap_grid` draws every layer and head of a
Transformer, `length_curves` BLEU against source length for several runs (Fig. 2).
`save_arrays` / `load_arrays` keep what a picture needs in a plain `.npz` file, so a run
directory can redraw it without the model.

Every label stays legible: a cell is `CELL_INCHES` square, so the figure grows with the
sentence, and the font size is fixed at `FONT_SIZE`. Every script reads right: each label
set (source labels, target labels, a legend, a title) gets fonts that cover its
characters and is drawn in reading order, right to left included (`attnmt.scripts`: Noto
fonts first; a script no installed font has gets one warning naming the package to
install). Only the drawing changes: the tokens and the saved plot data keep the order of
the data. SVGs keep their text as text (`svg.fonttype: none`), so they can be searched
(with a matplotlib older than 3.11 that had to shape Arabic or Hebrew labels, as paths).

Figures are `matplotlib.figure.Figure` objects drawn without pyplot: no global backend
switch, no window, nothing left open.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from attnmt.arrays import to_numpy
from attnmt.scripts import BASE_FONT, LabelSet, label_set

if TYPE_CHECKING:
    from torch import Tensor

CELL_INCHES = 0.3  # side of one attention cell: ~0.3 in per token keeps 9 pt labels apart
MIN_INCHES = 2.0  # smallest side of a heatmap, so a two-word sentence is still readable
FONT_SIZE = 9
SCALES = ("weights", "row", "signed")  # how `heatmap` shades a matrix (`_draw_matrix`)


# --- drawing style -------------------------------------------------------------------------


@contextmanager
def _drawing(*label_sets: LabelSet) -> Iterator[None]:
    """Local style and warning filters: base font, text kept as text in SVG."""
    style = {
        "font.family": [BASE_FONT],  # for our own words; label sets bring their fonts
        "font.size": FONT_SIZE,
        # Text written into an SVG is laid out again by its reader, bidi included: labels
        # shaped here for an old matplotlib would be reversed twice, so they become paths.
        "svg.fonttype": "path" if any(s.reshaped for s in label_sets) else "none",
        "svg.hashsalt": "attnmt",  # stable ids: the same data gives the same SVG
    }
    with matplotlib.rc_context(style), warnings.catch_warnings():
        if any(s.missing for s in label_sets):
            # Reported once per script by `attnmt.scripts`, not once per glyph and format.
            warnings.filterwarnings("ignore", r"Glyph \d+ .*missing from", UserWarning)
            warnings.filterwarnings("ignore", "Matplotlib currently does not support", UserWarning)
        yield


# --- shared pieces -------------------------------------------------------------------------


def _check(
    weights: np.ndarray | Tensor,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    ndim: int,
    legend: str,
) -> np.ndarray:
    """Weights as numpy, after checking their rank and that every row and column has a label."""
    array = to_numpy(weights, np.float32)
    if array.ndim != ndim:
        raise ValueError(f"weights must be {legend}, got shape {tuple(array.shape)}")
    expected = (len(tgt_tokens), len(src_tokens))
    if array.shape[-2:] != expected:
        raise ValueError(
            f"weights {legend} end in (T, S) = {tuple(array.shape[-2:])} but there are "
            f"{expected[0]} target and {expected[1]} source tokens; expected one label per "
            "row and column (count the EOS too)"
        )
    if 0 in array.shape:
        raise ValueError(f"weights of shape {tuple(array.shape)} have nothing to draw")
    return array


def _side(tokens: int) -> float:
    return max(MIN_INCHES, CELL_INCHES * tokens)


def _label_inches(tokens: Sequence[str]) -> float:
    """A generous estimate of the longest label's length at `FONT_SIZE` (~0.1 in a char)."""
    return 0.1 * max((len(t) for t in tokens), default=0) + 0.2


# The interactive view's colours (views/heatmap.js): a cell is its colour laid over white
# with opacity sqrt(|w|), blue for weights and negative attributions, red for positive.
VIEW_BLUE, VIEW_RED = (30, 60, 160), (190, 30, 45)


def _over_white(rgb: tuple[int, int, int], alpha: np.ndarray) -> np.ndarray:
    colour = np.asarray(rgb, dtype=np.float64) / 255.0
    return 1.0 - alpha[:, None] * (1.0 - colour[None, :])


def view_colormap(scale: str):
    """The view's white→blue map on 0..1 (`scale` "weights" or "row"), or its
    blue←white→red map on −1..1 ("signed"), as a matplotlib colormap."""
    steps = np.linspace(0.0, 1.0, 256)
    blue = _over_white(VIEW_BLUE, np.sqrt(steps))
    if scale != "signed":
        return ListedColormap(blue, name="attnmt-view")
    red = _over_white(VIEW_RED, np.sqrt(steps))
    return ListedColormap(np.concatenate([blue[::-1], red]), name="attnmt-view-signed")


def _draw_matrix(
    ax: Axes,
    weights: np.ndarray,
    src: LabelSet,
    tgt: LabelSet,
    *,
    src_labels: bool = True,
    tgt_labels: bool = True,
    scale: str = "weights",
    palette: str = "paper",
) -> None:
    """One (T, S) matrix, source labels on top, target labels on the left. `scale`:
    "weights" 0 black, 1 white; "row" each row divided by its largest value (scores that
    are not probabilities); "signed" each row divided by its largest magnitude, positive
    red, negative blue, 0 white (attributions). `palette` "view": the interactive view's
    colours instead (0 white, 1 blue)."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    view = palette == "view"
    if scale == "weights":
        cmap = view_colormap(scale) if view else "gray"
        ax.imshow(weights, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    else:
        top = np.abs(weights).max(axis=1, keepdims=True) if weights.size else weights
        shown = weights / np.where(top > 0, top, 1.0)
        cmap, low = ("gray", 0.0) if scale == "row" else ("RdBu_r", -1.0)
        if view:
            cmap = view_colormap(scale)
        ax.imshow(shown, cmap=cmap, vmin=low, vmax=1.0, aspect="auto", interpolation="nearest")
    ax.xaxis.tick_top()
    text = {"parse_math": False}  # a "$" in a token is a dollar, not mathtext
    ax.set_xticks(range(len(src.shown)), src.shown, rotation=90, **text, **src.style())
    ax.set_yticks(range(len(tgt.shown)), tgt.shown, **text, **tgt.style())
    ax.tick_params(length=0, labeltop=src_labels, labelleft=tgt_labels)


def _save(fig: Figure, path_stem: Path, formats: Sequence[str], dpi: int) -> list[Path]:
    """Write `path_stem.<format>` for each format (parents made); tight box keeps all labels."""
    path_stem = Path(path_stem)
    path_stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = path_stem.with_name(f"{path_stem.name}.{fmt}")
        fig.savefig(path, format=fmt, dpi=dpi, bbox_inches="tight", pad_inches=0.1)
        paths.append(path)
    return paths


# --- plots ---------------------------------------------------------------------------------


def heatmap(
    weights: np.ndarray | Tensor,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    path_stem: Path,
    *,
    title: str | None = None,
    formats: Sequence[str] = ("png", "svg"),
    dpi: int = 100,
    scale: str = "weights",
) -> list[Path]:
    """Draw one attention matrix (Bahdanau et al. 2014, Fig. 3); returns the files written.

    Source tokens label the columns (top, rotated 90°), target tokens the rows (left).
    Cells are shaded on a fixed grey scale, weight 0 black and 1 white, and are
    `CELL_INCHES` square, so a long sentence gives a larger figure. Files are
    `path_stem.png`, `path_stem.svg`, ... one per format.

    Shapes:
        weights: (T, S); src_tokens: S labels; tgt_tokens: T labels
    """
    with _drawing(*_label_sets(src_tokens, tgt_tokens, title)):
        fig = heatmap_figure(weights, src_tokens, tgt_tokens, title=title, scale=scale)
        return _save(fig, path_stem, formats, dpi)


def _label_sets(src_tokens, tgt_tokens, title) -> tuple[LabelSet, LabelSet, LabelSet]:
    return label_set(src_tokens), label_set(tgt_tokens), label_set([title or ""])


def heatmap_figure(
    weights: np.ndarray | Tensor,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    *,
    title: str | None = None,
    scale: str = "weights",
) -> Figure:
    """The figure `heatmap` saves (notebooks show it: `attnmt.views`); `figure_png`
    renders it as `heatmap` does."""
    array = _check(weights, src_tokens, tgt_tokens, 2, "(T, S)")
    src, tgt, head = _label_sets(src_tokens, tgt_tokens, title)
    with _drawing(src, tgt, head):
        fig = Figure(figsize=(_side(len(src_tokens)), _side(len(tgt_tokens))))
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
        _draw_matrix(ax, array, src, tgt, scale=scale)
        if title:
            ax.set_title(head.shown[0], **head.style())
    return fig


@dataclass
class Panel:
    """One map of a view's picture: its (T, S) matrix, labels, title and scale."""

    matrix: np.ndarray
    src: Sequence[str]
    tgt: Sequence[str]
    title: str
    scale: str = "weights"


def panels_figure(panels: Sequence[Panel], *, columns: int = 4) -> Figure:
    """Every panel in a grid, `columns` a row, each drawn as `heatmap` draws a matrix (its
    cells `CELL_INCHES` square, labels on every panel) in the interactive view's colours:
    the picture a notebook keeps where the view's script does not run."""
    if not panels:
        raise ValueError("panels_figure needs at least one panel")
    columns = max(1, min(columns, len(panels)))
    rows = -(-len(panels) // columns)
    sets = [(label_set(list(p.src)), label_set(list(p.tgt)), label_set([p.title])) for p in panels]
    width = max(_side(len(p.src)) + _label_inches(p.tgt) for p in panels) + 0.3
    height = max(_side(len(p.tgt)) + _label_inches(p.src) for p in panels) + 0.5
    with _drawing(*(x for trio in sets for x in trio)):
        fig = Figure(figsize=(width * columns, height * rows), layout="constrained")
        axes = fig.subplots(rows, columns, squeeze=False)
        for ax, panel, (src, tgt, head) in zip(axes.flat, panels, sets, strict=False):
            _draw_matrix(ax, panel.matrix, src, tgt, scale=panel.scale, palette="view")
            ax.set_title(head.shown[0], **head.style())
        for ax in list(axes.flat)[len(panels) :]:
            ax.set_axis_off()
    return fig


def figure_png(fig: Figure, *, dpi: int = 80, labels: Sequence[Sequence[str]] = ()) -> bytes:
    """A figure as PNG bytes, with the tight box `heatmap` saves with."""
    out = io.BytesIO()
    with _drawing(*(label_set(list(x)) for x in labels)):
        fig.savefig(out, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.1)
    return out.getvalue()


def heatmap_grid(
    weights: np.ndarray | Tensor,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    path_stem: Path,
    *,
    title: str | None = None,
    formats: Sequence[str] = ("png", "svg"),
    dpi: int = 100,
) -> list[Path]:
    """Draw every layer (rows) and head (columns) of a Transformer's attention.

    Each panel is drawn as by `heatmap`; source words label the top row only, target words
    the left column only, and each panel is headed "layer l" / "head h" (1-based).
    `Hypothesis.weights` of the Transformer are (T, L, H, S): pass
    `weights.permute(1, 2, 0, 3)`.

    Shapes:
        weights: (L, H, T, S); src_tokens: S labels; tgt_tokens: T labels
    """
    array = _check(weights, src_tokens, tgt_tokens, 4, "(L, H, T, S)")
    layers, heads = array.shape[:2]
    src, tgt, head = label_set(src_tokens), label_set(tgt_tokens), label_set([title or ""])
    with _drawing(src, tgt, head):
        # Panels as `heatmap` draws them, plus room for the outer labels and titles;
        # constrained layout then keeps titles, head titles and labels from overlapping.
        width = _side(len(src_tokens)) * heads + _label_inches(tgt_tokens) + 0.5
        height = _side(len(tgt_tokens)) * layers + _label_inches(src_tokens) + 1.0
        fig = Figure(figsize=(width, height), layout="constrained")
        axes = fig.subplots(layers, heads, squeeze=False)
        for layer in range(layers):
            for column in range(heads):
                ax = axes[layer, column]
                _draw_matrix(
                    ax,
                    array[layer, column],
                    src,
                    tgt,
                    src_labels=layer == 0,
                    tgt_labels=column == 0,
                )
                if layer == 0:
                    ax.set_title(f"head {column + 1}")
                if column == 0:
                    ax.set_ylabel(f"layer {layer + 1}")
        if title:
            fig.suptitle(head.shown[0], **head.style())
        return _save(fig, path_stem, formats, dpi)


def length_curves(
    curves: Mapping[str, Sequence[Mapping[str, Any]]],
    path_stem: Path,
    *,
    metric: str = "bleu",
    title: str | None = None,
    formats: Sequence[str] = ("png", "svg"),
    dpi: int = 100,
) -> list[Path]:
    """BLEU (or `metric`) against source length, one line per run (Bahdanau et al. Fig. 2).

    `curves` maps a run name to its `attnmt.metrics.bleu_by_length` rows. A point sits at
    its bucket's upper bound (`hi`) and the axis is labelled with the bucket labels, so runs
    whose empty buckets were left out still line up.
    """
    with _drawing(label_set(curves), label_set([title or ""])):
        fig = length_curves_figure(curves, metric=metric, title=title)
        return _save(fig, path_stem, formats, dpi)


def length_curves_figure(
    curves: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    metric: str = "bleu",
    title: str | None = None,
) -> Figure:
    """The figure `length_curves` saves (`attnmt.evaluate(...).plot()` shows it)."""
    buckets = {int(row["hi"]): str(row["label"]) for rows in curves.values() for row in rows}
    names, head = label_set(curves), label_set([title or ""])
    with _drawing(names, head):
        fig = Figure(figsize=(max(6.0, 0.6 * len(buckets)), 4.0), layout="constrained")
        ax = fig.add_subplot()
        for shown, rows in zip(names.shown, curves.values(), strict=True):
            ax.plot([r["hi"] for r in rows], [r[metric] for r in rows], marker="o", label=shown)
        edges = sorted(buckets)
        ax.set_xticks(edges, [buckets[e] for e in edges], rotation=45 if len(edges) > 8 else 0)
        ax.set_xlabel("source sentence length (words)")
        ax.set_ylabel({"bleu": "BLEU", "chrf": "chrF"}.get(metric, metric))
        ax.grid(alpha=0.3)
        if curves:
            for text in ax.legend().get_texts():  # run names: any script
                text.set(**names.style())
        if title:
            ax.set_title(head.shown[0], **head.style())
    return fig


# --- plot data -----------------------------------------------------------------------------


@dataclass
class PlotData:
    """What a heatmap needs: weights (..., T, S), their labels and free JSON metadata."""

    weights: np.ndarray
    src_tokens: list[str]
    tgt_tokens: list[str]
    meta: dict[str, Any] = field(default_factory=dict)


def save_arrays(
    path: Path,
    weights: np.ndarray | Tensor,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    **meta: Any,
) -> Path:
    """Save plot data to a `.npz` file (suffix added if missing); returns the path written.

    Weights are stored as float32; tokens as unicode arrays; `meta` as one JSON string, so
    loading needs no pickle and runs no code. Meta must be JSON-serialisable.

    Shapes:
        weights: (T, S) or (L, H, T, S): anything ending in (T, S)
    """
    array = to_numpy(weights, np.float32)
    array = _check(array, src_tokens, tgt_tokens, max(array.ndim, 2), "(..., T, S)")
    try:
        meta_json = json.dumps(meta, ensure_ascii=False, sort_keys=True)
    except TypeError as error:
        raise ValueError(f"plot metadata must be JSON-serialisable: {error}") from None
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_name(path.name + ".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        weights=array,
        src_tokens=np.array(list(src_tokens), dtype=str),
        tgt_tokens=np.array(list(tgt_tokens), dtype=str),
        meta=np.array(meta_json),
    )
    return path


def load_arrays(path: Path) -> PlotData:
    """Read a file written by `save_arrays` (no pickle: `allow_pickle=False`)."""
    with np.load(Path(path), allow_pickle=False) as data:
        return PlotData(
            weights=data["weights"],
            src_tokens=[str(t) for t in data["src_tokens"]],
            tgt_tokens=[str(t) for t in data["tgt_tokens"]],
            meta=json.loads(str(data["meta"])),
        )
