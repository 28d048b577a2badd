"""Gold Greek→English word alignments, and the Pharaoh `i-j` format for alignments.

The gold standard is the manual SBLGNT (Greek) to BSB (English) alignment of the New
Testament made by Biblica (CC-BY-4.0), shipped by the PyPI package `bible-alignments`
(install with `pip install --no-deps bible-alignments==0.4.2`). The package puts a
top-level `data/` folder into site-packages; `locate` finds it and `load_gold` reads:

    sources/SBLGNT.tsv               Greek words, id "n" + BBCCCVVVWWW (book chapter verse word)
    eng/targets/BSB/nt_BSB.tsv       English words, id BBCCCVVVWWW, plus `source_verse`
                                     and `exclude`
    eng/alignments/BSB/SBLGNT-BSB-manual.json
                                     records {"source": [greek ids], "target": [english ids]};
                                     every pair in source × target is a (sure) link

Choices (measured on version 0.4.2; `tests/test_data_alignments.py` pins the numbers):

- **Excluded words.** English tokens marked `exclude` are the 29,242 punctuation tokens
  (, . “ ” ? : ! ; ’ ‘ — ( ) ...); no record links any of them. They are dropped by
  default, so both sides are plain words (the Greek has no punctuation) and every English
  token can be aligned; `keep_excluded=True` keeps them.
- **Verse boundaries.** Greek and English verse numbers disagree in a few places (3 John
  1:14-15, Revelation 12:17-18, 2 Corinthians 13:12-14, ...): 80 records span two verse
  numbers (454 of their links join a Greek word to an English word of another verse
  number; some are wide records that lump a verse's tail onto one word), and 11 English words
  (Acts 19:41) carry a `source_verse` other than their own. Rather than drop those links or
  cut a sentence in half, such verses are merged into one segment ("2 Corinthians
  13:12-14"): a segment is the smallest run of consecutive verses that holds every record
  and every `source_verse` whole. Version 0.4.2 has 16 merged segments (33 verse numbers).
- **Unlinked segments** (no link at all) are returned apart in `GoldAlignments.unlinked`:
  Matthew 7:20, John 14:13, Ephesians 2:15 and Revelation 17:10 (both sides, no records),
  Romans 16:24 (Greek only) and Romans 16:25, 16:26, 16:27 (English only).

Totals for 0.4.2: 7,944 verse numbers (7,939 Greek, 7,941 English, 7,936 in both) form
7,927 segments: 7,919 with links (`verses`, 189,927 links, 137,668 Greek and 171,733
English words) and 8 without (`unlinked`).
"""

from __future__ import annotations

import json
import os
import re
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

# The New Testament's books (named 40 Matthew .. 66 Revelation) live with the config, whose
# checks read them without this package; the names here are this module's API too.
from attnmt.config.corpora import FIRST_NEW_TESTAMENT_BOOK as FIRST_BOOK
from attnmt.config.corpora import NEW_TESTAMENT as BOOKS
from attnmt.config.corpora import new_testament_name as book_name
from attnmt.config.corpora import new_testament_number as book_number
from attnmt.data.parsed import cached_json
from attnmt.data.types import Example
from attnmt.errors import DataError

INSTALL = "pip install --no-deps bible-alignments==0.4.2"
SOURCES = Path("sources/SBLGNT.tsv")
TARGETS = Path("eng/targets/BSB/nt_BSB.tsv")
RECORDS = Path("eng/alignments/BSB/SBLGNT-BSB-manual.json")

Link = tuple[int, int]
_Record = tuple[list[str], list[str]]  # (Greek word ids, English word ids)


@dataclass
class AlignedVerse:
    """One verse (or a few merged verses, see the module docstring) with its gold links.

    Fields:
        ref: "John 3:16", or "2 Corinthians 13:12-14" for a merged segment.
        book, chapter, verse: the first verse (book 40 = Matthew ... 66 = Revelation).
        end: (chapter, verse) of the last verse; (chapter, verse) unless merged.
        src: Greek words, in text order.
        tgt: English words, in text order.
        links: (i, j) pairs, 0-based: src[i] is aligned to tgt[j].
    """

    ref: str
    book: int
    chapter: int
    verse: int
    src: list[str]
    tgt: list[str]
    links: set[Link] = field(default_factory=set)
    end: tuple[int, int] = (0, 0)  # (0, 0) is filled in as (chapter, verse)

    def __post_init__(self) -> None:
        if self.end == (0, 0):
            self.end = (self.chapter, self.verse)

    def transposed(self) -> AlignedVerse:
        """The verse the other way round (English -> Greek): sides swapped, links (j, i)."""
        return replace(self, src=self.tgt, tgt=self.src, links={(j, i) for i, j in self.links})


