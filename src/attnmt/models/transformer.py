"""The Transformer (Vaswani et al. 2017, "Attention Is All You Need").

Encoder and decoder stacks of multi-head attention and position-wise feed-forward layers,
sinusoidal positions, residual connections with layer normalisation (post-norm, as in the
paper, or pre-norm), dropout, and tied embeddings. All attention goes through
`attnmt.attention.MultiHeadAttention`, which runs PyTorch's fused scaled-dot-product kernel
unless weights are asked for (only the cross-attention's, and only with
`need_weights=True`).

Incremental decoding (`step`) keeps a key/value cache of the previous target positions in
every decoder layer (in the state, never on the module) and the cross-attention's
projected keys/values of the source (in the memory, computed once per sentence).

Shapes legend: B batch, S source length, T target length, D model width (d_model), H
heads, Dh = D / H, F feed-forward width, L layers, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnmt.attention import MultiHeadAttention
from attnmt.data.vocab import PAD
from attnmt.models.base import BatchFirst, ModelOutput, Seq2Seq, check_inputs, scored

KV = tuple[Tensor, Tensor]  # projected keys and values, each (B, H, S, Dh)


@dataclass
class TransformerMemory(BatchFirst):
    """The encoded source.

    Fields:
        encoded: the encoder stack's output (after the final norm in pre-norm).
        mask: True at real source tokens.
        cross_kv: per decoder layer, its cross-attention's projected keys and values.
        self_weights: per encoder layer, its self-attention weights, when `encode` was
            asked for them (attention rollout, `attnmt.explain`); else None.

    Shapes:
        encoded (B, S, D); mask (B, S); cross_kv: L × ((B, H, S, Dh), (B, H, S, Dh));
        self_weights: L × (B, H, S, S)
    """

    encoded: Tensor
    mask: Tensor
    cross_kv: list[KV]
    self_weights: list[Tensor] | None = None


@dataclass
class TransformerState(BatchFirst):
    """The decoder between steps: every layer's self-attention keys/values so far.

    Fields:
        self_kv: per decoder layer, keys and values of the target positions read so far.
        step: how many target tokens have been read (the next token's position).

    Shapes:
        self_kv: L × ((B, H, t, Dh), (B, H, t, Dh)), t = step
    """

    self_kv: list[KV]
    step: int = 0


def sinusoidal_positions(
    start: int, length: int, dim: int, *, device: torch.device, dtype: torch.dtype
) -> Tensor:
    """Vaswani et al. 2017 §3.5: PE(pos, 2i) = sin(pos / 10000^{2i/D}),
    PE(pos, 2i+1) = cos(pos / 10000^{2i/D}), for positions start .. start + length - 1.

    Shapes:
        -> (length, dim)
    """
    position = torch.arange(start, start + length, device=device, dtype=torch.float32)
    even = torch.arange(0, dim, 2, device=device, dtype=torch.float32)  # 2i
    angle = position.unsqueeze(1) / torch.pow(10000.0, even / dim)  # (length, ceil(D/2))
    table = torch.zeros(length, dim, device=device, dtype=torch.float32)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return table.to(dtype)  # (length, D)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (Vaswani et al. 2017 eq. 2).

    Shapes:
        x (B, T, D) -> (B, T, D)
    """

    def __init__(self, d_model: int, ff_size: int) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, ff_size)  # W_1, b_1
        self.w_2 = nn.Linear(ff_size, d_model)  # W_2, b_2

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(torch.relu(self.w_1(x)))


