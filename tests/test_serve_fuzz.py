"""`attnmt serve`'s API fuzzed from its own OpenAPI schema (schemathesis, in-process), then
what the fuzzer found, each fixed, as plain examples.

The fuzz is benchmarks/fuzz_api.py's (`make fuzz` runs it longer), seeded and small here:
every route gets the schema's examples, schemathesis' coverage cases (fields missing, null,
of the wrong type, at and past their bounds; unexpected methods and content types) and a
few Hypothesis cases per generation mode, valid and invalid. No answer may be a 500 or
differ from what the schema documents; a body the schema calls invalid must be refused
and one it calls valid must pass validation; after every request the server still
answers GET /api/health with an empty queue.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from schemathesis.python.asgi import shutdown_lifespans

from attnmt.decoding.runs import load_run
from attnmt.serve import RunDecoder, Settings, create_app

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import fuzz_api  # noqa: E402

EXAMPLES = 10  # fuzzed cases per route and generation mode, besides the coverage cases
SEED = 20261126
KEY = fuzz_api.KEY


@pytest.fixture(scope="module")
def servers(tiny_runs, tiny_image_runs):
    """Two in-process servers, as `make fuzz` serves them: a text run first and no key;
    an image run first (the default of /api/read and /api/examples) behind a key."""
    text = {n: tiny_runs[n] for n in ("rnn", "tf", "plain")} | {"soft": tiny_image_runs["soft"]}
    image = {n: tiny_image_runs[n] for n in ("soft", "glimpses")} | {"rnn": tiny_runs["rnn"]}
    yield {
        "text": fuzz_api.serve(text, None, EXAMPLES, SEED),
        "image": fuzz_api.serve(image, KEY, EXAMPLES, SEED),
    }
    shutdown_lifespans()  # the workers schemathesis' ASGI client started


@pytest.mark.parametrize("server", ["text", "image"])
def test_every_route_fuzzed_from_the_schema_answers_as_documented(servers, server):
    schema = servers[server]
    found = fuzz_api.fuzz(schema)
    failures = [
        f"{f['route']} {f['check']}: {f['message']}\n  {f.get('curl')}" for f in found["failures"]
    ]
    assert not failures, "\n".join(failures)
    routes = {result.ok().label for result in schema.get_all_operations()}
    assert {route for route, _ in found["tried"]} == routes  # every route, none skipped
    statuses = Counter()
    for (_, status), n in found["tried"].items():
        statuses[status] += n
    assert statuses[500] == 0 and statuses[200] > 0 and statuses[422] > 0, statuses
    assert statuses[405] > 0  # the coverage phase's unexpected methods were sent
    assert (statuses[401] > 0) == (server == "image"), statuses  # the key is asked for
    assert {"examples", "coverage", "fuzzing"} <= set(found["phases"]), found["phases"]
    # Afterwards (and after every request: `server_still_answers`) the server still works.
    headers = {"X-API-Key": KEY}
    line = schema["/api/translate"]["POST"].Case(body={"text": "the cat", "model": "rnn"})
    answer = line.call(headers=headers)
    assert answer.status_code == 200 and answer.json()["translations"][0]["error"] is None


def test_images_of_the_runs_size_are_read(servers):
    """The schema cannot say an image run's size, so fuzzing never reaches a reading:
    images of each run's size, with levels, beam and weights drawn, are read, each a 200
    through the same checks."""
    tried = fuzz_api.read_at_size(servers["image"], 6, KEY)
    assert tried == {(fuzz_api.AT_SIZE, 200): 6}


# --- what the fuzzer found, each fixed ---------------------------------------------------


@pytest.fixture(scope="module")
def client(tiny_runs, tiny_image_runs):
    settings = Settings()
    runs = {"rnn": tiny_runs["rnn"], "soft": tiny_image_runs["soft"]}
    decoders = {name: RunDecoder(name, load_run(path), settings) for name, path in runs.items()}
    with TestClient(create_app(decoders, settings)) as client:
        yield client


def post(client, raw: bytes, route="/api/translate"):
    return client.post(route, content=raw, headers={"content-type": "application/json"})


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"text": "\xff"}', "the body is not UTF-8 (byte 0xFF at offset 10)"),
        (b"\x04=\xff", "the body is not UTF-8 (byte 0xFF at offset 2)"),
        (b"[" * 100_000 + b"]" * 100_000, "the JSON is nested too deeply to read"),
        (b'{"text": "a", "beam": ' + b"9" * 5000 + b"}", "the JSON holds a number of over 4,300"),
    ],
)
def test_a_body_json_cannot_read_is_422_in_one_sentence_not_400(client, raw, says):
    # Found: FastAPI answered these 400 "There was an error parsing the body", a status the
    # schema does not document and a sentence that says neither what nor how to fix.
    answer = post(client, raw)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"].startswith(f"body: {says}"), answer.json()
    assert answer.json()["errors"][0]["field"] == "body"
    assert client.get("/api/health").status_code == 200


def test_whole_numbers_written_as_floats_are_the_integers_they_are(client):
    # Found: JSON Schema's "integer" takes 2.0 (JSON has one kind of number), the strict
    # validators did not; a JavaScript client that computes a beam sends 2.0 when it is 2.
    answer = client.post("/api/translate", json={"text": "the cat", "beam": 2.0, "ig_steps": 8.0})
    assert answer.status_code == 200, answer.text
    assert answer.json()["beam"] == 2
    for bad in ({"beam": 2.5}, {"beam": "2"}, {"beam": True}, {"beam": 1e300}):
        answer = client.post("/api/translate", json={"text": "the cat", **bad})
        assert answer.status_code == 422 and answer.json()["errors"][0]["field"] == "beam"
    image = [[5.0] * 64 for _ in range(24)]
    read = client.post("/api/read", json={"image": image, "model": "soft"})
    assert read.status_code == 200, read.text
    image[3][7] = 5.5
    read = client.post("/api/read", json={"image": image, "model": "soft"})
    assert read.status_code == 422 and "holds 5.5 at row 3, column 7" in read.json()["detail"]


def test_a_refusal_by_the_run_matches_the_published_422(client):
    # Found: the schema said every 422 lists `errors`; a refusal by the run (text to an
    # image run, a method that does not fit it) is the sentence alone.
    answer = client.post("/api/translate", json={"text": "the cat", "model": "soft"})
    assert answer.status_code == 422 and set(answer.json()) == {"detail"}
    invalid = client.get("/openapi.json").json()["components"]["schemas"]["InvalidBody"]
    assert invalid["required"] == ["detail"] and "errors" in invalid["properties"]


def test_the_schema_says_what_the_validators_check(client):
    # Found: bodies the schema called valid were refused: both or neither of text/lines
    # (pair/pairs, image/images), an empty image or row, an unknown explanation method.
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for name, one, other in [
        ("TranslateRequest", "text", "lines"),
        ("ScoreRequest", "pair", "pairs"),
        ("ReadRequest", "image", "images"),
    ]:
        choice = [branch["required"] for branch in schemas[name]["oneOf"]]
        assert choice == [[one], [other]], schemas[name]["oneOf"]
        explain = schemas[name]["properties"]["explain"]["anyOf"][0]
        assert explain["enum"][:2] == ["attention", "attention-norm"]
    read = schemas["ReadRequest"]["properties"]
    image = read["image"]["anyOf"][0]
    assert image["minItems"] == 1 and image["items"]["minItems"] == 1
    assert image["items"]["items"] == {"type": "integer", "minimum": 0, "maximum": 16}
    beam = read["beam"]["anyOf"][0]
    assert (beam["minimum"], beam["maximum"]) == (1, 16)  # not pydantic's "ge"/"le"
    both = client.post("/api/translate", json={"text": "a", "lines": ["b"]})
    assert both.status_code == 422 and both.json()["errors"][0]["field"] == "body"


def test_security_is_published_only_when_a_key_is_asked_for(tiny_runs):
    # Found: without --api-key the schema still named two security schemes and a 401, so a
    # fuzzer (or a generated client) expected a request without a key to be refused.
    for key in (None, "k"):
        settings = Settings(api_key=key)
        app = create_app({"rnn": RunDecoder("rnn", load_run(tiny_runs["rnn"]), settings)}, settings)
        schema = TestClient(app).get("/openapi.json", headers={"X-API-Key": "k"}).json()
        translate = schema["paths"]["/api/translate"]["post"]
        assert ("security" in translate) == (key is not None)
        assert ("401" in translate["responses"]) == (key is not None)
        assert ("securitySchemes" in schema.get("components", {})) == (key is not None)
    assert json.dumps(schema).count("X-API-Key") == 1  # the header's one scheme
