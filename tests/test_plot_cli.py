"""`attnmt plot`: draw sentences of a split from a run, and redraw saved plot data."""

from __future__ import annotations

import numpy as np
import pytest

from attnmt.cli import main
from attnmt.config import load_config
from attnmt.plotting import load_arrays
from attnmt.training import train

TINY = [
    "data.corpus=reverse",
    "data.synthetic_train_size=200",
    "data.synthetic_max_len=6",
    "data.batch_tokens=128",
    "model.embed_size=8",
    "model.hidden_size=16",
    "train.max_steps=2",
    "train.validate_every=1000",
    "train.valid_sentences=2",
]
TRANSFORMER = ["model.name=transformer", "model.heads=2", "model.layers=2", "model.ff_size=32"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("plot")
    common = [*TINY, f"data.cache_dir={root / 'cache'}"]
    for name, extra in (("rnn", []), ("tf", TRANSFORMER)):
        train(load_config(None, [*common, *extra, f"train.run_dir={root / name}"]), progress=False)
    return {"rnn": root / "rnn", "tf": root / "tf"}


def attnmt(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_plot_sentences_of_a_run(runs, tmp_path, capsys):
    out_dir = tmp_path / "rnn"
    code, out, _ = attnmt(capsys, "plot", runs["rnn"], "--sentences", "0,2-3", "--out", out_dir)
    assert code == 0
    names = {p.name for p in out_dir.iterdir()}
    assert names == {f"test-{i}.{ext}" for i in (0, 2, 3) for ext in ("npz", "png", "svg")}
    assert sorted(out.split()) == sorted(str(out_dir / name) for name in names)
    data = load_arrays(out_dir / "test-2.npz")
    assert data.weights.ndim == 2 and data.src_tokens[-1] == data.tgt_tokens[-1] == "</s>"
    assert data.weights.shape == (len(data.tgt_tokens), len(data.src_tokens))
    assert data.meta["model"] == "rnnsearch" and data.meta["forced"] is False
    assert "<svg" in (out_dir / "test-2.svg").read_text(encoding="utf-8")


def test_plot_the_reference_of_a_transformer(runs, tmp_path, capsys):
    code, _, _ = attnmt(
        capsys, "plot", runs["tf"], "--sentences", "1", "--reference", "--out", tmp_path
    )
    assert code == 0
    for name in (
        "test-1.npz",
        "test-1.png",
        "test-1.svg",
        "test-1-layers.png",
        "test-1-layers.svg",
    ):
        assert (tmp_path / name).is_file(), name
    data = load_arrays(tmp_path / "test-1.npz")
    assert data.weights.shape[:2] == (2, 2)  # (L, H, T, S)
    assert data.meta["forced"] is True
    # Forced decoding reads the reference: the rows are its tokens (reversed source) + EOS.
    assert data.tgt_tokens[:-1] == data.src_tokens[:-1][::-1]
    np.testing.assert_allclose(data.weights.sum(axis=-1), 1.0, atol=1e-5)


def test_redraw_from_saved_arrays(runs, tmp_path, capsys):
    first = tmp_path / "first"
    assert attnmt(capsys, "plot", runs["tf"], "--sentences", "4", "--out", first)[0] == 0
    again = tmp_path / "again"
    code, out, _ = attnmt(
        capsys, "plot", "--from", first / "test-4.npz", "--out", again, "--align-head", "2"
    )
    assert code == 0 and len(out.split()) == 4
    pictures = {f"test-4{kind}.{ext}" for kind in ("", "-layers") for ext in ("png", "svg")}
    assert {p.name for p in again.iterdir()} == pictures
    assert "head 2" in (again / "test-4.svg").read_text(encoding="utf-8")
    # Without --out the pictures go beside the .npz, in the formats asked for.
    (first / "test-4.png").unlink()
    code, _, _ = attnmt(capsys, "plot", "--from", first / "test-4.npz", "--formats", "png")
    assert code == 0 and (first / "test-4.png").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a RUN"),
        (("RUN", "--from", "x.npz"), "not both"),
        (("RUN", "--sentences", "a,b"), "not an index"),
        (("RUN", "--sentences", "5-2"), "backwards"),
        (("RUN", "--sentences", "100000"), "past the end"),
        (("RUN", "--align-layer", "1"), "Transformer"),
        (("--from", "missing.npz"), "not found"),
        (("RUN", "--formats", "png,doc"), "doc is not a picture format"),
    ],
)
def test_plot_errors_are_one_sentence(runs, tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    args = [runs["rnn"] if a == "RUN" else a for a in args]
    code, out, err = attnmt(capsys, "plot", *args)
    assert code == 2 and out == "" and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_redraw_refuses_a_layer_for_rnn_data(runs, tmp_path, capsys):
    assert attnmt(capsys, "plot", runs["rnn"], "--sentences", "0", "--out", tmp_path)[0] == 0
    code, _, err = attnmt(capsys, "plot", "--from", tmp_path / "test-0.npz", "--align-head", "1")
    assert code == 2 and "one (T, S) matrix" in err
