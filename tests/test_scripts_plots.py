"""Plot labels in every script of the corpus: fonts that have the glyphs (or one clear
warning naming the package), right-to-left labels drawn right to left, and data untouched.

Where the Noto fonts are installed (`.ci/run` installs them) every version's words must draw
with no warning, ours or matplotlib's (pytest makes matplotlib's an error); where they are
not, each script without a font must get exactly one warning naming its Debian package.
"""

from __future__ import annotations

import logging
import sqlite3

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.image import imread

from attnmt import scripts
from attnmt.config import corpora
from attnmt.data import bible
from attnmt.errors import DataError
from attnmt.plotting import heatmap, length_curves, load_arrays, save_arrays
from attnmt.scripts import BASE_FONT, charmap, installed_families, label_set, script_of

PACKAGES = ("fonts-noto-cjk", "fonts-noto-core")


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test sees its own "once per process" warnings."""
    monkeypatch.setattr(scripts, "_warned", set())


@pytest.fixture(scope="module")
def first_verses() -> dict[str, str]:
    """Each version's Genesis 1:1, cleaned as the corpus reader cleans it."""
    try:
        path = corpora.db_path()
    except DataError as error:
        pytest.skip(str(error))
    codes = {v.code: name for name, v in corpora.versions().items()}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT bbName, vText FROM bible WHERE bNumber = 1 AND cNumber = 1 AND vNumber = 1"
        ).fetchall()
    return {codes[code]: bible.clean(text) for code, text in rows if code in codes}


def _scripts_without_font(words: list[str]) -> set[str]:
    """Scripts of `words` that neither DejaVu Sans nor any of the script's fonts can draw:
    worked out from the fonts' character maps, apart from the code under test."""
    names = set()
    for char in {c for w in words for c in w}:
        script = script_of(char)
        if script is None or ord(char) in charmap(BASE_FONT):
            continue
        fonts = [f for f in script.families if f in installed_families()]
        if not any(ord(char) in charmap(f) for f in fonts):
            names.add(script.name)
    return names


def _warnings(caplog) -> list[str]:
    """The missing-font warnings (not the note an old matplotlib gets about Indic shaping)."""
    messages = [r.getMessage() for r in caplog.records if r.name == "attnmt.scripts"]
    return [m for m in messages if "matplotlib 3.11 or later" not in m]


@pytest.mark.parametrize("version", list(corpora.versions()))
def test_a_word_of_every_version_draws_in_its_script(version, first_verses, tmp_path, caplog):
    words = first_verses[version].split()[:6]
    expected = _scripts_without_font(words)
    with caplog.at_level(logging.WARNING):
        paths = heatmap(np.full((2, len(words)), 1 / len(words)), words, ["In", "</s>"],
                        tmp_path / version)  # fmt: skip
    messages = _warnings(caplog)
    if not expected:
        assert messages == []
        assert label_set(words).missing == ()
    else:  # one warning a script, naming it and the package that adds its fonts
        assert len(messages) == len(expected)
        for name in expected:
            (message,) = [m for m in messages if name in m]
            assert any(package in message for package in PACKAGES)
    if not label_set(words).reshaped:  # the SVG keeps the text (else it draws paths)
        svg = paths[1].read_text(encoding="utf-8")
        assert all(w.replace("&", "&amp;").replace("<", "&lt;") in svg for w in words)


def test_a_script_without_a_font_gets_one_clear_warning(monkeypatch, tmp_path, caplog):
    # As on a machine without fonts-noto-cjk / fonts-noto-core: only matplotlib's DejaVu Sans.
    monkeypatch.setattr(scripts, "installed_families", lambda: frozenset({BASE_FONT}))
    monkeypatch.setattr(scripts, "_fallbacks", lambda: ())
    chinese, hindi = ["起初，", "神创造天地。"], ["परमेश्\u200dवर", "पृथ्वी"]
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # the same script again: no second warning
            heatmap(np.eye(2), chinese, ["神", "</s>"], tmp_path / "zh", formats=("png",))
        heatmap(np.eye(2), hindi, ["In", "</s>"], tmp_path / "hi", formats=("png",))
        heatmap(np.eye(2), ["في", "البدء"], ["In", "</s>"], tmp_path / "ar", formats=("png",))
    messages = _warnings(caplog)
    assert len(messages) == 2, messages  # Han and Devanagari; DejaVu Sans has Arabic
    han, devanagari = messages
    assert "Han" in han and "fonts-noto-cjk" in han and "起 U+8D77" in han and "起初，" in han
    assert "Devanagari" in devanagari and "fonts-noto-core" in devanagari
    assert "U+200D" not in devanagari  # the zero-width joiner is not a missing glyph
    assert label_set(chinese).missing and not label_set(["في"]).missing


