"""The record of a decoded sentence and of each node of its search: defined once (the
TypedDicts below), built once from what the search returns, read by every face.

    record = sentence_record(sentence, vocab, choice)   # a `Sentence` of the Translator
    line = flat_record(record, choice)                  # `--alignments json`'s line

The Python API's results keep it, the notebook views draw it, the server answers it (its
`LineResult` and the models in it are these TypedDicts field for field, tests/test_records.py),
`attnmt translate` and `score` write it, the aligning map flattened (`flat_record`).
`SearchNode` is what `--search-json`, the server's search and stream, and tree.js carry.

`attention` lists maps: the aligning one, or a Transformer's every layer's mean of heads,
then its heads; the explanations (`explanations`, `attnmt.service`) follow, one map each.
The words, links and `alignment` are read off map `default_attention`: the first
explanation's when there is one, else the attention `choice` names, rows shifted by
`choice.offset`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, NotRequired, Protocol, TypedDict

import numpy as np

from attnmt.alignment.links import (
    SideWords,
    WordView,
    shift_rows,
    source_words,
    target_words,
    word_view,
)
from attnmt.arrays import to_numpy
from attnmt.data.alignments import format_pharaoh
from attnmt.data.grid import pixel_map
from attnmt.decoding.attention_choice import AttentionChoice, every_choice, labels, select
from attnmt.decoding.decode_ids import Translation

if TYPE_CHECKING:
    from attnmt.decoding.search_tree import Node
    from attnmt.decoding.translator import Alternative, Sentence

SCORE_DIGITS = 6  # decimals of scores and log-probabilities
WEIGHT_DIGITS = 5  # ... of weights, and of an explanation's completeness error
SEARCH_DIGITS = 4  # ... of a search node's numbers (a search has hundreds of nodes)
# How a heatmap shades the attention: its fixed 0..1 scale (an explanation's matrix says
# its own, `Explanation.scale`).
ATTENTION_SCALE = "weights"


# --- the definitions --------------------------------------------------------------------


class Explanation(Protocol):
    """What a record needs of an explanation (`attnmt.explain.Explanation`, made above this
    floor, is one): its method's matrix of a translation and what it cost."""

    method: str
    matrix: Any  # (T + 1, S + 1), the attention's shape
    seconds: float
    forward: int
    backward: int
    completeness: float | None

    @property
    def scale(self) -> str: ...

    @property
    def reads_attention(self) -> bool: ...


class AttentionMap(TypedDict):
    """One matrix of a sentence (T + 1, S + 1), at the subword and the word level."""

    name: str  # "decoder attention", "layer 2, head 1", "occlusion", ...
    method: str  # "attention", or the explanation method that made the matrix
    scale: str  # how to shade it (attnmt.plotting.SCALES)
    layer: int | None  # 1-based Transformer layer the matrix reads; null otherwise
    head: int | None  # 1-based head; null for a layer's mean of heads (and an RNN)
    subword: list[list[float]]  # rows target_pieces, columns source_pieces
    word: list[list[float]]  # rows target_words, columns source_words
    alignment: str  # the word links read off this map, Pharaoh i-j


class ExplanationRecord(TypedDict):
    """What an explanation method did and cost (`attnmt.explain`)."""

    method: str
    scale: str
    ms: float  # the explanation's time, not the decoding's
    forward: int  # sequences passed forward to explain the output
    backward: int  # ... and backward (the gradient methods)
    completeness_error: float | None  # integrated gradients' relative error


class NbestEntry(TypedDict):
    """One hypothesis of an n-best list."""

    translation: str
    score: float
    log_prob: float
    alignment: str  # empty without weights


class PrefixRecord(TypedDict):
    """The target subwords forced at the start of the translation."""

    text: str
    tokens: int
    pieces: list[str]
    ids: list[int]  # the prefix to send again


class AlternativeRecord(TypedDict):
    """A subword that could follow the prefix, and the translation it leads to."""

    token: int
    piece: str  # the subword after the prefix
    prob: float  # its probability there
    log_prob_token: float
    translation: str  # prefix, subword and the search's completion
    score: float
    log_prob: float  # of the whole output
    target_pieces: list[str]
    subword_weights: NotRequired[list[list[float]]]  # with weights


