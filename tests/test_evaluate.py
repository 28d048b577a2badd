"""Corpus scores with sacrebleu, several references and exact match."""

import pytest

from attnmt.evaluate import corpus_scores, reference_streams


def test_identical_output_scores_100():
    hyps = ["le chat est noir .", "il pleut ."]
    scores = corpus_scores(hyps, [[h] for h in hyps])
    assert scores["bleu"] == pytest.approx(100.0)
    assert scores["chrf"] == pytest.approx(100.0)
    assert scores["exact"] == 100.0
    assert "nrefs:1" in scores["bleu_signature"]


def test_extra_reference_can_only_help_and_may_be_missing():
    hyps = ["the cat sat on the mat", "a dog barked loudly"]
    one = corpus_scores(hyps, [["the cat is on the mat"], ["the dog barked"]])
    two = corpus_scores(
        hyps, [["the cat is on the mat", "the cat sat on the mat"], ["the dog barked"]]
    )
    assert two["bleu"] > one["bleu"]
    assert two["references"] == 2
    assert two["exact"] == 0.0  # exact match is against the first reference only


def test_streams_pad_with_none():
    assert reference_streams([["a", "b"], ["c"]]) == [["a", "c"], ["b", None]]


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="one per sentence"):
        corpus_scores(["a"], [])
