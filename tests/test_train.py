"""Training: exact resume, Ctrl-C, a killed process, non-finite losses, refusals, seeding.

Every run trains a tiny RNNsearch on the synthetic reverse task for 10 steps (well under a
second). One uninterrupted run, made once, is the reference the interrupted ones must
reproduce: the same metrics.jsonl (timings aside) and bitwise the same weights, optimizer
moments, schedule and data position.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

import attnmt.training.loop as train_module
from attnmt.checkpoint import load_checkpoint
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data import TokenBatcher, prepare
from attnmt.errors import CheckpointError, UserError
from attnmt.training import NoamSchedule, train

# 40 examples of length <= 6 at 64 tokens a batch: about 5 batches an epoch, so 10 steps
# cross epochs. Dropout draws random numbers and noam changes the rate every step, so a
# resumed run only matches if the random state and the schedule came back too.
TINY = [
    "data.corpus=reverse",
    "data.synthetic_train_size=40",
    "data.synthetic_max_len=6",
    "data.batch_tokens=64",
    "model.embed_size=8",
    "model.hidden_size=16",
    "model.dropout=0.1",
    "train.device=cpu",
    "train.max_steps=10",
    "train.log_every=2",
    "train.checkpoint_every=3",
    "train.validate_every=4",
    "train.keep_last=2",
    "train.valid_sentences=5",
    "train.valid_examples=1",
    "train.schedule=noam",
    "train.warmup_steps=4",
    "train.lr=0.01",
    "train.early_stopping_metric=loss",
    # fp32 on every CPU (`auto` trains RNNsearch in bf16 on an AMD EPYC Zen 4 only); exact
    # resume under bf16 autocast has a test of its own below.
    "train.precision=fp32",
]
TIMINGS = ("tokens_per_s", "elapsed")  # the only fields that may differ between runs


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors: on a shared 2-core machine threads cost more than they give."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data-cache")


def overrides(run_dir: Path, cache: Path, *extra: str) -> list[str]:
    return [*TINY, f"data.cache_dir={cache}", f"train.run_dir={run_dir}", *extra]


def tiny(run_dir: Path, cache: Path, *extra: str):
    return load_config(None, overrides(run_dir, cache, *extra))


def curve(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    return [{k: v for k, v in event.items() if k not in TIMINGS} for event in events]


def assert_same_final_state(run_dir: Path, reference: Path) -> None:
    """Bitwise the same weights, optimizer state, schedule, data position and counters."""
    ours, theirs = load_checkpoint(run_dir), load_checkpoint(reference)
    assert ours.step == theirs.step
    assert ours.model.keys() == theirs.model.keys()
    for name, tensor in ours.model.items():
        assert torch.equal(tensor, theirs.model[name]), name
    for index, state in ours.optimizer["state"].items():
        for name, value in state.items():
            assert torch.equal(value, theirs.optimizer["state"][index][name]), (index, name)
    for key in ("schedule", "batcher", "python_rng"):
        assert ours.state[key] == theirs.state[key], key
    drop = {"elapsed"}
    progress = {k: v for k, v in ours.state["progress"].items() if k not in drop}
    assert progress == {k: v for k, v in theirs.state["progress"].items() if k not in drop}
    assert torch.equal(ours.tensors["rng_torch.0"], theirs.tensors["rng_torch.0"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory, cache) -> Path:
    """An uninterrupted run of the tiny config (never modified by the tests)."""
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    result = train(tiny(run_dir, cache), progress=False)
    assert result.stopped_because == "max_steps" and result.step == 10
    return run_dir


def copy_run(reference: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(reference, tmp_path / "run"))


def on_call(monkeypatch, number: int, action) -> None:
    """Run `action()` inside the `number`-th call of batch_loss, after its forward pass."""
    real = train_module.batch_loss
    calls = {"n": 0}

    def patched(*args, **kwargs):
        result = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == number:
            action()
        return result

    monkeypatch.setattr(train_module, "batch_loss", patched)


# ------------------------------------------------------------------------------------
# Seeds, files, progress lines
# ------------------------------------------------------------------------------------


def test_same_seed_gives_the_same_run_another_seed_another(reference, cache, tmp_path, capsys):
    again = train(tiny(tmp_path / "again", cache), progress=True)
    assert again.step == 10
    assert curve(tmp_path / "again") == curve(reference)
    assert_same_final_state(tmp_path / "again", reference)
    # stderr is not a terminal here: no bar, but a line every log_every steps.
    err = capsys.readouterr().err
    assert "step 2: loss" in err and "step 10: loss" in err and "step 3: loss" not in err
    assert "\r" not in err and "it/s" not in err

    train(tiny(tmp_path / "other", cache, "train.seed=2"), progress=False)
    losses = [e["loss"] for e in curve(tmp_path / "other") if e["type"] == "train"]
    assert losses != [e["loss"] for e in curve(reference) if e["type"] == "train"]


def test_run_directory_holds_safetensors_json_and_the_best_and_last_checkpoints(reference):
    checkpoints = reference / "checkpoints"
    steps = sorted(p.name for p in checkpoints.iterdir() if p.is_dir())
    best = json.loads((checkpoints / "best.json").read_text())
    latest = json.loads((checkpoints / "latest.json").read_text())
    assert latest == {"checkpoint": "step-00000010", "step": 10}
    # keep_last=2 (steps 9 and 10) plus the best: the lowest dev loss (validated at 4, 8, 10).
    dev_losses = {e["step"]: e["loss"] for e in curve(reference) if e["type"] == "valid"}
    assert best["step"] == min(dev_losses, key=dev_losses.get)
    assert best["metric"] == min(dev_losses.values())
    assert set(steps) == {"step-00000009", "step-00000010", best["checkpoint"]}
    for name in steps:
        files = sorted(p.name for p in (checkpoints / name).iterdir())
        assert files == ["model.safetensors", "optimizer.safetensors", "state.json"]
        assert json.loads((checkpoints / name / "state.json").read_text())["step"] == int(name[5:])
    assert not [p for p in checkpoints.iterdir() if p.name.startswith(".")]  # no temp files
    events = curve(reference)
    assert [e["step"] for e in events if e["type"] == "train"] == [2, 4, 6, 8, 10]
    assert [e["step"] for e in events if e["type"] == "valid"] == [4, 8, 10]
    assert (reference / "config.yaml").is_file() and (reference / "train.log").is_file()


# ------------------------------------------------------------------------------------
# Ctrl-C and --resume
# ------------------------------------------------------------------------------------


def _raise_keyboard_interrupt():
    raise KeyboardInterrupt


def _ctrl_c_twice():
    signal.raise_signal(signal.SIGINT)  # asks to stop after this step...
    signal.raise_signal(signal.SIGINT)  # ...and the second stops at once


@pytest.mark.parametrize(
    ("call", "action"),
    [
        # Ctrl-C during the forward pass of step 6: step 6 is undone (its batch and random
        # numbers are served again on resume) and step 5 is saved.
        (6, _raise_keyboard_interrupt),
        (6, _ctrl_c_twice),
        # One Ctrl-C during step 5: the step is finished first, then saved.
        (5, lambda: signal.raise_signal(signal.SIGINT)),
    ],
    ids=["KeyboardInterrupt", "ctrl-c-twice", "ctrl-c"],
)
def test_ctrl_c_saves_and_resume_matches_an_uninterrupted_run(
    reference, cache, tmp_path, monkeypatch, capsys, call, action
):
    run_dir = tmp_path / "run"
    on_call(monkeypatch, call, action)
    handler = signal.getsignal(signal.SIGINT)
    result = train(tiny(run_dir, cache), progress=False)
    assert signal.getsignal(signal.SIGINT) is handler  # the loop's handler is gone again
    assert result.stopped_because == "interrupted" and result.step == 5
    assert load_checkpoint(run_dir).step == 5
    # Step 5 is between two log lines: its loss waits in the checkpoint for the line at 6.
    assert load_checkpoint(run_dir).state["progress"]["window_tokens"] > 0
    assert "interrupted at step 5; checkpoint saved" in capsys.readouterr().err
    monkeypatch.undo()

    with pytest.raises(UserError, match="already has checkpoints; add --resume"):
        train(tiny(run_dir, cache), progress=False)
    resumed = train(tiny(run_dir, cache), resume=True, progress=False)
    assert resumed.stopped_because == "max_steps" and resumed.step == 10
    assert curve(run_dir) == curve(reference)
    assert_same_final_state(run_dir, reference)


def test_a_second_ctrl_c_waits_for_the_weight_update_to_finish(
    reference, cache, tmp_path, monkeypatch
):
    # Ctrl-C during step 6's forward pass, and again inside its update (after the optimizer
    # step, before the schedule's): the update is not cut in half, step 6 is finished
    # (logged, checkpointed) as after a single Ctrl-C.
    on_call(monkeypatch, 6, lambda: signal.raise_signal(signal.SIGINT))
    real_step = NoamSchedule.step
    calls = {"n": 0}

    def schedule_step(self):
        calls["n"] += 1
        if calls["n"] == 6:
            signal.raise_signal(signal.SIGINT)
        return real_step(self)

    monkeypatch.setattr(NoamSchedule, "step", schedule_step)
    run_dir = tmp_path / "run"
    result = train(tiny(run_dir, cache), progress=False)
    assert result.stopped_because == "interrupted" and result.step == 6
    assert load_checkpoint(run_dir).step == 6
    monkeypatch.undo()
    train(tiny(run_dir, cache), resume=True, progress=False)
    assert curve(run_dir) == curve(reference)
    assert_same_final_state(run_dir, reference)


def test_ctrl_c_on_a_saved_step_saves_nothing_more(cache, tmp_path, monkeypatch, capsys):
    on_call(monkeypatch, 3, lambda: signal.raise_signal(signal.SIGINT))  # 3: a checkpoint
    result = train(tiny(tmp_path / "run", cache), progress=False)
    assert result.stopped_because == "interrupted" and result.step == 3
    assert "interrupted at step 3, which is saved" in capsys.readouterr().err
    assert load_checkpoint(tmp_path / "run").step == 3


def test_cli_exits_130_on_ctrl_c(cache, tmp_path, monkeypatch, capsys):
    on_call(monkeypatch, 2, lambda: signal.raise_signal(signal.SIGINT))
    config = tmp_path / "empty.yaml"
    config.write_text("{}\n")
    sets = [f"--set={o}" for o in overrides(tmp_path / "run", cache)]
    assert main(["train", str(config), "--quiet", *sets]) == 130
    assert "resume with: attnmt train CONFIG --resume" in capsys.readouterr().err
    assert load_checkpoint(tmp_path / "run").step == 2


KILLED_RUN = """
import json, os, signal, sys
import attnmt.checkpoint as checkpoint
from attnmt.config import load_config
from attnmt.training import train

