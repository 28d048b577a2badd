"""Plain parallel text: Moses-style file pairs and tab-separated files.

Two layouts are read, both one sentence pair per line:

- *files*: `train.en` and `train.fr`, line n of one translating line n of the other;
- *tsv*: `src<TAB>tgt[<TAB>ref2...]`, extra columns being further references.

Every reader decodes UTF-8 (a leading byte-order mark is dropped) and splits on `\\n` only,
so a stray `\\u2028` or form feed inside a sentence never shifts the line alignment. Text is
cleaned the same way everywhere: runs of whitespace become one space, ends are stripped.

A bad file never gives a traceback: a missing file, a directory, an unreadable file, bytes
that are not UTF-8, unequal line counts or a malformed TSV line raise `DataError` naming the
file and the 1-based line.
"""

from __future__ import annotations

import gzip
import os
import sys
import zlib
from pathlib import Path

from attnmt.data.types import Example
from attnmt.errors import ConfigError, DataError

STDIN = "-"
KINDS = ("files", "tsv")


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """Read a UTF-8 text file (or standard input for "-") as lines without newlines.

    A trailing `\\r` is removed from each line (Windows line ends); empty lines are kept as
    "" so line numbers stay meaningful; a final newline does not add an empty line.
    """
    name = _display(path)
    data = sys.stdin.buffer.read() if str(path) == STDIN else _read_bytes(Path(path))
    if str(path).endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:  # damaged: header, data, length, CRC
            raise DataError(
                f"{name}: not a readable gzip file ({err}); check the file (`gzip -t` tests it)."
            ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(
            f"{name}: line {line} is not valid UTF-8 (byte 0x{data[err.start]:02x} at "
            f"column {column}); convert the file to UTF-8 (e.g. `iconv -t UTF-8`)."
        ) from None
    text = text.removeprefix("\ufeff")
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def normalize(text: str) -> str:
    """Collapse every run of whitespace to one space and strip both ends."""
    # A printable str holds no whitespace but " " (every other whitespace character is a
    # control or separator): such a text without "  " or an end space is clean already,
    # found 2.5x faster than splitting it (most lines of a corpus are).
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def read_parallel(
    src_path: str | os.PathLike[str], tgt_path: str | os.PathLike[str]
) -> list[tuple[str, str]]:
    """Read two line-aligned files into (source, target) pairs, cleaned by `normalize`.

    Pairs with an empty side are kept (so index i is line i + 1); `load_split` drops them.
    """
    src_lines = read_lines(src_path)
    tgt_lines = read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise DataError(
            f"{_display(src_path)} has {len(src_lines)} lines but {_display(tgt_path)} has "
            f"{len(tgt_lines)}; parallel files need exactly one sentence per line on both "
            "sides, so find the line that was split, joined or dropped."
        )
    return [(normalize(s), normalize(t)) for s, t in zip(src_lines, tgt_lines, strict=True)]


def read_tsv(path: str | os.PathLike[str]) -> list[tuple[str, str, list[str]]]:
    """Read `src<TAB>tgt[<TAB>ref2...]` lines into (source, target, extra references).

    Every field is cleaned by `normalize`. An empty line or a line without a tab is an error
    naming the line, since either would silently break the pairing.
    """
    name = _display(path)
    rows: list[tuple[str, str, list[str]]] = []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            raise DataError(
                f"{name}: line {number} is empty; every line needs `source<TAB>target`, so "
                "remove the line or fill it in."
            )
        fields = line.split("\t")
        if len(fields) < 2:
            raise DataError(
                f"{name}: line {number} has no tab; write it as `source<TAB>target` "
                "(with a real tab character, not spaces)."
            )
        src, tgt, *refs = (normalize(field) for field in fields)
        # A blank extra column (trailing tabs) is a missing reference, not an empty one.
        rows.append((src, tgt, [ref for ref in refs if ref]))
    return rows


def load_split(
    path: str | os.PathLike[str], src_lang: str, tgt_lang: str, kind: str = "files"
) -> list[Example]:
    """Load one split as `Example`s, dropping pairs with an empty side.

    For kind "files", `path` is a prefix: `data/train` reads `data/train.{src_lang}` and
    `data/train.{tgt_lang}`. For kind "tsv", `path` is the file and extra columns become
    `Example.refs`. `Example.id` is "{file name}:{line}" (the source file's name for
    "files"), so a message about an example points back into the data.
    """
    if kind == "files":
        src_path = Path(with_suffix(os.fspath(path), src_lang))
        tgt_path = Path(with_suffix(os.fspath(path), tgt_lang))
        pairs = read_parallel(src_path, tgt_path)
        rows = [(src, tgt, []) for src, tgt in pairs]
        name = src_path.name
    elif kind == "tsv":
        rows = read_tsv(path)
        name = Path(path).name
    else:
        raise ConfigError(f"unknown data kind {kind!r}; expected one of {', '.join(KINDS)}.")
    return [
        Example(src=src, tgt=tgt, refs=refs, id=f"{name}:{number}")
        for number, (src, tgt, refs) in enumerate(rows, start=1)
        if src and tgt
    ]


def with_suffix(prefix: str, lang: str) -> str:
    """`PREFIX.LANG`, or `PREFIX.LANG.gz` when only the compressed file exists."""
    plain = f"{prefix}.{lang}"
    if not os.path.exists(plain) and os.path.exists(plain + ".gz"):
        return plain + ".gz"
    return plain


def _display(path: str | os.PathLike[str]) -> str:
    return "<stdin>" if str(path) == STDIN else os.fspath(path)


def _read_bytes(path: Path) -> bytes:
    """Read a whole file, turning every OS error into a `DataError` that names it."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; check the path and the file name.") from None
    except IsADirectoryError:
        raise DataError(f"{path} is a directory; give the path of a text file.") from None
    except PermissionError:
        raise DataError(
            f"{path}: permission denied; make the file readable (e.g. `chmod a+r`)."
        ) from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror}); check the file.") from None
