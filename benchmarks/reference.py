"""The reference runs: three models trained far past the shipped budgets on the built-in
WEB -> Segond corpus, and the four image models trained to their shipped budgets, finished
into reference/NAME, where the chapters, `attnmt.load`, `attnmt translate` and `attnmt
serve` find them.

    make reference                                   # all seven, as their configs say
    python benchmarks/reference.py rnnsearch-en-fr   # one of them
    python benchmarks/reference.py --device cuda --minutes 6   # a time limit on top

Each text NAME trains from configs/reference/NAME.yaml, each image NAME (captions-soft,
captions-plain, captions-hard, glimpses) from the shipped configs/NAME.yaml as it is (a
chapter's six minutes cannot train them: REINFORCE needs 6,000 and 20,000 updates), into
runs/reference/NAME, an ordinary run
directory with full checkpoints (weights and Adam's state), so that a stopped command
started again resumes exactly (`attnmt train --resume`); the runs train side by side, one
process each. A run stops when dev BLEU has not improved for `train.patience` validations,
or at a limit of its config or of this command. Then it is finished into reference/NAME:

    config.yaml, metrics.jsonl, train.log, vocab/   as the run wrote them
    checkpoints/step-N/                             the best-by-dev-BLEU checkpoint, its
                                                    weights in fp16 (no optimizer state)
    eval/test-beam5.*                               `attnmt evaluate --beam 5` of those
                                                    fp16 weights on the test book (John);
                                                    greedy (test-beam1.*) for the images
    reference.json                                  steps, why it stopped, wall time, the
                                                    machine, parameters, dev and test BLEU

A finished reference is left alone by later commands (delete it to remake it); a run
stopped at a time limit given here is finished too, and reference.json says so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from attnmt.checkpoint import VERSION, load_weights, save_weights
from attnmt.rundir import RunDir, read_state, write_state

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs" / "reference"
TEXT = ("rnnsearch-en-fr", "transformer-en-fr", "rnnencdec-en-fr")
IMAGES = ("captions-soft", "captions-plain", "captions-hard", "glimpses")
NAMES = TEXT + IMAGES
STOPPED = re.compile(r"stopped \((?P<why>[a-z_]+)\) at step (?P<step>\d+)")


def attnmt(*args: str) -> list[str]:
    return [sys.executable, "-m", "attnmt", *args]


def run_dir(name: str, runs: Path) -> Path:
    return runs / name


def config_of(name: str) -> Path:
    """A text reference's own config; an image reference's is the shipped one."""
    return CONFIGS / f"{name}.yaml" if name in TEXT else ROOT / "configs" / f"{name}.yaml"


def beam_of(name: str) -> int:
    """Beam 5 on text, as the field reports; greedy on images, as docs/results.md does."""
    return 5 if name in TEXT else 1


def train_command(name: str, args: argparse.Namespace) -> list[str]:
    sets = [f"train.run_dir={run_dir(name, args.runs)}", f"train.device={args.device}"]
    if args.minutes:
        sets.append(f"train.max_minutes={args.minutes}")
    sets += args.set
    command = attnmt("train", str(config_of(name)), "--quiet")
    if RunDir(run_dir(name, args.runs)).checkpoints():
        command.append("--resume")
    return command + [x for s in sets for x in ("--set", s)]


def train_all(names: list[str], args: argparse.Namespace) -> dict[str, int]:
    """Train the runs side by side; their exit codes by name."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with contextlib.ExitStack() as logs:
        procs = {}
        for name in names:
            out = run_dir(name, args.runs)
            out.parent.mkdir(parents=True, exist_ok=True)
            log = logs.enter_context(open(out.parent / f"{name}.out", "a"))
            command = train_command(name, args)
            print(f"{name}: {' '.join(command[2:])}", flush=True)
            procs[name] = subprocess.Popen(command, stdout=log, stderr=log, env=env)
        codes = {}
        for name, proc in procs.items():
            codes[name] = proc.wait()
            print(f"{name}: training exited with {codes[name]}", flush=True)
    return codes


def stop_reason(log: Path) -> tuple[str, int] | None:
    """Why and at which step the last training session stopped (its train.log's last line)."""
    found = None
    for line in log.read_text(encoding="utf-8").splitlines():
        match = STOPPED.search(line)
        if match:
            found = (match["why"], int(match["step"]))
    return found