real_save_file = checkpoint.save_file

def save_file(tensors, filename, metadata=None):
    real_save_file(tensors, filename, metadata=metadata)
    # Killed in the middle of writing the checkpoint of step 6: weights on disk, not yet
    # the optimizer state, nothing renamed into place.
    if ".step-00000006." in filename and filename.endswith("model.safetensors"):
        os.kill(os.getpid(), signal.SIGKILL)

checkpoint.save_file = save_file
train(load_config(None, json.loads(sys.argv[1])), progress=False)
"""


def test_killed_process_loses_at_most_one_interval_and_resumes_exactly(reference, cache, tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, json.dumps(overrides(run_dir, cache))],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    checkpoints = run_dir / "checkpoints"
    # The checkpoint being written is not there (only its hidden temporary folder); the
    # latest is the one before, within one checkpoint interval (3 steps).
    assert not (checkpoints / "step-00000006").exists()
    assert [p.name[:15] for p in checkpoints.glob(".step-*")] == [".step-00000006."]
    assert load_checkpoint(run_dir).step == 4
    # The killed run logged past its checkpoint (steps 6 and later are logged again).
    assert max(e["step"] for e in curve(run_dir)) == 6

    resumed = train(tiny(run_dir, cache), resume=True, progress=False)
    assert resumed.step == 10
    assert curve(run_dir) == curve(reference)
    assert_same_final_state(run_dir, reference)
    assert not list(checkpoints.glob(".step-*"))  # the next save cleaned up


# ------------------------------------------------------------------------------------
# Non-finite losses
# ------------------------------------------------------------------------------------


def nan_loss_on(monkeypatch, bad_calls) -> None:
    real = train_module.batch_loss
    calls = {"n": 0}

    def patched(*args, **kwargs):
        loss, stats = real(*args, **kwargs)
        calls["n"] += 1
        if bad_calls(calls["n"]):
            loss = loss * float("nan")
        return loss, stats

    monkeypatch.setattr(train_module, "batch_loss", patched)


def test_a_non_finite_loss_skips_its_batch_with_a_warning(cache, tmp_path, monkeypatch, capsys):
    nan_loss_on(monkeypatch, lambda n: n in (3, 7, 8))
    result = train(tiny(tmp_path / "run", cache), progress=False)
    assert result.stopped_because == "max_steps" and result.step == 10
    err = capsys.readouterr().err
    assert err.count("warning: non-finite loss at step 3; batch skipped") == 1
    assert err.count("warning: non-finite loss at step 6; batch skipped") == 2
    ck = load_checkpoint(tmp_path / "run")
    assert all(torch.isfinite(t).all() for t in ck.model.values())
    assert ck.state["progress"]["nonfinite_in_a_row"] == 0
    train_steps = [e["step"] for e in curve(tmp_path / "run") if e["type"] == "train"]
    assert train_steps == [2, 4, 6, 8, 10]


def test_repeated_non_finite_losses_stop_keeping_the_last_good_checkpoint(
    cache, tmp_path, monkeypatch
):
    nan_loss_on(monkeypatch, lambda n: n >= 5)  # steps 1-4 train; checkpoints at 3 and 4
    cfg = tiny(tmp_path / "run", cache, "train.max_nonfinite=3")
    needle = r"3 non-finite losses or gradients in a row at step 5; lower"
    with pytest.raises(UserError, match=needle) as err:
        train(cfg, progress=False)
    assert "last good checkpoint is kept" in str(err.value)
    ck = load_checkpoint(tmp_path / "run")
    assert ck.step == 4
    assert all(torch.isfinite(t).all() for t in ck.model.values())


# ------------------------------------------------------------------------------------
# What is refused, with one clear sentence
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("yaml_text", "extra", "needle"),
    [
        (
            "train:\n  max_step: 3\n",
            [],
            "unknown key 'train.max_step' (did you mean 'train.max_steps'?)",
        ),
        ("{}\n", ["--set", "model.hiden_size=8"], "unknown key 'model.hiden_size'"),
        ("{}\n", ["--set", "train.max_steps=ten"], "train.max_steps must be an integer"),
        ("trian:\n  seed: 1\n", [], "unknown key 'trian' (did you mean 'train'?)"),
    ],
)
def test_config_errors_fail_at_load_time_naming_the_key(tmp_path, capsys, yaml_text, extra, needle):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml_text)
    argv = ["train", str(config), "--set", f"train.run_dir={tmp_path / 'run'}", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert err.count("\n") == 1 and err.startswith("attnmt train: error: ")
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()  # nothing was started


def _unchanged(run_dir: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_a_run_directory_with_checkpoints_is_refused_without_resume(
    reference, cache, tmp_path, capsys
):
    run_dir = copy_run(reference, tmp_path)
    before = _unchanged(run_dir)
    config = tmp_path / "empty.yaml"
    config.write_text("{}\n")
    argv = ["train", str(config)] + [f"--set={o}" for o in overrides(run_dir, cache)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "already has checkpoints; add --resume" in err and err.count("\n") == 1
    assert _unchanged(run_dir) == before


@pytest.mark.parametrize(
    ("changed", "needle"),
    [
        ("model.hidden_size=32", "cannot resume: model.hidden_size is 32 but the run was"),
        ("data.synthetic_train_size=50", "cannot resume: data.synthetic_train_size is 50"),
        ("data.batch_tokens=128", "cannot resume: data.batch_tokens is 128"),
        ("train.seed=5", r"the training batches would differ .*seed=1 \(now 5\).*train\.seed"),
    ],
)
def test_resume_with_another_data_model_or_seed_is_refused(
    reference, cache, tmp_path, changed, needle
):
    run_dir = copy_run(reference, tmp_path)
    before = _unchanged(run_dir)
    with pytest.raises(UserError, match=needle):
        train(tiny(run_dir, cache, changed), resume=True, progress=False)
    assert _unchanged(run_dir) == before


def test_resume_ignores_tie_embeddings_where_it_has_no_effect(reference, cache, tmp_path):
    # The recurrent models never tie; their shipped configs said `true` until 11/2026 and
    # `false` since: a run of either kind resumes under the other.
    run_dir = copy_run(reference, tmp_path)
    cfg = tiny(run_dir, cache, "model.tie_embeddings=false", "train.max_steps=12")
    assert cfg.model.name != "transformer"
    assert train(cfg, resume=True, progress=False).step == 12


def test_resume_with_another_number_of_processes_is_refused(reference, cache, tmp_path):
    run_dir = copy_run(reference, tmp_path)
    state_file = run_dir / "checkpoints" / "step-00000010" / "state.json"
    state = json.loads(state_file.read_text())
    state["batcher"] = state["batcher"] * 2  # as if saved by 2 processes
    state_file.write_text(json.dumps(state))
    with pytest.raises(UserError, match=r"trained with 2 process\(es\) and this is 1"):
        train(tiny(run_dir, cache), resume=True, progress=False)


def test_resume_needs_a_checkpoint_and_allows_another_cache_dir(reference, cache, tmp_path):
    with pytest.raises(UserError, match="nothing to resume"):
        train(tiny(tmp_path / "empty", cache), resume=True, progress=False)
    # Where the prepared data is cached is not what it is: resuming elsewhere is fine (the
    # run has reached max_steps, so it stops at once).
    run_dir = copy_run(reference, tmp_path)
    result = train(tiny(run_dir, tmp_path / "other-cache"), resume=True, progress=False)
    assert result.step == 10 and result.stopped_because == "max_steps"
    assert curve(run_dir) == curve(reference)


def test_a_damaged_latest_pointer_is_named_and_can_be_deleted(reference, cache, tmp_path):
    run_dir = copy_run(reference, tmp_path)
    pointer = run_dir / "checkpoints" / "latest.json"
    pointer.write_text("{not json")
    with pytest.raises(UserError, match="already has checkpoints"):  # still a used directory
        train(tiny(run_dir, cache), progress=False)
    with pytest.raises(CheckpointError, match=r"latest.json' is damaged; delete it to resume"):
        train(tiny(run_dir, cache), resume=True, progress=False)
    pointer.unlink()
    assert load_checkpoint(run_dir).step == 10  # the newest step folder
    with pytest.raises(UserError, match="already has checkpoints"):
        train(tiny(run_dir, cache), progress=False)


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (lambda ck: (ck / "model.safetensors").write_bytes(b"\x80\x04junk"), "damaged or not"),
        (lambda ck: (ck / "state.json").write_text("{"), "missing or damaged"),
        (lambda ck: (ck / "state.json").write_text('{"step": 10}'), "not an attnmt checkpoint"),
        (lambda ck: (ck / "optimizer.safetensors").unlink(), "is missing; the checkpoint is"),
        (
            lambda ck: (ck / "state.json").write_text('{"format": "attnmt-checkpoint"}'),
            "cannot be resumed from: it is incomplete or damaged",
        ),
    ],
    ids=["weights", "json", "foreign", "missing", "incomplete"],
)
def test_resume_from_a_damaged_checkpoint_gives_a_clear_error(
    reference, cache, tmp_path, damage, needle
):
    run_dir = copy_run(reference, tmp_path)
    damage(run_dir / "checkpoints" / "step-00000010")
    with pytest.raises(CheckpointError, match=needle):
        train(tiny(run_dir, cache), resume=True, progress=False)


def test_an_empty_dev_split_is_refused_before_training(tmp_path, cache):
    (tmp_path / "train.en").write_text("a cat\nthe dog\n", encoding="utf-8")
    (tmp_path / "train.fr").write_text("un chat\nle chien\n", encoding="utf-8")
    cfg = tiny(
        tmp_path / "run",
        cache,
        "data.corpus=files",
        "data.src=en",
        "data.tgt=fr",
        f"data.train_path={tmp_path / 'train'}",
        "data.vocab_size=20",
    )
    with pytest.raises(UserError, match=r"dev split .* is empty"):
        train(cfg, progress=False)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_time_budget_shows_the_training_time_left(cache, tmp_path, capsys):
    cfg = tiny(
        tmp_path / "run",
        cache,
        "train.max_steps=0",
        "train.max_epochs=1",
        "train.max_minutes=5",
        "train.log_every=1",
    )
    train(cfg, progress=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step ")]
    assert lines and all(" eta 4:5" in line or " eta 5:00" in line for line in lines[:1])


def test_resume_with_another_vocabulary_is_refused(reference, cache, tmp_path):
    # As if the data cache had been rebuilt with a different subword model since.
    run_dir = copy_run(reference, tmp_path)
    symbols = run_dir / "vocab" / "symbols.json"
    saved = json.loads(symbols.read_text())["symbols"]
    symbols.write_text(json.dumps({"symbols": [saved[1], saved[0], *saved[2:]]}))
    before = _unchanged(run_dir)
    with pytest.raises(UserError, match="cannot resume: the subword model prepared now differs"):
        train(tiny(run_dir, cache), resume=True, progress=False)
    assert _unchanged(run_dir) == before


@pytest.mark.parametrize("exported", [None, "512"])
def test_importing_attnmt_enlarges_the_onednn_primitive_cache_unless_the_user_set_it(exported):
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    if exported is not None:
        env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = exported
    code = "import os, attnmt; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == (exported or "65536")


# ------------------------------------------------------------------------------------
# Hard attention (REINFORCE baseline) and bf16
# ------------------------------------------------------------------------------------

HARD = ("model.mode=hard",)


@pytest.fixture(scope="module")
def hard_reference(tmp_path_factory, cache) -> Path:
    """An uninterrupted run of the tiny config with hard attention."""
    run_dir = tmp_path_factory.mktemp("hard-reference") / "run"
    result = train(tiny(run_dir, cache, *HARD), progress=False)
    assert result.stopped_because == "max_steps" and result.step == 10
    return run_dir


@pytest.mark.parametrize(
    ("call", "action"),
    [(6, _raise_keyboard_interrupt), (5, lambda: signal.raise_signal(signal.SIGINT))],
    ids=["KeyboardInterrupt", "ctrl-c"],
)
def test_hard_attention_resume_keeps_the_reinforce_baseline(
    hard_reference, cache, tmp_path, monkeypatch, call, action
):
    # KeyboardInterrupt in step 6's forward pass: step 6 had already moved the baseline, which
    # must be rolled back with the rest of the step. Ctrl-C in step 5: the baseline after
    # step 5 must travel in the checkpoint.
    run_dir = tmp_path / "run"
    on_call(monkeypatch, call, action)
    result = train(tiny(run_dir, cache, *HARD), progress=False)
    assert result.stopped_because == "interrupted" and result.step == 5
    monkeypatch.undo()
    assert load_checkpoint(run_dir).state["progress"]["baseline"] != 0.0
    train(tiny(run_dir, cache, *HARD), resume=True, progress=False)
    assert curve(run_dir) == curve(hard_reference)
    assert_same_final_state(run_dir, hard_reference)  # the baseline is in the progress
    baseline = load_checkpoint(hard_reference).state["progress"]["baseline"]
    assert load_checkpoint(run_dir).state["progress"]["baseline"] == baseline
    assert baseline < 0  # a moving average of log-likelihoods, not the initial 0


def test_a_bf16_step_runs_under_autocast_and_moves_the_weights(cache, tmp_path, monkeypatch):
    real = train_module.batch_loss
    seen: dict = {"dtypes": set(), "losses": []}

    def patched(model, *args, **kwargs):
        if "before" not in seen:
            seen["before"] = {n: p.detach().clone() for n, p in model.named_parameters()}
        hooks = [
            m.register_forward_hook(lambda m, i, out: seen["dtypes"].add(out.dtype))
            for m in model.modules()
            if isinstance(m, torch.nn.Linear)
        ]
        try:
            loss, stats = real(model, *args, **kwargs)
        finally:
            for hook in hooks:
                hook.remove()
        seen["losses"].append(loss.detach())
        return loss, stats

    monkeypatch.setattr(train_module, "batch_loss", patched)
    run_dir = tmp_path / "run"
    cfg = tiny(run_dir, cache, "train.precision=bf16", "train.max_steps=1", "train.log_every=1")
    result = train(cfg, progress=False)
    assert result.stopped_because == "max_steps" and result.step == 1
    assert torch.bfloat16 in seen["dtypes"]  # the matrix products ran in bf16
    (loss,) = seen["losses"]
    assert loss.dtype == torch.float32 and torch.isfinite(loss) and float(loss) > 0
    (event,) = [e for e in curve(run_dir) if e["type"] == "train"]
    assert event["step"] == 1 and 0 < event["loss"] < float("inf")
    after = load_checkpoint(run_dir).model
    # At initialisation the attention's query matrix gets a gradient of ~1e-24 on this tiny
    # model (v_a ~ 1e-2, the scores all but equal), far below Adam's eps = 1e-8, so one
    # step cannot move it: RNNsearch's decoder loop runs in fp32 under autocast, as in fp32
    # training (the module path moved it only by bf16 rounding noise).
    still = {"attention.score.W_a.weight"}
    for name, before in seen["before"].items():
        assert torch.isfinite(after[name]).all(), name
        if name not in still:
            assert not torch.equal(after[name], before), f"{name} did not change"


@pytest.fixture(scope="module")
def bf16_reference(tmp_path_factory, cache) -> Path:
    """An uninterrupted run of the tiny config under bf16 autocast."""
    run_dir = tmp_path_factory.mktemp("bf16-reference") / "run"
    train(tiny(run_dir, cache, "train.precision=bf16"), progress=False)
    return run_dir


def test_a_bf16_run_resumes_exactly(bf16_reference, cache, tmp_path, monkeypatch):
    # The other runs here are fp32 on every CPU; this one is bf16 on every CPU (emulated
    # where bf16 is not native: slower, still a second at these sizes), so the path the
    # Zen 4's `auto` takes is checked everywhere, and the same way.
    run_dir = tmp_path / "run"
    on_call(monkeypatch, 6, _raise_keyboard_interrupt)
    result = train(tiny(run_dir, cache, "train.precision=bf16"), progress=False)
    assert result.stopped_because == "interrupted" and result.step == 5
    monkeypatch.undo()
    train(tiny(run_dir, cache, "train.precision=bf16"), resume=True, progress=False)
    assert curve(run_dir) == curve(bf16_reference)
    assert_same_final_state(run_dir, bf16_reference)


# ------------------------------------------------------------------------------------
# Stops: time budget, epochs, early stopping, non-finite gradients
# ------------------------------------------------------------------------------------


class FakeClock:
    """Stands in for the `time` module in the training loop: every reading is `tick`
    seconds after the one before, so each training step lasts exactly `tick` seconds."""

    def __init__(self, tick: float):
        self.now, self.tick = 0.0, tick

    def perf_counter(self) -> float:
        self.now += self.tick
        return self.now


def test_max_minutes_stops_on_the_training_clock_summed_over_sessions(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(train_module, "time", FakeClock(7.0))
    run_dir = tmp_path / "run"
    # 30 s of budget at 7 s a step: step 5 reaches 35 s. max_steps=12 only as a backstop.
    cfg = tiny(run_dir, cache, "train.max_steps=12", "train.max_minutes=0.5")
    result = train(cfg, progress=False)
    assert result.stopped_because == "max_minutes" and result.step == 5
    assert result.elapsed == pytest.approx(35.0)
    ck = load_checkpoint(run_dir)
    assert ck.step == 5 and ck.state["progress"]["elapsed"] == pytest.approx(35.0)
    # The budget is spent: a resumed run stops at once, without another step.
    resumed = train(cfg, resume=True, progress=False)
    assert resumed.stopped_because == "max_minutes" and resumed.step == 5


def test_max_epochs_serves_every_example_exactly_that_many_times(cache, tmp_path, monkeypatch):
    served: list[list[int]] = []
    real = train_module.batch_loss

    def patched(model, batch, *args, **kwargs):
        served.append(list(batch.indices))
        return real(model, batch, *args, **kwargs)

    monkeypatch.setattr(train_module, "batch_loss", patched)
    cfg = tiny(tmp_path / "run", cache, "train.max_steps=0", "train.max_epochs=2")
    result = train(cfg, progress=False)
    assert result.stopped_because == "max_epochs"
    train_set = prepare(cfg.data, progress=False).train
    batcher = TokenBatcher(train_set, batch_tokens=cfg.data.batch_tokens, seed=cfg.train.seed)
    assert result.step == len(served) == len(batcher.shard(0)) + len(batcher.shard(1))
    counts = Counter(index for batch in served for index in batch)
    assert sorted(counts) == list(range(len(train_set)))
    assert set(counts.values()) == {2}


def test_patience_stops_early_and_the_best_checkpoint_has_the_lowest_dev_loss(
    cache, tmp_path, monkeypatch
):
    # Scripted dev losses (the rest of the validation is real): the lowest, 2.0 at step 4,
    # is neither the first, nor the last, nor the highest.
    scripted = iter([3.0, 2.0, 2.5, 2.1, 1.0, 1.5, 1.6, 1.7, 1.8, 1.9])
    real = train_module.validate

    def validate(*args, **kwargs):
        return {**real(*args, **kwargs), "loss": next(scripted)}

    monkeypatch.setattr(train_module, "validate", validate)
    run_dir = tmp_path / "run"
    cfg = tiny(
        run_dir,
        cache,
        "train.max_steps=20",
        "train.validate_every=2",
        "train.patience=2",
        "train.keep_last=1",
    )
    result = train(cfg, progress=False)
    # Validations at 2, 4, 6, 8: no lower loss at 6 and 8, so patience 2 stops at 8.
    assert result.stopped_because == "early_stopping" and result.step == 8
    assert result.best == 2.0
    events = curve(run_dir)
    assert [(e["step"], e["loss"]) for e in events if e["type"] == "valid"] == [
        (2, 3.0),
        (4, 2.0),
        (6, 2.5),
        (8, 2.1),
    ]
    checkpoints = run_dir / "checkpoints"
    best = json.loads((checkpoints / "best.json").read_text())
    assert best == {"checkpoint": "step-00000004", "step": 4, "metric": 2.0}
    kept = load_checkpoint(checkpoints / best["checkpoint"])
    assert kept.step == 4 and kept.state["progress"]["best"] == 2.0
    assert load_checkpoint(run_dir).state["progress"]["bad_validations"] == 2


class NanGradient(torch.autograd.Function):
    """The identity, whose gradient is NaN: a finite loss with a non-finite gradient."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return torch.full_like(grad, float("nan"))