class SearchNode(TypedDict):
    """One candidate of a recorded search: `piece` appended to its parent's hypothesis."""

    id: int
    parent: int | None  # the node it extends; null for the root
    depth: int  # subwords from the root
    token: int
    piece: str
    status: str  # root, forced, kept, pruned, finished, ended (`search_tree`)
    log_prob: float  # the subword's
    cum_log_prob: float  # the hypothesis', what beams rank
    score: float  # cum_log_prob over the length penalty of `depth` subwords
    best: bool  # on the path of the best finished hypothesis
    rank: int | None  # a finished node's place in the n-best list
    rejected: list[list[str | float]]  # [piece, log_prob] of best next subwords that went nowhere
    attention: list[float] | None  # the aligning map's row that made the subword
    attention_heads: NotRequired[list[list[list[float]]]]  # --search-json: [layer][head][source]


class SearchRecord(TypedDict):
    """A sentence's recorded search (`attnmt.decoding.search_tree`)."""

    beam: int
    alpha: float
    source_pieces: list[str]
    nodes: list[SearchNode]
    nbest: list[int]  # ids of the returned hypotheses' finished nodes, best first


class SentenceRecord(TypedDict):
    """Everything about one decoded (or scored) sentence."""

    line: int
    source: str  # whitespace normalised
    translation: str  # a scored pair: the target given
    truncated: bool  # the source was cut to the run's longest
    score: float  # log_prob over the length penalty
    log_prob: float  # log P(translation, </s> | source)
    source_pieces: list[str]  # the subwords read, then </s>
    target_pieces: list[str]  # the subwords written, then </s>
    source_words: list[str]  # the words `links` index (with links or maps)
    target_words: list[str]
    alignment: str  # Pharaoh i-j: source word i, target word j
    links: list[list[int]]  # the same links as [i, j] pairs
    attention: list[AttentionMap] | None  # with maps
    default_attention: int | None  # the map the links are read off
    explanations: NotRequired[list[ExplanationRecord]]  # one map each, after the attention's
    member_weights: NotRequired[list[list[list[float]]]]  # an ensemble's, aligning map
    nbest: NotRequired[list[NbestEntry]]
    prefix: NotRequired[PrefixRecord]
    search: NotRequired[SearchRecord]
    alternatives: NotRequired[list[AlternativeRecord]]
    target: NotRequired[str]  # a scored pair: the target given
    token_log_probs: NotRequired[list[float]]  # a scored pair: each of target_pieces'


class ImageRecord(TypedDict):
    """What an image run read in one image, and where it looked at each step."""

    image: int  # 1-based position of the image in its batch
    text: str  # the symbols read, space-separated
    truncated: bool  # the reading was cut at the longest allowed
    score: float
    log_prob: float
    target_pieces: list[str]  # the symbols read, then </s>: one per decoder step
    attention: list[list[list[float]]] | None  # with maps: (T, H, W) mass per pixel
    glimpses: list[tuple[float, float]] | None  # a glimpse model's (row, col) centres
    explanation: ExplanationRecord | None  # the method whose values the maps are


# --- the sentence -----------------------------------------------------------------------


def sentence_record(
    sentence: Sentence,
    vocab: Any,
    choice: AttentionChoice,
    *,
    links: bool = True,
    maps: Literal["every", "aligning"] | None = "every",
    threshold: float | None = None,
    explanations: Sequence[Explanation] = (),
    search: bool = True,
) -> SentenceRecord:
    """Everything about one decoded sentence as JSON-ready data.

    `links`: the word alignment (else `alignment` "" and `links` []); `maps`: "every" map
    the model has, the "aligning" one, or None (`attention` null); the words are given
    with either. `threshold` links a target word to every source word weighing that much
    too. `explanations` (`attnmt.explain.Explanation`s of the translation) are drawn after
    the attention, and the first links the words. `search`: the recorded search, when the
    sentence has one. A blank line gives an empty record.
    """
    result = sentence.translation
    record: SentenceRecord = {
        "line": sentence.line,
        "source": sentence.source,
        "translation": "" if result is None else result.text,
        "truncated": sentence.truncated,
        "score": 0.0 if result is None else round(result.score, SCORE_DIGITS),
        "log_prob": 0.0 if result is None else round(result.log_prob or 0.0, SCORE_DIGITS),
        "source_pieces": [],
        "target_pieces": [],
        "source_words": [],
        "target_words": [],
        "alignment": "",
        "links": [],
        "attention": None if maps is None else [],
        "default_attention": None,
    }
    if result is None:  # a blank line: nothing was decoded
        return record
    record["source_pieces"] = labels(vocab.src, sentence.ids)
    record["target_pieces"] = labels(vocab.tgt, result.tokens)
    if explanations:
        record["explanations"] = [explanation_record(e) for e in explanations]
    if not (links or maps is not None or explanations or result.nbest is not None):
        return _steered(record, sentence, vocab, choice, search)  # no words asked for
    src = source_words(vocab.src, sentence.source, len(sentence.ids))
    tgt = target_words(vocab.tgt, result.tokens, result.text)
    drawn, default = _maps(result, choice, maps, src, tgt, threshold)
    if explanations:
        default = len(drawn)
        drawn += [_explanation_map(e, choice, src, tgt, threshold) for e in explanations]
    if links or maps is not None:
        record["source_words"], record["target_words"] = src.words, tgt.words
    if links and drawn:
        view = drawn[default][1]
        record["alignment"] = format_pharaoh(view.links)
        record["links"] = [list(link) for link in sorted(view.links)]
    if maps is not None:
        record["attention"] = [entry for entry, _ in drawn]
        record["default_attention"] = default if drawn else None
    weights = None if result.weights is None else to_numpy(result.weights)
    if choice.members and weights is not None and weights.ndim == 3:  # (T, M, S)
        record["member_weights"] = [rounded_matrix(weights[:, m]) for m in range(choice.members)]
    if result.nbest is not None:
        record["nbest"] = [_nbest_entry(h, src, vocab, choice, threshold) for h in result.nbest]
    return _steered(record, sentence, vocab, choice, search)


