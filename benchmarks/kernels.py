"""Attention kernels: every score of the library against PyTorch's fused attention.

    python benchmarks/kernels.py                 # S = T in 64, 256, 1024; D = 512; batch 8
    python benchmarks/kernels.py --sizes 64 --seconds 0.05     # the smoke version

For each score (`attention.names()["score"]`, soft, global) and each size it times, in fp32
on the CPU (or the GPU where one is visible):

- **all steps**: T = S queries at once (teacher forcing), forward and forward + backward;
- **one step**: one decoder step (T = 1) against S keys projected once beforehand
  (`precompute_keys`), as the RNN decoders call it.

Beside them two references on the same tensors: `F.scaled_dot_product_attention` (one
head of width D) and a naive softmax(Q Kᵀ / √D) V written out in three operations. And the
multi-head path: `attention.functional.scaled_dot_product` without weights (what
`MultiHeadAttention` runs) against `F.scaled_dot_product_attention` called directly, with
a key-padding mask, H = 8.

Memory is the activation memory the call keeps for the backward pass (every tensor autograd
saves, summed with `torch.autograd.graph.saved_tensors_hooks`; exact and the same on any
machine); on a GPU the peak allocated memory is recorded too. GFLOP/s counts matrix-product
FLOPs with `torch.utils.flop_counter.FlopCounterMode` and is compared with the measured
fp32 peak. A call whose intermediate (B, T, S, hidden) tensor (additive, concat) would
exceed `--max-gib` is skipped and says so: that tensor is why those scores run one decoder
step at a time.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from attnmt import attention
from attnmt.attention import functional as AF

SIZES = (64, 256, 1024)


@dataclass(frozen=True)
class Shape:
    """Batch B, model width D and heads H of every call (S = T varies)."""

    batch: int = 8
    width: int = 512
    heads: int = 8


WIDE_SCORES = ("additive", "concat")  # build a (B, T, S, hidden) tensor


def timed(
    fn: Callable[[], object], *, seconds: float, device: torch.device, stat=statistics.median
) -> float:
    """`stat` (median) of the wall seconds of `fn` over repeated calls lasting about
    `seconds` in all (one warm-up call first, at least three timed calls)."""
    fn()
    times: list[float] = []
    while sum(times) < seconds or len(times) < 3:
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return stat(times)


def saved_bytes(fn: Callable[[], torch.Tensor]) -> int:
    """Bytes of the tensors autograd saves for backward while `fn` runs (each storage once)."""
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn()
    return sum(seen.values())


def counted_flops(fn: Callable[[], object]) -> int:
    """Matrix-product FLOPs of one call of `fn`, as PyTorch's FLOP counter counts them."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def _inputs(shape: Shape, size: int, tgt_len: int, device: torch.device, grad: bool):
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(shape.batch, tgt_len, shape.width, generator=generator)  # (B, T, D)
    key = torch.randn(shape.batch, size, shape.width, generator=generator)  # (B, S, D)
    return query.to(device).requires_grad_(grad), key.to(device).requires_grad_(grad)


def _score_calls(name: str, shape: Shape, size: int, tgt_len: int, device, grad: bool):
    """The forward call of score `name` (context summed, so backward has a scalar)."""
    width = shape.width
    module = attention.build(name, query_dim=width, key_dim=width, max_source_len=size)
    module = module.to(device).requires_grad_(grad)
    query, key = _inputs(shape, size, tgt_len, device, grad)
    if tgt_len == 1:  # one decoder step: keys projected once per sentence, outside the call
        with torch.no_grad():
            projected = module.precompute_keys(key)
        return lambda: module(query, None, key, projected_key=projected).context.sum()
    return lambda: module(query, key, key).context.sum()


def _reference_calls(name: str, shape: Shape, size: int, tgt_len: int, device, grad: bool):
    query, key = _inputs(shape, size, tgt_len, device, grad)
    if name == "sdpa":
        return lambda: F.scaled_dot_product_attention(query, key, key).sum()

    def naive() -> torch.Tensor:
        scores = torch.matmul(query, key.transpose(1, 2)) / math.sqrt(shape.width)  # (B, T, S)
        return torch.matmul(torch.softmax(scores, dim=-1), key).sum()  # (B, T, D) summed

    return naive


