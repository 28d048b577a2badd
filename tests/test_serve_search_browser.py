"""The search on the explorer page, in Chromium against `attnmt serve`: the tree renders,
hovering a node shows where it looked, a node continues the translation, so does a
corrected word, alternatives continue too, and a streamed answer fills the heatmap row by
row and ends as the plain answer does. No request leaves the server."""

from __future__ import annotations

import json
import urllib.request

import pytest
from tests.test_serve_browser import ARGS, CHROMIUM, _serve

playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"
    ),
]

LINE = "the cat sat on the mat"


@pytest.fixture(scope="module")
def server(tiny_runs):
    yield from _serve([f"rnn={tiny_runs['rnn']}"])


def _post(base: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"{base}/api/translate", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["translations"][0]


def _settled(page) -> None:
    page.wait_for_function("!document.querySelector('section.panel').classList.contains('busy')")


def test_see_the_tree_continue_from_a_node_a_word_and_an_alternative(server):
    errors, sent, urls = [], [], []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.on("request", lambda r: urls.append(r.url))
            page.on(
                "request",
                lambda r: sent.append(json.loads(r.post_data)) if r.method == "POST" else None,
            )
            page.goto(server)
            page.wait_for_selector("section.panel[data-model='rnn']")
            page.fill("#text", LINE)
            page.fill("#beam", "3")
            page.click("#translate")
            panel = page.locator("section.panel")
            nodes = panel.locator(".search-wrap g.node")
            nodes.first.wait_for()
            _settled(page)
            plain = _post(server, {"text": LINE, "beam": 3, "search": True, "weights": True})
            assert nodes.count() == len(plain["search"]["nodes"])
            assert sent[-1]["search"] is True
            # Hover a node of the chosen path: its details show its attention row.
            node = panel.locator(".search-wrap g.node[data-best='true'][data-status='kept']").nth(1)
            node.hover()
            cells = panel.locator(".search-wrap .attn-row .attn-cell")
            assert cells.count() == len(plain["source_pieces"])
            shown = [float(c.get_attribute("data-weight")) for c in cells.all()]
            wanted = next(
                n["attention"]
                for n in plain["search"]["nodes"]
                if n["id"] == int(node.get_attribute("data-id"))
            )
            assert shown == pytest.approx(wanted, abs=1e-4)
            # Click it, continue from it: the prefix is its path's subwords.
            node.click()
            before = len(sent)
            panel.locator(".search-wrap button.continue").click()
            page.wait_for_function(
                "document.querySelector('section.panel .translation .forced') !== null"
            )
            _settled(page)
            body = sent[before]
            assert isinstance(body["prefix"], list) and len(body["prefix"]) == 2
            forced = panel.locator(".translation .word.forced")
            forced.first.wait_for()
            # A word of the translation, corrected: the new translation begins with it.
            panel.locator(".translation .word").first.click()
            prefix = panel.locator(".steer .prefix")
            assert prefix.input_value() == panel.locator(".translation .word").first.inner_text()
            prefix.fill("dog dog")
            panel.locator(".steer .continue-btn").click()
            page.wait_for_function(
                "document.querySelector('section.panel .translation').innerText"
                ".startsWith('dog dog')"
            )
            _settled(page)
            assert sent[-1]["prefix"] == "dog dog"
            # Alternatives after the prefix: a list; one clicked continues with it.
            panel.locator(".steer .alternatives-btn").click()
            items = panel.locator(".alternatives li")
            items.first.wait_for()
            _settled(page)
            assert sent[-1]["alternatives"] == 5 and sent[-1]["prefix"] == "dog dog"
            second = items.nth(1)
            token = int(second.get_attribute("data-token"))
            second.click()
            _settled(page)
            page.wait_for_function("document.querySelector('section.panel .alternatives').hidden")
            assert sent[-1]["prefix"][-1] == token and "alternatives" not in sent[-1]
            # From the start again.
            panel.locator(".steer .clear-prefix").click()
            _settled(page)
            assert "prefix" not in sent[-1]
        finally:
            browser.close()
    assert errors == []
    assert all(url.startswith(server) for url in urls), urls


def test_a_streamed_answer_fills_the_heatmap_and_the_tree(server):
    errors, urls = [], []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.on("request", lambda r: urls.append(r.url))
            page.goto(server)
            page.wait_for_selector("section.panel[data-model='rnn']")
            # Record every row count the heatmap shows while it streams.
            page.evaluate(
                """() => {
                  window.__rows = [];
                  new MutationObserver(() => {
                    const v = document.querySelector('section.panel .viz');
                    if (v && v.dataset.streaming) window.__rows.push(Number(v.dataset.streaming));
                  }).observe(document.body, {subtree: true, attributes: true, childList: true});
                }"""
            )
            page.check("#stream")
            page.fill("#text", LINE)
            page.fill("#beam", "2")
            page.click("#translate")
            panel = page.locator("section.panel")
            page.wait_for_function(
                "document.querySelector('section.panel .meta').innerText.startsWith('beam 2')"
            )
            _settled(page)
            rows = page.evaluate("window.__rows")
            assert len(set(rows)) > 2 and rows == sorted(rows)  # row by row, growing
            plain = _post(server, {"text": LINE, "beam": 2, "search": True, "weights": True})
            assert panel.locator(".translation").inner_text() == plain["translation"]
            assert panel.locator(".search-wrap g.node").count() == len(plain["search"]["nodes"])
            assert panel.locator(".viz").get_attribute("data-streaming") is None
            assert any(url.endswith("/api/translate/stream") for url in urls)
        finally:
            browser.close()
    assert errors == []
    assert all(url.startswith(server) for url in urls), urls
