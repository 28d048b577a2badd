"""`Attention`: one score, one scope, one mode, composed behind one call.

    attn = attention.build("general", query_dim=512, key_dim=1024, scope="local-p")
    out = attn(query, key, value, mask=mask)

For an RNN decoder stepping one target position at a time:

    projected_key = attn.precompute_keys(encoder_states)      # once per source sentence
    for t in range(max_len):
        out = attn(h_t.unsqueeze(1), encoder_states, encoder_states, mask,
                   positions=t, projected_key=projected_key)  # T = 1
"""

from __future__ import annotations

from torch import Tensor, nn

from attnmt.attention import functional as AF
from attnmt.attention.base import AttentionOutput, Score, check_shape
from attnmt.attention.modes import MODES, hard_weights, soft_weights
from attnmt.attention.scopes import SCOPES, LocalPredictor, apply_scope


class Attention(nn.Module):
    """A score (how well a query matches each key), a scope (which keys it may see) and a
    mode (soft weights or a hard choice), composed. Usually made by `attention.build`.

    Args:
        score: the score module (see `attention.names()["score"]`).
        scope: "global", "local-m" or "local-p" (Luong et al. 2015 §3.2).
        window: local scopes' half-width D (window [p_t - D, p_t + D]); local-p's
            Gaussian has sigma = D / 2.
        mode: "soft" or "hard" (Xu et al. 2015 §4.1; samples in train(), argmax in eval()).
        hidden_dim: width of local-p's position predictor (default: the query width).

    Keeps no state between calls.

    Shapes:
        query (B, T, Dq), key (B, S, Dk), value (B, S, Dv), mask (B, S) | (B, T, S)
        -> context (B, T, Dv), weights (B, T, S); see `forward`
    """

    def __init__(
        self,
        score: Score,
        *,
        scope: str = "global",
        window: int = 10,
        mode: str = "soft",
        hidden_dim: int | None = None,
    ) -> None:
        super().__init__()
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}; valid scopes: {list(SCOPES)}")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; valid modes: {list(MODES)}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window (D) must be a positive integer, got {window!r}")
        self.score = score
        self.scope = scope
        self.window = window
        self.mode = mode
        self.predictor = (
            LocalPredictor(score.query_dim, hidden_dim or score.query_dim)
            if scope == "local-p"
            else None
        )

    @property
    def query_dim(self) -> int:
        return self.score.query_dim

    @property
    def key_dim(self) -> int:
        return self.score.key_dim

    def precompute_keys(self, key: Tensor) -> Tensor:
        """The key-only part of the score, once per source sentence (Bahdanau's U_a h_j;
        Luong general's W_a h̄_s; the key itself for scores without a key projection).
        Pass the result back as `projected_key=` at every decoder step.

        Shapes:
            key (B, S, Dk) -> projected_key (B, S, Dp)
        """
        check_shape("key", key, ("B", "S", ("Dk", self.key_dim)), {})
        return self.score.precompute_keys(key)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None,
        value: Tensor,
        mask: Tensor | None = None,
        *,
        positions: Tensor | int | None = None,
        projected_key: Tensor | None = None,
    ) -> AttentionOutput:
        """Attend from every query step to the source.

        Args:
            query: decoder states h_t (a single decoder step is T = 1).
            key: source states h̄_s; may be None when `projected_key` is given.
            value: what the context averages (usually the same source states).
            mask: bool, True = may attend; (B, S) or (B, T, S) (or (B, 1, S)).
            positions: local-m's aligned positions p_t: None (0..T-1), an int t0
                (t0..t0+T-1: the step number for T = 1), or a (B, T) tensor. Ignored by
                the other scopes (local-p predicts its own).
            projected_key: `precompute_keys(key)`, to skip recomputing it at every step.

        Returns:
            AttentionOutput(context, weights, log_prob, position, probs); see its doc.

        Shapes:
            query (B, T, Dq), key (B, S, Dk), value (B, S, Dv), mask (B, S) | (B, T, S)
            -> context (B, T, Dv), weights (B, T, S), probs (B, T, S),
               log_prob (B, T) [hard], position (B, T) [local]
        """
        sizes: dict[str, int] = {}
        check_shape("query", query, ("B", "T", ("Dq", self.query_dim)), sizes)
        if projected_key is None:
            if key is None:
                raise ValueError("key is None: pass key, or projected_key from precompute_keys")
            check_shape("key", key, ("B", "S", ("Dk", self.key_dim)), sizes)
            projected_key = self.score.precompute_keys(key)
        else:
            spec = ("B", "S", ("Dp", self.score.projected_key_dim))
            check_shape("projected_key (from precompute_keys)", projected_key, spec, sizes)
        check_shape("value", value, ("B", "S", "Dv"), sizes)
        mask = AF.expand_mask(mask, sizes["B"], sizes["T"], sizes["S"])  # (B, T|1, S)
        scores = self.score(query, projected_key)  # (B, T, S)
        scope = apply_scope(
            self.scope,
            query,
            mask,
            src_len=sizes["S"],
            window=self.window,
            positions=positions,
            predictor=self.predictor,
        )
        if self.mode == "soft":
            result = soft_weights(scores, scope.mask, scope.log_prior)
        else:
            result = hard_weights(scores, scope.mask, scope.log_prior, sample=self.training)
        return AttentionOutput(
            context=AF.attend(result.weights, value),  # (B, T, Dv)
            weights=result.weights,
            log_prob=result.log_prob,
            position=scope.position,
            probs=result.probs,
        )

    def extra_repr(self) -> str:
        local = f", window={self.window}" if self.scope != "global" else ""
        return f"score={self.score.name!r}, scope={self.scope!r}{local}, mode={self.mode!r}"
