"""The static site of `attnmt export --format web` in a real browser: Debian's Chromium,
driven by Playwright, against a plain static file server (Python's http.server in a
thread), no attnmt server anywhere. The site holds the tiny RNNsearch of conftest (a run:
exported to ONNX on the way) and the tiny Transformer's ONNX export.

Every request the page makes (its worker's included) is recorded and must stay on the
site's origin: one outside is aborted and fails the test. The page lists the models,
translates a sentence greedily and with beam 3 (the tree drawn, the heatmap filled), the
same translation `attnmt serve` gives for the same export; streams one, and stops one
(Stop: the worker is told to cancel); refuses an over-long sentence with the server's
sentence, the typed text still in the box.

Skipped, saying why, without Chromium or Playwright, or when onnxruntime-web cannot be
fetched from the npm registry (tests/test_web_site.py's `ort_web`).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import sys
import threading
from pathlib import Path

import pytest
from tests.conftest import mixed_corpus
from tests.test_serve_browser import ARGS, CHROMIUM
from tests.test_web_site import export_site, ort_web  # noqa: F401 (a fixture)

from attnmt.serve import clean_line

playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import web_parity  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"
    ),
]
SENTENCE = "the cat sat on the mat"
IDLE = "!document.querySelector('#translate').disabled"  # no request in flight
# With `window.holdStreams`, the page's stream requests wait until it cancels them, then
# reach the worker with their cancel right behind: Stop is tested without a race against
# the tiny models' millisecond decodings. `window.cancelled`: the ids the page cancelled.
HOLD_STREAMS = """(() => {
  const post = Worker.prototype.postMessage, held = new Map();
  window.cancelled = [];
  Worker.prototype.postMessage = function (message) {
    if (message.type === 'cancel') window.cancelled.push(message.id);
    if (window.holdStreams && message.type === 'request' && message.path.endsWith('/stream')) {
      held.set(message.id, message);
      return undefined;
    }
    if (message.type === 'cancel' && held.has(message.id)) {
      post.call(this, held.get(message.id));
      held.delete(message.id);
    }
    return post.call(this, message);
  };
})()"""


@pytest.fixture(scope="module")
def site(ort_web, tiny_runs, tiny_exports, tmp_path_factory) -> Path:  # noqa: F811
    out = tmp_path_factory.mktemp("web-browser") / "site"
    assert export_site(out, f"rnn={tiny_runs['rnn']}", f"tf={tiny_exports['tf']}") == 0
    return out


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def static_server(site):
    """`python -m http.server -d SITE` in a thread: its address."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def served(site):
    """What `attnmt serve rnn=SITE/models/rnn tf=...` answers to POST /api/translate."""
    from fastapi.testclient import TestClient

    from attnmt.cli.serve import add_arguments, build

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    names = [f"{name}={site / 'models' / name}" for name in ("rnn", "tf")]
    app, _, _ = build(parser.parse_args(names))
    with TestClient(app) as client:
        yield lambda body: client.post("/api/translate", json=body).json()["translations"][0]


def _translate(page, text: str, beam: str) -> None:
    page.fill("#beam", beam)
    page.fill("#text", text)
    page.click("#translate")
    page.wait_for_function(IDLE, timeout=60_000)