def nan_gradient_on(monkeypatch, bad_calls) -> list[float]:
    losses: list[float] = []
    real = train_module.batch_loss
    calls = {"n": 0}

    def patched(*args, **kwargs):
        loss, stats = real(*args, **kwargs)
        calls["n"] += 1
        if bad_calls(calls["n"]):
            loss = NanGradient.apply(loss)
            losses.append(float(loss.detach()))
        return loss, stats

    monkeypatch.setattr(train_module, "batch_loss", patched)
    return losses


@pytest.mark.parametrize(
    "clip",
    ["1.0", "0"],
    ids=["clipped", "unclipped"],
)
def test_a_non_finite_gradient_skips_its_batch_with_a_warning(
    cache, tmp_path, monkeypatch, capsys, clip
):
    bad_losses = nan_gradient_on(monkeypatch, lambda n: n in (3, 7, 8))
    result = train(tiny(tmp_path / "run", cache, f"train.clip_norm={clip}"), progress=False)
    assert len(bad_losses) == 3 and all(torch.isfinite(torch.tensor(bad_losses)))
    assert result.stopped_because == "max_steps" and result.step == 10
    ck = load_checkpoint(tmp_path / "run")
    assert all(torch.isfinite(t).all() for t in ck.model.values())
    assert all(torch.isfinite(t).all() for t in ck.optimizer["state"][0].values())
    err = capsys.readouterr().err
    gradient = "warning: non-finite gradient (the loss was finite) at step"
    assert err.count(f"{gradient} 3; batch skipped") == 1
    assert err.count(f"{gradient} 6; batch skipped") == 2
    assert ck.state["progress"]["nonfinite_in_a_row"] == 0
    train_losses = [e["loss"] for e in curve(tmp_path / "run") if e["type"] == "train"]
    assert len(train_losses) == 5 and all(0 < loss < float("inf") for loss in train_losses)
