"""`attnmt average`: the mean of a run's last or best N checkpoints, as a run every command
takes; the checkpoints it picks, and what it refuses (too few kept, other models, an
existing output)."""

from __future__ import annotations

import json

import pytest
import torch

from attnmt.averaging import average_weights, pick_checkpoints, write_average
from attnmt.checkpoint import load_checkpoint, load_weights, save_checkpoint
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.decoding.runs import load_run
from attnmt.errors import CheckpointError
from attnmt.training import train
from conftest import TINY, mixed_corpus


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tiny RNNsearch with a checkpoint every 2 steps to 10, 4 kept, validated every 2."""
    root = tmp_path_factory.mktemp("average")
    corpus = mixed_corpus(root)
    overrides = [*TINY, f"data.cache_dir={root / 'cache'}", "data.corpus=tsv"]
    overrides += [f"data.{s}_path={corpus}" for s in ("train", "dev", "test")]
    overrides += ["data.drop_held_out=false", "data.vocab_size=120", "train.lr=0.02"]
    overrides += ["train.max_steps=10", "train.checkpoint_every=2", "train.validate_every=2"]
    overrides += ["train.keep_last=4", "train.early_stopping_metric=loss"]
    train(load_config(None, [*overrides, f"train.run_dir={root / 'run'}"]), progress=False)
    return root / "run"


def _weights(path):
    return load_weights(path / "model.safetensors")  # aliases of tied weights expanded


def test_the_average_is_the_mean_of_the_last_n(run_dir, tmp_path, capsys):
    out = tmp_path / "avg"
    assert main(["average", str(run_dir), "--last", "3", "-o", str(out)]) == 0
    assert "steps 6, 8, 10" in capsys.readouterr().out
    steps = [run_dir / "checkpoints" / f"step-{s:08d}" for s in (6, 8, 10)]
    expected = {k: sum(_weights(p)[k] for p in steps) / 3 for k in _weights(steps[0])}
    written = load_checkpoint(out, with_optimizer=False)
    assert written.step == 10 and written.state["averaged"]["steps"] == [6, 8, 10]
    for name, value in expected.items():
        torch.testing.assert_close(written.model[name], value)
    # A run like any other: load_run, translate, evaluate take it.
    loaded = load_run(out)
    assert loaded.step == 10 and loaded.vocab.same_as(load_run(run_dir).vocab)
    assert main(["evaluate", str(out), "--limit", "3"]) == 0
    assert (out / "eval" / "test-beam1.json").is_file()


def test_best_n_ranks_validated_checkpoints_by_the_run_s_metric(run_dir):
    losses = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "valid":
            losses[event["step"]] = event["loss"]
    kept = {int(p.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("step-*")}
    lowest = sorted(sorted(kept & losses.keys(), key=losses.get)[:2])  # loss: lower is better
    chosen, how = pick_checkpoints(run_dir, best=2)
    assert [int(p.name.split("-")[1]) for p in chosen] == lowest
    assert how == "best 2 by dev loss"


def test_too_few_checkpoints_names_keep_last(run_dir, capsys):
    kept = len(list((run_dir / "checkpoints").glob("step-*")))
    assert main(["average", str(run_dir), "--last", str(kept + 1)]) == 2
    err = capsys.readouterr().err
    assert f"--set train.keep_last={kept + 1}" in err and err.count("\n") == 1


def test_an_existing_output_and_other_models_are_refused(run_dir, tmp_path):
    out = tmp_path / "avg"
    chosen, _ = pick_checkpoints(run_dir, last=2)
    write_average(run_dir, chosen, out)
    before = _weights(out / "checkpoints" / "step-00000010")
    with pytest.raises(CheckpointError, match="already holds checkpoints"):
        write_average(run_dir, chosen, out)
    torch.testing.assert_close(_weights(out / "checkpoints" / "step-00000010"), before)
    other = tmp_path / "step-00000012"
    model = {k: torch.zeros(*v.shape[:-1], v.shape[-1] + 1) for k, v in before.items()}
    save_checkpoint(other, model_state=model, state={"step": 12})
    with pytest.raises(CheckpointError, match="hold different models"):
        average_weights([chosen[0], other])
