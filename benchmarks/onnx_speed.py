"""Speed of an ONNX export against our PyTorch decoder (and CTranslate2 for a Transformer):
sentences/s, one sentence at a time and the whole test set in batches, greedy and beam 5,
in one process, the engines alternating; then cold start and install size.

    python benchmarks/onnx_speed.py runs/quickstart runs/quickstart/onnx
    python benchmarks/onnx_speed.py runs/transformer runs/transformer/onnx --ct2 DIR
    python benchmarks/onnx_speed.py RUN EXPORT --lines 100 --rounds 3 --threads 2

The sentences are the run's test split (the first `--lines` one at a time; all of them in
batches, as `attnmt translate` batches them). Both sides run the same search code
(`translate_ids`); torch with `--threads` threads, onnxruntime with as many for one
operator and no spinning (attnmt.runtime.model.session_options). Each round times every
engine once (the order rotated every round); the figure is the median of the rounds.
Cold start: a fresh `attnmt translate` process (torch's and the export's) reading one line,
median of 3. Appends to benchmarks/results/onnx_speed.jsonl with the machine's description.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import append_result, describe

from attnmt.data.preparation import decoding_split
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.runs import load_run
from attnmt.decoding.translator import source_limit
from attnmt.runtime import load_export

RESULTS = Path(__file__).resolve().parent / "results" / "onnx_speed.jsonl"
ATTNMT = [sys.executable, "-m", "attnmt"]


def ct2_decoder(directory: str, threads: int):
    """CTranslate2's translator on our subwords (its vocabulary keeps our ids and adds the
    source EOS itself), each output capped as ours is: 2 x (source + EOS) + 5 tokens."""
    import ctranslate2

    translator = ctranslate2.Translator(directory, device="cpu", intra_threads=threads)

    def decode(loaded, sources, beam: int, batch: bool) -> None:
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        size = 64 if batch else 1
        for start in range(0, len(order), size):
            chosen = [sources[i] for i in order[start : start + size]]
            longest = max(len(ids) for ids in chosen) + 1
            translator.translate_batch(
                [loaded.vocab.src.id_pieces(ids) for ids in chosen],
                beam_size=beam,
                length_penalty=0.6,
                max_decoding_length=2 * longest + 5,
                max_batch_size=size,
            )

    return decode


def timed(decode, *args) -> float:
    started = time.perf_counter()
    decode(*args)
    return time.perf_counter() - started


def cold_start(path: str, line: str) -> float:
    """Seconds from process start to the first translation printed."""
    started = time.perf_counter()
    subprocess.run(
        [*ATTNMT, "translate", path, "-"], input=line, text=True, capture_output=True, check=True
    )
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("export")
    parser.add_argument("--ct2", default=None, help="a CTranslate2 export of the same run")
    parser.add_argument("--lines", type=int, default=100, help="one at a time: the first N")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--beams", default="1,5")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--no-batch", action="store_true", help="skip the whole test set")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    loaded = load_run(args.run, device="cpu")
    export = load_export(args.export, threads=args.threads)
    examples = decoding_split(loaded.cfg.data, "test", loaded.vocab)
    limit = source_limit(loaded.cfg.model)
    sources = [loaded.vocab.src.encode(ex.src)[:limit] for ex in examples]
    text = loaded.vocab.tgt.decode

    def ours(model):
        def decode(_, chosen, beam: int, batch: bool) -> None:
            if batch:
                translate_ids(model, chosen, text, SearchOptions(beam=beam))
            else:
                for ids in chosen:
                    translate_ids(model, [ids], text, SearchOptions(beam=beam))

        return decode

    engines = {"torch": ours(loaded.model), "onnx": ours(export.model)}
    if args.ct2:
        engines["ctranslate2"] = ct2_decoder(args.ct2, args.threads)
    settings = [("one", sources[: args.lines])]
    if not args.no_batch:
        settings.append(("batch", sources))
    for beam in [int(b) for b in args.beams.split(",")]:
        for setting, chosen in settings:
            batch = setting == "batch"
            for decode in engines.values():  # warm-up
                decode(loaded, chosen[:5], beam, batch)
            seconds: dict[str, list[float]] = {name: [] for name in engines}
            names = list(engines)
            for round_ in range(args.rounds):
                order = names[round_ % len(names) :] + names[: round_ % len(names)]
                for name in order:
                    seconds[name].append(timed(engines[name], loaded, chosen, beam, batch))
            rate = {n: round(len(chosen) / statistics.median(s), 2) for n, s in seconds.items()}
            record = {
                "benchmark": "onnx_speed",
                "run": str(args.run),
                "model": loaded.cfg.model.name,
                "quantization": export.info["quantization"],
                "beam": beam,
                "setting": setting,
                "sentences": len(chosen),
                "threads": args.threads,
                "seconds": {n: [round(x, 3) for x in s] for n, s in seconds.items()},
                "sentences_per_s": rate,
                "onnx_over_torch": round(rate["onnx"] / rate["torch"], 3),
            }
            if "ctranslate2" in rate:
                record["onnx_over_ctranslate2"] = round(rate["onnx"] / rate["ctranslate2"], 3)
            record["machine"] = describe()
            append_result(RESULTS, record)
            print(f"beam {beam} {setting}: {rate} onnx/torch {record['onnx_over_torch']}")
    line = examples[0].src + "\n"
    cold = {
        name: round(statistics.median(cold_start(path, line) for _ in range(3)), 2)
        for name, path in (("torch", args.run), ("onnx", args.export))
    }
    record = {
        "benchmark": "onnx_cold_start",
        "run": str(args.run),
        "model": loaded.cfg.model.name,
        "quantization": export.info["quantization"],
        "seconds": cold,
        "onnx_over_torch": round(cold["onnx"] / cold["torch"], 3),
        "machine": describe(),
    }
    append_result(RESULTS, record)
    print(f"cold start: {cold}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
