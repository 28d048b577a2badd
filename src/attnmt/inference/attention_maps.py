"""From the weights a decoder returns to what a user sees: which matrix counts, the
attention while reading a reference, and the plot files.

Shared by `attnmt translate`, `evaluate` and `plot` (words and links are in
`attnmt.inference.alignment`):

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnmt.arrays import to_numpy
from attnmt.data.batching import DECODE_BATCH_TOKENS
from attnmt.data.vocab import EOS
from attnmt.errors import UserError
from attnmt.inference.alignment import shift_rows
from attnmt.inference.scoring import forced_decode
from attnmt.plotting import heatmap, heatmap_grid, load_arrays, save_arrays

# --- which matrix counts -------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionChoice:
    """The attention matrix that counts: one per RNN; a layer and a head (or the mean of
    the layer's heads, `head=None`) for the Transformer. Layers and heads count from 1."""

    transformer: bool = False
    layer: int = 1
    head: int | None = None
    layers: int = 1
    heads: int = 1
    offset: int = 0  # links of target t read off the weights of decoder step t + offset
    members: int = 0  # an ensemble's: weights (T, M, S), one matrix per member; their mean

    def describe(self) -> str:
        shift = f", weights of step t{self.offset:+d}" if self.offset else ""
        if self.members:
            return f"mean of {self.members} ensemble members' attention{shift}"
        if not self.transformer:
            return f"decoder attention{shift}"
        head = "mean of heads" if self.head is None else f"head {self.head}"
        return f"layer {self.layer}, {head}{shift}"

    def as_dict(self) -> dict[str, Any]:
        if self.members:
            return {"layer": None, "head": None, "offset": self.offset, "members": self.members}
        if not self.transformer:
            return {"layer": None, "head": None, "offset": self.offset}
        head = self.head if self.head is not None else "mean"
        return {"layer": self.layer, "head": head, "offset": self.offset}


# The decoder step whose weights align target word t, t + offset, by model family: measured
# on the dev book of the Greek→English gold links (docs/alignment.md, "Which step aligns"),
# where RNNsearch's and the Transformer's attention at step t look at the source of target
# t (k = 0 best by 4 points and more). Luong's is not measured there yet; its query h_t has
# read the same inputs as theirs at step t, so it gets the same default.
ALIGN_OFFSETS = {"rnnsearch": 0, "luong": 0, "transformer": 0}


def choose_attention(
    model_cfg: Any,
    *,
    layer: int | None = None,
    head: int | None = None,
    offset: int | None = None,
) -> AttentionChoice:
    """Check `--align-layer`/`--align-head` (1-based) against the model and fill defaults;
    `offset` (`--align-offset`) defaults to the model family's (`ALIGN_OFFSETS`)."""
    if offset is None:
        offset = ALIGN_OFFSETS.get(model_cfg.name, 0)
    if model_cfg.name != "transformer":
        if layer is not None or head is not None:
            raise UserError(
                f"--align-layer and --align-head choose a Transformer cross-attention; this "
                f"run's model is {model_cfg.name}, which has one attention, so leave them out"
            )
        return AttentionChoice(offset=offset)
    choice = transformer_choice(int(model_cfg.layers), int(model_cfg.heads), layer=layer, head=head)
    return replace(choice, offset=offset)


def run_attention(
    loaded: Any,
    *,
    layer: int | None = None,
    head: int | None = None,
    offset: int | None = None,
) -> AttentionChoice:
    """`choose_attention` for a loaded run, or an ensemble's (`LoadedRun.members`): the
    mean of its members' matrices, each chosen when the ensemble was loaded."""
    members = getattr(loaded, "members", None)
    if not members:
        return choose_attention(loaded.cfg.model, layer=layer, head=head, offset=offset)
    if offset is None:
        offset = ALIGN_OFFSETS.get(loaded.cfg.model.name, 0)
    return AttentionChoice(offset=offset, members=len(members))


def transformer_choice(
    layers: int, heads: int, *, layer: int | None = None, head: int | None = None
) -> AttentionChoice:
    """The Transformer matrix of `layer` and `head` (1-based; checked), defaults filled."""
    if layer is not None and not 1 <= layer <= layers:
        raise UserError(
            f"--align-layer {layer} is out of range: this Transformer has {layers} decoder "
            f"layer(s), numbered 1 to {layers}"
        )
    if head is not None and not 1 <= head <= heads:
        raise UserError(
            f"--align-head {head} is out of range: this Transformer has {heads} head(s) per "
            f"layer, numbered 1 to {heads}"
        )
    default_layer = layers - 1 if layers > 1 else layers
    return AttentionChoice(True, layer or default_layer, head, layers, heads)


def every_choice(default: AttentionChoice) -> list[AttentionChoice]:
    """Every attention map of a model: an RNN's (or an ensemble's) one; a Transformer's
    layers, each as the mean of its heads, then each head."""
    if not default.transformer:
        return [default]
    return [
        transformer_choice(default.layers, default.heads, layer=layer, head=head)
        for layer in range(1, default.layers + 1)
        for head in (None, *range(1, default.heads + 1))
    ]


def select(weights: Tensor | np.ndarray, choice: AttentionChoice) -> np.ndarray:
    """The (T, S) matrix of `choice` from a hypothesis's weights.

    Shapes:
        weights: (T, S) RNN, (T, L, H, S) Transformer or (T, M, S) ensemble  ->  (T, S)
    """
    array = to_numpy(weights)
    if array.ndim == 2:
        return array
    if choice.members:
        return array.mean(axis=1)
    if array.ndim != 4:
        raise ValueError(f"weights must be (T, S) or (T, L, H, S), got {array.shape}")
    layer = array[:, choice.layer - 1]  # (T, H, S)
    return layer.mean(axis=1) if choice.head is None else layer[:, choice.head - 1]


def aligning(weights: Tensor | np.ndarray, choice: AttentionChoice) -> np.ndarray:
    """The (T, S) matrix whose row t aligns target t: `select`, then the choice's step
    offset (`shift_rows`). Plots show `select`'s matrix, the weights as the decoder used them.
    """
    return shift_rows(select(weights, choice), choice.offset)


# --- words of each side ------------------------------------------------------------------


def labels(side: Any, ids: Sequence[int]) -> list[str]:
    """Plot labels: the pieces of `ids` and the final "</s>" (weights have an EOS too)."""
    return [str(p) for p in side.id_pieces([*ids, EOS])]


# --- attention while reading a reference (forced decoding) --------------------------------


@torch.no_grad()
def forced_weights(
    model: torch.nn.Module,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    batch_tokens: int = DECODE_BATCH_TOKENS,
) -> list[Tensor]:
    """The attention a model pays while reading given targets (teacher forcing).

    `pairs` are (source ids, target ids), without BOS/EOS. This is how attention is scored
    against gold alignments: the links must be between the reference's words, so the model
    reads the reference instead of writing its own translation.

    Shapes:
        returns, per pair: (T + 1, S + 1) RNN or (T + 1, L, H, S + 1) Transformer, the
        row and column + 1 being the target and source EOS, as `Hypothesis.weights`.
    """
    decoded = forced_decode(
        model, pairs, need_weights=True, need_log_probs=False, batch_tokens=batch_tokens
    )
    return [weights for _, weights in decoded]


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
