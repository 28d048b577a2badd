"""`make bench`: attnmt side by side with JoeyNMT, PyTorch and CTranslate2, on this machine.

    python benchmarks/bench.py                    # all groups, about 40 minutes on 2 cores
    python benchmarks/bench.py --minutes 20       # the time-to-quality budget of the issue
    python benchmarks/bench.py --groups kernels   # one group
    python benchmarks/bench.py --smoke            # seconds: what the test suite runs

Groups, each a ratio to a reference measured in the same run on the same machine:

1. machine: CPU, cores, flags, torch, the fp32 and bf16 matrix-product peaks (`machine.py`).
2. kernels: every attention score against `F.scaled_dot_product_attention` and a naive
   reference (`kernels.py`).
3. training: attnmt's RNNsearch and Transformer against JoeyNMT 2.3 with the same
   architecture, batch budget and data: target tokens/s, MFU (`throughput.py`) and the
   profile of attnmt's step.
4. quality: both toolkits' RNNsearch trained for the same minutes of training (validation
   left out of both clocks): dev perplexity and BLEU against time (one plot), the minutes
   attnmt needs to reach JoeyNMT's final dev perplexity, test BLEU with beam 5 (Segond, and
   all three references).
5. decoding: sentences/s, greedy and beam 5, on the test book: the RNNsearch models of
   group 4; the Transformers of group 3 also against CTranslate2 (fp32, int8) on the same
   weights (`attnmt export --format ctranslate2`) and PyTorch's dynamic int8.
6. data: the data path from 30k to 10M real pairs against Hugging Face `datasets` on the
   same files (`data_scale.py`: prepare time and memory, cache bytes per token, time to
   the first training step, resident memory and tokens/s of training). Not in the
   default groups (it takes ~40 minutes of its own): `--groups data`.

Writes `benchmarks/results.md` (and `results/bench.json`, `results/time_to_quality.png`);
JoeyNMT lives in its own virtual environment (`joeynmt_side.ensure_venv`), made on first
use. Nothing here is a timed test; `--smoke` runs every group on toy sizes so none can rot.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import data_scale  # noqa: E402
import joeynmt_side  # noqa: E402
import kernels  # noqa: E402
import machine  # noqa: E402
import throughput  # noqa: E402

from attnmt.config import load_config  # noqa: E402
from attnmt.data import prepare  # noqa: E402
from attnmt.decoding.runs import load_run  # noqa: E402
from attnmt.decoding.translator import Translator  # noqa: E402
from attnmt.devices import cpu_model, pick_device  # noqa: E402
from attnmt.metrics import corpus_scores  # noqa: E402
from attnmt.rundir import RunDir  # noqa: E402

GROUPS = ("machine", "kernels", "training", "quality", "decoding", "data")
DEFAULT_GROUPS = GROUPS[:-1]  # `data` takes ~40 minutes of its own: asked for by name
BATCH_TOKENS = 2048  # the batch budget of the hand measurement in the issue, both toolkits
CONFIGS = {"rnnsearch": "configs/rnnsearch.yaml", "transformer": "configs/transformer.yaml"}
# attnmt's RNNsearch starts from U(-0.1, 0.1) as JoeyNMT's side does (joeynmt_side), not
# from Bahdanau's N(0, 0.01²): one difference fewer, and it learns far faster per step here
# (dev perplexity 37.7 against 82.7 at step 500; docs/training.md, "Initialisation").
ARCH_SET = {"rnnsearch": ["model.init=uniform"], "transformer": []}
# The smoke version: a 2-step toy of everything (tests/test_bench.py).
SMOKE_SET = [
    "data.corpus=reverse",
    "data.synthetic_train_size=300",
    "train.valid_sentences=8",
    "data.batch_tokens=256",
    "model.embed_size=32",
    "model.hidden_size=32",
    "model.ff_size=64",
    "model.layers=1",
]


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------------------------
# attnmt's runs (subprocesses, as a user runs them)
# --------------------------------------------------------------------------------------


def attnmt_train(config: str, overrides: list[str], run_dir: Path, **budget) -> dict:
    """`attnmt train` with `overrides` and a budget (`minutes` of training or `steps`);
    returns the curve of dev perplexity/BLEU against training seconds and tokens/s."""
    sets = [*overrides, f"train.run_dir={run_dir}", "train.checkpoint_every=100000"]
    if budget.get("minutes"):
        sets += [f"train.max_minutes={budget['minutes']}", "train.max_steps=0"]
    if budget.get("steps"):
        sets += [f"train.max_steps={budget['steps']}"]
    shutil.rmtree(run_dir, ignore_errors=True)  # the bench's own work folder: a fresh run
    command = [sys.executable, "-m", "attnmt", "train", config]
    for item in sets:
        command += ["--set", item]
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with (run_dir.parent / f"{run_dir.name}.out").open("w", encoding="utf-8") as out:
        subprocess.run(command, check=True, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    return read_metrics(run_dir)


def read_metrics(run_dir: Path) -> dict:
    """Training tokens/s (all logged windows) and the validation curve of an attnmt run,
    each validation placed at the training seconds (validation not counted) of its step."""
    rows = RunDir(run_dir).metrics()
    train = [r for r in rows if r.get("type") == "train"]
    tokens = previous = 0.0
    elapsed_at = {0: 0.0}
    for row in train:
        tokens += row["tokens_per_s"] * (row["elapsed"] - previous)
        previous = row["elapsed"]
        elapsed_at[row["step"]] = row["elapsed"]
    curve = []
    for row in rows:
        if row.get("type") == "valid" and row["step"] in elapsed_at:
            curve.append(
                {
                    "train_seconds": elapsed_at[row["step"]],
                    "step": row["step"],
                    "dev_ppl": row["ppl"],
                    "dev_bleu": row["bleu"],
                }
            )
    return {
        "steps": train[-1]["step"] if train else 0,
        "train_s": previous,
        "tokens_per_s": round(tokens / previous, 1) if previous else None,
        "curve": curve,
    }


def minutes_to_reach(curve: list[dict], ppl: float) -> float | None:
    """Training minutes at which `curve` first reaches dev perplexity `ppl` (linear between
    validations; None if never)."""
    before = {"train_seconds": 0.0, "dev_ppl": float("inf")}
    for point in curve:
        if point["dev_ppl"] <= ppl:
            if before["dev_ppl"] == float("inf"):
                return point["train_seconds"] / 60
            share = (before["dev_ppl"] - ppl) / (before["dev_ppl"] - point["dev_ppl"])
            seconds = before["train_seconds"] + share * (
                point["train_seconds"] - before["train_seconds"]
            )
            return seconds / 60
        before = point
    return None


def attnmt_decode(run_dir: Path, lines: list[str], beam: int, *, quantize: str | None = None):
    """Sentences/s of attnmt's decoder (model loaded beforehand) and its hypotheses."""
    loaded = load_run(run_dir)
    if quantize:
        from attnmt.decoding.quantize import quantize_model

        loaded.model = quantize_model(loaded.model, quantize)
    translator = Translator(loaded, beam=beam)
    started = time.perf_counter()
    sentences = translator.translate(lines)
    seconds = time.perf_counter() - started
    hypotheses = [s.translation.text if s.translation else "" for s in sentences]
    return {"sentences_per_s": len(lines) / seconds, "seconds": seconds, "hypotheses": hypotheses}


