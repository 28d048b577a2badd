"""Luong's comparison at a budget that settles it: the five variants, each with several
seeds, trained side by side (one process each) and tested at the same step.

    python benchmarks/luong_settled.py --minutes 6.5 --out runs/luong-settled   # on a GPU

docs/results.md ("Luong's comparison, settled") reports a run of it on an NVIDIA H100:
ten trainings at once on one GPU. Every run trains for the same wall-clock time with a
checkpoint every `--every` steps; the step compared is the last one that every run
reached, so all variants are tested after the same number of updates (the variant
without input feeding is faster and goes further, which the table shows apart). Each
run's checkpoint at that step is evaluated on the test book with beam 5, and dev BLEU by
step (200 verses, greedy, from the training's own validations) is drawn for all.

Writes OUT/summary.json, OUT/summary.md (the table) and OUT/dev-bleu.png; each run is an
ordinary run directory (OUT/VARIANT-sSEED) that `attnmt evaluate` and `attnmt compare`
read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from attnmt.rundir import RunDir, step_of

# name: (config, overrides). The three scores and local-p keep input feeding; the last
# drops it (Luong et al. 2015, Tables 1 and 4).
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "global-dot": ("configs/luong-global-general.yaml", ["model.attention=dot"]),
    "global-general": ("configs/luong-global-general.yaml", []),
    "global-concat": ("configs/luong-global-general.yaml", ["model.attention=concat"]),
    "local-p-general": ("configs/luong-local-p.yaml", []),
    "global-general-nofeed": ("configs/luong-global-general.yaml", ["model.input_feeding=false"]),
}


def attnmt(*args: str) -> list[str]:
    """The command line of `attnmt ARGS` with this interpreter."""
    return [sys.executable, "-m", "attnmt", *args]


def train_command(args: argparse.Namespace, name: str, seed: int, run_dir: Path) -> list[str]:
    config, overrides = VARIANTS[name]
    sets = [
        *overrides,
        f"train.seed={seed}",
        f"train.run_dir={run_dir}",
        f"train.device={args.device}",
        f"data.batch_tokens={args.batch_tokens}",
        f"train.max_steps={args.max_steps}",
        f"train.max_minutes={args.minutes}",
        f"train.validate_every={args.every}",
        f"train.checkpoint_every={args.every}",
        f"train.log_every={min(50, args.every)}",
        "train.keep_last=1000",  # every checkpoint: the common step is known only at the end
        *args.set,
    ]
    return attnmt("train", config, "--quiet", *[x for s in sets for x in ("--set", s)])


def run_all(commands: list[tuple[list[str], Path]], jobs: int) -> None:
    """Run the commands, at most `jobs` at a time, each with its output in a log file."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    waiting, running = list(commands), []
    while waiting or running:
        while waiting and len(running) < jobs:
            command, log = waiting.pop(0)
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "w") as out:
                running.append((subprocess.Popen(command, stdout=out, stderr=out, env=env), log))
        time.sleep(1.0)
        for proc, log in list(running):
            if proc.poll() is not None:
                running.remove((proc, log))
                if proc.returncode != 0:
                    tail = log.read_text().strip().splitlines()[-3:]
                    raise SystemExit(f"{' '.join(proc.args[2:5])} failed; {log}: {tail}")


def checkpoint_steps(run_dir: Path) -> list[int]:
    return [step_of(p) for p in RunDir(run_dir).checkpoints()]


def common_step(run_dirs: list[Path], every: int) -> int:
    """The last multiple of `every` that every run has a checkpoint of (a run stopped by
    the clock also saves its final step, which the others may not have)."""
    common = set.intersection(*(set(checkpoint_steps(d)) for d in run_dirs))
    steps = [s for s in common if s % every == 0]
    if not steps:
        raise SystemExit(
            f"no step that is a multiple of {every} was reached by every run; "
            "train longer (--minutes) or checkpoint more often (--every)"
        )
    return max(steps)


def events(run_dir: Path, kind: str) -> list[dict]:
    return [e for e in RunDir(run_dir).metrics() if e.get("type") == kind]