@dataclass
class GoldAlignments:
    """The loaded gold standard: segments with links, segments without, and their totals."""

    verses: list[AlignedVerse]
    unlinked: list[AlignedVerse]
    dropped_links: int = 0  # links to excluded tokens (0 in version 0.4.2)

    @property
    def num_links(self) -> int:
        """Total number of gold links over `verses`."""
        return sum(len(v.links) for v in self.verses)

    def counts(self) -> dict[str, int]:
        """Totals for reports: segments, links, tokens, merged segments."""
        return {
            "verses": len(self.verses),
            "unlinked": len(self.unlinked),
            "links": self.num_links,
            "src_tokens": sum(len(v.src) for v in self.verses),
            "tgt_tokens": sum(len(v.tgt) for v in self.verses),
            "merged": sum(v.end != (v.chapter, v.verse) for v in self.verses + self.unlinked),
        }


def locate() -> Path:
    """Find the `data/` folder installed by `bible-alignments` (site-packages or sys.path)."""
    candidates = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    candidates += [entry for entry in sys.path if entry]
    for entry in dict.fromkeys(candidates):
        root = Path(entry) / "data"
        if (root / RECORDS).is_file():
            return root
    raise DataError(
        f"the gold alignments were not found (no data/{RECORDS.as_posix()} in site-packages "
        f"or on sys.path); install them with `{INSTALL}`."
    )


def load_gold(
    root: str | os.PathLike[str] | None = None, *, keep_excluded: bool = False
) -> GoldAlignments:
    """Read the Greek and English words and the manual links, grouped into verse segments.

    `root` is the package's `data/` folder (found by `locate` when None). Segments come in
    canonical order (book, chapter, verse). See the module docstring for the choices made.
    """
    if root is not None:
        return _read_gold(Path(root), keep_excluded)
    # The installed package: parsed once per machine (5-6 s of Python), then read back as
    # JSON (attnmt.data.parsed); a reinstall or an edit of this module parses it afresh.
    root = locate()
    files = [root / SOURCES, root / TARGETS, root / RECORDS, Path(__file__)]
    kind = "gold-all" if keep_excluded else "gold-words"
    made = cached_json(kind, files, lambda: _gold_json(_read_gold(root, keep_excluded)))
    return _gold_of_json(made)


def _gold_json(gold: GoldAlignments) -> dict:
    def verse(v: AlignedVerse) -> list:
        links = [n for link in sorted(v.links) for n in link]
        return [v.ref, v.book, v.chapter, v.verse, v.src, v.tgt, links, list(v.end)]

    return {
        "verses": [verse(v) for v in gold.verses],
        "unlinked": [verse(v) for v in gold.unlinked],
        "dropped_links": gold.dropped_links,
    }


def _gold_of_json(data: dict) -> GoldAlignments:
    def verse(item: list) -> AlignedVerse:
        ref, book, chapter, number, src, tgt, flat, end = item
        links = set(zip(flat[::2], flat[1::2], strict=True))
        return AlignedVerse(ref, book, chapter, number, src, tgt, links, (end[0], end[1]))

    return GoldAlignments(
        verses=[verse(v) for v in data["verses"]],
        unlinked=[verse(v) for v in data["unlinked"]],
        dropped_links=data["dropped_links"],
    )


