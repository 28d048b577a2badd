"""The tables and figures of `benchmarks/claims.py`: each claim's measures over seeds
(mean ± sd [min–max] (n)) and its verdict, from the runs' records (OUT/NAME/claims.json).

A claim is "reproduced" when every seed of one side beats every seed of the other (the
ranges do not overlap, so the difference exceeds both spreads), "reversed" when that holds
the other way, and "not settled" otherwise: a difference within the seeds' range is
reported as none (McCoy et al. 2020: seeds differ most out of distribution).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

PAIRS = ("en-fr", "en-de", "en-ja")
MIN_SEEDS = 2  # a verdict needs a spread: two seeds a side at least (the plan has 3 or 5)
LENGTHS = ("1-10", "11-20", "21-30", "31-40", "41-50", "51-60")

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


def verdict(
    a: Sequence[float],
    b: Sequence[float],
    *,
    higher_is_better: bool = True,
    baseline: bool = False,
) -> str:
    """Does `a` beat `b`, seed for seed? (the module docstring). A side of models needs 2
    seeds or more to be judged (one seed has no spread: "pending", with where it stands);
    `baseline`: `b` is a fixed baseline (the diagonal: one value, no seeds)."""
    if not a or not b:
        return "not run"
    if not higher_is_better:
        a, b = [-x for x in a], [-x for x in b]
    if len(a) < MIN_SEEDS or (len(b) < MIN_SEEDS and not baseline):
        ahead = statistics.fmean(a) > statistics.fmean(b)
        seeds = min(len(a), len(b) if not baseline else len(a))
        return f"pending ({seeds} seed: {'ahead' if ahead else 'behind'})"
    if min(a) > max(b):
        return "reproduced"
    if max(a) < min(b):
        return "reversed"
    return "not settled"


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


def at_length(label: str) -> Callable[[Record], float | None]:
    """A record's test BLEU in the source-length bucket `label` ("51-60")."""

    def get(row: Record) -> float | None:
        return next((b["bleu"] for b in row["bleu_by_length"] if b["label"] == label), None)

    return get


def aer(split: str, offset: int | None = None) -> Callable[[Record], float]:
    """A record's attention AER (%) on `split`, read at step t + `offset` if given."""

    def get(row: Record) -> float:
        report = row[f"alignment_{split}"]
        if offset is None:
            return 100 * report["aer"]
        return 100 * next(o["aer"] for o in report["by_offset"] if o["offset"] == offset)

    return get


def recall(phenomenon: str) -> Callable[[Record], float]:
    return lambda row: 100 * row["alignment_test"]["by_phenomenon"][phenomenon]["recall"]


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
            for name, r in sorted(self.by_name.items())
            if name.startswith(prefix) and (claim is None or claim in r["claims"])
        ]

    def any(self, claim: str) -> bool:
        return any(claim in r["claims"] for r in self.by_name.values())


def tables(records: Sequence[Record], baselines: dict[str, dict]) -> list[str]:
    """The markdown of every claim measured: its table and its verdicts."""
    found = Records(records)
    out: list[str] = []
    for claim, make in (
        ("C1", c1),
        ("C6", lambda r: c2_c6(r, baselines)),
        ("C3", c3),
        ("C4", c4),
        ("C5", c5),
        ("C7", c7),
        ("C9", c9),
    ):
        if found.any(claim):
            out += [*make(found), ""]
    return out


def c1(found: Records) -> list[str]:
    out = [
        "### C1 The bottleneck: RNNencdec against RNNsearch by source length",
        "",
        "Test BLEU by source length in words (training saw 2–25). *Forced length*: decoded "
        "with the reference's length, so the score is about the words, not about where the "
        "model stops (Newman et al. 2020).",
        "",
        *header("pair", "model", "params", *LENGTHS, "test BLEU", "forced-length BLEU"),
    ]
    verdicts = []
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
            verdicts.append(f"{pair}, {longest} words: **{verdict(a, b)}**")
    return [
        *out,
        "",
        "RNNsearch above RNNencdec on the longest sentences: " + "; ".join(verdicts) + ".",
    ]


