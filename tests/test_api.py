"""The Python API (attnmt.load / train / evaluate / compare) and the results' views.

What the notebooks rely on: the API gives the numbers `attnmt score` gives on the same run,
every attention map of a translation (the record both build is tests/test_records.py's),
results render as one self-contained HTML string, and bad input gets one clear sentence.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attnmt
from attnmt.errors import UserError
from attnmt.views.html import asset, shade, static_table

LINES = ["a b c", "d e", ""]


def _cli(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "attnmt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _words(tiny_runs) -> list[str]:
    """Sentences in the tiny corpus's own vocabulary (tests/conftest.py's WORDS)."""
    from tests.conftest import WORDS

    return [" ".join(WORDS[:3]), " ".join(WORDS[3:5][::-1]), ""]


@pytest.mark.parametrize("name", ["rnn", "tf"])
def test_translate_gives_every_map_and_the_links_of_the_default(tiny_runs, name):
    # The record itself (one builder for the CLI, the API and the server) is checked in
    # tests/test_records.py; here, what the API shows of a run.
    lines = _words(tiny_runs)
    got = attnmt.load(tiny_runs[name], device="cpu").translate(lines, beam=3)
    assert len(got) == 3 and got[2].text == "" and got[2].record["links"] == []
    for ours in got[:2]:
        record = ours.record
        chosen = record["attention"][record["default_attention"]]
        assert chosen["alignment"] == record["alignment"] == ours.alignment
        assert [list(link) for link in ours.links] == record["links"]
        # every map is a distribution over the source (attention rows sum to 1)
        for m in record["attention"]:
            np.testing.assert_allclose(np.sum(m["subword"], axis=1), 1.0, atol=1e-3)
    if name == "tf":  # each layer's mean, then its heads: 2 layers x (1 + 2 heads)
        names = [m["name"] for m in got[0].record["attention"]]
        assert len(names) == 6 and names[0] == "layer 1, mean of heads"


def test_score_equals_the_cli(tiny_runs):
    src, tgt = _words(tiny_runs)[:2], ["x y", "z"]
    from tests.conftest import WORDS

    tgt = [" ".join(WORDS[:3][::-1]), " ".join(WORDS[3:5])]
    model = attnmt.load(tiny_runs["rnn"], device="cpu")
    got = model.score(src, tgt)
    tsv = "".join(f"{s}\t{t}\n" for s, t in zip(src, tgt, strict=True))
    cli = [
        json.loads(x)
        for x in _cli(
            "score", str(tiny_runs["rnn"]), "--alignments", "json", "--device", "cpu", stdin=tsv
        ).splitlines()
    ]
    for ours, theirs in zip(got, cli, strict=True):
        assert ours.score == pytest.approx(theirs["score"], abs=1e-5)
        assert ours.record["token_log_probs"] == pytest.approx(theirs["token_log_probs"], abs=1e-4)
        assert ours.alignment == theirs["alignment"]
        assert ours.record["target"] == theirs["target"]
    aligned = model.align(src[0], tgt[0])
    assert aligned.links == [tuple(x) for x in cli[0]["links"]]


def test_explanations_join_the_attention_maps(tiny_runs):
    model = attnmt.load(tiny_runs["rnn"], device="cpu")
    line = _words(tiny_runs)[0]
    done = model.translate(line, explain=["occlusion", "grad-input"])
    maps = done.record["attention"]
    assert [m["method"] for m in maps] == ["attention", "occlusion", "grad-input"]
    assert [m["scale"] for m in maps] == ["weights", "signed", "signed"]
    # occlusion's matrix is what translating without each word does (explain's own)
    from attnmt.explain.methods import explain

    sentence = model.translator().translate([line])[0]
    ref = explain(
        model.module,
        [(sentence.ids, sentence.translation.tokens)],
        "occlusion",
        model.translator().choice,
    )[0]
    np.testing.assert_allclose(maps[1]["subword"], ref.matrix.numpy(), atol=1e-4)


def test_self_attention_is_every_encoder_head_with_its_weights(tiny_runs):
    model = attnmt.load(tiny_runs["tf"], device="cpu")
    line = _words(tiny_runs)[0]
    done = model.self_attention(line)
    maps = done.record["attention"]
    pieces = done.record["source_pieces"]
    assert pieces == done.record["target_pieces"] and pieces[-1] == "</s>"
    assert [(m["layer"], m["head"]) for m in maps] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    # each head's rows are softmax distributions over the source, the encoder's own
    import torch

    from attnmt.data.batching import pad_batch

    src, mask = pad_batch([[*model.vocab.src.encode(line), 3]], torch.device("cpu"))
    with torch.no_grad():
        memory = model.module.encode(src, mask, need_weights=True)
    for m in maps:
        want = memory.self_weights[m["layer"] - 1][0, m["head"] - 1].numpy()
        np.testing.assert_allclose(m["word"], want, atol=1e-4)
        np.testing.assert_allclose(np.sum(m["word"], axis=1), 1.0, atol=1e-3)
    assert "encoder layer 2, head 2" in done.to_html()
    with pytest.raises(UserError, match="no self-attention"):
        attnmt.load(tiny_runs["rnn"], device="cpu").self_attention(line)


def test_show_draws_a_matrix_of_ones_own():
    weights = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    view = attnmt.show(weights, ["the", "black", "cat"], ["le", "chat"], title="by hand")
    (record,) = view.records
    (entry,) = record["attention"]
    assert entry["alignment"] == "0-0 2-1" and entry["word"] == weights.tolist()
    assert view.titles == ["by hand"] and view.panels()[0].matrix.shape == (2, 3)
    both = attnmt.show({"a": weights, "b": -weights}, ["x", "y", "z"], ["u", "v"], scale="signed")
    assert [m["name"] for m in both.records[0]["attention"]] == ["a", "b"]
    with pytest.raises(UserError, match=r"\(target words, source words\) = \(3, 3\)"):
        attnmt.show(weights, ["a", "b", "c"], ["x", "y", "z"])


def test_model_without_attention_translates_and_says_why_no_alignment(tiny_runs):
    model = attnmt.load(tiny_runs["plain"], device="cpu")
    done = model.translate(_words(tiny_runs)[0])
    assert done.record["attention"] == []
    assert "no attention weights" in done.to_html()
    with pytest.raises(UserError, match="has no attention"):
        model.align("a", "b")


def test_bad_input_gets_one_sentence(tiny_runs, tmp_path):
    model = attnmt.load(tiny_runs["rnn"], device="cpu")
    with pytest.raises(UserError, match="as many targets as sources"):
        model.score(["a", "b"], ["c"])
    with pytest.raises(UserError, match="string or a list of strings"):
        model.translate(42)
    with pytest.raises(UserError, match="n_best=3 needs beam >= 3"):
        model.translate("a", n_best=3)
    with pytest.raises(UserError, match=r"run directory|checkpoint"):
        attnmt.load(tmp_path)
    with pytest.raises(UserError, match="must be a dict"):
        attnmt.train("configs/reverse.yaml", train=5)


def test_one_output_is_one_self_contained_string(tiny_runs, tmp_path):
    model = attnmt.load(tiny_runs["tf"], device="cpu")
    done = model.translate(_words(tiny_runs)[:2])
    page = done.to_html()
    ids = re.findall(r'<div class="attnmt-view" id="(attnmt-[0-9a-f]+)"', page)
    assert len(ids) == 1 and ids[0] not in model.translate("a").to_html()  # unique per output
    assert asset("heatmap.js") in page and asset("heatmap.css") in page  # the page's own files
    for remote in ("http://", "https://", "require(", "import(", "<link", "src="):
        assert remote not in page.replace(asset("heatmap.js"), ""), remote
    assert page.count('class="attnmt-static"') == 2  # a picture per sentence, before scripts
    bundle = done._repr_mimebundle_()
    assert bundle["text/html"].startswith('<div class="attnmt-view"')
    assert bundle["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    saved = done.save_html(tmp_path / "view.html").read_text(encoding="utf-8")
    assert saved.startswith("<!doctype html>") and '<meta charset="utf-8">' in saved
    fig = done.plot(1, level="subword")
    assert (
        fig.axes
        and fig.axes[0].get_title()
        == done.records[1]["attention"][done.records[1]["default_attention"]]["name"]
    )


def test_the_png_shows_every_sentence_and_map_in_the_views_colours(tiny_runs):
    from io import BytesIO

    from matplotlib.image import imread

    from attnmt.plotting import VIEW_BLUE, panels_figure

    model = attnmt.load(tiny_runs["tf"], device="cpu")
    done = model.translate(_words(tiny_runs)[:2])
    panels = done.panels()
    maps = [len(r["attention"]) for r in done.records]
    assert len(panels) == sum(maps) and sum(maps) > 2  # every map of both sentences
    assert panels[0].title.startswith("sentence 1: ") and panels[-1].title.startswith("sentence 2")
    fig = panels_figure(panels)
    assert len([ax for ax in fig.axes if ax.images]) == len(panels)
    # the view's scale: weight 0 white, weight 1 its blue (not the paper's black-to-white)
    cmap = fig.axes[0].images[0].get_cmap()
    np.testing.assert_allclose(cmap(0.0)[:3], (1.0, 1.0, 1.0))
    np.testing.assert_allclose(cmap(1.0)[:3], np.array(VIEW_BLUE) / 255, atol=1e-6)
    png = imread(BytesIO(done._repr_mimebundle_()["image/png"]))
    assert png.shape[0] > 300 and png.shape[1] > 300  # readable: not a 200-pixel thumbnail


def test_the_static_picture_has_the_components_colours():
    record = {
        "source_words": ["a", "<b>"],
        "target_words": ["x"],
        "attention": [
            {
                "name": "m",
                "word": [[0.25, 0.75]],
                "subword": [[0.25, 0.75]],
                "alignment": "1-0",
                "scale": "weights",
            }
        ],
    }
    table = static_table(record)
    assert "rgba(30, 60, 160, 0.500)" in table  # sqrt(0.25), as heatmap.js's gamma
    assert "rgba(30, 60, 160, 0.866)" in table and "box-shadow" in table  # the link 1-0
    assert "&lt;b&gt;" in table and "<b>" not in table  # words are text, never HTML
    assert shade("signed", 0.5, 1.0) == "rgba(190, 30, 45, 0.707)"
    assert shade("signed", -0.5, 1.0) == "rgba(30, 60, 160, 0.707)"
    assert shade("row", float("nan"), 1.0) == "rgba(30, 60, 160, 0.000)"


def test_data_cannot_close_its_script(tiny_runs):
    from attnmt.views.html import view_html

    record = {"source": "</script><script>alert(1)</script>", "translation": "x", "attention": []}
    page = view_html([record])
    assert page.count("</script>") == 2  # the data's and the code's own, nothing more
    assert "alert(1)</script>" not in page


def test_compare_puts_two_runs_side_by_side(tiny_runs):
    line = _words(tiny_runs)[:2]
    a = attnmt.load(tiny_runs["rnn"], device="cpu")
    b = attnmt.load(tiny_runs["tf"], device="cpu")
    both = attnmt.compare(a.translate(line), b.translate(line), names=["rnn", "tf"])
    assert both.titles == ["rnn", "tf", "rnn", "tf"]
    assert "grid-template-columns" in both.to_html()
    with pytest.raises(UserError, match="two results or more"):
        attnmt.compare(a.translate(line))


def test_train_and_evaluate_return_objects(tmp_path, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    run = attnmt.train(
        "configs/reverse.yaml",
        progress=False,
        data={"synthetic_train_size": 200, "cache_dir": str(tmp_path / "cache")},
        model={"hidden_size": 16, "embed_size": 8},
        train={
            "run_dir": str(tmp_path / "rev"),
            "max_steps": 6,
            "validate_every": 6,
            "checkpoint_every": 6,
            "log_every": 3,
            "precision": "fp32",
        },
    )
    assert run.step == 6 and run.run_dir == tmp_path / "rev"
    assert [e["type"] for e in run.metrics].count("train") == 2
    assert run.plot().axes[0].get_xlabel() == "step"
    scores = attnmt.evaluate(run.run_dir, split="dev", beam=2, limit=20, device="cpu")
    assert 0.0 <= scores.bleu <= 100.0 and len(scores.hypotheses) == 20
    assert "BLEU by source length" in scores._repr_html_()
    assert scores.plot().axes[0].get_xlabel() == "source sentence length (words)"
    model = run.load(device="cpu")
    assert model.step == 6 and model.config.model.hidden_size == 16


def test_import_attnmt_stays_light():
    code = "import sys, attnmt; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_progress_bars_show_in_a_notebook_without_widgets(monkeypatch):
    import io

    from attnmt import progress

    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr(progress.importlib.util, "find_spec", lambda name: None)
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    bar = progress.progress_bar(total=3, desc="decoding", dynamic_ncols=True)
    assert not bar.disable and type(bar).__module__ == "tqdm.std"  # text, no widget
    bar.update(3)
    bar.close()
    assert "decoding: 100%" in err.getvalue()
    monkeypatch.setattr(progress, "in_notebook", lambda: False)  # a log file: no bar
    assert progress.progress_bar(total=3).disable
