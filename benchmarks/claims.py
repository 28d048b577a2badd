"""The papers' claims settled on the grammar lab, with spread (docs/results.md, "The grammar
lab: the papers' claims, with spread").

    python benchmarks/claims.py --budget full --jobs 2      # every claim: hours on 2 cores
    python benchmarks/claims.py --budget smoke --claims C1   # seconds: what the suite runs
    python benchmarks/claims.py --budget full --report       # the table and figures again

Each model is trained with several seeds on `corpus: grammar` (configs/grammar.yaml's
RNNsearch and its budget, the other models at about its size) and measured on the test
split, whose sentences run to 60 words where training stopped at 25:

- C1 the bottleneck: RNNencdec against RNNsearch, BLEU by source length (Bahdanau Fig. 2),
  also decoded with the reference's length forced, so a failure to stop is not blamed on
  the encoding (Newman et al. 2020);
- C2 reordering: the attention's sure-link precision/recall on crossing links (the
  reordered spans) against the rest, and a heatmap of each pair's typical crossing;
- C3 Luong's choices on en-fr: global / local-m / local-p, dot / general / concat /
  location, input feeding on and off;
- C4 heads: a 2-layer Transformer with 1, 2, 4 and 8 heads at one width; which layer and
  head aligns best;
- C5 soft against hard (REINFORCE) attention, and the steps each needs;
- C6 attention as alignment: AER against the exact sure and possible links, beside
  eflomal's, the diagonal's and a bag-of-words aligner's, and by step offset;
- C7 the Transformer against RNNsearch at the same training time (dev BLEU by elapsed
  seconds), per pair;
- C9 explanations: each method's AER against the exact *causes* and its deletion area
  against a random order, on the RNNsearch models.

A claim is "reproduced" when every seed agrees and the difference of the means exceeds
both spreads (max − min over seeds), "reversed" when that holds the other way, and "not
settled" otherwise (McCoy et al. 2020: seeds differ most out of distribution).

Resumable: every run is an ordinary run directory OUT/NAME (training resumes where it
stopped) with its measures in OUT/NAME/claims.json once done; run the command again and
only what is missing is done. At the full budget the records committed in
benchmarks/results/claims.jsonl count as done too, so the run goes on from them on
another machine (each record names the machine it was measured on). Each run trains in
its own process (`--jobs` at a time, one thread each when several). The full budget
writes benchmarks/results/claims.jsonl (one line per run), the table between the markers
of docs/results.md and the figures docs/results/claims-*.png; the smoke budget writes
OUT/claims.md and OUT/claims.jsonl.
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
RESULTS = ROOT / "benchmarks" / "results" / "claims.jsonl"
DOC = ROOT / "docs" / "results.md"
FIGURES = ROOT / "docs" / "results"
BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
PAIRS = ("en-fr", "en-de", "en-ja")
CLAIMS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7", "C9")

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
        "seeds": 2, "length_seeds": 2, "explain_sentences": 4, "ig_steps": 4,
        "eflomal": False,
    },
    "full": {
        "data": [],
        "rnn": [],
        "rnnencdec_hidden": 160,  # 911k parameters against RNNsearch's 896k (vocab 1,531)
        "transformer": ["model.hidden_size=128", "model.ff_size=256"],  # 1.05M
        "steps": 1500, "validate_every": 250, "valid_sentences": 200,
        "seeds": 3, "length_seeds": 5, "explain_sentences": 100, "ig_steps": 16,
        "eflomal": True,
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


def plan(budget: str, chosen: Iterable[str] = CLAIMS) -> list[Spec]:
    """The runs the chosen claims need, in the order they are trained: seeds 1..3 of the
    claims on every pair first, the extra seeds of the length claims last."""
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
    for seed in range(1, b["length_seeds"] + 1):
        extra = seed > b["seeds"]  # seeds 4 and 5: the length and attribution claims only
        for pair in PAIRS:
            if extra and pair != "en-fr":
                continue
            own = {"C1", "C9"} if extra else {"C1", "C2", "C6", "C7", "C9"}
            if pair != "en-fr":
                own.discard("C9")
            if pair == "en-fr" and not extra:
                own.add("C5")  # the soft side of soft vs hard
            add(f"rnnsearch-{pair}-s{seed}", "rnnsearch", pair, seed, rnn, own,
                explain=pair == "en-fr")  # fmt: skip
            add(f"rnnencdec-{pair}-s{seed}", "rnnencdec", pair, seed, encdec, {"C1"})
        if extra:
            continue
        for variant, overrides in LUONG.items():
            add(f"luong-{variant}-en-fr-s{seed}", "luong", "en-fr", seed,
                ["model.name=luong", *rnn, *overrides], {"C3"})  # fmt: skip
        for heads in HEADS:
            claims = {"C4", "C7"} if heads == 4 else {"C4"}
            add(f"transformer-h{heads}-en-fr-s{seed}", "transformer", "en-fr", seed,
                [*TRANSFORMER, *b["transformer"], f"model.heads={heads}"], claims)  # fmt: skip
        for pair in PAIRS[1:]:
            add(f"transformer-h4-{pair}-s{seed}", "transformer", pair, seed,
                [*TRANSFORMER, *b["transformer"], "model.heads=4"], {"C7"})  # fmt: skip
        add(f"hard-en-fr-s{seed}", "hard", "en-fr", seed, [*rnn, "model.mode=hard"], {"C5"})
    return list(specs.values())


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
    return [
        "data.corpus=grammar",
        f"data.grammar_pair={spec.pair}",
        *b["data"],
        *spec.overrides,
        f"train.seed={spec.seed}",
        f"train.run_dir={out / spec.name}",
        f"train.max_steps={b['steps']}",
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
    from attnmt.training import train

    started = time.monotonic()
    cfg = load_config(CONFIG, overrides_of(spec, budget, out))
    run_dir = out / spec.name
    latest = run_dir / "checkpoints" / "latest.json"
    step = json.loads(latest.read_text())["step"] if latest.is_file() else 0
    if step < cfg.train.max_steps:
        train(cfg, resume=latest.is_file(), progress=False)
    record = measure(spec, budget, run_dir)
    # this session's seconds (a resumed run: since it resumed) and where they were spent
    return {**record, "seconds": round(time.monotonic() - started, 1), "machine": machine()}


def machine() -> str:
    """The CPU and its notable flags, as every figure of results.md names it."""
    from attnmt.devices import NOTABLE_FLAGS, cpu_flags, cpu_model

    flags = ", ".join(sorted(cpu_flags() & NOTABLE_FLAGS)) or "no notable flags"
    return f"{cpu_model()} ({flags})"


def committed(budget: str) -> dict[str, dict[str, Any]]:
    """The full budget's records already in benchmarks/results/claims.jsonl, by name: the
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

    loaded = load_run(run_dir)
    cfg, vocab = loaded.cfg, loaded.vocab
    limit = source_limit(cfg.model)
    test = list(decoding_split(cfg.data, "test", vocab))
    dev = list(decoding_split(cfg.data, "dev", vocab))
    result, _ = evaluate_examples(loaded, test, split="test", limit=limit)
    record: dict[str, Any] = {
        "name": spec.name, "family": spec.family, "pair": spec.pair, "seed": spec.seed,
        "claims": sorted(spec.claims), "budget": budget,
        "step": loaded.step,  # the checkpoint measured: the best by dev BLEU
        "trained": json.loads((run_dir / "checkpoints" / "latest.json").read_text())["step"],
        "parameters": result["parameters"],
        **{k: result[k] for k in ("bleu", "chrf", "exact", "bleu_by_length")},
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
        for split, examples in (("test", test), ("dev", dev)):
            report, _ = alignment_report(loaded, examples, choice, limit)
            keep = ("aer", "precision", "recall", "diagonal", "by_offset", "by_phenomenon")
            record[f"alignment_{split}"] = {k: report[k] for k in (*keep, "by_head") if k in report}
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
            "where_output_changes")  # fmt: skip
    return {
        "gold": report.get("gold"),
        "sentences": report["sentences"],
        "diagonal": report.get("diagonal"),
        "random": {k: report["random"][k] for k in ("deletion_auc", "insertion_auc")},
        "methods": {m: {k: r[k] for k in keep if k in r} for m, r in report["methods"].items()},
        # the lab's refinements: scored where the model's output responds to the causes;
        # occlusion by another word of the same slot instead of <unk>
        "where_output_changes": report.get("where_output_changes"),
        "by_replacement": report.get("by_replacement"),
    }


