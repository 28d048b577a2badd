"""`attnmt serve` under load, on loopback: latency, throughput, and what a flood gets.

    python benchmarks/serve_load.py runs/quickstart
    python benchmarks/serve_load.py runs/quickstart --clients 20 --requests 10 \\
        --flood 200 --flood-queue 4

Phase 1 starts `attnmt serve RUN` (its default queue) on a free loopback port and sends
one client's 20 requests in a row, then `--clients` concurrent clients x `--requests`
requests, each one sentence, weights included (what the explorer page asks for). Every
answer must be 200: it prints p50/p95 latency and requests per second, beside the
reference measured in the same run: the same sentences translated by the library's
`Translator` in this process, one call per sentence (served / library = what HTTP, JSON
and the queue cost, or what batching gains).

Phase 2 restarts the server with a queue of `--flood-queue` places and sends `--flood`
clients at once, one request each: the answers must be 200 or 503 with Retry-After (never
500, never a dropped connection), and afterwards the server still answers.

Appends one JSON line to benchmarks/results/serve_load.jsonl (`--out` elsewhere); exit
status 1 when either phase sees an answer it should not.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "serve_load.jsonl"
SENTENCES = [
    "In the beginning was the Word.",
    "And the light shines in the darkness.",
    "He came to his own, and those who were his own did not receive him.",
    "Jesus said to them, Come and see.",
    "The wind blows where it wants to, and you hear its sound.",
    "I am the bread of life.",
    "Love one another, as I have loved you.",
    "Peace I leave with you.",
    "The truth will make you free.",
    "Where are you going?",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(url: str, body: dict | None = None, timeout: float = 120.0):
    """(status, headers in lower case, seconds) of one request; no connection = status 0."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            answer.read()
            headers = {k.lower(): v for k, v in answer.headers.items()}
            return answer.status, headers, time.perf_counter() - start
    except urllib.error.HTTPError as err:
        err.read()
        headers = {k.lower(): v for k, v in err.headers.items()}
        return err.code, headers, time.perf_counter() - start
    except OSError:
        return 0, {}, time.perf_counter() - start


class Server:
    """`attnmt serve` in a subprocess on a free loopback port, until `stop`."""

    def __init__(self, run: str, *extra: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "attnmt", "serve", run, "--port", str(self.port)]
        self.process = subprocess.Popen(
            [*command, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 120
        while call(f"{self.base}/api/health", timeout=2)[0] != 200:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"attnmt serve did not start: {self.process.stderr.read()}")
            time.sleep(0.2)

    def stop(self) -> str:
        self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return err


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def library_rate(run: str, sentences: list[str]) -> float:
    """Sentences per second of the library's Translator, one call per sentence."""
    from attnmt.decoding.runs import load_run
    from attnmt.decoding.translator import Translator

    translator = Translator(load_run(run), need_weights=True)
    translator.translate(sentences[:2])  # warm-up, as the server's first requests are
    start = time.perf_counter()
    for sentence in sentences:
        translator.translate([sentence])
    return len(sentences) / (time.perf_counter() - start)


def steady(run: str, clients: int, requests: int) -> dict:
    server = Server(run)
    try:
        url = f"{server.base}/api/translate"
        call(url, {"text": SENTENCES[0], "weights": True})  # warm-up

        def client(index: int) -> list[tuple[int, float]]:
            out = []
            for r in range(requests):
                body = {"text": SENTENCES[(index + r) % len(SENTENCES)], "weights": True}
                status, _, seconds = call(url, body)
                out.append((status, seconds))
            return out

        start = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            answers = [a for chunk in pool.map(client, range(clients)) for a in chunk]
        wall = time.perf_counter() - start
    finally:
        server.stop()
    latencies = [seconds for _, seconds in answers]
    errors = sum(status != 200 for status, _ in answers)
    return {
        "clients": clients,
        "requests": len(answers),
        "errors": errors,
        "p50_ms": round(1000 * percentile(latencies, 0.50), 1),
        "p95_ms": round(1000 * percentile(latencies, 0.95), 1),
        "mean_ms": round(1000 * statistics.fmean(latencies), 1),
        "requests_per_s": round(len(answers) / wall, 2),
    }


def flood(run: str, clients: int, queue: int) -> dict:
    server = Server(run, "--queue-size", str(queue))
    try:
        url = f"{server.base}/api/translate"

        def client(index: int):
            return call(url, {"text": SENTENCES[index % len(SENTENCES)], "weights": True})

        with ThreadPoolExecutor(clients) as pool:
            answers = list(pool.map(client, range(clients)))
        after = call(url, {"text": SENTENCES[0]})[0], call(f"{server.base}/api/health")[0]
    finally:
        log = server.stop()
    statuses: dict[str, int] = {}
    for status, _, _ in answers:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    retry_after = all("retry-after" in headers for status, headers, _ in answers if status == 503)
    return {
        "clients": clients,
        "queue": queue,
        "statuses": statuses,
        "every_503_has_retry_after": retry_after,
        "answers_afterwards": list(after),
        "tracebacks_in_log": log.count("Traceback"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run directory, e.g. runs/quickstart")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=10, help="requests per client")
    parser.add_argument("--flood", type=int, default=200, help="clients at once in phase 2")
    parser.add_argument("--flood-queue", type=int, default=4, help="the queue in phase 2")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON-lines file")
    args = parser.parse_args()

    from attnmt.devices import NOTABLE_FLAGS, cpu_flags, cpu_model

    reference = library_rate(args.run, SENTENCES * 2)
    alone = steady(args.run, 1, 2 * len(SENTENCES))
    phase1 = steady(args.run, args.clients, args.requests)
    phase2 = flood(args.run, args.flood, args.flood_queue)
    record = {
        "run": args.run,
        "cpu": cpu_model(),
        "cpu_flags": sorted(cpu_flags() & NOTABLE_FLAGS),
        "threads": os.environ.get("OMP_NUM_THREADS", "default"),
        "library_sentences_per_s": round(reference, 2),
        "one_client": alone,
        "steady": phase1,
        "served_over_library": round(phase1["requests_per_s"] / reference, 2),
        "flood": phase2,
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(record, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
    ok = alone["errors"] == phase1["errors"] == 0 and set(phase2["statuses"]) <= {"200", "503"}
    ok = ok and phase2["every_503_has_retry_after"] and phase2["answers_afterwards"] == [200, 200]
    ok = ok and phase2["tracebacks_in_log"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