def summarise(out: Path, runs: dict[tuple[str, int], Path], step: int) -> dict:
    rows = []
    for (name, seed), run_dir in runs.items():
        report = json.loads((run_dir / f"eval-{step}" / "test-beam5.json").read_text())
        train = events(run_dir, "train")
        valid = events(run_dir, "valid")
        at = [e for e in train if e["step"] <= step]
        rows.append(
            {
                "variant": name,
                "seed": seed,
                "step": step,
                "test_bleu": report["bleu"],
                "test_chrf": report["chrf"],
                "references": report["references"],
                "dev_ppl": next(e["ppl"] for e in valid if e["step"] == step),
                "dev_bleu": next(e["bleu"] for e in valid if e["step"] == step),
                "seconds_per_100_steps": 100 * at[-1]["elapsed"] / at[-1]["step"],
                "steps_reached": checkpoint_steps(run_dir)[-1],
                "dev_bleu_by_step": [(e["step"], e["bleu"]) for e in valid],
                "dev_ppl_by_step": [(e["step"], e["ppl"]) for e in valid],
            }
        )
    summary = {"step": step, "runs": rows, "variants": {}}
    for name in VARIANTS:
        mine = [r for r in rows if r["variant"] == name]
        if not mine:
            continue
        bleu = [r["test_bleu"] for r in mine]
        summary["variants"][name] = {
            "seeds": [r["seed"] for r in mine],
            "test_bleu_mean": round(statistics.mean(bleu), 2),
            "test_bleu_spread": round(max(bleu) - min(bleu), 2),
            "test_chrf_mean": round(statistics.mean(r["test_chrf"] for r in mine), 2),
            "dev_ppl_mean": round(statistics.mean(r["dev_ppl"] for r in mine), 2),
        }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "summary.md").write_text(table(summary))
    plot(summary, out / "dev-bleu.png")
    return summary


def table(summary: dict) -> str:
    lines = [
        f"Test BLEU / chrF at step {summary['step']:,} (beam 5), dev perplexity at that step",
        "",
        "| variant | seed | test BLEU | test chrF | dev ppl | s per 100 steps | steps reached |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in summary["runs"]:
        lines.append(
            f"| {r['variant']} | {r['seed']} | {r['test_bleu']:.2f} | {r['test_chrf']:.2f} | "
            f"{r['dev_ppl']:.1f} | {r['seconds_per_100_steps']:.1f} | {r['steps_reached']:,} |"
        )
    lines += ["", "| variant | test BLEU, mean (spread) | test chrF, mean | dev ppl, mean |"]
    lines.append("|---|---:|---:|---:|")
    for name, v in summary["variants"].items():
        lines.append(
            f"| {name} | {v['test_bleu_mean']:.2f} ({v['test_bleu_spread']:.2f}) | "
            f"{v['test_chrf_mean']:.2f} | {v['dev_ppl_mean']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colours = dict(zip(VARIANTS, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for r in summary["runs"]:
        steps, bleu = (
            zip(*r["dev_bleu_by_step"], strict=True) if r["dev_bleu_by_step"] else ((), ())
        )
        first = r["seed"] == summary["variants"][r["variant"]]["seeds"][0]
        ax.plot(
            steps,
            bleu,
            color=colours[r["variant"]],
            marker=".",
            lw=1,
            ls="-" if first else "--",
            label=r["variant"] if first else None,
        )
    ax.axvline(summary["step"], color="grey", lw=0.8, ls=":")
    ax.set_xlabel("step")
    ax.set_ylabel("dev BLEU (200 verses, greedy)")
    several = any(len(v["seeds"]) > 1 for v in summary["variants"].values())
    ax.set_title("Luong variants: dev BLEU by step" + (" (dashed: second seed)" if several else ""))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/luong-settled"))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--minutes", type=float, default=6.5, help="training time of each run")
    parser.add_argument("--max-steps", type=int, default=0, help="also stop here (0: no limit)")
    parser.add_argument("--every", type=int, default=250, help="validate and checkpoint")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--jobs", type=int, default=0, help="runs at a time (0: all)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    runs = {(v, s): args.out / f"{v}-s{s}" for v in args.variants for s in args.seeds}
    config = VARIANTS[args.variants[0]][0]
    # One preparation before the runs start, so that they share the cache, not race for it.
    prep = [*attnmt("data", "prepare", config), "--set", f"data.batch_tokens={args.batch_tokens}"]
    subprocess.run(prep, check=True, stdout=subprocess.DEVNULL)
    jobs = args.jobs or len(runs)
    started = time.time()
    run_all(
        [(train_command(args, v, s, d), d.with_suffix(".log")) for (v, s), d in runs.items()], jobs
    )
    print(f"trained {len(runs)} runs in {time.time() - started:.0f} s", flush=True)
    step = common_step(list(runs.values()), args.every)
    evaluations = [
        (
            attnmt(
                "evaluate",
                str(RunDir(d).checkpoint_path(step)),
                "--beam",
                "5",
                "--device",
                args.device,
                "--out",
                str(d / f"eval-{step}"),
            ),
            d.parent / f"{d.name}.eval.log",
        )
        for d in runs.values()
    ]
    run_all(evaluations, jobs)
    summary = summarise(args.out, runs, step)
    print(table(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
