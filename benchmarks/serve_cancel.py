"""Abandoned requests free the worker (issue 39): ten expensive requests whose clients give
up, then a plain one; how soon is it answered?

    python benchmarks/serve_cancel.py runs/quickstart --repeats 3
    python benchmarks/serve_cancel.py runs/quickstart --repeats 3 --baseline
    python benchmarks/serve_cancel.py --rates configs/quickstart.yaml

Serves RUN with uvicorn in a thread of this process on a free loopback port. Each repeat:
one request of integrated gradients at 256 steps is timed to completion, its line count
chosen so that it takes about `--seconds` here (the cost is measured, not assumed); then
ten clients send that request at once (while a short request decodes, so that the ten
share one batch) and give up after `GIVE_UP` s (closing the connection), and a plain
one-sentence translation follows. Printed and appended to
`--out` (one JSON line per repeat): the request's seconds, the plain request's answer time
after the last client left, and (with cancellation) when the worker thread stopped the
abandoned batch. `--baseline` serves the same with `stop_when` disabled (the worker as it
was before issue 39: every abandoned batch decoded to its end), for comparison.
tests/test_serve_cancel.py runs one repeat on a tiny run.

`--rates CONFIG` measures instead what the server's budget counts (`attnmt.serve.budget`)
costs for the config's model (untrained weights: the same cost per step, and its outputs
run to the search's limit, the bound the budget counts): search steps per second (greedy
on 64 sources and beam 5 on 16, of 30 subwords each) and explanation passes per second
(integrated gradients at 32 steps and occlusion, of one 30-subword pair), so that the
`--max-search-steps` and `--max-explain-passes` defaults read as seconds on a machine.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import socket
import sys
import threading
import time
from pathlib import Path

import torch
import uvicorn

import attnmt.serve.worker as worker_module
from attnmt.cancel import Cancelled
from attnmt.config import load_config
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.runs import load_run
from attnmt.explain.gradients import integrated_gradients
from attnmt.explain.methods import occlusion
from attnmt.models.builder import build_model
from attnmt.serve import RunDecoder, Settings, create_app
from attnmt.serve.budget import LineSize, explain_passes, search_steps

GIVE_UP = 1.0  # seconds each abandoning client waits for its answer
IG = {"explain": "integrated-gradients", "ig_steps": 256}
LINE = "the cat sat on the mat dog ran far the cat sat on the mat dog ran far"
# The budget allows it all, and the ten requests fit one batch.
SETTINGS = Settings(max_explain_passes=10**9, timeout=600, batch_lines=1024)


class Server:
    """`app` served by uvicorn on a free loopback port, in a thread of this process."""

    def __init__(self, app) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        # No log config of its own: its records reach the root logger (and pytest's caplog).
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", log_config=None
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="bench-uvicorn")

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def post(self, path: str, body: dict, timeout: float) -> tuple[int, dict]:
        """(status, JSON answer); raises TimeoutError when `timeout` s pass first, after
        closing the connection (the client gives up)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = {"content-type": "application/json"}
            connection.request("POST", path, json.dumps(body), headers)
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()


def timed(server: Server, body: dict) -> float:
    started = time.perf_counter()
    status, answer = server.post("/api/translate", body, timeout=600)
    if status != 200:
        raise RuntimeError(f"{status}: {answer}")
    return time.perf_counter() - started


def calibrate(server: Server, seconds: float, line: str = LINE) -> dict:
    """The integrated-gradients request that takes about `seconds` here: one line timed
    (the faster of two: the first also makes the run's translator), then the request of
    that many lines timed to completion (once more, longer, if it took under half of
    `seconds`: lines in one request cost less each than alone)."""
    one_line = min(timed(server, {"text": line, **IG}) for _ in range(2))
    lines = max(1, min(64, math.ceil(seconds / one_line)))
    request = timed(server, {"lines": [line] * lines, **IG})
    if request < seconds / 2 and lines < 64:
        lines = min(64, math.ceil(lines * seconds / request))
        request = timed(server, {"lines": [line] * lines, **IG})
    body = {"lines": [line] * lines, **IG}
    return {"body": body, "lines": lines, "one_line_s": one_line, "request_s": request}


