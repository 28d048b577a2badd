"""The papers' claims settled on the grammar lab, with spread (docs/results.md, "The grammar
lab: the papers' claims, with spread").

    python benchmarks/claims.py --budget full --step-times   # C7's clock: each model alone
    python benchmarks/claims.py --budget full --jobs 2       # the main plan: hours on 2 cores
    python benchmarks/claims.py --budget full --claims C3 --jobs 2   # Luong's, its own plan
    python benchmarks/claims.py --budget full --report       # the table and figures again
    python benchmarks/claims.py --budget smoke --claims C1   # seconds: what the suite runs

Each model is trained with five seeds on `corpus: grammar` (configs/grammar.yaml's
RNNsearch and its budget, the other models at about its size) and measured where each
claim means something:

- C1 the bottleneck: RNNencdec against RNNsearch, test BLEU by source length (Bahdanau
  Fig. 2; test runs to 60 words where training stopped at 25), also decoded with the
  reference's length forced, so a failure to stop is not blamed on the encoding (Newman
  et al. 2020);
- C2 reordering: the attention's sure-link recall on crossing links (the reordered spans)
  against the rest, on the lengths trained on (dev) and on the sentences each model
  translates exactly, apart from length generalisation; a heatmap of a typical crossing;
- C3 Luong's choices on en-fr (global / local-m / local-p, dot / general / concat /
  location, input feeding on and off) at equal learning: each trained until its dev BLEU
  stops improving; "ends better" and "learns faster" judged apart. Its own plan;
- C4 heads: a 2-layer Transformer with 1, 2, 4 and 8 heads at one width (test and dev
  BLEU); which layer and head aligns best;
- C5 soft against hard (REINFORCE) attention, and the steps each needs;
- C6 attention as alignment: AER on dev and test against the exact sure and possible
  links, beside eflomal's (five runs), the diagonal's and a bag-of-words aligner's;
- C7 the Transformer against RNNsearch at equal updates and at equal seconds, the seconds
  from each model's time per update measured alone (`--step-times`), per pair;
- C9 explanations: each method's AER against the exact *causes*, one link a word (with the
  floor no such method can pass) and top k (as many links as causes), and its deletion
  area against a random order, on the RNNsearch models.

Every verdict follows the one rule of `benchmarks/verdicts.py` (an exact permutation test,
or a t-test when paired or against a fixed number, at p ≤ 0.01, five seeds a side), with
the difference, its bootstrap interval and the effect size beside it; `claims_report.py`
writes the tables, the verdicts and every paragraph around them from the records.

Resumable: every run is an ordinary run directory OUT/NAME (training resumes where it
stopped) with its measures in OUT/NAME/claims.json once done; run the command again and
only what is missing is done. Runs are trained model by model (`ORDER`), so that a plan
stopped half-way leaves whole claims done. At the full budget the records committed in
benchmarks/results/lab/claims.jsonl count as done too, so the run goes on from them on
another machine (each record names the machine it was measured on). Each run trains in
its own process (`--jobs` at a time, one thread each when several). The full budget
writes benchmarks/results/lab/ (the records, the baselines, C7's clock), the table between
the markers of docs/results.md and the figures docs/results/lab/claims-*.png; the smoke
budget writes OUT/claims.md, OUT/claims.jsonl and OUT/figures/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "grammar.yaml"
# The five-seed plan's records and what its table reads beside them; the 3-seed records of
# 2026-11-27 stay in benchmarks/results/claims*.json* (the chapters quote them until they
# move to these), judged again by `--previous` for the list of changed verdicts.
LAB = ROOT / "benchmarks" / "results" / "lab"
RESULTS = LAB / "claims.jsonl"
OLD = ROOT / "benchmarks" / "results" / "claims.jsonl"
DOC = ROOT / "docs" / "results.md"
FIGURES = ROOT / "docs" / "results" / "lab"
BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
PAIRS = ("en-fr", "en-de", "en-ja")
CLAIMS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7", "C9")
# C3 trains Luong's variants to equal learning (until dev BLEU stops improving), hours more
# than the rest: its own plan (`--claims C3`); a plain run trains the others.
OWN_PLAN = ("C3",)
MAIN = tuple(c for c in CLAIMS if c not in OWN_PLAN)
STEP_TIMES = LAB / "step-times.json"  # C7: seconds per update, each model alone
PREVIOUS = LAB / "previous-verdicts.json"  # the last table's comparisons, judged again

# Each budget: the data, the steps, the seeds. "full" keeps configs/grammar.yaml's
# RNNsearch and its 1,500 steps (dev 86.5% exact for seed 1: learned, not saturated).
BUDGETS: dict[str, dict[str, Any]] = {
    "smoke": {
        "data": [
            "data.synthetic_train_size=200", "data.synthetic_dev_size=12",
            "data.grammar_train_words=[2, 8]", "data.grammar_dev_words=[2, 8]",
            "data.grammar_test_words=[2, 16]", "data.batch_tokens=300",
        ],
        "rnn": ["model.embed_size=16", "model.hidden_size=16"],
        "rnnencdec_hidden": 20,
        "transformer": ["model.hidden_size=16", "model.ff_size=32"],
        "steps": 12, "validate_every": 6, "valid_sentences": 6,
        "luong_steps": 12, "luong_patience": 0,
        "seeds": 2, "explain_sentences": 4, "ig_steps": 4,
        "eflomal": False, "timed_steps": 3,
        # one pair: the smoke run checks the machinery end to end (train, measure, resume,
        # table, figures), which the other two pairs would only repeat
        "pairs": ("en-fr",),
    },
    "full": {
        "data": [],
        "rnn": [],
        "rnnencdec_hidden": 160,  # 911k parameters against RNNsearch's 896k (vocab 1,531)
        "transformer": ["model.hidden_size=128", "model.ff_size=256"],  # 1.05M
        "steps": 1500, "validate_every": 250, "valid_sentences": 200,
        # C3 at equal learning: each Luong variant trains until its dev BLEU has not
        # improved for 4 validations (1,000 updates), at most 8,000 updates
        "luong_steps": 8000, "luong_patience": 4,
        "seeds": 5, "explain_sentences": 100, "ig_steps": 16,
        "eflomal": True, "timed_steps": 40,
    },
}  # fmt: skip

LUONG = {  # C3: name -> overrides of the Luong model (attention, scope, input feeding)
    "global-dot": ["model.attention=dot"],
    "global-general": ["model.attention=general"],
    "global-concat": ["model.attention=concat"],
    "global-location": ["model.attention=location", "model.max_source_len=64"],
    "local-m-general": ["model.attention=general", "model.scope=local-m"],
    "local-p-general": ["model.attention=general", "model.scope=local-p"],
    "global-general-nofeed": ["model.attention=general", "model.input_feeding=false"],
}
HEADS = (1, 2, 4, 8)  # C4
TRANSFORMER = [  # the shipped Transformer's recipe (configs/transformer.yaml), 2 layers
    "model.name=transformer", "model.layers=2", "model.dropout=0.1",
    "model.tie_embeddings=true", "model.share_embeddings=true",
    "train.schedule=noam", "train.lr=0.001", "train.warmup_steps=400",
]  # fmt: skip
EXPLAIN = ("attention", "attention-norm", "grad-input", "integrated-gradients", "occlusion")


@dataclass
class Spec:
    """One training run: its name (its directory under OUT), the claims it serves."""

    name: str
    family: str  # rnnsearch, rnnencdec, luong, transformer, hard
    pair: str
    seed: int
    overrides: list[str]
    claims: set[str] = field(default_factory=set)
    explain: bool = False


# The order runs are trained in: whole claims first (every seed of a model before the next
# model), so that a plan stopped half-way has some claims complete at five seeds rather
# than all of them pending; the RNNs serve the most claims (C1, C2, C5, C6, C7, C9).
ORDER = ("rnnsearch", "rnnencdec", "hard", "transformer-h4", "transformer", "luong")


def plan(budget: str, chosen: Iterable[str] = CLAIMS) -> list[Spec]:
    """The runs the chosen claims need, in the order they are trained (`ORDER`)."""
    b, chosen = BUDGETS[budget], set(chosen)
    unknown = chosen - set(CLAIMS)
    if unknown:
        raise SystemExit(f"unknown claim(s) {sorted(unknown)}; choose from {', '.join(CLAIMS)}")
    specs: dict[str, Spec] = {}

    def add(name, family, pair, seed, overrides, claims, explain=False):
        if not claims & chosen:
            return
        spec = specs.setdefault(name, Spec(name, family, pair, seed, overrides))
        spec.claims |= claims & chosen
        spec.explain |= explain and "C9" in chosen

    rnn = b["rnn"]
    encdec = ["model.name=rnnencdec", *rnn, f"model.hidden_size={b['rnnencdec_hidden']}"]
    for seed in range(1, b["seeds"] + 1):
        for pair in b.get("pairs", PAIRS):
            own = {"C1", "C2", "C6", "C7"}
            if pair == "en-fr":
                own |= {"C5", "C9"}  # the soft side of soft vs hard; explanations
            add(f"rnnsearch-{pair}-s{seed}", "rnnsearch", pair, seed, rnn, own,
                explain=pair == "en-fr")  # fmt: skip
            add(f"rnnencdec-{pair}-s{seed}", "rnnencdec", pair, seed, encdec, {"C1"})
        for variant, overrides in LUONG.items():
            add(f"luong-{variant}-en-fr-s{seed}", "luong", "en-fr", seed,
                ["model.name=luong", *rnn, *overrides], {"C3"})  # fmt: skip
        for heads in HEADS:
            claims = {"C4", "C7"} if heads == 4 else {"C4"}
            add(f"transformer-h{heads}-en-fr-s{seed}", "transformer", "en-fr", seed,
                [*TRANSFORMER, *b["transformer"], f"model.heads={heads}"], claims)  # fmt: skip
        for pair in [p for p in b.get("pairs", PAIRS) if p != "en-fr"]:
            add(f"transformer-h4-{pair}-s{seed}", "transformer", pair, seed,
                [*TRANSFORMER, *b["transformer"], "model.heads=4"], {"C7"})  # fmt: skip
        add(f"hard-en-fr-s{seed}", "hard", "en-fr", seed, [*rnn, "model.mode=hard"], {"C5"})

    def rank(spec: Spec) -> int:
        return next(n for n, prefix in enumerate(ORDER) if spec.name.startswith(prefix))

    return sorted(specs.values(), key=rank)  # stable: seed by seed within a rank


def chosen_runs(budget: str, chosen: Iterable[str]) -> list[Spec]:
    """The runs to train for the chosen claims. At the full budget each run is the whole
    plan's, measured for every claim it serves, so that its record completes the committed
    table rather than replacing it; the smoke budget measures the chosen claims only."""
    if budget != "full":
        return plan(budget, chosen)
    wanted = {s.name for s in plan(budget, chosen)}
    return [s for s in plan(budget) if s.name in wanted]


def overrides_of(spec: Spec, budget: str, out: Path) -> list[str]:
    b = BUDGETS[budget]
    steps, until = b["steps"], []
    if spec.family == "luong":  # to equal learning: until dev BLEU stops improving
        steps = b["luong_steps"]
        until = [f"train.patience={b['luong_patience']}", "train.early_stopping_metric=bleu"]
    return [
        "data.corpus=grammar",
        f"data.grammar_pair={spec.pair}",
        *b["data"],
        *spec.overrides,
        f"train.seed={spec.seed}",
        f"train.run_dir={out / spec.name}",
        f"train.max_steps={steps}",
        *until,
        f"train.validate_every={b['validate_every']}",
        f"train.checkpoint_every={b['validate_every']}",
        f"train.valid_sentences={b['valid_sentences']}",
        "train.log_every=50",
        "train.precision=fp32",
        "train.device=cpu",
    ]


# ---------------------------------------------------------------- one run (a child process)


def run_one(spec: Spec, budget: str, out: Path) -> dict[str, Any]:
    """Train `spec` (or resume it) to its budget, then measure it; returns the record."""
    from attnmt.config import load_config
    from attnmt.rundir import RunDir
    from attnmt.training import train

    started, began = time.monotonic(), time.time()
    cfg = load_config(CONFIG, overrides_of(spec, budget, out))
    run_dir = out / spec.name
    latest = RunDir(run_dir).latest()
    step = latest["step"] if latest else 0
    if step < cfg.train.max_steps:
        train(cfg, resume=latest is not None, progress=False)
    record = measure(spec, budget, run_dir)
    # this session's seconds (a resumed run: since it resumed) and where they were spent
    # and when (Unix seconds): the plan's wall clock is first start to last end
    return {**record, "seconds": round(time.monotonic() - started, 1), "machine": machine(),
            "began": round(began), "ended": round(time.time())}  # fmt: skip


def machine() -> str:
    """The CPU and its notable flags, as every figure of results.md names it."""
    from attnmt.devices import NOTABLE_FLAGS, cpu_flags, cpu_model

    flags = ", ".join(sorted(cpu_flags() & NOTABLE_FLAGS)) or "no notable flags"
    return f"{cpu_model()} ({flags})"


def committed(budget: str) -> dict[str, dict[str, Any]]:
    """The full budget's records already in benchmarks/results/lab/claims.jsonl, by name: the
    run goes on from them on another machine (run directories are not committed)."""
    if budget != "full" or not RESULTS.is_file():
        return {}
    rows = [json.loads(line) for line in RESULTS.read_text(encoding="utf-8").splitlines()]
    return {r["name"]: r for r in rows}


def measure(spec: Spec, budget: str, run_dir: Path) -> dict[str, Any]:
    """The test split's scores, by length, with forced lengths (C1), the attention's AER
    on test and dev (C2, C4, C6), explanations (C9) and the dev curve (C5, C7)."""
    from attnmt.data.preparation import decoding_split
    from attnmt.decoding.attention_choice import choose_attention
    from attnmt.decoding.decode_ids import translate_ids
    from attnmt.decoding.runs import load_run
    from attnmt.decoding.translator import source_limit
    from attnmt.evaluation.splits import alignment_report, evaluate_examples
    from attnmt.metrics import bleu_by_length, corpus_scores
    from attnmt.rundir import RunDir

    loaded = load_run(run_dir)
    cfg, vocab = loaded.cfg, loaded.vocab
    limit = source_limit(cfg.model)
    test = list(decoding_split(cfg.data, "test", vocab))
    dev = list(decoding_split(cfg.data, "dev", vocab))
    result, test_hyps = evaluate_examples(loaded, test, split="test", limit=limit)
    dev_result, dev_hyps = evaluate_examples(loaded, dev, split="dev", limit=limit)
    record: dict[str, Any] = {
        "name": spec.name, "family": spec.family, "pair": spec.pair, "seed": spec.seed,
        "claims": sorted(spec.claims), "budget": budget,
        "step": loaded.step,  # the checkpoint measured: the best by dev BLEU
        "trained": RunDir(run_dir).latest()["step"],
        "parameters": result["parameters"],
        **{k: result[k] for k in ("bleu", "chrf", "exact", "bleu_by_length")},
        "dev": {k: dev_result[k] for k in ("bleu", "chrf", "exact")},  # all of dev, greedy
        "curve": dev_curve(run_dir),
    }  # fmt: skip
    if "C1" in spec.claims:  # the reference's length forced: the words, not the stopping
        lengths = [len(ex.tgt.split()) for ex in test]
        forced = translate_ids(
            loaded.model, [vocab.src.encode(ex.src)[:limit] for ex in test], vocab.tgt.decode,
            exact_lengths=lengths,
        )  # fmt: skip
        hyps, refs = [t.text for t in forced], [[ex.tgt] for ex in test]
        record["forced_length"] = {
            **{k: corpus_scores(hyps, refs)[k] for k in ("bleu", "chrf", "exact")},
            "bleu_by_length": bleu_by_length([ex.src for ex in test], hyps, refs),
        }
    if spec.family != "rnnencdec":
        choice = choose_attention(cfg.model)
        keep = ("aer", "precision", "recall", "diagonal", "by_offset", "by_phenomenon")
        for split, examples in (("test", test), ("dev", dev)):
            report, _ = alignment_report(loaded, examples, choice, limit)
            record[f"alignment_{split}"] = {k: report[k] for k in (*keep, "by_head") if k in report}
        # C2 apart from length: the sentences the model translates exactly (greedy), where
        # its words are the reference's and the attention is read where it has learned
        for split, examples, hyps in (("test", test, test_hyps), ("dev", dev, dev_hyps)):
            exact = [ex for ex, h in zip(examples, hyps, strict=True)
                     if h.strip() == ex.tgt.strip()]  # fmt: skip
            report = alignment_report(loaded, exact, choice, limit)[0] if exact else {}
            kept = {k: report[k] for k in ("aer", "by_phenomenon") if k in report}
            record[f"alignment_exact_{split}"] = {"sentences": len(exact), **kept}
    if spec.explain:
        record["explanations"] = explanations(loaded, dev, limit, budget)
    return record


def explanations(loaded, examples, limit: int, budget: str) -> dict[str, Any]:
    """C9: each method's AER against the causes and its deletion/insertion areas, on the
    first dev sentences (in distribution: the model translates them)."""
    from attnmt.decoding.attention_choice import choose_attention
    from attnmt.explain import explanation_report

    b = BUDGETS[budget]
    report = explanation_report(
        loaded, examples, EXPLAIN, choose_attention(loaded.cfg.model), limit,
        sentences=b["explain_sentences"], ig_steps=b["ig_steps"],
    )  # fmt: skip
    keep = ("aer", "precision", "recall", "deletion_auc", "insertion_auc", "ms_per_sentence",
            "where_output_changes", "top_k")  # fmt: skip
    return {
        "gold": report.get("gold"),
        "sentences": report["sentences"],
        "diagonal": report.get("diagonal"),
        "one_link_floor": report.get("one_link_floor"),  # C9: no one-link method goes below
        "random": {k: report["random"][k] for k in ("deletion_auc", "insertion_auc")},
        "methods": {m: {k: r[k] for k in keep if k in r} for m, r in report["methods"].items()},
        # the lab's refinements: scored where the model's output responds to the causes;
        # occlusion by another word of the same slot instead of <unk>
        "where_output_changes": report.get("where_output_changes"),
        "by_replacement": report.get("by_replacement"),
    }


def dev_curve(run_dir: Path) -> list[dict[str, float]]:
    """Dev BLEU and exact match by step, with the training seconds spent to reach it."""
    from attnmt.rundir import RunDir

    elapsed, curve = {}, []
    for row in RunDir(run_dir).metrics():
        if row.get("type") == "train":
            elapsed[row["step"]] = row["elapsed"]
        elif row.get("type") == "valid":
            seconds = max((s for k, s in elapsed.items() if k <= row["step"]), default=0.0)
            curve.append({"step": row["step"], "seconds": seconds, "bleu": row["bleu"],
                          "exact": row["exact"]})  # fmt: skip
    return curve


# ---------------------------------------------------------------- C7's clock


def step_times(budget: str, out: Path) -> dict[str, Any]:
    """Seconds per update of each C7 model (seed 1 of RNNsearch and the 4-head Transformer,
    per pair), measured here alone: one process on one thread, as the plan's runs train,
    with nothing of the plan beside it; each update timed over `timed_steps` of its own
    batches after 5 warm-up ones, the median kept. C7 reads "the same training time" as
    updates × these seconds, so its budget does not depend on what shared the machine
    while the runs trained. Kept in claims-step-times.json (benchmarks/results/ for the
    full budget, OUT for the smoke budget)."""
    import statistics

    import torch
    from throughput import Trainer

    torch.set_num_threads(1)
    steps, found = BUDGETS[budget]["timed_steps"], {}
    for spec in plan(budget, ["C7"]):
        if spec.seed != 1:
            continue
        trainer = Trainer(str(CONFIG), overrides_of(spec, budget, out), batches=5 + steps)
        times = []
        for n, batch in enumerate(trainer.batches):
            started = time.perf_counter()
            trainer.step(batch)
            if n >= 5:
                times.append(time.perf_counter() - started)
        key = spec.name.removesuffix(f"-s{spec.seed}")
        found[key] = {"seconds_per_update": round(statistics.median(times), 4),
                      "updates_timed": len(times), "parameters": trainer.parameters}  # fmt: skip
        print(f"{key}: {1000 * found[key]['seconds_per_update']:.0f} ms an update", flush=True)
    record = {"machine": machine(), "threads": 1, "models": found}
    target = STEP_TIMES if budget == "full" else out / STEP_TIMES.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=1) + "\n")
    return record


# ---------------------------------------------------------------- baselines without a model


def aligner_baselines(budget: str, pair: str, out: Path) -> dict[str, Any]:
    """C6's baselines on the dev and test splits of `pair` ({"dev": ..., "test": ...}):
    the diagonal (position only), a bag-of-words aligner (each target word to the source
    word it co-occurs with most, Dice over the training split, position ignored), both
    deterministic, and eflomal (full budget; run on all splits at once, as unsupervised
    aligners are; `seeds` times, as many runs as the models have seeds: its sampler is not
    seedable). Kept in baselines-PAIR.json (benchmarks/results/lab/ for the full budget,
    committed with the runs' records; OUT for the smoke budget)."""
    from attnmt.alignment.links import alignment_scores, diagonal_alignment
    from attnmt.config import load_config
    from attnmt.data.grammar_corpus import grammar_pairs

    cache = (LAB if budget == "full" else out) / f"baselines-{pair}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    cfg = load_config(CONFIG, ["data.corpus=grammar", f"data.grammar_pair={pair}",
                               *BUDGETS[budget]["data"]])  # fmt: skip
    splits = grammar_pairs(cfg.data)

    def scored(links, pairs) -> dict[str, float]:
        sure, possible = [set(p.sure) for p in pairs], [set(p.possible) for p in pairs]
        s = alignment_scores(links, sure, possible)
        return {k: round(float(s[k]), 4) for k in ("aer", "precision", "recall")}

    found: dict[str, Any] = {
        split: {
            "diagonal": scored([diagonal_alignment(len(p.src), len(p.tgt)) for p in pairs], pairs),
            "bag-of-words": scored(dice_links(splits["train"], pairs), pairs),
        }
        for split, pairs in (("dev", splits["dev"]), ("test", splits["test"]))
    }
    if BUDGETS[budget]["eflomal"]:
        from attnmt.alignment.aligners import eflomal_links
        from attnmt.alignment.links import symmetrize

        every = [p for name in ("train", "dev", "test") for p in splits[name]]
        runs: dict[str, list] = {"dev": [], "test": []}
        for _ in range(BUDGETS[budget]["seeds"]):
            forward, reverse = eflomal_links([p.src for p in every], [p.tgt for p in every])
            links = [symmetrize(f, r) for f, r in zip(forward, reverse, strict=True)]
            start = len(splits["train"])
            for split in ("dev", "test"):
                pairs = splits[split]
                runs[split].append(scored(links[start : start + len(pairs)], pairs))
                start += len(pairs)
        for split, found_runs in runs.items():
            found[split]["eflomal"] = {"runs": found_runs, "aer": [r["aer"] for r in found_runs]}
    cache.write_text(json.dumps(found))
    return found


