"""The main job guards its own result, and the same step budget gives the same numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnmt.alignment.links import collapsed
from attnmt.cli import main

pytestmark = pytest.mark.slow

TINY = [
    "train.validate_every=3",
    "train.valid_sentences=5",
    "data.max_words=6",
    "data.vocab_size=300",
    "model.hidden_size=16",
    "model.embed_size=16",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("quickstart-cache")


def quickstart(run_dir: Path, cache: Path, *extra: str) -> list[str]:
    args = ["quickstart", "--beam", "2", "--examples", "2", *extra]
    for item in [*TINY, "train.max_steps=3", f"train.run_dir={run_dir}"]:
        args += ["--set", item]
    return [*args, "--set", f"data.cache_dir={cache}"]


def test_a_run_far_below_its_expectation_stops_with_the_reason(tmp_path, cache, capsys):
    run_dir = tmp_path / "run"
    assert main(quickstart(run_dir, cache)) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()[-1]
    assert err.startswith("attnmt quickstart: error: the trained model is far below")
    # The BLEU the run reached, read back: what 3 steps write is the CPU's rounding's to
    # decide (nothing at all on an Intel Xeon with AMX: 0.00), its number is not.
    bleu = json.loads((run_dir / "last_validation.json").read_text(encoding="utf-8"))["bleu"]
    assert f"dev BLEU {bleu:.2f} after 3 steps, where 1,600 steps reach" in err
    assert "a changed config (" in err and "train.max_steps=3" in err
    assert "--min-dev-bleu 0 skips this check" in err
    # The run is kept; nothing was evaluated or presented as a result.
    assert (run_dir / "checkpoints").is_dir() and not (run_dir / "eval").exists()
    assert "== 5/5 summary" not in captured.out


def test_the_same_step_budget_gives_the_same_numbers_twice(tmp_path, cache, capsys):
    reports, outputs = [], []
    for name in ("first", "second"):
        run_dir = tmp_path / name
        assert main(quickstart(run_dir, cache, "--limit", "12", "--min-dev-bleu", "0")) == 0
        report = json.loads((run_dir / "eval" / "test-beam2.json").read_text(encoding="utf-8"))
        reports.append({k: report[k] for k in ("bleu", "chrf", "bleu_by_length", "step")})
        outputs.append((run_dir / "quickstart" / "output.txt").read_text(encoding="utf-8"))
        metrics = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        assert any(json.loads(line)["type"] == "valid" for line in metrics)
    assert reports[0] == reports[1] and reports[0]["step"] == 3
    assert outputs[0] == outputs[1]
    assert "test (12 verses, 3 references)" in capsys.readouterr().out


def test_an_alignment_that_says_nothing_is_called_collapsed():
    every_word_on_the_full_stop = {(7, j) for j in range(7)}
    assert collapsed(every_word_on_the_full_stop, 7)
    assert not collapsed({(0, 0), (1, 1), (2, 2), (3, 3)}, 4)
    assert collapsed({(0, 0), (0, 1), (0, 2), (3, 3)}, 4)  # 3 of 4 words on one source word
    assert not collapsed({(0, 0), (0, 1)}, 2)  # too short to tell
    assert not collapsed(set(), 5)  # nothing predicted is not a collapse


def test_the_summary_leaves_a_collapsed_alignment_out():
    from attnmt.cli.quickstart import _shown_alignment  # the printing is the command's

    shown = _shown_alignment("7-0 7-1 7-2 7-3 7-4 7-5 7-6", "Ils à l'Éternel, à l'Éternel, à .")
    assert shown.startswith("(left out: most words are linked to one source word")
    assert _shown_alignment("0-0 1-1 2-2", "Au commencement était") == "0-0 1-1 2-2"



def test_the_closing_lines_point_at_the_reference_models_where_they_are(tmp_path, monkeypatch):
    from attnmt.cli.quickstart import next_steps

    monkeypatch.chdir(ROOT)  # the repository: the committed reference models are here
    commands = [command for command, _ in next_steps(Path("runs/quickstart"))]
    assert commands[0] == "attnmt translate runs/quickstart --interactive"
    served = "attnmt serve reference/rnnsearch-en-fr reference/transformer-en-fr"
    assert commands[1:] == [served, "make site && python -m http.server -d site"]
    for name in ("rnnsearch-en-fr", "transformer-en-fr"):
        assert (ROOT / "reference" / name / "checkpoints").is_dir()
    monkeypatch.chdir(tmp_path)  # elsewhere: no reference models to point at
    assert len(next_steps(Path("runs/quickstart"))) == 1

ROOT = Path(__file__).resolve().parents[1]
REDUCED_STEPS = 100
# Dev perplexity of configs/quickstart.yaml after 100 steps: 194.1 (AMD EPYC Zen 4, bf16,
# 2026-11-25: `attnmt train configs/quickstart.yaml --set train.max_steps=300 --set
# train.validate_every=100`: 194.1 / 118.8 / 94.1 at steps 100 / 200 / 300) and 194.25
# (AMD EPYC Zen 3, fp32, 2026-11-29, validating at 100 only, as below); an untrained
# model sits near its vocabulary's size (8,000). The guard itself reads dev BLEU, but at
# 100 steps the model writes nothing yet: BLEU is noise, not a threshold that stays put
# from one CPU to another, so this reduced run is held to its perplexity instead, with a
# quarter of headroom. The config is tested as shipped, so `auto` trains it in bf16 on
# the Zen 4 and in fp32 elsewhere; both paths were measured. 100 steps, not 200: what the
# test asserts (the shipped config learns) shows as well at 100, in half the time.
REDUCED_MAX_PPL = 243.0


def test_the_shipped_config_learns_at_a_reduced_budget(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the config as shipped, with its own data cache (data-cache/)
    run_dir = tmp_path / "quickstart-200"
    command = ["train", "configs/quickstart.yaml", "--quiet"]
    for item in (f"train.max_steps={REDUCED_STEPS}", "train.validate_every=200"):
        command += ["--set", item]
    assert main([*command, "--set", f"train.run_dir={run_dir}"]) == 0
    validation = json.loads((run_dir / "last_validation.json").read_text(encoding="utf-8"))
    assert validation["ppl"] <= REDUCED_MAX_PPL, validation["ppl"]
