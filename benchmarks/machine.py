"""The machine a benchmark ran on, and what its matrix products can do at most.

    from machine import describe
    info = describe()      # {"cpu", "cores", "threads", "flags", "torch", "peak_gflops": ...}

Every results file of `make bench` starts with this, because every figure in it is only
meaningful on the machine it was measured on: the fp32 and bf16 matrix-product peaks are
measured on the spot (the best of a few sizes), and model FLOP utilisation (MFU) in the
other groups is a fraction of them.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch

from attnmt.devices import NOTABLE_FLAGS, cpu_flags, cpu_model

SIZES = (512, 1024, 2048)  # square matrix products tried for the peak


def append_result(path: Path, record: dict) -> None:
    """Append `record` as one JSON line to `path` (its folder made if needed): the
    `benchmarks/results/*.jsonl` files every script adds its runs to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def write_block(doc: Path, name: str, text: str) -> None:
    """Replace what stands between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in `doc`
    (a generated block of docs/results.md) with `text`."""
    content = doc.read_text(encoding="utf-8")
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in content or end not in content:
        raise SystemExit(f"{doc} has no {begin} ... {end} markers")
    head, rest = content.split(begin, 1)
    tail = rest.split(end, 1)[1]
    doc.write_text(f"{head}{begin}\n{text}\n{end}{tail}", encoding="utf-8")


def matmul_gflops(
    n: int, dtype: torch.dtype, *, seconds: float = 0.4, device: str = "cpu"
) -> float:
    """GFLOP/s of an (n, n) @ (n, n) product in `dtype`, the best of repeated runs that
    together take about `seconds` (at least one run after a warm-up)."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    cuda = torch.device(device).type == "cuda"

    def run() -> None:
        torch.matmul(a, b)
        if cuda:  # the kernel is queued, not finished, until the GPU says so
            torch.cuda.synchronize()

    run()  # warm-up: kernel selection, caches
    flops = 2.0 * n**3
    best = float("inf")
    spent = 0.0
    while spent < seconds or best == float("inf"):
        started = time.perf_counter()
        run()
        took = time.perf_counter() - started
        best = min(best, took)
        spent += took
    return flops / best / 1e9


def matmul_peak(
    dtype: torch.dtype, *, seconds: float = 0.4, sizes=SIZES, device: str = "cpu"
) -> dict:
    """The best GFLOP/s over `sizes`. An emulated dtype (bf16 without AMX/AVX512-BF16 runs
    ~150x slower) stops after the first size once it is clearly slow, so that measuring it
    never takes minutes."""
    rates = {}
    for n in sizes:
        rates[n] = round(matmul_gflops(n, dtype, seconds=seconds, device=device), 1)
        if rates[n] < 20:  # emulated: a larger size would only take longer
            break
    best = max(rates, key=rates.get)
    # String keys: the same dict after a JSON round trip (bench.py --keep).
    return {"gflops": rates[best], "size": best, "by_size": {str(n): r for n, r in rates.items()}}


GPU_SIZES = (4096, 8192)  # a GPU reaches its peak only on large products


def describe(*, seconds: float = 0.4, sizes=SIZES, device: str = "cpu") -> dict:
    """CPU model, cores, flags, torch, threads and the measured fp32 / bf16 peaks (of the
    GPU with `device="cuda"`, named in "gpu"; fp32 there is what PyTorch's default
    matrix precision gives, TF32 off)."""
    flags = cpu_flags()
    gpu = torch.device(device).type == "cuda"
    sizes = GPU_SIZES if gpu and sizes == SIZES else sizes
    peak = {
        name: matmul_peak(dtype, seconds=seconds, sizes=sizes, device=device)
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    return {
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "flags": sorted(flags & NOTABLE_FLAGS),
        "torch": torch.__version__,
        **({"gpu": torch.cuda.get_device_name(device)} if gpu else {}),
        "peak": peak,
    }


def markdown(info: dict) -> str:
    """The machine as the first lines of a results page."""
    peak = info["peak"]
    flags = ", ".join(info["flags"]) or "none of avx2/avx512/amx"
    return (
        f"- CPU: {info['cpu']} ({info['machine']}), {info['cores']} cores, "
        f"torch {info['torch']} with {info['threads']} threads\n"
        f"- flags: {flags}\n"
        f"- matrix-product peak, measured now: fp32 {peak['fp32']['gflops']:,.1f} GFLOP/s "
        f"(n = {peak['fp32']['size']}), bf16 {peak['bf16']['gflops']:,.1f} GFLOP/s "
        f"(n = {peak['bf16']['size']})\n"
    )


if __name__ == "__main__":
    print(markdown(describe()))
