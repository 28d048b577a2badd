"""Writing systems in plot labels: the script of each character, fonts that draw it, and
right-to-left text as a renderer without shaping must draw it. `attnmt.plotting` uses it.

    labels = label_set(["في", "البدء", "</s>"])
    labels.texts     # as given, in data order: never changed
    labels.shown     # as drawn (the same strings wherever matplotlib shapes text itself)
    labels.style()   # Text properties: the font fallback list (and a language for CJK)

Fonts. One label set (a heatmap's source labels, its target labels, a legend) is drawn
with the installed fonts of each script found in it, best first (`SCRIPTS`: the script's
Noto family first), then DejaVu Sans (matplotlib's own: Latin, Greek, Cyrillic, Arabic,
Hebrew), then any installed Noto family that has a character still missing. Coverage is
read from each font's character map, so a missing glyph is known before drawing. Fonts
installed after matplotlib built its font cache (`apt-get install fonts-noto-cjk` after a
first plot) are added for the process.

Missing fonts. A character no chosen font has is drawn as a box. The first time in a
process that this happens to a script, one warning (logger `attnmt.scripts`) names the
script, a few of its characters and the Debian package with a font for it. Invisible
format characters (zero-width joiners, direction marks) are not glyphs and are not checked.

Right to left. matplotlib 3.11 lays text out with libraqm (HarfBuzz shaping, bidi order),
so labels are drawn as given there, in every script: shaping them first would reverse
them twice. With an older matplotlib (`RENDERER_SHAPES` False) a label with Arabic or
Hebrew letters is shaped with arabic-reshaper (the joined letter forms) and put in
display order with python-bidi (`shape_for_display`); Devanagari and Bengali cannot be
shaped that way and get one warning. Only the drawing changes: tokens, saved plot data,
alignments and reports keep the logical order of the data.
"""

from __future__ import annotations

import logging
import os
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import arabic_reshaper
import matplotlib
from bidi import get_display
from matplotlib import font_manager
from matplotlib.ft2font import FT2Font

log = logging.getLogger(__name__)

# matplotlib 3.11 shapes and orders text itself ("libraqm, HarfBuzz, SheenBidi": its
# release notes); before it, glyphs were placed one by one, left to right.
RENDERER_SHAPES = tuple(matplotlib.__version_info__[:2]) >= (3, 11)
BASE_FONT = "DejaVu Sans"  # shipped with matplotlib: always installed

_CJK = ("Noto Sans CJK SC", "Noto Sans CJK TC", "Noto Sans CJK JP", "Noto Sans CJK KR")
_CJK_OTHERS = ("WenQuanYi Zen Hei", "Droid Sans Fallback")


@dataclass(frozen=True)
class Script:
    """A writing system: its code point ranges, fonts (best first) and where to get them."""

    name: str  # as the warning names it
    ranges: tuple[tuple[int, int], ...]  # inclusive
    families: tuple[str, ...]
    package: str  # the Debian package with `families[0]`
    language: str | None = None  # BCP47 tag for matplotlib's layout (CJK glyph variants)
    complex: bool = False  # needs a shaping engine beyond arabic-reshaper


# Looked up in order: kana and Hangul before Han, whose ranges hold the shared punctuation.
SCRIPTS = (
    Script(
        "Arabic",
        ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
        ("Noto Sans Arabic", "Noto Naskh Arabic"),
        "fonts-noto-core",
    ),
    Script(
        "Hebrew", ((0x0590, 0x05FF), (0xFB1D, 0xFB4F)), ("Noto Sans Hebrew",), "fonts-noto-core"
    ),
    Script(
        "Devanagari",
        ((0x0900, 0x097F), (0xA8E0, 0xA8FF)),
        ("Noto Sans Devanagari",),
        "fonts-noto-core",
        complex=True,
    ),
    Script("Bengali", ((0x0980, 0x09FF),), ("Noto Sans Bengali",), "fonts-noto-core", complex=True),
    Script(
        "Japanese kana",
        ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F)),
        ("Noto Sans CJK JP", *_CJK, *_CJK_OTHERS),
        "fonts-noto-cjk",
        language="ja",
    ),
    Script(
        "Korean Hangul",
        ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7FF)),
        ("Noto Sans CJK KR", *_CJK, *_CJK_OTHERS),
        "fonts-noto-cjk",
        language="ko",
    ),
    Script(
        "Chinese (Han)",
        (
            *((0x2E80, 0x2FDF), (0x3000, 0x303F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF)),
            *((0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x20000, 0x3134F)),
        ),
        (*_CJK, *_CJK_OTHERS),
        "fonts-noto-cjk",
        language="zh-Hans",
    ),
)
_KANA, _HANGUL, _HAN = SCRIPTS[-3:]

