"""Parity of an ONNX export with the run it came from, on the run's test split: the same
hypotheses, near-ties where they differ, the attention, and BLEU, greedy and beam 5.

    python benchmarks/onnx_parity.py runs/quickstart runs/quickstart/onnx
    python benchmarks/onnx_parity.py RUN EXPORT --beams 1,5 --limit 200

Both decode the same sources (the test split's, cut as `attnmt evaluate` cuts them) with
the same search code (`translate_ids`): our PyTorch model, and `attnmt.runtime`'s
onnxruntime sessions. Reported per beam: sentences with identical outputs, and for each
difference the gap at the first token where they part: the difference of the two tokens'
log-probabilities after their common prefix, under our model (a near-tie, which float32
sums in another order can flip; greedy or beam, all that follows comes from that token);
the largest attention difference over the identical ones; BLEU and chrF of each. An int8
export is compared the same way (its BLEU is the figure; its outputs differ). Appends to
benchmarks/results/onnx_parity.jsonl with the machine's description.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import append_result, describe

from attnmt.data.preparation import decoding_split
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.runs import load_run
from attnmt.decoding.translator import source_limit
from attnmt.metrics import corpus_scores
from attnmt.runtime import load_export

RESULTS = Path(__file__).resolve().parent / "results" / "onnx_parity.jsonl"


def divergence_gap(model, source: list[int], a: list[int], b: list[int]) -> float:
    """Where two outputs first differ, how far apart the model puts their two tokens: the
    log-probability gap after their common prefix (a near-tie is what float32 sums in
    another order can flip; everything after it follows from that token)."""
    import torch

    from attnmt.data.vocab import EOS
    from attnmt.decoding.hypotheses import begin

    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    src = torch.tensor([[*source, EOS]])
    prefix = torch.tensor([a[:common]]) if common else None
    start = begin(model, src, torch.ones_like(src, dtype=torch.bool), prefix)
    with torch.no_grad():
        logits, _, _ = model.step(start.prev, start.state, start.memory)
    log_probs = torch.log_softmax(logits.float(), dim=-1)[0]
    token_a = a[common] if common < len(a) else EOS
    token_b = b[common] if common < len(b) else EOS
    return abs(float(log_probs[token_a] - log_probs[token_b]))


def decode(model, sources, decode_text, beam: int):
    started = time.perf_counter()
    out = translate_ids(model, sources, decode_text, SearchOptions(beam=beam, need_weights=True))
    return out, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("export")
    parser.add_argument("--beams", default="1,5")
    parser.add_argument("--limit", type=int, default=None, help="the first N test sentences")
    parser.add_argument("--tie", type=float, default=1e-3, help="a near-tie: a score gap below")
    args = parser.parse_args(argv)
    loaded = load_run(args.run, device="cpu")
    export = load_export(args.export)
    examples = decoding_split(loaded.cfg.data, "test", loaded.vocab)[: args.limit]
    limit = source_limit(loaded.cfg.model)
    sources = [loaded.vocab.src.encode(ex.src)[:limit] for ex in examples]
    references = [[ex.tgt, *ex.refs] for ex in examples]
    decode_text = loaded.vocab.tgt.decode
    for beam in [int(b) for b in args.beams.split(",")]:
        ours, ours_s = decode(loaded.model, sources, decode_text, beam)
        theirs, theirs_s = decode(export.model, sources, decode_text, beam)
        same, gaps, attention = 0, [], 0.0
        for source, a, b in zip(sources, ours, theirs, strict=True):
            if a.tokens == b.tokens:
                same += 1
                if a.weights is not None:
                    diff = np.abs(np.asarray(b.weights) - a.weights.numpy()).max()
                    attention = max(attention, float(diff))
            else:
                gaps.append(divergence_gap(loaded.model, source, a.tokens, b.tokens))
        bleu_ours = corpus_scores([t.text for t in ours], references)
        bleu_theirs = corpus_scores([t.text for t in theirs], references)
        record = {
            "benchmark": "onnx_parity",
            "run": str(args.run),
            "export": str(args.export),
            "model": loaded.cfg.model.name,
            "quantization": export.info["quantization"],
            "beam": beam,
            "sentences": len(sources),
            "identical": same,
            "identical_share": round(same / len(sources), 4),
            "differences": len(gaps),
            "near_ties": sum(g < args.tie for g in gaps),
            "tie_tolerance": args.tie,
            "largest_gap": round(max(gaps), 6) if gaps else 0.0,
            "score_gaps": sorted(round(g, 6) for g in gaps),
            "attention_max_diff": attention,
            "bleu": {"torch": round(bleu_ours["bleu"], 2), "onnx": round(bleu_theirs["bleu"], 2)},
            "chrf": {"torch": round(bleu_ours["chrf"], 2), "onnx": round(bleu_theirs["chrf"], 2)},
            "seconds": {"torch": round(ours_s, 2), "onnx": round(theirs_s, 2)},
            "machine": describe(),
        }
        append_result(RESULTS, record)
        print(
            f"{loaded.cfg.model.name} {export.info['quantization']} beam {beam}: "
            f"{same}/{len(sources)} identical, {len(gaps)} differ "
            f"({record['near_ties']} near-ties < {args.tie}, largest gap "
            f"{record['largest_gap']}); attention within {attention:.1e}; "
            f"BLEU {record['bleu']['torch']} torch / {record['bleu']['onnx']} onnx; "
            f"{ours_s:.1f} s / {theirs_s:.1f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
