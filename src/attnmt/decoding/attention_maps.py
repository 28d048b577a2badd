"""From the weights a decoder returns to what a user sees: the plot files.

Shared by `attnmt translate`, `evaluate` and `plot` (which matrix counts is in
`attnmt.decoding.attention_choice`, the attention while reading a reference in
`attnmt.decoding.scoring`, words and links in `attnmt.alignment.links`):

    choice = choose_attention(cfg.model, layer=None, head=None)  # which matrix counts
    matrix = select(hypothesis.weights, choice)                   # (T, S)
    weights = forced_weights(model, [(src_ids, tgt_ids)])         # reading a reference
    write_attention(stem, weights, src_labels, tgt_labels, choice)  # .npz + .png/.svg
    draw_saved(load_arrays(stem.npz), stem)                         # redraw, no model

Layers and heads are numbered from 1 everywhere a user sees them (flags, tables, plot
titles), as `attnmt.plotting.heatmap_grid` labels them. The Transformer's default matrix is
the mean over the heads of the second-to-last decoder layer (the last one when there is
only one): the layer before the output is where alignment is usually clearest (Garg et
al. 2019, "Jointly Learning to Align and Translate with Transformer Models", §5).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnmt.arrays import to_numpy
from attnmt.decoding.attention_choice import AttentionChoice, select, transformer_choice
from attnmt.errors import UserError
from attnmt.plotting import heatmap, heatmap_grid, load_arrays, save_arrays

if TYPE_CHECKING:
    from torch import Tensor

# --- files: plot data and pictures --------------------------------------------------------


def write_attention(
    stem: Path,
    weights: Tensor | np.ndarray,
    src_labels: Sequence[str],
    tgt_labels: Sequence[str],
    choice: AttentionChoice,
    *,
    formats: Sequence[str] = ("png", "svg"),
    **meta: Any,
) -> list[Path]:
    """Save `stem.npz` (weights, labels, metadata) and draw it; returns every file written.

    Shapes:
        weights: (T, S) RNN, (T, L, H, S) Transformer or (T, M, S) ensemble; stored as
        (T, S) or (L, H, T, S) (an ensemble's: the mean of its members, (T, S))
    """
    array = to_numpy(weights).astype(np.float32)
    if choice.members:  # an ensemble: the mean of its members' matrices is drawn
        array = select(array, choice)
    if array.ndim == 4:
        array = array.transpose(1, 2, 0, 3)  # (T, L, H, S) -> (L, H, T, S)
    meta = {**choice.as_dict(), **meta}
    path = save_arrays(Path(f"{stem}.npz"), array, list(src_labels), list(tgt_labels), **meta)
    return [path, *draw_saved(load_arrays(path), stem, formats=formats)]


def draw_saved(
    data: Any,
    stem: Path,
    *,
    layer: int | None = None,
    head: int | None = None,
    formats: Sequence[str] = ("png", "svg"),
) -> list[Path]:
    """Draw saved plot data (`attnmt.plotting.PlotData`): a (T, S) matrix as one heatmap; a
    Transformer's (L, H, T, S) as the grid of every layer and head (`stem-layers`) plus the
    alignment view (`stem`: the chosen layer and head, by default those saved in `meta`)."""
    weights = np.asarray(data.weights)
    if weights.ndim == 2:
        if layer is not None or head is not None:
            raise UserError(
                "--align-layer and --align-head choose among a Transformer's layers and "
                "heads; this plot data holds one (T, S) matrix, so leave them out"
            )
        scale = data.meta.get("scale", "weights")  # explanations: "row" or "signed"
        title = data.meta.get("explain")
        return heatmap(
            weights,
            data.src_tokens,
            data.tgt_tokens,
            stem,
            formats=formats,
            scale=scale,
            title=f"{title} (each row scaled to its largest magnitude)" if title else None,
        )
    if weights.ndim != 4:
        raise UserError(
            f"the plot data holds weights of shape {weights.shape}; expected (T, S) or "
            "(L, H, T, S) as `attnmt translate --plot` and `attnmt plot` write them"
        )
    layers, heads = weights.shape[:2]
    saved_head = data.meta.get("head")
    choice = transformer_choice(
        layers,
        heads,
        layer=layer if layer is not None else data.meta.get("layer"),
        head=head if head is not None else (saved_head if isinstance(saved_head, int) else None),
    )
    matrix = select(weights.transpose(2, 0, 1, 3), choice)  # (T, L, H, S) -> (T, S)
    title = f"{choice.describe()} (of {layers} layers x {heads} heads)"
    files = heatmap_grid(
        weights, data.src_tokens, data.tgt_tokens, Path(f"{stem}-layers"), formats=formats
    )
    files += heatmap(matrix, data.src_tokens, data.tgt_tokens, stem, title=title, formats=formats)
    return files
