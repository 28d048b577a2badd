"""Additive scores: `additive` (Bahdanau et al. 2015, appendix A.1.2) and `concat` (Luong
et al. 2015 eq. 8).

Both are one-hidden-layer networks over a query and a key, v_aᵀ tanh(W q + U k), which
splits into a query part and a key part: the key part is computed once per source
sentence (`precompute_keys`) and reused at every decoder step, as Bahdanau et al. note.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmt.attention.base import Score


class AdditiveScore(Score):
    """`additive` (Bahdanau): e_ij = a(s_{i-1}, h_j) = v_aᵀ tanh(W_a s_{i-1} + U_a h_j).

    Bahdanau et al. 2015: eq. 6 defines alpha_ij = softmax_j(e_ij), appendix A.1.2 the
    alignment model a. The query is the previous decoder state s_{i-1}, the key the
    annotation h_j. `precompute_keys` returns U_a h_j (B, S, hidden_dim). No biases, as in
    the paper. Use it for RNNsearch, or whenever query and key widths differ and a
    multiplicative score is too rigid.

    Shapes:
        key (B, S, Dk) -> projected_key (B, S, hidden_dim)
        query (B, T, Dq), projected_key (B, S, hidden_dim) -> scores (B, T, S)
    """

    name = "additive"

    def __init__(self, query_dim: int, key_dim: int, *, hidden_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        self.hidden_dim = hidden_dim
        self.W_a = nn.Linear(query_dim, hidden_dim, bias=False)  # W_a, Bahdanau A.1.2
        self.U_a = nn.Linear(key_dim, hidden_dim, bias=False)  # U_a, Bahdanau A.1.2
        self.v_a = nn.Linear(hidden_dim, 1, bias=False)  # v_a, Bahdanau A.1.2

    @property
    def projected_key_dim(self) -> int:
        return self.hidden_dim

    def precompute_keys(self, key: Tensor) -> Tensor:
        return self.U_a(key)  # U_a h_j: (B, S, hidden)

    def forward(self, query: Tensor, projected_key: Tensor) -> Tensor:
        query_part = self.W_a(query).unsqueeze(2)  # W_a s_{i-1}: (B, T, 1, hidden)
        key_part = projected_key.unsqueeze(1)  # U_a h_j: (B, 1, S, hidden)
        hidden = torch.tanh(query_part + key_part)  # (B, T, S, hidden)
        return self.v_a(hidden).squeeze(-1)  # e_ij in Bahdanau eq. 6: (B, T, S)


class ConcatScore(Score):
    """`concat` (Luong): score(h_t, h̄_s) = v_aᵀ tanh(W_a [h_t; h̄_s]) (Luong et al. 2015
    eq. 8).

    One matrix W_a (hidden_dim, Dq + Dk) over the concatenation, as in the paper; it is
    applied as W_a[:, :Dq] h_t + W_a[:, Dq:] h̄_s, the same function without building the
    (B, T, S, Dq + Dk) concatenation, so `precompute_keys` returns W_a[:, Dq:] h̄_s.
    Luong et al. report that `concat` did not perform well in their experiments; here for
    completeness and comparison.

    Shapes:
        key (B, S, Dk) -> projected_key (B, S, hidden_dim)
        query (B, T, Dq), projected_key (B, S, hidden_dim) -> scores (B, T, S)
    """

    name = "concat"

    def __init__(self, query_dim: int, key_dim: int, *, hidden_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        self.hidden_dim = hidden_dim
        self.W_a = nn.Linear(query_dim + key_dim, hidden_dim, bias=False)  # W_a, eq. 8
        self.v_a = nn.Linear(hidden_dim, 1, bias=False)  # v_a, Luong eq. 8

    @property
    def projected_key_dim(self) -> int:
        return self.hidden_dim

    def precompute_keys(self, key: Tensor) -> Tensor:
        key_weight = self.W_a.weight[:, self.query_dim :]  # (hidden, Dk)
        return torch.matmul(key, key_weight.t())  # W_a[:, Dq:] h̄_s: (B, S, hidden)

    def forward(self, query: Tensor, projected_key: Tensor) -> Tensor:
        query_weight = self.W_a.weight[:, : self.query_dim]  # (hidden, Dq)
        query_part = torch.matmul(query, query_weight.t()).unsqueeze(2)  # (B, T, 1, hidden)
        key_part = projected_key.unsqueeze(1)  # (B, 1, S, hidden)
        hidden = torch.tanh(query_part + key_part)  # tanh(W_a [h_t; h̄_s]): (B, T, S, hidden)
        return self.v_a(hidden).squeeze(-1)  # score(h_t, h̄_s), Luong eq. 8: (B, T, S)
