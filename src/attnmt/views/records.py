"""What a view draws: one JSON-ready record per sentence, in the shape of the server's
`POST /api/translate` line with `"weights": true` (so the explorer page and the notebook
views read the same thing), built from what the library returns.

    record = sentence_record(vocab, source, ids, tokens, text, weights, choices, default)

`attention` lists the maps: for an RNN its one matrix; for a Transformer each decoder
layer's mean of heads, then its heads (as the page's selector offers them); then, for
each explanation asked for, the method's matrix. Each map carries its `name`, `method`,
`scale` (attnmt.plotting.SCALES), its subword and word matrices and its word alignment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from attnmt.data.alignments import format_pharaoh
from attnmt.explain.names import scale_of
from attnmt.inference.alignment import source_words, target_words, word_view
from attnmt.inference.attention_maps import AttentionChoice, every_choice, labels, select
from attnmt.inference.search_json import rounded_matrix


def map_entry(
    name: str, method: str, matrix: np.ndarray, src_words, tgt_words, *, threshold=None
) -> dict[str, Any]:
    """One map: its matrices at both levels and the word alignment they give."""
    view = word_view(matrix, src_words, tgt_words, threshold=threshold)
    return {
        "name": name,
        "method": method,
        "scale": scale_of(method if method != "attention" else None),
        "subword": rounded_matrix(matrix),
        "word": rounded_matrix(view.word_weights),
        "alignment": format_pharaoh(view.links),
        "_view": view,  # removed by `sentence_record`; its words and links
    }


def sentence_record(
    vocab,
    source: str,
    ids: Sequence[int],
    tokens: Sequence[int],
    text: str,
    weights,
    default: AttentionChoice,
    *,
    explanations: Sequence[Any] = (),
    all_maps: bool = True,
    threshold: float | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of one sentence: `weights` as the decoder returned them (None: the
    model has no attention), `explanations` (`attnmt.explain.Explanation`s) drawn after
    the attention maps."""
    src = source_words(vocab.src, source, len(ids))
    tgt = target_words(vocab.tgt, tokens, text)
    maps = []
    default_index = 0  # the decoder's own map; without attention, the first explanation
    if weights is not None:
        choices = every_choice(default) if all_maps else [default]
        default_index = choices.index(default) if default in choices else 0
        for choice in choices:
            maps.append(
                map_entry(
                    choice.describe(),
                    "attention",
                    select(weights, choice),
                    src,
                    tgt,
                    threshold=threshold,
                )
            )
    for done in explanations:
        maps.append(
            map_entry(
                done.method, done.method, np.asarray(done.matrix), src, tgt, threshold=threshold
            )
        )
    first = maps[default_index]["_view"] if maps else None
    record: dict[str, Any] = {
        "source": source,
        "translation": text,
        "source_words": first.src_words if first else list(source.split()),
        "target_words": first.tgt_words if first else list(text.split()),
        "source_pieces": labels(vocab.src, ids),
        "target_pieces": labels(vocab.tgt, tokens),
        "alignment": maps[default_index]["alignment"] if maps else "",
        "links": [list(link) for link in sorted(first.links)] if first else [],
        "attention": [{k: v for k, v in m.items() if k != "_view"} for m in maps],
        "default_attention": default_index,
    }
    if extra:
        record.update(extra)
    return record
