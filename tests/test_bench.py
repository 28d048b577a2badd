"""`make bench` (benchmarks/bench.py) cannot rot: its smoke version runs every group on toy
sizes and writes the results page; the arithmetic behind its ratios (time to a perplexity,
memory growth, MFU, tokens/s over a run) is checked on known numbers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench  # noqa: E402
import kernels  # noqa: E402
import machine  # noqa: E402
import report_md  # noqa: E402


def test_minutes_to_reach_interpolates_between_validations():
    curve = [
        {"train_seconds": 60, "dev_ppl": 200.0},
        {"train_seconds": 120, "dev_ppl": 100.0},
        {"train_seconds": 180, "dev_ppl": 50.0},
    ]
    # 150 lies halfway from 200 (1 min) to 100 (2 min).
    assert bench.minutes_to_reach(curve, 150.0) == pytest.approx(1.5)
    assert bench.minutes_to_reach(curve, 50.0) == pytest.approx(3.0)
    assert bench.minutes_to_reach(curve, 300.0) == pytest.approx(1.0)  # first point
    assert bench.minutes_to_reach(curve, 10.0) is None


def test_read_metrics_weights_tokens_per_second_by_time(tmp_path):
    rows = [
        {"type": "train", "step": 10, "tokens_per_s": 1000.0, "elapsed": 10.0},
        {"type": "train", "step": 20, "tokens_per_s": 3000.0, "elapsed": 30.0},
        {"type": "valid", "step": 20, "ppl": 80.0, "bleu": 1.5},
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = bench.read_metrics(tmp_path)  # the run directory
    # 10 s at 1,000 and 20 s at 3,000: 70,000 tokens in 30 s.
    assert result["tokens_per_s"] == pytest.approx(70000 / 30, abs=0.1)
    assert result["curve"] == [
        {"train_seconds": 30.0, "step": 20, "dev_ppl": 80.0, "dev_bleu": 1.5}
    ]


def test_matmul_rate_is_flops_over_time():
    rate = machine.matmul_gflops(64, torch.float32, seconds=0.01)
    assert 0.01 < rate < 1e5  # GFLOP/s of 2 n^3 FLOPs, on any machine


def test_additive_step_memory_is_linear_in_source_length():
    rows = kernels.measure((16, 64, 112), shape=kernels.Shape(2, 32, 4), seconds=0.0)
    growth = kernels.step_memory_growth(rows, "additive")
    assert growth == pytest.approx(1.0, abs=0.1)
    flops = {(r["name"], r.get("form"), r["S"]): r["flops"] for r in rows if "flops" in r}
    # dot over all steps: Q Kᵀ and weights V, 2 x (B T S D) multiply-adds each.
    assert flops[("dot", "all steps", 16)] == 2 * 2 * (2 * 16 * 16 * 32)


def test_wide_scores_are_skipped_above_the_memory_limit():
    rows = kernels.measure((16,), shape=kernels.Shape(2, 32, 4), seconds=0.0, max_gib=1e-9)
    skipped = {r["name"] for r in rows if "skipped" in r}
    assert skipped == {"additive", "concat"}
    assert "skipped" in kernels.markdown(rows)


@pytest.mark.slow
def test_smoke_bench_writes_every_group(tmp_path):
    out = tmp_path / "results.md"
    results = bench.main(
        ["--smoke", "--no-joeynmt", "--work", str(tmp_path / "w"), "--out", str(out)]
    )
    page = out.read_text()
    for heading in ("## The machine", "## 1. Training", "## 2. Time to quality", "## 3. Decoding",
                    "## 4. Attention kernels", "profile", "JoeyNMT was set up"):  # fmt: skip
        assert heading in page
    assert json.loads((tmp_path / "results" / "bench.json").read_text())["finished"]
    decoding = results["decoding"]
    for key in ("rnnsearch-attnmt-beam5", "transformer-ctranslate2-int8-beam5",
                "transformer-attnmt-int8-beam1"):  # fmt: skip
        assert decoding[key]["sentences_per_s"] > 0
    mfu = results["training"]["attnmt-transformer"]["mfu"]
    assert mfu > 0
    goals = {goal for goal, *_ in report_md.goal_rows(results)}
    assert "transformer training MFU" in goals


def test_keep_remeasures_only_the_groups_asked(tmp_path):
    args = ["--smoke", "--no-joeynmt", "--work", str(tmp_path / "w")]
    out = ["--out", str(tmp_path / "results.md")]
    first = bench.main([*args, *out, "--groups", "machine"])
    again = bench.main([*args, *out, "--groups", "kernels", "--keep"])
    assert again["machine"] == first["machine"]  # kept, not measured again
    assert again["kernels"] and again["updated"][0]["groups"] == ["kernels"]
    assert "Re-measured on the same machine" in (tmp_path / "results.md").read_text()
    with pytest.raises(SystemExit, match="no earlier results"):
        bench.main([*args, "--out", str(tmp_path / "elsewhere" / "r.md"), "--keep"])


def test_machines_get_a_file_each_and_a_column_each():
    amd = {"cpu": "AMD EPYC", "flags": ["avx2", "fma"]}
    spr = {"cpu": "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz", "flags": ["amx_bf16", "avx512f"]}
    assert report_md.machine_slug(amd) == "amd-epyc-avx2"
    assert report_md.machine_slug(spr) == "intel-xeon-platinum-8480-amx"
    assert report_md.machine_slug({"cpu": "Apple M2", "flags": []}) == "apple-m2-base"

    def run(info: dict, ours: float, joey: float) -> dict:
        training = {"attnmt-rnnsearch": {"mfu": 0.3}}
        quality = {"attnmt": {"tokens_per_s": ours}, "joeynmt": {"tokens_per_s_computed": joey}}
        return {"machine": info, "started": "2026-11-24 10:00:00", "training": training,
                "quality": quality, "args": {}}  # fmt: skip

    page = report_md.machines_table(run(amd, 2000.0, 1000.0), [run(spr, 3300.0, 1000.0)])
    header = next(line for line in page.splitlines() if line.startswith("| goal"))
    assert "AMD EPYC (avx2, fma), 2026-11-24 — this run" in header and "8480+" in header
    row = next(line for line in page.splitlines() if line.startswith("| RNNsearch training"))
    assert row.endswith("| 2.00 (**not met**) | 3.30 (met) |")
    assert "| rnnsearch training MFU | ≥ 50% | 30.0% (**not met**) | 30.0% (**not met**) |" in page


def test_smoke_data_group_prepares_and_trains_from_files(tmp_path):
    out = tmp_path / "results.md"
    results = bench.main(
        ["--smoke", "--no-joeynmt", "--groups", "data", "--work", str(tmp_path / "w"),
         "--out", str(out)]
    )  # fmt: skip
    (row,) = results["data"]
    assert row["pairs"] == 2000 and 0 < row["pairs_kept"] <= 2000
    assert row["store_bytes_per_token"] < 2.5 and row["tokens_per_s"] > 0
    assert row["first_step_s"] > 0 and row["prepare_peak_mb"] > 0
    assert "## 6. Data at scale" in out.read_text()


def test_throughput_times_warm_up_steps_alone_and_divides_by_the_peak():
    import throughput

    peak = {"fp32": {"gflops": 1000.0}}
    overrides = ["data.batch_tokens=200", "train.precision=fp32"]
    result = throughput.measure(
        str(BENCH.parent / "configs/reverse.yaml"),
        overrides,
        steps=2,
        warmup=3,
        rounds=1,
        peak=peak,
    )
    assert len(result["first_steps_s"]) == 3 and min(result["first_steps_s"]) > 0
    assert result["device"] == "cpu" and result["steps"] == 2
    assert result["mfu"] == pytest.approx(result["gflops"] / 1000.0, abs=1e-4)
    assert "peak_allocated_mb" not in result  # the CPU has no allocator peak to read


def test_the_tensors_peak_is_the_highest_running_sum_of_a_step():
    import train_memory
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        big = torch.empty(2**20, dtype=torch.float32)  # 4 MB
        small = torch.empty(2**18, dtype=torch.float32)  # 1 MB, beside it: 5 MB at once
        del big
        later = torch.empty(2**19, dtype=torch.float32)  # 2 MB, after 4 were freed: 3 MB
        del small, later
    assert train_memory.step_peak_mb(prof) == pytest.approx(5.0, abs=0.01)