def dev_curve(run_dir: Path) -> list[dict[str, float]]:
    """Dev BLEU and exact match by step, with the training seconds spent to reach it."""
    elapsed, curve = {}, []
    for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("type") == "train":
            elapsed[row["step"]] = row["elapsed"]
        elif row.get("type") == "valid":
            seconds = max((s for k, s in elapsed.items() if k <= row["step"]), default=0.0)
            curve.append({"step": row["step"], "seconds": seconds, "bleu": row["bleu"],
                          "exact": row["exact"]})  # fmt: skip
    return curve


# ---------------------------------------------------------------- baselines without a model


def aligner_baselines(budget: str, pair: str, out: Path) -> dict[str, Any]:
    """C6's baselines on the test split of `pair`: the diagonal (position only), a
    bag-of-words aligner (each target word to the source word it co-occurs with most,
    Dice over the training split, position ignored) and eflomal (full budget; run on all
    splits at once, as unsupervised aligners are; three times, its sampler is not
    seedable). Kept in claims-baselines-PAIR.json (benchmarks/results/ for the full budget,
    committed with the runs' records; OUT for the smoke budget)."""
    from attnmt.alignment.links import alignment_scores, diagonal_alignment
    from attnmt.config import load_config
    from attnmt.data.grammar_corpus import grammar_pairs

    cache = (RESULTS.parent if budget == "full" else out) / f"claims-baselines-{pair}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    cfg = load_config(CONFIG, ["data.corpus=grammar", f"data.grammar_pair={pair}",
                               *BUDGETS[budget]["data"]])  # fmt: skip
    splits = grammar_pairs(cfg.data)
    test = splits["test"]
    sure, possible = [set(p.sure) for p in test], [set(p.possible) for p in test]

    def scored(links) -> dict[str, float]:
        s = alignment_scores(links, sure, possible)
        return {k: round(float(s[k]), 4) for k in ("aer", "precision", "recall")}

    found: dict[str, Any] = {
        "diagonal": scored([diagonal_alignment(len(p.src), len(p.tgt)) for p in test]),
        "bag-of-words": scored(dice_links(splits["train"], test)),
    }
    if BUDGETS[budget]["eflomal"]:
        from attnmt.alignment.aligners import eflomal_links
        from attnmt.alignment.links import symmetrize

        every = [p for name in ("train", "dev", "test") for p in splits[name]]
        runs = []
        for _ in range(3):
            forward, reverse = eflomal_links([p.src for p in every], [p.tgt for p in every])
            start = len(every) - len(test)
            runs.append(scored([symmetrize(f, r) for f, r in
                                zip(forward[start:], reverse[start:], strict=True)]))  # fmt: skip
        found["eflomal"] = {"runs": runs, "aer": [r["aer"] for r in runs]}
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
    from claims_report import figures, tables

    found = committed(budget)
    for s in specs:
        if (out / s.name / "claims.json").is_file():
            found[s.name] = json.loads((out / s.name / "claims.json").read_text())
    records = [found[s.name] for s in specs if s.name in found]
    for r in records:  # records written before runs named their machine: this one's
        r.setdefault("machine", machine())
    pairs = sorted({r["pair"] for r in records if "C6" in r["claims"]})
    baselines = {p: aligner_baselines(budget, p, out) for p in pairs}
    machines = sorted({r["machine"] for r in records}) or [machine()]
    hours = sum(r.get("seconds", 0.0) for r in records) / 3600
    lines = [
        f"Budget `{budget}`: {len(records)} of {len(specs)} runs measured on "
        f"{'; '.join(machines)}, 2 cores, two runs at a time: {hours:.1f} hours of run time "
        "(training and measuring, summed over runs)"
        + (f"; this invocation took {wall / 60:.0f} min." if wall else "."),
        "Each cell: mean ± sd [min–max] (seeds).",
        "",
        *tables(records, baselines),
    ]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", choices=sorted(BUDGETS), default="smoke")
    parser.add_argument("--claims", default=",".join(CLAIMS), help="comma-separated, e.g. C1,C6")
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