class Residual(nn.Module):
    """A sub-layer's residual connection with layer normalisation and dropout (§5.4).

    post-norm (the paper, §3.1): LayerNorm(x + Dropout(Sublayer(x)));
    pre-norm: x + Dropout(Sublayer(LayerNorm(x))) (with a final LayerNorm after the stack).

    Shapes:
        x (B, T, D) -> (B, T, D)
    """

    def __init__(self, d_model: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward, each in a `Residual` (§3.1).

    With `weights` (a list) the self-attention's weights (B, H, S, S) are appended to it.

    Shapes:
        x (B, S, D), mask (B, S) -> (B, S, D)
    """

    def __init__(self, d_model: int, heads: int, ff_size: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads)
        self.ff = FeedForward(d_model, ff_size)
        self.attn_residual = Residual(d_model, dropout, pre_norm)
        self.ff_residual = Residual(d_model, dropout, pre_norm)

    def forward(self, x: Tensor, mask: Tensor, weights: list[Tensor] | None = None) -> Tensor:
        def attend(y: Tensor) -> Tensor:
            out = self.self_attn(y, y, y, mask, need_weights=weights is not None)
            if weights is not None:
                weights.append(out.weights)  # (B, H, S, S)
            return out.context

        x = self.attn_residual(x, attend)
        return self.ff_residual(x, self.ff)


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over the source, feed-forward (§3.1).

    With `cache` (incremental decoding) the self-attention projects only the new
    positions' keys/values and appends them to the cache; without it, it runs causally
    over the whole target (fused kernel, `is_causal`).

    Shapes:
        x (B, T, D), cross_kv ((B, H, S, Dh), (B, H, S, Dh)), src_mask (B, S),
        cache ((B, H, t, Dh), (B, H, t, Dh)) | None
        -> x (B, T, D), cross weights (B, H, T, S) | None, new cache (B, H, t + T, Dh) | None
    """

    def __init__(self, d_model: int, heads: int, ff_size: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads)
        self.cross_attn = MultiHeadAttention(d_model, heads)
        self.ff = FeedForward(d_model, ff_size)
        self.self_residual = Residual(d_model, dropout, pre_norm)
        self.cross_residual = Residual(d_model, dropout, pre_norm)
        self.ff_residual = Residual(d_model, dropout, pre_norm)

    def forward(
        self,
        x: Tensor,
        cross_kv: KV,
        src_mask: Tensor,
        *,
        cache: KV | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, KV | None]:
        new_cache: list[KV] = []

        def self_attention(y: Tensor) -> Tensor:
            if cache is None:
                return self.self_attn(y, y, y, causal=True).context
            key, value = self.self_attn.precompute_kv(y, y)  # new positions: (B, H, T, Dh)
            kv = (torch.cat([cache[0], key], dim=2), torch.cat([cache[1], value], dim=2))
            new_cache.append(kv)  # (B, H, t + T, Dh) each
            # One new position sees every cached one: no mask needed (ends-aligned causal
            # masking for several new positions).
            causal = y.shape[1] > 1
            return self.self_attn(y, None, None, causal=causal, projected_kv=kv).context

        weights: list[Tensor | None] = []

        def cross_attention(y: Tensor) -> Tensor:
            out = self.cross_attn(
                y, None, None, src_mask, need_weights=need_weights, projected_kv=cross_kv
            )
            weights.append(out.weights)  # (B, H, T, S) or None
            return out.context

        x = self.self_residual(x, self_attention)
        x = self.cross_residual(x, cross_attention)
        x = self.ff_residual(x, self.ff)
        return x, weights[0], new_cache[0] if new_cache else None


class Transformer(Seq2Seq):
    """Vaswani et al. 2017's encoder–decoder Transformer (§3).

    Embeddings are scaled by √D and summed with sinusoidal positions (§3.4, §3.5), then
    dropped out (§5.4). L encoder layers (self-attention, FFN) and L decoder layers
    (causal self-attention, cross-attention, FFN), each sub-layer in a residual with
    LayerNorm: post-norm as in the paper, or pre-norm (`pre_norm=True`, with a final
    LayerNorm on each stack). Logits are a linear map of the decoder output, tied to the
    target embedding (`tie_embeddings`, §3.4; no bias); `share_embeddings` also uses one
    embedding table for source and target (a joint vocabulary, equal sizes).

    Dropout is the paper's residual dropout P_drop (sub-layer outputs and embedding sums);
    no attention dropout. `d_model` is the width everywhere (`embed_size` of a config is
    not used). Initialisation: Xavier-uniform for every linear map, zero biases, embeddings
    N(0, D^-1/2 squared) so that √D-scaled embeddings have unit variance (PAD row 0).

    Shapes:
        src, src_mask (B, S); tgt_in (B, T) -> logits (B, T, V), weights (B, L, H, T, S)
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        *,
        d_model: int,
        heads: int,
        ff_size: int,
        layers: int,
        dropout: float = 0.1,
        pre_norm: bool = True,
        tie_embeddings: bool = True,
        share_embeddings: bool = False,
    ) -> None:
        super().__init__()
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                "share_embeddings needs one joint vocabulary, got source size "
                f"{src_vocab_size} and target size {tgt_vocab_size}"
            )
        self.d_model, self.heads, self.layers = d_model, heads, layers
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=PAD)
        self.tgt_embed = (
            self.src_embed
            if share_embeddings
            else nn.Embedding(tgt_vocab_size, d_model, padding_idx=PAD)
        )
        self.dropout = nn.Dropout(dropout)
        args = (d_model, heads, ff_size, dropout, pre_norm)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*args) for _ in range(layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*args) for _ in range(layers))
        self.encoder_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.generator = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self._reset_parameters()
        if tie_embeddings:
            self.generator.weight = self.tgt_embed.weight  # §3.4: shared with embeddings

    def _reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for embed in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embed.weight, mean=0.0, std=self.d_model**-0.5)
            with torch.no_grad():
                embed.weight[PAD].zero_()

    def _embed(self, embed: nn.Embedding, tokens: Tensor, start: int) -> Tensor:
        """√D · E x + PE, dropped out (§3.4, §3.5, §5.4). Shapes: (B, T) -> (B, T, D)."""
        x = embed(tokens) * math.sqrt(self.d_model)  # (B, T, D)
        positions = sinusoidal_positions(
            start, tokens.shape[1], self.d_model, device=x.device, dtype=x.dtype
        )  # (T, D)
        return self.dropout(x + positions)

    def encode(
        self, src: Tensor, src_mask: Tensor, *, need_weights: bool = False
    ) -> TransformerMemory:
        """The encoder stack, and every decoder layer's cross-attention keys/values (with
        `need_weights`, every encoder layer's self-attention weights too).

        Shapes:
            src, src_mask (B, S) -> encoded (B, S, D), cross_kv L × (B, H, S, Dh) pairs
        """
        check_inputs(src, src_mask)
        x = self._embed(self.src_embed, src, 0)  # (B, S, D)
        weights: list[Tensor] | None = [] if need_weights else None
        for layer in self.encoder_layers:
            x = layer(x, src_mask, weights)
        x = self.encoder_norm(x)
        cross_kv = [layer.cross_attn.precompute_kv(x, x) for layer in self.decoder_layers]
        return TransformerMemory(encoded=x, mask=src_mask, cross_kv=cross_kv, self_weights=weights)

    def init_state(self, memory: TransformerMemory) -> TransformerState:
        """Empty caches: L × ((B, H, 0, Dh), (B, H, 0, Dh))."""
        batch = memory.encoded.shape[0]
        empty = memory.encoded.new_zeros(batch, self.heads, 0, self.d_model // self.heads)
        return TransformerState(self_kv=[(empty, empty) for _ in self.decoder_layers])

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor,
        tgt_in: Tensor,
        *,
        need_weights: bool = False,
        logits: bool = True,
    ) -> ModelOutput:
        """Teacher forcing over the whole target at once (causal self-attention).

        Shapes:
            src, src_mask (B, S); tgt_in (B, T) -> ModelOutput(logits (B, T, V),
            weights (B, L, H, T, S) cross-attention | None)
        """
        check_inputs(src, src_mask, tgt_in)
        memory = self.encode(src, src_mask)
        x = self._embed(self.tgt_embed, tgt_in, 0)  # (B, T, D)
        weights = []
        for layer, cross_kv in zip(self.decoder_layers, memory.cross_kv, strict=True):
            x, layer_weights, _ = layer(x, cross_kv, src_mask, need_weights=need_weights)
            weights.append(layer_weights)
        stacked = torch.stack(weights, dim=1) if need_weights else None  # (B, L, H, T, S)
        return scored(self.decoder_norm(x), self.generator, logits, weights=stacked)

    def step(
        self,
        prev_tokens: Tensor,
        state: TransformerState,
        memory: TransformerMemory,
        *,
        need_weights: bool = False,
    ) -> tuple[Tensor, TransformerState, Tensor | None]:
        """One target position, reusing the cached keys/values of the previous ones.

        Shapes:
            prev_tokens (B,) -> logits (B, V), weights (B, L, H, S) | None
        """
        x = self._embed(self.tgt_embed, prev_tokens.unsqueeze(1), state.step)  # (B, 1, D)
        caches, weights = [], []
        layers = zip(self.decoder_layers, memory.cross_kv, state.self_kv, strict=True)
        for layer, cross_kv, cache in layers:
            x, layer_weights, new_cache = layer(
                x, cross_kv, memory.mask, cache=cache, need_weights=need_weights
            )
            caches.append(new_cache)
            weights.append(layer_weights)
        logits = self.generator(self.decoder_norm(x[:, 0]))  # (B, V)
        stacked = torch.stack(weights, dim=1)[:, :, :, 0] if need_weights else None  # (B, L, H, S)
        return logits, TransformerState(self_kv=caches, step=state.step + 1), stacked
