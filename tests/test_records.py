"""The sentence record and the search node, defined and built once
(attnmt.decoding.records): what they hold on a hand-computed sentence, and every face's
copy of their definition (the server's schemas, the tree's header, the docs) kept equal
to them field for field."""

from __future__ import annotations

import re
import types
import typing
from itertools import takewhile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import BaseModel

from attnmt.data.synthetic import SymbolVocab
from attnmt.decoding.attention_choice import AttentionChoice
from attnmt.decoding.decode_ids import Translation
from attnmt.decoding.hypotheses import Hypothesis
from attnmt.decoding.records import (
    AlternativeRecord,
    AttentionMap,
    ExplanationRecord,
    ImageRecord,
    NbestEntry,
    PrefixRecord,
    SearchNode,
    SearchRecord,
    SentenceRecord,
    explanation_record,
    flat_record,
    scored_record,
    sentence_record,
)
from attnmt.decoding.translator import Sentence
from attnmt.explain.methods import Explanation
from attnmt.serve import schemas

ROOT = Path(__file__).resolve().parents[1]
VOCAB = SimpleNamespace(src=SymbolVocab(), tgt=SymbolVocab())  # "0" is id 4, "1" id 5, ...
RNN = AttentionChoice()
# Target "2 1" (then </s>) reading source "1 2" (then </s>): each word looks at the other.
WEIGHTS = np.array([[0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.3, 0.3, 0.4]])  # (T + 1, S + 1)


def _sentence(**translation) -> Sentence:
    done = Translation("2 1", [6, 5], -0.4, WEIGHTS, log_prob=-0.81234567, **translation)
    return Sentence(3, "1 2", [5, 6], done)


def _keys(record: type) -> set[str]:
    return set(record.__required_keys__ | record.__optional_keys__)


def test_a_record_reads_words_pieces_links_and_its_map_off_the_weights():
    record = sentence_record(_sentence(), VOCAB, RNN)
    assert (record["line"], record["source"], record["translation"]) == (3, "1 2", "2 1")
    assert (record["score"], record["log_prob"]) == (-0.4, -0.812346)  # 6 decimals
    assert record["source_pieces"] == ["1", "2", "</s>"]
    assert record["target_pieces"] == ["2", "1", "</s>"]
    assert (record["source_words"], record["target_words"]) == (["1", "2"], ["2", "1"])
    # Each target word is linked to the source word it weighs most: "2"-"2", "1"-"1".
    assert record["links"] == [[0, 1], [1, 0]] and record["alignment"] == "0-1 1-0"
    (only,) = record["attention"]
    assert record["default_attention"] == 0
    assert only == {
        "name": "decoder attention",
        "method": "attention",
        "scale": "weights",
        "layer": None,
        "head": None,
        "subword": WEIGHTS.tolist(),
        "word": [[0.1, 0.8], [0.7, 0.2]],  # the EOS row and column dropped
        "alignment": "0-1 1-0",
    }
    assert set(record) <= _keys(SentenceRecord)


def test_what_is_not_asked_for_is_left_empty():
    record = sentence_record(_sentence(), VOCAB, RNN, links=False, maps=None)
    assert record["attention"] is None and record["default_attention"] is None
    assert record["links"] == [] and record["alignment"] == "" and record["source_words"] == []
    assert record["target_pieces"] == ["2", "1", "</s>"]  # the pieces always
    drawn = sentence_record(_sentence(), VOCAB, RNN, links=False)
    assert drawn["links"] == [] and drawn["source_words"] == ["1", "2"]  # words for the map


def test_a_blank_line_gives_an_empty_record():
    record = sentence_record(Sentence(2, ""), VOCAB, RNN)
    assert record["translation"] == "" and record["score"] == record["log_prob"] == 0.0
    assert record["source_pieces"] == record["links"] == record["attention"] == []
    assert record["default_attention"] is None


def test_nbest_entries_carry_their_alignment():
    second = Hypothesis(tokens=[5, 6], score=-1.23456789, log_prob=-2.5, weights=WEIGHTS[::-1])
    first = Hypothesis(tokens=[6, 5], score=-0.4, log_prob=-0.81234567, weights=WEIGHTS)
    record = sentence_record(_sentence(nbest=[first, second]), VOCAB, RNN)
    assert record["nbest"] == [
        {"translation": "2 1", "score": -0.4, "log_prob": -0.812346, "alignment": "0-1 1-0"},
        {"translation": "1 2", "score": -1.234568, "log_prob": -2.5, "alignment": "0-0 0-1"},
    ]


def test_an_explanation_is_rounded_once():
    done = Explanation(
        method="integrated-gradients",
        matrix=WEIGHTS,
        seconds=0.01234,
        forward=10,
        backward=8,
        completeness=0.0123456789,
    )
    assert explanation_record(done) == {
        "method": "integrated-gradients",
        "scale": "signed",
        "ms": 12.3,
        "forward": 10,
        "backward": 8,
        "completeness_error": 0.01235,
    }
    # One meaning everywhere (attnmt.service): beside the attention, the first links words.
    beside = sentence_record(_sentence(), VOCAB, RNN, explanations=[done])
    assert [m["method"] for m in beside["attention"]] == ["attention", "integrated-gradients"]
    assert beside["explanations"] == [explanation_record(done)]
    assert beside["default_attention"] == 1
    shown = beside["attention"][1]
    assert (shown["name"], shown["scale"], shown["layer"]) == (
        "integrated-gradients",
        "signed",
        None,
    )
    assert beside["alignment"] == shown["alignment"]
    plain = sentence_record(_sentence(), VOCAB, RNN)
    assert plain["default_attention"] == 0 and "explanations" not in plain


