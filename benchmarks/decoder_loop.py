"""RNNsearch's teacher-forced decoder loop alone, forward and backward: the fused loop
(`attnmt.models.fused`) against the module path (`RNNSearch._recur` at every step).

    python benchmarks/decoder_loop.py                  # B=30, S=64, T=68: a 2,048-token batch
    python benchmarks/decoder_loop.py --batch 40 --src-len 50 --tgt-len 50

The shipped `configs/rnnsearch.yaml` model (E = D = 256) with random weights, in train
mode, on random tokens with varied source lengths; the encoder runs once beforehand and
its outputs enter the loop as leaves, so only the loop and its backward are timed. The two
paths alternate, `--rounds` times, each the mean of `--repeats` passes after two warm-ups.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from attnmt.config import load_config
from attnmt.devices import pick_device
from attnmt.models import build_model
from attnmt.models.rnnsearch import RNNSearch


def measure(
    batch: int = 30,
    src_len: int = 64,
    tgt_len: int = 68,
    *,
    rounds: int = 3,
    repeats: int = 5,
    overrides: list[str] | None = None,
) -> dict:
    """Milliseconds per forward+backward of the loop, each path, per round."""
    pick_device("cpu")  # malloc and denormals as `attnmt train` sets them
    torch.manual_seed(0)
    cfg = load_config("configs/rnnsearch.yaml", list(overrides or []))
    model = build_model(cfg.model, 8000, 8000)
    if not isinstance(model, RNNSearch) or not model._fusable():
        raise SystemExit("the config's model does not take the fused loop (RNNSearch._fusable)")
    model.train()
    lengths = src_len - torch.arange(batch) % max(1, src_len // 3)  # varied, the longest S
    mask = torch.arange(src_len) < lengths[:, None]
    src = torch.randint(4, 8000, (batch, src_len)) * mask
    tgt = torch.randint(4, 8000, (batch, tgt_len))
    memory = model.encode(src, mask)
    state = model.init_state(memory)
    memory = type(memory)(
        mask=mask,
        annotations=memory.annotations.detach().requires_grad_(),
        keys=memory.keys.detach().requires_grad_(),
    )
    state = type(state)(hidden=state.hidden.detach().requires_grad_())
    embedded = model.tgt_embed(tgt).detach().requires_grad_()

    def fused() -> None:
        outputs, contexts, _ = model._decode_fused(embedded, state, memory, False)
        (outputs.sum() + contexts.sum()).backward()

    def module() -> None:
        outputs, contexts, step_state = [], [], state
        for embedded_i in embedded.split(1, dim=1):
            output, context, step_state, _ = model._recur(embedded_i, step_state, memory)
            outputs.append(output)
            contexts.append(context)
        (torch.cat(outputs, dim=1).sum() + torch.cat(contexts, dim=1).sum()).backward()

    def timed(run) -> float:
        for _ in range(2):
            run()
        started = time.perf_counter()
        for _ in range(repeats):
            run()
        return round((time.perf_counter() - started) / repeats * 1e3, 2)

    result: dict = {"batch": batch, "src_len": src_len, "tgt_len": tgt_len}
    result.update(module_ms=[], fused_ms=[])
    for _ in range(rounds):
        result["module_ms"].append(timed(module))
        result["fused_ms"].append(timed(fused))
    result["speedup"] = round(sum(result["module_ms"]) / sum(result["fused_ms"]), 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=30)
    parser.add_argument("--src-len", type=int, default=64)
    parser.add_argument("--tgt-len", type=int, default=68)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    result = measure(
        args.batch, args.src_len, args.tgt_len, rounds=args.rounds, repeats=args.repeats
    )
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