def dice_links(train: Sequence[Any], pairs: Sequence[Any]) -> list[set[tuple[int, int]]]:
    """Bag-of-words links: target word j to the source word w maximising Dice(w, t_j) =
    2·c(w, t) / (c(w) + c(t)) over sentence co-occurrence counts of the training pairs."""
    from collections import Counter

    both, src_count, tgt_count = Counter(), Counter(), Counter()
    for p in train:
        s, t = set(p.src), set(p.tgt)
        src_count.update(s)
        tgt_count.update(t)
        both.update((w, v) for w in s for v in t)
    out = []
    for p in pairs:
        links = set()
        for j, v in enumerate(p.tgt):
            dice = [2 * both[(w, v)] / max(1, src_count[w] + tgt_count[v]) for w in p.src]
            links.add((max(range(len(p.src)), key=lambda i: (dice[i], -i)), j))
        out.append(links)
    return out


# ---------------------------------------------------------------- driver


def report(out: Path, budget: str, specs: list[Spec], wall: float | None) -> Path:
    """Gather every finished run's record; write the jsonl, the tables and the figures."""
    from claims_report import figures, setup, tables

    found = committed(budget)
    for s in specs:
        if (out / s.name / "claims.json").is_file():
            found[s.name] = json.loads((out / s.name / "claims.json").read_text())
    records = [found[s.name] for s in specs if s.name in found]
    for r in records:  # records written before runs named their machine: this one's
        r.setdefault("machine", machine())
    pairs = sorted({r["pair"] for r in records if "C6" in r["claims"]})
    baselines = {p: aligner_baselines(budget, p, out) for p in pairs}
    times = STEP_TIMES if budget == "full" else out / STEP_TIMES.name
    step_times = json.loads(times.read_text()) if times.is_file() else None
    previous = json.loads(PREVIOUS.read_text()) if budget == "full" and PREVIOUS.is_file() else None
    body, _ = tables(records, baselines, step_times, previous)
    lines = [*setup(records, specs, BUDGETS[budget], budget, wall), "", *body]
    if budget == "full":
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text("".join(json.dumps(r) + "\n" for r in records))
        figures(records, FIGURES, out)
        text = DOC.read_text(encoding="utf-8")
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        DOC.write_text(before + BEGIN + "\n" + "\n".join(lines) + "\n" + END + after)
        return DOC
    (out / "claims.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    figures(records, out / "figures", out)
    (out / "claims.md").write_text("\n".join(lines) + "\n")
    return out / "claims.md"


def keep_previous(path: Path, baselines_folder: Path) -> Path:
    """Judge an older claims.jsonl (and its claims-baselines-PAIR.json) by the old rule and
    the one rule, and keep the result in lab/previous-verdicts.json, from which the table
    says which verdicts changed and why (`--previous`)."""
    from claims_report import previous_verdicts

    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    baselines = {}
    for pair in PAIRS:
        file = baselines_folder / f"claims-baselines-{pair}.json"
        if file.is_file():
            old = json.loads(file.read_text())
            baselines[pair] = old if "test" in old else {"test": old}  # before dev was added
    PREVIOUS.write_text(json.dumps(previous_verdicts(records, baselines), indent=0) + "\n")
    return PREVIOUS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", choices=sorted(BUDGETS), default="smoke")
    own = ", ".join(OWN_PLAN)
    parser.add_argument("--claims", default=",".join(MAIN),
                        help=f"comma-separated, e.g. C1,C6 (default: all but {own}: "
                        "its own plan)")  # fmt: skip
    parser.add_argument("--previous", action="store_true",
                        help=f"judge the previous table's records ({OLD.relative_to(ROOT)}) "
                        "again, for the list of changed verdicts")  # fmt: skip
    parser.add_argument("--step-times", action="store_true",
                        help="only measure C7's seconds per update, each model alone")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="default runs/claims-BUDGET")
    parser.add_argument("--jobs", type=int, default=1, help="trainings at a time")
    parser.add_argument("--report", action="store_true", help="only gather what is done")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: train and measure NAME
    args = parser.parse_args(argv)
    out = (args.out or ROOT / "runs" / f"claims-{args.budget}").resolve()
    specs = chosen_runs(args.budget, [c.strip() for c in args.claims.split(",") if c.strip()])
    if args.one:
        (spec,) = [s for s in specs if s.name == args.one]
        record = run_one(spec, args.budget, out)
        (out / spec.name / "claims.json").write_text(json.dumps(record))
        return 0
    if args.step_times:
        step_times(args.budget, out)
        return 0
    if args.previous:
        print(f"wrote {keep_previous(OLD, OLD.parent)}")
        return 0
    started = time.monotonic()
    if not args.report:
        run_all(specs, args, out)
    # the full budget's table is always the whole plan's: a subset run adds to it
    whole = plan(args.budget) if args.budget == "full" else specs
    target = report(out, args.budget, whole, None if args.report else time.monotonic() - started)
    print(f"wrote {target}")
    return 0


