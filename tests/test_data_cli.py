"""`attnmt data`: the action list, what `list` says and how fast it counts, `prepare` output."""

from __future__ import annotations

import json

import pytest

from attnmt.cli import main
from attnmt.data import bible


def test_data_without_an_action_lists_the_actions(capsys):
    assert main(["data"]) == 0
    out = capsys.readouterr().out
    for action in ("list", "prepare", "show"):
        assert any(
            line.split()[:1] == [action] and len(line.split()) > 1 for line in out.splitlines()
        )
    assert "attnmt data ACTION --help" in out


def test_list_says_what_it_lists(capsys):
    assert main(["data", "list"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "Bible" in first and "versions" in first and "verses" in first
    assert main(["data", "list", "--books"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "books" in first.lower() and "dev_books" in first


def test_verse_counts_clean_only_the_few_texts_that_can_be_empty(monkeypatch):
    calls = []
    real_clean = bible.clean

    def counting_clean(text):
        calls.append(text)
        return real_clean(text)

    monkeypatch.setattr(bible, "clean", counting_clean)
    counts = bible.verse_counts()
    assert len(calls) < 1000  # not the 964k texts of the database (that took seconds)
    monkeypatch.setattr(bible, "clean", real_clean)
    for name in ("en-bbe", "en-web", "zh-ncv", "ar-svd"):  # the definition, one version at a time
        assert counts[name] == sum(1 for text in bible.read_version(name).values() if text)


@pytest.mark.parametrize("text", ["", " ", "...", "[]", "(8:1)", " (٣:١) ", "\u3000.\u00a0"])
def test_every_text_clean_can_empty_is_a_candidate(text):
    # The SQL prefilter of verse_counts may let through more than it needs, never less.
    points = set(bible._removable())
    assert bible.clean(text) == ""
    assert all(ord(c) in points for c in text)


def test_prepare_of_a_synthetic_task_names_no_bible_version(tmp_path, capsys):
    cache = f"data.cache_dir={tmp_path}"
    overrides = ["--set", "data.corpus=reverse", "--set", "data.synthetic_train_size=40"]
    assert main(["data", "prepare", "configs/quickstart.yaml", *overrides, "--set", cache]) == 0
    out = capsys.readouterr().out
    assert out.startswith("prepared reverse")
    assert "en-web" not in out and "fr-segond" not in out
    assert (
        main(["data", "prepare", "configs/quickstart.yaml", *overrides, "--set", cache, "--json"])
        == 0
    )
    stats = json.loads(capsys.readouterr().out)
    assert "src" not in stats and "tgt" not in stats
