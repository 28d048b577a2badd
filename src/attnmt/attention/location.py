"""Location-based score: `location` (Luong et al. 2015 §3.1).

a_t = softmax(W_a h_t): the weights come from the decoder state alone, one learned score
per source position up to `max_source_len`; the keys are not looked at (they only give S).
"""

from __future__ import annotations

from torch import Tensor, nn

from attnmt.attention.base import Score


class LocationScore(Score):
    """`location`: a_t = softmax(W_a h_t) (Luong et al. 2015 §3.1, the location-based
    function next to eq. 8).

    W_a has one row per source position (`max_source_len` rows, no bias). For a source of
    length S the first S scores are used and positions beyond S are dropped (the softmax
    runs over the S kept ones, and the mask as usual); S > max_source_len is an error. The
    keys give only S, so they get no gradient. Luong et al. used it in early experiments;
    it suits tasks whose alignment depends on position more than content.

    Shapes:
        query (B, T, Dq), projected_key (B, S, Dk) -> scores (B, T, S)
    """

    name = "location"

    def __init__(self, query_dim: int, key_dim: int, *, max_source_len: int) -> None:
        super().__init__(query_dim, key_dim)
        if not isinstance(max_source_len, int) or max_source_len < 1:
            raise ValueError(f"max_source_len must be a positive integer, got {max_source_len!r}")
        self.max_source_len = max_source_len
        self.W_a = nn.Linear(query_dim, max_source_len, bias=False)  # W_a in a_t = softmax(W_a h_t)

    def forward(self, query: Tensor, projected_key: Tensor) -> Tensor:
        src_len = projected_key.shape[1]
        if src_len > self.max_source_len:
            raise ValueError(
                f"score 'location' was built with max_source_len={self.max_source_len} but "
                f"got a source of length S={src_len}; build it with a larger max_source_len"
            )
        scores = self.W_a(query)  # W_a h_t: (B, T, max_source_len)
        return scores[..., :src_len]  # positions beyond S dropped: (B, T, S)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, max_source_len={self.max_source_len}"