def test_the_cli_line_is_the_record_with_its_aligning_map_flattened():
    record = sentence_record(_sentence(), VOCAB, RNN, maps="aligning")
    line = flat_record(record, RNN)
    assert line["attention"] == {"layer": None, "head": None, "offset": 0}
    assert line["subword_weights"] == WEIGHTS.tolist()
    assert line["word_weights"] == [[0.1, 0.8], [0.7, 0.2]]
    assert "default_attention" not in line and line["links"] == record["links"]
    blank = flat_record(sentence_record(Sentence(1, ""), VOCAB, RNN, maps="aligning"), RNN)
    assert blank["subword_weights"] == blank["word_weights"] == []


def test_a_scored_pair_is_the_record_of_its_target():
    scored = SimpleNamespace(
        score=-0.4, log_prob=-0.8, token_log_probs=[-0.1234567, -0.7, 0.0], weights=WEIGHTS
    )
    record = scored_record(Sentence(1, "1 2", [5, 6]), "2 1", [6, 5], scored, VOCAB, RNN)
    assert record["translation"] == record["target"] == "2 1"
    assert record["token_log_probs"] == [-0.123457, -0.7, 0.0]
    assert record["alignment"] == "0-1 1-0"


# --- every copy of the definition, field for field --------------------------------------

# What a served line leaves out of the record: the server decodes one run (no ensemble
# `member_weights`); a scored pair's `translation` is its target, and it has no n-best. It
# adds `error`.
NOT_SERVED = {"member_weights", "target"}
SERVED = [
    (schemas.LineResult, _keys(SentenceRecord) - NOT_SERVED - {"token_log_probs"} | {"error"}),
    (schemas.ScoreResult, _keys(SentenceRecord) - NOT_SERVED | {"error"}),
    (schemas.NbestResult, _keys(NbestEntry)),
    (schemas.ImageResult, _keys(ImageRecord)),
    (schemas.AttentionMap, _keys(AttentionMap)),
    (schemas.ExplanationInfo, _keys(ExplanationRecord)),
    (schemas.PrefixInfo, _keys(PrefixRecord)),
    (schemas.AlternativeResult, _keys(AlternativeRecord)),
    (schemas.SearchRecord, _keys(SearchRecord)),
    # `attention_heads` is --search-json's alone (every layer and head of every node).
    (schemas.SearchNode, _keys(SearchNode) - {"attention_heads"}),
]


@pytest.mark.parametrize(("model", "fields"), SERVED, ids=[m.__name__ for m, _ in SERVED])
def test_the_server_schemas_are_the_record_field_for_field(model: type[BaseModel], fields):
    assert set(model.model_fields) == fields


def test_the_tree_component_documents_the_node_as_defined():
    lines = (ROOT / "src/attnmt/views/tree.js").read_text(encoding="utf-8").splitlines()
    text = " ".join(line[2:] for line in takewhile(lambda x: x.startswith("//"), lines))
    search = re.search(r"`search` is \{([^}]*)\}", text)
    node = re.search(r"a node is \{(.*?)\}:", text, re.S)
    assert search and node, "tree.js's header no longer lists the search's and a node's fields"
    assert set(re.findall(r"\w+", search.group(1))) == _keys(SearchRecord)
    named = re.sub(r"\([^)]*\)|:\s*\[\[.*?\]\]", "", node.group(1))  # notes and examples
    assert set(re.findall(r"\w+", named)) == _keys(SearchNode) - {"attention_heads"}


def test_the_docs_table_of_a_node_lists_its_fields():
    docs = (ROOT / "docs/decoding.md").read_text(encoding="utf-8")
    table = docs.split("and `nodes`, every candidate", 1)[1].split("\n\n", 2)[1]
    keys = {
        key for row in table.splitlines()[2:] for key in re.findall(r"`(\w+)`", row.split("|")[1])
    }
    assert keys == _keys(SearchNode)


# The served model of each record type: a field's type is compared through these names.
SAME_TYPE = {
    schemas.AttentionMap: AttentionMap,
    schemas.ExplanationInfo: ExplanationRecord,
    schemas.PrefixInfo: PrefixRecord,
    schemas.AlternativeResult: AlternativeRecord,
    schemas.SearchRecord: SearchRecord,
    schemas.SearchNode: SearchNode,
    schemas.NbestResult: NbestEntry,
    schemas.LineResult: SentenceRecord,
    schemas.ImageResult: ImageRecord,
    schemas.ScoreResult: SentenceRecord,
}


def _kind(tp) -> frozenset[str]:
    """A type as JSON sees it, nulls left out: a tuple is an array as a list is, a served
    model is the record type it serves, a literal of strings is a string."""
    if tp is type(None) or tp is None:
        return frozenset()
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return frozenset().union(*(_kind(a) for a in args))
    if origin is typing.Literal:
        return frozenset({type(args[0]).__name__})
    if origin in (list, tuple):
        inner = frozenset().union(*(_kind(a) for a in args if a is not Ellipsis))
        return frozenset({f"list[{'|'.join(sorted(inner)) or 'any'}]"})
    if tp is typing.Any:
        return frozenset({"any"})
    record = SAME_TYPE.get(tp, tp)
    return frozenset({record.__name__})


@pytest.mark.parametrize("model", list(SAME_TYPE), ids=[m.__name__ for m in SAME_TYPE])
def test_the_server_schemas_are_the_record_type_for_type(model: type[BaseModel]):
    record = SAME_TYPE[model]
    hints = typing.get_type_hints(record)
    for name, field in model.model_fields.items():
        if name in hints:
            assert _kind(field.annotation) == _kind(hints[name]), (model.__name__, name)
