"""The tables, verdicts, paragraphs and figures of `benchmarks/claims.py`: each claim's
measures over seeds (mean ± sd [min–max] (n)), its verdicts by the one rule of
`benchmarks/verdicts.py` (with the difference, its bootstrap interval, the effect size
and p), and the words around them, all written from the runs' records
(OUT/NAME/claims.json), so that no number on the page is typed by hand.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from verdicts import FIXED, PAIRED, Ledger, Verdict

PAIRS = ("en-fr", "en-de", "en-ja")
LENGTHS = ("1-10", "11-20", "21-30", "31-40", "41-50", "51-60")
TRAINED_WORDS = "2–25"  # configs/grammar.yaml's training and dev lengths
LEARNED = 50.0  # C3's common threshold: the first validation at dev BLEU ≥ this

Record = dict[str, Any]


def spread(values: Sequence[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def fmt(values: Sequence[float], digits: int = 1) -> str:
    """'mean ± sd [min–max] (n)', or '—' for no values."""
    if not values:
        return "—"
    s = spread(values)
    d = digits
    return f"{s['mean']:.{d}f} ± {s['sd']:.{d}f} [{s['min']:.{d}f}–{s['max']:.{d}f}] ({s['n']})"


def mean(values: Sequence[float], digits: int = 1) -> str:
    return f"{statistics.fmean(values):.{digits}f}" if values else "—"


def values(rows: Sequence[Record], get: Callable[[Record], float | None]) -> list[float]:
    """`get(row)` of each row that has it (a run measured without it is left out)."""
    found = []
    for row in rows:
        try:
            value = get(row)
        except (KeyError, TypeError, IndexError, StopIteration):
            continue
        if value is not None:
            found.append(value)
    return found


def paired(
    rows: Sequence[Record], a: Callable[[Record], float], b: Callable[[Record], float]
) -> tuple[list[float], list[float]]:
    """(a(row), b(row)) of each row that has both, as two lists in seed order."""
    both = [(x, y) for r in rows for x, y in [(values([r], a), values([r], b))] if x and y]
    return [x[0] for x, _ in both], [y[0] for _, y in both]


def at_length(label: str, forced: bool = False) -> Callable[[Record], float | None]:
    """A record's test BLEU in the source-length bucket `label` ("51-60")."""

    def get(row: Record) -> float | None:
        rows = row["forced_length"]["bleu_by_length"] if forced else row["bleu_by_length"]
        return next((b["bleu"] for b in rows if b["label"] == label), None)

    return get


def aer(split: str, offset: int | None = None) -> Callable[[Record], float]:
    """A record's attention AER (%) on `split`, read at step t + `offset` if given."""

    def get(row: Record) -> float:
        report = row[f"alignment_{split}"]
        if offset is None:
            return 100 * report["aer"]
        return 100 * next(o["aer"] for o in report["by_offset"] if o["offset"] == offset)

    return get


def recall(phenomenon: str, where: str = "test") -> Callable[[Record], float]:
    """Sure-link recall (%) on `phenomenon` links, read from `alignment_WHERE` (test, dev,
    exact_test, exact_dev)."""
    return lambda row: 100 * row[f"alignment_{where}"]["by_phenomenon"][phenomenon]["recall"]


