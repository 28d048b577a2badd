"""The page's server against `attnmt serve EXPORT_DIR`: src/attnmt/web/server.js (under
worker.js) answers the server's routes from a site folder of ONNX exports, in node with
onnxruntime-node; attnmt.serve.app answers them over the same exports with onnxruntime.
Both get the same requests, for the tiny RNNsearch, Transformer and RNNencdec of conftest:
translations greedy and beam 3 with n-best 2, the search tree, prefixes (text and ids),
alternatives, weights and alignments on and off, several lines with an empty and an
over-long one, the stream (its events and its final answer), scores, the routes about the
server, and the refusals (bad fields, a bad beam, an unknown model, an explanation, too
many lines, the compute budget, images to a text model).

Expected: the same status and the same JSON, field for field: floats within 1e-4 (the two
onnxruntime builds, tests/test_web_onnx.py; the records round to 4-6 decimals, so one unit
of the last may differ), everything else equal. One difference is by design: a streamed
request the search refuses after it started (a bad prefix id) is an `error` event on the
server and the response's status and detail in the page (the worker has no stream to end).

Then the worker's protocol, in the same node process (worker.js `connect` on a stand-in
port): a request sent before `init` waits for it, a stream's events come before its one
response, a cancel stops a search at its next step (499 "Stopped.") and the next request
is answered, and a model whose graph is missing is refused naming the file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from attnmt.runtime import load_export
from attnmt.serve import RunDecoder, Settings, create_app
from test_web_onnx import NODE, WEB, _tokenizers, onnxruntime_node  # noqa: F401

pytestmark = pytest.mark.skipif(NODE is None, reason="node (Node.js) is not installed")

TOLERANCE = 1e-4
SENTENCE = "the cat sat on the mat"
LONG = " ".join(["the cat sat on the mat"] * 400)  # 9,199 characters: over the line limit
WIDE = "the " * 499  # 1,995 characters, past the 400-subword source limit


def _cases(name: str, prefix_ids: list[int], attention: bool) -> list[tuple[str, str, object]]:
    """(label, path, body) of one model; body None: a GET."""
    t = {"model": name, "text": SENTENCE}
    drawn = {"weights": True} if attention else {}
    cases = [
        ("greedy", "/api/translate", t),
        ("beam 3, n-best 2", "/api/translate", {**t, "beam": 3, "n_best": 2, **drawn}),
        ("search", "/api/translate", {**t, "beam": 2, "search": True, **drawn}),
        ("greedy search", "/api/translate", {**t, "search": True}),
        ("text prefix", "/api/translate", {**t, "prefix": "mat the on", "beam": 2, **drawn}),
        ("id prefix", "/api/translate", {**t, "prefix": prefix_ids, "search": True}),
        ("alternatives", "/api/translate", {**t, "alternatives": 3, **drawn}),
        (
            "alternatives after a prefix, beam 2",
            "/api/translate",
            {**t, "prefix": "mat", "alternatives": 2, "beam": 2, "min_alternative_prob": 0.01},
        ),
        ("no alignments", "/api/translate", {**t, "alignments": False}),
        ("no alignments, weights", "/api/translate", {**t, "alignments": False, **drawn}),
        (
            "lines",
            "/api/translate",
            {
                "model": name,
                "lines": [SENTENCE, "", "  dog\tran  far ", LONG, "x\ud800"],
                "beam": 2,
                **drawn,
            },
        ),
        ("empty line", "/api/translate", {"model": name, "text": "   "}),
        ("over-long line", "/api/translate", {"model": name, "text": LONG}),
        ("cut source", "/api/translate", {"model": name, "text": WIDE}),
        ("stream", "/api/translate/stream", {**t, "beam": 2, **drawn}),
        ("greedy stream", "/api/translate/stream", {**t, "prefix": "mat"}),
        ("empty stream", "/api/translate/stream", {"model": name, "text": ""}),
        ("score", "/api/score", {"model": name, "pair": {"source": SENTENCE, "target": "mat the"}}),
        (
            "scores",
            "/api/score",
            {
                "model": name,
                "alignments": attention,
                **drawn,
                "pairs": [
                    {"source": SENTENCE, "target": "mat on sat the cat the"},
                    {"source": "", "target": ""},
                    {"source": "", "target": "dog"},
                    {"source": "dog", "target": ""},
                    {"source": LONG, "target": "a"},
                ],
            },
        ),
        ("bad beam", "/api/translate", {**t, "beam": 17}),
        ("n-best over the beam", "/api/translate", {**t, "n_best": 3}),
        (
            "alternatives and n-best",
            "/api/translate",
            {**t, "alternatives": 2, "beam": 2, "n_best": 2},
        ),
        ("bad prefix id", "/api/translate", {**t, "prefix": [0, 5]}),
        ("bad prefix text", "/api/translate", {**t, "prefix": "\ud800"}),
        ("explain", "/api/translate", {**t, "explain": "occlusion"}),
        (
            "explain a score",
            "/api/score",
            {"model": name, "pair": {"source": "a", "target": "b"}, "explain": "attention"},
        ),
        ("stream explain", "/api/translate/stream", {**t, "explain": "occlusion"}),
        ("read", "/api/read", {"model": name, "image": [[0, 1], [2, 3]]}),
        ("model", f"/api/model?model={name}", None),
        ("examples", f"/api/examples?model={name}", None),
    ]
    if not attention:
        cases += [
            ("no attention", "/api/translate", {**t, "alignments": True}),
            ("no attention to score", "/api/score", {"model": name, "weights": True,
                                                     "pair": {"source": "a", "target": "b"}}),
        ]  # fmt: skip
    return [(f"{name}: {label}", path, body) for label, path, body in cases]


# The refusals that name no model, and the routes about the server.
COMMON = [
    ("health", "/api/health", None),
    ("models", "/api/models", None),
    ("the first model", "/api/model", None),
    ("no route", "/api/nothing", None),
    ("unknown model", "/api/translate", {"text": "a", "model": "nope"}),
    ("unknown model, GET", "/api/model?model=nope", None),
    ("fields", "/api/translate", {"foo": 1, "beam": 0, "text": 3, "alpha": "1"}),
    ("prefix type", "/api/translate", {"text": "a", "prefix": [1.5, "x", 4]}),
    ("prefix union", "/api/translate", {"text": "a", "prefix": {}}),
    ("text and lines", "/api/translate", {"text": "a", "lines": ["b"]}),
    ("not an object", "/api/translate", ["a"]),
    ("no body", "/api/translate", "NOBODY"),
    ("lines of strings", "/api/translate", {"lines": [1, "a", None]}),
    ("stream fields", "/api/translate/stream", {"lines": ["a"]}),
    ("pairs", "/api/score", {"pairs": [5, {"source": 1, "target": "x", "y": 0}]}),
    ("no pair", "/api/score", {}),
    ("ragged image", "/api/read", {"image": [[1, 2], [3]]}),
    ("image level", "/api/read", {"images": [[[1]], [[17]]], "beam": 0}),
    ("examples query", "/api/examples?n=0&start=x", None),
    ("too many lines", "/api/translate", {"lines": ["a"] * 257}),
    ("over the budget", "/api/translate", {"lines": [WIDE] * 11, "beam": 16}),
    ("within the budget", "/api/translate", {"lines": ["dog", "", LONG] * 60}),
    ("stream refused mid-way", "/api/translate/stream", {"text": "a", "prefix": [0, 5]}),
    ("budget with alternatives", "/api/translate", {"text": "dog", "beam": 16, "alternatives": 16}),
]


# --- the two sides ------------------------------------------------------------------------------


def _events(text: str) -> list[list]:
    """A Server-Sent Events body as [[kind, data], ...]."""
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append([fields["event"], json.loads(fields["data"])])
    return out


JSON_TYPE = {"content-type": "application/json"}


def _python(client: TestClient, cases) -> list[dict]:
    answers = []
    for _, path, body in cases:
        if body is None:
            got = client.get(path)
        elif body == "NOBODY":
            got = client.post(path)
        else:  # ASCII JSON: a lone surrogate is sent escaped, as a page's JSON.stringify does
            got = client.post(path, content=json.dumps(body), headers=JSON_TYPE)
        if got.headers["content-type"].startswith("text/event-stream"):
            events = _events(got.text)
            answers.append({"status": got.status_code, "events": events})
        else:
            answers.append({"status": got.status_code, "data": got.json(), "events": []})
    return answers


def _site(exports: dict[str, Path], infos: list[dict], folder: Path) -> Path:
    """A site folder as the page reads it: site.json and models/NAME/ (the export's
    manifest and graphs, and the two tokenizers as sentencepiece.js reads them)."""
    models = []
    for info in infos:
        name = info["name"]
        export, target = exports[name], folder / "models" / name
        target.mkdir(parents=True)
        manifest = json.loads((export / "attnmt.json").read_text(encoding="utf-8"))
        for file in ("attnmt.json", *manifest["graphs"].values()):
            shutil.copy(export / file, target / file)
        for side, spec in _tokenizers(export).items():
            (target / f"tokenizer-{side}.json").write_text(json.dumps(spec), encoding="utf-8")
        models.append({"name": name, "dir": f"models/{name}/", "info": info})
    # A model whose step graph is missing: refused when first used, by name.
    broken = folder / "models" / "broken"
    broken.mkdir()
    for file in ("attnmt.json", "encoder.onnx"):
        shutil.copy(folder / "models" / "rnn" / file, broken / file)
    site = {
        "attnmt": "test",
        "runtime": {"name": "onnxruntime-web", "version": "test", "module": "ort/ort.mjs",
                    "wasm": "ort/"},
        "limits": dict(infos[0]["limits"]),
        "models": models,
        "broken": {"name": "broken", "dir": "models/broken/", "info": infos[0]},
    }  # fmt: skip
    (folder / "site.json").write_text(json.dumps(site), encoding="utf-8")
    return folder


DRIVER = r"""
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
const [web, ortFolder, siteFolder, casesPath] = process.argv.slice(2);
const ort = createRequire(join(ortFolder, "/"))("onnxruntime-node");
const url = (name) => pathToFileURL(join(web, name)).href;
const { createServer } = await import(url("server.js"));
const { connect } = await import(url("worker.js"));
const site = JSON.parse(readFileSync(join(siteFolder, "site.json"), "utf8"));
const read = (path) => readFileSync(join(siteFolder, path));
const cases = JSON.parse(readFileSync(casesPath, "utf8"));