_warned: set[str] = set()  # scripts already reported missing in this process


@cache
def script_of(char: str) -> Script | None:
    """The `SCRIPTS` entry of a character; None for the scripts DejaVu Sans draws, and others."""
    point = ord(char)
    return next((s for s in SCRIPTS if any(lo <= point <= hi for lo, hi in s.ranges)), None)


# --- right to left -------------------------------------------------------------------------

# The Allah ligature (U+FDF2) is missing from DejaVu Sans; the letters join without it.
_RESHAPER = arabic_reshaper.ArabicReshaper(configuration={"ARABIC LIGATURE ALLAH": False})


def is_right_to_left(text: str) -> bool:
    """Whether `text` has a right-to-left letter (Arabic, Persian, Hebrew, ...)."""
    return any(unicodedata.bidirectional(c) in ("R", "AL") for c in text)


def shape_for_display(text: str) -> str:
    """`text` as a renderer without shaping must draw it, left to right: Arabic letters in
    their joined forms (arabic-reshaper), right-to-left runs in display order (python-bidi).
    Text without right-to-left letters comes back as it is. For drawing only, never data."""
    if not is_right_to_left(text):
        return text
    return get_display(_RESHAPER.reshape(text))


def display_text(text: str) -> str:
    """What to hand matplotlib: `text` itself where it shapes (3.11+), else shaped here."""
    return text if RENDERER_SHAPES else shape_for_display(text)


# --- fonts ---------------------------------------------------------------------------------


@cache
def installed_families() -> frozenset[str]:
    """The font families matplotlib can use, after adding system fonts its cache lacks."""
    manager = font_manager.fontManager
    known = {os.path.realpath(entry.fname) for entry in manager.ttflist}
    for path in font_manager.findSystemFonts():
        if os.path.realpath(path) not in known:
            try:
                manager.addfont(path)
            except (OSError, RuntimeError, ValueError):
                continue  # a file FreeType cannot read is not a font we can use
    return frozenset(entry.name for entry in manager.ttflist)


@cache
def charmap(family: str) -> frozenset[int]:
    """The code points the font matplotlib picks for `family` has glyphs for."""
    properties = font_manager.FontProperties(family=family)
    path = font_manager.findfont(properties, fallback_to_default=False)
    index = getattr(path, "face_index", 0)  # a font collection (.ttc), matplotlib 3.11+
    font = FT2Font(path, face_index=index) if index else FT2Font(path)
    return frozenset(font.get_charmap())


_INVISIBLE = ("Cc", "Cf")  # controls; format characters (ZWJ, ZWNJ, direction marks)
_NO_FONT = ("Co", "Cn", "Cs")  # private use, unassigned, surrogates: no public font has them


def _drawn(texts: Iterable[str]) -> list[str]:
    """The characters that need a glyph (not spaces, controls or invisible format marks),
    each once, in order of appearance."""
    chars = (c for t in texts for c in t if not c.isspace())
    return list(dict.fromkeys(c for c in chars if unicodedata.category(c) not in _INVISIBLE))


def _preferred(chars: list[str]) -> list[str]:
    """Font families for the scripts of `chars`, the most frequent script's first."""
    counts = Counter(s for s in map(script_of, chars) if s is not None)
    families: list[str] = []
    for script, _ in counts.most_common():
        if script is _HAN and counts.get(_KANA):  # Han in Japanese text: Japanese forms
            script = _KANA
        elif script is _HAN and counts.get(_HANGUL):
            script = _HANGUL
        families += script.families
    return list(dict.fromkeys(families))  # first mention wins


@cache
def _fallbacks() -> tuple[str, ...]:
    """Installed Noto families with an upright regular face, sans-serif first: the search
    for characters of no `SCRIPTS` entry (emoji, symbols, other scripts)."""
    regular = {
        e.name
        for e in font_manager.fontManager.ttflist
        if e.name.startswith("Noto ")
        and "Color" not in e.name  # colour bitmaps (Noto Color Emoji) FreeType cannot scale
        and e.style == "normal"
        and e.weight in (400, "normal")
    }
    return tuple(sorted(regular & installed_families(), key=lambda f: (f[:9] != "Noto Sans", f)))


