"""A request's compute budget: the work `attnmt serve` states it will do for one request,
counted before any decoding, so that a request of minutes is refused at once (413) with
what to lower, instead of holding the model's one decoding thread until its timeout.

Two counts, each with its limit in `Settings` (the `--max-search-steps` and
`--max-explain-passes` flags) and stated in GET /api/model's `limits`:

- **search steps**: hypotheses × decoder steps at most, beam × Σ over lines of the longest
  output the search allows (2 × (S + 1) + 5 tokens for a source of S subwords, as
  `attnmt.decoding.hypotheses.max_lengths`; the model's `max_output_tokens` where it has one,
  an image reader's 16). Translations and readings only; scoring searches nothing.
- **explanation passes**: sequences the explanation runs through the model: for the
  gradient methods a gradient per target token and integration step (the answer's
  `explanation.backward`), integrated gradients K × (T + 1) + 2 per line (K = `ig_steps`;
  the 2 its ends), gradient × input T + 1; otherwise a forward pass per sequence (its
  `explanation.forward`): occlusion S + 1 (an image's grid cells + 1), attention 1,
  attention × norm and rollout 2. T + 1 is the target with its EOS: given to /api/score,
  else estimated as long as the source (S + 1), or an image reader's longest reading.

The counts do not depend on the machine; how long a step or a pass takes does (and on the
model: docs/serving.md gives the defaults' times for the quickstart run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attnmt.serve.worker import Options

# Passes per line of the methods whose cost does not grow with the sentence.
FIXED_PASSES = {"attention": 1, "attention-norm": 2, "rollout": 2}


@dataclass(frozen=True)
class LineSize:
    """One line (sentence, pair or image) as the budget counts it."""

    source: int  # S: source subwords read (after the source limit), EOS not counted
    output: int  # the longest output the search allows it, EOS included
    target: int  # T + 1: the target explained, EOS included (given, or estimated)


def search_steps(beam: int, sizes: Sequence[LineSize]) -> int:
    """Hypotheses × decoder steps at most: beam × Σ each line's longest output."""
    return beam * sum(size.output for size in sizes)


def explain_passes(
    method: str, ig_steps: int, sizes: Sequence[LineSize], *, cells: int | None = None
) -> int:
    """Sequences `method` passes through the model for `sizes` (`cells`: an image run's
    grid cells, which occlusion blacks out one by one)."""
    if method == "integrated-gradients":
        return sum(ig_steps * size.target + 2 for size in sizes)
    if method == "grad-input":
        return sum(size.target for size in sizes)
    if method == "occlusion":
        return sum((size.source if cells is None else cells) + 1 for size in sizes)
    return FIXED_PASSES[method] * len(sizes)


def refusal(
    options: Options,
    sizes: Sequence[LineSize],
    *,
    max_search_steps: int,
    max_explain_passes: int,
    what: str = "lines",
    cells: int | None = None,
) -> str | None:
    """Why the request is over the budget, as one sentence naming the count, the limit and
    what to lower; None when it is within. `what` names the request's items ("lines",
    "pairs", "images")."""
    count = f"{len(sizes):,} {what if len(sizes) != 1 else what[:-1]}"  # 1 line, 2 lines
    fewer = f"send fewer or shorter {what}" if what != "images" else "send fewer images"
    if options.task == "translate":
        steps = search_steps(options.beam, sizes)
        if steps > max_search_steps:
            search = "greedy search" if options.beam == 1 else f"beam {options.beam}"
            lower = "" if options.beam == 1 else "lower beam or "
            outputs = sum(size.output for size in sizes)
            return (
                f"{search} on {count} (up to {outputs:,} output tokens) is {steps:,} search "
                f"steps, over this server's {max_search_steps:,} (--max-search-steps): "
                f"{lower}{fewer}"
            )
    if options.explain is not None:
        passes = explain_passes(options.explain, options.ig_steps, sizes, cells=cells)
        if passes > max_explain_passes:
            method, lower = options.explain, ""
            if method == "integrated-gradients":
                targets = sum(size.target for size in sizes)
                method = f"{method} at {options.ig_steps} steps"
                count = f"{count} (about {targets:,} target tokens)"
                lower = "lower ig_steps or "
            return (
                f"{method} on {count} is {passes:,} passes through the model, over this "
                f"server's {max_explain_passes:,} (--max-explain-passes): {lower}{fewer}"
            )
    return None