// The parity cases: one server, one request after another.
const server = createServer({ site, ort, read });
const answers = [];
const began = performance.now();
for (const [, path, body] of cases) {
  const events = [];
  const onEvent = (kind, data) => events.push([kind, data]);
  const given = body === null ? undefined : body === "NOBODY" ? undefined : body;
  const { status, data } = await server.handle(path, given, { onEvent });
  answers.push({ status, data, events });
}
const seconds = (performance.now() - began) / 1000;

// The worker's protocol, on a stand-in port.
function port(siteJson) {
  const out = [];
  let listener = null;
  const scope = {
    postMessage: (m) => out.push(structuredClone(m)),
    addEventListener: (_, f) => { listener = f; },
  };
  connect(scope, { importModule: async () => ort, fetchFile: read });
  return { out, send: (data) => listener({ data }), site: siteJson };
}
async function until(out, test, ms = 60000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const found = out.find(test);
    if (found) return found;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error("no answer in time");
}
const protocol = {};
const w = port(site);
w.send({ type: "request", id: 1, path: "/api/health" });  // before init: waits for it
await new Promise((r) => setTimeout(r, 20));
protocol.before_init = w.out.length;
w.send({ type: "init", site, base: "file:///site/" });
protocol.health = await until(w.out, (m) => m.id === 1);
const long = Array(60).fill("the cat sat on the mat").join(" ");
w.send({ type: "request", id: 2, path: "/api/translate/stream",
         body: { model: "rnn", text: long, beam: 16 } });