def _read_gold(root: Path, keep_excluded: bool) -> GoldAlignments:
    greek = _read_words(root / SOURCES, prefix="n")
    english = _read_words(root / TARGETS, prefix="")
    records = _read_records(root / RECORDS, greek.text, english.text)

    segments = _segments(greek, english, records)
    segment_of = {key: n for n, run in enumerate(segments) for key in run}

    # Word positions inside their segment; ids sort into text order.
    src_words: list[list[str]] = [[] for _ in segments]
    tgt_words: list[list[str]] = [[] for _ in segments]
    position: dict[str, int] = {}
    for word_id, text in greek.text.items():
        words = src_words[segment_of[word_id[1:9]]]
        position[word_id] = len(words)
        words.append(text)
    for word_id, text in english.text.items():
        if keep_excluded or word_id not in english.excluded:
            words = tgt_words[segment_of[word_id[:8]]]
            position[word_id] = len(words)
            words.append(text)

    links: list[set[Link]] = [set() for _ in segments]
    dropped = 0
    for src_ids, tgt_ids in records:
        found = links[segment_of[src_ids[0][1:9]]]
        sources = [position[i] for i in src_ids]
        for j_id in tgt_ids:
            j = position.get(j_id)
            if j is None:
                dropped += len(sources)
            else:
                found.update((i, j) for i in sources)

    gold = GoldAlignments(verses=[], unlinked=[], dropped_links=dropped)
    for n, run in enumerate(segments):
        book, chapter, verse = _bcv(run[0])
        end = _bcv(run[-1])[1:]
        item = AlignedVerse(
            _ref(book, (chapter, verse), end), book, chapter, verse,
            src_words[n], tgt_words[n], links[n], end,
        )  # fmt: skip
        (gold.verses if links[n] else gold.unlinked).append(item)
    return gold


def split_by_book(
    verses: Iterable[AlignedVerse],
    test_books: Sequence[int | str] = ("John",),
    dev_books: Sequence[int | str] = ("Romans",),
) -> dict[str, list[AlignedVerse]]:
    """Split verses into "train", "dev" and "test" by whole books (order kept in each).

    Whole books keep near-identical verses (formulaic greetings, one chapter's repetitions)
    on one side. A book named in both `test_books` and `dev_books` is an error.
    """
    test = {book_number(b) for b in test_books}
    dev = {book_number(b) for b in dev_books}
    if test & dev:
        both = ", ".join(book_name(b) for b in sorted(test & dev))
        raise DataError(f"{both} is in both test_books and dev_books; list each book once.")
    splits: dict[str, list[AlignedVerse]] = {"train": [], "dev": [], "test": []}
    for verse in verses:
        name = "test" if verse.book in test else "dev" if verse.book in dev else "train"
        splits[name].append(verse)
    return splits


def to_examples(verses: Iterable[AlignedVerse]) -> list[Example]:
    """Greek→English `Example`s: words joined by single spaces, id = ref.

    `src.split(" ")` gives back the word positions the links index. Verses with an empty
    side (possible among `unlinked` only) are skipped.
    """
    return [
        Example(src=" ".join(v.src), tgt=" ".join(v.tgt), id=v.ref)
        for v in verses
        if v.src and v.tgt
    ]


# --- Pharaoh format: "0-0 1-2 2-1", one line per sentence pair, "" for no links ----------


def parse_pharaoh(line: str) -> set[Link]:
    """Parse one line of `i-j` pairs (source index, target index, 0-based)."""
    links: set[Link] = set()
    for pair in line.split():
        i, sep, j = pair.partition("-")
        if not (sep and i.isdigit() and j.isdigit() and i.isascii() and j.isascii()):
            raise DataError(
                f"bad alignment pair {pair!r}; expected i-j pairs of non-negative integers "
                "separated by spaces, e.g. `0-0 1-2`."
            )
        links.add((int(i), int(j)))
    return links


def format_pharaoh(links: Iterable[Link]) -> str:
    """Write links as sorted `i-j` pairs separated by spaces ("" when there are none)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def read_pharaoh(path: str | os.PathLike[str]) -> list[set[Link]]:
    """Read a Pharaoh file: one set of links per line (an empty line has no links)."""
    text = _read_text(Path(path))
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    alignments = []
    for number, line in enumerate(lines, start=1):
        try:
            alignments.append(parse_pharaoh(line))
        except DataError as err:
            raise DataError(f"{path}: line {number}: {err}") from None
    return alignments


def write_pharaoh(path: str | os.PathLike[str], alignments: Iterable[Iterable[Link]]) -> None:
    """Write one line of sorted `i-j` pairs per sentence pair."""
    lines = [format_pharaoh(links) + "\n" for links in alignments]
    try:
        Path(path).write_text("".join(lines), encoding="utf-8", newline="\n")
    except OSError as err:
        raise DataError(
            f"{path}: cannot be written ({err.strerror}); check that its folder exists."
        ) from None


# --- reading the package's files -----------------------------------------------------------


@dataclass
class _Words:
    text: dict[str, str]  # word id -> word, in id order
    source_verse: dict[str, str]  # word id -> BBCCCVVV, only where it is not the id's verse
    excluded: set[str]  # ids marked `exclude`


def _segments(greek: _Words, english: _Words, records: list[_Record]) -> list[list[str]]:
    """Cut the sorted verse keys (BBCCCVVV) into runs of consecutive verses such that every
    record and every English word's `source_verse` falls inside one run."""
    keys = sorted({i[1:9] for i in greek.text} | {j[:8] for j in english.text})
    groups = [{word_id[:8], verse} for word_id, verse in english.source_verse.items()]
    groups += [{i[1:9] for i in src} | {j[:8] for j in tgt} for src, tgt in records]
    known = set(keys)
    reach: dict[str, str] = {}  # first verse of a group -> the last verse it must reach
    for group in groups:
        members = sorted(group & known)
        if len(members) > 1:
            reach[members[0]] = max(reach.get(members[0], ""), members[-1])
    segments: list[list[str]] = []
    end = ""
    for key in keys:
        if key > end:
            segments.append([])
        segments[-1].append(key)
        end = max(end, reach.get(key, key))
    return segments


