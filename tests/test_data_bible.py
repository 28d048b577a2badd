"""The built-in Bible corpus: every cleaning rule on a real verse, the book split, dedup."""

from __future__ import annotations

import pytest

from attnmt.config import corpora
from attnmt.data import bible
from attnmt.errors import DataError


@pytest.fixture(scope="module")
def web():
    return bible.read_version("en-web")


@pytest.fixture(scope="module")
def segond():
    return bible.read_version("fr-segond")


def test_every_version_is_named_and_complete():
    counts = bible.verse_counts()
    assert len(counts) == 31
    assert {"en-web", "en-kjv", "en-bbe", "fr-segond", "fr-darby", "de-schlachter"} <= set(counts)
    assert {"es-rv1909", "ru-synodal", "zh-ncv", "ar-svd"} <= set(counts)
    assert counts["en-web"] == 31102
    assert counts["en-bbe"] < 31102  # its placeholder verses are not counted


def test_unknown_version_lists_the_valid_names():
    with pytest.raises(DataError, match="valid names: en-kjv"):
        corpora.version("en-wbe")


def test_inline_verse_markers_are_removed(segond):
    # Exodus 8:1 in Segond starts with the marker of the other numbering, "(7:26)".
    raw = "(7:26) L'Éternel dit à Moïse: Va vers Pharaon"
    assert bible.clean(raw) == "L'Éternel dit à Moïse: Va vers Pharaon"
    assert segond[(2, 8, 1)].startswith("L'Éternel dit à Moïse")
    assert "(" not in segond[(2, 8, 1)][:8]


def test_web_backticks_become_apostrophes(web):
    assert "God's Spirit" in web[(1, 1, 2)]
    assert "`" not in "".join(web.values())


def test_square_brackets_are_dropped_words_kept():
    darby = bible.read_version("fr-darby")
    assert "Que les eaux qui sont au-dessous des cieux" in darby[(1, 1, 9)]
    assert "[" not in darby[(1, 1, 9)]


def test_placeholder_and_marker_only_verses_become_empty():
    bbe = bible.read_version("en-bbe")
    assert bbe[(11, 15, 6)] == ""  # "..." in the Basic English Bible
    assert bbe[(40, 17, 21)] == ""  # "[]"
    assert bbe[(18, 8, 9)] == ""  # "(8:1)" and nothing else
    assert bible.clean(" [] ") == "" and bible.clean("...") == ""


def test_whitespace_is_normalized():
    rv = bible.read_version("es-rv1909")
    assert rv[(4, 12, 16)].startswith("Y DESPUÉS movió")  # the db has "\t Y DESPUÉS"
    assert bible.clean("a \t b\n  c ") == "a b c"


def test_pairs_join_on_book_chapter_verse_and_drop_empty_sides():
    pairs = bible.load_pairs("en-bbe", "fr-segond")
    assert len(pairs) == bible.verse_counts()["en-bbe"] == 31065  # placeholders dropped
    john_3_16 = next(p for p in pairs if (p.book, p.chapter, p.verse) == (43, 3, 16))
    assert john_3_16.ref == "John 3:16"
    assert john_3_16.src.startswith("For God had such love for the world")
    assert john_3_16.tgt.startswith("Car Dieu a tant aimé le monde")


def test_split_by_whole_books_with_extra_references():
    refs = bible.other_versions("fr-segond")
    assert refs == ["fr-ostervald", "fr-darby"]
    pairs = bible.load_pairs("en-web", "fr-segond", extra_refs=refs)
    splits = bible.split_by_books(pairs, dev=["Romans"], test=["John"], max_words=50)
    assert {p.book for p in splits.dev} == {45} and len(splits.dev) == 433
    assert {p.book for p in splits.test} == {43} and len(splits.test) == 879
    assert not {p.book for p in splits.train} & {43, 45}
    assert all(len(p.refs) == 2 for p in splits.test)
    assert all(p.refs == [] for p in splits.train)
    assert 28_000 <= len(splits.train) <= 29_500
    assert len(splits.train) + splits.removed_long == 31_102 - 433 - 879
    # Dev/test are never length-filtered: Romans and John have verses over 50 words.
    assert sum(_longest(p) > 50 for p in splits.dev) >= 1
    assert sum(_longest(p) > 50 for p in splits.test) >= 1
    assert all(_longest(p) <= 50 for p in splits.train)


def _longest(pair) -> int:
    return max(len(pair.src.split()), len(pair.tgt.split()))


def test_long_verses_are_dropped_from_training_only():
    p = bible.VersePair
    long = "one two three four"
    pairs = [
        p(1, 1, 1, "in the beginning", "au commencement"),
        p(1, 1, 2, long, "bref"),  # too long on the source side
        p(1, 1, 3, "short", f"{long} five"),  # too long on the target side
        p(45, 1, 1, long, "court"),  # Romans: dev
        p(43, 1, 1, "court", long),  # John: test
    ]
    splits = bible.split_by_books(pairs, dev=["Romans"], test=["John"], max_words=3)
    assert [(x.book, x.verse) for x in splits.train] == [(1, 1)]
    assert splits.removed_long == 2 and splits.removed_duplicates == 0
    assert [(x.src, x.tgt) for x in splits.dev] == [(long, "court")]
    assert [(x.src, x.tgt) for x in splits.test] == [("court", long)]


def test_training_pairs_identical_to_held_out_pairs_are_removed():
    p = bible.VersePair
    pairs = [
        p(1, 1, 1, "Amen.", "Amen."),
        p(1, 1, 2, "Unique.", "Unique."),
        p(43, 1, 1, "Amen.", "Amen."),  # John: test
    ]
    splits = bible.split_by_books(pairs, dev=[], test=["John"])
    assert [x.src for x in splits.train] == ["Unique."]
    assert splits.removed_duplicates == 1


def test_books_by_name_number_and_errors():
    assert corpora.book_number("John") == 43
    assert corpora.book_number("romans") == 45
    assert corpora.book_number(40) == 40 and corpora.book_number("1") == 1
    with pytest.raises(DataError, match="unknown book 'Jhon'"):
        corpora.book_number("Jhon")
    pairs = [bible.VersePair(43, 1, 1, "a", "b")]
    with pytest.raises(DataError, match="both dev_books and test_books"):
        bible.split_by_books(pairs, dev=["John"], test=[43])


def test_same_source_and_target_is_refused():
    with pytest.raises(DataError, match="same version"):
        bible.load_pairs("en-web", "en-web")


def test_the_source_is_never_an_extra_reference():
    assert bible.other_versions("en-bbe", src="en-kjv") == ["en-kj2000", "en-web"]