await until(w.out, (m) => m.id === 2 && m.type === "event" && m.event === "step");
w.send({ type: "cancel", id: 2 });
protocol.cancelled = await until(w.out, (m) => m.id === 2 && m.type === "response");
protocol.cancelled_steps = w.out.filter((m) => m.id === 2 && m.event === "step").length;
protocol.kinds = w.out.filter((m) => m.id === 2).map((m) => m.event ?? m.type);
w.send({ type: "request", id: 3, path: "/api/translate", body: { text: "dog", model: "rnn" } });
protocol.after = await until(w.out, (m) => m.id === 3);
w.send({ type: "request", id: 4, path: "/api/health" });
protocol.health_after = await until(w.out, (m) => m.id === 4);
const hurried = createServer({ site: { ...site, limits: { ...site.limits, timeout: 0.0005 } },
                               ort, read });
const slow = { model: "rnn", text: long, beam: 4 };
protocol.timeout = await hurried.handle("/api/translate", slow);
protocol.stream_timeout = await hurried.handle("/api/translate/stream", slow);
const b = port();
const brokenSite = { ...site, models: [site.broken] };
b.send({ type: "init", site: brokenSite, base: "file:///site/" });
b.send({ type: "request", id: 1, path: "/api/translate", body: { text: "dog" } });
protocol.broken = await until(b.out, (m) => m.id === 1);
process.stdout.write(JSON.stringify({ answers, seconds, protocol }));
"""


def answers(exports: dict[str, Path], ort_folder: Path, folder: Path) -> dict:
    """Every case answered by the server (TestClient) and by the page's (node, in
    `folder`), and the worker's protocol."""
    settings = Settings()
    decoders = {n: RunDecoder(n, load_export(p), settings) for n, p in exports.items()}
    cases = []
    for name in exports:
        tgt = decoders[name].loaded.vocab.tgt
        cases += _cases(name, tgt.encode("mat the on sat"), decoders[name].has_attention)
    cases += COMMON
    with TestClient(create_app(decoders, settings)) as client:
        infos = client.get("/api/models").json()["models"]
        python = _python(client, cases)
    site = _site(exports, infos, folder / "site")
    given = folder / "cases.json"
    given.write_text(json.dumps(cases), encoding="utf-8")
    driver = folder / "driver.mjs"
    driver.write_text(DRIVER, encoding="utf-8")
    began = time.monotonic()
    done = subprocess.run(
        [NODE, str(driver), str(WEB), str(ort_folder), str(site), str(given)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout)
    page["node_seconds"] = time.monotonic() - began
    return {"cases": cases, "python": python, **page}


@pytest.fixture(scope="module")
def both(tiny_exports, onnxruntime_node, tmp_path_factory) -> dict:  # noqa: F811
    return answers(tiny_exports, onnxruntime_node, tmp_path_factory.mktemp("web_worker"))


# --- the comparison ------------------------------------------------------------------------------


def same(got, want, where: str) -> None:
    """`got` (the page's) is `want` (the server's): the same keys, lengths and values,
    floats within TOLERANCE (a float on either side: JSON writes 0.0 as 0 in JavaScript)."""
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: {got!r} is not an object"
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for key in want:
            same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list), f"{where}: {got!r} is not a list"
        assert len(got) == len(want), f"{where}: {len(got)} items != {len(want)}"
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(want, float) or (isinstance(got, float) and not isinstance(want, bool)):
        assert isinstance(got, int | float) and not isinstance(got, bool), f"{where}: {got!r}"
        assert abs(got - want) <= TOLERANCE, f"{where}: {got} != {want}"
    else:
        assert got == want and type(got) is type(want), f"{where}: {got!r} != {want!r}"


