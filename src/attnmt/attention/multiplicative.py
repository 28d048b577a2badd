"""Multiplicative scores: `dot` and `general` (Luong et al. 2015 eq. 8) and `scaled_dot`
(Vaswani et al. 2017 eq. 1).

In Luong's notation h_t is the decoder (target) state, the query; h̄_s the encoder
(source) state at position s, the key.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnmt.attention.base import Score


class DotScore(Score):
    """`dot`: score(h_t, h̄_s) = h_tᵀ h̄_s (Luong et al. 2015 eq. 8). No parameters.

    Needs query_dim == key_dim. Use it when query and key live in the same space (e.g. both
    come from LSTMs of the same width) and you want no extra parameters.

    Shapes:
        query (B, T, D), projected_key (B, S, D) -> scores (B, T, S)
    """

    name = "dot"
    needs_equal_dims = True

    def forward(self, query: Tensor, projected_key: Tensor) -> Tensor:
        # score(h_t, h̄_s) = h_tᵀ h̄_s, Luong eq. 8 (dot)
        return torch.matmul(query, projected_key.transpose(1, 2))  # (B, T, S)


class GeneralScore(Score):
    """`general`: score(h_t, h̄_s) = h_tᵀ W_a h̄_s (Luong et al. 2015 eq. 8).

    W_a maps keys to the query's width, so query and key widths may differ. `W_a h̄_s` is
    the key-only part: `precompute_keys` returns it once per source sentence. Luong et al.
    found `general` the better score for local attention (and `dot` for global).

    Shapes:
        key (B, S, Dk) -> projected_key (B, S, Dq)
        query (B, T, Dq), projected_key (B, S, Dq) -> scores (B, T, S)
    """

    name = "general"

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)  # W_a in Luong eq. 8

    @property
    def projected_key_dim(self) -> int:
        return self.query_dim

    def precompute_keys(self, key: Tensor) -> Tensor:
        return self.W_a(key)  # W_a h̄_s: (B, S, Dq)

    def forward(self, query: Tensor, projected_key: Tensor) -> Tensor:
        # score(h_t, h̄_s) = h_tᵀ (W_a h̄_s), Luong eq. 8 (general)
        return torch.matmul(query, projected_key.transpose(1, 2))  # (B, T, S)


class ScaledDotScore(Score):
    """`scaled_dot`: Q Kᵀ / sqrt(d_k) (Vaswani et al. 2017 §3.2.1, eq. 1). No parameters.

    Needs query_dim == key_dim. The 1/sqrt(d_k) keeps the softmax out of its flat regions
    for wide vectors; the Transformer's choice (see also `MultiHeadAttention`).

    Shapes:
        query (B, T, Dk), projected_key (B, S, Dk) -> scores (B, T, S)
    """

    name = "scaled_dot"
    needs_equal_dims = True

    def forward(self, query: Tensor, projected_key: Tensor) -> Tensor:
        # Q Kᵀ / sqrt(d_k), Vaswani eq. 1
        scores = torch.matmul(query, projected_key.transpose(1, 2))  # (B, T, S)
        return scores / math.sqrt(self.key_dim)
