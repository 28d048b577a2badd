"""How the data path scales: 30k to 10M real sentence pairs, side by side with Hugging Face
`datasets` on the same files and sentencepiece's own encoding rate.

    python benchmarks/data_scale.py                          # 30k 300k 1M 3M 10M (~40 min)
    python benchmarks/data_scale.py --sizes 30000 300000     # a quick look
    python benchmarks/data_scale.py --smoke                  # the test suite's tiny run
    python benchmarks/data_scale.py --write-corpus 1000000 mydata   # only the corpus

The corpora are real translated text: verse pairs of any two of the 31 installed Bible
versions (31 x 30 directed pairs of versions, ~29M pairs; John and Romans held out as test
and dev), written as plain `train.src` / `train.tgt` files, as a user's own would be. For
each size:

- `attnmt data prepare` with an empty cache: wall time, pairs/s, and the peak resident
  memory of the whole process tree (the workers included: sampled from /proc every 50 ms,
  the sum over processes), with the subword model's training (on a sample of
  `data.subword_sample` pairs) timed apart;
- the cache: bytes per token of the token store (ids + index) and of the whole folder
  (with the cleaned text);
- `attnmt train` on it (configs/quickstart.yaml's model): seconds from the process start to
  the first training step, resident memory while training (steps 10-40), tokens/s;
- Hugging Face `datasets` on the same files with the same sentencepiece model
  (`Dataset.from_generator`, `map(num_proc=cores)`, `save_to_disk`), in its own virtual
  environment (`benchmarks/.venv-datasets`, made on first use): wall time, peak memory
  (the same sampler), Arrow bytes;
- sentencepiece's own `encode(lines, num_threads=cores)` over both files: the limit.

Results go to `benchmarks/results/data_scale.jsonl` (one line a size, the CPU beside it),
a table to stdout (and `--out`), and one plot of every figure against corpus size.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "src"))

from machine import append_result  # noqa: E402

from attnmt.devices import cpu_flags, cpu_model  # noqa: E402
from attnmt.rundir import RunDir  # noqa: E402

SIZES = (30_000, 300_000, 1_000_000, 3_000_000, 10_000_000)
HELD_OUT = {43: "test", 45: "dev"}  # John, Romans
DATASETS_VENV = HERE / ".venv-datasets"
DATASETS_PIN = "datasets==5.2.0"  # the version the issue measured


# --------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------


def build_corpus(pairs: int, folder: Path, *, seed: int = 1) -> Path:
    """`folder/train.{src,tgt}` with `pairs` verse pairs of version pairs in a seeded order,
    `dev`/`test` from Romans/John (WEB -> Segond). Made once; returns the prefix folder."""
    from attnmt.config import corpora
    from attnmt.data import bible

    done = folder / ".complete"
    if done.is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    names = sorted(corpora.versions())
    texts = {name: bible.read_version(name) for name in names}
    directed = [(a, b) for a in names for b in names if a != b]
    random.Random(seed).shuffle(directed)
    with (
        open(folder / "train.src", "w", encoding="utf-8") as src,
        open(folder / "train.tgt", "w", encoding="utf-8") as tgt,
    ):
        written = 0
        for a, b in directed:
            for key in sorted(texts[a]):
                if key[0] in HELD_OUT:
                    continue
                s, t = bible.clean(texts[a][key]), bible.clean(texts[b].get(key, ""))
                if not s or not t:
                    continue
                src.write(s + "\n")
                tgt.write(t + "\n")
                written += 1
                if written == pairs:
                    break
            if written == pairs:
                break
    if written < pairs:
        raise SystemExit(f"only {written:,} pairs can be built, {pairs:,} asked")
    for book, split in HELD_OUT.items():
        a, b = texts["en-web"], texts["fr-segond"]
        keys = [k for k in sorted(a) if k[0] == book and a[k] and b.get(k)]
        (folder / f"{split}.src").write_text(
            "".join(bible.clean(a[k]) + "\n" for k in keys), encoding="utf-8"
        )
        (folder / f"{split}.tgt").write_text(
            "".join(bible.clean(b[k]) + "\n" for k in keys), encoding="utf-8"
        )
    done.write_text("ok\n")
    return folder


def head_corpus(source: Path, pairs: int, folder: Path) -> Path:
    """The first `pairs` pairs of a larger corpus (its dev and test too): every size of a
    run is a prefix of the largest, as `head -n` would make it."""
    if folder == source or (folder / ".complete").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for side in ("src", "tgt"):
        with (
            open(source / f"train.{side}", "rb") as whole,
            open(folder / f"train.{side}", "wb") as out,
        ):
            for _, line in zip(range(pairs), whole):  # noqa: B905 (stops at `pairs`)
                out.write(line)
        for split in ("dev", "test"):
            shutil.copyfile(source / f"{split}.{side}", folder / f"{split}.{side}")
    (folder / ".complete").write_text("ok\n")
    return folder


# --------------------------------------------------------------------------------------
# Measuring a command: wall time and the peak RSS of its process tree
# --------------------------------------------------------------------------------------


def _tree_rss(pid: int) -> int:
    """Bytes resident in `pid` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    total, todo = 0, [pid]
    page = os.sysconf("SC_PAGE_SIZE")
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/statm", encoding="ascii") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total