def _multihead_calls(name: str, shape: Shape, size: int, device: torch.device):
    """Multi-head attention without weights, (B, H, T, Dh), with a key-padding mask that
    hides the last quarter of the keys of half the sentences."""
    generator = torch.Generator().manual_seed(0)
    dims = (shape.batch, shape.heads, size, shape.width // shape.heads)  # (B, H, S, Dh)
    q, k, v = (torch.randn(*dims, generator=generator).to(device) for _ in range(3))
    mask = torch.ones(shape.batch, 1, 1, size, dtype=torch.bool, device=device)  # (B, 1, 1, S)
    mask[: shape.batch // 2, ..., size - size // 4 :] = False
    if name == "ours":
        return lambda: AF.scaled_dot_product(q, k, v, mask).context
    return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def wide_gib(name: str, shape: Shape, size: int, tgt_len: int) -> float:
    """GiB of the (B, T, S, hidden) tanh tensor of additive/concat (0 for other scores)."""
    if name not in WIDE_SCORES:
        return 0.0
    return shape.batch * tgt_len * size * shape.width * 4 / 2**30


def measure(
    sizes=SIZES,
    *,
    shape: Shape = Shape(),
    seconds: float = 0.5,
    max_gib: float = 2.0,
    peak_gflops: float | None = None,
) -> list[dict]:
    """One row per (kind, name, size, form): times, saved bytes, FLOPs, GFLOP/s, % of peak."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    names = [("score", n) for n in attention.names()["score"]]
    names += [("reference", "sdpa"), ("reference", "naive")]
    for size in sizes:
        for kind, name in names:
            for form, tgt_len in (("all steps", size), ("one step", 1)):
                if kind == "reference" and form == "one step":
                    continue
                row = {"kind": kind, "name": name, "S": size, "T": tgt_len, "form": form}
                rows.append(row)
                gib = wide_gib(name, shape, size, tgt_len)
                if gib > max_gib:
                    row["skipped"] = f"its (B, T, S, hidden) tensor alone is {gib:.0f} GiB"
                    continue
                maker = _score_calls if kind == "score" else _reference_calls
                forward = maker(name, shape, size, tgt_len, device, grad=False)
                with torch.no_grad():
                    row["forward_ms"] = 1e3 * timed(forward, seconds=seconds, device=device)
                    row["flops"] = counted_flops(forward)
                trained = maker(name, shape, size, tgt_len, device, grad=True)
                row["saved_bytes"] = saved_bytes(trained)
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                row["train_ms"] = 1e3 * timed(
                    lambda t=trained: t().backward(), seconds=seconds, device=device
                )
                if device.type == "cuda":
                    row["peak_bytes"] = torch.cuda.max_memory_allocated()
                _rates(row, peak_gflops)
        # Ours against the fused kernel: a few percent apart at most, so the two alternate
        # for five rounds and each keeps its fastest call (noise on this VM only adds time).
        calls = {name: _multihead_calls(name, shape, size, device) for name in ("ours", "sdpa")}
        best = dict.fromkeys(calls, float("inf"))
        with torch.no_grad():
            for _ in range(5):
                for name, call in calls.items():
                    took = timed(call, seconds=seconds / 5, device=device, stat=min)
                    best[name] = min(best[name], took)
        for name, call in calls.items():
            row = {"kind": "multihead", "name": name, "S": size, "T": size}
            row["forward_ms"] = 1e3 * best[name]
            with torch.no_grad():
                row["flops"] = counted_flops(call)
            _rates(row, peak_gflops)
            rows.append(row)
    return rows


def _rates(row: dict, peak_gflops: float | None) -> None:
    if row.get("flops"):
        row["gflops"] = row["flops"] / row["forward_ms"] / 1e6
        if peak_gflops:
            row["of_peak"] = row["gflops"] / peak_gflops


def markdown(rows: list[dict]) -> str:
    """Tables: one for the scores and references, one for the multi-head path."""
    lines = [
        "| score | S = T | form | forward ms | fwd+bwd ms | saved for backward | "
        "GFLOP/s (fwd) | of fp32 peak |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if row["kind"] == "multihead":
            continue
        name = row["name"] if row["kind"] == "score" else f"*{row['name']}* (reference)"
        if "skipped" in row:
            lines.append(
                f"| {name} | {row['S']} | {row['form']} | skipped: {row['skipped']} | | | | |"
            )
            continue
        lines.append(
            f"| {name} | {row['S']} | {row['form']} | {row['forward_ms']:.3f} | "
            f"{row['train_ms']:.3f} | {_size(row['saved_bytes'])} | "
            f"{_maybe(row.get('gflops'), '{:.1f}')} | {_maybe(row.get('of_peak'), '{:.0%}')} |"
        )
    lines += [
        "",
        "| multi-head, no weights, padding mask | S = T | forward ms | ours / fused |",
        "|---|---:|---:|---:|",
    ]
    fused = {r["S"]: r for r in rows if r["kind"] == "multihead" and r["name"] == "sdpa"}
    for row in rows:
        if row["kind"] == "multihead":
            ratio = row["forward_ms"] / fused[row["S"]]["forward_ms"]
            label = (
                "`functional.scaled_dot_product`"
                if row["name"] == "ours"
                else "`F.scaled_dot_product_attention`"
            )
            lines.append(f"| {label} | {row['S']} | {row['forward_ms']:.3f} | {ratio:.2f}x |")
    return "\n".join(lines) + "\n"


def step_memory_growth(rows: list[dict], name: str = "additive") -> float | None:
    """Whether one decoder step of `name` keeps memory linear in S: the saved bytes per
    extra source position between the two largest sizes, divided by the same between the
    two smallest (1.0: linear, a + b S; above 1: growing faster than S). The constant part
    (the weights, the query) cancels out."""
    steps = sorted(
        (r["S"], r["saved_bytes"])
        for r in rows
        if r["name"] == name and r["form"] == "one step" and "saved_bytes" in r
    )
    if len(steps) < 3:
        return None
    (s0, b0), (s1, b1), (s2, b2) = steps[0], steps[1], steps[-1]
    return ((b2 - b1) / (s2 - s1)) / ((b1 - b0) / (s1 - s0))


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def _maybe(value, fmt: str) -> str:
    return "" if value is None else fmt.format(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--seconds", type=float, default=0.5, help="per timed call")
    parser.add_argument("--max-gib", type=float, default=2.0)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    rows = measure(args.sizes, seconds=args.seconds, max_gib=args.max_gib)
    print(json.dumps(rows, indent=1) if args.json else markdown(rows))


if __name__ == "__main__":
    main()
