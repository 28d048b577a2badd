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


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_the_optimizer_is_fused_and_steps_as_the_unfused_one(tmp_path, cache, kind):
    import torch

    from attnmt.training.run import build_optimizer

    cfg = load_config(None, [*TINY, f"train.optimizer={kind}", "train.weight_decay=0.01"])
    torch.manual_seed(0)
    fused_model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
    plain_model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
    plain_model.load_state_dict(fused_model.state_dict())
    before = fused_model[0].weight.detach().clone()
    fused = build_optimizer(cfg, fused_model)
    assert fused.defaults["fused"] is True
    plain_kind = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
    plain = plain_kind(plain_model.parameters(), lr=cfg.train.lr, weight_decay=0.01)
    x = torch.randn(16, 5)
    for _ in range(5):
        for model, opt in ((fused_model, fused), (plain_model, plain)):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
    # The fused kernel orders Adam's arithmetic its own way on each CPU: a few ulps of each
    # update (<= lr = 1e-3) and of each weight (|w| < 1: ~6e-8) a step, so 5 steps stay
    # below 5e-7 (measured: 7e-9 at most, Xeon with AMX and AVX2 or AVX512 kernels).
    for a, b in zip(fused_model.parameters(), plain_model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    # Adam's first steps move a weight by about lr each while its gradient keeps its sign:
    # 5 steps, ~5e-3 (measured 5.0e-3).
    assert (fused_model[0].weight - before).abs().max() > 1e-3  # it did step
