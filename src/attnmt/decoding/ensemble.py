"""Ensembles: several trained runs decoding as one model.

    loaded = load_ensemble(["runs/rnnsearch", "runs/rnnsearch-seed2"])   # a LoadedRun
    Translator(loaded, beam=5).translate(lines)      # as with one run

At every decoder step each member reads the same source and the same prefix and gives its
next-token log-probabilities; the ensemble's are their mean (`log-linear`, the default: a
normalised product of the members' distributions) or the log of their mean probability
(`linear`, fairseq's and Sockeye's `linear`). Greedy search, beam search and forced
decoding (scoring, AER) use the ensemble like any model: `Ensemble` is a `Seq2Seq`, whose
`step` gives those log-probabilities as its logits. Any model families may be mixed (an
RNNsearch with a Transformer) as long as they share the source and the target vocabulary:
the members read the same source ids and their log-probabilities are added id by id.

Attention: each member's weights are returned, reduced to one matrix per member (an RNN's
attention; a Transformer's chosen layer and head, by default the mean of the
second-to-last layer's heads), so a hypothesis carries (T, M, S) weights; alignments and
plots use their mean over the M members (`AttentionChoice.members`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from attnmt.config.checks import ENSEMBLE_MODES
from attnmt.config.families import family
from attnmt.decoding.attention_choice import AttentionChoice, choose_attention
from attnmt.decoding.runs import LoadedRun, load_run
from attnmt.errors import UserError
from attnmt.models.base import ModelOutput, Seq2Seq

MODES = ENSEMBLE_MODES


@dataclass
class Joined:
    """The members' memories (or decoder states), one each, reordered together."""

    parts: list[Any]

    def select(self, indices: Tensor) -> Joined:
        return Joined([part.select(indices) for part in self.parts])


def member_matrix(weights: Tensor, choice: AttentionChoice) -> Tensor:
    """One member's weights reduced to its chosen matrix.

    Shapes:
        step: (B, S) RNN or (B, L, H, S) Transformer -> (B, S);
        forward: (B, T, S) RNN or (B, L, H, T, S) Transformer -> (B, T, S)
    """
    if not choice.transformer:
        return weights
    layer = weights[:, choice.layer - 1]  # (B, H, S) or (B, H, T, S)
    return layer.mean(dim=1) if choice.head is None else layer[:, choice.head - 1]