def choose_fonts(texts: Iterable[str]) -> tuple[tuple[str, ...], list[str]]:
    """(font fallback list for `texts`, the characters none of them has, as they appear)."""
    chars = _drawn(texts)
    preferred = _preferred(chars)
    if not preferred and all(ord(c) in charmap(BASE_FONT) for c in chars):
        return (BASE_FONT,), []  # Latin, Greek, Cyrillic...: no font search
    installed = installed_families()
    families = [f for f in preferred if f in installed] + [BASE_FONT]
    covered = set().union(*(charmap(f) for f in families))
    wanted = [c for c in chars if ord(c) not in covered and unicodedata.category(c) not in _NO_FONT]
    for family in _fallbacks() if wanted else ():
        found = {c for c in wanted if ord(c) in charmap(family)}
        if found and family not in families:
            families.append(family)
            covered |= charmap(family)
            wanted = [c for c in wanted if c not in found]
            if not wanted:
                break
    return tuple(families), [c for c in chars if ord(c) not in covered]


def missing_glyphs(texts: Iterable[str]) -> list[str]:
    """The characters of `texts` that no installed font chosen for them can draw."""
    return choose_fonts(texts)[1]


def _name_and_package(char: str) -> tuple[str, str | None]:
    script = script_of(char)
    if script is not None:
        return script.name, script.package
    category = unicodedata.category(char)
    if category in _NO_FONT:
        return "private-use or unassigned", None
    if category[0] == "S":
        return "symbol", "fonts-noto-core"
    word = unicodedata.name(char, "").split(" ")[0]
    return (word.title() if word else f"U+{ord(char):04X}"), "fonts-noto-core"


def warn_missing(missing: Iterable[str], texts: Iterable[str] = ()) -> None:
    """One warning per script (per process) whose characters no installed font has,
    naming the script, a label of `texts` it spoils and the package that adds a font."""
    texts = list(texts)
    by_script: dict[tuple[str, str | None], list[str]] = {}
    for char in sorted(missing, key=lambda c: not unicodedata.category(c).startswith("L")):
        by_script.setdefault(_name_and_package(char), []).append(char)
    for (name, package), chars in by_script.items():
        if name in _warned:
            continue
        _warned.add(name)
        label = next((t for t in texts if chars[0] in t), chars[0])
        codes = ", ".join(f"{c} U+{ord(c):04X}" for c in chars[:3])
        if package is None:
            log.warning("%s characters (%s) have no font: drawn as empty boxes", name, codes)
            continue
        log.warning(
            "no installed font has %s glyphs, so labels such as '%s' are drawn as empty boxes "
            "(%s); install %s (Debian/Ubuntu: `sudo apt-get install %s`) or another font "
            "with %s",
            name,
            label,
            codes,
            package,
            package,
            name,
        )


def _warn_unshaped(chars: list[str]) -> None:
    """One warning per script an old matplotlib cannot shape (Devanagari, Bengali)."""
    for script in dict.fromkeys(map(script_of, chars)):
        if script is None or not script.complex or f"unshaped {script.name}" in _warned:
            continue
        _warned.add(f"unshaped {script.name}")
        log.warning(
            "matplotlib %s places %s letters one by one, so vowel signs and conjuncts may be "
            "drawn apart; matplotlib 3.11 or later shapes them",
            matplotlib.__version__,
            script.name,
        )


# --- label sets ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelSet:
    """Labels drawn together (one axis, one legend): as given, as drawn, and with which fonts."""

    texts: tuple[str, ...]  # as given: data order, never changed
    shown: tuple[str, ...]  # what matplotlib is handed (`display_text` of each)
    families: tuple[str, ...]  # the font fallback list, best first
    language: str | None  # BCP47 tag for Chinese, Japanese or Korean labels
    missing: tuple[str, ...]  # characters drawn as boxes

    @property
    def reshaped(self) -> bool:
        """Whether some label is drawn other than as given (matplotlib before 3.11)."""
        return self.shown != self.texts

    def style(self) -> dict[str, Any]:
        """Text properties for matplotlib: `fontfamily`, and `language` where it has one."""
        style: dict[str, Any] = {"fontfamily": list(self.families)}
        if self.language and RENDERER_SHAPES:
            style["language"] = self.language
        return style


def label_set(texts: Iterable[str]) -> LabelSet:
    """Fonts and display forms for labels drawn together; warns once per missing script."""
    given = tuple(str(t) for t in texts)
    shown = tuple(display_text(t) for t in given)
    families, missing = choose_fonts(shown)
    warn_missing(missing, given)
    chars = _drawn(given)
    if not RENDERER_SHAPES:
        _warn_unshaped(chars)
    scripts = {script_of(c) for c in chars}
    language = next((s.language for s in (_KANA, _HANGUL, _HAN) if s in scripts), None)
    return LabelSet(given, shown, families, language, tuple(missing))
