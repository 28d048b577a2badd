"""attnmt.data.parsed: installed data parsed once per machine, never a stale or a broken
result: the cache is keyed by its files as they are, rebuilt when unreadable, skipped when
it cannot be written; the gold alignments and a Bible version read back equal to a fresh
parse."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attnmt.data import alignments, bible
from attnmt.data.parsed import cache_root, cached_json


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ATTNMT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_value_is_built_once_and_again_when_its_files_change(cache, tmp_path):
    source = tmp_path / "words.txt"
    source.write_text("one two", encoding="utf-8")
    builds = []

    def build():
        builds.append(1)
        return source.read_text(encoding="utf-8").split()

    assert cached_json("words", [source], build) == ["one", "two"]
    assert cached_json("words", [source], build) == ["one", "two"]
    assert len(builds) == 1 and cache_root() == cache
    source.write_text("one two three", encoding="utf-8")  # another size: another key
    assert cached_json("words", [source], build) == ["one", "two", "three"]
    assert len(builds) == 2
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched only
    assert cached_json("words", [source], build) == ["one", "two", "three"]
    assert len(builds) == 3


def test_an_unreadable_cache_is_built_again_and_an_unwritable_one_skipped(
    cache, tmp_path, monkeypatch
):
    source = tmp_path / "words.txt"
    source.write_text("a b", encoding="utf-8")
    cached_json("words", [source], lambda: ["a", "b"])
    (made,) = (cache / "parsed").iterdir()
    made.write_text('["a", "b"', encoding="utf-8")  # cut short
    assert cached_json("words", [source], lambda: ["rebuilt"]) == ["rebuilt"]
    assert cached_json("words", [source], lambda: ["not again"]) == ["rebuilt"]
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("", encoding="utf-8")
    monkeypatch.setenv("ATTNMT_CACHE", str(blocked))  # a file where the folder should be
    assert cached_json("words", [source], lambda: ["unkept"]) == ["unkept"]
    assert not list(tmp_path.glob("**/*.part"))


@pytest.mark.slow
def test_the_gold_and_a_bible_version_read_back_as_a_fresh_parse(cache):
    fresh = alignments._read_gold(alignments.locate(), False)
    assert alignments.load_gold() == fresh  # built and kept
    assert alignments.load_gold() == fresh  # read back
    assert {p.name.split("-")[1] for p in (cache / "parsed").iterdir()} == {"words"}
    assert bible.read_version("fr-segond") == bible.read_version("fr-segond")
    kept = next((cache / "parsed").glob("bible-fr-segond-*.json"))
    assert kept.stat().st_size > 1_000_000
