"""Plots from arrays: files written, labels legible and searchable, any script, redrawable."""

import logging
import struct
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

from attnmt import scripts
from attnmt.plotting import heatmap, heatmap_grid, length_curves, load_arrays, save_arrays
from attnmt.scripts import missing_glyphs


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def _attention(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(cols), size=rows)  # (T, S)


def test_heatmap_writes_png_and_svg_with_searchable_labels(tmp_path):
    src = ["the", "agreement", "on", "the", "zone", "</s>"]
    tgt = ["accord", "sur", "la", "zone", "</s>"]
    paths = heatmap(_attention(5, 6), src, tgt, tmp_path / "figs" / "verse.1", title="Fig 3")
    assert [p.name for p in paths] == ["verse.1.png", "verse.1.svg"]
    assert all(p.stat().st_size > 0 for p in paths)
    svg = paths[1].read_text(encoding="utf-8")
    for token in [*src, *tgt, "Fig 3"]:
        assert token.replace("<", "&lt;").replace(">", "&gt;") in svg
    # The style is local to the call: global settings are left as they were.
    assert matplotlib.rcParams["svg.fonttype"] == matplotlib.rcParamsDefault["svg.fonttype"]
    assert matplotlib.rcParams["font.size"] == matplotlib.rcParamsDefault["font.size"]


def test_heatmap_takes_tensors_and_a_dollar_is_not_mathtext(tmp_path):
    paths = heatmap(torch.eye(2), ["$5", "$x$"], ["a", "b"], tmp_path / "t", formats=("svg",))
    assert "$x$" in paths[0].read_text(encoding="utf-8")


def test_long_sentence_gives_a_bigger_figure(tmp_path):
    short = heatmap(_attention(5, 5), list("abcde"), list("vwxyz"), tmp_path / "s")
    words = [f"word{i}" for i in range(60)]
    long = heatmap(_attention(60, 60), words, words, tmp_path / "l")
    short_w, short_h = _png_size(short[0])
    long_w, long_h = _png_size(long[0])
    # ~0.3 in per token at 100 dpi: 60 tokens need at least 1,800 pixels each way.
    assert long_w > 1800 and long_h > 1800
    assert long_w > 3 * short_w and long_h > 3 * short_h
    assert "word59" in long[1].read_text(encoding="utf-8")


def test_non_latin_scripts_draw_without_warnings(tmp_path, caplog, monkeypatch):
    # pytest turns warnings into errors here, so a glyph warning would fail this test.
    monkeypatch.setattr(scripts, "_warned", set())  # a missing script is reported once a process
    src = ["Ἐν", "ἀρχῇ", "В", "начале", "في", "البدء", "בְּרֵאשִׁית", "😀", "日本", "\ue000"]
    tgt = ["In", "the", "beginning", "</s>"]
    with caplog.at_level(logging.WARNING, logger="attnmt.plotting"):
        paths = heatmap(_attention(4, 10), src, tgt, tmp_path / "scripts")
    assert all(p.stat().st_size > 0 for p in paths)
    assert "начале" in paths[1].read_text(encoding="utf-8")
    # A private-use character has no glyph in any font: reported once, in the log.
    assert "U+E000" in caplog.text
    assert "\ue000" in missing_glyphs(src)
    assert missing_glyphs(["Ἐν ἀρχῇ", "В начале"]) == []  # DejaVu Sans has Greek, Cyrillic


def test_shape_mismatch_names_expected_and_actual(tmp_path):
    with pytest.raises(ValueError, match=r"\(T, S\) = \(2, 3\).*2 target and 4 source"):
        heatmap(np.zeros((2, 3)), list("abcd"), list("xy"), tmp_path / "bad")
    with pytest.raises(ValueError, match=r"\(L, H, T, S\), got shape \(2, 3\)"):
        heatmap_grid(np.zeros((2, 3)), list("abc"), list("xy"), tmp_path / "bad")


def test_grid_of_layers_and_heads(tmp_path):
    weights = np.stack([np.stack([_attention(3, 4, seed=l * 3 + h) for h in range(3)])
                        for l in range(2)])  # fmt: skip
    paths = heatmap_grid(weights, ["a", "b", "c", "</s>"], ["x", "y", "</s>"], tmp_path / "g",
                         title="all heads")  # fmt: skip
    svg = paths[1].read_text(encoding="utf-8")
    for text in ("layer 1", "layer 2", "head 1", "head 3", "all heads"):
        assert text in svg
    assert _png_size(paths[0])[0] > _png_size(paths[0])[1]  # 3 heads wide, 2 layers tall


def test_length_curves_for_several_runs(tmp_path):
    rnn = [
        {"label": "1-10", "lo": 1, "hi": 10, "sentences": 4, "bleu": 20.0, "chrf": 40.0},
        {"label": "11-20", "lo": 11, "hi": 20, "sentences": 2, "bleu": 12.5, "chrf": 35.0},
    ]
    attention = [
        {"label": "1-10", "lo": 1, "hi": 10, "sentences": 4, "bleu": 22.0, "chrf": 42.0},
        {"label": "21-30", "lo": 21, "hi": 30, "sentences": 1, "bleu": 21.0, "chrf": 41.0},
    ]
    paths = length_curves({"RNNenc-50": rnn, "RNNsearch-50": attention}, tmp_path / "len")
    svg = paths[1].read_text(encoding="utf-8")
    for text in ("RNNenc-50", "RNNsearch-50", "1-10", "11-20", "21-30", "BLEU"):
        assert text in svg
    chrf = length_curves({"a": rnn}, tmp_path / "chrf", metric="chrf", formats=("png",))
    assert chrf[0].stat().st_size > 0


def test_save_and_load_arrays_round_trip_without_pickle(tmp_path):
    weights = torch.rand(2, 3, 4, 5)  # (L, H, T, S)
    src, tgt = ["Ἐν", "ἀρχῇ", "ἦν", "", "</s>"], ["In", "the", "beginning", "</s>"]
    path = save_arrays(tmp_path / "run" / "verse", weights, src, tgt, verse="John 1:1", step=7)
    assert path.name == "verse.npz"
    with np.load(path, allow_pickle=False) as data:
        assert all(data[name].dtype != object for name in data.files)
    loaded = load_arrays(path)
    np.testing.assert_array_equal(loaded.weights, weights.numpy())
    assert loaded.src_tokens == src and loaded.tgt_tokens == tgt
    assert loaded.meta == {"verse": "John 1:1", "step": 7}
    redrawn = heatmap_grid(loaded.weights, loaded.src_tokens, loaded.tgt_tokens,
                           tmp_path / "again", formats=("png",))  # fmt: skip
    assert redrawn[0].exists()


def test_save_arrays_refuses_bad_shapes_and_meta(tmp_path):
    with pytest.raises(ValueError, match="one label per"):
        save_arrays(tmp_path / "x.npz", np.zeros((2, 2)), ["a"], ["b", "c"])
    with pytest.raises(ValueError, match="JSON"):
        save_arrays(tmp_path / "x.npz", np.zeros((1, 1)), ["a"], ["b"], when=object())


def test_long_labels_and_empty_weights(tmp_path):
    # Labels longer than the panels must not collapse the layout (a warning, so an error here).
    long = ["x" * 60, "y" * 45]
    paths = heatmap_grid(np.full((1, 1, 2, 2), 0.5), long, long, tmp_path / "g", title="t")
    assert long[0] in paths[1].read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="nothing to draw"):
        heatmap(np.zeros((0, 0)), [], [], tmp_path / "empty")