def given_record(
    named: dict[str, Any],
    source: Sequence[str],
    target: Sequence[str],
    *,
    scale: str = ATTENTION_SCALE,
    links: bool = True,
    placed: dict[str, tuple[int, int]] | None = None,
) -> SentenceRecord:
    """The record of matrices of one's own (`attnmt.show`): each (T, S) matrix of `named`
    one map, its rows the `target` words and its columns the `source` words (a word is its
    own subword); `placed` gives a map its (layer, head). With `links`, each target word
    is linked to the source word it weighs most, read off the first map."""
    drawn = []
    for name, matrix in named.items():
        array = np.asarray(to_numpy(matrix), dtype=np.float64)
        best = array.argmax(axis=1) if array.size else []
        found = {(int(i), j) for j, i in enumerate(best)} if links else set()
        rounded = rounded_matrix(array)
        entry: AttentionMap = {
            "name": name, "method": "attention", "scale": scale, "layer": None, "head": None,
            "subword": rounded, "word": rounded, "alignment": format_pharaoh(found),
        }  # fmt: skip
        entry["layer"], entry["head"] = (placed or {}).get(name, (None, None))
        drawn.append((entry, found))
    found = drawn[0][1] if drawn else set()
    return {
        "line": 1, "source": " ".join(source), "translation": " ".join(target),
        "truncated": False, "score": 0.0, "log_prob": 0.0,
        "source_pieces": list(source), "target_pieces": list(target),
        "source_words": list(source), "target_words": list(target),
        "alignment": format_pharaoh(found), "links": [list(link) for link in sorted(found)],
        "attention": [entry for entry, _ in drawn], "default_attention": 0 if drawn else None,
    }  # fmt: skip


def image_record(
    sentence: Sentence,
    vocab: Any,
    *,
    image: int,
    height: int,
    width: int,
    longest: int,
    maps: bool = True,
    glimpses: Any = None,
) -> ImageRecord:
    """The record of an image read (`sentence`: its image text decoded): the symbols, the
    scores, and with `maps` each step's weights spread over the H x W pixels
    (`attnmt.data.grid.pixel_map`); an explanation of the reading is its map in place of the
    weights (the method that made it said). `longest`: symbols read before a reading is
    cut; `glimpses`: a glimpse model's (N, 2) path, when it has one."""
    done = sentence.translation
    if done is None:  # an image text is never blank
        raise ValueError(f"image {image} was not decoded")
    why = sentence.explanations[0] if sentence.explanations else None
    record: ImageRecord = {
        "image": image,
        "text": done.text,
        "truncated": len(done.tokens) >= longest,
        "score": round(done.score, SCORE_DIGITS),
        "log_prob": round(done.log_prob or 0.0, SCORE_DIGITS),
        "target_pieces": labels(vocab.tgt, done.tokens),
        "attention": None,
        "glimpses": None,
        "explanation": None if why is None else explanation_record(why),
    }
    if maps and done.weights is not None:
        steps = np.asarray(to_numpy(done.weights), dtype=np.float32)  # (T, G) or (T, H·W)
        record["attention"] = [rounded_matrix(step) for step in pixel_map(steps, height, width)]
        if glimpses is not None:
            record["glimpses"] = [(round(float(r), 2), round(float(c), 2)) for r, c in glimpses]
    return record


