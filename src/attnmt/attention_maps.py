"""From the weights a decoder returns to what a user reads: one matrix, words, links, files.

Shared by `attnmt translate`, `evaluate` and `plot`:

    choice = choose_attention(cfg.model, layer=None, head=None)  # which matrix counts
    matrix = select(hypothesis.weights, choice)                   # (T, S)
    words = word_view(matrix, source_side(...), target_side(...), threshold=None)
    words.links, words.word_weights, words.src_words, words.tgt_words
    write_attention(stem, weights, src_labels, tgt_labels, choice)  # .npz + .png/.svg
    draw_saved(load_arrays(stem.npz), stem)                         # redraw, no model

Layers and heads are numbered from 1 everywhere a user sees them (flags, tables, plot
titles), as `attnmt.plot.heatmap_grid` labels them. The Transformer's default matrix is
the mean over the heads of the second-to-last decoder layer (the last one when there is
only one): the layer before the output is where alignment is usually clearest (Garg et
al. 2019, "Jointly Learning to Align and Translate with Transformer Models", §5).

Word alignments follow `attnmt.evaluate`: subword attention is merged to words
(`merge_to_words`: sum over a source word's pieces, mean over a target word's pieces, EOS
dropped), then each target word is linked to its most-attended source word, plus, with a
threshold, to every source word with at least that weight. Links are (source word,
target word) pairs, 0-based, the Pharaoh `i-j` order.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnmt.data.subwords import word_of_pieces
from attnmt.data.synthetic import SymbolVocab
from attnmt.errors import UserError

log = logging.getLogger(__name__)

BOS, EOS = 2, 3
Link = tuple[int, int]


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

    def describe(self) -> str:
        if not self.transformer:
            return "decoder attention"
        head = "mean of heads" if self.head is None else f"head {self.head}"
        return f"layer {self.layer}, {head}"

    def as_dict(self) -> dict[str, Any]:
        if not self.transformer:
            return {"layer": None, "head": None}
        return {"layer": self.layer, "head": self.head if self.head is not None else "mean"}


def choose_attention(
    model_cfg: Any, *, layer: int | None = None, head: int | None = None
) -> AttentionChoice:
    """Check `--align-layer`/`--align-head` (1-based) against the model and fill defaults."""
    if model_cfg.name != "transformer":
        if layer is not None or head is not None:
            raise UserError(
                f"--align-layer and --align-head choose a Transformer cross-attention; this "
                f"run's model is {model_cfg.name}, which has one attention, so leave them out"
            )
        return AttentionChoice()
    layers, heads = int(model_cfg.layers), int(model_cfg.heads)
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


def select(weights: Tensor | np.ndarray, choice: AttentionChoice) -> np.ndarray:
    """The (T, S) matrix of `choice` from a hypothesis's weights.

    Shapes:
        weights: (T, S) RNN, or (T, L, H, S) Transformer  ->  (T, S)
    """
    array = _numpy(weights)
    if array.ndim == 2:
        return array
    if array.ndim != 4:
        raise ValueError(f"weights must be (T, S) or (T, L, H, S), got {array.shape}")
    layer = array[:, choice.layer - 1]  # (T, H, S)
    return layer.mean(axis=1) if choice.head is None else layer[:, choice.head - 1]


def _numpy(weights: Tensor | np.ndarray) -> np.ndarray:
    if isinstance(weights, Tensor):
        weights = weights.detach().cpu().float().numpy()
    return np.asarray(weights, dtype=np.float64)


# --- words of each side ------------------------------------------------------------------


@dataclass
class SideWords:
    """The words of one side and the word index of each of its subword ids.

    -1 drops a piece (one that spells no word). A word may have no piece at all (a
    character the subword model normalises away): its row or column of word weights is 0.
    """

    word_of: list[int]
    words: list[str]


def source_words(side: Any, text: str, n_ids: int) -> SideWords:
    """Words of a source sentence whose first `n_ids` subword ids were translated.

    The words are `text.split()`, what Pharaoh indices count, cut after the last word the
    `n_ids` ids reach. Each word is encoded on its own to find its pieces; when that does
    not give back the sentence's ids (rare), sentencepiece's own word boundaries are used.
    """
    words = text.split()
    if isinstance(side, SymbolVocab):
        return SideWords(list(range(n_ids)), words[:n_ids])
    per_word = [side.encode(word) for word in words]
    if [i for ids in per_word for i in ids] == side.encode(text):
        word_of = [w for w, ids in enumerate(per_word) for _ in ids]
    else:
        word_of = side.word_of(text)
        if max(word_of, default=-1) + 1 != len(words):
            words = [side.decode(ids).strip() or "?" for ids in _groups(side.encode(text), word_of)]
    word_of = word_of[:n_ids]
    return SideWords(word_of, words[: max(word_of, default=-1) + 1])


def target_words(side: Any, tokens: Sequence[int], text: str | None = None) -> SideWords:
    """Words of an output (its ids, no EOS), mapped from the decoded pieces.

    The word map comes from the pieces of the ids themselves (`id_pieces`, then
    `word_of_pieces`), not from re-encoding the text: each run of pieces that forms a word
    is decoded and split on spaces, and its pieces belong to the first word it spells. The
    words are then `text.split()` of the decoded output (checked, not assumed).
    """
    if isinstance(side, SymbolVocab):
        return SideWords(list(range(len(tokens))), side.id_pieces(tokens))
    word_of: list[int] = []
    words: list[str] = []
    for ids in _groups(tokens, word_of_pieces(side.id_pieces(tokens))):
        parts = side.decode(ids).split()
        word_of += [len(words) if parts else -1] * len(ids)
        words += parts
    text = side.decode(list(tokens)) if text is None else text
    if words != text.split():  # not expected; the links then index the words listed here
        log.debug("output words %s differ from the decoded text %r", words, text)
    return SideWords(word_of, words)


def _groups(ids: Sequence[int], word_of: Sequence[int]) -> list[list[int]]:
    """The ids split into runs of equal word index."""
    groups: list[list[int]] = []
    previous = None
    for token, word in zip(ids, word_of, strict=True):
        if word != previous or not groups:
            groups.append([])
            previous = word
        groups[-1].append(int(token))
    return groups


@dataclass
class WordView:
    """Word-level attention of one sentence and the links read off it."""

    src_words: list[str]
    tgt_words: list[str]
    word_weights: np.ndarray  # (T_words, S_words)
    links: set[Link]


def word_view(
    matrix: np.ndarray | Tensor,
    source: SideWords,
    target: SideWords,
    *,
    threshold: float | None = None,
) -> WordView:
    """Merge a (T, S) subword matrix (EOS row and column included) to words, and align.

    Shapes:
        matrix: (T_sub, S_sub), rows/columns past the word maps (EOS) are dropped
        -> word_weights (len(target.words), len(source.words))
    """
    from attnmt.evaluate import extract_alignment, merge_to_words

    array = _numpy(matrix)
    # merge_to_words wants every word to own a piece: merge those that do, then place them.
    src_map, src_present = _compact(source.word_of)
    tgt_map, tgt_present = _compact(target.word_of)
    merged = merge_to_words(array, src_map, tgt_map)  # (T_present, S_present)
    word_weights = np.zeros((len(target.words), len(source.words)))
    word_weights[np.ix_(tgt_present, src_present)] = merged
    links = extract_alignment(word_weights, threshold=threshold)
    return WordView(source.words, target.words, word_weights, links)


def _compact(word_of: Sequence[int]) -> tuple[list[int], list[int]]:
    """Renumber the words that own pieces 0..K-1; returns (new map, their old indices)."""
    present = sorted({w for w in word_of if w >= 0})
    new = {w: i for i, w in enumerate(present)}
    return [new.get(w, -1) for w in word_of], present


def labels(side: Any, ids: Sequence[int]) -> list[str]:
    """Plot labels: the pieces of `ids` and the final "</s>" (weights have an EOS too)."""
    return [str(p) for p in side.id_pieces([*ids, EOS])]


# --- attention while reading a reference (forced decoding) --------------------------------


@torch.no_grad()
def forced_weights(
    model: torch.nn.Module,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    max_tokens: int = 4000,
) -> list[Tensor]:
    """The attention a model pays while reading given targets (teacher forcing).

    `pairs` are (source ids, target ids), without BOS/EOS. This is how attention is scored
    against gold alignments: the links must be between the reference's words, so the model
    reads the reference instead of writing its own translation.

    Shapes:
        returns, per pair: (T + 1, S + 1) RNN or (T + 1, L, H, S + 1) Transformer, the
        row and column + 1 being the target and source EOS, as `Hypothesis.weights`.
    """
    from attnmt.translate import batches_by_length, pad_batch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    results: list[Tensor | None] = [None] * len(pairs)
    sources = [[*src, EOS] for src, _ in pairs]
    targets = [[BOS, *tgt] for _, tgt in pairs]
    lengths = [max(len(s), len(t)) for s, t in zip(sources, targets, strict=True)]
    try:
        for batch in batches_by_length(lengths, max_tokens):
            src, src_mask = pad_batch([sources[i] for i in batch], device)
            tgt_in, _ = pad_batch([targets[i] for i in batch], device)
            out = model(src, src_mask, tgt_in, need_weights=True)
            if out.weights is None:
                raise UserError("this model has no attention, so it has no alignments")
            weights = out.weights.float().cpu()
            if weights.dim() == 5:  # (B, L, H, T, S) -> (B, T, L, H, S)
                weights = weights.permute(0, 3, 1, 2, 4)
            for row, index in enumerate(batch):
                t, s = len(targets[index]), len(sources[index])
                results[index] = weights[row, :t, ..., :s].clone()
    finally:
        model.train(was_training)
    return [r for r in results if r is not None]


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
        weights: (T, S) RNN or (T, L, H, S) Transformer; stored as (T, S) or (L, H, T, S)
    """
    from attnmt.plot import load_arrays, save_arrays

    array = _numpy(weights).astype(np.float32)
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
    """Draw saved plot data (`attnmt.plot.PlotData`): a (T, S) matrix as one heatmap; a
    Transformer's (L, H, T, S) as the grid of every layer and head (`stem-layers`) plus the
    alignment view (`stem`: the chosen layer and head, by default those saved in `meta`)."""
    from attnmt.plot import heatmap, heatmap_grid

    weights = np.asarray(data.weights)
    if weights.ndim == 2:
        if layer is not None or head is not None:
            raise UserError(
                "--align-layer and --align-head choose among a Transformer's layers and "
                "heads; this plot data holds one (T, S) matrix, so leave them out"
            )
        return heatmap(weights, data.src_tokens, data.tgt_tokens, stem, formats=formats)
    if weights.ndim != 4:
        raise UserError(
            f"the plot data holds weights of shape {weights.shape}; expected (T, S) or "
            "(L, H, T, S) as `attnmt translate --plot` and `attnmt plot` write them"
        )
    layers, heads = weights.shape[:2]
    saved_head = data.meta.get("head")
    meta_cfg = _SimpleModel(layers, heads)
    choice = choose_attention(
        meta_cfg,
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


@dataclass
class _SimpleModel:
    """The two numbers `choose_attention` needs, for plot data without a config."""

    layers: int
    heads: int
    name: str = "transformer"