def test_the_page_answers_as_the_server_does(both):
    for (label, _, _), want, got in zip(
        both["cases"], both["python"], both["answers"], strict=True
    ):
        if not want["events"]:
            assert got["status"] == want["status"], (label, got, want)
            same(got["data"], want["data"], label)
            assert got["events"] == [], label
            continue
        # A stream: the server's events are the page's, then its `done` the page's answer;
        # its `error` (the search refused it once it started), the page's 422.
        *events, (last, answer) = want["events"]
        assert want["status"] == 200, label
        same(got["events"], events, f"{label}: events")
        assert got["status"] == (200 if last == "done" else 422), (label, last, got)
        same(got["data"], answer, f"{label}: {last}")


def test_the_cases_reach_what_they_are_for(both):
    """The answers hold what the cases are there to compare (not only refusals)."""
    by_label = {c[0]: a for c, a in zip(both["cases"], both["python"], strict=True)}
    rnn = by_label["rnn: beam 3, n-best 2"]["data"]["translations"][0]
    assert len(rnn["nbest"]) == 2 and rnn["attention"] and rnn["alignment"]
    tf = by_label["tf: beam 3, n-best 2"]["data"]["translations"][0]
    assert len(tf["attention"]) == 2 * 3 and tf["default_attention"] == 0  # layer 1's mean
    for name in ("rnn", "tf", "plain"):
        line = by_label[f"{name}: id prefix"]["data"]["translations"][0]
        assert line["prefix"]["tokens"] >= 4 and len(line["search"]["nodes"]) > 5
        assert (
            len(by_label[f"{name}: alternatives"]["data"]["translations"][0]["alternatives"]) == 3
        )
        kinds = [kind for kind, _ in by_label[f"{name}: stream"]["events"]]
        assert kinds[0] == "start" and kinds[-1] == "done" and kinds.count("step") >= 2
        lines = by_label[f"{name}: lines"]["data"]["translations"]
        assert [bool(line["error"]) for line in lines] == [False, False, False, True, True]
        assert by_label[f"{name}: cut source"]["data"]["translations"][0]["truncated"]
    assert by_label["stream refused mid-way"]["events"][-1][0] == "error"
    assert by_label["over the budget"]["status"] == 413
    assert by_label["within the budget"]["status"] == 200
    assert by_label["budget with alternatives"]["status"] == 200