def _bcv(verse: str) -> tuple[int, int, int]:
    return int(verse[:2]), int(verse[2:5]), int(verse[5:8])


def _ref(book: int, start: tuple[int, int], end: tuple[int, int]) -> str:
    name = BOOKS[book - FIRST_BOOK] if FIRST_BOOK <= book < FIRST_BOOK + len(BOOKS) else book
    ref = f"{name} {start[0]}:{start[1]}"
    if end == start:
        return ref
    return f"{ref}-{end[1]}" if end[0] == start[0] else f"{ref}-{end[0]}:{end[1]}"


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; check the path (or run `{INSTALL}`).") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror}); check the file.") from None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise DataError(
            f"{path}: line {line} is not valid UTF-8; convert the file to UTF-8."
        ) from None


def _read_words(path: Path, prefix: str) -> _Words:
    """Read a word TSV (header with `id`, `text`, maybe `source_verse` and `exclude`)."""
    lines = _read_text(path).split("\n")
    header = lines[0].rstrip("\r").split("\t")
    if not {"id", "text"} <= set(header):
        raise DataError(f"{path}: line 1 must be a header with `id` and `text` columns.")
    col = {name: n for n, name in enumerate(header)}
    id_col, text_col = col["id"], col["text"]
    verse_col, exclude_col = col.get("source_verse"), col.get("exclude")
    pattern = re.compile(re.escape(prefix) + "[0-9]{11}")
    words = _Words({}, {}, set())
    for number, line in enumerate(lines[1:], start=2):
        fields = line.rstrip("\r").split("\t")
        if fields == [""]:
            continue
        fields += [""] * (len(header) - len(fields))
        word_id = fields[id_col]
        if not pattern.fullmatch(word_id):
            raise DataError(
                f"{path}: line {number}: bad word id {word_id!r}; expected {prefix}BBCCCVVVWWW."
            )
        words.text[word_id] = fields[text_col]
        own = word_id[len(prefix) : len(prefix) + 8]
        if verse_col is not None and fields[verse_col] not in ("", own):
            words.source_verse[word_id] = fields[verse_col]
        if exclude_col is not None and fields[exclude_col].strip().lower() == "y":
            words.excluded.add(word_id)
    ids = list(words.text)
    if ids != sorted(ids):
        words.text = dict(sorted(words.text.items()))
    return words


def _read_records(path: Path, greek: dict[str, str], english: dict[str, str]) -> list[_Record]:
    """Read the alignment records as (greek ids, english ids), checking every id exists."""
    try:
        records = json.loads(_read_text(path))["records"]
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: line {err.lineno}: not valid JSON ({err.msg}).") from None
    except (KeyError, TypeError):
        raise DataError(f"{path}: expected an object with a `records` list.") from None
    pairs = []
    for n, record in enumerate(records):
        record = record if isinstance(record, dict) else {}
        src_ids, tgt_ids = record.get("source") or [], record.get("target") or []
        unknown = [i for i in src_ids if i not in greek] + [j for j in tgt_ids if j not in english]
        if unknown or not src_ids or not tgt_ids:
            what = f"unknown word id {unknown[0]!r}" if unknown else "an empty side"
            raise DataError(
                f"{path}: record {n} has {what}; the alignment and word files do not match, "
                f"so reinstall them with `{INSTALL}`."
            )
        pairs.append((src_ids, tgt_ids))
    return pairs
