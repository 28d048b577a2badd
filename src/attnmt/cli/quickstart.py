"""`attnmt quickstart`: the main job, end to end, on the built-in English→French corpus.

    attnmt quickstart                          # configs/quickstart.yaml: a fixed step budget
    attnmt quickstart --set train.max_steps=400 --min-dev-bleu 0   # a shorter look

1. prepares the corpus (clean, split by book, subwords; cached),
2. trains `configs/quickstart.yaml` (a small RNNsearch) for its step budget — or resumes
   the run if it exists, which returns at once when its budget is already spent — and
   checks the dev BLEU it reached against what that config is known to reach: far below
   it, it stops with the number, the expectation and the likely causes (exit status 2),
   instead of presenting nonsense as a result,
3. evaluates it on the test book (John) against all references: BLEU, chrF, BLEU by length,
4. translates a few test verses with word alignments and draws their attention heatmaps,
5. prints where everything is and the headline numbers (an alignment only where it is
   one a reader can believe: not every word linked to the same source word).

A step budget, not a time budget, so the same seed gives the same model and the same
numbers on a fast or a slow machine; the progress bar shows the minutes it takes here.

Each step is one of the ordinary commands (`data prepare`, `train`, `evaluate`,
`translate`), so everything it does can be done, redone or varied by hand.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from attnmt.alignment.links import collapsed
from attnmt.checkpoint import CheckpointManager
from attnmt.cli import main as attnmt
from attnmt.config import add_override_argument, family, load_config, to_dict
from attnmt.data import prepare
from attnmt.data.alignments import parse_pharaoh
from attnmt.errors import DataError, UserError
from attnmt.report import training_summary
from attnmt.training import train

DEFAULT_CONFIG = "configs/quickstart.yaml"
# What DEFAULT_CONFIG reaches, measured (docs/results.md, "The quickstart"): greedy dev BLEU
# on its first 200 dev verses after its step budget. The guard wants at least half of it.
KNOWN_STEPS = 1600
KNOWN_DEV_BLEU = 10.2
GUARD_FRACTION = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", default=DEFAULT_CONFIG, help=f"experiment YAML (default {DEFAULT_CONFIG})"
    )
    add_override_argument(parser, "train.max_steps=400")
    parser.add_argument("--beam", type=int, default=5, help="beam size for the test (default 5)")
    parser.add_argument(
        "--examples", type=int, default=4, help="test verses to translate and draw (default 4)"
    )
    parser.add_argument(
        "--limit", type=int, default=None, metavar="N", help="evaluate the first N test verses"
    )
    parser.add_argument(
        "--min-dev-bleu",
        type=float,
        default=None,
        metavar="X",
        help=f"stop with an error if the dev BLEU after training is below X (default "
        f"{GUARD_FRACTION * KNOWN_DEV_BLEU:g} for {DEFAULT_CONFIG}, half of what it reaches; "
        "0 turns the check off)",
    )


def _step(number: int, text: str) -> None:
    print(f"\n== {number}/5 {text}", flush=True)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if not Path(args.config).exists():  # a directory: load_config says what CONFIG is
        raise UserError(f"config file '{args.config}' does not exist; run from the repository root")
    if args.beam < 1 or args.examples < 1 or (args.limit is not None and args.limit < 1):
        raise UserError("--beam, --examples and --limit must be at least 1")
    cfg = load_config(args.config, args.overrides)
    floor = _guard_floor(args)
    if not family(cfg.model.name).uses_attention:
        raise UserError(
            f"the quickstart draws attention, and model.name {cfg.model.name!r} has none; "
            "train it with `attnmt train` and evaluate it with `attnmt evaluate`"
        )
    run_dir = Path(cfg.train.run_dir)

    _step(1, f"prepare {cfg.data.src} -> {cfg.data.tgt}")
    data = prepare(cfg.data, progress=True)
    pairs = data.stats["pairs"]
    if not data.test:
        raise UserError("the test split is empty; set data.test_path or data.test_books")
    print(
        f"train {pairs['train']:,} pairs, dev {pairs['dev']:,}, test {pairs['test']:,} "
        f"(cached in {data.directory})"
    )

    resume = CheckpointManager(run_dir).has_checkpoint()
    _step(2, f"{'resume' if resume else 'train'} {cfg.model.name} into {run_dir}")
    result = train(cfg, resume=resume, progress=True)
    if result.stopped_because == "interrupted":
        return 130
    _check_result(cfg, args, run_dir, floor, result.last_validation)

    _step(3, f"evaluate on the test split (beam {args.beam})")
    limit = [] if args.limit is None else ["--limit", str(args.limit)]
    code = attnmt(["evaluate", str(run_dir), "--split", "test", "--beam", str(args.beam), *limit])
    if code:
        return code

    _step(4, f"translate {args.examples} test verses and draw their attention")
    out = run_dir / "quickstart"
    out.mkdir(parents=True, exist_ok=True)
    chosen = _pick_examples(data.test, args.examples)
    (out / "source.txt").write_text("".join(ex.src + "\n" for ex in chosen), encoding="utf-8")
    code = attnmt(
        [
            "translate",
            str(run_dir),
            str(out / "source.txt"),
            "--beam",
            str(args.beam),
            "--alignments",
            "pharaoh",
            "--plot",
            str(out / "plots"),
            "-o",
            str(out / "output.txt"),
        ]
    )
    if code:
        return code

    _step(5, "summary")
    _summary(run_dir, out, chosen, args.beam, time.perf_counter() - started)
    return 0


def _guard_floor(args: argparse.Namespace) -> float:
    """The least dev BLEU the run must reach: --min-dev-bleu, else half of what the shipped
    config is known to reach (0 for another config: nothing is known about it)."""
    if args.min_dev_bleu is not None:
        if args.min_dev_bleu < 0:
            raise UserError(f"--min-dev-bleu must be at least 0, got {args.min_dev_bleu}")
        return args.min_dev_bleu
    shipped = Path(args.config).resolve() == Path(DEFAULT_CONFIG).resolve()
    return GUARD_FRACTION * KNOWN_DEV_BLEU if shipped else 0.0


def _check_result(
    cfg, args: argparse.Namespace, run_dir: Path, floor: float, validation: dict | None
) -> None:
    """Stop, saying why, when the model is far below what its config is known to reach."""
    if floor <= 0:
        return
    validation = validation or _read_json(run_dir / "last_validation.json")
    if not isinstance(validation, dict) or "bleu" not in validation:
        print(f"(dev BLEU not checked: no validation is recorded in {run_dir})")
        return
    bleu = float(validation["bleu"])
    if bleu >= floor:
        print(f"dev BLEU {bleu:.2f}: as expected (at least {floor:.1f})")
        return
    step = training_summary(run_dir)["trained_steps"] or 0
    changed = _changed_keys(cfg, args.config)
    if cfg.train.max_steps != KNOWN_STEPS and not any(
        c.startswith("train.max_steps=") for c in changed
    ):  # the YAML file itself was edited
        changed.append(f"train.max_steps={cfg.train.max_steps} in {args.config}")
    causes = [
        f"a changed config ({', '.join(changed)})" if changed else None,
        "a time budget (train.max_minutes) cut short on a slow or busy CPU"
        if cfg.train.max_minutes
        else None,
        "a broken install (run `make test`)",
    ]
    raise UserError(
        f"the trained model is far below what {DEFAULT_CONFIG} is known to reach: dev BLEU "
        f"{bleu:.2f} after {step:,} steps, where {KNOWN_STEPS:,} steps reach "
        f"{KNOWN_DEV_BLEU:.1f} and this check wants at least {floor:.1f}; likely causes: "
        + "; ".join(c for c in causes if c)
        + f". The run is kept in {run_dir}; --min-dev-bleu 0 skips this check"
    )


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _changed_keys(cfg, config_path: str) -> list[str]:
    """The keys (section.key) where `cfg` differs from its YAML file, where the run is
    written aside."""
    shipped, now = to_dict(load_config(config_path)), to_dict(cfg)
    ignored = {("train", "run_dir"), ("data", "cache_dir")}
    return [
        f"{section}.{key}={now[section][key]!r}"
        for section in now
        for key in now[section]
        if (section, key) not in ignored and now[section][key] != shipped[section][key]
    ]


def _pick_examples(examples, n: int):
    """Short verses (legible heatmaps), spread over the test book."""
    short = [ex for ex in examples if 6 <= len(ex.src.split()) <= 16] or list(examples)
    step = max(1, len(short) // max(1, n))
    return short[::step][:n]


def _shown_alignment(links: str, translation: str) -> str:
    """The Pharaoh links, unless they say nothing (`collapsed`)."""
    try:
        if collapsed(parse_pharaoh(links), len(translation.split())):
            return (
                "(left out: most words are linked to one source word; the attention has "
                "not learned to align yet)"
            )
    except DataError:
        return "(left out: unreadable)"
    return links


def _summary(run_dir: Path, out: Path, chosen, beam: int, seconds: float) -> None:
    report = json.loads((run_dir / "eval" / f"test-beam{beam}.json").read_text(encoding="utf-8"))
    lines = (out / "output.txt").read_text(encoding="utf-8").splitlines()
    for ex, line in zip(chosen, lines, strict=False):
        translation, _, links = line.partition("\t")
        print(f"[{ex.id}]\n  source:    {ex.src}\n  output:    {translation}")
        print(f"  reference: {ex.tgt}\n  alignment: {_shown_alignment(links, translation)}")
    speed = report.get("speed", {})
    print(
        f"\ntest ({report.get('sentences', '?')} verses, {report.get('references', '?')} "
        f"references): BLEU {report['bleu']:.2f}  chrF {report['chrf']:.2f}  "
        f"(beam {beam}, {speed.get('sentences_per_s', '?')} sentences/s)"
    )
    print(f"  {report['bleu_signature']}")
    print(f"run directory:   {run_dir}  (config, checkpoints, metrics.jsonl, train.log)")
    print(f"test report:     {run_dir / 'eval' / f'test-beam{beam}.md'}")
    print(f"BLEU by length:  {run_dir / 'eval' / f'test-beam{beam}-length.png'}")
    print(f"heatmaps:        {out / 'plots'}/")
    print(f"translations:    {out / 'output.txt'}  (translation<TAB>Pharaoh alignment)")
    print(f"done in {seconds / 60:.1f} min. Next:")
    for command, what in next_steps(run_dir):
        print(f"  {command:<58}  {what}")


def next_steps(run_dir: Path) -> list[tuple[str, str]]:
    """The main job's closing lines: this run line by line, then the reference models
    (committed, trained far longer) in the explorer, served or as static files."""
    steps = [(f"attnmt translate {run_dir} --interactive", "your model, a line at a time")]
    reference = Path("reference")
    names = [f"reference/{n}" for n in ("rnnsearch-en-fr", "transformer-en-fr")]
    if all((reference / Path(n).name).is_dir() for n in names):
        steps.append((f"attnmt serve {' '.join(names)}", "the reference models in the explorer"))
        steps.append(("make site && python -m http.server -d site",
                      "the same page decoding in your browser, no server"))  # fmt: skip
    return steps
