"""benchmarks/luong_settled.py (docs/results.md, "Luong's comparison, settled") cannot rot:
its training commands load as configs, the step it compares at is the last one every run
reached, and its table averages seeds the way the page reads them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import luong_settled  # noqa: E402

from attnmt.config.loading import load_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _args(**kw) -> argparse.Namespace:
    base = dict(device="cpu", batch_tokens=4096, max_steps=0, minutes=6.5, every=250, set=[])
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("name", list(luong_settled.VARIANTS))
def test_every_variant_trains_the_model_it_names(name, tmp_path):
    command = luong_settled.train_command(_args(), name, 2, tmp_path / "run")
    config_path = ROOT / command[4]
    overrides = [command[i + 1] for i, x in enumerate(command) if x == "--set"]
    config = load_config(config_path, overrides)
    assert config.model.name == "luong"
    assert config.train.seed == 2 and config.train.max_minutes == 6.5
    assert config.train.validate_every == config.train.checkpoint_every == 250
    assert config.data.batch_tokens == 4096
    assert config.model.scope == ("local-p" if name.startswith("local-p") else "global")
    assert config.model.attention == name.split("-")[-1 if "nofeed" not in name else -2]
    assert config.model.input_feeding is ("nofeed" not in name)


def _fake_run(run_dir: Path, steps: list[int], bleu_at: dict[int, float], seconds: float) -> None:
    (run_dir / "checkpoints").mkdir(parents=True)
    for step in steps:
        (run_dir / "checkpoints" / f"step-{step:08d}").mkdir()
    rows = []
    for step in steps:
        rows.append({"type": "train", "step": step, "elapsed": seconds * step / 100})
        rows.append({"type": "valid", "step": step, "ppl": 1000 / step, "bleu": step / 100})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for step, bleu in bleu_at.items():
        report = {"bleu": bleu, "chrf": 2 * bleu, "references": 3}
        (run_dir / f"eval-{step}").mkdir()
        (run_dir / f"eval-{step}" / "test-beam5.json").write_text(json.dumps(report))


def test_compares_at_the_last_step_all_reached_and_averages_seeds(tmp_path):
    runs = {
        ("global-dot", 1): tmp_path / "global-dot-s1",
        ("global-dot", 2): tmp_path / "global-dot-s2",
        # slower, and stopped by the clock at 1,130 (its final checkpoint, off the grid)
        ("local-p-general", 1): tmp_path / "local-p-general-s1",
    }
    _fake_run(runs["global-dot", 1], [250, 500, 750, 1000, 1250], {1000: 5.0}, 20.0)
    _fake_run(runs["global-dot", 2], [250, 500, 750, 1000, 1250], {1000: 3.0}, 20.0)
    _fake_run(runs["local-p-general", 1], [250, 500, 750, 1000, 1130], {1000: 1.5}, 25.0)

    step = luong_settled.common_step(list(runs.values()), 250)
    assert step == 1000
    summary = luong_settled.summarise(tmp_path, runs, step)

    dot = summary["variants"]["global-dot"]
    assert dot["seeds"] == [1, 2]
    assert dot["test_bleu_mean"] == 4.0 and dot["test_bleu_spread"] == 2.0
    assert dot["test_chrf_mean"] == 8.0 and dot["dev_ppl_mean"] == 1.0
    local = next(r for r in summary["runs"] if r["variant"] == "local-p-general")
    assert local["steps_reached"] == 1130
    assert local["seconds_per_100_steps"] == pytest.approx(25.0)
    assert local["dev_bleu"] == 10.0  # its own validation at the compared step
    assert "| global-dot | 4.00 (2.00) | 8.00 | 1.0 |" in (tmp_path / "summary.md").read_text()
    assert json.loads((tmp_path / "summary.json").read_text())["step"] == 1000
    assert (tmp_path / "dev-bleu.png").stat().st_size > 0


def test_no_common_step_is_a_clear_error(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _fake_run(a, [250], {}, 20.0)
    _fake_run(b, [120], {}, 20.0)
    with pytest.raises(SystemExit, match="train longer"):
        luong_settled.common_step([a, b], 250)