def finish(name: str, args: argparse.Namespace) -> dict:
    """Copy a stopped run into reference/NAME with fp16 weights; evaluate; write its record."""
    source, target = RunDir(run_dir(name, args.runs)), args.out / name
    best, latest = source.best(), source.latest()
    if best is None or latest is None:
        raise SystemExit(f"{source.path} has no best or latest checkpoint to finish")
    checkpoint = source.checkpoint("best")
    staging = RunDir(target.with_name(f".{name}.partial"))
    shutil.rmtree(staging.path, ignore_errors=True)
    stored = staging.checkpoint_path(best["step"])
    stored.mkdir(parents=True)
    for copied in (source.config_path, source.metrics_path, source.log_path):  # as written
        shutil.copy2(copied, staging.path / copied.name)
    shutil.copytree(source.vocab_dir, staging.vocab_dir)
    weights = load_weights(checkpoint / "model.safetensors")
    save_weights(stored / "model.safetensors", weights, dtype=torch.float16)
    write_state(stored, {**read_state(checkpoint), "version": VERSION})
    staging.mark("best", best["step"], best["metric"])
    staging.mark("latest", best["step"])
    beam = beam_of(name)
    evaluate = attnmt("evaluate", str(staging.path), "--beam", str(beam), "--device", args.device)
    if args.eval_limit:
        evaluate += ["--limit", str(args.eval_limit)]
    subprocess.run(evaluate, check=True, stdout=subprocess.DEVNULL)
    report = json.loads((staging.path / "eval" / f"test-beam{beam}.json").read_text())
    last = source.state("latest")
    why, step = stop_reason(source.log_path) or ("unknown", latest["step"])
    record = {
        "name": name,
        "config": str(config_of(name).relative_to(ROOT)),
        "steps": step,
        "stopped": why,
        "minutes_limit": args.minutes or None,
        "wall_minutes": round(last["progress"]["elapsed"] / 60, 1),
        "hardware": last["hardware"],
        "gpu": torch.cuda.get_device_name() if "cuda" in last["hardware"]["device"] else None,
        "parameters": report["parameters"],  # each tied tensor once (the weights repeat it)
        "checkpoint_mb": round((stored / "model.safetensors").stat().st_size / 1e6, 1),
        "best_step": best["step"],
        # the dev metric the best checkpoint was kept by: BLEU on text, exact match on images
        ("dev_bleu_best" if name in TEXT else "dev_exact_best"): best["metric"],
        "test": {
            k: report[k]
            for k in ("bleu", "chrf", "exact", "sentences", "references", "speed", "images")
            if k in report
        },
        "test_beam": beam,
    }
    (staging.path / "reference.json").write_text(json.dumps(record, indent=1) + "\n")
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging.path, target)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"which references (default all: {', '.join(NAMES)})",
    )
    parser.add_argument("--device", default="auto", help="train.device of the runs")
    parser.add_argument(
        "--minutes",
        type=float,
        default=0.0,
        help="stop each run after this many training minutes (0: its config)",
    )
    parser.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS per run")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override for every run (tests)",
    )
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "reference")
    parser.add_argument("--out", type=Path, default=ROOT / "reference")
    parser.add_argument("--eval-limit", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = args.names or list(NAMES)
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        parser.error(f"no reference named {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    todo = [n for n in names if not (args.out / n / "reference.json").is_file()]
    for name in sorted(set(names) - set(todo)):
        print(f"{name}: finished already ({args.out / name}); delete it to remake it")
    started = time.time()
    codes = train_all(todo, args) if todo else {}
    failed = [n for n, code in codes.items() if code != 0]
    for name in failed:
        print(f"{name}: training failed; see {run_dir(name, args.runs).parent / name}.out")
    done = [n for n in todo if n not in failed]
    with ThreadPoolExecutor(max(1, len(done))) as pool:  # the evaluations side by side
        records = list(pool.map(lambda name: finish(name, args), done))
    for name, record in zip(done, records, strict=True):
        print(
            f"{name}: {record['steps']} steps ({record['stopped']}), "
            f"{record['wall_minutes']} min; best dev {'BLEU' if name in TEXT else 'exact'} "
            f"{record.get('dev_bleu_best', record.get('dev_exact_best'))} at step "
            f"{record['best_step']}; test BLEU {record['test']['bleu']}, exact "
            f"{record['test'].get('exact')}% (beam {record['test_beam']}); "
            f"{args.out / name}",
            flush=True,
        )
    print(f"{len(todo) - len(failed)} finished in {(time.time() - started) / 60:.1f} min")
    return 1 if failed else 0


if __name__ == "__main__":
    torch.set_num_threads(1)  # the driver only converts weights; the runs have the cores
    sys.exit(main())
