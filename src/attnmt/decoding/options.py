"""How to search, as one object: `SearchOptions` travels from the `Translator` through
`translate_ids` to `greedy`, `beam_search` and `alternatives`, in place of the same six
keyword arguments at every level.

    options = SearchOptions(beam=5, alpha=0.6, need_weights=True)
    beam_search(model, src, src_mask, options)
    translate_ids(model, sources, decode_text, options)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SearchOptions:
    """The search's settings (those of `attnmt translate`, docs/decoding.md).

    `beam`: beams per sentence (1: greedy in `translate_ids`); `alpha`: the exponent of
    GNMT's length penalty (Wu et al. 2016, eq. 14; 0 ranks by the plain log-probability);
    `n_best`: hypotheses kept per sentence, at most `beam`; an output stops at
    `max_len_ratio` times its source length plus 5 tokens, EOS included, or at `max_len`
    tokens when that is fewer (None: `translate_ids` takes the model's
    `max_output_tokens`); `need_weights`: keep each hypothesis' attention weights.
    """

    beam: int = 1
    alpha: float = 0.6
    n_best: int = 1
    max_len_ratio: float = 2.0
    max_len: int | None = None
    need_weights: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.n_best <= self.beam:
            raise ValueError(f"n_best must be between 1 and beam={self.beam}, got {self.n_best}")


GREEDY = SearchOptions()  # the defaults: greedy search
BEAM = SearchOptions(beam=5)  # `beam_search`'s default