def run_all(specs: list[Spec], args: argparse.Namespace, out: Path) -> None:
    """Each missing run in its own process, `args.jobs` at a time; a failed run is
    reported with its log and the others go on."""
    out.mkdir(parents=True, exist_ok=True)
    done = committed(args.budget)
    todo = [s for s in specs if s.name not in done and not (out / s.name / "claims.json").is_file()]
    env = dict(os.environ)
    if args.jobs > 1:
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    running: list[tuple[Spec, subprocess.Popen, float]] = []
    failed = []
    while todo or running:
        while todo and len(running) < args.jobs:
            spec = todo.pop(0)
            log = (out / f"{spec.name}.log").open("w")
            command = [sys.executable, __file__, "--one", spec.name, "--budget", args.budget,
                       "--claims", args.claims, "--out", str(out)]  # fmt: skip
            running.append((spec, subprocess.Popen(command, stdout=log, stderr=log, env=env),
                            time.monotonic()))  # fmt: skip
        time.sleep(0.2)
        for item in list(running):
            spec, process, began = item
            if process.poll() is None:
                continue
            running.remove(item)
            status = "done" if process.returncode == 0 else f"FAILED ({out / spec.name}.log)"
            if process.returncode:
                failed.append(spec.name)
            print(f"{spec.name}: {status} in {time.monotonic() - began:.0f} s", flush=True)
    if failed:
        print(f"{len(failed)} run(s) failed: {', '.join(failed)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