def test_the_worker_speaks_its_protocol(both):
    p = both["protocol"]
    assert p["before_init"] == 0  # a request before init waits for it
    assert p["health"]["type"] == "response" and p["health"]["status"] == 200
    assert p["cancelled"]["status"] == 499 and p["cancelled"]["data"] == {"detail": "Stopped."}
    assert p["kinds"][0] == "start" and p["kinds"][-1] == "response"
    assert 1 <= p["cancelled_steps"] < 100  # stopped long before the search's end
    assert p["after"]["status"] == 200 and p["after"]["data"]["translations"][0]["source"] == "dog"
    assert p["health_after"]["data"]["models"]["rnn"] == {"waiting": 0, "capacity": 64,
                                                           "cancelled": 1}  # fmt: skip
    assert p["timeout"] == {"status": 504, "data": {"detail": (
        "the request waited more than 0.0005 s (--timeout); send less at once, or retry when "
        "the server is less busy")}}  # fmt: skip
    assert p["stream_timeout"] == {
        "status": 504,
        "data": {"detail": "the request took longer than the timeout"},
    }
    broken = p["broken"]
    assert broken["status"] == 500 and "step.onnx" in broken["data"]["detail"], broken


def test_the_page_is_quick(both):
    """All the cases in one node process, in seconds."""
    assert both["seconds"] < 60, both["seconds"]
