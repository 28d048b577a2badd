"""`attnmt serve`'s API through FastAPI's test client: every route, every error, and the
answers checked against the library's own translator and attention maths."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from attnmt.cli import main
from attnmt.cli.serve import named_runs
from attnmt.data.alignments import parse_pharaoh
from attnmt.decoding.runs import load_run
from attnmt.decoding.translator import Translator
from attnmt.errors import UserError
from attnmt.serve import RunDecoder, Settings, clean_line, create_app
from attnmt.serve.worker import ClientGoneError, ModelWorker, Options, QueueFullError
from attnmt.service import Request


def make_app(tiny_runs, names=("rnn", "tf", "plain"), **settings):
    options = Settings(**settings)
    decoders = {n: RunDecoder(n, load_run(tiny_runs[n]), options) for n in names}
    return create_app(decoders, options)


@pytest.fixture(scope="module")
def client(tiny_runs):
    with TestClient(make_app(tiny_runs)) as client:
        yield client


def translate(client, **body):
    return client.post("/api/translate", json=body)


# --- the routes ------------------------------------------------------------------------


def test_health_and_models(client):
    health = client.get("/api/health").json()
    assert health == {
        "status": "ok",
        "models": {
            n: {"waiting": 0, "capacity": 64, "cancelled": 0} for n in ("rnn", "tf", "plain")
        },
    }
    models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert list(models) == ["rnn", "tf", "plain"]
    rnn = client.get("/api/model", params={"model": "rnn"}).json()
    assert rnn == models["rnn"] == client.get("/api/model").json()  # the first is the default
    assert rnn["model"] == "rnnsearch" and rnn["has_attention"]
    attention = {"score": "additive", "scope": "global", "mode": "soft", "window": None}
    assert rnn["attention"] == attention
    assert rnn["step"] == 80 and rnn["checkpoint"].startswith("step-")
    assert rnn["parameters"] == sum(p.numel() for p in load_run(rnn_dir(client)).model.parameters())
    assert rnn["limits"]["max_lines"] == 256 and rnn["limits"]["max_source_tokens"] == 400
    assert models["tf"]["model"] == "transformer" and models["tf"]["heads"] == 2
    assert models["tf"]["attention"] is None and models["tf"]["layers"] == 2
    assert models["plain"]["has_attention"] is False and models["plain"]["attention"] is None
    assert client.get("/api/model", params={"model": "nope"}).status_code == 404


def rnn_dir(client):
    return client.app.state.workers["rnn"].decode.loaded.run_dir


def test_the_page_is_served_self_contained(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    # Offline: nothing is fetched from another host.
    assert "http://" not in page.text.replace("http://www.w3.org", "")
    assert "https://" not in page.text.replace("https://www.w3.org", "")


def test_a_sentence_as_the_translator_gives_it(client, tiny_runs):
    answer = translate(client, text="the cat   sat on the mat")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["model"] == "rnn" and body["beam"] == 1
    (line,) = body["translations"]
    library = Translator(load_run(tiny_runs["rnn"]), need_weights=True)
    (sentence,) = library.translate(["the cat sat on the mat"])
    words = library.words(sentence)
    assert line["source"] == "the cat sat on the mat"
    assert line["translation"] == sentence.translation.text
    assert line["source_pieces"][-1] == line["target_pieces"][-1] == "</s>"
    assert len(line["source_pieces"]) == len(sentence.ids) + 1
    assert line["source_words"] == words.src_words and line["target_words"] == words.tgt_words
    assert set(parse_pharaoh(line["alignment"])) == words.links
    assert [tuple(link) for link in line["links"]] == sorted(words.links)
    assert line["attention"] is None and line["error"] is None


def test_rnn_weights_are_the_decoder_attention(client):
    (line,) = translate(client, text="the cat sat", weights=True).json()["translations"]
    (only,) = line["attention"]
    assert only["layer"] is None and only["head"] is None and only["name"] == "decoder attention"
    subword = np.array(only["subword"])
    assert subword.shape == (len(line["target_pieces"]), len(line["source_pieces"]))
    np.testing.assert_allclose(subword.sum(axis=1), 1.0, atol=1e-4)  # softmax rows
    word = np.array(only["word"])
    assert word.shape == (len(line["target_words"]), len(line["source_words"]))
    assert line["default_attention"] == 0 and only["alignment"] == line["alignment"]


def test_transformer_maps_every_layer_and_head_and_their_mean(client):
    (line,) = translate(client, text="the cat sat on", model="tf", weights=True).json()[
        "translations"
    ]
    maps = line["attention"]
    assert [(m["layer"], m["head"]) for m in maps] == [
        (1, None), (1, 1), (1, 2), (2, None), (2, 1), (2, 2)
    ]  # fmt: skip
    for mean, *heads in (maps[0:3], maps[3:6]):
        np.testing.assert_allclose(
            np.array(mean["subword"]),
            np.mean([h["subword"] for h in heads], axis=0),
            atol=2e-5,
        )
    # Two layers: the alignment reads the second-to-last layer's mean (docs/decoding.md).
    assert line["default_attention"] == 0 and maps[0]["name"] == "layer 1, mean of heads"
    assert maps[0]["alignment"] == line["alignment"]


def test_lines_keep_their_order_and_blank_lines_stay_blank(client):
    lines = ["the cat", "", "שלום עולם", "   ", "🙂 café 🚀", "مرحبا بالعالم"]
    results = translate(client, lines=lines).json()["translations"]
    assert [r["line"] for r in results] == [1, 2, 3, 4, 5, 6]
    assert [r["source"] for r in results] == [" ".join(x.split()) for x in lines]
    assert results[1]["translation"] == results[3]["translation"] == ""
    assert results[1]["source_pieces"] == [] and results[1]["error"] is None
    one_by_one = [translate(client, text=x).json()["translations"][0] for x in lines]
    assert [r["translation"] for r in results] == [r["translation"] for r in one_by_one]
    assert all(r["error"] is None for r in results)


def test_an_empty_list_of_lines_gets_an_empty_list(client):
    answer = translate(client, lines=[])
    assert answer.status_code == 200 and answer.json()["translations"] == []


def test_beam_and_a_model_without_attention(client):
    assert translate(client, text="the cat", beam=3).json()["beam"] == 3
    (line,) = translate(client, text="the cat", model="plain").json()["translations"]
    assert line["alignment"] == "" and line["attention"] is None  # nothing to align with
    refused = translate(client, text="the cat", model="plain", weights=True)
    assert refused.status_code == 422 and "has no attention" in refused.json()["detail"]


# --- bad input: each gets its documented answer, and the server stays up ----------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": 5}, "text"),
        ({"lines": "one line"}, "lines"),
        ({"lines": ["ok", 7]}, "lines.1"),
        ({"text": "x", "beam": "5"}, "beam"),
        ({"text": "x", "beam": 0}, "beam"),
        ({"text": "x", "beam": 17}, "beam"),
        ({"text": "x", "weights": 1}, "weights"),
        ({"text": "x", "colour": "blue"}, "colour"),
        ({"text": "x", "lines": ["y"]}, "body"),
        ({}, "body"),
    ],
)
def test_wrong_fields_are_named(client, body, field):
    answer = translate(client, **body)
    assert answer.status_code == 422
    errors = answer.json()["errors"]
    assert field in [e["field"] for e in errors], errors
    assert answer.json()["detail"].startswith(f"{errors[0]['field']}: ")


def test_malformed_json_and_not_utf8(client):
    for raw in (b'{"text": "x"', b"\xff\xfe{}", b"[1, 2]", b"null"):
        answer = client.post(
            "/api/translate", content=raw, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 422, (raw, answer.text)
        assert answer.json()["detail"]
    assert client.get("/api/health").status_code == 200


def test_size_limits_answer_413_with_the_limit(tiny_runs):
    app = make_app(tiny_runs, names=("rnn",), max_body_bytes=5000, max_lines=10)
    with TestClient(app) as small:
        too_many = translate(small, lines=["a"] * 11)
        assert too_many.status_code == 413 and "at most 10" in too_many.json()["detail"]
        big = translate(small, text="a " * 3000)
        assert big.status_code == 413 and "5,000" in big.json()["detail"]

        def chunks():  # no Content-Length: counted as it arrives
            yield b'{"lines": ['
            for _ in range(1000):
                yield b'"aaaaaaaaaa",'
            yield b'"a"]}'

        streamed = small.post(
            "/api/translate", content=chunks(), headers={"content-type": "application/json"}
        )
        assert streamed.status_code == 413
        assert translate(small, lines=["the cat"] * 10).status_code == 200


def test_ten_thousand_lines_are_refused_whole(client):
    answer = translate(client, lines=["the cat"] * 10_000)
    assert answer.status_code == 413 and "10,000 lines" in answer.json()["detail"]


def test_bad_lines_fail_alone(client):
    lines = ["the cat", "a\x00b", "bad \ud800 surrogate", "cat " * 5000, "dog " * 450, "🙂"]
    raw = json.dumps({"lines": lines})  # ASCII escapes: the lone surrogate is valid JSON
    answer = client.post(
        "/api/translate", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    results = answer.json()["translations"]
    assert results[0]["error"] is None and results[0]["translation"]
    assert results[1]["error"] is None and results[1]["source"] == "a b"  # NUL = a space
    assert "lone surrogate" in results[2]["error"] and "\ufffd" in results[2]["source"]
    assert "19,999 characters" in results[3]["error"] and results[3]["translation"] == ""
    assert results[4]["error"] is None and results[4]["truncated"] is True
    assert len(results[4]["source_pieces"]) == 401
    assert results[5]["error"] is None


def test_clean_line():
    assert clean_line("a\tb\x00c\r\nd", 100) == ("a b c d", None)
    text, error = clean_line("x" * 11, 10)
    assert text == "x" * 10 and "11 characters" in error and "at most 10" in error


# --- the API key ------------------------------------------------------------------------


def test_api_key_guards_every_api_call_but_not_the_page(tiny_runs):
    with TestClient(make_app(tiny_runs, names=("rnn",), api_key="s3cret")) as keyed:
        for call in (
            lambda **k: keyed.get("/api/health", **k),
            lambda **k: keyed.get("/api/models", **k),
            lambda **k: keyed.get("/api/model", **k),
            lambda **k: keyed.post("/api/translate", json={"text": "the cat"}, **k),
        ):
            refused = call()
            assert refused.status_code == 401 and "API key" in refused.json()["detail"]
            assert call(headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert call(headers={"Authorization": "Bearer s3cret"}).status_code == 200
            assert call(headers={"X-API-Key": "s3cret"}).status_code == 200
        assert keyed.get("/").status_code == 200


# --- the queue --------------------------------------------------------------------------


def test_a_full_queue_answers_503_with_retry_after(tiny_runs):
    app = make_app(tiny_runs, names=("rnn",), queue_size=1, timeout=30)
    worker = app.state.workers["rnn"]
    release, busy = threading.Event(), threading.Event()
    decode = worker.decode

    def slow(lines, options):
        busy.set()
        release.wait(10)
        return decode(lines, options)

    worker.decode = slow
    with TestClient(app) as client:
        answers = []
        first = threading.Thread(target=lambda: answers.append(translate(client, text="a")))
        first.start()
        assert busy.wait(10)  # the first request is decoding: the queue is empty again
        second = threading.Thread(target=lambda: answers.append(translate(client, text="b")))
        second.start()
        deadline = time.monotonic() + 10
        while worker.waiting < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        full = translate(client, text="c")
        assert full.status_code == 503 and int(full.headers["Retry-After"]) >= 1
        assert "--queue-size" in full.json()["detail"]
        release.set()
        first.join(10), second.join(10)
        assert [a.status_code for a in answers] == [200, 200]
        assert translate(client, text="d").status_code == 200


def test_a_request_that_waits_too_long_gets_504_and_leaves_the_queue(tiny_runs):
    app = make_app(tiny_runs, names=("rnn",), timeout=0.3)
    worker = app.state.workers["rnn"]
    release = threading.Event()
    decode = worker.decode
    worker.decode = lambda lines, options: (release.wait(10), decode(lines, options))[1]
    with TestClient(app) as client:
        late = translate(client, text="the cat")
        assert late.status_code == 504 and "--timeout" in late.json()["detail"]
        release.set()
        worker.decode = decode
        assert worker.waiting == 0
        assert translate(client, text="the cat").status_code == 200


def test_requests_that_share_a_batch_number_their_own_lines(tiny_runs):
    app = make_app(tiny_runs, names=("rnn",))
    worker = app.state.workers["rnn"]
    release, busy = threading.Event(), threading.Event()
    decode = worker.decode

    def first_waits(lines, options):
        busy.set()
        release.wait(10)
        return decode(lines, options)

    worker.decode = first_waits
    with TestClient(app) as client:
        answers, threads = {}, []

        def send(key, **body):
            answers[key] = translate(client, **body)

        for key, body in (
            ("a", {"text": "a"}),
            ("b", {"lines": ["the", "cat"]}),
            ("c", {"text": "sat"}),
        ):
            threads.append(threading.Thread(target=send, args=(key,), kwargs=body))
            threads[-1].start()
            deadline = time.monotonic() + 10
            while not busy.is_set() or worker.waiting < len(threads) - 1:
                assert time.monotonic() < deadline
                time.sleep(0.01)
        release.set()
        for thread in threads:
            thread.join(10)
    assert worker.batches == 2  # "a" alone, then "b" and "c" in one batch
    assert [r["line"] for r in answers["b"].json()["translations"]] == [1, 2]
    assert [r["line"] for r in answers["c"].json()["translations"]] == [1]


class Gate:
    """A decode function that records its batches and waits for `open` before each."""

    def __init__(self):
        self.open, self.calls, self.entered = threading.Event(), [], threading.Event()

    def __call__(self, lines, options):
        self.entered.set()
        self.open.wait(10)
        self.calls.append((list(lines), options))
        return [f"{line}!" for line in lines]


def test_waiting_requests_with_the_same_options_share_a_batch():
    gate = Gate()
    worker = ModelWorker("m", gate, capacity=8, batch_lines=4)
    greedy, beam = Options(Request()), Options(Request(beam=4))

    async def scenario():
        first = asyncio.ensure_future(worker.run(["a"], greedy, timeout=10))
        await asyncio.to_thread(gate.entered.wait, 10)  # "a" is decoding alone
        rest = [
            asyncio.ensure_future(worker.run(lines, options, timeout=10))
            for lines, options in (
                (["b", "c"], greedy), (["d"], beam), (["e"], greedy), (["f", "g"], greedy)
            )
        ]  # fmt: skip
        while worker.waiting < 4:
            await asyncio.sleep(0.01)
        gate.open.set()
        return await first, [await r for r in rest]

    worker.start()
    try:
        first, rest = asyncio.run(scenario())
    finally:
        worker.stop()
    assert first == ["a!"] and rest == [["b!", "c!"], ["d!"], ["e!"], ["f!", "g!"]]
    # Oldest first, joined by the later ones that decode alike, up to 4 lines a batch.
    assert [c[0] for c in gate.calls] == [["a"], ["b", "c", "e"], ["d"], ["f", "g"]]
    assert [c[1].beam for c in gate.calls] == [1, 1, 4, 1]


def test_a_client_that_leaves_frees_its_place():
    gate = Gate()
    worker = ModelWorker("m", gate, capacity=1)
    options = Options(Request())

    async def scenario():
        busy = asyncio.ensure_future(worker.run(["a"], options, timeout=10))
        await asyncio.to_thread(gate.entered.wait, 10)
        left = asyncio.Event()

        async def disconnected():
            return left.is_set()

        waiting = asyncio.ensure_future(
            worker.run(["b"], options, timeout=10, disconnected=disconnected)
        )
        while worker.waiting < 1:
            await asyncio.sleep(0.01)
        with pytest.raises(QueueFullError):  # capacity 1: "b" holds the only place
            await worker.run(["c"], options, timeout=10)
        left.set()
        with pytest.raises(ClientGoneError):
            await waiting
        assert worker.waiting == 0  # its place is free: "d" gets in
        later = asyncio.ensure_future(worker.run(["d"], options, timeout=10))
        gate.open.set()
        return await busy, await later

    worker.start()
    try:
        assert asyncio.run(scenario()) == (["a!"], ["d!"])
    finally:
        worker.stop()
    assert [c[0] for c in gate.calls] == [["a"], ["d"]]  # "b" was never decoded


# --- the command ------------------------------------------------------------------------


def test_named_runs():
    assert named_runs(["runs/a/", "b=runs/x"]) == {"a": "runs/a/", "b": "runs/x"}
    with pytest.raises(UserError, match="NAME=RUN"):
        named_runs(["x/a", "y/a"])


def test_serve_refuses_bad_flags_in_one_line(capsys, tiny_runs):
    assert main(["serve", str(tiny_runs["rnn"]), "--beam", "0"]) == 2
    assert "--beam must be between 1 and 16" in capsys.readouterr().err
    assert main(["serve", "no/such/run"]) == 2
    assert "no/such/run" in capsys.readouterr().err


def test_serving_beyond_loopback_is_announced(capsys, monkeypatch, tiny_runs):
    started = {}
    monkeypatch.setattr("attnmt.cli.serve.uvicorn.run", lambda app, **kw: started.update(kw))
    monkeypatch.delenv("ATTNMT_API_KEY", raising=False)
    assert main(["serve", f"a={tiny_runs['rnn']}", "--port", "8123"]) == 0
    out, err = capsys.readouterr()
    assert started == {"host": "127.0.0.1", "port": 8123, "log_level": "warning"}
    assert "serving a: rnnsearch, step 80" in out and "http://127.0.0.1:8123/" in out
    assert err == ""
    assert main(["serve", str(tiny_runs["rnn"]), "--host", "0.0.0.0"]) == 0
    err = capsys.readouterr().err
    assert "warning: listening on 0.0.0.0" in err and "--api-key" in err
    monkeypatch.setenv("ATTNMT_API_KEY", "k")
    assert main(["serve", str(tiny_runs["rnn"]), "--host", "0.0.0.0"]) == 0
    assert "--api-key" not in capsys.readouterr().err  # a key is set: only the address


def test_openapi_schema_is_typed(client):
    schema = client.get("/openapi.json").json()
    request = schema["components"]["schemas"]["TranslateRequest"]
    assert request["additionalProperties"] is False
    fields = {"text", "lines", "model", "beam", "alignments", "weights", "explain", "ig_steps"}
    fields |= {"search", "prefix", "alternatives", "min_alternative_prob", "alpha", "n_best"}
    assert set(request["properties"]) == fields
    stream = schema["components"]["schemas"]["StreamRequest"]
    assert set(stream["properties"]) == fields - {"lines", "explain", "ig_steps"}
    assert stream["required"] == ["text"] and stream["additionalProperties"] is False
    sse = schema["paths"]["/api/translate/stream"]["post"]["responses"]["200"]["content"]
    assert list(sse) == ["text/event-stream"]
    post = schema["paths"]["/api/translate"]["post"]["responses"]
    assert post["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/TranslateResponse"
    )
    assert post["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/InvalidBody")
    assert post["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