def test_the_site_translates_in_the_browser_alone(static_server, served, tmp_path):
    requests: list[str] = []
    outside: list[str] = []
    errors: list[str] = []

    def route(r):
        url = r.request.url
        if url.startswith(f"{static_server}/"):
            r.continue_()
        else:
            outside.append(url)
            r.abort()

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.route("**/*", route)
            context.add_init_script(HOLD_STREAMS)
            context.on("request", lambda r: requests.append(r.url))
            page = context.new_page()
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(f"{static_server}/")
            page.wait_for_selector("section.panel[data-model='tf']")
            models = page.locator("#models").inner_text()
            assert "RNNsearch" in models and "Transformer" in models
            assert page.locator("#site-note").is_visible()
            rnn = page.locator("section.panel[data-model='rnn']")

            # Greedy, the search shown: the server's translation, its tree and heatmap.
            _translate(page, SENTENCE, "1")
            expected = served({"text": SENTENCE, "model": "rnn", "beam": 1})
            assert rnn.locator(".translation").inner_text().strip() == expected["translation"]
            assert f"score {expected['score']:.2f}" in rnn.locator(".meta").inner_text()
            assert rnn.locator(".heatmap .cell").count() > 0
            greedy_nodes = rnn.locator(".attnmt-tree g.node").count()
            assert greedy_nodes >= 2

            # Beam 3: a wider tree, pruned hypotheses faded.
            _translate(page, SENTENCE, "3")
            expected = served({"text": SENTENCE, "model": "rnn", "beam": 3})
            assert "beam 3" in rnn.locator(".meta").inner_text()
            assert rnn.locator(".translation").inner_text().strip() == expected["translation"]
            assert rnn.locator(".attnmt-tree g.node").count() > greedy_nodes
            assert rnn.locator(".attnmt-tree g.node.status-pruned").count() > 0
            assert rnn.locator(".heatmap .cell").count() > 0
            page.screenshot(path=str(tmp_path / "web-site-beam.png"))

            # Streamed: the worker's events draw it; the answer is the same.
            page.check("#stream")
            _translate(page, SENTENCE, "3")
            assert rnn.locator(".translation").inner_text().strip() == expected["translation"]
            assert rnn.locator(".attnmt-tree g.node").count() > greedy_nodes

            # Stop: the worker is told to cancel; the panels say so.
            page.evaluate("window.holdStreams = true")
            page.fill("#text", "the dog ran far")
            page.click("#translate")
            page.click("#stop")
            page.wait_for_function(IDLE, timeout=60_000)
            assert rnn.locator(".error").inner_text().strip() == "Stopped."
            assert page.locator("#stop").is_hidden()
            assert len(page.evaluate("window.cancelled")) == 2  # each panel's stream
            page.evaluate("window.holdStreams = false")
            page.uncheck("#stream")

            # Too long: the server's one sentence; what was typed stays in the box.
            long = " ".join(["mat"] * 600)
            _translate(page, long, "1")
            _, refusal = clean_line(long, 2000)
            assert rnn.locator(".error").inner_text().strip() == refusal
            assert page.input_value("#text") == long
            assert not errors, errors
        finally:
            browser.close()
    assert not outside, f"the page asked for something outside the site: {outside}"
    assert f"{static_server}/ort/ort-wasm-simd-threaded.wasm" in requests
    assert any(url.endswith("/models/rnn/step.onnx") for url in requests)


@pytest.mark.parametrize("model", ["rnn", "tf"])
def test_the_page_decodes_as_attnmt_translate(site, static_server, model, tmp_path):
    """benchmarks/web_parity.py at the suite's size: the page's decoder (the site's own
    worker, in Chromium) and `attnmt translate --beam 3 --n-best 3 --alignments json` of
    the same export give the same pieces, translations, links and 3-best lists, the scores
    within 1e-4, on the tiny corpus's sources (five scripts, accents, emoji)."""
    corpus = mixed_corpus(tmp_path).read_text(encoding="utf-8").splitlines()
    lines = [row.split("\t")[0] for row in corpus[:12]]
    export = site / "models" / model
    python = web_parity.cli_records(export, lines, 3)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            decoder = web_parity.PageDecoder(browser, static_server, site)
            page = decoder.run(model, lines, beam=3, n_best=3)
            decoder.close()
        finally:
            browser.close()
    parity = web_parity.differences(page, python, [f"line {i + 1}" for i in range(len(lines))])
    assert parity["identical"] == len(lines), parity["listed"]
    assert parity["max_score_diff"] <= web_parity.SCORE_TOLERANCE
    assert not decoder.outside and not decoder.errors, (decoder.outside, decoder.errors)