def abandon(server: Server, worker, body: dict, clients: int = 10) -> dict:
    """`clients` clients send `body` while the worker decodes a short request (held until
    all of them wait, so that they share one batch, as requests that arrive together do)
    and give up after GIVE_UP s; then a plain translation. Returns when the last client
    left (perf_counter seconds) and how soon after it the plain answer came."""
    decode, taken, release = worker.decode, threading.Event(), threading.Event()

    def held(lines, options):
        taken.set()
        release.wait(60)
        return decode(lines, options)

    worker.decode = held
    blocker = threading.Thread(
        target=server.post, args=("/api/translate", {"text": "the cat"}, 600)
    )
    blocker.start()
    taken.wait(60)
    worker.decode = decode  # the next batch decodes as usual
    gave_up: list[float] = []

    def client() -> None:
        with contextlib.suppress(TimeoutError):
            server.post("/api/translate", body, timeout=GIVE_UP)
            return
        gave_up.append(time.perf_counter())

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + GIVE_UP / 2
    while worker.waiting < clients and time.monotonic() < deadline:
        time.sleep(0.005)
    release.set()
    for thread in [blocker, *threads]:
        thread.join(600)
    left = max(gave_up, default=time.perf_counter())
    status, answer = server.post("/api/translate", {"text": "the cat"}, timeout=600)
    return {
        "gave_up": len(gave_up),
        "left": left,
        "plain_status": status,
        "plain_after_s": time.perf_counter() - left,
        "plain_translations": len(answer.get("translations", [])),
    }


def stop_times(worker) -> list[float]:
    """Wrap `worker.decode` so that the perf_counter time of each `Cancelled` is recorded
    in the returned list."""
    decode, stops = worker.decode, []

    def recorded(lines, options):
        try:
            return decode(lines, options)
        except Cancelled:
            stops.append(time.perf_counter())
            raise

    worker.decode = recorded
    return stops


def rates(config: str, length: int = 30, vocab: int = 4000) -> dict:
    """Search steps and explanation passes per second for `config`'s model (see above)."""
    torch.manual_seed(0)
    model = build_model(load_config(config).model, vocab, vocab).eval()

    def sources(n: int) -> list[list[int]]:
        return torch.randint(4, vocab, (n, length)).tolist()

    size = LineSize(length, 2 * (length + 1) + 5, length + 1)  # the budget's view
    out = {"config": config, "source_subwords": length, "torch_threads": torch.get_num_threads()}
    for beam, lines in ((1, 64), (5, 16)):
        started = time.perf_counter()
        translate_ids(model, sources(lines), lambda ids: "", SearchOptions(beam=beam))
        steps = search_steps(beam, [size] * lines)
        out[f"beam{beam}_steps_per_s"] = round(steps / (time.perf_counter() - started))
    src, tgt = sources(2)
    for method in ("integrated-gradients", "occlusion"):
        started = time.perf_counter()
        if method == "occlusion":
            occlusion(model, src, tgt)
        else:
            integrated_gradients(model, src, tgt, 32)
        passes = explain_passes(method, 32, [size])
        out[f"{method}_passes_per_s"] = round(passes / (time.perf_counter() - started), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", help="a run directory that reads text")
    parser.add_argument("--rates", metavar="CONFIG", help="measure the budget's units instead")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="one request's cost")
    parser.add_argument("--baseline", action="store_true", help="without cancellation")
    parser.add_argument("--out", type=Path, default=None, help="append JSON lines here")
    args = parser.parse_args(argv)
    if args.rates:
        print(json.dumps(rates(args.rates)), flush=True)
        return 0
    if args.run is None:
        parser.error("give a RUN (or --rates CONFIG)")
    if args.baseline:  # the worker before issue 39: nothing stops an abandoned batch
        worker_module.stop_when = lambda _should_stop: contextlib.nullcontext()
    settings = SETTINGS
    app = create_app({"run": RunDecoder("run", load_run(args.run), settings)}, settings)
    worker = app.state.workers["run"]
    stops = stop_times(worker)
    with Server(app) as server:
        for repeat in range(args.repeats):
            cost = calibrate(server, args.seconds)
            done = abandon(server, worker, cost["body"])
            stopped = [t - done["left"] for t in stops]
            stops.clear()
            record = {
                "repeat": repeat,
                "baseline": args.baseline,
                **{k: v for k, v in cost.items() if k != "body"},
                "gave_up": done["gave_up"],
                "plain_after_s": round(done["plain_after_s"], 3),
                "cancelled_batches": len(stopped),
                "stopped_after_s": [round(s, 3) for s in stopped],
            }
            print(json.dumps(record), flush=True)
            if args.out is not None:
                with args.out.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