def row_of(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def header(*names: str) -> list[str]:
    return [row_of(names), row_of(["---"] * len(names))]


class Records:
    """The records by name, selected by name prefix and claim."""

    def __init__(self, records: Sequence[Record]):
        self.by_name = {r["name"]: r for r in records}

    def runs(self, prefix: str, claim: str | None = None) -> list[Record]:
        return [
            r
            for name, r in sorted(self.by_name.items(), key=lambda item: _by_seed(item[0]))
            if name.startswith(prefix) and (claim is None or claim in r["claims"])
        ]

    def any(self, claim: str) -> bool:
        return any(claim in r["claims"] for r in self.by_name.values())


def _by_seed(name: str) -> tuple[str, int]:
    stem, _, seed = name.rpartition("-s")
    return (stem, int(seed)) if seed.isdigit() else (name, 0)


def setup(
    records: Sequence[Record],
    specs: Sequence[Any],
    budget: dict[str, Any],
    name: str,
    wall: float | None,
) -> list[str]:
    """The opening paragraph: what was run, where, for how long, with how many seeds."""
    from claims import MAIN

    machines = sorted({r["machine"] for r in records}) or ["—"]
    hours = sum(r.get("seconds", 0.0) for r in records) / 3600
    timed = [r for r in records if "began" in r]
    clock = ""
    if timed:
        span = (max(r["ended"] for r in timed) - min(r["began"] for r in timed)) / 3600
        clock = (f"; {len(timed)} of them from the first start to the last end: {span:.1f} "
                 "hours of wall clock, with whatever else shared the cores")  # fmt: skip
    main = [s for s in specs if set(s.claims) & set(MAIN)]
    done = {r["name"] for r in records}
    size = {}
    for family in ("rnnsearch", "rnnencdec", "luong", "transformer", "hard"):
        found = [r for r in records if r["family"] == family and r["pair"] == "en-fr"]
        size[family] = f"{found[0]['parameters']:,}" if found else "not run yet"
    tokens = next((o.split("=")[1] for o in budget["data"] if o.startswith("data.batch_tokens")),
                  "2,000")  # fmt: skip
    return [
        f"Budget `{name}`: {len(records)} of {len(specs)} runs measured "
        f"({sum(s.name in done for s in main)} of {len(main)} in the main plan, the rest "
        f"C3's own plan) on {'; '.join(machines)}, "
        f"one thread each, two runs at a time: {hours:.1f} hours of run time summed over runs "
        f"(training and measuring), about {hours / 2:.1f} hours of wall clock on 2 cores{clock}"
        + (f"; this invocation took {wall / 60:.0f} min." if wall else "."),
        "",
        f"The models, on en-fr: RNNsearch (configs/grammar.yaml, {size['rnnsearch']} "
        f"parameters), RNNencdec ({size['rnnencdec']}), Luong's attentional LSTM "
        f"({size['luong']}), a 2-layer Transformer ({size['transformer']}, "
        "whatever its heads), RNNsearch with hard attention (REINFORCE, "
        f"{size['hard']}). Each trains {budget['steps']:,} updates of {tokens}-token batches in "
        f"fp32 (Luong's to equal learning, C3) with {budget['seeds']} seeds, and is measured "
        f"at its best checkpoint by dev BLEU ({budget['valid_sentences']} sentences, every "
        f"{budget['validate_every']} updates) with greedy decoding.",
        "",
        "Each cell: mean ± sd [min–max] (seeds).",
    ]


def tables(
    records: Sequence[Record],
    baselines: dict[str, dict],
    step_times: dict[str, Any] | None = None,
    previous: list[dict[str, Any]] | None = None,
) -> tuple[list[str], Ledger]:
    """The markdown of every claim measured: the rule and its error rate over this table,
    each claim's table, verdicts and paragraphs, the findings in words, and what changed
    since `previous` (`previous_verdicts` of an older table); and the ledger of verdicts."""
    found, ledger = Records(records), Ledger()
    out: list[str] = []
    for claim, make in (
        ("C1", c1),
        ("C2", c2),
        ("C6", lambda r, led: c6(r, led, baselines)),
        ("C3", c3),
        ("C4", c4),
        ("C5", c5),
        ("C7", lambda r, led: c7(r, led, step_times or {})),
        ("C9", c9),
    ):
        if found.any(claim) or claim == "C3":
            out += [*make(found, ledger), ""]
    opening = ["### The rule and its error rate", "", *ledger.summary(), ""]
    closing = ["### What the table finds", "", *findings(ledger)]
    if previous:
        closing += ["", *changes(previous, ledger)]
    return [*opening, *out, *closing], ledger


def verdict_lines(ledger: Ledger, verdicts: Sequence[Verdict]) -> list[str]:
    """A section's verdicts as a table (those with nothing measured left out)."""
    shown = [v for v in verdicts if v.word != "not run"]
    return ["", *ledger.table(shown)] if shown else []


# ---------------------------------------------------------------- the claims


def c1(found: Records, ledger: Ledger) -> list[str]:
    out = [
        "### C1 The bottleneck: RNNencdec against RNNsearch by source length",
        "",
        f"Test BLEU by source length in words (training saw {TRAINED_WORDS}). *Forced "
        "length*: decoded with the reference's length, so the score is about the words, not "
        "about where the model stops (Newman et al. 2020).",
        "",
        *header("pair", "model", "params", *LENGTHS, "test BLEU", "forced-length BLEU"),
    ]
    verdicts, forcing = [], []
    for pair in PAIRS:
        for family in ("rnnencdec", "rnnsearch"):
            rows = found.runs(f"{family}-{pair}-", "C1")
            if rows:
                cells = [fmt(values(rows, at_length(label))) for label in LENGTHS]
                forced = fmt(values(rows, lambda r: r["forced_length"]["bleu"]))
                bleu = fmt(values(rows, lambda r: r["bleu"]))
                out.append(
                    row_of([pair, family, f"{rows[0]['parameters']:,}", *cells, bleu, forced])
                )
        search = found.runs(f"rnnsearch-{pair}-", "C1")
        encdec = found.runs(f"rnnencdec-{pair}-", "C1")
        if search and encdec:
            longest = search[0]["bleu_by_length"][-1]["label"]
            a, b = values(search, at_length(longest)), values(encdec, at_length(longest))
            verdicts.append(ledger(f"C1 {pair}: RNNsearch above RNNencdec, {longest} words", a, b))
            a, b = (values(rows, at_length(longest, forced=True)) for rows in (search, encdec))
            verdicts.append(ledger(f"C1 {pair}: the same with the reference's length forced", a, b))
        if search:
            free, forced = (values(search, lambda r, f=f: (r["forced_length"] if f else r)["bleu"])
                            for f in (False, True))  # fmt: skip
            if free and forced:
                forcing.append(
                    f"{pair} from {mean(free)} to {mean(forced)} (seeds {min(free):.1f}–"
                    f"{max(free):.1f} to {min(forced):.1f}–{max(forced):.1f})"
                )
    out += verdict_lines(ledger, verdicts)
    if forcing:
        out += ["", "Forcing the reference's length moves RNNsearch's mean test BLEU on "
                + "; ".join(forcing) + "."]  # fmt: skip
    return out


C2_WHERE = (  # where C2 is read: (record key, what it is, judged)
    ("dev", f"dev, {TRAINED_WORDS} words (the lengths trained on)", True),
    ("exact_dev", "dev sentences it translates exactly", True),
    ("exact_test", "test sentences it translates exactly", True),
    ("test", "test, 2–60 words (longer than trained: length mixed in)", False),
)


def sentences_read(report: dict[str, Any]) -> int:
    """How many sentences an alignment record was read on (a split's: its diagonal's)."""
    return report["sentences"] if "sentences" in report else report["diagonal"]["sentences"]


def c2(found: Records, ledger: Ledger) -> list[str]:
    out = [
        "### C2 Reordering: crossing links against the rest, where the model has learned",
        "",
        "RNNsearch's attention (forced decoding of the reference; each target word linked to "
        "its most-attended source word): sure-link recall (%) on the crossing links (the "
        "reordered spans) and on the rest, read on the lengths the models were trained on, "
        "on the sentences each model translates exactly (greedy; its words are then the "
        "reference's), and on the whole test split, whose longer sentences mix length "
        "generalisation into the claim (shown, not judged). *Sentences*: how many each seed "
        "is read on (mean).",
        "",
        *header("pair", "read on", "sentences", "recall crossing", "recall rest", "AER"),
    ]
    verdicts = []
    for pair in PAIRS:
        rows = found.runs(f"rnnsearch-{pair}-", "C2")
        for where, what, judged in C2_WHERE:
            crossing, rest = paired(rows, recall("crossing", where), recall("not crossing", where))
            if not crossing:
                continue
            count = values(rows, lambda r, w=where: sentences_read(r[f"alignment_{w}"]))
            out.append(row_of([pair, what, mean(count, 0), fmt(crossing), fmt(rest),
                               fmt(values(rows, aer(where)))]))  # fmt: skip
            if judged:
                verdicts.append(ledger(f"C2 {pair}, {what}: crossing recalled above the rest",
                                       crossing, rest, kind=PAIRED, unit=" points"))  # fmt: skip
    return out + verdict_lines(ledger, verdicts)


def c6(found: Records, ledger: Ledger, baselines: dict[str, dict]) -> list[str]:
    out = [
        "### C6 Attention as alignment, against aligners",
        "",
        "RNNsearch's attention AER (%) against the exact sure and possible links, on dev "
        f"({TRAINED_WORDS} words, as trained) and test (2–60 words), the test AER read one "
        "step late (t+1), beside the diagonal (position only), a bag-of-words aligner (Dice "
        "co-occurrence over the training split, position ignored; both deterministic: one "
        "number each) and eflomal (5 runs, its sampler is not seedable; it learns from all "
        "splits at once) on the same sentences.",
        "",
        *header(
            "pair", "split", "attention", "attention, t+1", "diagonal", "bag-of-words", "eflomal"
        ),
    ]
    verdicts = []
    for pair in PAIRS:
        rows = found.runs(f"rnnsearch-{pair}-", "C6")
        if not rows:
            continue
        for split in ("dev", "test"):
            base = baselines.get(pair, {}).get(split, {})
            attention = values(rows, aer(split))
            eflomal = [100 * a for a in base.get("eflomal", {}).get("aer", [])]
            fixed = {n: 100 * base[n]["aer"] for n in ("diagonal", "bag-of-words") if n in base}
            out.append(row_of([
                pair, split, fmt(attention), fmt(values(rows, aer(split, 1))),
                *(f"{fixed[n]:.1f}" if n in fixed else "—" for n in ("diagonal", "bag-of-words")),
                fmt(eflomal),
            ]))  # fmt: skip
            for name, number in fixed.items():
                verdicts.append(ledger(f"C6 {pair} {split}: attention's AER below {name}'s",
                                       attention, number, kind=FIXED, higher_is_better=False,
                                       unit=" points"))  # fmt: skip
            if eflomal:
                verdicts.append(ledger(f"C6 {pair} {split}: attention's AER below eflomal's",
                                       attention, eflomal, higher_is_better=False,
                                       unit=" points"))  # fmt: skip
    return out + verdict_lines(ledger, verdicts)


def reached(row: Record, threshold: float) -> float | None:
    """The first validation step at which dev BLEU reached `threshold` (None: never)."""
    return next((c["step"] for c in row["curve"] if c["bleu"] >= threshold), None)


def c3(found: Records, ledger: Ledger) -> list[str]:
    from claims import BUDGETS, LUONG

    rows = {v: found.runs(f"luong-{v}-en-fr-", "C3") for v in LUONG}
    b = BUDGETS["full"]
    out = [
        "### C3 Luong's choices (en-fr), at equal learning",
        "",
        f"Each variant trains until its dev BLEU has not improved for {b['luong_patience']} "
        f"validations ({b['luong_patience'] * b['validate_every']:,} updates), at most "
        f"{b['luong_steps']:,}, and is measured at its best checkpoint: *ends better* is "
        f"read on test BLEU there; *learns faster* on the updates it needed to first reach "
        f"dev BLEU {LEARNED:.0f} (a seed that never did counts as its last update plus one "
        "validation, and the column says how many never did).",
        "",
    ]
    if not any(rows.values()):
        return [
            *out,
            "Not measured yet: Luong's variants to equal learning are their own plan "
            "(`python benchmarks/claims.py --budget full --claims C3 --jobs 2`; 35 runs of up "
            f"to {b['luong_steps']:,} updates). The 1,500-update comparison of earlier tables "
            "read models that had not learned to translate (exact match 0–10%) and is not "
            "repeated.",
        ]
    out += header("variant", "updates trained", "best at update", "dev BLEU", "test BLEU",
                  "exact %", f"updates to dev BLEU {LEARNED:.0f}", "never reached")  # fmt: skip

    def to_learn(r: Record) -> float:
        step = reached(r, LEARNED)
        return step if step is not None else r["trained"] + b["validate_every"]

    for variant, runs in rows.items():
        never = sum(reached(r, LEARNED) is None for r in runs)
        out.append(row_of([
            variant,
            fmt(values(runs, lambda r: r["trained"]), 0),
            fmt(values(runs, lambda r: r["step"]), 0),
            fmt(values(runs, lambda r: r["dev"]["bleu"])),
            fmt(values(runs, lambda r: r["bleu"])), fmt(values(runs, lambda r: r["exact"])),
            fmt(values(runs, to_learn), 0), f"{never} of {len(runs)}",
        ]))  # fmt: skip
    pairs = [
        ("local-p above global", "local-p-general", "global-general"),
        ("local-m above global", "local-m-general", "global-general"),
        ("dot above concat", "global-dot", "global-concat"),
        ("general above concat", "global-general", "global-concat"),
        ("location below general", "global-general", "global-location"),
        ("input feeding helps", "global-general", "global-general-nofeed"),
    ]
    verdicts = []
    for what, a, other in pairs:
        bleu = [values(rows[v], lambda r: r["bleu"]) for v in (a, other)]
        verdicts.append(ledger(f"C3 {what}: ends better (test BLEU)", *bleu))
        steps = [values(rows[v], to_learn) for v in (a, other)]
        verdicts.append(ledger(f"C3 {what}: learns faster (updates to dev BLEU {LEARNED:.0f})",
                               *steps, higher_is_better=False, unit=" updates",
                               digits=0))  # fmt: skip
    return out + verdict_lines(ledger, verdicts)


def c4(found: Records, ledger: Ledger) -> list[str]:
    from claims import HEADS

    out = [
        "### C4 One head or many (en-fr, 2 layers, width 128)",
        "",
        "Test BLEU (2–60 words) and dev BLEU (all 500 dev sentences, greedy: the lengths "
        "trained on). The head that aligns best is chosen on the test AER of each seed's "
        "cross-attention (layer, head); *mean*: the mean of a layer's heads.",
        "",
        *header(
            "heads", "test BLEU", "dev BLEU", "exact %", "best (layer, head)", "its AER %",
            "AER last layer, mean %",
        ),
    ]  # fmt: skip
    test, dev = {}, {}
    for heads in HEADS:
        runs = found.runs(f"transformer-h{heads}-en-fr-", "C4")
        best = [min(r["alignment_test"]["by_head"], key=lambda x: x["aer"]) for r in runs]
        mean_last = values(runs, lambda r: 100 * _means(r)[-1]["aer"])
        test[heads] = values(runs, lambda r: r["bleu"])
        dev[heads] = values(runs, lambda r: r["dev"]["bleu"])
        out.append(
            row_of([
                heads, fmt(test[heads]), fmt(dev[heads]), fmt(values(runs, lambda r: r["exact"])),
                ", ".join(f"({b['layer']}, {b['head']})" for b in best) or "—",
                fmt([100 * b["aer"] for b in best]), fmt(mean_last),
            ])
        )  # fmt: skip
    verdicts = []
    for h in HEADS[1:]:
        verdicts.append(ledger(f"C4 {h} heads above one (test BLEU)", test[h], test[1]))
        verdicts.append(ledger(f"C4 {h} heads above one (dev BLEU)", dev[h], dev[1]))
    return out + verdict_lines(ledger, verdicts)


def _means(row: Record) -> list[Record]:
    """The by-head rows of a Transformer record that average each layer's heads."""
    return [x for x in row["alignment_test"]["by_head"] if x["head"] == "mean"]


def c5(found: Records, ledger: Ledger) -> list[str]:
    soft, hard = found.runs("rnnsearch-en-fr-", "C5"), found.runs("hard-en-fr-", "C5")
    final = values(soft, lambda r: r["curve"][-1]["bleu"])
    target = 0.9 * statistics.fmean(final) if final else float("inf")
    out = [
        "### C5 Soft against hard attention (en-fr, RNNsearch)",
        "",
        f"Hard: REINFORCE (Xu et al. 2015 §4.1). *Steps*: the first validation at which a "
        f"seed's dev BLEU reached 90% of soft's final mean ({target:.1f}).",
        "",
        *header("mode", "test BLEU", "dev BLEU", "exact %", "mean dev BLEU by step", "steps"),
    ]
    for mode, runs in (("soft", soft), ("hard", hard)):
        steps = sorted({c["step"] for r in runs for c in r["curve"]})
        curve = [
            (s, statistics.fmean([c["bleu"] for r in runs for c in r["curve"] if c["step"] == s]))
            for s in steps
        ]
        out.append(
            row_of([
                mode, fmt(values(runs, lambda r: r["bleu"])),
                fmt(values(runs, lambda r: r["dev"]["bleu"])),
                fmt(values(runs, lambda r: r["exact"])),
                ", ".join(f"{s}: {b:.1f}" for s, b in curve),
                ", ".join("never" if (s := reached(r, target)) is None else str(s) for r in runs),
            ])
        )  # fmt: skip
    verdicts = [
        ledger(f"C5 soft above hard ({which})", *(values(runs, get) for runs in (soft, hard)))
        for which, get in (("test BLEU", lambda r: r["bleu"]),
                           ("dev BLEU", lambda r: r["dev"]["bleu"]))
    ]  # fmt: skip
    return out + verdict_lines(ledger, verdicts)


def c7(found: Records, ledger: Ledger, step_times: dict[str, Any]) -> list[str]:
    models = step_times.get("models", {})
    out = [
        "### C7 The Transformer against RNNsearch at the same training time",
        "",
        "Dev BLEU (200 sentences, greedy, every 250 updates) at equal updates (the last, "
        "1,500) and at equal seconds. Seconds are updates × each model's seconds per update, "
        "measured with the model alone on one thread (`python benchmarks/claims.py --budget "
        f"full --step-times`, on {step_times.get('machine', 'this machine')}), not the wall "
        "time of runs that shared the machine; the budget is the time the faster model "
        "needs for its 1,500 updates (both reach it), and each model is read at its last "
        "validation within it.",
        "",
        *header(
            "pair",
            "s an update: RNNsearch, Transformer",
            "budget (s)",
            "RNNsearch dev at 1,500",
            "Transformer dev at 1,500",
            "RNNsearch dev at budget",
            "Transformer dev at budget",
        ),
    ]
    verdicts = []
    for pair in PAIRS:
        rnn, tf = (
            found.runs(f"rnnsearch-{pair}-", "C7"),
            found.runs(f"transformer-h4-{pair}-", "C7"),
        )
        if not rnn or not tf:
            continue
        last = [values(runs, lambda r: r["curve"][-1]["bleu"]) for runs in (rnn, tf)]
        verdicts.append(ledger(f"C7 {pair}: the Transformer above RNNsearch at equal updates",
                               last[1], last[0]))  # fmt: skip
        cost = [models.get(f"{name}-{pair}", {}).get("seconds_per_update")
                for name in ("rnnsearch", "transformer-h4")]  # fmt: skip
        if None in cost:
            out.append(row_of([pair, "not measured", "—", fmt(last[0]), fmt(last[1]), "—", "—"]))
            continue
        budget = min(cost) * min(r["curve"][-1]["step"] for r in rnn + tf)

        def at_time(row: Record, per_update: float, budget: float = budget) -> float | None:
            within = [c for c in row["curve"] if c["step"] * per_update <= budget + 1e-9]
            return within[-1]["bleu"] if within else None

        timed = [
            values(runs, lambda r, c=c: at_time(r, c))
            for runs, c in zip((rnn, tf), cost, strict=True)
        ]
        out.append(row_of([pair, f"{cost[0]:.3f}, {cost[1]:.3f}", f"{budget:.0f}", fmt(last[0]),
                           fmt(last[1]), fmt(timed[0]), fmt(timed[1])]))  # fmt: skip
        verdicts.append(ledger(f"C7 {pair}: the Transformer above RNNsearch at equal seconds",
                               timed[1], timed[0]))  # fmt: skip
    return out + verdict_lines(ledger, verdicts)


def c9(found: Records, ledger: Ledger) -> list[str]:
    from claims import EXPLAIN

    runs = [r for r in found.runs("rnnsearch-en-fr-", "C9") if "explanations" in r]
    floor = values(runs, lambda r: r["explanations"]["one_link_floor"]["aer"])
    out = [
        "### C9 Which explanation tells the truth (en-fr RNNsearch, dev sentences)",
        "",
        "AER (%) against the exact causes of each target word (the source words whose "
        "substitution by another word of the same shape changes it): *one link* reads each "
        "target word's highest-scoring source word, as attention is read; *top k* takes as "
        "many source words as the word has causes (none for a word without a cause), so "
        "it measures which words, not how many. *Where the model responds*: one link, on "
        "the target words whose own greedy output changes when a cause is substituted. "
        "Deletion area: mean log p per reference token as source words are taken out in "
        "the method's order (lower is better), by <unk> and by *replacement* with another "
        "word of the same slot, beside a random order's.",
        "",
        *header(
            "method",
            "AER one link",
            "AER top k",
            "where the model responds",
            "deletion AUC",
            "deletion AUC, replacement",
        ),
    ]

    def method(name: str, *keys: str) -> Callable[[Record], float]:
        def get(r: Record) -> float:
            value = r["explanations"]["methods"][name]
            for key in keys:
                value = value[key]
            return value

        return get

    def replaced(name: str) -> Callable[[Record], float]:
        return lambda r: r["explanations"]["by_replacement"][name]["deletion_auc"]

    def random_unk(r: Record) -> float:
        return r["explanations"]["random"]["deletion_auc"]

    for name in EXPLAIN:
        out.append(row_of([
            name, fmt(values(runs, method(name, "aer"))),
            fmt(values(runs, method(name, "top_k", "aer"))),
            fmt(values(runs, method(name, "where_output_changes", "aer"))),
            fmt(values(runs, method(name, "deletion_auc")), 3),
            fmt(values(runs, replaced(name)), 3),
        ]))  # fmt: skip
    out.append(row_of([
        "diagonal; random order",
        fmt(values(runs, lambda r: r["explanations"]["diagonal"]["aer"])),
        "—",
        fmt(values(runs, lambda r: r["explanations"]["where_output_changes"]["diagonal"]["aer"])),
        fmt(values(runs, random_unk), 3), fmt(values(runs, replaced("random")), 3),
    ]))  # fmt: skip
    out.append(row_of(["any one-link method: the floor", fmt(floor), "—", "—", "—", "—"]))
    verdicts = []
    for name in EXPLAIN:
        a, b = paired(runs, method(name, "deletion_auc"), random_unk)
        verdicts.append(ledger(f"C9 {name}: deletes faster than a random order (<unk>)", a, b,
                               kind=PAIRED, higher_is_better=False, digits=3))  # fmt: skip
        a, b = paired(runs, replaced(name), replaced("random"))
        verdicts.append(ledger(f"C9 {name}: deletes faster than a random order (replacement)",
                               a, b, kind=PAIRED, higher_is_better=False, digits=3))  # fmt: skip
    for name in EXPLAIN[2:]:
        a, b = paired(runs, method("attention", "top_k", "aer"), method(name, "top_k", "aer"))
        verdicts.append(ledger(f"C9 attention closer to the causes than {name} (AER top k)",
                               a, b, kind=PAIRED, higher_is_better=False,
                               unit=" points"))  # fmt: skip
    if floor:
        words = values(runs, lambda r: r["explanations"]["one_link_floor"]["target_words"])
        without = values(runs, lambda r: r["explanations"]["one_link_floor"]["without_cause"])
        out += ["", f"The floor: of {mean(words, 0)} target words (mean over seeds) "
                f"{mean(without, 0)} have no cause, and some have several, so no method that "
                f"links every target word to one source word can go below {mean(floor)}% AER; "
                "the top-k column has no such floor."]  # fmt: skip
    return out + verdict_lines(ledger, verdicts)


# ---------------------------------------------------------------- findings and changes


def findings(ledger: Ledger) -> list[str]:
    """The verdicts in words, settled first: the paragraph under the table."""
    settled = [v for v in ledger.verdicts if v.word in ("reproduced", "reversed")]
    open_ = [v for v in ledger.verdicts if v.word == "not settled"]
    pending = [v for v in ledger.verdicts if v.word == "pending"]
    out = []
    if settled:
        out.append("**Settled**: " + "; ".join(
            f"{v.claim}: **{v.word}** ({v.difference:+.{v.digits}f}{v.unit}, p {_p(v.p)})"
            for v in settled) + ".")  # fmt: skip
    if open_:
        out.append("**Not settled**: " + "; ".join(f"{v.claim} ({v.lead()}, p {_p(v.p)})"
                                                   for v in open_) + ".")  # fmt: skip
    if pending:
        out.append(f"**Pending** (too few seeds for the rule yet): {len(pending)} comparison(s).")
    return "\n\n".join(out).split("\n") if out else []


def _p(p: float) -> str:
    return "< 0.0001" if p < 0.0001 else f"= {p:.4f}"


def old_rule(v: Verdict) -> str:
    """The rule of the tables before 2026-11-29: every seed of one side beyond every seed
    of the other (against a fixed number, or paired as C9 read it: every seed beyond),
    with two seeds a side at least."""
    if not v.a or (isinstance(v.b, tuple) and not v.b):
        return "not run"
    sign = 1 if v.higher_is_better else -1
    a = [sign * x for x in v.a]
    b = [sign * x for x in v.b] if isinstance(v.b, tuple) else [sign * v.b] * len(a)
    if len(a) < 2 or len(b) < 2:
        return "pending"
    if v.kind == PAIRED or not isinstance(v.b, tuple):
        ahead = [x > y for x, y in zip(a, b, strict=True)]
        behind = [x < y for x, y in zip(a, b, strict=True)]
        return "reproduced" if all(ahead) else "reversed" if all(behind) else "not settled"
    if min(a) > max(b):
        return "reproduced"
    if max(a) < min(b):
        return "reversed"
    return "not settled"


# The previous table (2026-11-27) by today's labels: for each claim, the conditions it was
# judged under where they differ from today's (None: the same comparison).
PREVIOUS_CONDITIONS = {
    "C1": None,
    "C2": "then on the test split (2–60 words) alone, crossing and rest as two sets of seeds",
    "C3": "then at 1,500 updates, before the models translate; now at equal learning",
    "C4": None,
    "C5": None,
    "C6": None,
    "C7": "then at the wall-clock seconds of runs that shared the machine",
    "C9": None,
}
# C7 as the previous table printed it (wall-clock seconds, which its records cannot redo)
PREVIOUS_C7 = {"en-fr": "not settled", "en-de": "not settled", "en-ja": "not settled"}


def printed_before(claim: str) -> bool:
    """Did the previous table judge this comparison (under this label)?"""
    new = ("forced", "dev BLEU", "learns faster", "top k", "updates", "exactly", "dev,", " dev:")
    return not any(word in claim for word in new)


def previous_verdicts(
    records: Sequence[Record], baselines: dict[str, dict]
) -> list[dict[str, Any]]:
    """The comparisons the previous table printed, each under the old rule (as printed)
    and under the one rule on the same records, for `changes` to say why a verdict moved
    (kept in claims-previous-verdicts.json: `claims.py --previous OLD_JSONL BASELINES`)."""
    _, ledger = tables(records, baselines)
    found = Records(records)
    for pair in PAIRS:  # C2 as it was judged: on test, the two recalls as two sets of seeds
        rows = found.runs(f"rnnsearch-{pair}-", "C2")
        crossing, rest = values(rows, recall("crossing")), values(rows, recall("not crossing"))
        ledger(f"C2 {pair}, test, 2–60 words: crossing recalled above the rest", crossing, rest)
    kept = []
    for v in ledger.verdicts:
        if v.word != "not run" and printed_before(v.claim):
            kept.append({"claim": v.claim, "old_rule": old_rule(v), "rule": v.word,
                         "seeds": list(v.seeds),
                         "conditions": PREVIOUS_CONDITIONS[v.claim[:2]]})  # fmt: skip
    for pair, word in PREVIOUS_C7.items():
        kept.append({"claim": f"C7 {pair}: the Transformer above RNNsearch at equal seconds",
                     "old_rule": word, "rule": None, "seeds": [3, 3],
                     "conditions": PREVIOUS_CONDITIONS["C7"]})  # fmt: skip
    return kept


def changes(previous: list[dict[str, Any]], ledger: Ledger) -> list[str]:
    """Each comparison whose verdict differs from the previous table's, with the reasons:
    the rule (the same records judged by the one rule), the conditions of the
    measurement, the seeds (retrained, five a side)."""
    now = {v.claim: v for v in ledger.verdicts}
    rows, waiting = [], 0
    for p in previous:
        v = now.get(p["claim"])
        dropped = v is None and p["claim"].startswith("C2")  # test, 2–60: shown, not judged
        if (v is None or v.word == "not run") and not dropped:
            waiting += 1  # its runs are not measured again yet
            continue
        word = v.word if v is not None else "no longer judged"
        if p["old_rule"] == word:
            continue
        reasons = []
        if p["rule"] is not None and p["rule"] != p["old_rule"]:
            sides = f"{p['seeds'][0]} v {p['seeds'][1] or 'fixed'}"
            reasons.append(f"the rule (the same {sides} seeds give {p['rule']})")
        if p.get("conditions"):
            reasons.append(f"the conditions ({p['conditions']})")
        if v is not None:
            reasons.append(f"the seeds ({v.seeds[0]} v {v.seeds[1] or 'fixed'} now, retrained)")
        elif p["claim"].startswith("C2"):
            reasons.append("test mixes length generalisation in: read on dev and exact now")
        rows.append(row_of([p["claim"], p["old_rule"], word, "; ".join(reasons)]))
    before = {p["claim"] for p in previous}
    new = [v for v in ledger.verdicts if v.claim not in before and v.word != "not run"]
    out = ["#### Verdicts changed since the previous table (2026-11-27, 3 seeds)", ""]
    out += [*header("comparison", "before", "now", "why"), *rows] if rows else ["None."]
    if waiting:
        out += ["", f"{waiting} of the previous table's comparisons are not measured again yet "
                "(their runs are still to come in the plan)."]  # fmt: skip
    if new:
        out += ["", f"{len(new)} comparison(s) the previous table did not make (where they "
                "mean something: dev, exact translations, equal learning, equal measured "
                "seconds, top k)."]  # fmt: skip
    return out


# ---------------------------------------------------------------- figures


def figures(records: Sequence[Record], folder: Path, out: Path) -> list[Path]:
    """One figure per claim measured (PNG): C1 BLEU by length, C2 each pair's typical
    crossing, C3/C4/C9 every seed's value, C5 dev BLEU by step, C7 by seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    found = Records(records)
    written: list[Path] = []

    def save(fig, name: str) -> None:
        path = folder / f"claims-{name}.png"
        fig.savefig(path, dpi=90, bbox_inches="tight")
        plt.close(fig)
        written.append(path)

    if found.any("C1"):
        fig, axes = plt.subplots(1, len(PAIRS), figsize=(12, 3.4), sharey=True)
        for ax, pair in zip(axes, PAIRS, strict=True):
            for family, colour in (("rnnsearch", "tab:blue"), ("rnnencdec", "tab:red")):
                for r in found.runs(f"{family}-{pair}-", "C1"):
                    rows = r["bleu_by_length"]
                    label = family if r["seed"] == 1 else None
                    ax.plot(
                        [b["hi"] for b in rows],
                        [b["bleu"] for b in rows],
                        color=colour,
                        alpha=0.6,
                        label=label,
                    )
            ax.axvline(25, color="grey", lw=0.8, ls=":")  # the longest training sentence
            ax.set_title(pair)
            ax.set_xlabel("source words (upper end of the bucket)")
        axes[0].set_ylabel("test BLEU")
        axes[0].legend()
        save(fig, "c1-length")
    for claim, prefix, title in (
        ("C3", "luong-", "Luong's variants (en-fr)"),
        ("C4", "transformer-h", "heads (en-fr)"),
    ):
        runs = [r for r in found.runs(prefix, claim) if r["pair"] == "en-fr"]
        if runs:
            save(_seed_points(plt, runs, title), claim.lower())
    for claim, prefixes, x in (
        ("C5", ("rnnsearch-en-fr-", "hard-en-fr-"), "step"),
        ("C7", ("rnnsearch-", "transformer-h4-"), "seconds"),
    ):
        runs = [r for p in prefixes for r in found.runs(p, claim)]
        if len({r["family"] for r in runs}) == 2:
            save(_curves(plt, runs, x), claim.lower())
    explained = [r for r in found.runs("rnnsearch-en-fr-", "C9") if "explanations" in r]
    if explained:
        from claims import EXPLAIN

        fig, ax = plt.subplots(figsize=(6, 3.2))
        for x, name in enumerate(EXPLAIN):
            ys = values(explained, lambda r, n=name: r["explanations"]["methods"][n]["aer"])
            ax.scatter([x] * len(ys), ys, color="tab:blue")
        diagonal = values(explained, lambda r: r["explanations"]["diagonal"]["aer"])
        ax.axhline(statistics.fmean(diagonal), color="grey", ls=":", label="diagonal")
        ax.set_xticks(range(len(EXPLAIN)), EXPLAIN, rotation=30, ha="right")
        ax.set_ylabel("AER against the causes (%)")
        ax.legend()
        save(fig, "c9")
    if found.any("C2"):
        written += crossing_heatmaps(found.runs("rnnsearch-", "C2"), folder, out)
    return written


def _seed_points(plt, runs: Sequence[Record], title: str):
    """Each variant's test BLEU, one point a seed and a bar at the mean."""
    variants = sorted({r["name"].rsplit("-s", 1)[0] for r in runs}, key=lambda n: (len(n), n))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(variants)), 3.2))
    for x, variant in enumerate(variants):
        ys = [r["bleu"] for r in runs if r["name"].rsplit("-s", 1)[0] == variant]
        ax.scatter([x] * len(ys), ys, color="tab:blue")
        ax.hlines(statistics.fmean(ys), x - 0.3, x + 0.3, color="black")
    names = [v.replace("-en-fr", "") for v in variants]
    ax.set_xticks(range(len(variants)), names, rotation=30, ha="right")
    ax.set_ylabel("test BLEU (points: seeds; bar: mean)")
    ax.set_title(title)
    return fig