def test_each_label_set_gets_the_fonts_of_its_script():
    if not {"Noto Sans CJK JP", "Noto Sans CJK SC"} <= installed_families():
        pytest.skip("matplotlib sees no Noto Sans CJK SC and JP (apt-get install fonts-noto-cjk)")
    chinese, japanese = label_set(["神创造天地"]), label_set(["神が天と地を"])
    # The same Han characters are drawn in their Chinese or their Japanese forms.
    assert chinese.families[0] == "Noto Sans CJK SC" and chinese.language == "zh-Hans"
    assert japanese.families[0] == "Noto Sans CJK JP" and japanese.language == "ja"
    assert label_set(["In", "the", "beginning"]).families == (BASE_FONT,)


# --- right to left -------------------------------------------------------------------------

ALEF_THEN_TATWEEL = "ا" + "ـ" * 12  # a tall letter, then a long low line: its first letter
# is the tall one, so it must stand at the right end when drawn right to left.


def _ink_columns(text: str, style: dict, path) -> np.ndarray:
    """Ink height of each pixel column of `text` drawn alone, first inked column to last."""
    fig = Figure(figsize=(3, 1), dpi=100)
    fig.text(0.5, 0.5, text, fontsize=30, ha="center", va="center", **style)
    fig.savefig(path)
    ink = imread(path)[..., :3].mean(axis=2) < 0.5  # (rows, columns): dark pixels
    columns = ink.sum(axis=0)
    return columns[np.flatnonzero(columns)[0] : np.flatnonzero(columns)[-1] + 1]


def test_arabic_labels_are_drawn_right_to_left(tmp_path):
    labels = label_set([ALEF_THEN_TATWEEL])
    columns = _ink_columns(labels.shown[0], labels.style(), tmp_path / "label.png")
    # The alef (the tallest column) stands at the right end, the tatweel runs left of it.
    assert np.argmax(columns) > 0.75 * len(columns)
    if scripts.RENDERER_SHAPES:
        # matplotlib shapes and orders itself: shaping before it reverses the word again,
        # which is why labels are handed over as they are.
        shaped = scripts.shape_for_display(ALEF_THEN_TATWEEL)
        twice = _ink_columns(shaped, labels.style(), tmp_path / "twice.png")
        assert np.argmax(twice) < 0.25 * len(twice)


def test_shaping_changes_the_drawing_never_the_data(tmp_path):
    words = ["في", "البدء", "خلق", "الله", "</s>"]  # ar-svd, Genesis 1:1
    shaped = scripts.shape_for_display("في البدء خلق الله")
    assert shaped != "في البدء خلق الله"  # joined letter forms, in display order
    assert all("\ufe70" <= c <= "\ufeff" or c == " " for c in shaped)  # presentation forms
    labels = label_set(words)
    assert labels.texts == tuple(words)
    if scripts.RENDERER_SHAPES:
        assert labels.shown == labels.texts  # matplotlib shapes: handed over as they are
    else:
        assert labels.shown == tuple(scripts.shape_for_display(w) for w in words)
    weights = np.full((2, len(words)), 0.2)
    paths = heatmap(weights, words, ["In", "</s>"], tmp_path / "ar")
    saved = load_arrays(save_arrays(tmp_path / "ar", weights, words, ["In", "</s>"]))
    assert saved.src_tokens == words  # characters and order as in the data
    if scripts.RENDERER_SHAPES:  # the SVG keeps the text, in logical order, for its reader
        svg = paths[1].read_text(encoding="utf-8")
        assert all(w.replace("<", "&lt;").replace(">", "&gt;") in svg for w in words)


def test_length_curves_draw_run_names_in_any_script(tmp_path, caplog):
    rows = [{"label": "1-10", "lo": 1, "hi": 10, "sentences": 3, "bleu": 5.0, "chrf": 20.0}]
    names = {"عربي": rows, "中文": rows, "русский": rows}
    with caplog.at_level(logging.WARNING):
        paths = length_curves(names, tmp_path / "len", title="BLEU: عربي")
    svg = paths[1].read_text(encoding="utf-8")
    if scripts.RENDERER_SHAPES:
        assert all(name in svg for name in names) and "BLEU: عربي" in svg
    assert len(_warnings(caplog)) == len(_scripts_without_font(list(names)))
