"""Gold alignments: Pharaoh format, the loader on a hand-made tree, and the real package."""

import json
import re
import sysconfig

import pytest

from attnmt.data import alignments
from attnmt.data.alignments import (
    AlignedVerse,
    format_pharaoh,
    load_gold,
    parse_pharaoh,
    read_pharaoh,
    split_by_book,
    to_examples,
    write_pharaoh,
)
from attnmt.errors import DataError

# --- Pharaoh ---------------------------------------------------------------------------------


def test_pharaoh_round_trip(tmp_path):
    sets = [{(0, 0), (1, 2), (10, 3)}, set(), {(2, 1)}]
    write_pharaoh(tmp_path / "a.txt", sets)
    assert (tmp_path / "a.txt").read_text() == "0-0 1-2 10-3\n\n2-1\n"
    assert read_pharaoh(tmp_path / "a.txt") == sets


def test_parse_and_format_pharaoh():
    assert parse_pharaoh("  3-1   0-0 3-1 ") == {(0, 0), (3, 1)}
    assert parse_pharaoh("") == set()
    assert format_pharaoh({(2, 0), (0, 5), (0, 1)}) == "0-1 0-5 2-0"


@pytest.mark.parametrize("bad", ["0-", "a-1", "-1-2", "1?2", "1:2", "0-0-1", "١-٢"])
def test_parse_pharaoh_rejects_bad_pairs(bad):
    with pytest.raises(DataError, match="non-negative integers"):
        parse_pharaoh(f"0-0 {bad}")


def test_read_pharaoh_names_file_and_line(tmp_path):
    (tmp_path / "gold.txt").write_text("0-0\n1-1 2-x\n")
    with pytest.raises(DataError, match=r"gold\.txt: line 2: bad alignment pair '2-x'"):
        read_pharaoh(tmp_path / "gold.txt")


def test_write_pharaoh_to_missing_folder_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="cannot be written"):
        write_pharaoh(tmp_path / "no" / "such.txt", [{(0, 0)}])


# --- the loader on a hand-made tree mirroring the package's layout --------------------------

GREEK = [
    ("n40001001001", "Βίβλος"),
    ("n43001001001", "Ἐν"),
    ("n43001001002", "ἀρχῇ"),
    ("n43001001003", "ἦν"),
    ("n43001001004", "ὁ"),
    ("n43001001005", "λόγος"),
    ("n43001002001", "οὗτος"),
    ("n43001002002", "ἦν"),
    ("n43001003001", "πάντα"),  # its English word sits in verse 2: 1:2-3 merge
    ("n43001004001", "ἐν"),  # no record: unlinked
    ("n43001005001", "φῶς"),
]
ENGLISH = [  # (id, source_verse, text, exclude)
    ("40001001001", "40001001", "Book", ""),
    ("43001001001", "43001001", "In", ""),
    ("43001001002", "43001001", "the", ""),
    ("43001001003", "43001001", "beginning", ""),
    ("43001001004", "43001001", "was", ""),
    ("43001001005", "43001001", "the", ""),
    ("43001001006", "43001001", "Word", ""),
    ("43001001007", "43001001", ".", "y"),
    ("43001002001", "43001002", "He", ""),
    ("43001002002", "43001002", "was", ""),
    ("43001002003", "43001002", "all", ""),
    ("43001004001", "43001004", "in", ""),
    ("43001005001", "43001005", "light", ""),
    ("43001006001", "43001005", "shines", ""),  # verse 6 belongs to Greek verse 5
]
RECORDS = [
    (["n40001001001"], ["40001001001"]),
    (["n43001001001"], ["43001001001"]),
    (["n43001001002"], ["43001001002", "43001001003"]),
    (["n43001001003"], ["43001001004"]),
    (["n43001001004", "n43001001005"], ["43001001005", "43001001006"]),
    (["n43001002001"], ["43001002001"]),
    (["n43001002002"], ["43001002002"]),
    (["n43001003001"], ["43001002003"]),
    (["n43001005001"], ["43001005001"]),
]


def _tree(root, records=RECORDS):
    (root / "sources").mkdir(parents=True)
    (root / "eng/targets/BSB").mkdir(parents=True)
    (root / "eng/alignments/BSB").mkdir(parents=True)
    header = "id\taltId\ttext\tstrongs\tgloss\tgloss2\tlemma\tpos\tmorph\n"
    rows = "".join(f"{i}\t{t}-1\t{t}\tG0001\tg\tg\t{t}\tnoun\tN-NSF\n" for i, t in GREEK)
    (root / "sources/SBLGNT.tsv").write_text(header + rows, encoding="utf-8")
    columns = ["id", "source_verse", "text", "skip_space_after", "exclude", "id_range_end"]
    header = "\t".join([*columns, "source_verse_range_end"]) + "\n"
    rows = "".join(f"{i}\t{v}\t{t}\t\t{x}\t\t\n" for i, v, t, x in ENGLISH)
    (root / "eng/targets/BSB/nt_BSB.tsv").write_text(header + rows, encoding="utf-8")
    data = {"records": [{"source": s, "target": t, "meta": {}} for s, t in records]}
    (root / "eng/alignments/BSB/SBLGNT-BSB-manual.json").write_text(json.dumps(data))
    return root


