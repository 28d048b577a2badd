"""The recorded search, a prefix and alternatives as JSON-ready data: what `attnmt
translate --search-json` writes, the server answers (and streams) and the notebook views
draw. See docs/decoding.md for the format."""

from __future__ import annotations

import math
from typing import Any

from attnmt.inference.attention_choice import labels, select
from attnmt.inference.search_tree import Node

SEARCH_DIGITS = 4  # decimals of a search node's weights and scores in JSON


def node_record(node: Node, tgt, choice, *, heads: bool = False) -> dict[str, Any]:
    """One node of a recorded search as JSON-ready data (`--search-json`, the server's
    "search" and its stream). `attention`: the row of the run's aligning map (`choice`);
    with `heads`, a Transformer's every layer and head too (`attention_heads`, L×H×S)."""
    d = SEARCH_DIGITS
    record: dict[str, Any] = {
        "id": node.id,
        "parent": node.parent,
        "depth": node.depth,
        "token": node.token,
        "piece": str(tgt.id_pieces([node.token])[0]),
        "status": node.status,
        "log_prob": round(node.log_prob, d),
        "cum_log_prob": round(node.cum_log_prob, d),
        "score": round(node.score, d),
        "best": node.best,
        "rank": node.rank,
        "rejected": [
            [str(piece), round(lp, d)]
            for piece, (_, lp) in zip(
                tgt.id_pieces([t for t, _ in node.rejected]), node.rejected, strict=True
            )
        ],
        "attention": None,
    }
    if node.weights is not None:
        record["attention"] = [round(float(w), d) for w in select(node.weights[None], choice)[0]]
        if heads and node.weights.ndim == 3:
            record["attention_heads"] = [
                [[round(float(w), d) for w in head] for head in layer] for layer in node.weights
            ]
    return record


def search_record(translator, sentence, *, heads: bool = False) -> dict[str, Any]:
    """A sentence's recorded search (`Translator(record_search=True)`), see `node_record`."""
    result = sentence.translation
    if result is None or result.search is None:
        raise ValueError("search_record() needs a translation made with record_search")
    tree, tgt, choice = result.search, translator.vocab.tgt, translator.choice
    return {
        "beam": tree.beam,
        "alpha": tree.alpha,
        "source_pieces": labels(translator.vocab.src, sentence.ids),
        "nodes": [node_record(n, tgt, choice, heads=heads) for n in tree.nodes],
        "nbest": list(tree.nbest),
    }


def alternative_record(translator, alt) -> dict[str, Any]:
    """One of `Translator.alternatives`' answers: the subword after the prefix, its
    probability there, the completed translation, its scores and attention."""
    done, tgt = alt.translation, translator.vocab.tgt
    record: dict[str, Any] = {
        "token": alt.token,
        "piece": str(tgt.id_pieces([alt.token])[0]),
        "prob": round(math.exp(alt.log_prob), 6),
        "log_prob_token": round(alt.log_prob, 6),
        "translation": done.text,
        "score": round(done.score, 6),
        "log_prob": round(done.log_prob or 0.0, 6),
        "target_pieces": labels(tgt, done.tokens),
    }
    if done.weights is not None:
        record["subword_weights"] = rounded_matrix(select(done.weights, translator.choice))
    return record


def steering_record(translator, sentence) -> dict[str, Any]:
    """The sentence's "prefix", "search" and "alternatives", those it has."""
    out: dict[str, Any] = {}
    result, tgt = sentence.translation, translator.vocab.tgt
    if sentence.prefix:
        out["prefix"] = {
            "text": tgt.decode(sentence.prefix),
            "tokens": len(sentence.prefix),
            "pieces": tgt.id_pieces(sentence.prefix),
            "ids": list(sentence.prefix),
        }
    if result is not None and result.search is not None:
        out["search"] = search_record(translator, sentence)
    if sentence.alternatives is not None:
        out["alternatives"] = [alternative_record(translator, a) for a in sentence.alternatives]
    return out


def rounded_matrix(matrix) -> list[list[float]]:
    """A weight matrix as JSON-ready rows of floats, 5 decimals (translate, serve)."""
    return [[round(float(x), 5) for x in row] for row in matrix]