def ctranslate2_decode(run_dir: Path, out: Path, lines: list[str], beam: int, quantization: str):
    """The same weights exported to CTranslate2 (`attnmt export`), decoded with its own
    beam search: sentences/s and hypotheses."""
    import ctranslate2

    from attnmt.export.ctranslate2 import export_ctranslate2, vocabulary_tokens

    loaded = load_run(run_dir)
    export_ctranslate2(loaded, out, quantization=quantization, force=True)
    translator = ctranslate2.Translator(
        str(out), device="cpu", inter_threads=1, intra_threads=torch.get_num_threads()
    )
    src, tgt = loaded.vocab.src, loaded.vocab.tgt
    src_tokens, tgt_tokens = vocabulary_tokens(src), vocabulary_tokens(tgt)
    index = {token: i for i, token in enumerate(tgt_tokens)}
    pieces = [[src_tokens[i] for i in src.encode(line)] for line in lines]
    started = time.perf_counter()
    results = translator.translate_batch(
        pieces,
        beam_size=beam,
        max_batch_size=4000 // beam,
        batch_type="tokens",
        max_decoding_length=2 * max(len(p) for p in pieces) + 6,
        length_penalty=0.6 if beam > 1 else 1.0,
    )
    seconds = time.perf_counter() - started
    hypotheses = [tgt.decode([index[t] for t in r.hypotheses[0]]) for r in results]
    return {"sentences_per_s": len(lines) / seconds, "seconds": seconds, "hypotheses": hypotheses}


