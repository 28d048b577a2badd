"""Checkpoints: round trips, atomic writes, pruning, and clear errors on bad files."""

import json
import os
import stat

import pytest
import torch
from safetensors import safe_open

from attnmt.checkpoint import (
    CheckpointManager,
    load_checkpoint,
    load_weights,
    save_checkpoint,
    save_weights,
)
from attnmt.errors import CheckpointError


def _model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(2):
        optimizer.zero_grad()
        model(torch.randn(5, 3)).sum().backward()
        optimizer.step()
    return model, optimizer


def test_round_trip_restores_model_optimizer_and_state(tmp_path):
    model, optimizer = _model_and_optimizer()
    rng = torch.get_rng_state()
    save_checkpoint(
        tmp_path / "ck",
        model_state=model.state_dict(),
        optimizer_state=optimizer.state_dict(),
        state={"step": 2, "config": {"a": 1}},
        tensors={"rng": rng},
    )
    ck = load_checkpoint(tmp_path / "ck")
    assert ck.step == 2 and ck.state["config"] == {"a": 1}
    assert torch.equal(ck.tensors["rng"], rng)
    model2, optimizer2 = _model_and_optimizer()
    for p in model2.parameters():
        p.data.zero_()
    model2.load_state_dict(ck.model)
    optimizer2.load_state_dict(ck.optimizer)
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(a, b)
    # One more identical step on both gives identical weights: the Adam moments came back.
    x = torch.randn(5, 3)
    for m, o in ((model, optimizer), (model2, optimizer2)):
        o.zero_grad()
        m(x).sum().backward()
        o.step()
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(a, b)


def test_tied_weights_are_saved(tmp_path):
    emb = torch.nn.Embedding(5, 3)
    out = torch.nn.Linear(3, 5, bias=False)
    out.weight = emb.weight
    state = {"emb.weight": emb.weight, "out.weight": out.weight}
    save_checkpoint(tmp_path / "ck", model_state=state)
    assert torch.equal(load_checkpoint(tmp_path / "ck").model["out.weight"], emb.weight)


def test_tied_weights_are_stored_once_and_come_back_as_independent_copies(tmp_path):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(300, 40)
    out = torch.nn.Linear(40, 300)
    out.weight = emb.weight
    state = {"emb.weight": emb.weight, "out.weight": out.weight, "out.bias": out.bias}
    save_checkpoint(tmp_path / "ck", model_state=state)
    # One 300x40 fp32 matrix in the file, not two (12,000 values = 48,000 bytes).
    size = (tmp_path / "ck" / "model.safetensors").stat().st_size
    assert 48_000 + 300 * 4 <= size < 2 * 48_000
    loaded = load_checkpoint(tmp_path / "ck").model
    assert sorted(loaded) == sorted(state)
    for name, value in state.items():
        assert torch.equal(loaded[name], value)
    loaded["emb.weight"].add_(1.0)  # averaging adds in place: the alias must not move too
    assert torch.equal(loaded["out.weight"], emb.weight)
    assert json.loads((tmp_path / "ck" / "state.json").read_text())["version"] == 2


def test_save_weights_casts_to_fp16_and_aliases_only_equal_tensors(tmp_path):
    ones = torch.ones(4, 3)
    tensors = {
        "a": ones,
        "b": ones.clone(),
        "c": ones * 2,
        "d": ones.T.contiguous(),
        "steps": torch.tensor([7, 8]),
    }
    save_weights(tmp_path / "w.safetensors", tensors, dtype=torch.float16)
    loaded = load_weights(tmp_path / "w.safetensors")
    assert loaded["a"].dtype == torch.float16 and loaded["steps"].dtype == torch.int64
    for name, value in tensors.items():
        assert torch.equal(loaded[name].to(value.dtype), value)
    # b equals a (an alias); c differs in values, d in shape: stored themselves.
    with safe_open(str(tmp_path / "w.safetensors"), framework="pt") as handle:
        assert sorted(handle.keys()) == ["a", "c", "d", "steps"]


def test_crash_while_writing_leaves_no_partial_checkpoint(tmp_path, monkeypatch):
    model, _ = _model_and_optimizer()
    save_checkpoint(tmp_path / "ck", model_state=model.state_dict(), state={"step": 1})

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("attnmt.checkpoint.save_file", boom)
    with pytest.raises(OSError):
        save_checkpoint(tmp_path / "ck", model_state=model.state_dict(), state={"step": 2})
    assert load_checkpoint(tmp_path / "ck").step == 1  # the old one is intact
    assert [p.name for p in tmp_path.iterdir()] == ["ck"]  # no temporary left behind


def test_manager_keeps_best_and_last_k(tmp_path):
    model, _ = _model_and_optimizer()
    manager = CheckpointManager(tmp_path, keep_last=2)
    for step, bleu in [(1, 5.0), (2, 9.0), (3, 7.0), (4, 8.0), (5, 6.0)]:
        manager.save(step, metric=bleu, model_state=model.state_dict(), state={"step": step})
    names = sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*"))
    assert names == ["step-00000002", "step-00000004", "step-00000005"]
    assert load_checkpoint(tmp_path).step == 5
    best = json.loads((tmp_path / "checkpoints" / "best.json").read_text())
    assert best == {"checkpoint": "step-00000002", "step": 2, "metric": 9.0}


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (lambda p: (p / "state.json").write_text("{not json"), "missing or damaged"),
        (lambda p: (p / "state.json").write_text('{"format": "other"}'), "not an attnmt"),
        (lambda p: (p / "model.safetensors").write_bytes(b"\x00" * 20), "damaged or not"),
        (lambda p: (p / "model.safetensors").unlink(), "incomplete"),
    ],
)
def test_damaged_or_foreign_files_give_clear_errors(tmp_path, damage, needle):
    model, _ = _model_and_optimizer()
    save_checkpoint(tmp_path / "ck", model_state=model.state_dict(), state={"step": 1})
    damage(tmp_path / "ck")
    with pytest.raises(CheckpointError, match=needle):
        load_checkpoint(tmp_path / "ck")


def test_missing_paths(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        load_checkpoint(tmp_path)


def test_pickle_file_is_refused(tmp_path):
    (tmp_path / "ck").mkdir()
    torch.save({"x": torch.zeros(1)}, tmp_path / "ck" / "model.safetensors")
    (tmp_path / "ck" / "state.json").write_text('{"format": "attnmt-checkpoint", "version": 1}')
    with pytest.raises(CheckpointError, match="damaged or not a safetensors"):
        load_checkpoint(tmp_path / "ck")


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_checkpoint_files_follow_the_umask_like_any_file(tmp_path, umask):
    previous = os.umask(umask)
    try:
        manager = CheckpointManager(tmp_path / "run")
        path = manager.save(500, metric=1.0, model_state={"w": torch.zeros(2)}, state={"step": 500})
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
    finally:
        os.umask(previous)
    file_mode = stat.S_IMODE(plain.stat().st_mode)
    assert file_mode == 0o666 & ~umask
    assert path.name == "step-00000500"
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode)
        for p in [*path.iterdir(), *path.parent.glob("*.json")]
    }
    assert set(modes) >= {
        "model.safetensors",
        "optimizer.safetensors",
        "state.json",
        "latest.json",
        "best.json",
    }
    assert modes == dict.fromkeys(modes, file_mode)
    assert stat.S_IMODE(path.stat().st_mode) == 0o777 & ~umask
