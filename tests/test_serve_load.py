"""`attnmt serve` as a real server on loopback, under bounded load (benchmarks/serve_load.py):
20 clients x 10 requests all answered; 200 clients against a 4-place queue get only 200s
and 503s with Retry-After, and the server still answers afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "serve_load.py"


@pytest.mark.slow
def test_load_and_flood(tiny_runs, tmp_path):
    out = tmp_path / "load.jsonl"
    result = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), str(tiny_runs["rnn"]), "--out", str(out)),
            *("--clients", "20", "--requests", "10", "--flood", "200", "--flood-queue", "4"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["steady"]["requests"] == 200 and record["steady"]["errors"] == 0
    assert record["one_client"]["requests"] == 20 and record["one_client"]["errors"] == 0
    assert record["steady"]["p95_ms"] >= record["steady"]["p50_ms"] > 0
    flood = record["flood"]
    assert sum(flood["statuses"].values()) == 200
    # Some 503s: the clients run on the same CPU as the server, so a faster CPU sends faster
    # too, and more cores help the 200 threads, not the one decoding worker. Measured: 154 of
    # 200 here (tiny RNNsearch, Intel Xeon with AMX, 2 busy cores), 183 on an AMD EPYC with
    # the quickstart model (benchmarks/results/serve_load.jsonl).
    assert set(flood["statuses"]) <= {"200", "503"} and flood["statuses"].get("503", 0) > 0
    assert flood["every_503_has_retry_after"] and flood["answers_afterwards"] == [200, 200]
    assert flood["tracebacks_in_log"] == 0
