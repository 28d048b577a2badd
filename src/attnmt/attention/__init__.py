"""Attention mechanisms, chosen by name along three axes that compose.

    from attnmt import attention
    attention.names()  # {"score": [...], "scope": [...], "mode": [...]}
    attn = attention.build("general", query_dim=512, key_dim=1024, scope="local-p", window=10)
    out = attn(query, key, value, mask=mask)  # AttentionOutput(context, weights, ...)

- score: dot, general, concat, additive, location, scaled_dot, cosine
- scope: global, local-m, local-p
- mode: soft, hard

Masks everywhere: bool, True = may attend. See docs/attention.md for the equations.
"""

from __future__ import annotations

from collections.abc import Callable

from attnmt.attention import functional
from attnmt.attention.additive import AdditiveScore, ConcatScore
from attnmt.attention.base import AttentionOutput, Score
from attnmt.attention.content import CosineScore
from attnmt.attention.location import LocationScore
from attnmt.attention.mechanism import Attention
from attnmt.attention.modes import MODES
from attnmt.attention.multihead import MultiHeadAttention
from attnmt.attention.multiplicative import DotScore, GeneralScore, ScaledDotScore
from attnmt.attention.scopes import SCOPES, LocalPredictor

__all__ = [
    "AdditiveScore",
    "Attention",
    "AttentionOutput",
    "ConcatScore",
    "CosineScore",
    "DotScore",
    "GeneralScore",
    "LocalPredictor",
    "LocationScore",
    "MultiHeadAttention",
    "ScaledDotScore",
    "Score",
    "build",
    "functional",
    "names",
]

# name -> factory(query_dim, key_dim, hidden_dim, max_source_len, (beta, beta_init))
_ScoreFactory = Callable[[int, int, int, int, tuple], Score]
_SCORES: dict[str, _ScoreFactory] = {
    "dot": lambda q, k, h, m, b: DotScore(q, k),
    "general": lambda q, k, h, m, b: GeneralScore(q, k),
    "concat": lambda q, k, h, m, b: ConcatScore(q, k, hidden_dim=h),
    "additive": lambda q, k, h, m, b: AdditiveScore(q, k, hidden_dim=h),
    "location": lambda q, k, h, m, b: LocationScore(q, k, max_source_len=m),
    "scaled_dot": lambda q, k, h, m, b: ScaledDotScore(q, k),
    "cosine": lambda q, k, h, m, b: CosineScore(q, k, beta=b[0], beta_init=b[1]),
}


def names() -> dict[str, list[str]]:
    """The registered names, per axis: `{"score": [...], "scope": [...], "mode": [...]}`."""
    return {"score": list(_SCORES), "scope": list(SCOPES), "mode": list(MODES)}


def build(
    score: str,
    *,
    query_dim: int,
    key_dim: int | None = None,
    hidden_dim: int | None = None,
    scope: str = "global",
    window: int = 10,
    mode: str = "soft",
    max_source_len: int = 100,
    beta: str | float = "query",
    beta_init: float = 1.0,
) -> Attention:
    """Build an `Attention` from names.

    Args:
        score: one of `names()["score"]`.
        query_dim: query width Dq (decoder state).
        key_dim: key width Dk (encoder state); default `query_dim`. `dot` and
            `scaled_dot` need it equal to `query_dim`.
        hidden_dim: hidden width of `additive`/`concat` and of local-p's position
            predictor; default `query_dim`.
        scope: one of `names()["scope"]`.
        window: local scopes' half-width D (Luong used 10).
        mode: one of `names()["mode"]`.
        max_source_len: longest source `location` can score.
        beta: `cosine`'s key strength: "query" (softplus of the query, as in NTM),
            "learned" (a scalar), or a fixed number > 0.
        beta_init: the key strength `cosine` starts with ("query", "learned"); 1 = the
            plain cosine.

    Options a score does not use are ignored, so one config can build any combination.

    Raises:
        ValueError: an unknown name (the message lists the valid ones), or bad dimensions.
    """
    for axis, name in (("score", score), ("scope", scope), ("mode", mode)):
        valid = names()[axis]
        if name not in valid:
            raise ValueError(f"unknown attention {axis} {name!r}; valid {axis}s: {valid}")
    key_dim = query_dim if key_dim is None else key_dim
    hidden_dim = query_dim if hidden_dim is None else hidden_dim
    for label, dim in (("query_dim", query_dim), ("key_dim", key_dim), ("hidden_dim", hidden_dim)):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"{label} must be a positive integer, got {dim!r}")
    module = _SCORES[score](query_dim, key_dim, hidden_dim, max_source_len, (beta, beta_init))
    return Attention(module, scope=scope, window=window, mode=mode, hidden_dim=hidden_dim)
