"""Corpus scores with sacrebleu, several references and exact match."""

import pytest

from attnmt.metrics import bleu_by_length, corpus_scores, markdown_table, reference_streams


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


# --- BLEU by source length -----------------------------------------------------------------


def _words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def test_bleu_by_length_buckets_count_and_score():
    # Source lengths 3, 10 -> "1-10"; 11 -> "11-20"; 25 -> "21-30" (k*10 < words <= (k+1)*10).
    sources = [_words(3), _words(10), _words(11), _words(25)]
    refs = ["the cat sat on the mat", "it rains on the green hills", "a b c d e", "x y z w v"]
    hyps = [refs[0], refs[1], "nothing in common here", "x y z w v"]
    rows = bleu_by_length(sources, hyps, [[r] for r in refs])
    assert [r["label"] for r in rows] == ["1-10", "11-20", "21-30"]
    assert [(r["lo"], r["hi"]) for r in rows] == [(1, 10), (11, 20), (21, 30)]
    assert [r["sentences"] for r in rows] == [2, 1, 1]
    assert rows[0]["bleu"] == pytest.approx(100.0)
    assert rows[0]["chrf"] == pytest.approx(100.0)
    assert rows[1]["bleu"] == pytest.approx(0.0)
    assert rows[2]["bleu"] == pytest.approx(100.0)


def test_bleu_by_length_leaves_out_empty_buckets_and_takes_a_width():
    sources = [_words(2), _words(5), _words(6), _words(16)]
    hyps = refs = ["one two three four five"] * 4
    rows = bleu_by_length(sources, hyps, [[r] for r in refs], width=5)
    # 2 and 5 words -> "1-5", 6 -> "6-10", 16 -> "16-20"; "11-15" has nobody and is left out.
    assert [(r["label"], r["sentences"]) for r in rows] == [("1-5", 2), ("6-10", 1), ("16-20", 1)]


def test_bleu_by_length_refuses_bad_input():
    with pytest.raises(ValueError, match="one per sentence"):
        bleu_by_length(["a"], ["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="width"):
        bleu_by_length(["a"], ["a"], [["a"]], width=0)


def test_markdown_table_of_length_rows():
    rows = [{"label": "1-10", "lo": 1, "hi": 10, "sentences": 3, "bleu": 25.0, "chrf": 51.234}]
    table = markdown_table(rows)
    assert table.splitlines() == [
        "| Source words | Sentences | BLEU | chrF |",
        "|---|---:|---:|---:|",
        "| 1-10 | 3 | 25.00 | 51.23 |",
    ]
    assert markdown_table(rows, columns=("label", "missing")).splitlines()[-1] == "| 1-10 |  |"


def test_empty_reference_is_missing_not_empty():
    hyp = ["the cat sat on the mat"]
    ref = "the black cat sat quietly on the old mat by the door"
    assert corpus_scores(hyp, [[ref, ""]])["bleu"] == corpus_scores(hyp, [[ref]])["bleu"] < 100


def test_empty_corpus_still_has_signatures():
    scores = corpus_scores([], [])
    assert scores["sentences"] == 0 and scores["bleu_signature"] == ""


def test_bleu_tokenizer_follows_the_target_language():
    from attnmt.metrics import bleu_tokenizer

    assert bleu_tokenizer("zh-ncv") == "zh"
    # ja-mecab where MeCab is installed, else characters (tests/test_scripts_scores.py)
    assert bleu_tokenizer("ja-shinkaiyaku") in ("ja-mecab", "char")
    assert bleu_tokenizer("fr-segond") == "13a" and bleu_tokenizer("en") == "13a"
    one_token_each = corpus_scores(["神は世を愛された"], [["神は世を愛した"]], tokenize="char")
    assert 0 < one_token_each["bleu"] < 100
    assert "tok:char" in one_token_each["bleu_signature"]