class Ensemble(Seq2Seq):
    """Members that decode together (`attnmt.models` step interface; eval mode only)."""

    def __init__(
        self, members: Sequence[Seq2Seq], choices: Sequence[AttentionChoice], mode: str
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise UserError(f"--ensemble-mode must be one of {', '.join(MODES)}, got '{mode}'")
        self.members = nn.ModuleList(members)
        self.choices = list(choices)
        self.mode = mode
        self.uses_attention = all(m.uses_attention for m in members)
        self.reads_images = all(m.reads_images for m in members)  # one vocabulary: all or none
        limits = [m.max_output_tokens for m in members if m.max_output_tokens is not None]
        self.max_output_tokens = min(limits) if limits else None

    def combine(self, logits: Sequence[Tensor]) -> Tensor:
        """The ensemble's log-probabilities from the members' logits (..., V) each."""
        log_probs = torch.stack([torch.log_softmax(x.float(), dim=-1) for x in logits])
        if self.mode == "linear":
            return torch.logsumexp(log_probs, dim=0) - math.log(len(logits))
        return torch.log_softmax(log_probs.mean(dim=0), dim=-1)

    def encode(self, src: Tensor, src_mask: Tensor) -> Joined:
        return Joined([member.encode(src, src_mask) for member in self.members])

    def init_state(self, memory: Joined) -> Joined:
        return Joined(
            [m.init_state(part) for m, part in zip(self.members, memory.parts, strict=True)]
        )

    def step(
        self, prev_tokens: Tensor, state: Joined, memory: Joined, *, need_weights: bool = False
    ) -> tuple[Tensor, Joined, Tensor | None]:
        """Shapes: prev_tokens (B,) -> log-probabilities (B, V), weights (B, M, S) | None."""
        logits, states, weights = [], [], []
        for member, choice, part, mem in zip(
            self.members, self.choices, state.parts, memory.parts, strict=True
        ):
            out, new_state, step_weights = member.step(
                prev_tokens, part, mem, need_weights=need_weights
            )
            logits.append(out)
            states.append(new_state)
            if need_weights:
                weights.append(member_matrix(step_weights.float(), choice))
        stacked = torch.stack(weights, dim=1) if need_weights else None  # (B, M, S)
        return self.combine(logits), Joined(states), stacked

    def forward(
        self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, *, need_weights: bool = False
    ) -> ModelOutput:
        """Teacher forcing. Shapes: logits (B, T, V) log-probabilities; weights (B, T, M, S)."""
        outputs = [m(src, src_mask, tgt_in, need_weights=need_weights) for m in self.members]
        weights = None
        if need_weights:
            weights = torch.stack(
                [
                    member_matrix(out.weights.float(), choice)
                    for out, choice in zip(outputs, self.choices, strict=True)
                ],
                dim=2,
            )
        return ModelOutput(logits=self.combine([o.logits for o in outputs]), weights=weights)


def _vocab_difference(first: LoadedRun, other: LoadedRun) -> str | None:
    """Which side's vocabulary differs between two runs (None: they are the same)."""
    for side in ("tgt", "src"):
        a, b = getattr(first.vocab, side), getattr(other.vocab, side)
        if type(a) is not type(b) or a.size != b.size or _pieces(a) != _pieces(b):
            name = "target" if side == "tgt" else "source"
            return f"{name} vocabulary ({a.size} and {b.size} entries{_first_change(a, b)})"
    return None


def _pieces(side: Any) -> list[str]:
    return [str(p) for p in side.id_pieces(range(side.size))]


def _first_change(a: Any, b: Any) -> str:
    for index, (x, y) in enumerate(zip(_pieces(a), _pieces(b), strict=False)):
        if x != y:
            return f"; id {index} is '{x}' in one, '{y}' in the other"
    return ""


def load_ensemble(
    paths: Sequence[str | Path],
    *,
    device: str | torch.device = "cpu",
    mode: str = "log-linear",
    layer: int | None = None,
    head: int | None = None,
) -> LoadedRun:
    """One run, or the ensemble of several (their vocabularies checked alike).

    `layer` and `head` choose the matrix of every Transformer member (checked against each).
    The returned `LoadedRun` has the first member's config, vocabulary and run directory,
    and `members` set to every member's.
    """
    loaded = [load_run(path, device=device) for path in paths]
    if len(loaded) == 1:
        return loaded[0]
    first = loaded[0]
    for other in loaded[1:]:
        different = _vocab_difference(first, other)
        if different is not None:
            raise UserError(
                f"'{first.run_dir}' and '{other.run_dir}' cannot decode as an ensemble: their "
                f"{different}; ensemble runs trained on the same vocabulary"
            )
    transformers = [family(m.cfg.model.name).transformer for m in loaded]
    if (layer is not None or head is not None) and not any(transformers):
        raise UserError(
            "--align-layer and --align-head choose a Transformer cross-attention; no member "
            "of this ensemble is a Transformer, so leave them out"
        )
    choices = [
        choose_attention(
            m.cfg.model,
            layer=layer if transformer else None,
            head=head if transformer else None,
        )
        for m, transformer in zip(loaded, transformers, strict=True)
    ]
    model = Ensemble([m.model for m in loaded], choices, mode).eval()
    return LoadedRun(
        run_dir=first.run_dir,
        checkpoint=first.checkpoint,
        step=first.step,
        cfg=first.cfg,
        model=model,
        vocab=first.vocab,
        members=loaded,
    )
