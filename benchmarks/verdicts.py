"""The one rule by which the grammar lab calls a claim settled (docs/results.md, "The
grammar lab"), its error rate, and what is printed beside each verdict.

**The rule.** A claim "A above B" is *reproduced* when a two-sided test of "no difference"
gives p ≤ `ALPHA` = 0.01 with A ahead, *reversed* when it does so with B ahead, and *not
settled* otherwise, which says which side leads and by how much. The test depends on how
the two sides were measured:

- two independent sets of seeds (two models): the exact permutation test of the
  difference of the means, over every way of splitting the pooled seeds into sides of the
  same sizes (Fisher; Pitman). Its smallest p is 2 / C(n + m, n): 2/252 = 0.0079 at five
  seeds a side, 2/20 = 0.1 at three, so below five a side it cannot give a verdict at
  0.01 ("pending");
- one set of seeds read two ways (crossing and other links of the same models; a method
  and the random order on the same models), or against a fixed number (a deterministic
  baseline such as the diagonal): Student's t-test on the per-seed differences. The exact
  sign-flip test would need 8 seeds to reach 0.01 (2/2^8), so the t-test, which assumes
  the differences are normal across seeds, is the one used.

A verdict needs `SEEDS` = 5 seeds a side (on each side that has seeds); with fewer the
comparison is *pending*, with the side that leads so far.

**Its error rate.** Were a claim false (no difference at all), the rule calls it settled
with probability at most 0.01 (the permutation test: exactly 2/252 = 0.0079 at five seeds
a side, with no ties). Over a table of K comparisons, were none real, the expected number
of false verdicts is at most 0.01·K; the report prints K, that number, and the chance of
at least one (1 − 0.99^K, for independent comparisons).

**Beside each verdict**: the difference of the means in the claim's direction (positive:
the claim's side ahead), its 95% bootstrap interval (10,000 resamples of the seeds, each
side on its own, or of the per-seed differences when paired; a fixed seed, so the table
rebuilds exactly), and an effect size: Hedges' g for two sets of seeds, the mean
difference over its standard deviation (d_z) when paired.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

ALPHA = 0.01  # the one threshold: the false-verdict rate of a single comparison
SEEDS = 5  # a verdict is given on five seeds a side at least (fewer: "pending")
RESAMPLES = 10_000  # bootstrap resamples for the interval of the difference
LEVEL = 0.95  # that interval's coverage

INDEPENDENT, PAIRED, FIXED = "independent", "paired", "fixed"


@dataclass(frozen=True)
class Verdict:
    """The rule applied to one comparison. `difference` is in the claim's direction
    (positive: the claim's side leads); `seeds` is (side A, side B; 0 for a fixed number)."""

    claim: str
    word: str  # reproduced, reversed, not settled, pending, not run
    seeds: tuple[int, int]
    kind: str = INDEPENDENT
    difference: float | None = None
    interval: tuple[float, float] | None = None
    effect: float | None = None
    p: float | None = None
    unit: str = ""
    digits: int = 1
    # what was compared, kept so that another rule can be applied to it (`claims_report`)
    a: tuple[float, ...] = field(default=(), repr=False)
    b: tuple[float, ...] | float = field(default=(), repr=False)
    higher_is_better: bool = True

    @property
    def judged(self) -> bool:
        """Did the rule run on it (so it counts among the table's comparisons)?"""
        return self.word in ("reproduced", "reversed", "not settled")

    def lead(self) -> str:
        if self.difference is None:
            return ""
        side = "the claim's side" if self.difference > 0 else "the other side"
        if self.difference == 0:
            return "no side leads"
        return f"{side} leads by {abs(self.difference):.{self.digits}f}{self.unit}"

    def text(self) -> str:
        """The verdict in words, as the table's last cell."""
        if self.word == "pending":
            other = "fixed" if self.kind == FIXED else self.seeds[1]
            return f"pending ({self.lead()}; {self.seeds[0]} v {other} seeds)"
        if self.word == "not settled":
            return f"not settled ({self.lead()})"
        return f"**{self.word}**" if self.judged else self.word

    def cells(self) -> list[str]:
        """claim | seeds | difference [95% interval] | effect | p | verdict."""
        d = self.digits
        seeds = f"{self.seeds[0]} v {'fixed' if self.kind == FIXED else self.seeds[1]}" + (
            " (paired)" if self.kind == PAIRED else ""
        )
        diff = "—"
        if self.difference is not None:
            diff = f"{self.difference:+.{d}f}"
            if self.interval is not None:
                diff += f" [{self.interval[0]:+.{d}f}, {self.interval[1]:+.{d}f}]"
        effect = (
            "—"
            if self.effect is None
            else ("∞" if math.isinf(self.effect) else f"{self.effect:+.1f}")
        )
        p = "—" if self.p is None else (f"{self.p:.4f}" if self.p >= 0.0001 else "<0.0001")
        return [self.claim, seeds, diff, effect, p, self.text()]


def permutation_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Exact two-sided p of the difference of means: the share of all C(n + m, n) splits
    of the pooled values whose |difference| is at least the observed one."""
    pooled, n = [*a, *b], len(a)
    total, observed = sum(pooled), abs(statistics.fmean(a) - statistics.fmean(b))
    tolerance = 1e-9 * max(1.0, max(abs(x) for x in pooled))
    extreme = count = 0
    for chosen in itertools.combinations(range(len(pooled)), n):
        s = sum(pooled[i] for i in chosen)
        diff = abs(s / n - (total - s) / (len(pooled) - n))
        extreme += diff >= observed - tolerance
        count += 1
    return extreme / count


def smallest_p(n: int, m: int) -> float:
    """The smallest p the permutation test can give with n and m seeds a side."""
    return 2 / math.comb(n + m, n)


def t_p(differences: Sequence[float]) -> float:
    """Two-sided p of Student's one-sample t-test of mean(differences) = 0."""
    from scipy import stats

    mean, sd = statistics.fmean(differences), statistics.stdev(differences)
    if sd == 0:  # every seed the same: as certain as it gets, or no difference at all
        return 0.0 if mean != 0 else 1.0
    t = mean / (sd / math.sqrt(len(differences)))
    return float(2 * stats.t.sf(abs(t), len(differences) - 1))


def hedges_g(a: Sequence[float], b: Sequence[float]) -> float | None:
    n, m = len(a), len(b)
    pooled = ((n - 1) * statistics.variance(a) + (m - 1) * statistics.variance(b)) / (n + m - 2)
    diff = statistics.fmean(a) - statistics.fmean(b)
    if pooled == 0:
        return None if diff == 0 else math.copysign(math.inf, diff)
    return diff / math.sqrt(pooled) * (1 - 3 / (4 * (n + m) - 9))


def bootstrap(
    a: Sequence[float], b: Sequence[float] | None, *, paired: bool = False
) -> tuple[float, float]:
    """The `LEVEL` percentile interval of mean(a) − mean(b) (or of the mean of a when b is
    None: a holds differences already), resampling seeds with a fixed seed."""
    rng = np.random.default_rng(0)
    x = np.asarray(a, dtype=float)
    if b is None or paired:
        d = x if b is None else x - np.asarray(b, dtype=float)
        means = d[rng.integers(0, len(d), (RESAMPLES, len(d)))].mean(axis=1)
    else:
        y = np.asarray(b, dtype=float)
        means = (x[rng.integers(0, len(x), (RESAMPLES, len(x)))].mean(axis=1)
                 - y[rng.integers(0, len(y), (RESAMPLES, len(y)))].mean(axis=1))  # fmt: skip
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def judge(
    claim: str,
    a: Sequence[float],
    b: Sequence[float] | float,
    *,
    kind: str = INDEPENDENT,
    higher_is_better: bool = True,
    unit: str = "",
    digits: int = 1,
) -> Verdict:
    """The rule on "a above b" (`higher_is_better=False`: "a below b", as for AER).
    `b` is a list of seeds (`kind` INDEPENDENT or PAIRED, seed for seed with `a`) or a
    fixed number (`kind` FIXED)."""
    sign = 1.0 if higher_is_better else -1.0
    fixed = not isinstance(b, Sequence)
    if fixed and kind != FIXED:
        raise ValueError(f"{claim}: a fixed number to compare with needs kind=FIXED")
    if kind == PAIRED and len(a) != len(b):
        raise ValueError(f"{claim}: paired sides need one value each per seed")
    seeds = (len(a), 0 if fixed else len(b))
    base = Verdict(claim, "not run", seeds, kind, unit=unit, digits=digits, a=tuple(a),
                   b=b if fixed else tuple(b), higher_is_better=higher_is_better)  # fmt: skip
    if not a or (not fixed and not b):
        return base
    if kind == INDEPENDENT:
        diff = sign * (statistics.fmean(a) - statistics.fmean(b)) + 0.0
        pending = min(len(a), len(b)) < SEEDS or smallest_p(len(a), len(b)) > ALPHA
        if pending:
            return _with(base, "pending", diff)
        low, high = bootstrap(a, b)
        g = hedges_g(a, b)
        p = permutation_p(a, b)
        interval = (sign * low, sign * high) if sign > 0 else (sign * high, sign * low)
        return _with(base, _word(p, diff), diff, interval, None if g is None else sign * g, p)
    differences = [x - (b if fixed else y) for x, y in zip(a, a if fixed else b, strict=True)]
    diff = sign * statistics.fmean(differences) + 0.0  # + 0.0: no "-0"
    if len(differences) < SEEDS:
        return _with(base, "pending", diff)
    low, high = bootstrap(differences, None)
    sd = statistics.stdev(differences)
    dz = (math.copysign(math.inf, diff) if diff else None) if sd == 0 else diff / sd
    p = t_p(differences)
    interval = (sign * low, sign * high) if sign > 0 else (sign * high, sign * low)
    return _with(base, _word(p, diff), diff, interval, dz, p)


def _word(p: float, diff: float) -> str:
    if p <= ALPHA and diff != 0:
        return "reproduced" if diff > 0 else "reversed"
    return "not settled"


def _with(base: Verdict, word: str, diff: float, interval=None, effect=None, p=None) -> Verdict:
    return replace(base, word=word, difference=diff, interval=interval, effect=effect, p=p)


@dataclass
class Ledger:
    """Every verdict a table gives, so that its error rate over the table can be said."""

    verdicts: list[Verdict] = field(default_factory=list)

    def __call__(self, claim: str, a, b, **options) -> Verdict:
        verdict = judge(claim, a, b, **options)
        self.verdicts.append(verdict)
        return verdict

    def table(self, verdicts: Sequence[Verdict]) -> list[str]:
        rows = ["| claim | seeds | difference [95% bootstrap] | effect size | p | verdict |",
                "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        return rows + ["| " + " | ".join(v.cells()) + " |" for v in verdicts]

    def summary(self) -> list[str]:
        """The rule, and its false-verdict rate over this table."""
        judged = [v for v in self.verdicts if v.judged]
        k = len(judged)
        settled = sum(v.word in ("reproduced", "reversed") for v in judged)
        pending = sum(v.word == "pending" for v in self.verdicts)
        return [
            f"**The rule** (`benchmarks/verdicts.py`): a claim is settled when a two-sided test "
            f"of no difference gives p ≤ {ALPHA}: the exact permutation test of the means for "
            "two sets of seeds (smallest p 2/252 = 0.0079 at five seeds a side), Student's "
            "t-test on the per-seed differences when one set of models is read two ways "
            f"(paired) or compared with a fixed number; {SEEDS} seeds a side at least, else "
            "*pending*. *Reproduced*: the claim's side ahead; "
            "*reversed*: the other; *not settled* says who leads and by how much. Beside each: "
            f"the difference of the means (positive: the claim's side ahead) with its "
            f"{LEVEL:.0%} bootstrap interval, and the effect size (Hedges' g; d_z when paired).",
            "",
            f"**Its error rate**: at most {ALPHA} per comparison were the claim false. This "
            f"table makes {k} comparisons ({settled} settled); were none of them real, the "
            f"expected number of false verdicts would be at most {ALPHA * k:.2f}, and the "
            f"chance of at least one {1 - (1 - ALPHA) ** k:.0%} (independent comparisons)."
            + (f" {pending} comparison(s) pending: too few seeds yet." if pending else ""),
        ]
