"""What training says and saves about the machine: the precision chosen and why, a time
estimate from the first measured steps, and a warning for bf16 where it is emulated."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt import devices
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
    "train.device=cpu",
    "train.log_every=5",
    "train.validate_every=1000",
    "train.valid_sentences=3",
    "train.valid_examples=0",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data-cache")


def config(tmp_path: Path, cache: Path, *extra: str):
    sets = [*TINY, f"data.cache_dir={cache}", f"train.run_dir={tmp_path / 'run'}", *extra]
    return load_config(None, sets)


def test_training_says_and_saves_the_precision_it_chose_and_why(tmp_path, cache, capsys):
    train(config(tmp_path, cache, "train.max_steps=2"), progress=True)
    err = capsys.readouterr().err
    chosen = devices.choose_precision("auto", devices.pick_device("cpu"), "rnnsearch")
    assert f"precision {chosen.name} ({chosen.reason}); device cpu" in err
    hardware = load_checkpoint(tmp_path / "run").state["hardware"]
    assert hardware["precision"] == chosen.name and hardware["device"] == "cpu"
    assert hardware["cpu"] == devices.cpu_model() and hardware["processes"] == 1
    assert set(hardware["cpu_flags"]) <= devices.NOTABLE_FLAGS


def test_a_time_estimate_follows_the_first_measured_steps(tmp_path, cache, capsys):
    train(config(tmp_path, cache, "train.max_steps=20"), progress=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if "estimate:" in line]
    assert len(lines) == 1, lines
    assert "s a step on this machine, about" in lines[0]
    assert "for the 8 steps left (validation not counted)" in lines[0]  # 20 - 2 - 10


def test_a_time_budget_gets_an_estimate_of_its_steps(tmp_path, cache, capsys):
    train(config(tmp_path, cache, "train.max_steps=13", "train.max_minutes=60"), progress=True)
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "estimate:" in line]
    assert "for the 1 step left" in line


def test_bf16_where_it_is_emulated_trains_but_warns_once(tmp_path, cache, capsys, monkeypatch):
    monkeypatch.setattr(devices, "native_bf16", lambda device: (False, "the CPU has no AMX"))
    result = train(config(tmp_path, cache, "train.max_steps=1", "train.precision=bf16"))
    assert result.step == 1
    err = capsys.readouterr().err
    assert err.count("warning: train.precision is bf16 but the CPU has no AMX") == 1
    assert "set train.precision=auto or fp32" in err
    assert load_checkpoint(tmp_path / "run").state["hardware"]["precision"] == "bf16"
