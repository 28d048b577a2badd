"""BLEU tokenized for the target language as the field reports it (Chinese `zh`, Japanese
`ja-mecab`, Korean `ko-mecab`, else `13a`), characters where MeCab is missing, said in the
signature and the report; chrF beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt import metrics
from attnmt.metrics import bleu_tokenizer, corpus_scores, tokenizer_note
from attnmt.report import markdown

JAPANESE = (["神は世を愛された"], [["神は世を愛した"]])
KOREAN = (["하나님이 세상을 사랑하셨다"], [["하나님이 세상을 이처럼 사랑하사"]])


def test_every_version_gets_the_tokenizer_of_its_language():
    assert bleu_tokenizer("zh-ncv") == "zh"
    for version in ("en-web", "fr-segond", "ar-svd", "fa-opv", "ru-synodal", "hi-irv", "bn-cl"):
        assert bleu_tokenizer(version) == "13a", version
        assert tokenizer_note(version) == ""
    assert bleu_tokenizer("ja-shinkaiyaku") in ("ja-mecab", "char")
    assert bleu_tokenizer("ko-krv") in ("ko-mecab", "char")


def test_chinese_is_scored_on_characters_not_on_one_token_a_verse():
    hypothesis, reference = ["起初神创造天地"], [["起初， 神创造天地。"]]
    zh = corpus_scores(hypothesis, reference, tokenize=bleu_tokenizer("zh-ncv"))
    spaces = corpus_scores(hypothesis, reference, tokenize="13a")
    assert zh["bleu"] > 30 > spaces["bleu"] and "tok:zh|" in zh["bleu_signature"]
    assert zh["chrf"] > 0 and zh["chrf_signature"]


@pytest.mark.parametrize(
    ("version", "tokenizer", "extra", "texts"),
    [("ja-shinkaiyaku", "ja-mecab", "ja", JAPANESE), ("ko-krv", "ko-mecab", "ko", KOREAN)],
)
def test_mecab_segments_words_where_it_is_installed(version, tokenizer, extra, texts):
    if bleu_tokenizer(version) != tokenizer:
        pytest.skip(f"MeCab for {version} is not installed (pip install 'sacrebleu[{extra}]')")
    scores = corpus_scores(*texts, tokenize=tokenizer)
    assert f"tok:{tokenizer}-" in scores["bleu_signature"]  # with MeCab's version
    assert tokenizer_note(version) == ""
    chars = corpus_scores(*texts, tokenize="char")
    assert scores["bleu"] != chars["bleu"]  # words, not characters


def test_without_mecab_bleu_falls_back_to_characters_and_says_so(monkeypatch):
    monkeypatch.setattr(metrics, "_unavailable", lambda tokenize: "MeCab is not installed")
    assert bleu_tokenizer("ja-shinkaiyaku") == "char" and bleu_tokenizer("ko-krv") == "char"
    assert bleu_tokenizer("zh-ncv") == "zh" and tokenizer_note("zh-ncv") == ""
    note = tokenizer_note("ja-shinkaiyaku")
    assert "tok:char" in note and "ja-mecab" in note and "sacrebleu[ja]" in note
    assert "sacrebleu[ko]" in tokenizer_note("ko-krv")
    scores = corpus_scores(*JAPANESE, tokenize=bleu_tokenizer("ja-shinkaiyaku"))
    assert "tok:char|" in scores["bleu_signature"] and 0 < scores["bleu"] < 100
    # The evaluation report states it under the scores.
    result = {
        **scores,
        "run": "runs/en-ja",
        "split": "test",
        "beam": 1,
        "checkpoint": "step-00000080",
        "step": 80,
        "model": "rnnsearch",
        "corpus": "bible",
        "bleu_note": note,
        "bleu_by_length": [],
        "truncated": [],
        "speed": dict.fromkeys(
            ("sentences", "seconds", "sentences_per_s", "output_subwords_per_s"), 1
        )
        | {"device": "cpu", "batch_tokens": 4000},
    }
    report = markdown(result, "test-beam1-length.png")
    assert note in report and report.index(note) > report.index("| chrF |")
    assert note not in markdown({**result, "bleu_note": ""}, "test-beam1-length.png")


def test_the_evaluate_summary_prints_the_tokenizer_note(capsys):
    from attnmt.cli.evaluate import print_summary

    result = {
        "split": "test", "sentences": 2, "beam": 1, "bleu": 1.0, "chrf": 2.0, "exact": 0.0,
        "references": 1, "bleu_signature": "nrefs:1|tok:char", "speed": {
            "sentences_per_s": 1.0, "device": "cpu"},
        "bleu_note": "BLEU on characters: MeCab is not installed", "truncated": [],
    }  # fmt: skip
    print_summary(result, [Path("runs/x/eval/test-beam1.json")])
    out = capsys.readouterr().out
    assert "tok:char" in out and "BLEU on characters: MeCab is not installed" in out