def scores(hypotheses: list[str], split_dir: Path, split: str, count: int | None = None) -> dict:
    """BLEU and chrF against Segond alone and against all three references."""

    def read(name: str) -> list[str]:
        path = split_dir / f"{split}.{name}"
        return path.read_text(encoding="utf-8").splitlines()[:count] if path.exists() else []

    segond = read("tgt")
    others = [r for r in (read("ref2"), read("ref3")) if r]
    n = len(hypotheses)
    one = corpus_scores(hypotheses, [[s] for s in segond[:n]])
    refs = [[s, *(o[i] for o in others if o[i])] for i, s in enumerate(segond[:n])]
    every = corpus_scores(hypotheses, refs)
    return {
        "bleu_segond": one["bleu"],
        "chrf_segond": one["chrf"],
        "bleu_all": every["bleu"],
        "chrf_all": every["chrf"],
        "references": 1 + len(others),
    }


# --------------------------------------------------------------------------------------
# The groups
# --------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.smoke = args.smoke
        self.work = Path(args.work).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        self.results: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "args": vars(args)}
        if args.keep:
            self.results = self.kept()
        self.python = None  # JoeyNMT's venv python, made on first use

    def overrides(self) -> list[str]:
        sets = [f"data.batch_tokens={BATCH_TOKENS}"]
        return [*sets, *SMOKE_SET] if self.smoke else sets

    def kept(self) -> dict:
        """The last run's results (`--keep`), to re-measure only `--groups` into them: only
        on the machine they were measured on, so that every ratio stays within one machine."""
        path = self.args.out.parent / "results" / "bench.json"
        if not path.exists():
            raise SystemExit(f"--keep: no earlier results in {path}; run all groups first")
        results = json.loads(path.read_text(encoding="utf-8"))
        if results.get("machine", {}).get("cpu") != cpu_model():
            raise SystemExit(
                f"--keep: {path} was measured on {results.get('machine', {}).get('cpu')!r}, "
                f"this is {cpu_model()!r}; run all groups here instead"
            )
        results.setdefault("updated", []).append(
            {"groups": self.args.groups, "at": time.strftime("%Y-%m-%d %H:%M:%S")}
        )
        return results

    def budget(self, minutes: float) -> dict:
        """Minutes of training; the smoke version trains a fixed few steps instead."""
        return {"steps": 4} if self.smoke else {"minutes": round(minutes, 3)}

    def joey(self) -> Path | None:
        if self.args.no_joeynmt:
            return None
        if self.python is None:
            log("JoeyNMT's virtual environment (made once)")
            self.python = joeynmt_side.ensure_venv()
        return self.python

    def prepared(self, arch: str):
        cfg = load_config(CONFIGS[arch], self.overrides())
        return prepare(cfg.data)

    # 1 --------------------------------------------------------------------------------
    def machine(self) -> None:
        log("machine: CPU, flags, matrix-product peaks")
        sizes = (256,) if self.smoke else machine.SIZES
        self.results["machine"] = machine.describe(seconds=0.05 if self.smoke else 1.0, sizes=sizes)

    def peak(self) -> dict:
        if "machine" not in self.results:
            self.machine()
        return self.results["machine"]["peak"]

    # 2 --------------------------------------------------------------------------------
    def kernels(self) -> None:
        log("kernels: every score against F.scaled_dot_product_attention")
        if self.smoke:
            rows = kernels.measure((16,), shape=kernels.Shape(2, 32, 4), seconds=0.0)
        else:
            rows = kernels.measure(peak_gflops=self.peak()["fp32"]["gflops"])
        self.results["kernels"] = rows

    # 3 --------------------------------------------------------------------------------
    def training(self) -> None:
        out = self.results.setdefault("training", {})
        steps = 2 if self.smoke else 20
        for arch in CONFIGS:
            log(f"training: attnmt {arch}, {steps} steps x 2 rounds, FLOPs counted")
            out[f"attnmt-{arch}"] = throughput.measure(
                CONFIGS[arch], [*self.overrides(), *ARCH_SET[arch]], steps=steps,
                warmup=1 if self.smoke else 5,
                peak=self.peak(),
            )  # fmt: skip
            log(f"training: profile of attnmt {arch}")
            out[f"profile-{arch}"] = throughput.profile(
                CONFIGS[arch], [*self.overrides(), *ARCH_SET[arch]], steps=1 if self.smoke else 5
            )
        # Both Transformers train for the same minutes: tokens/s over a whole run, and the
        # models the decoding group compares.
        minutes = self.args.transformer_minutes
        python = self.joey()
        if python is not None:
            data = self.prepared("transformer")
            joey_data = joeynmt_side.write_joey_data(data.directory, self.work / "joey-data")
            log(f"training: JoeyNMT transformer, {minutes} minutes of wall clock")
            config = joeynmt_side.joey_config(
                "transformer", joey_data, self.work / "joey-transformer-model",
                batch_tokens=BATCH_TOKENS, seed=1, validation_freq=100000, max_updates=None,
            )  # fmt: skip
            joey = joeynmt_side.train(
                python, config, self.work / "joey-transformer", minutes=minutes
            )
            out["joeynmt-transformer"] = _plain(joey)
            minutes = joey["train_s"] / 60 or minutes
        log(f"training: attnmt transformer, {minutes:.2f} minutes of training")
        out["attnmt-transformer-run"] = attnmt_train(
            CONFIGS["transformer"],
            [*self.overrides(), "train.validate_every=100000"],
            self.work / "attnmt-transformer",
            **self.budget(minutes),
        )

    # 4 --------------------------------------------------------------------------------
    def quality(self) -> None:
        out = self.results.setdefault("quality", {})
        minutes = 0.3 if self.smoke else self.args.minutes
        every = 20 if self.smoke else self.args.validate_every
        data = self.prepared("rnnsearch")
        python = self.joey()
        if python is not None:
            joey_data = joeynmt_side.write_joey_data(data.directory, self.work / "joey-data")
            log(f"quality: JoeyNMT rnnsearch for {minutes} minutes of wall clock")
            config = joeynmt_side.joey_config(
                "rnnsearch", joey_data, self.work / "joey-rnnsearch-model",
                batch_tokens=BATCH_TOKENS, seed=1, validation_freq=every, max_updates=None,
            )  # fmt: skip
            out["joeynmt"] = _plain(
                joeynmt_side.train(python, config, self.work / "joey-rnnsearch", minutes=minutes)
            )
            # The same minutes of training (validation left out) for attnmt.
            minutes = out["joeynmt"]["train_s"] / 60 or minutes
        log(f"quality: attnmt rnnsearch for {minutes:.2f} minutes of training")
        out["attnmt"] = attnmt_train(
            CONFIGS["rnnsearch"],
            [
                *self.overrides(),
                *ARCH_SET["rnnsearch"],
                f"train.validate_every={every}",
                "train.log_every=10",
            ],
            self.work / "attnmt-rnnsearch",
            **self.budget(minutes),
        )
        if "joeynmt" in out and out["joeynmt"]["curve"]:
            target = out["joeynmt"]["curve"][-1]["dev_ppl"]
            out["joeynmt_final_ppl"] = target
            out["attnmt_minutes_to_it"] = minutes_to_reach(out["attnmt"]["curve"], target)
            out["budget_minutes"] = minutes
        self.plot_quality()

    def plot_quality(self) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        out = self.results["quality"]
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
        for name, label in (("attnmt", "attnmt"), ("joeynmt", "JoeyNMT 2.3")):
            curve = out.get(name, {}).get("curve") or []
            minutes = [p["train_seconds"] / 60 for p in curve]
            left.plot(minutes, [p["dev_ppl"] for p in curve], marker="o", label=label)
            right.plot(minutes, [p["dev_bleu"] or 0 for p in curve], marker="o", label=label)
        left.set(xlabel="training minutes (validation not counted)", ylabel="dev perplexity")
        left.set_yscale("log")
        right.set(xlabel="training minutes (validation not counted)", ylabel="dev BLEU")
        for axis in (left, right):
            axis.legend()
            axis.grid(alpha=0.3)
        fig.suptitle("RNNsearch, same data and subwords, 2,048-token batches")
        fig.tight_layout()
        path = self.args.out.parent / "results" / "time_to_quality.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out["plot"] = str(path.relative_to(self.args.out.parent))

    # 5 --------------------------------------------------------------------------------
    def decoding(self) -> None:
        out = self.results.setdefault("decoding", {})
        data = self.prepared("rnnsearch")
        split = data.directory
        test = (split / "test.src").read_text(encoding="utf-8").splitlines()
        count = 6 if self.smoke else self.args.decode_sentences
        beams = (1, 5)
        self.joey()  # JoeyNMT decodes its models of the earlier groups, this group alone too
        # RNNsearch: the models of the quality group, the whole test book.
        rnn = self.work / "attnmt-rnnsearch"
        joey_rnn = self.work / "joey-rnnsearch-model"
        lines = test[:count] if self.smoke else test
        for beam in beams:
            log(f"decoding: RNNsearch, beam {beam}, {len(lines)} sentences")
            if rnn.exists():
                result = attnmt_decode(rnn, lines, beam)
                out[f"rnnsearch-attnmt-beam{beam}"] = _decoded(result, split, len(lines))
            if _joey_checkpoint(joey_rnn) and self.python is not None:
                result = joeynmt_side.decode(
                    self.python, joey_rnn, _lines_file(self.work, lines), beam=beam
                )
                out[f"rnnsearch-joeynmt-beam{beam}"] = _decoded(result, split, len(lines))
        # The Transformer: the first `count` test verses (JoeyNMT has no key/value cache).
        tr = self.work / "attnmt-transformer"
        joey_tr = self.work / "joey-transformer-model"
        lines = test[:count]
        for beam in beams:
            log(f"decoding: Transformer, beam {beam}, {len(lines)} sentences")
            if tr.exists():
                out[f"transformer-attnmt-beam{beam}"] = _decoded(
                    attnmt_decode(tr, lines, beam), split, len(lines)
                )
                out[f"transformer-attnmt-int8-beam{beam}"] = _decoded(
                    attnmt_decode(tr, lines, beam, quantize="int8"), split, len(lines)
                )
                for quantization in ("float32", "int8"):
                    result = ctranslate2_decode(
                        tr, self.work / f"ct2-{quantization}", lines, beam, quantization
                    )
                    out[f"transformer-ctranslate2-{quantization}-beam{beam}"] = _decoded(
                        result, split, len(lines)
                    )
            if _joey_checkpoint(joey_tr) and self.python is not None:
                result = joeynmt_side.decode(
                    self.python, joey_tr, _lines_file(self.work, lines), beam=beam
                )
                out[f"transformer-joeynmt-beam{beam}"] = _decoded(result, split, len(lines))

    # 6 --------------------------------------------------------------------------------
    def data(self) -> None:
        log("data: prepare and train from 30k to 10M pairs, against Hugging Face datasets")
        argv = ["--work", str(self.work / "data-scale")]
        argv += ["--smoke"] if self.smoke else ["--sizes", *map(str, self.args.data_sizes)]
        rows = data_scale.measure_sizes(data_scale.parse(argv))
        self.results["data"] = [{k: v for k, v in r.items() if k != "model"} for r in rows]

    def run(self) -> dict:
        torch.set_num_threads(self.args.threads)
        pick_device("cpu")  # flushed denormals, malloc kept: as every attnmt command
        for group in self.args.groups:
            getattr(self, group)()
            self.save()
        self.results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
        self.save()
        return self.results

    def save(self) -> None:
        """bench.json and the page; a full run (not smoke) is also kept under
        results/machines/<machine>.json, so that the page shows every machine's goals."""
        from report_md import machine_slug, render

        folder = self.args.out.parent / "results"
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.results, indent=1, default=str) + "\n"
        (folder / "bench.json").write_text(text)
        others = []
        if "machine" in self.results and not self.smoke:
            machines = folder / "machines"
            machines.mkdir(exist_ok=True)
            mine = machines / f"{machine_slug(self.results['machine'])}.json"
            mine.write_text(text)
            others = [
                json.loads(path.read_text(encoding="utf-8"))
                for path in sorted(machines.glob("*.json"))
                if path != mine
            ]
        self.args.out.write_text(render(self.results, others), encoding="utf-8")


