"""The README's main job (`make demo` = `attnmt quickstart`) end to end, on a tiny budget."""

from __future__ import annotations

import pytest

from attnmt.checkpoint import load_checkpoint
from attnmt.cli import main


@pytest.mark.slow
def test_main_job_prepares_trains_evaluates_translates_and_draws(tmp_path, capsys):
    overrides = [
        f"train.run_dir={tmp_path / 'run'}",
        f"data.cache_dir={tmp_path / 'cache'}",
        "train.max_steps=3",
        "train.validate_every=3",
        "train.valid_sentences=5",
        "data.max_words=6",
        "data.vocab_size=300",
        "model.hidden_size=16",
        "model.embed_size=16",
    ]
    # --min-dev-bleu 0: 3 steps are far below what the shipped config reaches (its guard is
    # tested in test_quickstart_guard.py).
    args = ["quickstart", "--beam", "2", "--examples", "2", "--min-dev-bleu", "0"]
    for item in overrides:
        args += ["--set", item]
    assert main(args) == 0
    out = capsys.readouterr().out
    run = tmp_path / "run"
    assert (run / "eval" / "test-beam2.json").is_file()
    assert (run / "eval" / "test-beam2-length.png").is_file()
    assert len(list((run / "quickstart" / "plots").glob("*.png"))) == 2
    assert len((run / "quickstart" / "output.txt").read_text(encoding="utf-8").splitlines()) == 2
    assert "test (879 verses, 3 references): BLEU" in out and "heatmaps:" in out
    assert load_checkpoint(run).step == 3
    metrics = (run / "metrics.jsonl").read_bytes()
    checkpoints = sorted(p.name for p in (run / "checkpoints").iterdir())
    # A second run resumes the finished run: no more training, same report.
    assert main(args) == 0
    assert "== 2/5 resume rnnsearch" in capsys.readouterr().out
    assert load_checkpoint(run).step == 3
    assert (run / "metrics.jsonl").read_bytes() == metrics  # no step, no validation logged
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == checkpoints


def test_main_job_refuses_a_model_without_attention_before_training(tmp_path, capsys):
    args = ["quickstart", "--set", "model.name=rnnencdec", "--set", f"train.run_dir={tmp_path}"]
    assert main(args) == 2
    assert "has none" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
