"""Which attention matrix counts (`AttentionChoice`: an RNN's one, a Transformer layer's
head or mean of heads, an ensemble's mean; the step offset that aligns words), the matrix
it picks from a hypothesis's weights, and the labels of each side. Torch-free: the
runtime of an ONNX export uses them as our decoder does (the plot files are drawn by
`attnmt.decoding.attention_maps`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from attnmt.alignment.links import shift_rows
from attnmt.arrays import to_numpy
from attnmt.config.families import family
from attnmt.data.vocab import EOS
from attnmt.errors import UserError

if TYPE_CHECKING:
    from torch import Tensor


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


def choose_attention(
    model_cfg: Any,
    *,
    layer: int | None = None,
    head: int | None = None,
    offset: int | None = None,
) -> AttentionChoice:
    """Check `--align-layer`/`--align-head` (1-based) against the model and fill defaults;
    `offset` (`--align-offset`) defaults to the model family's (`Family.align_offset`, with
    where it was measured)."""
    model = family(model_cfg.name)
    if offset is None:
        offset = model.align_offset
    if not model.transformer:
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
        offset = family(loaded.cfg.model.name).align_offset
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


def labels(side: Any, ids: Sequence[int]) -> list[str]:
    """Plot labels: the pieces of `ids` and the final "</s>" (weights have an EOS too)."""
    return [str(p) for p in side.id_pieces([*ids, EOS])]