def test_loader_builds_verses_links_and_merged_segments(tmp_path):
    gold = load_gold(_tree(tmp_path))
    by_ref = {v.ref: v for v in gold.verses}
    assert list(by_ref) == ["Matthew 1:1", "John 1:1", "John 1:2-3", "John 1:5-6"]

    john1 = by_ref["John 1:1"]
    assert john1.src == ["Ἐν", "ἀρχῇ", "ἦν", "ὁ", "λόγος"]
    assert john1.tgt == ["In", "the", "beginning", "was", "the", "Word"]  # "." excluded
    assert john1.links == {(0, 0), (1, 1), (1, 2), (2, 3), (3, 4), (3, 5), (4, 4), (4, 5)}
    assert (john1.book, john1.chapter, john1.verse, john1.end) == (43, 1, 1, (1, 1))

    merged = by_ref["John 1:2-3"]
    assert (merged.verse, merged.end) == (2, (1, 3))
    assert merged.src == ["οὗτος", "ἦν", "πάντα"] and merged.tgt == ["He", "was", "all"]
    assert merged.links == {(0, 0), (1, 1), (2, 2)}

    by_source_verse = by_ref["John 1:5-6"]
    assert by_source_verse.tgt == ["light", "shines"] and by_source_verse.links == {(0, 0)}

    [unlinked] = gold.unlinked
    assert (unlinked.ref, unlinked.src, unlinked.tgt) == ("John 1:4", ["ἐν"], ["in"])
    assert unlinked.links == set()
    assert gold.counts() == {
        "verses": 4, "unlinked": 1, "links": 13, "src_tokens": 10, "tgt_tokens": 12, "merged": 2
    }  # fmt: skip


def test_keep_excluded_keeps_punctuation_and_links(tmp_path):
    gold = load_gold(_tree(tmp_path), keep_excluded=True)
    john1 = gold.verses[1]
    assert john1.tgt[-1] == "." and len(john1.links) == 8 and gold.num_links == 13


def test_to_examples_joins_words_and_skips_empty_sides():
    verses = [
        AlignedVerse("John 1:1", 43, 1, 1, ["Ἐν", "ἀρχῇ"], ["In", "the", "beginning"], {(0, 0)}),
        AlignedVerse("Romans 16:25", 45, 16, 25, [], ["Now"], set()),
    ]
    [example] = to_examples(verses)
    assert (example.src, example.tgt, example.id) == ("Ἐν ἀρχῇ", "In the beginning", "John 1:1")
    assert verses[0].end == (1, 1)


def test_split_by_book_names_and_numbers(tmp_path):
    verses = load_gold(_tree(tmp_path)).verses
    parts = split_by_book(verses, test_books=["john"], dev_books=[40])
    assert [v.ref for v in parts["test"]] == ["John 1:1", "John 1:2-3", "John 1:5-6"]
    assert [v.ref for v in parts["dev"]] == ["Matthew 1:1"] and parts["train"] == []
    with pytest.raises(DataError, match=r"unknown New Testament book 'Jon'.*Matthew, Mark"):
        split_by_book(verses, test_books=["Jon"])
    with pytest.raises(DataError, match="John is in both"):
        split_by_book(verses, test_books=["John"], dev_books=["43"])


def test_loader_errors_name_the_file(tmp_path):
    with pytest.raises(DataError, match=r"SBLGNT\.tsv: file not found"):
        load_gold(tmp_path)
    bad = [*RECORDS, (["n43001009001"], ["43001001001"])]
    with pytest.raises(DataError, match=r"record 9 has unknown word id 'n43001009001'"):
        load_gold(_tree(tmp_path / "bad", records=bad))


def test_locate_missing_package_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"purelib": tmp_path, "platlib": tmp_path})
    monkeypatch.setattr(alignments.sys, "path", [str(tmp_path)])
    with pytest.raises(DataError, match=re.escape("pip install --no-deps bible-alignments==0.4.2")):
        alignments.locate()


# --- the real package (installed by `make install` and in CI) -------------------------------


def test_real_gold_totals_and_book_split():
    gold = load_gold()
    assert gold.counts() == {
        "verses": 7919,
        "unlinked": 8,
        "links": 189927,
        "src_tokens": 137668,
        "tgt_tokens": 171733,
        "merged": 16,
    }
    assert gold.dropped_links == 0
    john = next(v for v in gold.verses if v.ref == "John 1:1")
    assert john.src[:2] == ["Ἐν", "ἀρχῇ"] and john.tgt[:3] == ["In", "the", "beginning"]
    assert (0, 0) in john.links and all(w.isalnum() or "’" in w for w in john.tgt)

    parts = split_by_book(gold.verses)
    refs = {name: {v.ref for v in part} for name, part in parts.items()}
    assert sum(len(r) for r in refs.values()) == len(gold.verses)
    assert not (refs["train"] & refs["dev"] or refs["train"] & refs["test"])
    assert not refs["dev"] & refs["test"]
    assert {v.book for v in parts["test"]} == {43} and "John 3:16" in refs["test"]
    assert all(v.book != 43 for v in parts["train"] + parts["dev"])


def test_book_names_ignore_spaces_as_data_list_prints_them():
    from attnmt.data.alignments import book_number

    assert book_number("1John") == book_number("1 John") == 62
