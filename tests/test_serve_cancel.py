"""Expensive requests end with their client (issue 39): the search and the explanations stop
at their next checkpoint once nobody waits (`attnmt.cancel`), the worker stops a batch only
when every one of its clients has left or timed out, and the server states a compute
budget, refusing more with 413 and what to lower."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from attnmt.cancel import Cancelled, checkpoint, stop_when
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data.batching import pad_batch
from attnmt.data.vocab import EOS
from attnmt.decoding.attention_choice import AttentionChoice
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.runs import load_run
from attnmt.decoding.scoring import forced_decode
from attnmt.decoding.search import beam_search, greedy
from attnmt.explain import explain
from attnmt.models.builder import build_model
from attnmt.models.vision import cell_boxes
from attnmt.serve import RunDecoder, Settings, create_app
from attnmt.serve.budget import LineSize, explain_passes, search_steps
from attnmt.serve.worker import ClientGoneError, ModelWorker, Options
from attnmt.service import Request

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import serve_cancel  # benchmarks/serve_cancel.py: the server and the ten clients

# --- checkpoint and the search -----------------------------------------------------------------


def test_checkpoint_outside_stop_when_never_raises():
    for _ in range(1000):
        checkpoint()
    inside, raised = threading.Event(), threading.Event()
    release = threading.Event()

    def other_thread():
        with stop_when(lambda: True):
            inside.set()
            release.wait(10)
            try:
                checkpoint()
            except Cancelled:
                raised.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    assert inside.wait(10)
    checkpoint()  # another thread's stop_when does not reach this one
    release.set()
    thread.join(10)
    assert raised.is_set()
    with stop_when(lambda: False):
        checkpoint()
        with stop_when(lambda: True), pytest.raises(Cancelled):
            checkpoint()  # the innermost predicate applies
        checkpoint()  # and the outer one again after it
    checkpoint()


@pytest.fixture(scope="module")
def tiny_model():
    """An untrained tiny RNNsearch (its decoding never ends by itself: see `counting`)."""
    torch.manual_seed(0)
    cfg = load_config(None, ["model.embed_size=8", "model.hidden_size=16"])
    return build_model(cfg.model, 20, 20).eval()


def counting(model, calls: list[int]):
    """`model` whose `step` is counted in `calls` and never writes EOS (so a search runs to
    its length limit unless stopped)."""
    step = model.step

    def counted(*args, **kwargs):
        calls.append(1)
        logits, state, weights = step(*args, **kwargs)
        logits = logits.clone()
        logits[..., EOS] = -1e9
        return logits, state, weights

    model.step = counted
    return model


@pytest.mark.parametrize("beam", [1, 3])
def test_the_search_stops_within_one_step(tiny_model, beam):
    src, src_mask = pad_batch([[5, 6, 7, 8] * 5, [9, 10]], torch.device("cpu"))  # limit 40
    calls: list[int] = []
    model = counting(tiny_model, calls)
    try:
        search = greedy if beam == 1 else beam_search
        options = SearchOptions(beam=beam, max_len=40)
        full = search(model, src, src_mask, options)  # not inside stop_when
        assert len(calls) == 40 and len(full) == 2
        calls.clear()
        with stop_when(lambda: len(calls) >= 3), pytest.raises(Cancelled):
            search(model, src, src_mask, options)
        assert len(calls) == 3  # the step after the predicate turned true never ran
    finally:
        del tiny_model.step  # the class's step again


def test_forced_decoding_and_explanations_stop_between_chunks(tiny_model):
    forwards: list[int] = []
    forward = tiny_model.forward

    def counted(*args, **kwargs):
        forwards.append(1)
        return forward(*args, **kwargs)

    pairs = [([5 + i, 6, 7], [8, 9 + i]) for i in range(6)]
    tiny_model.forward = counted
    try:
        forced_decode(tiny_model, pairs, batch_tokens=4)  # a batch per pair
        assert len(forwards) == 6
        forwards.clear()
        with stop_when(lambda: len(forwards) >= 2), pytest.raises(Cancelled):
            forced_decode(tiny_model, pairs, batch_tokens=4)
        assert len(forwards) == 2
        choice = AttentionChoice()  # an RNN's one attention
        for method in ("occlusion", "integrated-gradients"):
            forwards.clear()
            explain(tiny_model, pairs[:1], method, choice, ig_steps=4)
            one_sentence = len(forwards)
            forwards.clear()
            with stop_when(lambda: len(forwards) >= 1), pytest.raises(Cancelled):
                explain(tiny_model, pairs, method, choice, ig_steps=4)
            assert 1 <= len(forwards) <= one_sentence, method  # stopped within a sentence
    finally:
        del tiny_model.forward


# --- the worker ---------------------------------------------------------------------------------


class Spin:
    """A decode function that works in small checkpointed steps until `finish` is set."""

    def __init__(self):
        self.finish, self.entered = threading.Event(), threading.Event()
        self.steps, self.stopped = 0, 0

    def __call__(self, lines, options):
        self.entered.set()
        try:
            while not self.finish.is_set():
                checkpoint()
                self.steps += 1
                time.sleep(0.002)
        except Cancelled:
            self.stopped += 1
            raise
        return [f"{line}!" for line in lines]


async def until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_batch_stops_only_when_all_its_clients_are_gone():
    spin = Spin()
    worker = ModelWorker("m", spin, capacity=8, batch_lines=8)
    options = Options(Request())

    async def scenario():
        gone = {"b": asyncio.Event(), "c": asyncio.Event()}

        def client(name):
            async def disconnected():
                return gone[name].is_set()

            return asyncio.ensure_future(
                worker.run([name], options, timeout=30, disconnected=disconnected)
            )

        b, c = client("b"), client("c")
        await until(lambda: worker.waiting == 2)
        worker.start()  # "b" and "c" are taken together: one batch
        await asyncio.to_thread(spin.entered.wait, 10)
        gone["b"].set()
        with pytest.raises(ClientGoneError):
            await b
        steps = spin.steps
        await asyncio.sleep(0.2)
        assert spin.steps > steps and worker.cancelled == 0  # "c" still waits: it goes on
        gone["c"].set()
        with pytest.raises(ClientGoneError):
            await c
        await until(lambda: worker.cancelled == 1)  # the last client left: it stops
        spin.finish.set()
        return await worker.run(["d"], options, timeout=10)  # and the thread goes on

    try:
        assert asyncio.run(scenario()) == ["d!"]
    finally:
        worker.stop()
    assert spin.stopped == 1 and worker.batches == 1 and worker.jobs_done == 1


def test_a_deadline_stops_the_work_of_a_client_that_still_waits():
    spin = Spin()
    worker = ModelWorker("m", spin, capacity=8)

    async def scenario():
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await worker.run(["a"], Options(Request()), timeout=0.3)
        await until(lambda: worker.cancelled == 1)
        return time.monotonic() - started

    worker.start()
    try:
        assert asyncio.run(scenario()) < 5
    finally:
        worker.stop()
    assert spin.stopped == 1 and worker.batches == 0 and worker.waiting == 0


# --- the budget ---------------------------------------------------------------------------------


def test_the_budget_counts():
    sizes = [LineSize(source=3, output=13, target=4), LineSize(source=9, output=25, target=7)]
    assert search_steps(5, sizes) == 5 * (13 + 25)
    assert explain_passes("integrated-gradients", 16, sizes) == (16 * 4 + 2) + (16 * 7 + 2)
    assert explain_passes("grad-input", 16, sizes) == 4 + 7
    assert explain_passes("occlusion", 16, sizes) == 4 + 10
    assert explain_passes("occlusion", 16, sizes, cells=96) == 2 * 97
    assert explain_passes("rollout", 16, sizes) == 4


@pytest.fixture(scope="module")
def rnn(tiny_runs):
    return load_run(tiny_runs["rnn"])


def budget_client(run, **settings) -> TestClient:
    options = Settings(**settings)
    return TestClient(create_app({"rnn": RunDecoder("rnn", run, options)}, options))


def test_the_budget_is_stated_and_counts_what_the_answer_reports(rnn):
    pairs = [{"source": "the cat sat", "target": "sat cat the"}, {"source": "dog", "target": ""}]
    with budget_client(rnn) as client:
        limits = client.get("/api/model").json()["limits"]
        assert limits["max_search_steps"] == Settings.max_search_steps == 131_072
        assert limits["max_explain_passes"] == Settings.max_explain_passes == 4_096
        schema = client.get("/openapi.json").json()["components"]["schemas"]["Limits"]
        assert "413" in schema["properties"]["max_explain_passes"]["description"]
        for method in ("integrated-gradients", "occlusion", "grad-input"):
            body = {"pairs": pairs, "explain": method, "ig_steps": 8}
            answer = client.post("/api/score", json=body)
            assert answer.status_code == 200, answer.text
            # The gradient methods' count is their backward passes (integrated gradients:
            # and the two ends of each line), the others' their forward passes.
            counted = "forward" if method == "occlusion" else "backward"
            reported = sum(s["explanations"][0][counted] for s in answer.json()["scores"])
            reported += 2 * len(pairs) if method == "integrated-gradients" else 0
            src, tgt = rnn.vocab.src, rnn.vocab.tgt
            sizes = [
                LineSize(len(src.encode(p["source"])), 0, len(tgt.encode(p["target"])) + 1)
                for p in pairs
            ]
            assert reported == explain_passes(method, 8, sizes), method


def test_over_the_budget_is_413_saying_what_to_lower(rnn):
    line = "the cat sat on the mat"
    subwords = len(rnn.vocab.src.encode(line))
    with budget_client(rnn, max_search_steps=500, max_explain_passes=2000) as client:
        body = {"lines": [line] * 10, "explain": "integrated-gradients", "ig_steps": 256}
        answer = client.post("/api/translate", json=body)
        passes = 10 * (256 * (subwords + 1) + 2)
        assert answer.status_code == 413
        assert answer.json()["detail"] == (
            f"integrated-gradients at 256 steps on 10 lines (about {10 * (subwords + 1):,} "
            f"target tokens) is {passes:,} passes through the model, over this server's 2,000 "
            "(--max-explain-passes): lower ig_steps or send fewer or shorter lines"
        )
        output = 2 * (subwords + 1) + 5
        answer = client.post("/api/translate", json={"lines": [line] * 10, "beam": 4})
        assert answer.status_code == 413
        assert answer.json()["detail"] == (
            f"beam 4 on 10 lines (up to {10 * output:,} output tokens) is {40 * output:,} "
            "search steps, over this server's 500 (--max-search-steps): lower beam or send "
            "fewer or shorter lines"
        )
        # Within it: answered; blank lines and lines answered with an error cost nothing.
        body = {"lines": [line, "", "x" * 3000], "beam": 4}
        assert client.post("/api/translate", json=body).status_code == 200
        assert client.get("/api/health").json()["models"]["rnn"]["cancelled"] == 0


def test_an_image_occlusion_counts_the_cells_it_blacks_out(tiny_image_runs):
    run = load_run(tiny_image_runs["soft"])  # Show-Attend-Tell on 24x64 canvases
    cells = len(cell_boxes(24, 64))
    body = {"image": [[0] * 64] * 24, "explain": "occlusion"}
    answers = []
    for limit in (cells, cells + 1):  # the reading and each cell: one pass too many, enough
        options = Settings(max_explain_passes=limit)
        app = create_app({"soft": RunDecoder("soft", run, options)}, options)
        with TestClient(app) as client:
            answers.append(client.post("/api/read", json=body))
    over, within = answers
    assert over.status_code == 413 and over.json()["detail"] == (
        f"occlusion on 1 image is {cells + 1} passes through the model, over this server's "
        f"{cells} (--max-explain-passes): send fewer images"
    )
    assert within.status_code == 200, within.text
    assert within.json()["readings"][0]["explanation"]["forward"] == cells + 1


def test_serve_takes_the_budget_flags(capsys, monkeypatch, tiny_runs):
    assert main(["serve", str(tiny_runs["rnn"]), "--max-explain-passes", "0"]) == 2
    assert "--max-explain-passes must be at least 1" in capsys.readouterr().err
    started = {}
    monkeypatch.setattr("attnmt.cli.serve.uvicorn.run", lambda app, **kw: started.update(app=app))
    flags = ["--max-search-steps", "77", "--max-explain-passes", "88"]
    assert main(["serve", str(tiny_runs["rnn"]), *flags]) == 0
    with TestClient(started["app"]) as client:
        limits = client.get("/api/model").json()["limits"]
    assert (limits["max_search_steps"], limits["max_explain_passes"]) == (77, 88)


# --- a real server: ten expensive requests whose clients give up ---------------------------------


def rss_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096


def threads() -> list[str]:
    """This process's threads but AnyIO's pool (FastAPI's thread pool for plain-def routes
    and dependencies: bounded, its idle threads leave on their own)."""
    return sorted(t.name for t in threading.enumerate() if t.name != "AnyIO worker thread")


def test_ten_abandoned_explanations_free_the_worker(rnn, caplog):
    settings = serve_cancel.SETTINGS  # the budget allows it all; the ten share a batch
    app = create_app({"rnn": RunDecoder("rnn", rnn, settings)}, settings)
    worker = app.state.workers["rnn"]
    stops = serve_cancel.stop_times(worker)
    with serve_cancel.Server(app) as server, caplog.at_level(logging.WARNING):
        assert server.post("/api/translate", {"text": "the cat"}, timeout=30)[0] == 200
        # A request that takes about 1.5 s on this machine, timed to completion.
        cost = serve_cancel.calibrate(server, 1.5)
        # The ten, in one batch, decode several times longer than their clients wait.
        assert 10 * cost["request_s"] > 4 * serve_cancel.GIVE_UP
        before_threads = threads()
        rss = []
        for _ in range(2):  # the first round's memory is the allocator's to keep; no more
            done = serve_cancel.abandon(server, worker, cost["body"])
            assert done["gave_up"] == 10
            assert done["plain_status"] == 200 and done["plain_translations"] == 1
            # The ten (one batch) would have kept the worker busy for about ten times one
            # request; it is freed within a poll (0.25 s) and a checkpoint.
            limit = max(1.5, 10 * cost["request_s"] / 4)
            assert done["plain_after_s"] < limit, (done, cost)
            rss.append(rss_bytes())
        assert len(stops) == worker.cancelled == 2 and worker.waiting == 0
        deadline = time.monotonic() + 10
        while threads() != before_threads and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threads() == before_threads  # the one decoding thread, nothing left behind
        # A second round reuses the first's memory: 0.1-1.9 MiB more on the Xeon; a decoder
        # that kept each request's tensors grew 12-56 MiB a round here.
        assert rss[1] - rss[0] < 8 << 20, f"{(rss[1] - rss[0]) / 2**20:.1f} MiB more"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
