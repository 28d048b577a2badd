"""Scopes: which source positions each target step may attend (Luong et al. 2015 §3.2).

- `global`: every source position (the mask alone decides).
- `local-m` (monotonic): aligned position p_t = t, window [p_t - D, p_t + D]. Past the
  end of a sentence p_t stays at its last position (index S - 1, S the true length): the
  paper ignores the part of a window outside the sentence, so a target longer than its
  source keeps reading the source's end rather than an empty window and a zero context.
- `local-p` (predictive): p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)) (Luong eq. 9), window
  [p_t - D, p_t + D], and weights multiplied by exp(-(s - p_t)^2 / (2 sigma^2)) with
  sigma = D / 2 (Luong eq. 10). p_t and the Gaussian are computed in fp32 whatever the
  autocast (in bf16, positions past 256 collapse onto each other).

Windows are centred on the position nearest p_t, so each holds 2D + 1 positions (Luong's
a_t ∈ R^{2D+1}) where it lies inside the sentence; local-p's Gaussian uses the real p_t.

A window is a mask of the same kind as padding and causal masks (True = may attend) and
is combined with them by AND. Positions are 0-based.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.attention import functional as AF
from attnmt.attention.base import check_shape

SCOPES = ("global", "local-m", "local-p")


@dataclass(frozen=True)
class ScopeResult:
    """A scope applied to one call.

    Shapes:
        mask: (B, T, S) or (B, 1, S) bool, True = may attend (user mask AND window); or None
        position: (B, T) float aligned positions p_t; None for global
        log_prior: (B, T, S) log of local-p's Gaussian factor; None otherwise
    """

    mask: Tensor | None
    position: Tensor | None
    log_prior: Tensor | None


class LocalPredictor(nn.Module):
    """local-p's aligned position p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)) (Luong et al.
    2015 eq. 9).

    S is each sentence's true (unpadded) length, taken from the mask
    (`functional.source_lengths`), so p_t ∈ [0, S] as in the paper. With 0-based positions
    0..S-1 the centre may sit up to one past the last token; the window still covers the
    last D positions there, and the Gaussian simply leans towards the sentence end.

    Shapes:
        query (B, T, Dq), lengths (B,) -> p_t (B, T)
    """

    def __init__(self, query_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.W_p = nn.Linear(query_dim, hidden_dim, bias=False)  # W_p, Luong eq. 9
        self.v_p = nn.Linear(hidden_dim, 1, bias=False)  # v_p, Luong eq. 9

    def forward(self, query: Tensor, lengths: Tensor) -> Tensor:
        # fp32 whatever the autocast: p_t is a position, and bf16 holds 8 bits of mantissa.
        with torch.autocast(query.device.type, enabled=False):
            hidden = torch.tanh(F.linear(query.float(), self.W_p.weight.float()))  # (B, T, h)
            fraction = torch.sigmoid(F.linear(hidden, self.v_p.weight.float())).squeeze(-1)
        return lengths.to(torch.float32).unsqueeze(1) * fraction  # p_t: (B, T) float32


def monotonic_positions(
    positions: Tensor | int | None, batch: int, tgt_len: int, device: torch.device
) -> Tensor:
    """local-m's p_t = t. `positions`: None (0..T-1), an int t0 (t0..t0+T-1, e.g. the
    step number of a one-step decoder call), or a (B, T) tensor.

    Shapes:
        -> (B, T) float
    """
    if positions is None or isinstance(positions, int):
        start = 0 if positions is None else positions
        steps = torch.arange(start, start + tgt_len, device=device, dtype=torch.float32)
        return steps.expand(batch, tgt_len)  # (B, T)
    if not isinstance(positions, Tensor):
        raise ValueError(f"positions must be None, an int or a (B, T) tensor, got {positions!r}")
    check_shape("positions", positions, (("B", batch), ("T", tgt_len)), {})
    return positions.to(device=device, dtype=torch.float32)


def apply_scope(
    scope: str,
    query: Tensor,
    mask: Tensor | None,
    *,
    src_len: int,
    window: int,
    positions: Tensor | int | None = None,
    predictor: LocalPredictor | None = None,
) -> ScopeResult:
    """Restrict `mask` (already expanded, see `functional.expand_mask`) to the scope's window.

    `positions` is used by local-m only; local-p predicts its positions with `predictor`.

    Shapes:
        query (B, T, Dq), mask (B, T|1, S) or None -> ScopeResult
    """
    batch, tgt_len = query.shape[0], query.shape[1]
    if scope == "global":
        return ScopeResult(mask=mask, position=None, log_prior=None)
    if scope == "local-m":
        position = monotonic_positions(positions, batch, tgt_len, query.device)  # p_t = t
        # Past the sentence's end, stay at its last position (see the module docstring).
        lengths = _lengths(mask, batch, src_len, query.device)  # (B,)
        last = (lengths - 1).clamp(min=0).to(position.dtype).unsqueeze(1)  # (B, 1)
        position = torch.minimum(position, last)  # (B, T)
        log_prior = None
    elif scope == "local-p":
        if predictor is None:  # pragma: no cover - build() always makes one
            raise ValueError("scope 'local-p' needs a LocalPredictor")
        lengths = _lengths(mask, batch, src_len, query.device)  # true S per sentence: (B,)
        position = predictor(query, lengths)  # p_t, Luong eq. 9: (B, T)
        # exp(-(s - p_t)^2 / (2 sigma^2)), sigma = D / 2, Luong eq. 10 (kept as a log)
        log_prior = AF.gaussian_window(position, src_len, window / 2.0, log=True)
    else:
        raise ValueError(f"unknown scope {scope!r}; valid scopes: {list(SCOPES)}")
    window_mask = AF.local_window_mask(position.detach(), src_len, window)  # (B, T, S)
    mask = window_mask if mask is None else mask & window_mask
    return ScopeResult(mask=mask, position=position, log_prior=log_prior)


def _lengths(mask: Tensor | None, batch: int, src_len: int, device: torch.device) -> Tensor:
    """Each sentence's true source length: from the mask, else the full width. (B,)"""
    if mask is None:
        return torch.full((batch,), src_len, device=device)
    return AF.source_lengths(mask)