def measure(command: list[str], *, cwd: Path, env: dict | None = None, until=None) -> dict:
    """Run `command`; wall seconds and peak tree RSS. `until(elapsed)` may return a dict to
    stop early (the process is then killed) with what it measured."""
    started = time.perf_counter()
    log = open(cwd / "command.log", "ab")  # noqa: SIM115
    # A session of its own, so that stopping it early stops its children too (torchrun's
    # workers, the preparation's worker processes).
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    peak, extra = 0, {}
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        if until is not None:
            got = until(time.perf_counter() - started, proc.pid)
            if got is not None:
                extra = got
                # torchrun starts its workers in sessions of their own: kill them by name.
                for pid in [*_descendants(proc.pid), proc.pid]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                break
        time.sleep(0.05)
    proc.wait()
    log.close()
    seconds = time.perf_counter() - started
    if not extra and proc.returncode != 0:
        tail = (cwd / "command.log").read_text(errors="replace")[-2000:]
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{tail}")
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(peak / 2**20, 1), **extra}


# --------------------------------------------------------------------------------------
# The three sides
# --------------------------------------------------------------------------------------


def _config(work: Path, corpus: Path, cache: Path, run_dir: Path) -> Path:
    text = f"""data:
  corpus: files
  src: src
  tgt: tgt
  train_path: {corpus / "train"}
  dev_path: {corpus / "dev"}
  test_path: {corpus / "test"}
  max_words: 50
  vocab_size: 8000
  batch_tokens: 1536
  cache_dir: {cache}
model:
  name: rnnsearch
  embed_size: 256
  hidden_size: 256
train:
  max_steps: 100000
  log_every: 1
  validate_every: 100000
  checkpoint_every: 100000
  run_dir: {run_dir}
"""
    path = work / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def ours(work: Path, corpus: Path, attnmt: str, steps: int) -> dict:
    cache, run_dir = work / "cache", work / "run"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    config = _config(work, corpus, cache, run_dir)
    prep = measure([attnmt, "data", "prepare", str(config), "--json"], cwd=work)
    folder = next(p for p in cache.iterdir() if p.name.startswith("files-"))
    first = json.loads((folder / "stats.json").read_text())
    # Again with the subword model cached (the same sample gives the same model): the
    # check, the encoding and the writing alone, what `datasets` is compared with.
    shutil.rmtree(folder)
    again = measure([attnmt, "data", "prepare", str(config), "--json"], cwd=work)
    stats = json.loads((folder / "stats.json").read_text())
    store = json.loads((folder / "store.json").read_text())["splits"]["train"]
    tokens = store["tokens"]["src"] + store["tokens"]["tgt"]
    store_bytes = sum(
        (folder / f"train.{n}").stat().st_size for n in ("ids", "lengths.npy", "offsets.npy")
    )
    folder_bytes = sum(p.stat().st_size for p in folder.iterdir() if p.name.startswith("train."))
    run = RunDir(run_dir)
    seen: dict = {}

    def until(elapsed: float, pid: int):
        lines = [e for e in run.metrics() if e.get("type") == "train"]  # while it trains
        if lines and "first_step_s" not in seen:
            seen["first_step_s"] = round(elapsed, 2)
        if lines and lines[-1]["step"] >= 10:
            seen["rss_mb"] = max(seen.get("rss_mb", 0.0), _tree_rss(pid) / 2**20)
        if lines and lines[-1]["step"] >= steps:
            rates = [x["tokens_per_s"] for x in lines if x["step"] > 10]
            return {
                "first_step_s": seen["first_step_s"],
                "train_rss_mb": round(seen["rss_mb"], 1),
                "tokens_per_s": round(sum(rates) / len(rates), 1),
            }
        return None

    # steps=0 (--no-train): the preparation alone, where training is too slow to time.
    train = measure([attnmt, "train", str(config)], cwd=work, until=until) if steps else {}
    return {
        "pairs_kept": stats["pairs"]["train"],
        "lines": stats["lines"]["train"],
        "prepare_s": prep["seconds"],
        "prepare_peak_mb": prep["peak_rss_mb"],
        "seconds": first["seconds"],
        "encode_s": again["seconds"],
        "encode_peak_mb": again["peak_rss_mb"],
        "pairs_per_s": round(stats["lines"]["train"] / again["seconds"], 1),
        "tokens": tokens,
        "store_bytes_per_token": round(store_bytes / tokens, 3),
        "folder_bytes_per_token": round(folder_bytes / tokens, 3),
        "first_step_s": train.get("first_step_s"),
        "train_rss_mb": train.get("train_rss_mb"),
        "tokens_per_s": train.get("tokens_per_s"),
        "model": str(folder / "vocab" / "joint.model"),
    }