def _decoded(result: dict, split: Path, count: int) -> dict:
    kept = {k: round(v, 3) for k, v in result.items() if k in ("sentences_per_s", "seconds")}
    kept["sentences"] = count
    kept.update(scores(list(result["hypotheses"]), split, "test", count))
    return kept


def _joey_checkpoint(model_dir: Path) -> bool:
    """Whether a JoeyNMT model folder holds a checkpoint to decode with."""
    return any((model_dir / name).exists() for name in ("best.ckpt", "latest.ckpt"))


def _lines_file(work: Path, lines: list[str]) -> Path:
    path = work / f"test-{len(lines)}.src"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _plain(result: dict) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in result.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", nargs="+", choices=GROUPS, default=list(DEFAULT_GROUPS))
    parser.add_argument(
        "--data-sizes", nargs="+", type=int, default=list(data_scale.SIZES), help="pairs"
    )
    parser.add_argument("--minutes", type=float, default=8.0, help="time-to-quality budget")
    parser.add_argument("--transformer-minutes", type=float, default=3.0)
    parser.add_argument("--validate-every", type=int, default=100, help="steps, both toolkits")
    parser.add_argument("--decode-sentences", type=int, default=200, help="Transformer decoding")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-joeynmt", action="store_true", help="attnmt's side only")
    parser.add_argument(
        "--keep", action="store_true", help="keep the other groups of the last run (same CPU)"
    )
    parser.add_argument("--smoke", action="store_true", help="toy sizes, seconds")
    parser.add_argument("--work", default=str(HERE / "work"))
    parser.add_argument("--out", type=Path, default=HERE / "results.md")
    args = parser.parse_args(argv)
    return Bench(args).run()


if __name__ == "__main__":
    main()
