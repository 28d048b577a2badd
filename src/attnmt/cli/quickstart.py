"""`attnmt quickstart`: the main job, end to end, on the built-in English→French corpus.

    attnmt quickstart                          # configs/quickstart.yaml, about 10 minutes
    attnmt quickstart --set train.max_minutes=2

1. prepares the corpus (clean, split by book, subwords; cached),
2. trains `configs/quickstart.yaml` (a small RNNsearch) — or resumes the run if it exists,
   which returns at once when its budget is already spent,
3. evaluates it on the test book (John) against all references: BLEU, chrF, BLEU by length,
4. translates a few test verses with word alignments and draws their attention heatmaps,
5. prints where everything is and the headline numbers.

Each step is one of the ordinary commands (`data prepare`, `train`, `evaluate`,
`translate`), so everything it does can be done, redone or varied by hand.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from attnmt.checkpoint import CheckpointManager
from attnmt.cli import main as attnmt
from attnmt.config import add_override_argument, load_config
from attnmt.data import prepare
from attnmt.errors import UserError
from attnmt.training.loop import train

DEFAULT_CONFIG = "configs/quickstart.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", default=DEFAULT_CONFIG, help=f"experiment YAML (default {DEFAULT_CONFIG})"
    )
    add_override_argument(parser, "train.max_minutes=2")
    parser.add_argument("--beam", type=int, default=5, help="beam size for the test (default 5)")
    parser.add_argument(
        "--examples", type=int, default=4, help="test verses to translate and draw (default 4)"
    )


def _step(number: int, text: str) -> None:
    print(f"\n== {number}/5 {text}", flush=True)


def run(args: argparse.Namespace) -> int:

    started = time.perf_counter()
    if not Path(args.config).is_file():
        raise UserError(f"config file '{args.config}' does not exist; run from the repository root")
    if args.beam < 1 or args.examples < 1:
        raise UserError("--beam and --examples must be at least 1")
    cfg = load_config(args.config, args.overrides)
    if cfg.model.name == "rnnencdec":
        raise UserError(
            "the quickstart draws attention, and model.name 'rnnencdec' has none; train it "
            "with `attnmt train` and evaluate it with `attnmt evaluate`"
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

    _step(3, f"evaluate on the test split (beam {args.beam})")
    code = attnmt(["evaluate", str(run_dir), "--split", "test", "--beam", str(args.beam)])
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


def _pick_examples(examples, n: int):
    """Short verses (legible heatmaps), spread over the test book."""
    short = [ex for ex in examples if 6 <= len(ex.src.split()) <= 16] or list(examples)
    step = max(1, len(short) // max(1, n))
    return short[::step][:n]


def _summary(run_dir: Path, out: Path, chosen, beam: int, seconds: float) -> None:
    report = json.loads((run_dir / "eval" / f"test-beam{beam}.json").read_text(encoding="utf-8"))
    lines = (out / "output.txt").read_text(encoding="utf-8").splitlines()
    for ex, line in zip(chosen, lines, strict=False):
        translation, _, links = line.partition("\t")
        print(f"[{ex.id}]\n  source:    {ex.src}\n  output:    {translation}")
        print(f"  reference: {ex.tgt}\n  alignment: {links}")
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
    print(f"done in {seconds / 60:.1f} min. Next: attnmt translate {run_dir} --interactive")
