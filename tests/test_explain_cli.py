"""`--explain` from the command line: translate (JSON and plots), evaluate (the measured
table in the report) and plot, on conftest's tiny runs (text and images)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnmt.cli import main
from attnmt.decoding.attention_choice import choose_attention
from attnmt.decoding.runs import load_run
from attnmt.explain import explain
from attnmt.plotting import load_arrays


def test_translate_shows_the_explanation_in_place_of_the_attention(tiny_runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("the cat sat on the mat\n", encoding="utf-8")
    run = str(tiny_runs["tf"])
    args = [run, str(src), "--alignments", "json", "--explain", "occlusion"]
    assert main(["translate", *args, "--plot", str(tmp_path / "p")]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["explanations"][0]["method"] == "occlusion"
    loaded = load_run(run)
    ids = loaded.vocab.src.encode("the cat sat on the mat")
    tokens = loaded.vocab.tgt.encode(record["translation"])
    (expected,) = explain(
        loaded.model, [(ids, tokens)], "occlusion", choose_attention(loaded.cfg.model)
    )
    np.testing.assert_allclose(record["subword_weights"], expected.matrix.numpy(), atol=1e-4)
    saved = load_arrays(tmp_path / "p" / "line-0001.npz")
    assert saved.meta["explain"] == "occlusion" and saved.meta["scale"] == "signed"
    assert (tmp_path / "p" / "line-0001.png").exists()


def test_translate_explain_errors(tiny_runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("the cat\n", encoding="utf-8")
    assert main(["translate", str(tiny_runs["rnn"]), str(src), "--explain", "occlusion"]) != 0
    assert "add one of them" in capsys.readouterr().err
    bad = ["--alignments", "json", "--explain", "saliency"]
    assert main(["translate", str(tiny_runs["rnn"]), str(src), *bad]) != 0
    assert "'saliency' is not a method" in capsys.readouterr().err
    plain = ["--alignments", "json", "--explain", "attention"]
    assert main(["translate", str(tiny_runs["plain"]), str(src), *plain]) != 0
    assert "has none; use grad-input" in capsys.readouterr().err
    ok = ["--alignments", "pharaoh", "--explain", "grad-input"]
    assert main(["translate", str(tiny_runs["plain"]), str(src), *ok]) == 0


def test_evaluate_measures_each_method(tiny_runs, tmp_path, capsys):
    out = tmp_path / "eval"
    methods = "attention,attention-norm,rollout,grad-input,integrated-gradients,occlusion"
    args = ["evaluate", str(tiny_runs["tf"]), "--limit", "6", "--out", str(out)]
    assert main([*args, "--explain", methods, "--explain-sentences", "4", "--ig-steps", "4"]) == 0
    report = json.loads(next(out.glob("*.json")).read_text())["explanations"]
    assert report["sentences"] == 4 and set(report["methods"]) == set(methods.split(","))
    for row in report["methods"].values():
        assert len(row["deletion"]) == len(row["insertion"]) == 11
        assert row["deletion"][0] == row["insertion"][-1]  # both the whole source
        assert row["deletion"][-1] == row["insertion"][0]  # both all <unk>
        assert isinstance(row["better_than_random"], bool)
    assert report["methods"]["integrated-gradients"]["completeness_error"] >= 0
    text = next(out.glob("*.md")).read_text()
    assert "## Explanations" in text and "| rollout |" in text and "| random order |" in text


def test_evaluate_and_plot_explain_image_runs(tiny_image_runs, tmp_path, capsys):
    run = str(tiny_image_runs["soft"])
    out = tmp_path / "eval"
    args = ["evaluate", run, "--limit", "2", "--out", str(out), "--explain-sentences", "2"]
    assert (
        main([*args, "--explain", "attention,occlusion,integrated-gradients", "--ig-steps", "2"])
        == 0
    )
    report = json.loads(next(out.glob("*.json")).read_text())["explanations"]
    for row in report["methods"].values():
        assert 0.0 <= row["mass_on_digit"] <= 100.0 and row["digits"] > 0
    assert (
        main(
            [
                "plot",
                run,
                "--explain",
                "occlusion",
                "--out",
                str(tmp_path / "p"),
                "--formats",
                "png",
            ]
        )
        == 0
    )
    assert (tmp_path / "p" / "test-0.png").exists()


@pytest.mark.parametrize("method", ["rollout", "integrated-gradients"])
def test_plot_draws_an_explanation(tiny_runs, tmp_path, method):
    out = tmp_path / "p"
    args = ["plot", str(tiny_runs["tf"]), "--reference", "--explain", method, "--out", str(out)]
    assert main([*args, "--ig-steps", "4", "--formats", "png"]) == 0
    saved = load_arrays(out / "test-0.npz")
    assert saved.meta["explain"] == method and np.asarray(saved.weights).ndim == 2


def test_a_notebook_draws_where_an_image_run_looks(tiny_image_runs):
    import attnmt
    from attnmt.errors import UserError

    soft = attnmt.load(tiny_image_runs["soft"], device="cpu")
    fig = soft.looks(0)
    panels = [ax for ax in fig.axes if ax.images]
    assert panels and all(len(ax.images) == 2 for ax in panels)  # the canvas, the attention
    assert panels[-1].get_title() == "'</s>'" and "true '" in fig._suptitle.get_text()
    glimpses = attnmt.load(tiny_image_runs["glimpses"], device="cpu").looks(1)
    assert any(ax.lines for ax in glimpses.axes)  # the glimpse path drawn on the canvas
    # the image report of `attnmt evaluate` comes with the Python call too
    assert "localisation" in attnmt.evaluate(soft, split="test", beam=1, limit=4).data["images"]
    with pytest.raises(UserError, match="canvases; index 999"):
        soft.looks(999)
