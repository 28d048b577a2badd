"""`attnmt serve EXPORT_DIR` without torch: a process that cannot import torch (nor the
other packages the `serve` extra leaves out) builds the app as `attnmt serve` does, over
two ONNX exports side by side, and answers translate, n-best, the search, a prefix,
alternatives, a stream and a score as the runs themselves are served; an explanation is
refused in one sentence."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from attnmt.decoding.runs import load_run
from attnmt.explain.names import EXPORT_EXPLAINS
from attnmt.serve import RunDecoder, Settings, create_app

# What the `serve` extra does not install: the process below cannot import them.
NOT_IN_SERVE = ("torch", "matplotlib", "sacrebleu", "sklearn", "onnx")
SENTENCE = "the cat sat on the mat"
REQUESTS = {
    "nbest": ("/api/translate", {"lines": [SENTENCE, "", "dog"], "beam": 3, "n_best": 2}),
    "search": ("/api/translate", {"text": SENTENCE, "beam": 2, "search": True, "weights": True}),
    "prefix": ("/api/translate", {"text": SENTENCE, "prefix": "the", "alternatives": 2}),
    "score": (
        "/api/score",
        {"pair": {"source": "the cat", "target": "cat the"}, "alignments": True},
    ),
}
SCRIPT = """
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
from fastapi.testclient import TestClient
from attnmt.cli import parse
from attnmt.cli.serve import build
app, decoders, settings = build(parse(["serve", {rnn!r}, "tf=" + {tf!r}]))
answers = {{}}
with TestClient(app) as client:
    answers["models"] = [m["name"] for m in client.get("/api/models").json()["models"]]
    for model in ("rnn", "tf"):
        for key, (path, body) in {requests!r}.items():
            got = client.post(path, json={{**body, "model": model}})
            answers[model + " " + key] = [got.status_code, got.json()]
    got = client.post("/api/translate", json={{"text": "dog", "explain": "occlusion"}})
    answers["explain"] = [got.status_code, got.json()]
    stream = client.post("/api/translate/stream", json={{"text": "dog", "model": "tf"}})
    answers["stream"] = [stream.status_code, stream.text]
    answers["page"] = client.get("/").status_code
answers["torch"] = "torch" in sys.modules
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def exported(tiny_exports):
    return tiny_exports


def test_an_export_is_served_without_torch_as_its_run(tiny_runs, exported):
    code = SCRIPT.format(
        blocked=NOT_IN_SERVE,
        rnn=str(exported["rnn"]),
        tf=str(exported["tf"]),
        requests=REQUESTS,
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout.splitlines()[-1])
    assert answers["torch"] is False and answers["page"] == 200
    assert answers["models"] == ["rnn", "tf"]
    # The runs themselves, served with torch: the same answers, to the export's precision.
    settings = Settings()
    decoders = {n: RunDecoder(n, load_run(tiny_runs[n]), settings) for n in ("rnn", "tf")}
    with TestClient(create_app(decoders, settings)) as client:
        for model in ("rnn", "tf"):
            for key, (path, body) in REQUESTS.items():
                status, got = answers[f"{model} {key}"]
                assert status == 200, got
                want = client.post(path, json={**body, "model": model}).json()
                rows = "scores" if key == "score" else "translations"
                for a, b in zip(got[rows], want[rows], strict=True):
                    assert a["translation"] == b["translation"], (model, key)
                    assert a["score"] == pytest.approx(b["score"], abs=1e-3), (model, key)
                    assert a["target_pieces"] == b["target_pieces"]
                    for field in ("nbest", "alternatives", "prefix"):
                        assert (a[field] is None) == (b[field] is None), (model, key, field)
                    if a["search"] is not None:
                        assert len(a["search"]["nodes"]) == len(b["search"]["nodes"])
    status, refused = answers["explain"]
    assert status == 422 and refused["detail"] == EXPORT_EXPLAINS
    status, stream = answers["stream"]
    assert status == 200 and "event: done" in stream and "event: step" in stream
