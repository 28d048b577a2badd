"""benchmarks/claims.py (docs/results.md, "The grammar lab: the papers' claims") cannot rot:
every run it plans loads as the model it names, the one rule of benchmarks/verdicts.py
gives the p-values, intervals and error rates it states, the bag-of-words aligner and the
one-link floor are what their docstrings say, and the smoke budget of three claims runs
end to end (train, measure, resume, table, figures) in its own processes."""

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
import verdicts  # noqa: E402

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
        luong = spec.family == "luong"  # C3: to equal learning, its own plan
        steps = seeds["luong_steps"] if luong else seeds["steps"]
        assert cfg.train.seed == spec.seed and cfg.train.max_steps == steps
        assert cfg.train.patience == (seeds["luong_patience"] if luong else 0)
        assert (cfg.model.mode == "hard") == (spec.family == "hard")
        assert cfg.train.run_dir == str(tmp_path / spec.name)
    # every model has the same seeds (5 at the full budget: what a verdict needs)
    by_claim = {c: [s for s in specs if c in s.claims] for c in claims.CLAIMS}
    for claim in claims.CLAIMS:
        per_model = {}
        for s in by_claim[claim]:
            per_model.setdefault(s.name.rsplit("-s", 1)[0], set()).add(s.seed)
        assert all(v == set(range(1, seeds["seeds"] + 1)) for v in per_model.values()), claim
    if budget == "full":
        assert seeds["seeds"] == verdicts.SEEDS
    assert len([s for s in by_claim["C9"] if s.explain]) == seeds["seeds"]
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


