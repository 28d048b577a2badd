"""`MultiHeadAttention` (Vaswani et al. 2017 §3.2.2), batch first, mask True = may attend.

MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O with
head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V) and Attention the scaled dot product (eq. 1).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmt.attention import functional as AF
from attnmt.attention.base import AttentionOutput, check_shape


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention with `q_proj`, `k_proj`, `v_proj`,
    `out_proj` (nn.Linear each), equal in function to `torch.nn.MultiheadAttention`
    (`from_torch` copies one) but batch first with our mask polarity.

    Args:
        embed_dim: model width D (queries and output); split into `num_heads` heads of
            Dh = D / H.
        kdim, vdim: key and value widths (default D).
        dropout: dropout on the attention weights, in training mode only.
        bias: biases on the four projections.

    Without weights it runs the fused `F.scaled_dot_product_attention`; with them
    (`need_weights=True`) an explicit softmax. Both give zeros for a query row with nothing
    to attend.

    Incremental decoding: `precompute_kv(key, value)` projects keys and values once (cross
    attention: once per sentence; self-attention: once per new step, concatenated onto a
    cache along S); pass them as `projected_kv=` with `key=value=None`.

    Shapes:
        query (B, T, D), key (B, S, kdim), value (B, S, vdim), mask (B, S) | (B, T, S)
        -> context (B, T, D), weights (B, H, T, S) | (B, T, S) | None; Dh = D / H
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if num_heads < 1 or embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim must be divisible by num_heads, got embed_dim={embed_dim}, "
                f"num_heads={num_heads}"
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim or embed_dim
        self.vdim = vdim or embed_dim
        self.dropout = dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # W^Q, all heads
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)  # W^K, all heads
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)  # W^V, all heads
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # W^O
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight)
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """A copy of a `torch.nn.MultiheadAttention`'s weights (packed `in_proj_weight`, or
        separate `q/k/v_proj_weight` when kdim/vdim differ). Weights do not depend on
        `batch_first`; this module is always batch first. `add_bias_kv` and
        `add_zero_attn` are not supported.
        """
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("from_torch: add_bias_kv and add_zero_attn are not supported")
        bias = module.in_proj_bias is not None
        new = cls(
            module.embed_dim,
            module.num_heads,
            kdim=module.kdim,
            vdim=module.vdim,
            dropout=module.dropout,
            bias=bias,
        )
        if module._qkv_same_embed_dim:
            weights = module.in_proj_weight.chunk(3)  # 3 x (D, D)
        else:
            weights = (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight)
        reference = module.out_proj.weight
        new = new.to(device=reference.device, dtype=reference.dtype)
        with torch.no_grad():
            for proj, weight in zip((new.q_proj, new.k_proj, new.v_proj), weights, strict=True):
                proj.weight.copy_(weight)
            new.out_proj.weight.copy_(module.out_proj.weight)
            if bias:
                biases = module.in_proj_bias.chunk(3)  # 3 x (D,)
                for proj, b in zip((new.q_proj, new.k_proj, new.v_proj), biases, strict=True):
                    proj.bias.copy_(b)
                new.out_proj.bias.copy_(module.out_proj.bias)
        return new

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, length = x.shape[0], x.shape[1]
        x = x.view(batch, length, self.num_heads, self.head_dim)  # (B, L, H, Dh)
        return x.transpose(1, 2)  # (B, H, L, Dh)

    def precompute_kv(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Project and split keys and values into heads.

        Shapes:
            key (B, S, kdim), value (B, S, vdim) -> ((B, H, S, Dh), (B, H, S, Dh))
        """
        sizes: dict[str, int] = {}
        check_shape("key", key, ("B", "S", ("kdim", self.kdim)), sizes)
        check_shape("value", value, ("B", "S", ("vdim", self.vdim)), sizes)
        return self._split_heads(self.k_proj(key)), self._split_heads(self.v_proj(value))

    def forward(
        self,
        query: Tensor,
        key: Tensor | None,
        value: Tensor | None,
        mask: Tensor | None = None,
        *,
        need_weights: bool = False,
        causal: bool = False,
        average_weights: bool = False,
        projected_kv: tuple[Tensor, Tensor] | None = None,
    ) -> AttentionOutput:
        """Multi-head attention; self-attention is query = key = value.

        Args:
            mask: bool, True = may attend: (B, S) key padding, or (B, T, S) / (B, 1, S).
            need_weights: also return the weights (explicit path instead of fused).
            causal: AND a causal mask: key s visible to query t iff s <= t + (S - T)
                (ends aligned, so T = 1 with S cached keys sees all of them).
            average_weights: return weights averaged over heads (implies need_weights).
            projected_kv: `precompute_kv(key, value)`; key and value are then ignored.

        Returns:
            AttentionOutput(context, weights): weights None unless asked for. `weights`
            are those that formed the context (after dropout in training).

        Shapes:
            query (B, T, D), key (B, S, kdim), value (B, S, vdim), mask (B, S) | (B, T, S)
            -> context (B, T, D), weights (B, H, T, S) | (B, T, S) averaged | None
        """
        sizes: dict[str, int] = {}
        check_shape("query", query, ("B", "T", ("D", self.embed_dim)), sizes)
        if projected_kv is None:
            if key is None or value is None:
                raise ValueError("key and value are None: pass them, or projected_kv")
            k, v = self.precompute_kv(key, value)  # (B, H, S, Dh) each
        else:
            k, v = projected_kv
            spec = ("B", ("H", self.num_heads), "S", ("Dh", self.head_dim))
            check_shape("projected_kv[0] (keys)", k, spec, sizes)
            check_shape("projected_kv[1] (values)", v, spec, sizes)
        src_len = k.shape[2]
        mask = AF.expand_mask(mask, sizes["B"], sizes["T"], src_len)  # (B, T|1, S)
        if mask is not None:
            mask = mask.unsqueeze(1)  # (B, 1, T|1, S): same for every head
        q = self._split_heads(self.q_proj(query))  # (B, H, T, Dh)
        out = AF.scaled_dot_product(
            q,
            k,
            v,
            mask,
            need_weights=need_weights or average_weights,
            causal=causal,
            dropout_p=self.dropout if self.training else 0.0,
        )
        context = out.context.transpose(1, 2)  # (B, T, H, Dh)
        context = context.reshape(sizes["B"], sizes["T"], self.embed_dim)  # (B, T, D)
        weights = out.weights  # (B, H, T, S) or None
        if weights is not None and average_weights:
            weights = weights.mean(dim=1)  # (B, T, S)
        return AttentionOutput(context=self.out_proj(context), weights=weights)

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, kdim={self.kdim}, "
            f"vdim={self.vdim}, dropout={self.dropout}"
        )
