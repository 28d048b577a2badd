"""The explorer page in a real browser: Debian's Chromium, driven by Playwright, against
`attnmt serve` on loopback with a tiny English->Arabic run trained from the built-in corpus
and a tiny Transformer beside it (the compare view); and against tiny image runs (load a
test canvas, draw on it, read it, see where each run looked) served beside a text run.

`.ci/run` installs Chromium (`apt-get install chromium`); without it the test is skipped,
saying so. Screenshots land in the test's temporary directory, or in
$ATTNMT_SCREENSHOTS when that is set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from attnmt.config import load_config
from attnmt.training import train

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    *("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"),
    *("--disable-component-update", "--no-first-run", "--disable-sync"),
]

playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"
    ),
]


@pytest.fixture(scope="module")
def arabic_run(tmp_path_factory):
    """English -> Arabic (Smith & Van Dyke) from the built-in corpus, trained 150 tiny steps."""
    root = tmp_path_factory.mktemp("arabic")
    overrides = [
        *("data.tgt=ar-svd", "data.vocab_size=800", "data.max_words=12"),
        *("data.batch_tokens=512", "model.hidden_size=32", "model.embed_size=32"),
        *("train.max_steps=150", "train.lr=0.005", "train.validate_every=1000"),
        *("train.valid_sentences=4", "train.log_every=1000"),
        "train.precision=fp32",  # one path on every CPU: the page needs it to write words
        f"data.cache_dir={root / 'cache'}",
        f"train.run_dir={root / 'run'}",
    ]
    config = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"
    train(load_config(config, overrides), progress=False)
    return root / "run"


@pytest.fixture(scope="module")
def server(arabic_run, tiny_runs):
    yield from _serve([f"en-ar={arabic_run}", f"tf={tiny_runs['tf']}"])


@pytest.fixture(scope="module")
def image_server(tiny_image_runs, tiny_runs):
    """Two Show-Attend-Tell runs (24x64: compared), the glimpses (40x40) and a text run."""
    runs = [f"{name}={tiny_image_runs[name]}" for name in ("soft", "hard", "glimpses")]
    yield from _serve([*runs, f"tf={tiny_runs['tf']}"])


def _serve(runs: list[str]):
    """Start `attnmt serve RUNS` on a free port; yield its address; stop it."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "attnmt", "serve", *runs, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/health", timeout=2):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"attnmt serve did not start: {process.communicate()[1]}")
            time.sleep(0.2)
    yield base
    process.terminate()
    _, err = process.communicate(timeout=30)
    assert "Traceback" not in err, err


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def shots(tmp_path):
    folder = Path(os.environ.get("ATTNMT_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_type_translate_see_and_hover(server, shots):
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(server)
            # Two runs served: the compare view, one panel each.
            page.wait_for_selector("section.panel[data-model='tf']")
            assert page.locator("section.panel").count() == 2
            page.fill("#text", "In the beginning was the Word.")
            page.click("#translate")
            arabic = page.locator("section.panel[data-model='en-ar']")
            arabic.locator(".heatmap .cell").first.wait_for()
            tf = page.locator("section.panel[data-model='tf']")
            # The tiny Transformer may write nothing; its subword map still has the </s> row.
            page.wait_for_function(
                "!document.querySelector(\"section.panel[data-model='tf']\")"
                ".classList.contains('busy')"
            )
            words = tf.locator(".heatmap")
            assert words.locator(".cell").count() > 0 or "has no words" in words.inner_text()
            tf.locator("select.level").select_option("subword")
            tf.locator(".heatmap .cell").first.wait_for()
            translation = arabic.locator(".translation")
            assert translation.inner_text().strip()
            # Right to left: the browser lays the Arabic output out right to left.
            direction = translation.evaluate("e => getComputedStyle(e).direction")
            assert direction == "rtl"
            # The heatmap has one row per target token and one column per source token.
            rows = arabic.locator(".heatmap .tgt-label").count()
            cols = arabic.locator(".heatmap .src-label").count()
            assert arabic.locator(".heatmap .cell").count() == rows * cols > 0
            # Hovering a target word colours the source words it attended to.
            assert arabic.locator(".src-token.hl").count() == 0
            arabic.locator(".tgt-token").first.hover()
            assert arabic.locator(".src-token.hl").count() > 0
            assert arabic.locator(".tgt-token.active").count() == 1
            page.screenshot(path=str(shots / "explorer-compare.png"))
            # The subword level, and the Transformer's layer and head selector.
            arabic.locator("select.level").select_option("subword")
            assert arabic.locator(".heatmap .src-label").last.inner_text() == "</s>"
            options = tf.locator("select.map option").all_inner_texts()
            assert "layer 1, mean of heads" in options and "layer 2, head 2" in options
            tf.locator("select.map").select_option(label="layer 2, head 2")
            tf.locator(".heatmap[data-map='5'] .cell").first.wait_for()
            # One model only: no compare switch needed; an empty box does not call the API.
            page.uncheck("#compare")
            assert page.locator("section.panel").count() == 1
            page.fill("#text", "")
            page.click("#translate")
            assert "Type a sentence first" in page.locator("#status").inner_text()
            page.screenshot(path=str(shots / "explorer-one.png"))
        finally:
            browser.close()
    assert errors == []
    assert (shots / "explorer-compare.png").stat().st_size > 10_000


def _api(base: str, path: str) -> dict:
    with urllib.request.urlopen(f"{base}{path}", timeout=10) as answer:
        return json.load(answer)


def _settled(page, name: str) -> None:
    page.wait_for_function(
        f"!document.querySelector(\"section.panel[data-model='{name}']\")"
        ".classList.contains('busy')"
    )


def test_choose_an_explanation_method_and_see_it_drawn(server, shots):
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda err: errors.append(str(err)))
            sent: list[dict] = []
            page.on(
                "request",
                lambda r: (
                    sent.append(json.loads(r.post_data))
                    if r.url.endswith("/api/translate")
                    else None
                ),
            )
            page.goto(server)
            page.wait_for_selector("section.panel[data-model='tf']")
            # Each panel lists the methods its run takes: no rollout for the RNN.
            for name in ("en-ar", "tf"):
                panel = page.locator(f"section.panel[data-model='{name}']")
                offered = panel.locator("select.method option").evaluate_all(
                    "options => options.map(o => o.value)"
                )
                methods = _api(server, f"/api/model?model={name}")["explain_methods"]
                assert offered == ["", *methods]
                assert ("rollout" in offered) == (name == "tf")
            page.fill("#text", "In the beginning was the Word.")
            page.click("#translate")
            arabic = page.locator("section.panel[data-model='en-ar']")
            arabic.locator(".heatmap .cell").first.wait_for()
            assert arabic.locator(".legend").get_attribute("data-scale") == "weights"
            assert arabic.locator(".method-info").inner_text() == ""
            # Occlusion: the sentence again, with explain; its name, cost and signed scale.
            sent.clear()
            arabic.locator("select.method").select_option("occlusion")
            arabic.locator(".heatmap[data-method='occlusion'] .cell").first.wait_for()
            assert [body.get("explain") for body in sent] == ["occlusion"]
            info = arabic.locator(".method-info").inner_text()
            assert info.startswith("occlusion · ") and " ms · " in info
            assert arabic.locator(".legend").get_attribute("data-scale") == "signed"
            assert "negative" in arabic.locator(".legend").inner_text()
            assert arabic.get_attribute("data-method") == "occlusion"
            assert not arabic.locator(".map-wrap").is_visible()  # one matrix: the method's
            arabic.locator(".tgt-token").first.hover()
            assert arabic.locator(".src-token.hl").count() > 0
            page.screenshot(path=str(shots / "explorer-occlusion.png"))
            # Rollout on the Transformer: a score per row, shaded to the row's largest.
            tf = page.locator("section.panel[data-model='tf']")
            tf.locator("select.method").select_option("rollout")
            page.wait_for_function(
                "document.querySelector(\"section.panel[data-model='tf']\")"
                ".dataset.method === 'rollout'"
            )
            assert tf.locator(".method-info").inner_text().startswith("rollout · ")
            tf.locator("select.level").select_option("subword")
            tf.locator(".heatmap[data-method='rollout'] .cell").first.wait_for()
            assert tf.locator(".legend").get_attribute("data-scale") == "row"
            # Back to the attention as decoded: every layer and head again.
            tf.locator("select.method").select_option("")
            _settled(page, "tf")
            page.wait_for_function(
                "document.querySelector(\"section.panel[data-model='tf']\").dataset.method === ''"
            )
            assert tf.locator("select.map option").count() == 6
            assert tf.locator(".method-info").inner_text() == ""
        finally:
            browser.close()
    assert errors == []


DRAW = "document.getElementById('draw')"  # the drawing canvas


def test_load_draw_read_and_see_where_it_looked(image_server, shots):
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(image_server)
            # The first run reads 24x64 images: a drawing canvas, no text box; the other
            # run of that size beside it (the glimpses and the text run are not offered).
            page.wait_for_selector("section.panel[data-model='hard']")
            assert page.locator("#image-input").is_visible()
            assert not page.locator("#text").is_visible() and page.locator("#read").is_visible()
            assert page.evaluate(f"[{DRAW}.width, {DRAW}.height]") == [64 * 8, 24 * 8]
            second = page.locator("section.panel[data-model='hard'] select.model option")
            assert second.all_inner_texts() == ["soft", "hard"]
            page.click("#read")  # nothing drawn yet: said, not sent
            assert "Draw something first" in page.locator("#status").inner_text()
            page.click("#example")
            page.wait_for_function("document.querySelector('#example-note').textContent")
            note = page.locator("#example-note").inner_text()
            assert note.startswith("test example 1 of 8 · true digits ")
            digits = note.split("true digits ")[1]
            page.click("#read")
            for name in ("soft", "hard"):
                panel = page.locator(f"section.panel[data-model='{name}']")
                panel.locator(".look canvas").first.wait_for()
                read = panel.locator(".translation").inner_text()
                # One picture per decoder step: each digit read, then </s>.
                captions = panel.locator(".look figcaption").all_inner_texts()
                assert captions[:-1] == read.split() and captions[-1] == "</s>"
                assert panel.locator(".truth").inner_text().startswith(f"true digits {digits}")
            page.screenshot(path=str(shots / "explorer-images.png"))
            # An explanation method redraws the maps: occlusion of the soft run's reading.
            soft = page.locator("section.panel[data-model='soft']")
            offered = soft.locator("select.method option").evaluate_all(
                "options => options.map(o => o.value)"
            )
            assert offered == ["", *_api(image_server, "/api/model?model=soft")["explain_methods"]]
            steps = soft.locator(".look").count()
            soft.locator("select.method").select_option("occlusion")
            page.wait_for_function(
                "document.querySelector(\"section.panel[data-model='soft']\")"
                ".dataset.method === 'occlusion'"
            )
            assert soft.locator(".method-info").inner_text().startswith("occlusion · ")
            assert "occlusion" in soft.locator(".looks-hint").inner_text()
            assert soft.locator(".look").count() == steps  # a picture per step, as before
            page.screenshot(path=str(shots / "explorer-images-occlusion.png"))
            soft.locator("select.method").select_option("")
            _settled(page, "soft")
            # Drawing makes the image the user's own: no truth to compare with any more.
            box = page.locator("#draw").bounding_box()
            page.mouse.move(box["x"] + 30, box["y"] + 30)
            page.mouse.down()
            page.mouse.move(box["x"] + 50, box["y"] + 160, steps=8)
            page.mouse.up()
            assert page.locator("#example-note").inner_text() == "your drawing"
            page.click("#clear")
            blank = f"{DRAW}.getContext('2d').getImageData(0, 0, 512, 192).data"
            assert page.evaluate(f"{blank}.every((v, i) => i % 4 === 3 || v === 255)")
            # The glimpses read 40x40 images: the canvas follows, the compare view goes.
            first = page.locator("section.panel").first
            first.locator("select.model").select_option("glimpses")
            page.wait_for_function(f"{DRAW}.width === 320")
            assert page.locator("section.panel").count() == 1
            assert not page.locator("#compare-wrap").is_visible()
            page.click("#example")
            page.wait_for_function("document.querySelector('#example-note').textContent")
            page.click("#read")
            glimpses = page.locator("section.panel[data-model='glimpses']")
            glimpses.locator(".look canvas").first.wait_for()
            assert glimpses.locator(".look").count() == 2  # the digit, then </s>
            assert "6 glimpses" in glimpses.locator(".looks-hint").inner_text()
            page.screenshot(path=str(shots / "explorer-glimpses.png"))
            # A text run served beside them still translates as before.
            page.locator("section.panel").first.locator("select.model").select_option("tf")
            assert page.locator("#text").is_visible() and not page.locator("#draw").is_visible()
            page.fill("#text", "the cat sat")
            page.click("#translate")
            tf = page.locator("section.panel[data-model='tf']")
            page.wait_for_function(
                "!document.querySelector(\"section.panel[data-model='tf']\")"
                ".classList.contains('busy')"
            )
            tf.locator("select.level").select_option("subword")
            tf.locator(".heatmap .cell").first.wait_for()
        finally:
            browser.close()
    assert errors == []
    assert (shots / "explorer-images.png").stat().st_size > 10_000
