"""The run directory's layout (`attnmt.rundir`) on runs written by hand: no training, no
torch. A crashed run's half-written last metrics line is skipped, any other bad line is an
error naming the file and line."""

import json
import subprocess
import sys

import pytest

from attnmt.errors import CheckpointError
from attnmt.rundir import RunDir, read_state, step_of, write_state


def _checkpoint(run: RunDir, step: int, **state) -> None:
    write_state(run.checkpoint_path(step), {"format": "attnmt-checkpoint", "step": step, **state})


def _run(tmp_path) -> RunDir:
    """A run with checkpoints at steps 2 and 10, the best at 2, and three log lines."""
    run = RunDir(tmp_path / "run")
    for step in (2, 10):
        _checkpoint(run, step, progress={"elapsed": 1.5 * step})
    run.mark("latest", 10)
    run.mark("best", 2, 9.5)
    for event in (
        {"type": "train", "step": 2, "loss": 3.0},
        {"type": "valid", "step": 2, "bleu": 9.5},
        {"type": "train", "step": 10, "loss": 2.0},
    ):
        run.append_metrics(event)
    return run


def test_the_layout_of_a_run(tmp_path):
    run = _run(tmp_path)
    assert run.config_path == tmp_path / "run" / "config.yaml"
    assert run.vocab_dir == tmp_path / "run" / "vocab"
    assert run.metrics_path == tmp_path / "run" / "metrics.jsonl"
    assert run.checkpoint_path(10) == tmp_path / "run" / "checkpoints" / "step-00000010"
    assert run.latest() == {"checkpoint": "step-00000010", "step": 10}
    assert run.best() == {"checkpoint": "step-00000002", "step": 2, "metric": 9.5}
    assert run.checkpoint("best") == run.checkpoint_path(2)
    assert run.state()["step"] == 10 and run.state("best")["progress"] == {"elapsed": 3.0}
    assert [e["step"] for e in run.metrics()] == [2, 2, 10]
    assert RunDir.of(run.checkpoint_path(2)).path == run.path
    assert run.export_format is None
    # What the trainer wrote is what a reader reads, by hand too.
    assert json.loads((run.checkpoints_dir / "best.json").read_text())["metric"] == 9.5
    assert read_state(run.checkpoint_path(2))["step"] == 2


def test_a_run_before_its_first_checkpoint(tmp_path):
    run = RunDir(tmp_path)
    assert run.checkpoints() == [] and run.metrics() == []
    assert run.best() is None and run.latest() is None
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        run.state()
    with pytest.raises(CheckpointError, match="does not exist"):
        RunDir(tmp_path / "nope").state()


def test_checkpoints_come_in_step_order_and_the_latest_without_its_pointer(tmp_path):
    run = RunDir(tmp_path)
    for step in (10, 2, 123456789):
        _checkpoint(run, step)
    (run.checkpoints_dir / "step-x").mkdir()  # not a step checkpoint
    (run.checkpoints_dir / ".step-00000003.abcd").mkdir()  # a killed writer's temporary
    (run.checkpoints_dir / "step-00000004").write_text("")  # a file, not a folder
    assert [step_of(p) for p in run.checkpoints()] == [2, 10, 123456789]
    assert [p.name for p in run.leftovers()] == [".step-00000003.abcd"]
    assert run.latest() is None
    assert run.checkpoint() == run.checkpoint_path(123456789)  # the newest step folder
    (run.checkpoint_path(123456789) / "state.json").unlink()  # damaged by hand
    assert run.checkpoint() == run.checkpoint_path(10)


def test_a_damaged_pointer_or_state_is_named(tmp_path):
    run = _run(tmp_path)
    (run.checkpoints_dir / "latest.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"latest.json' is damaged; delete it"):
        run.latest()
    (run.checkpoint_path(2) / "state.json").write_text("[")
    with pytest.raises(CheckpointError, match=r"step-00000002/state.json' is missing or damaged"):
        run.state("best")


def test_a_crashed_runs_cut_last_line_is_skipped(tmp_path):
    run = _run(tmp_path)
    with open(run.metrics_path, "ab") as handle:
        handle.write('{"type": "valid", "step": 10, "note": "é'.encode()[:-1])  # cut mid-é
    assert [e["step"] for e in run.metrics()] == [2, 2, 10]
    # Resuming from step 2 keeps what it logged up to there, and drops the cut line.
    run.trim_metrics(2)
    assert run.metrics() == [
        {"type": "train", "step": 2, "loss": 3.0},
        {"type": "valid", "step": 2, "bleu": 9.5},
    ]
    assert run.metrics_path.read_text().endswith("}\n")


def test_a_bad_line_before_the_last_is_an_error_naming_file_and_line(tmp_path):
    run = _run(tmp_path)
    lines = run.metrics_path.read_text().splitlines()
    lines[1] = lines[1][:10]
    run.metrics_path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CheckpointError, match=r"metrics.jsonl' line 2 is damaged"):
        run.metrics()
    run.metrics_path.write_text('{"step": 1}\n[1, 2]\n{"step": 2}\n')
    with pytest.raises(CheckpointError, match=r"line 2 is damaged \(not a JSON object\)"):
        run.metrics()


@pytest.mark.parametrize("kind", ["onnx", "ctranslate2"])
def test_an_export_is_told_from_a_run(tmp_path, kind):
    (tmp_path / "attnmt.json").write_text(json.dumps({"format": kind, "run": "quickstart"}))
    assert RunDir(tmp_path).export_format == kind
    (tmp_path / "attnmt.json").write_text("{damaged")
    assert RunDir(tmp_path).export_format is None


def test_loading_an_export_as_a_run_says_so(tmp_path):
    from attnmt.decoding.runs import find_checkpoint

    (tmp_path / "attnmt.json").write_text(json.dumps({"format": "ctranslate2"}))
    with pytest.raises(CheckpointError, match=r"is an export \(ctranslate2\), not a run"):
        find_checkpoint(tmp_path)


def test_importing_it_imports_no_torch():
    code = "import sys, attnmt.rundir; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
