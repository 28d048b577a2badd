"""benchmarks/claims.py (docs/results.md, "The grammar lab: the papers' claims") cannot rot:
every run it plans loads as the model it names, the verdict reads seeds the way the page
says, the bag-of-words aligner is what its docstring says, and the smoke budget of two
claims runs end to end (train, measure, resume, table, figures) in its own processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import claims  # noqa: E402
import claims_report  # noqa: E402

from attnmt.config.loading import load_config  # noqa: E402


@pytest.mark.parametrize("budget", ["smoke", "full"])
def test_every_planned_run_loads_as_the_model_it_names(budget, tmp_path):
    specs = claims.plan(budget)
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    seeds = claims.BUDGETS[budget]
    for spec in specs:
        cfg = load_config(claims.CONFIG, claims.overrides_of(spec, budget, tmp_path))
        family = "rnnsearch" if spec.family == "hard" else spec.family
        assert cfg.model.name == family and cfg.data.grammar_pair == spec.pair
        assert cfg.train.seed == spec.seed and cfg.train.max_steps == seeds["steps"]
        assert (cfg.model.mode == "hard") == (spec.family == "hard")
        assert cfg.train.run_dir == str(tmp_path / spec.name)
    # every claim has its seeds: 3 (5 for the length and attribution claims, on en-fr)
    by_claim = {c: [s for s in specs if c in s.claims] for c in claims.CLAIMS}
    rnnsearch_fr = [s for s in by_claim["C1"] if s.name.startswith("rnnsearch-en-fr")]
    assert len(rnnsearch_fr) == seeds["length_seeds"]
    assert len([s for s in by_claim["C9"] if s.explain]) == seeds["length_seeds"]
    assert len(by_claim["C3"]) == len(claims.LUONG) * seeds["seeds"]
    assert len(by_claim["C4"]) == len(claims.HEADS) * seeds["seeds"]
    # a selection plans only what it needs
    assert {c for s in claims.plan(budget, ["C3"]) for c in s.claims} == {"C3"}
    with pytest.raises(SystemExit, match="C8"):
        claims.plan(budget, ["C8"])


def test_a_full_budget_selection_measures_its_runs_for_every_claim():
    # `--claims C1` at the full budget trains the C1 runs only, each measured for all it
    # serves (an RNNsearch record must still carry C2, C6, C9), so it completes the table
    full = {s.name: s for s in claims.plan("full")}
    chosen = claims.chosen_runs("full", ["C1"])
    assert {s.name for s in chosen} == {s.name for s in claims.plan("full", ["C1"])}
    assert all(s.claims == full[s.name].claims for s in chosen)
    assert "C9" in {c for s in chosen for c in s.claims}
    # the smoke budget keeps the selection narrow: seconds, not minutes
    assert {c for s in claims.chosen_runs("smoke", ["C1"]) for c in s.claims} == {"C1"}


def test_full_budget_rnnencdec_matches_rnnsearch_in_size():
    from attnmt.models import build_model

    specs = {s.name: s for s in claims.plan("full", ["C1"])}
    sizes = {}
    for name in ("rnnsearch-en-fr-s1", "rnnencdec-en-fr-s1"):
        cfg = load_config(claims.CONFIG, claims.overrides_of(specs[name], "full", Path("x")))
        model = build_model(cfg.model, 1531, 1531)  # the en-fr lab's vocabulary at 20,000
        sizes[name] = sum(p.numel() for p in model.parameters())
    ratio = sizes["rnnencdec-en-fr-s1"] / sizes["rnnsearch-en-fr-s1"]
    assert 0.95 < ratio < 1.05, sizes  # Fig. 2 compares equals


def test_a_verdict_needs_every_seed_on_one_side():
    v = claims_report.verdict
    assert v([30, 31, 32], [20, 25, 29]) == "reproduced"
    assert v([30, 31, 32], [20, 25, 30.5]) == "not settled"  # ranges overlap: no difference
    assert v([20, 21], [30, 31]) == "reversed"
    assert v([0.2, 0.3], [0.4, 0.5], higher_is_better=False) == "reproduced"  # AER
    assert v([], [1.0]) == "not run"
    # one seed has no spread: pending, whatever the gap; a fixed baseline needs no seeds
    assert v([90.0], [10.0]) == "pending (1 seed: ahead)"
    assert v([0.2, 0.25], [0.5], higher_is_better=False, baseline=True) == "reproduced"
    assert v([0.2, 0.25], [0.5], higher_is_better=False) == "pending (1 seed: ahead)"
    assert claims_report.fmt([1.0, 2.0, 3.0]) == "2.0 ± 1.0 [1.0–3.0] (3)"
    assert claims_report.fmt([]) == "—"


def test_the_bag_of_words_aligner_ignores_position():
    pair = SimpleNamespace  # what dice_links reads of a GrammarPair: src, tgt
    train = [
        pair(src=("the", "cat"), tgt=("le", "chat")),
        pair(src=("the", "dog"), tgt=("le", "chien")),
        pair(src=("a", "cat"), tgt=("un", "chat")),
    ]
    # "chat" co-occurs with "cat" twice (Dice 2·2/(2+2) = 1), with "the" once (2/(2+2))
    (links,) = claims.dice_links(train, [pair(src=("cat", "the"), tgt=("le", "chat"))])
    assert links == {(1, 0), (0, 1)}  # crossing, found from counts alone


def test_dev_curve_gives_each_validation_its_training_seconds(tmp_path):
    rows = [
        {"type": "train", "step": 50, "elapsed": 10.0},
        {"type": "train", "step": 100, "elapsed": 21.0},
        {"type": "valid", "step": 100, "bleu": 5.0, "exact": 1.0},
        {"type": "train", "step": 150, "elapsed": 30.0},
        {"type": "valid", "step": 200, "bleu": 9.0, "exact": 2.0},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert claims.dev_curve(tmp_path) == [
        {"step": 100, "seconds": 21.0, "bleu": 5.0, "exact": 1.0},
        {"step": 200, "seconds": 30.0, "bleu": 9.0, "exact": 2.0},
    ]


def test_the_smoke_budget_runs_two_claims_end_to_end_and_resumes(tmp_path):
    command = [sys.executable, str(BENCH / "claims.py"), "--budget", "smoke", "--claims",
               "C1,C2,C6", "--jobs", "2", "--out", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    specs = claims.plan("smoke", ["C1", "C2", "C6"])
    records = [json.loads(line) for line in (tmp_path / "claims.jsonl").read_text().splitlines()]
    assert sorted(r["name"] for r in records) == sorted(s.name for s in specs)
    for r in records:
        assert r["trained"] == claims.BUDGETS["smoke"]["steps"]
        assert r["step"] in (6, 12)  # the best checkpoint by dev BLEU is measured
        assert "forced_length" in r and r["bleu_by_length"]
        assert ("alignment_test" in r) == (r["family"] == "rnnsearch")
    text = (tmp_path / "claims.md").read_text()
    assert "### C1 The bottleneck" in text and "### C2 and C6" in text
    assert "RNNsearch above RNNencdec on the longest sentences: en-fr" in text
    assert {p.name for p in (tmp_path / "figures").iterdir()} >= {
        "claims-c1-length.png", "claims-c2-en-fr.png",
    }  # fmt: skip
    # again: nothing left to train, the same table
    stamp = {s.name: (tmp_path / s.name / "claims.json").stat().st_mtime_ns for s in specs}
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and ": done" not in again.stdout
    assert stamp == {s.name: (tmp_path / s.name / "claims.json").stat().st_mtime_ns for s in specs}
    assert (tmp_path / "claims.md").read_text().split("\n", 1)[1] == text.split("\n", 1)[1]
