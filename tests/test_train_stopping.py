"""At the level of the training loop: early stopping on the metrics the shipped configs stop
on (dev BLEU and exact match, higher is better) and the plateau schedule's state through a
checkpoint and --resume. Dev scores are scripted (the rest of each validation is real)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch

import attnmt.training.loop as train_module
from attnmt.checkpoint import load_checkpoint
from attnmt.config import load_config
from attnmt.training import train

TINY = [
    "data.corpus=reverse",
    "data.synthetic_train_size=40",
    "data.synthetic_max_len=6",
    "data.batch_tokens=64",
    "model.embed_size=8",
    "model.hidden_size=16",
    "model.dropout=0.1",
    "train.device=cpu",
    "train.max_steps=12",
    "train.log_every=2",
    "train.checkpoint_every=2",
    "train.validate_every=2",
    "train.valid_sentences=4",
    "train.valid_examples=0",
    "train.lr=0.01",
    "train.precision=fp32",  # one path on every CPU (`auto`: bf16 on an AMD EPYC Zen 4)
]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny(run_dir: Path, cache: Path, *extra: str):
    return load_config(None, [*TINY, f"data.cache_dir={cache}", f"train.run_dir={run_dir}", *extra])


def script(monkeypatch, **values) -> None:
    """Each validation returns the next of each scripted metric's values."""
    real = train_module.validate
    streams = {name: iter(scripted) for name, scripted in values.items()}

    def validate(*args, **kwargs):
        return {**real(*args, **kwargs), **{k: next(v) for k, v in streams.items()}}

    monkeypatch.setattr(train_module, "validate", validate)


@pytest.mark.parametrize("metric", ["bleu", "exact"])
def test_early_stopping_keeps_the_highest_score(metric, tmp_path, monkeypatch):
    # Highest 30 at step 4; 20 and 25 after it are worse: patience 2 stops at step 8. Read
    # as lower-is-better it would keep 10 (step 2) and stop at step 6.
    script(monkeypatch, **{metric: [10.0, 30.0, 20.0, 25.0, 40.0, 50.0]})
    run_dir = tmp_path / "run"
    extra = (f"train.early_stopping_metric={metric}", "train.patience=2", "train.keep_last=1")
    result = train(tiny(run_dir, tmp_path / "cache", *extra), progress=False)
    assert result.stopped_because == "early_stopping" and result.step == 8
    assert result.best == 30.0
    best = json.loads((run_dir / "checkpoints" / "best.json").read_text())
    assert best == {"checkpoint": "step-00000004", "step": 4, "metric": 30.0}
    assert load_checkpoint(run_dir / "checkpoints" / "step-00000004").step == 4


# Dev losses: the rate halves after two validations without a lower loss (at 6), then the
# bad count is 1 at step 8; a resumed run must know the best (3.0), the count (1) and the
# rate to halve again at step 10, as the uninterrupted run does.
LOSSES = [3.0, 3.5, 3.6, 3.7, 3.8, 1.0]


def test_plateau_schedule_state_survives_a_checkpoint(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    extra = ("train.schedule=plateau", "train.early_stopping_metric=loss")
    script(monkeypatch, loss=LOSSES)
    reference = tmp_path / "reference"
    train(tiny(reference, cache, *extra), progress=False)
    final = load_checkpoint(reference).state["schedule"]
    assert final["lr"] == pytest.approx(0.01 / 4)  # halved at 6 and at 10
    assert (final["best"], final["bad"]) == (1.0, 0)
    monkeypatch.undo()

    # Interrupted during step 9: step 8 is saved, the schedule with it.
    script(monkeypatch, loss=LOSSES[:4])
    real, calls = train_module.batch_loss, {"n": 0}

    def batch_loss(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 9:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(train_module, "batch_loss", batch_loss)
    run_dir = tmp_path / "run"
    handler = signal.getsignal(signal.SIGINT)  # SIG_IGN under nohup, else Python's default
    assert train(tiny(run_dir, cache, *extra), progress=False).step == 8
    saved = load_checkpoint(run_dir).state["schedule"]
    assert (saved["lr"], saved["best"], saved["bad"]) == (pytest.approx(0.005), 3.0, 1)
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is handler  # the trainer put back what it found

    script(monkeypatch, loss=LOSSES[4:])
    train(tiny(run_dir, cache, *extra), resume=True, progress=False)
    ours, theirs = load_checkpoint(run_dir), load_checkpoint(reference)
    assert ours.state["schedule"] == theirs.state["schedule"]
    for name, tensor in ours.model.items():
        assert torch.equal(tensor, theirs.model[name]), name