def _curves(plt, runs: Sequence[Record], x: str):
    """Dev BLEU against training steps or seconds, one line a run."""
    colours = {"rnnsearch": "tab:blue", "hard": "tab:orange", "transformer": "tab:green"}
    styles = {"en-fr": "-", "en-de": "--", "en-ja": ":"}
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for r in runs:
        label = f"{r['family']} {r['pair']}" if r["seed"] == 1 else None
        points = r["curve"]
        ax.plot([c[x] for c in points], [c["bleu"] for c in points], color=colours[r["family"]],
                ls=styles[r["pair"]], alpha=0.7, label=label)  # fmt: skip
    ax.set_xlabel("training step" if x == "step" else "training seconds (one thread)")
    ax.set_ylabel("dev BLEU")
    ax.legend(fontsize=7)
    return fig


def crossing_heatmaps(runs: Sequence[Record], folder: Path, out: Path) -> list[Path]:
    """C2: each pair's seed-1 RNNsearch attention on the dev sentence of 8–14 words with the
    most crossing links (a typical reordering, small enough to read)."""
    from attnmt.data.grammar import crossings
    from attnmt.data.grammar_corpus import grammar_pairs
    from attnmt.decoding.runs import load_run
    from attnmt.decoding.scoring import forced_weights
    from attnmt.plotting import heatmap

    written: list[Path] = []
    for r in runs:
        if r["seed"] != 1 or not (out / r["name"]).is_dir():  # not on this machine: kept
            continue
        loaded = load_run(out / r["name"])
        dev = grammar_pairs(loaded.cfg.data)["dev"]
        pair = max(
            [p for p in dev if 8 <= len(p.src) <= 14] or dev, key=lambda p: len(crossings(p))
        )
        vocab = loaded.vocab
        src, tgt = vocab.src.encode(" ".join(pair.src)), vocab.tgt.encode(" ".join(pair.tgt))
        (weights,) = forced_weights(loaded.model, [(src, tgt)])
        matrix = weights.numpy()[: len(tgt), : len(src)]  # without the EOS row and column
        title = f"{r['pair']}: {len(crossings(pair))} crossing links"
        stem = folder / f"claims-c2-{r['pair']}"
        written += heatmap(
            matrix, list(pair.src), list(pair.tgt), stem, formats=("png",), dpi=80, title=title
        )
    return written