def _steered(
    record: SentenceRecord, sentence: Sentence, vocab: Any, choice: AttentionChoice, search: bool
) -> SentenceRecord:
    """The record with the sentence's "prefix", "search" (if asked) and "alternatives"."""
    if sentence.prefix:
        record["prefix"] = {
            "text": vocab.tgt.decode(sentence.prefix),
            "tokens": len(sentence.prefix),
            "pieces": [str(p) for p in vocab.tgt.id_pieces(sentence.prefix)],
            "ids": list(sentence.prefix),
        }
    if search and sentence.translation is not None and sentence.translation.search is not None:
        record["search"] = search_record(sentence, vocab, choice)
    if sentence.alternatives is not None:
        alts = sentence.alternatives
        record["alternatives"] = [alternative_record(a, vocab.tgt, choice) for a in alts]
    return record


def scored_record(
    sentence: Sentence,
    target: str,
    target_ids: Sequence[int],
    scored: Any,
    vocab: Any,
    choice: AttentionChoice,
    **options: Any,
) -> SentenceRecord:
    """The record of a scored pair (`scored`, from `attnmt.decoding.scoring.score_pairs`):
    `sentence_record`'s (`options`) of `target` as the translation of `sentence`, with
    `target` and each target subword's log-probability (`token_log_probs`, </s> last)."""
    done = Translation(
        target, list(target_ids), scored.score, scored.weights, log_prob=scored.log_prob
    )
    record = sentence_record(replace(sentence, translation=done), vocab, choice, **options)
    record["target"] = target
    record["token_log_probs"] = [round(x, SCORE_DIGITS) for x in scored.token_log_probs]
    return record


def flat_record(record: SentenceRecord, choice: AttentionChoice) -> dict[str, Any]:
    """The record as `attnmt translate` and `attnmt score` write it with `--alignments
    json` (docs/decoding.md): the aligning map as `subword_weights` and `word_weights`,
    and `attention` saying which map that is (`AttentionChoice.as_dict`)."""
    chosen = (record["attention"] or [None])[record["default_attention"] or 0]  # None: no map
    flat: dict[str, Any] = {k: v for k, v in record.items() if k != "default_attention"}
    flat["attention"] = choice.as_dict()
    flat["word_weights"] = [] if chosen is None else chosen["word"]
    flat["subword_weights"] = [] if chosen is None else chosen["subword"]
    return flat


def explanation_record(done: Explanation) -> ExplanationRecord:
    """What an explanation method did and cost (`attnmt.explain.Explanation`)."""
    error = done.completeness
    return {
        "method": done.method,
        "scale": done.scale,
        "ms": round(1000 * done.seconds, 1),
        "forward": done.forward,
        "backward": done.backward,
        "completeness_error": None if error is None else round(error, WEIGHT_DIGITS),
    }


def rounded_matrix(matrix: Any) -> list[list[float]]:
    """A weight matrix as JSON-ready rows of floats (`WEIGHT_DIGITS` decimals)."""
    return [[round(float(x), WEIGHT_DIGITS) for x in row] for row in matrix]


def _maps(
    result: Translation,
    choice: AttentionChoice,
    maps: Literal["every", "aligning"] | None,
    src: SideWords,
    tgt: SideWords,
    threshold: float | None,
) -> tuple[list[tuple[AttentionMap, WordView]], int]:
    """The maps of the decoded weights, each with its word view, and the index of the one
    `choice` names."""
    if result.weights is None:
        return [], 0
    choices = [choice]
    if maps == "every":  # each keeps the offset that aligns words
        choices = [replace(c, offset=choice.offset) for c in every_choice(choice)]
    drawn = []
    for one in choices:
        layer = one.layer if one.transformer else None
        matrix = select(result.weights, one)
        name = one.describe()
        entry = _map(name, "attention", ATTENTION_SCALE, matrix, src, tgt, threshold, one.offset)
        drawn.append(_placed(entry, layer, one.head))
    return drawn, choices.index(choice) if choice in choices else 0


def _explanation_map(
    why: Explanation, choice: AttentionChoice, src: SideWords, tgt: SideWords, threshold
) -> tuple[AttentionMap, WordView]:
    """An explanation's map: a method that reads the attention reads `choice`'s (named
    after it on a Transformer, its rows read from `choice.offset` as the attention's);
    the others explain output t by row t."""
    if not why.reads_attention:
        return _map(why.method, why.method, why.scale, why.matrix, src, tgt, threshold)
    name = f"{why.method}, {choice.describe()}" if choice.transformer else why.method
    layer = choice.layer if choice.transformer else None
    entry = _map(name, why.method, why.scale, why.matrix, src, tgt, threshold, choice.offset)
    return _placed(entry, layer, choice.head)


