"""The search you can see and steer, through the server and the CLI: the recorded tree
agrees with the answer, a prefix is honoured and scored as /api/score scores it,
alternatives are scored whole, the stream's events add up to the answer, and a client
that leaves a stream frees the worker."""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from attnmt.cli import main
from attnmt.data.vocab import EOS
from attnmt.decoding.runs import load_run
from attnmt.serve import RunDecoder, Settings, create_app
from attnmt.serve.stream import StreamSink

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import serve_cancel  # benchmarks/serve_cancel.py: a live server in a thread

LINE = "the cat sat on the mat"


@pytest.fixture(scope="module")
def client(tiny_runs):
    settings = Settings()
    decoders = {n: RunDecoder(n, load_run(tiny_runs[n]), settings) for n in ("rnn", "tf")}
    with TestClient(create_app(decoders, settings)) as client:
        yield client


def translate(client, **body):
    answer = client.post("/api/translate", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()["translations"][0]


def score(client, model, source, target):
    body = {"model": model, "pair": {"source": source, "target": target}}
    answer = client.post("/api/score", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()["scores"][0]


def path(search, node_id):
    nodes = {n["id"]: n for n in search["nodes"]}
    out = []
    while nodes[node_id]["parent"] is not None:
        out.append(nodes[node_id])
        node_id = nodes[node_id]["parent"]
    return out[::-1]


def events(lines):
    """(type, data) of each Server-Sent Event in the lines of a stream."""
    out, kind = [], None
    for line in lines:
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            out.append((kind, json.loads(line[len("data: ") :])))
    return out


@pytest.mark.parametrize("model", ["rnn", "tf"])
@pytest.mark.parametrize("beam", [1, 3])
def test_the_search_agrees_with_the_answer(client, model, beam):
    result = translate(client, model=model, text=LINE, beam=beam, search=True, weights=True)
    search = result["search"]
    assert search["beam"] == beam and search["source_pieces"] == result["source_pieces"]
    best = path(search, search["nbest"][0])
    assert [n["piece"] for n in best] == result["target_pieces"]
    assert best[-1]["score"] == pytest.approx(result["score"], abs=1e-4)
    assert all(n["best"] for n in best) and best[-1]["rank"] == 0
    # Each node's attention row is the answer's row of the aligning map for that subword.
    matrix = result["attention"][result["default_attention"]]["subword"]
    rows = [n["attention"] for n in best]
    assert np.allclose(rows, matrix, atol=2e-4, rtol=0)
    if beam == 1:  # greedy: the kept and finished nodes are one path
        spine = [n for n in search["nodes"] if n["status"] in ("kept", "finished")]
        assert spine == best
    statuses = {n["status"] for n in search["nodes"]}
    assert {"root", "pruned", "finished"} <= statuses


@pytest.mark.parametrize("model", ["rnn", "tf"])
def test_a_prefix_is_forced_and_scored_as_score_scores_it(client, model):
    own = translate(client, model=model, text=LINE)
    words = own["translation"].split()
    for k in range(len(words) + 1):  # greedy: the model's own start gives back its output
        again = translate(client, model=model, text=LINE, prefix=" ".join(words[:k]))
        assert again["translation"] == own["translation"]
    result = translate(client, model=model, text=LINE, prefix="mat mat dog", beam=3)
    assert result["translation"].startswith("mat mat dog")
    assert result["prefix"]["text"] == "mat mat dog" and result["prefix"]["tokens"] >= 3
    scored = score(client, model, LINE, result["translation"])
    assert result["log_prob"] == pytest.approx(scored["log_prob"], abs=1e-3)
    # A prefix as subword ids: the same as its text.
    decoder = client.app.state.workers[model].decode
    ids = decoder.loaded.vocab.tgt.encode("mat mat dog")
    same = translate(client, model=model, text=LINE, prefix=ids, beam=3)
    assert same["translation"] == result["translation"]
    # The prefix's subwords are in the search, forced, and their attention is returned.
    searched = translate(client, model=model, text=LINE, prefix=ids, search=True, weights=True)
    forced = [n for n in searched["search"]["nodes"] if n["status"] == "forced"]
    assert [n["token"] for n in forced] == ids and all(n["attention"] for n in forced)
    assert len(searched["attention"][0]["subword"]) == len(searched["target_pieces"])


def test_a_prefix_and_alternatives_apply_to_every_line(client):
    answer = client.post(
        "/api/translate", json={"lines": [LINE, "", "dog ran"], "prefix": "mat", "alternatives": 2}
    )
    assert answer.status_code == 200, answer.text
    first, empty, third = answer.json()["translations"]
    assert first["translation"].startswith("mat") and third["translation"].startswith("mat")
    assert len(first["alternatives"]) == len(third["alternatives"]) == 2
    assert empty["translation"] == "" and empty["alternatives"] is None


def test_bad_prefixes_and_alternatives_are_refused(client):
    for body, status, words in [
        ({"text": LINE, "prefix": [0, 5]}, 422, "prefix token 0"),
        ({"text": LINE, "prefix": [3]}, 422, "prefix token 3"),
        ({"text": LINE, "prefix": [10**6]}, 422, "prefix token"),
        ({"text": LINE, "alternatives": 0}, 422, "alternatives"),
        ({"text": LINE, "alternatives": 2, "min_alternative_prob": 2}, 422, "min_alternative"),
    ]:
        answer = client.post("/api/translate", json=body)
        assert answer.status_code == status, (body, answer.text)
        assert words in answer.text, answer.text


@pytest.mark.parametrize("beam", [1, 2])
def test_alternatives_are_scored_whole(client, beam):
    result = translate(client, model="rnn", text=LINE, prefix="dog", alternatives=3, beam=beam)
    alts = result["alternatives"]
    assert len(alts) == 3
    assert [a["prob"] for a in alts] == sorted((a["prob"] for a in alts), reverse=True)
    assert len({a["token"] for a in alts}) == 3
    for alt in alts:
        assert alt["translation"].startswith("dog")
        scored = score(client, "rnn", LINE, alt["translation"])
        assert alt["log_prob"] == pytest.approx(scored["log_prob"], abs=1e-3)
    cut = alts[1]["prob"] + 1e-6
    fewer = translate(
        client, model="rnn", text=LINE, prefix="dog", alternatives=3, min_alternative_prob=cut
    )
    assert len(fewer["alternatives"]) == 1


@pytest.mark.parametrize("model", ["rnn", "tf"])
@pytest.mark.parametrize("beam", [1, 3])
def test_the_stream_adds_up_to_the_answer(client, model, beam):
    body = {"model": model, "text": LINE, "beam": beam, "prefix": "the", "weights": True}
    with client.stream("POST", "/api/translate/stream", json=body) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        got = events(answer.iter_lines())
    kinds = [k for k, _ in got]
    assert kinds[0] == "start" and kinds[-1] == "done" and set(kinds[1:-1]) == {"step"}
    start, done = got[0][1], got[-1][1]["translations"][0]
    assert start["source_pieces"] == done["source_pieces"]
    plain = translate(client, **body, search=True)
    for key in ("translation", "score", "log_prob", "target_pieces", "attention", "search"):
        assert done[key] == plain[key], key
    # The steps, each node as last sent, are the final search but for best and rank.
    latest = {}
    for _, step in got[1:-1]:
        for node in step["nodes"]:
            latest[node["id"]] = node
    final = done["search"]["nodes"]
    assert sorted(latest) == [n["id"] for n in final]
    strip = ("best", "rank")
    for node in final:
        sent = latest[node["id"]]
        assert {k: v for k, v in sent.items() if k not in strip} == {
            k: v for k, v in node.items() if k not in strip
        }
    # Step by step: the depths grow by one, the prefix comes first, forced.
    depths = [step["depth"] for _, step in got[1:-1]]
    assert depths == list(range(depths[0], depths[0] + len(depths)))
    assert [n["status"] for n in got[1][1]["nodes"]][:2] == ["root", "forced"]


def test_the_stream_starts_with_start_whatever_the_decoding_thread_does(tiny_runs, monkeypatch):
    """The interleaving a busy machine produces, forced: the answer's coroutine is held
    right after it opens the job until the decoding thread has put its first step. The
    events still come as start, the steps in order, then exactly one done."""
    settings = Settings()
    decoder = RunDecoder("rnn", load_run(tiny_runs["rnn"]), settings)
    app = create_app({"rnn": decoder}, settings)
    stepped = threading.Event()
    put = StreamSink.put

    def put_and_tell(self, kind, data):
        put(self, kind, data)
        if kind == "step":
            stepped.set()

    monkeypatch.setattr(StreamSink, "put", put_and_tell)
    worker = app.state.workers["rnn"]
    opened = worker.open

    def open_then_wait_for_a_step(*args, **kwargs):
        job = opened(*args, **kwargs)
        # Blocks the event loop; the thread needs none of it to decode and put its steps.
        assert stepped.wait(60), "the decoding thread never put a step"
        return job

    worker.open = open_then_wait_for_a_step
    with TestClient(app) as client:
        body = {"text": LINE, "beam": 2}
        with client.stream("POST", "/api/translate/stream", json=body) as answer:
            assert answer.status_code == 200
            got = events(answer.iter_lines())
    kinds = [k for k, _ in got]
    assert kinds[0] == "start", kinds[:3]
    assert kinds[-1] == "done" and kinds.count("done") == 1 and "error" not in kinds
    assert set(kinds[1:-1]) == {"step"}
    depths = [step["depth"] for _, step in got[1:-1]]
    assert depths == sorted(depths)


def test_stream_refusals_come_before_the_stream(client):
    for body, status in [
        ({"lines": [LINE]}, 422),
        ({"text": LINE, "explain": "occlusion"}, 422),
        ({"text": LINE, "model": "nope"}, 404),
    ]:
        answer = client.post("/api/translate/stream", json=body)
        assert answer.status_code == status, answer.text
        assert answer.headers["content-type"].startswith("application/json")


def test_a_client_that_leaves_a_stream_frees_the_worker(tiny_runs):
    """A slow search (each step sleeps) streamed; the client reads two steps and closes the
    connection: the search stops at its next step and the next request is served."""
    settings = Settings(timeout=120)
    decoder = RunDecoder("rnn", load_run(tiny_runs["rnn"]), settings)
    model = decoder.loaded.model
    calls = []
    step = model.step

    def slow_step(*args, **kwargs):  # and never ends a sentence: the search runs to its limit
        calls.append(time.monotonic())
        time.sleep(0.05)
        logits, state, weights = step(*args, **kwargs)
        logits[:, EOS] = float("-inf")
        return logits, state, weights

    model.step = slow_step
    app = create_app({"rnn": decoder}, settings)
    worker = app.state.workers["rnn"]
    long_line = " ".join([LINE] * 4)  # 2 x (source + EOS) + 5 steps: several seconds
    with serve_cancel.Server(app) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        body = json.dumps({"text": long_line, "beam": 2})
        connection.request(
            "POST", "/api/translate/stream", body, {"content-type": "application/json"}
        )
        response = connection.getresponse()
        assert response.status == 200
        seen = 0
        while seen < 3:  # start and two steps
            if response.readline().startswith(b"event: "):
                seen += 1
        connection.close()  # the client leaves
        deadline = time.monotonic() + 10
        while worker.cancelled < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.cancelled == 1
        stopped = len(calls)
        time.sleep(0.3)
        assert len(calls) == stopped  # no step after the cancel
        assert stopped < 30  # far fewer than the whole search's
        model.step = step
        started = time.monotonic()
        status, answer = server.post("/api/translate", {"text": "the cat"}, timeout=30)
        assert status == 200 and answer["translations"][0]["translation"] is not None
        assert time.monotonic() - started < 5
    assert worker._thread is None  # the server stopped its decoding thread


# --- the CLI --------------------------------------------------------------------------------


def test_translate_prefix_search_json_and_alternatives(tiny_runs, tmp_path, capsys):
    run = str(tiny_runs["rnn"])
    source = tmp_path / "in.txt"
    source.write_text(f"{LINE}\tdog dog\n\n{LINE}\n", encoding="utf-8")
    searches = tmp_path / "search.jsonl"
    out = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                run,
                str(source),
                "--prefix",
                "--beam",
                "3",
                "--search-json",
                str(searches),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[0].startswith("dog dog") and lines[1] == ""
    records = [json.loads(x) for x in searches.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in records] == [1, 2, 3] and records[1]["search"] is None
    for record, text in zip(records[::2], lines[::2], strict=True):
        search = record["search"]
        assert record["translation"] == text
        best = path(search, search["nbest"][0])
        assert all(n["attention"] for n in best)
    assert main(["translate", run, str(source), "--prefix", "--alternatives", "2"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 5 and rows[0].startswith("0 ||| dog dog") and rows[2].startswith("1 |||")
    # The JSON form lists the same alternatives (their scores against /api/score: above).
    text = rows[0].split(" ||| ")[1]
    assert (
        main(
            [
                "translate",
                run,
                str(source),
                "--prefix",
                "--alternatives",
                "2",
                "--alignments",
                "json",
            ]
        )
        == 0
    )
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["alternatives"][0]["translation"] == text


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--alternatives", "0"], "--alternatives must be at least 1"),
        (["--alternatives", "2", "--n-best", "2", "--beam", "2"], "use one"),
        (["--alternatives", "2", "--min-alternative-prob", "1.5"], "between 0 and 1"),
    ],
)
def test_translate_search_flags_refuse_bad_values(tiny_runs, tmp_path, capsys, flags, words):
    source = tmp_path / "in.txt"
    source.write_text(f"{LINE}\n", encoding="utf-8")
    assert main(["translate", str(tiny_runs["rnn"]), str(source), *flags]) != 0
    assert words in capsys.readouterr().err


def test_search_json_keeps_an_earlier_file_when_translating_fails(tiny_runs, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text(f"{LINE}\t\n", encoding="utf-8")
    searches = tmp_path / "search.jsonl"
    searches.write_text("earlier\n", encoding="utf-8")
    args = ["translate", str(tiny_runs["rnn"]), str(source), "--search-json", str(searches)]
    assert main([*args, "-o", str(searches)]) != 0
    assert "same file" in capsys.readouterr().err
    assert searches.read_text(encoding="utf-8") == "earlier\n"
    assert not list(tmp_path.glob(".*partial"))


def test_whole_numbers_written_as_floats_are_taken_for_alternatives_and_prefix_ids():
    """JSON Schema's integer takes 6.0 (the schema fuzzer sent it): the request takes it
    as 6, as it does for the beam; 6.5 and 0 stay refused."""
    from pydantic import ValidationError

    from attnmt.serve.schemas import TranslateRequest

    request = TranslateRequest.model_validate({"text": "a", "alternatives": 6.0, "prefix": [5.0]})
    assert request.alternatives == 6 and request.prefix == [5]
    for bad in (6.5, 0):
        with pytest.raises(ValidationError):
            TranslateRequest.model_validate({"text": "a", "alternatives": bad})