def again(work: Path, attnmt: str) -> float:
    """`ours`' preparation with the subword model cached, once more: its seconds."""
    cache = work / "cache"
    shutil.rmtree(next(p for p in cache.iterdir() if p.name.startswith("files-")))
    config = work / "config.yaml"
    return measure([attnmt, "data", "prepare", str(config), "--json"], cwd=work)["seconds"]


def _memory(pid: int) -> dict:
    """RssAnon (the process's own) and RssFile (mapped files: the store, libraries) in MB."""
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssFile:")):
                key, value = line.split(":")
                out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def two_processes(work: Path, corpus: Path, attnmt: str, steps: int) -> dict:
    """`torchrun --nproc_per_node 2` (gloo) on the prepared cache: each process's resident
    memory (own and file-backed) while training, and the tokens/s of the pair."""
    cache, run_dir = work / "cache", work / "run-ddp"
    shutil.rmtree(run_dir, ignore_errors=True)
    config = _config(work, corpus, cache, run_dir)
    torchrun = str(Path(attnmt).with_name("torchrun"))
    run = RunDir(run_dir)
    seen: dict = {}

    def until(elapsed: float, pid: int):
        lines = [e for e in run.metrics() if e.get("type") == "train"]  # while it trains
        if lines and lines[-1]["step"] >= 10:
            workers = [p for p in _descendants(pid) if _is_trainer(p)]
            for rank, p in enumerate(sorted(workers)):
                try:
                    got = _memory(p)
                except OSError:
                    continue
                best = seen.setdefault(rank, {})
                for k, v in got.items():
                    best[k] = max(best.get(k, 0.0), v)
        if lines and lines[-1]["step"] >= steps:
            rates = [x["tokens_per_s"] for x in lines if x["step"] > 10]
            return {
                "processes": {str(k): v for k, v in seen.items()},
                "tokens_per_s": round(sum(rates) / len(rates), 1),
            }
        return None

    command = [torchrun, "--nproc_per_node", "2", "-m", "attnmt", "train", str(config)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return measure(command, cwd=work, env=env, until=until)


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        found += kids
        todo += kids
    return found


def _is_trainer(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return b"attnmt" in args and b"train" in args and b"--nproc_per_node" not in args


HF_SCRIPT = r"""
import sys, os
import sentencepiece as spm
from datasets import Dataset, disable_progress_bars
disable_progress_bars()
prefix, model, out, procs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def pairs():
    with open(prefix + ".src", encoding="utf-8") as a, open(prefix + ".tgt", encoding="utf-8") as b:
        for s, t in zip(a, b):
            yield {"src": s.rstrip("\n"), "tgt": t.rstrip("\n")}

sp = None
def encode(batch):
    global sp
    if sp is None:
        sp = spm.SentencePieceProcessor(model_file=model)
    return {"src_ids": sp.encode(batch["src"]), "tgt_ids": sp.encode(batch["tgt"])}

ds = Dataset.from_generator(pairs, cache_dir=out + "-gen")
ds = ds.map(encode, batched=True, num_proc=procs)
ds.save_to_disk(out)
"""

SPM_SCRIPT = r"""
import sys, time, itertools
import sentencepiece as spm
prefix, model, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
sp = spm.SentencePieceProcessor(model_file=model)
spent = 0.0
pairs = 0
with open(prefix + ".src", encoding="utf-8") as a, open(prefix + ".tgt", encoding="utf-8") as b:
    while True:
        src = [x.rstrip("\n") for x in itertools.islice(a, 200000)]
        tgt = [x.rstrip("\n") for x in itertools.islice(b, 200000)]
        if not src:
            break
        started = time.perf_counter()
        sp.encode(src, num_threads=threads)
        sp.encode(tgt, num_threads=threads)
        spent += time.perf_counter() - started
        pairs += len(src)
print(spent, pairs)
"""


def datasets_python() -> str:
    python = DATASETS_VENV / "bin" / "python"
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(DATASETS_VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, DATASETS_PIN, "sentencepiece"], check=True)
    return str(python)


def hugging_face(work: Path, corpus: Path, model: str, cores: int) -> dict:
    out = work / "hf"
    for p in (out, Path(str(out) + "-gen")):
        shutil.rmtree(p, ignore_errors=True)
    script = work / "hf.py"
    script.write_text(HF_SCRIPT)
    got = measure(
        [datasets_python(), str(script), str(corpus / "train"), model, str(out), str(cores)],
        cwd=work,
    )
    arrow = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    shutil.rmtree(Path(str(out) + "-gen"), ignore_errors=True)
    return {"hf_s": got["seconds"], "hf_peak_mb": got["peak_rss_mb"], "hf_bytes": arrow}


def sentencepiece_limit(work: Path, corpus: Path, model: str, cores: int) -> dict:
    script = work / "spm.py"
    script.write_text(SPM_SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), str(corpus / "train"), model, str(cores)],
        capture_output=True,
        text=True,
        check=True,
    )
    spent, pairs = out.stdout.split()
    return {"spm_s": round(float(spent), 2), "spm_pairs_per_s": round(int(pairs) / float(spent), 1)}


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------