def _placed(drawn: tuple[AttentionMap, WordView], layer, head) -> tuple[AttentionMap, WordView]:
    """A map with the 1-based layer and head it reads (None: not one layer, or a mean)."""
    entry, view = drawn
    entry["layer"], entry["head"] = layer, head
    return entry, view


def _map(
    name: str,
    method: str,
    scale: str,
    matrix: Any,
    src: SideWords,
    tgt: SideWords,
    threshold: float | None,
    offset: int = 0,
) -> tuple[AttentionMap, WordView]:
    """One map: its matrices at both levels, the word alignment they give, its view."""
    matrix = to_numpy(matrix)  # (T, S)
    view = _view(matrix, offset, src, tgt, threshold)
    entry: AttentionMap = {
        "name": name,
        "method": method,
        "scale": scale,
        "layer": None,
        "head": None,
        "subword": rounded_matrix(matrix),
        "word": rounded_matrix(view.word_weights),
        "alignment": format_pharaoh(view.links),
    }
    return entry, view


def _view(
    matrix: Any, offset: int, src: SideWords, tgt: SideWords, threshold: float | None
) -> WordView:
    """Words and links of a (T, S) matrix, row t read from step t + `offset`."""
    return word_view(shift_rows(to_numpy(matrix), offset), src, tgt, threshold=threshold)


def _nbest_entry(
    hyp: Any, src: SideWords, vocab: Any, choice: AttentionChoice, threshold: float | None
) -> NbestEntry:
    """One hypothesis of an n-best list, its links read as the best's are."""
    text = vocab.tgt.decode(hyp.tokens)
    links: set = set()
    if hyp.weights is not None:
        tgt = target_words(vocab.tgt, hyp.tokens, text)
        links = _view(select(hyp.weights, choice), choice.offset, src, tgt, threshold).links
    return {
        "translation": text,
        "score": round(hyp.score, SCORE_DIGITS),
        "log_prob": round(hyp.log_prob, SCORE_DIGITS),
        "alignment": format_pharaoh(links),
    }


# --- the alternatives and the search ---------------------------------------------------


def alternative_record(alt: Alternative, tgt: Any, choice: AttentionChoice) -> AlternativeRecord:
    """One of `Translator.alternatives`' answers: the subword after the prefix, its
    probability there, the completed translation, its scores and attention."""
    done = alt.translation
    record: AlternativeRecord = {
        "token": alt.token,
        "piece": str(tgt.id_pieces([alt.token])[0]),
        "prob": round(math.exp(alt.log_prob), SCORE_DIGITS),
        "log_prob_token": round(alt.log_prob, SCORE_DIGITS),
        "translation": done.text,
        "score": round(done.score, SCORE_DIGITS),
        "log_prob": round(done.log_prob or 0.0, SCORE_DIGITS),
        "target_pieces": labels(tgt, done.tokens),
    }
    if done.weights is not None:
        record["subword_weights"] = rounded_matrix(select(done.weights, choice))
    return record


def search_record(
    sentence: Sentence, vocab: Any, choice: AttentionChoice, *, heads: bool = False
) -> SearchRecord:
    """A sentence's recorded search (`Translator(record_search=True)`), see `node_record`."""
    result = sentence.translation
    if result is None or result.search is None:
        raise ValueError("search_record() needs a translation made with record_search")
    tree = result.search
    return {
        "beam": tree.beam,
        "alpha": tree.alpha,
        "source_pieces": labels(vocab.src, sentence.ids),
        "nodes": [node_record(n, vocab.tgt, choice, heads=heads) for n in tree.nodes],
        "nbest": list(tree.nbest),
    }


def node_record(
    node: Node, tgt: Any, choice: AttentionChoice, *, heads: bool = False
) -> SearchNode:
    """One node of a recorded search (`--search-json`, the server's "search" and its
    stream). `attention`: the row of the run's aligning map (`choice`); with `heads`, a
    Transformer's every layer and head too (`attention_heads`, L×H×S)."""
    d = SEARCH_DIGITS
    pieces = tgt.id_pieces([t for t, _ in node.rejected])
    record: SearchNode = {
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
            [str(piece), round(lp, d)] for piece, (_, lp) in zip(pieces, node.rejected, strict=True)
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