def c2_c6(found: Records, baselines: dict[str, dict]) -> list[str]:
    out = [
        "### C2 and C6 Attention as alignment, reordering apart",
        "",
        "RNNsearch's attention (forced decoding of the reference; each target word linked to "
        "its most-attended source word) against the exact links: AER (%) with sure and "
        "possible links on dev (lengths as in training) and test (to 60 words), the test AER "
        "read one step late (t+1), and sure-link recall (%) on the crossing links (the "
        "reordered spans) and on the rest. Baselines on the same test sentences: the "
        "diagonal (position only), bag-of-words (Dice co-occurrence, position ignored) and "
        "eflomal (3 runs; it learns from all splits at once).",
        "",
        *header(
            "pair", "AER dev", "AER test", "AER test, t+1", "recall crossing", "recall rest",
            "diagonal", "bag-of-words", "eflomal",
        ),
    ]  # fmt: skip
    reorder, aligned = [], []
    for pair in PAIRS:
        rows = found.runs(f"rnnsearch-{pair}-", "C6")
        if not rows:
            continue
        base = baselines.get(pair, {})
        test = values(rows, aer("test"))
        crossing, rest = values(rows, recall("crossing")), values(rows, recall("not crossing"))
        eflomal = [100 * a for a in base.get("eflomal", {}).get("aer", [])]
        diagonal = [100 * base["diagonal"]["aer"]] if "diagonal" in base else []
        bag = [100 * base["bag-of-words"]["aer"]] if "bag-of-words" in base else []
        out.append(
            row_of([
                pair, fmt(values(rows, aer("dev"))), fmt(test), fmt(values(rows, aer("test", 1))),
                fmt(crossing), fmt(rest), fmt(diagonal), fmt(bag), fmt(eflomal),
            ])
        )  # fmt: skip
        reorder.append(f"{pair}: **{verdict(crossing, rest)}**")
        versus = [("the diagonal", diagonal), ("bag-of-words", bag), ("eflomal", eflomal)]
        aligned.append(
            f"{pair}: "
            + ", ".join(
                f"below {name}: **{verdict(test, other, higher_is_better=False, baseline=True)}**"
                for name, other in versus
                if other
            )
        )
    return [
        *out,
        "",
        "C2, crossing links recalled better than the rest: " + "; ".join(reorder) + ".",
        "",
        "C6, attention's test AER: " + "; ".join(aligned) + ".",
    ]


def c3(found: Records) -> list[str]:
    from claims import LUONG

    rows = {v: found.runs(f"luong-{v}-en-fr-", "C3") for v in LUONG}
    out = [
        "### C3 Luong's choices (en-fr)",
        "",
        *header("variant", "test BLEU", "exact %", "51–60 BLEU", "test AER %"),
    ]
    for variant, runs in rows.items():
        out.append(
            row_of([
                variant, fmt(values(runs, lambda r: r["bleu"])),
                fmt(values(runs, lambda r: r["exact"])), fmt(values(runs, at_length("51-60"))),
                fmt(values(runs, aer("test"))),
            ])
        )  # fmt: skip
    bleu = {v: values(runs, lambda r: r["bleu"]) for v, runs in rows.items()}
    pairs = [
        ("local-p above global", "local-p-general", "global-general"),
        ("local-m above global", "local-m-general", "global-general"),
        ("dot above concat", "global-dot", "global-concat"),
        ("general above concat", "global-general", "global-concat"),
        ("location below general", "global-general", "global-location"),
        ("input feeding helps", "global-general", "global-general-nofeed"),
    ]
    said = "; ".join(f"{what}: **{verdict(bleu[a], bleu[b])}**" for what, a, b in pairs)
    return [*out, "", f"Test BLEU, Luong et al.'s findings: {said}."]