def test_the_permutation_test_is_exact():
    import itertools
    import math
    import statistics

    # complete separation at five a side: 2 of the C(10, 5) = 252 splits are as extreme
    assert verdicts.permutation_p([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == 2 / 252
    assert verdicts.smallest_p(5, 5) == 2 / 252 < verdicts.ALPHA < verdicts.smallest_p(3, 3)
    # against a brute-force count on values with overlap
    a, b = [3.1, 5.0, 4.2, 6.3, 2.2], [1.0, 2.5, 4.0, 0.5, 3.3]
    pooled, seen = a + b, abs(statistics.fmean(a) - statistics.fmean(b))
    extreme = sum(
        abs(sum(pooled[i] for i in c) / 5 - (sum(pooled) - sum(pooled[i] for i in c)) / 5)
        >= seen - 1e-12
        for c in itertools.combinations(range(10), 5)
    )
    assert verdicts.permutation_p(a, b) == extreme / math.comb(10, 5)
    # the t-test against scipy's
    from scipy import stats

    d = [1.2, 0.4, 0.9, 1.5, 0.7]
    assert abs(verdicts.t_p(d) - stats.ttest_1samp(d, 0.0).pvalue) < 1e-12


def test_the_rule_gives_verdicts_only_where_it_can_and_says_who_leads():
    judge = verdicts.judge
    v = judge("x", [30, 31, 32, 33, 34], [20, 21, 22, 23, 24])
    assert v.word == "reproduced" and v.p == 2 / 252 and v.difference == 10.0
    low, high = v.interval
    assert low < 10.0 < high and v.effect > 0
    assert judge("x", [20, 21, 22, 23, 24], [30, 31, 32, 33, 34]).word == "reversed"
    # one seed of the other side among them: p = 12/252 > 0.01, whatever the gap
    v = judge("x", [30, 31, 32, 33, 34], [20, 21, 22, 23, 35])
    assert v.word == "not settled" and v.p == 12 / 252
    assert v.text() == "not settled (the claim's side leads by 7.8)"
    # lower is better (AER): the sign of the difference follows the claim
    v = judge("aer", [2.0, 2.1, 2.2, 2.3, 2.4], [5.0, 5.1, 5.2, 5.3, 5.4], higher_is_better=False)
    assert v.word == "reproduced" and v.difference > 0 and v.interval[0] > 0
    # fewer than five seeds a side: pending, with who leads; nothing measured: not run
    v = judge("x", [30, 31, 32], [20, 21, 22])
    assert v.word == "pending" and "claim's side leads by 10.0" in v.text()
    assert judge("x", [], [1.0]).word == "not run"
    # a fixed number (a deterministic baseline) and paired seeds: the t-test
    v = judge("diag", [2.0, 3.0, 2.5, 2.2, 2.1], 39.4, kind=verdicts.FIXED,
              higher_is_better=False)  # fmt: skip
    assert v.word == "reproduced" and v.p < 1e-6 and v.cells()[1] == "5 v fixed"
    v = judge("c2", [60, 62, 61, 65, 64], [70, 71, 69, 75, 73], kind=verdicts.PAIRED)
    assert v.word == "reversed" and v.cells()[1] == "5 v 5 (paired)"
    with pytest.raises(ValueError, match="kind=FIXED"):
        judge("x", [1.0] * 5, 2.0)
    # the interval is the same at every call (a fixed bootstrap seed): the table rebuilds
    assert judge("x", [1, 2, 3, 4, 5], [2, 3, 4, 5, 9]).interval == judge(
        "x", [1, 2, 3, 4, 5], [2, 3, 4, 5, 9]
    ).interval
    assert claims_report.fmt([1.0, 2.0, 3.0]) == "2.0 ± 1.0 [1.0–3.0] (3)"
    assert claims_report.fmt([]) == "—"


def test_the_false_verdict_rate_is_what_the_page_says():
    # were there no difference at all, the rule settles at most ALPHA of comparisons:
    # every seed drawn from one distribution, 2,000 comparisons of five against five
    import random

    rng = random.Random(7)
    settled = 0
    for _ in range(2000):
        a = [rng.gauss(0, 1) for _ in range(5)]
        b = [rng.gauss(0, 1) for _ in range(5)]
        settled += verdicts.permutation_p(a, b) <= verdicts.ALPHA
    # the exact rate is 2/252 = 0.0079; 2,000 draws put the count within 16 ± 4 sd (3 sd:
    # below 28), so a rule that settled even 2% of null comparisons would fail here
    assert settled < 28
    ledger = verdicts.Ledger()
    for n in range(30):
        ledger(f"c{n}", [1.0 + n, 2.0, 3.0, 4.0, 5.0], [2.0, 3.0, 1.0, 5.0, 4.5])
    ledger("p", [1.0, 2.0], [3.0, 4.0])
    text = " ".join(ledger.summary())
    assert "makes 30 comparisons" in text and "at most 0.30" in text
    assert f"{1 - 0.99**30:.0%}" in text and "1 comparison(s) pending" in text


def test_the_old_rule_is_kept_to_explain_changed_verdicts():
    v = verdicts.judge("x", [30, 31, 32], [20, 25, 29])
    assert v.word == "pending" and claims_report.old_rule(v) == "reproduced"
    v = verdicts.judge("x", [30, 31, 32], [20, 25, 30.5])
    assert claims_report.old_rule(v) == "not settled"
    previous = [{"claim": "x", "old_rule": "reproduced", "rule": "pending", "seeds": [3, 3],
                 "conditions": None}]  # fmt: skip
    ledger = verdicts.Ledger()
    ledger("x", [30, 31, 32, 33, 34], [31, 30, 29, 28, 35])
    text = "\n".join(claims_report.changes(previous, ledger))
    assert "| x | reproduced | not settled | the rule (the same 3 v 3 seeds give pending)" in text


def test_the_one_link_floor_and_top_k():
    from attnmt.explain.measures import one_link_floor, top_k_links

    item = SimpleNamespace(
        target=SimpleNamespace(words=["a", "b", "c", "d"]),
        links={(0, 0), (1, 0), (2, 1), (3, 3)},  # word 2 has no cause, word 0 has two
    )
    floor = one_link_floor([item])
    # at most 3 of the 4 one-per-word links can be right: 1 - 2·3 / (4 + 4) = 25%
    assert floor == {"aer": 25.0, "target_words": 4, "without_cause": 1, "cause_links": 4}
    import numpy as np

    weights = np.array([[0.1, 0.5, 0.4, 0.0], [0.0, 0.2, 0.7, 0.1],
                        [0.9, 0.0, 0.1, 0.0], [0.3, 0.3, 0.1, 0.3]])  # fmt: skip
    # k from the gold: two links for word 0, one for 1 and 3, none for 2; ties by position
    assert top_k_links(weights, item.links) == {(1, 0), (2, 0), (2, 1), (0, 3)}


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
    assert "### C1 The bottleneck" in text and "### C2 Reordering" in text and "### C6" in text
    assert "| C1 en-fr: RNNsearch above RNNencdec, 11-20 words | 2 v 2 |" in text
    assert "### The rule and its error rate" in text and "### What the table finds" in text
    assert all("alignment_exact_dev" in r for r in records if r["family"] == "rnnsearch")
    assert {p.name for p in (tmp_path / "figures").iterdir()} >= {
        "claims-c1-length.png", "claims-c2-en-fr.png",
    }  # fmt: skip
    # again: nothing left to train, the same table
    stamp = {s.name: (tmp_path / s.name / "claims.json").stat().st_mtime_ns for s in specs}
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and ": done" not in again.stdout
    assert stamp == {s.name: (tmp_path / s.name / "claims.json").stat().st_mtime_ns for s in specs}
    assert (tmp_path / "claims.md").read_text().split("\n", 1)[1] == text.split("\n", 1)[1]
