"""Content-based addressing: `cosine` (Graves et al. 2014, Neural Turing Machines §3.3.1).

In NTM terms the query h_t emits a key vector k_t, the source states are the memory rows
M(i), and the weights are w(i) = softmax_i(beta_t K[k_t, M(i)]) with K the cosine
similarity (NTM eqs. 5-6) and beta_t > 0 the key strength, which sharpens (large beta) or
flattens (small beta) the focus.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.attention.base import Score

BETA_CHOICES = ("query", "learned")


class CosineScore(Score):
    """`cosine`: score = beta · cos(k_t, M(i)) (Graves et al. 2014 NTM, eqs. 5-6).

    The key strength beta (`beta=`):
        "query" (default, as in NTM): beta_t = softplus(w_betaᵀ h_t + b_beta), one per query
            step; softplus keeps it positive (NTM only asks for beta_t > 0). It starts at
            `beta_init` for every query (w_beta = 0, b_beta = softplus⁻¹(beta_init)).
        "learned": one learned scalar beta = softplus(raw), starting at `beta_init`.
        a float > 0: a fixed beta (no parameter), e.g. for tests or a set temperature.

    `beta_init` (default 1, the plain cosine) survives the models' initialisers, which set
    every parameter by the paper's rule (zeros or uniform noise would start beta at
    softplus(0) = ln 2 or about 0.7, nearly uniform attention): they call
    `documented_init` afterwards. A larger start (e.g. 5) begins with sharper attention;
    NTM and DNC keep beta ≥ 1 with oneplus(x) = 1 + softplus(x), which a `beta_init` above
    1 approximates at the start.

    When key_dim != query_dim the keys are first projected to the query's width by a
    learned `key_proj` (no bias), which `precompute_keys` applies once per sentence.
    Cosine ignores vector length, so it suits keys of very different norms (memories).

    Shapes:
        key (B, S, Dk) -> projected_key (B, S, Dq)
        query (B, T, Dq), projected_key (B, S, Dq) -> scores (B, T, S)
    """

    name = "cosine"

    def __init__(
        self, query_dim: int, key_dim: int, *, beta: str | float = "query", beta_init: float = 1.0
    ) -> None:
        super().__init__(query_dim, key_dim)
        if not beta_init > 0:
            raise ValueError(f"cosine beta_init must be > 0, got {beta_init!r}")
        self.beta_init = float(beta_init)
        self.key_proj = nn.Linear(key_dim, query_dim, bias=False) if key_dim != query_dim else None
        self.w_beta: nn.Linear | None = None
        self.beta_raw: nn.Parameter | None = None
        self.fixed_beta: float | None = None
        if beta == "query":
            self.w_beta = nn.Linear(query_dim, 1)  # w_beta, b_beta
        elif beta == "learned":
            self.beta_raw = nn.Parameter(torch.zeros(()))
        elif isinstance(beta, int | float) and not isinstance(beta, bool) and beta > 0:
            self.fixed_beta = float(beta)
        else:
            raise ValueError(
                f"cosine beta must be one of {list(BETA_CHOICES)} or a number > 0, got {beta!r}"
            )
        self.beta_kind = beta if isinstance(beta, str) else "fixed"
        self.documented_init()

    @torch.no_grad()
    def documented_init(self) -> None:
        """Start beta at `beta_init` (see the class docstring); models call it after their
        own initialisation."""
        start = math.log(math.expm1(self.beta_init))  # softplus⁻¹(beta_init)
        if self.w_beta is not None:
            self.w_beta.weight.zero_()
            self.w_beta.bias.fill_(start)
        if self.beta_raw is not None:
            self.beta_raw.fill_(start)

    @property
    def projected_key_dim(self) -> int:
        return self.query_dim

    def precompute_keys(self, key: Tensor) -> Tensor:
        return key if self.key_proj is None else self.key_proj(key)  # (B, S, Dq)

    def key_strength(self, query: Tensor) -> Tensor:
        """beta_t: (B, T, 1) for "query", a scalar tensor otherwise."""
        if self.w_beta is not None:
            return F.softplus(self.w_beta(query))  # beta_t > 0, NTM §3.3.1: (B, T, 1)
        if self.beta_raw is not None:
            return F.softplus(self.beta_raw)  # ()
        return query.new_tensor(self.fixed_beta)  # ()

    def forward(self, query: Tensor, projected_key: Tensor) -> Tensor:
        unit_query = F.normalize(query, dim=-1, eps=1e-8)  # k_t / |k_t|: (B, T, Dq)
        unit_key = F.normalize(projected_key, dim=-1, eps=1e-8)  # M(i) / |M(i)|: (B, S, Dq)
        # K[k_t, M(i)], NTM eq. 6: (B, T, Dq) @ (B, Dq, S) -> (B, T, S)
        cosine = torch.matmul(unit_query, unit_key.transpose(1, 2))
        return self.key_strength(query) * cosine  # beta_t K[.,.], NTM eq. 5: (B, T, S)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, beta={self.beta_kind}"