def c4(found: Records) -> list[str]:
    from claims import HEADS

    out = [
        "### C4 One head or many (en-fr, 2 layers, width 128)",
        "",
        "The head that aligns best is chosen on the test AER of each seed's cross-attention "
        "(layer, head); *mean*: the mean of a layer's heads.",
        "",
        *header(
            "heads", "test BLEU", "exact %", "best (layer, head)", "its AER %",
            "AER last layer, mean %",
        ),
    ]  # fmt: skip
    bleu = {}
    for heads in HEADS:
        runs = found.runs(f"transformer-h{heads}-en-fr-", "C4")
        best = [min(r["alignment_test"]["by_head"], key=lambda x: x["aer"]) for r in runs]
        mean_last = values(runs, lambda r: 100 * _means(r)[-1]["aer"])
        bleu[heads] = values(runs, lambda r: r["bleu"])
        out.append(
            row_of([
                heads, fmt(bleu[heads]), fmt(values(runs, lambda r: r["exact"])),
                ", ".join(f"({b['layer']}, {b['head']})" for b in best) or "—",
                fmt([100 * b["aer"] for b in best]), fmt(mean_last),
            ])
        )  # fmt: skip
    said = "; ".join(f"{h} heads: **{verdict(bleu[h], bleu[1])}**" for h in HEADS[1:])
    return [*out, "", f"Several heads above one (test BLEU): {said}."]


def _means(row: Record) -> list[Record]:
    """The by-head rows of a Transformer record that average each layer's heads."""
    return [x for x in row["alignment_test"]["by_head"] if x["head"] == "mean"]


def c5(found: Records) -> list[str]:
    soft, hard = found.runs("rnnsearch-en-fr-", "C5"), found.runs("hard-en-fr-", "C5")
    final = values(soft, lambda r: r["curve"][-1]["bleu"])
    target = 0.9 * statistics.fmean(final) if final else float("inf")
    out = [
        "### C5 Soft against hard attention (en-fr, RNNsearch)",
        "",
        f"Hard: REINFORCE (Xu et al. 2015 §4.1). *Steps*: the first validation at which a "
        f"seed's dev BLEU reached 90% of soft's final mean ({target:.1f}).",
        "",
        *header("mode", "test BLEU", "exact %", "mean dev BLEU by step", "steps"),
    ]
    for mode, runs in (("soft", soft), ("hard", hard)):
        steps = sorted({c["step"] for r in runs for c in r["curve"]})
        curve = [
            (s, statistics.fmean([c["bleu"] for r in runs for c in r["curve"] if c["step"] == s]))
            for s in steps
        ]
        reached = [next((c["step"] for c in r["curve"] if c["bleu"] >= target), None) for r in runs]
        out.append(
            row_of([
                mode, fmt(values(runs, lambda r: r["bleu"])),
                fmt(values(runs, lambda r: r["exact"])),
                ", ".join(f"{s}: {b:.1f}" for s, b in curve),
                ", ".join("never" if s is None else str(s) for s in reached),
            ])
        )  # fmt: skip
    bleu = [values(runs, lambda r: r["bleu"]) for runs in (soft, hard)]
    return [*out, "", f"Soft above hard (test BLEU): **{verdict(*bleu)}**."]


