"""What every model shares: the output dataclass, batch-first containers that beam search
can reorder, and the `Seq2Seq` interface the trainer and the decoders use.

    out = model(src, src_mask, tgt_in, need_weights=False)     # teacher forcing
    memory = model.encode(src, src_mask)                        # once per source batch
    state = model.init_state(memory)                            # before the first step
    logits, state, weights = model.step(prev_tokens, state, memory, need_weights=False)
    memory.select(indices); state.select(indices)               # beam reorder / expand

`step` gives the same logits as `forward` at every position (eval mode); the searches read
`step_log_probs`, the same step as log-probabilities, over `array_ops` (torch's, on the
model's device): what `attnmt.decoding.step_model.StepModel` asks of every model, ONNX
exports included. Nothing is kept on a module between calls: attention weights are
returned, never stored.

Shapes legend: B batch, S source length, T target length, D width, H heads, Dh head width,
V vocabulary, L layers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Self

import torch
from torch import Tensor, nn

from attnmt.models.torch_ops import TorchOps, torch_ops


@dataclass
class ModelOutput:
    """What a teacher-forced forward pass returns.

    Fields:
        logits: unnormalised scores of the next target token at each position.
        weights: attention weights when asked for (`need_weights=True`), else `None`; also
            `None` for a model without attention (rnnencdec). RNN decoders: the weights
            that formed each step's context; Transformer: every layer's and head's
            cross-attention.
        attn_log_prob: hard attention in train mode: log-probability of each step's
            sampled source position (for `losses.reinforce_loss`); else `None`.
        attn_entropy: hard attention: entropy of each step's attention distribution (the
            one positions are sampled from; Xu et al. 2015 eq. 12's H[s]); else `None`.
        reward_baseline: a model whose policy acts N times per example, not once per
            target token (the glimpse locations of `attnmt.models.glimpses`): its learned
            baseline b_n of the reward before each action (Mnih et al. 2014 §3); then
            `attn_log_prob` holds the N actions' log-probabilities (B, N), every one of
            which counts. Else `None`.
        features, output_layer: with `forward(..., logits=False)`, the output layer's
            input and the layer itself (an `nn.Linear`) in place of `logits`, which is then
            `None`: the loss applies the layer chunk by chunk without ever making the
            (B, T, V) logits (`attnmt.training.vocab_loss`). A model whose logits come
            from no single linear layer returns its logits as usual.

    Shapes:
        logits: (B, T, V)
        weights: RNN (B, T, S); Transformer (B, L, H, T, S)
        attn_log_prob: (B, T)
        attn_entropy: (B, T)
        reward_baseline: (B, N), with attn_log_prob (B, N)
    """

    logits: Tensor | None
    weights: Tensor | None = None
    attn_log_prob: Tensor | None = None
    attn_entropy: Tensor | None = None
    reward_baseline: Tensor | None = None
    features: Tensor | None = None
    output_layer: nn.Linear | None = None


def scored(features: Tensor, output_layer: nn.Linear, logits: bool, **fields) -> ModelOutput:
    """A forward pass's output: the logits of `output_layer(features)`, or with `logits`
    False the two of them for the caller to apply (`ModelOutput.features`)."""
    if logits:
        return ModelOutput(output_layer(features), **fields)
    return ModelOutput(None, **fields, features=features, output_layer=output_layer)


def _select(value: Any, indices: Tensor) -> Any:
    """`index_select` along dimension 0 of a tensor, or of every tensor in a list/tuple."""
    if isinstance(value, Tensor):
        return value.index_select(0, indices)
    if isinstance(value, list | tuple):
        return type(value)(_select(v, indices) for v in value)
    return value  # None, ints: shared by every row


@dataclass
class BatchFirst:
    """A dataclass whose tensor fields (and lists/tuples of tensors) are all batch first.

    `select(indices)` picks rows along the batch: reorder beams, or expand each sentence
    to K beams (`indices` may repeat). Non-tensor fields (step counters) are shared.

    Shapes:
        indices (B',) long -> every tensor field (B', ...)
    """

    def select(self, indices: Tensor) -> Self:
        fields = dataclasses.fields(self)
        changes = {f.name: _select(getattr(self, f.name), indices) for f in fields}
        return dataclasses.replace(self, **changes)


class Seq2Seq(nn.Module):
    """The interface of every model in `attnmt.models` (an encoder–decoder).

    Subclasses implement `encode`, `init_state`, `step` and `forward`; `uses_attention` says
    whether weights can ever be returned; `reads_images` whether the source is an image's
    pixel tokens (`attnmt.data.images`), read whole, not subwords; `max_output_tokens` caps
    every output (EOS included) whatever the source length, for models whose outputs are
    short by nature. `step_log_probs` and `array_ops` are what the searches read
    (`StepModel`). The first two are the family's (`attnmt.config.families`: a test keeps
    them equal), asked of the model by code that holds one.
    """

    uses_attention: bool = True
    reads_images: bool = False
    max_output_tokens: int | None = None  # None: only the source length limits an output

    def encode(self, src: Tensor, src_mask: Tensor) -> BatchFirst:  # pragma: no cover
        """Encode a source batch once. Shapes: src, src_mask (B, S)."""
        raise NotImplementedError

    def init_state(self, memory: Any) -> BatchFirst:  # pragma: no cover
        """The decoder state before the first step (which reads BOS)."""
        raise NotImplementedError

    def step(
        self, prev_tokens: Tensor, state: Any, memory: Any, *, need_weights: bool = False
    ) -> tuple[Tensor, Any, Tensor | None]:  # pragma: no cover
        """One decoder step. Shapes: prev_tokens (B,) -> logits (B, V), weights or None."""
        raise NotImplementedError

    def step_log_probs(
        self, prev_tokens: Tensor, state: Any, memory: Any, *, need_weights: bool = False
    ) -> tuple[Tensor, Any, Tensor | None]:
        """`step` as the searches read it: the next token's log-probabilities, float32.

        Shapes: prev_tokens (B,) -> log-probabilities (B, V), weights or None."""
        logits, state, weights = self.step(prev_tokens, state, memory, need_weights=need_weights)
        return torch.log_softmax(logits.float(), dim=-1), state, weights

    @property
    def array_ops(self) -> TorchOps:
        """The searches' array operations for this model: torch's, on its parameters' device."""
        return torch_ops(next(self.parameters()).device)

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor,
        tgt_in: Tensor,
        *,
        need_weights: bool = False,
        logits: bool = True,
    ) -> ModelOutput:  # pragma: no cover
        """Teacher forcing. Shapes: src, src_mask (B, S); tgt_in (B, T) -> logits (B, T, V)."""
        raise NotImplementedError


def check_inputs(src: Tensor, src_mask: Tensor, tgt_in: Tensor | None = None) -> None:
    """Shapes and dtypes of a model's inputs; `ValueError` naming expected and actual.

    Shapes:
        src (B, S) long, src_mask (B, S) bool, tgt_in (B, T) long
    """
    if src.dim() != 2 or src.dtype != torch.long:
        raise ValueError(f"src must be a (B, S) long tensor, got {tuple(src.shape)} {src.dtype}")
    if src_mask.shape != src.shape or src_mask.dtype != torch.bool:
        raise ValueError(
            f"src_mask must be a bool tensor of src's shape {tuple(src.shape)} (True = real "
            f"token), got {tuple(src_mask.shape)} {src_mask.dtype}"
        )
    if tgt_in is not None and (
        tgt_in.dim() != 2 or tgt_in.shape[0] != src.shape[0] or tgt_in.dtype != torch.long
    ):
        raise ValueError(
            f"tgt_in must be a (B={src.shape[0]}, T) long tensor, got "
            f"{tuple(tgt_in.shape)} {tgt_in.dtype}"
        )
