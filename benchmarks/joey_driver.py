"""What the JoeyNMT side of the benchmark cannot do through `python -m joeynmt`.

Run with the JoeyNMT venv's python (it imports joeynmt 2.3); `joeynmt_side.py` calls it:

    python joey_driver.py decode --model-dir DIR --src FILE --beam 5 --out result.json
    python joey_driver.py stats DIR/latest.ckpt

`decode` loads the model once, then times the translation of every line of FILE alone
(JoeyNMT's own `predict`: tokenize, batch, search, detokenize), so model loading is not
counted. `stats` prints a checkpoint's training counters (steps, target tokens) as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def decode(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    from joeynmt.config import load_config, parse_global_args
    from joeynmt.datasets import StreamDataset
    from joeynmt.prediction import predict, prepare

    model_dir = Path(args.model_dir).resolve()
    cfg = load_config(model_dir / "config.yaml")
    cfg["model_dir"] = model_dir.as_posix()
    testing = cfg.setdefault("testing", {})
    testing["beam_size"] = args.beam
    testing["n_best"] = 1
    testing["batch_size"] = args.batch_size
    testing["batch_type"] = args.batch_type
    if args.ckpt:
        testing["load_model"] = Path(args.ckpt).resolve().as_posix()
    started = time.perf_counter()
    config = parse_global_args(cfg, rank=0, mode="translate")
    model, _, _, stream = prepare(config, rank=0, mode="translate")
    assert isinstance(stream, StreamDataset)
    load_s = time.perf_counter() - started

    lines = Path(args.src).read_text(encoding="utf-8").splitlines()
    keep = [i for i, line in enumerate(lines) if line.strip()]  # JoeyNMT refuses empty lines
    started = time.perf_counter()
    for i in keep:
        stream.set_item(lines[i].strip())
    _, _, hypotheses, _, _, _ = predict(
        model=model,
        data=stream,
        compute_loss=False,
        device=config.device,
        rank=0,
        n_gpu=config.n_gpu,
        normalization="none",
        num_workers=config.num_workers,
        args=config.test,
        autocast=config.autocast,
    )
    seconds = time.perf_counter() - started
    out = [""] * len(lines)
    for i, hyp in zip(keep, hypotheses, strict=True):
        out[i] = hyp
    return {
        "sentences": len(lines),
        "seconds": seconds,
        "load_s": load_s,
        "beam": args.beam,
        "batch_size": args.batch_size,
        "batch_type": args.batch_type,
        "threads": torch.get_num_threads(),
        "checkpoint": str(config.test.load_model or model_dir / "best.ckpt"),
        "hypotheses": out,
    }


def stats(args: argparse.Namespace) -> dict:
    import torch

    state = torch.load(args.ckpt, map_location="cpu", weights_only=False)
    counters = state.get("stats_state", {})
    return {k: counters[k] for k in ("epochs", "steps", "total_tokens") if k in counters}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    dec = sub.add_parser("decode", help="translate a file, timing decoding only")
    dec.add_argument("--model-dir", required=True, help="a JoeyNMT model_dir (config.yaml)")
    dec.add_argument("--ckpt", help="checkpoint (default: best.ckpt, else the latest)")
    dec.add_argument("--src", required=True, help="plain text, one sentence a line")
    dec.add_argument("--beam", type=int, default=1, help="1: greedy, else beam width")
    dec.add_argument("--batch-size", type=int, default=4000)
    dec.add_argument("--batch-type", choices=["token", "sentence"], default="token")
    dec.add_argument("--threads", type=int, default=1)
    dec.add_argument("--out", required=True, help="where the JSON result goes")
    st = sub.add_parser("stats", help="a checkpoint's steps and target tokens")
    st.add_argument("ckpt")
    args = parser.parse_args()
    if args.command == "decode":
        Path(args.out).write_text(json.dumps(decode(args), ensure_ascii=False), encoding="utf-8")
    else:
        print(json.dumps(stats(args)))


if __name__ == "__main__":
    main()
