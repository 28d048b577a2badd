"""Plain parallel files and TSV: reading, cleaning, and a clear error for every bad file."""

import io
import sys

import pytest

from attnmt.data.files import load_split, normalize, read_lines, read_parallel, read_tsv
from attnmt.errors import ConfigError, DataError


def _write(path, text: str | bytes):
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return path


def test_read_parallel_pairs_lines_and_cleans_whitespace(tmp_path):
    src = _write(tmp_path / "train.en", "Hello  world\r\n  In the\tbeginning \nlast\n")
    tgt = _write(tmp_path / "train.fr", "Bonjour\u00a0le monde\r\nAu commencement\nfin")
    assert read_parallel(src, tgt) == [
        ("Hello world", "Bonjour le monde"),
        ("In the beginning", "Au commencement"),
        ("last", "fin"),
    ]


def test_read_lines_keeps_empty_lines_and_splits_on_newline_only(tmp_path):
    path = _write(tmp_path / "a.txt", "\ufeffone\n\nthree\u2028still three\r\n")
    assert read_lines(path) == ["one", "", "three\u2028still three"]
    assert read_lines(_write(tmp_path / "empty.txt", "")) == []


def test_different_line_counts_name_both_files_and_counts(tmp_path):
    src = _write(tmp_path / "train.en", "a\nb\nc\n")
    tgt = _write(tmp_path / "train.fr", "a\nb\n")
    with pytest.raises(DataError) as err:
        read_parallel(src, tgt)
    message = str(err.value)
    assert "train.en has 3 lines" in message and "train.fr has 2" in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = _write(tmp_path / "train.en", b"ok\nfine\nbad \xff byte\nok\n")
    with pytest.raises(DataError, match=r"train\.en: line 3 is not valid UTF-8"):
        read_lines(path)
    with pytest.raises(DataError, match="line 3"):
        read_tsv(_write(tmp_path / "x.tsv", b"a\tb\nc\td\n\xc3\tz\n"))


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_missing_file_or_directory_is_a_data_error(tmp_path, make):
    path = tmp_path / "nope.en"
    if make == "directory":
        path.mkdir()
    with pytest.raises(DataError, match=r"nope\.en"):
        read_lines(path)


def test_read_tsv_with_extra_references(tmp_path):
    path = _write(tmp_path / "dev.tsv", "un  chat\ta cat\tone cat\n le chien\ta dog\n")
    assert read_tsv(path) == [("un chat", "a cat", ["one cat"]), ("le chien", "a dog", [])]


def test_tsv_line_without_tab_names_line(tmp_path):
    path = _write(tmp_path / "dev.tsv", "a\tb\nno tab here\n")
    with pytest.raises(DataError, match=r"dev\.tsv: line 2 has no tab"):
        read_tsv(path)


def test_tsv_empty_line_names_line(tmp_path):
    path = _write(tmp_path / "dev.tsv", "a\tb\n\nc\td\n")
    with pytest.raises(DataError, match="line 2 is empty"):
        read_tsv(path)


def test_dash_reads_stdin_bytes(monkeypatch):
    class FakeStdin:
        buffer = io.BytesIO("ἐν ἀρχῇ\nIn the beginning\n".encode())

    monkeypatch.setattr(sys, "stdin", FakeStdin())
    assert read_lines("-") == ["ἐν ἀρχῇ", "In the beginning"]


def test_dash_reports_stdin_on_bad_bytes(monkeypatch):
    class FakeStdin:
        buffer = io.BytesIO(b"fine\n\xfe\n")

    monkeypatch.setattr(sys, "stdin", FakeStdin())
    with pytest.raises(DataError, match="<stdin>: line 2"):
        read_lines("-")


def test_load_split_files_skips_empty_pairs_and_sets_ids(tmp_path):
    _write(tmp_path / "train.en", "one\n   \nthree\nfour\n")
    _write(tmp_path / "train.fr", "un\ndeux\ntrois\n\n")
    examples = load_split(str(tmp_path / "train"), "en", "fr", "files")
    assert [(ex.src, ex.tgt, ex.id) for ex in examples] == [
        ("one", "un", "train.en:1"),
        ("three", "trois", "train.en:3"),
    ]


def test_load_split_tsv_keeps_refs(tmp_path):
    path = _write(tmp_path / "test.tsv", "src one\ttgt one\tref two\tref three\n")
    [example] = load_split(path, "el", "en", "tsv")
    assert example.refs == ["ref two", "ref three"] and example.id == "test.tsv:1"


def test_load_split_missing_pair_file_and_bad_kind(tmp_path):
    _write(tmp_path / "train.en", "one\n")
    with pytest.raises(DataError, match=r"train\.fr: file not found"):
        load_split(tmp_path / "train", "en", "fr")
    with pytest.raises(ConfigError, match="files, tsv"):
        load_split(tmp_path / "train", "en", "fr", "csv")


def test_normalize():
    assert normalize("  a \t b\u3000c  ") == "a b c"


def test_normalize_is_split_and_join_for_every_whitespace_character():
    # Its fast path returns a printable text without "  " or an end space as it is: right
    # only because " " is the one printable whitespace character, checked here for all.
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    assert len(spaces) > 20
    for space in spaces:
        for text in (f"a{space}b", f"{space}a", f"a{space}", f"a {space}b", f"é{space}中"):
            assert normalize(text) == " ".join(text.split()), repr(text)
    for text in ("a b", "le chat noir", "\u00ad a", "", "a\u200bb", "中文 句子"):
        assert normalize(text) == " ".join(text.split()), repr(text)


def test_blank_extra_tsv_columns_are_missing_references(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text("a cat\tun chat\t\t\nthe dog\tle chien\tle toutou\t\n", encoding="utf-8")
    assert [refs for _, _, refs in read_tsv(path)] == [[], ["le toutou"]]