COLUMNS = (
    ("pairs", "pairs", "{:,}"),
    ("prepare_s", "prepare s", "{:.1f}"),
    ("subwords_s", "of it subwords s", "{:.1f}"),
    ("prepare_peak_mb", "peak MB", "{:,.0f}"),
    ("encode_s", "cached subwords: s", "{:.1f}"),
    ("pairs_per_s", "pairs/s", "{:,.0f}"),
    ("encode_peak_mb", "peak MB", "{:,.0f}"),
    ("hf_s", "datasets s", "{:.1f}"),
    ("hf_peak_mb", "datasets peak MB", "{:,.0f}"),
    ("spm_s", "spm encode s", "{:.1f}"),
    ("store_bytes_per_token", "store B/token", "{:.2f}"),
    ("folder_bytes_per_token", "folder B/token", "{:.2f}"),
    ("hf_bytes_per_token", "Arrow B/token", "{:.2f}"),
    ("first_step_s", "first step s", "{:.1f}"),
    ("train_rss_mb", "training RSS MB", "{:,.0f}"),
    ("tokens_per_s", "train tok/s", "{:,.0f}"),
)


def table(rows: list[dict]) -> str:
    head = "| " + " | ".join(title for _, title, _ in COLUMNS) + " |"
    rule = "|" + "---|" * len(COLUMNS)
    body = []
    for row in rows:
        cells = [fmt.format(row[k]) if row.get(k) is not None else "-" for k, _, fmt in COLUMNS]
        body.append("| " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *body])


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        (
            "prepare time (s)",
            [("prepare_s", "attnmt"), ("encode_s", "attnmt, spm cached"), ("hf_s", "datasets"),
             ("spm_s", "spm encode")],
        ),
        (
            "peak memory (MB)",
            [("prepare_peak_mb", "prepare"), ("encode_peak_mb", "spm cached"),
             ("hf_peak_mb", "datasets"), ("train_rss_mb", "train")],
        ),
        (
            "bytes per token",
            [("store_bytes_per_token", "store"), ("folder_bytes_per_token", "+ text"),
             ("hf_bytes_per_token", "Arrow")],
        ),
        ("first training step (s)", [("first_step_s", "attnmt")]),
        ("training tokens/s", [("tokens_per_s", "attnmt")]),
    )  # fmt: skip
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4))
    sizes = [r["pairs"] for r in rows]
    for ax, (title, series) in zip(axes, panels, strict=True):
        for key, label in series:
            values = [r.get(key) for r in rows]
            if any(v is not None for v in values):
                ax.plot(
                    sizes, [v if v is not None else float("nan") for v in values], "o-", label=label
                )
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)  # a flat line looks flat
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training pairs")
        ax.legend(fontsize=7)
    fig.suptitle(f"attnmt data path, {rows[0]['cpu']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--work", type=Path, default=HERE / ".data-scale")
    parser.add_argument("--steps", type=int, default=40, help="training steps timed per size")
    parser.add_argument(
        "--no-train", action="store_true", help="skip timing attnmt train (prepare only)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="time the cached-subwords preparation and datasets N times, alternated (median)",
    )
    parser.add_argument("--no-datasets", action="store_true", help="skip Hugging Face datasets")
    parser.add_argument("--smoke", action="store_true", help="2,000 pairs, no datasets")
    parser.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    parser.add_argument("--results", type=Path, default=HERE / "results" / "data_scale.jsonl")
    parser.add_argument("--plot", type=Path, default=HERE / "results" / "data_scale.png")
    parser.add_argument(
        "--ddp", type=int, metavar="PAIRS", help="only: 2 torchrun processes on PAIRS pairs"
    )
    parser.add_argument(
        "--write-corpus",
        nargs=2,
        metavar=("PAIRS", "DIR"),
        help="only write a corpus of PAIRS real pairs as DIR/{train,dev,test}.{src,tgt}",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.no_datasets, args.steps = [2000], True, 12
    return args


def measure_sizes(args: argparse.Namespace) -> list[dict]:
    """Every size of `args.sizes`: one row each (printed, and kept unless a smoke run)."""
    attnmt = str(Path(sys.executable).with_name("attnmt"))
    cores = len(os.sched_getaffinity(0))
    cpu = cpu_model()
    notable = {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}
    flags = " ".join(sorted(cpu_flags() & notable))
    rows = []
    largest = build_corpus(max(args.sizes), args.work / f"corpus-{max(args.sizes)}")
    for size in args.sizes:
        corpus = head_corpus(largest, size, args.work / f"corpus-{size}")
        work = args.work / f"run-{size}"
        work.mkdir(parents=True, exist_ok=True)
        row: dict = {"pairs": size, "cpu": cpu, "flags": flags, "cores": cores}
        row.update(ours(work, corpus, attnmt, 0 if args.no_train else args.steps))
        row["subwords_s"] = row["seconds"]["subwords"]
        if not args.no_datasets:
            row.update(hugging_face(work, corpus, row["model"], cores))
            row["hf_bytes_per_token"] = round(row["hf_bytes"] / row["tokens"], 3)
        for _ in range(args.repeat - 1):  # alternated, for a median on a busy machine
            row.setdefault("encode_s_runs", [row["encode_s"]]).append(again(work, attnmt))
            if not args.no_datasets:
                hf = hugging_face(work, corpus, row["model"], cores)["hf_s"]
                row.setdefault("hf_s_runs", [row["hf_s"]]).append(hf)
        for key in ("encode_s", "hf_s"):
            if f"{key}_runs" in row:
                row[key] = round(statistics.median(row[f"{key}_runs"]), 2)
        row["pairs_per_s"] = round(row["lines"] / row["encode_s"], 1)
        if not args.smoke:
            row.update(sentencepiece_limit(work, corpus, row["model"], cores))
        row["at"] = time.strftime("%Y-%m-%d %H:%M:%S")
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not args.smoke:
            append_result(args.results, row)
    if rows and not args.smoke:
        plot(rows, args.plot)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.write_corpus:
        folder = build_corpus(int(args.write_corpus[0]), Path(args.write_corpus[1]))
        print(f"wrote {int(args.write_corpus[0]):,} training pairs to {folder}/train.{{src,tgt}}")
        return 0
    if args.ddp:
        corpus = build_corpus(args.ddp, args.work / f"corpus-{args.ddp}")
        work = args.work / f"run-{args.ddp}"
        attnmt = str(Path(sys.executable).with_name("attnmt"))
        if not (work / "cache").is_dir():
            ours(work, corpus, attnmt, 12)  # prepares the cache the two processes map
        got = two_processes(work, corpus, attnmt, args.steps)
        got.update(pairs=args.ddp, cpu=cpu_model(), at=time.strftime("%Y-%m-%d %H:%M:%S"))
        print(json.dumps(got))
        append_result(args.results.with_name("data_scale_ddp.jsonl"), got)
        return 0
    rows = measure_sizes(args)
    text = f"{rows[0]['cpu']} ({rows[0]['flags']}), {rows[0]['cores']} cores\n\n{table(rows)}\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