def c7(found: Records) -> list[str]:
    out = [
        "### C7 The Transformer against RNNsearch at the same training time",
        "",
        "Dev BLEU (200 sentences, greedy) at each run's last validation within the seconds "
        "of training that every run of the pair reached (one thread each, two runs at a "
        "time); test BLEU after the full step budget.",
        "",
        *header(
            "pair", "seconds", "RNNsearch dev", "Transformer dev", "RNNsearch test",
            "Transformer test",
        ),
    ]  # fmt: skip
    said = []
    for pair in PAIRS:
        rnn, tf = (
            found.runs(f"rnnsearch-{pair}-", "C7"),
            found.runs(f"transformer-h4-{pair}-", "C7"),
        )
        if not rnn or not tf:
            continue
        budget = min(r["curve"][-1]["seconds"] for r in rnn + tf)

        def at_time(row: Record, budget: float = budget) -> float | None:
            reached = [c for c in row["curve"] if c["seconds"] <= budget + 1e-9]
            return reached[-1]["bleu"] if reached else None

        dev = [values(rnn, at_time), values(tf, at_time)]
        test = [values(runs, lambda r: r["bleu"]) for runs in (rnn, tf)]
        out.append(
            row_of([pair, f"{budget:.0f}", fmt(dev[0]), fmt(dev[1]), fmt(test[0]), fmt(test[1])])
        )
        said.append(f"{pair}: **{verdict(dev[1], dev[0])}**")
    return [
        *out,
        "",
        "The Transformer above RNNsearch at equal time (dev BLEU): " + "; ".join(said) + ".",
    ]


def c9(found: Records) -> list[str]:
    from claims import EXPLAIN

    runs = [r for r in found.runs("rnnsearch-en-fr-", "C9") if "explanations" in r]
    out = [
        "### C9 Which explanation tells the truth (en-fr RNNsearch, dev sentences)",
        "",
        "AER (%) against the exact causes of each target word (the source words whose "
        "same-category substitution changes it), on every target word and *where the model "
        "responds*: only the target words whose own greedy output changes when one of their "
        "causes is substituted (one substitute per source word, on the sentences the model "
        "translates exactly). Deletion area: mean log p per reference token as source words "
        "are taken out in the method's order (lower is better), by <unk> and by *replacement* "
        "with another word of the same slot (the sentence stays in the language), each beside "
        "a random order's.",
        "",
        *header(
            "method",
            "AER vs causes %",
            "where the model responds %",
            "deletion AUC",
            "below random on every seed",
            "deletion AUC, replacement",
            "below random on every seed",
        ),
    ]

    def method(name: str, key: str) -> Callable[[Record], float]:
        return lambda r: r["explanations"]["methods"][name][key]

    def replaced(name: str) -> Callable[[Record], float]:
        return lambda r: r["explanations"]["by_replacement"][name]["deletion_auc"]

    def below_on_every_seed(get: Callable[[Record], float], baseline) -> str:
        pairs = [(get(r), baseline(r)) for r in runs if values([r], get) and values([r], baseline)]
        return "yes" if pairs and all(x < y for x, y in pairs) else ("no" if pairs else "—")

    def probes_of(r: Record) -> dict:
        return r["explanations"]["where_output_changes"]

    def random_unk(r: Record) -> float:
        return r["explanations"]["random"]["deletion_auc"]

    for name in EXPLAIN:
        responds = values(runs, lambda r, n=name: method(n, "where_output_changes")(r)["aer"])
        out.append(
            row_of([
                name, fmt(values(runs, method(name, "aer"))), fmt(responds),
                fmt(values(runs, method(name, "deletion_auc")), 3),
                below_on_every_seed(method(name, "deletion_auc"), random_unk),
                fmt(values(runs, replaced(name)), 3),
                below_on_every_seed(replaced(name), replaced("random")),
            ])
        )  # fmt: skip
    probed = values(runs, lambda r: probes_of(r)["words"])
    of = values(runs, lambda r: probes_of(r)["target_words"])
    out.append(
        row_of([
            "diagonal; random order",
            fmt(values(runs, lambda r: r["explanations"]["diagonal"]["aer"])),
            fmt(values(runs, lambda r: probes_of(r)["diagonal"]["aer"])),
            fmt(values(runs, random_unk), 3), "", fmt(values(runs, replaced("random")), 3), "",
        ])
    )  # fmt: skip
    if probed:
        out += ["", f"Where the model responds: {fmt(probed)} target words of "
                f"{fmt(of)} in the sentences it translates exactly."]  # fmt: skip
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
