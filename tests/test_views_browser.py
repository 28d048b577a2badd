"""The notebook views (attnmt.views) in a real browser: Debian's Chromium through
Playwright, every network request refused and recorded. Two outputs (an RNNsearch's and a
Transformer's translations) share one page as two notebook cells would; each is drawn,
explorable, and leaves the other alone; with scripts off (an untrusted notebook, a static
viewer) the pictures are there; a notebook exported by nbconvert shows them too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.conftest import WORDS

import attnmt

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"
    ),
]


@pytest.fixture(scope="module")
def outputs(tiny_runs):
    """Two outputs' HTML, as two cells of a notebook would show them."""
    lines = [" ".join(WORDS[:4]), " ".join(WORDS[4:7])]
    rnn = attnmt.load(tiny_runs["rnn"], device="cpu").translate(lines, explain="occlusion")
    tf = attnmt.load(tiny_runs["tf"], device="cpu").translate(lines[0], beam=2)
    return rnn, tf


def _page(body: str) -> str:
    return f'<!doctype html><html><head><meta charset="utf-8"></head><body>{body}</body></html>'


def _open(p, html: str, *, scripts: bool = True):
    """A page with `html`, every request refused; returns (browser, page, tried, errors)."""
    browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
    context = browser.new_context(
        java_script_enabled=scripts, viewport={"width": 1200, "height": 900}
    )
    tried: list[str] = []
    errors: list[str] = []

    def refuse(route):
        tried.append(route.request.url)
        route.abort()

    context.route("**/*", refuse)
    page = context.new_page()
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.set_content(html)
    return browser, page, tried, errors


def test_two_outputs_draw_hover_click_and_stay_apart(outputs):
    rnn, tf = outputs
    with playwright.sync_playwright() as p:
        browser, page, tried, errors = _open(p, _page(rnn.to_html() + tf.to_html()))
        try:
            views = page.locator("div.attnmt-view")
            assert views.count() == 2
            first, second = views.nth(0), views.nth(1)
            first.locator(".viz .heatmap .cell").first.wait_for()
            assert page.locator(".attnmt-static").count() == 0  # each picture made explorable
            assert first.locator(".viz").count() == 2 and second.locator(".viz").count() == 1

            # Hover a cell: its weight and its two words are read out.
            one = first.locator(".viz").first
            cell = one.locator(".heatmap .cell").first
            cell.hover()
            out = one.locator(".readout").inner_text()
            weight = float(cell.get_attribute("title").split(":")[0])
            assert re.search(rf": {weight:.3f}$", out), out
            tgt, src = (
                one.locator(".tgt-label").first.inner_text(),
                one.locator(".src-label").first.inner_text(),
            )
            assert out.startswith(f"{tgt} ← {src}")
            assert one.locator(".hl-cell").count() > 0
            assert second.locator(".hl-cell, .active, .hl").count() == 0  # the other output

            # Click a target word: its row stays lit after the pointer leaves.
            one.locator(".tgt-token").first.click()
            page.mouse.move(1, 1)
            assert one.locator(".tgt-token.active").count() == 1
            assert one.locator(".src-token.hl").count() > 0
            assert second.locator(".active").count() == 0
            one.locator(".tgt-token").first.click()  # again: let go
            page.mouse.move(1, 1)
            assert one.locator(".active").count() == 0

            # The explanation beside the attention: the method selector switches maps.
            methods = one.locator("select.map-method option").evaluate_all(
                "o => o.map(x => x.value)"
            )
            assert methods == ["attention", "occlusion"]
            one.locator("select.map-method").select_option("occlusion")
            one.locator(".heatmap[data-method='occlusion'] .cell").first.wait_for()
            assert one.locator(".legend").get_attribute("data-scale") == "signed"

            # The Transformer's layers and heads, and the subword level.
            maps = second.locator("select.map option").all_inner_texts()
            assert len(maps) == 6 and "layer 2, head 2" in maps
            second.locator("select.map").select_option(label="layer 2, head 2")
            second.locator(".heatmap[data-map='5']").wait_for()
            second.locator("select.level").select_option("subword")
            assert second.locator(".heatmap .src-label").last.inner_text() == "</s>"
            assert first.locator(".heatmap[data-map='5']").count() == 0
        finally:
            browser.close()
    assert not errors, errors
    assert not tried, f"the views asked the network for {tried}"


def test_without_scripts_the_pictures_are_there(outputs):
    rnn, tf = outputs
    with playwright.sync_playwright() as p:
        browser, page, tried, _ = _open(p, _page(rnn.to_html() + tf.to_html()), scripts=False)
        try:
            # a picture per sentence: a table, or a note when the output has no words
            assert page.locator(".attnmt-static").count() == 3
            pictures = page.locator(".attnmt-static table")
            assert pictures.count() >= 1
            record = rnn.records[0]
            cells = pictures.first.locator("td")
            words = record["attention"][record["default_attention"]]["word"]
            assert cells.count() == sum(len(row) for row in words) > 0
            colours = cells.evaluate_all("cs => cs.map(c => getComputedStyle(c).backgroundColor)")
            assert len(set(colours)) > 1  # shaded by weight, not blank
            assert page.locator(".viz").count() == 0
        finally:
            browser.close()
    assert not tried


def test_an_exported_notebook_shows_the_pictures(outputs, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbconvert = pytest.importorskip("nbconvert")
    rnn, _ = outputs
    bundle = rnn._repr_mimebundle_()
    cell = nbformat.v4.new_code_cell("model.translate(lines)")
    data = {k: v for k, v in bundle.items() if k != "image/png"}
    cell.outputs = [nbformat.v4.new_output("display_data", data=data)]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    body, _ = nbconvert.HTMLExporter(template_name="classic").from_notebook_node(notebook)
    assert 'class="attnmt-static"' in body
    with playwright.sync_playwright() as p:
        for scripts in (False, True):
            browser, page, tried, errors = _open(p, body, scripts=scripts)
            try:
                shown = ".attnmt-static td" if not scripts else ".viz .heatmap .cell"
                page.locator(shown).first.wait_for()
                assert page.locator(shown).count() > 0
            finally:
                browser.close()
            assert not errors
            # nbconvert's own page may ask for its fonts and require.js; the views do not
            assert not [u for u in tried if "attnmt" in u]


# What JupyterLab does with an HTML output (rendermime's renderHTML): innerHTML into a host
# that is not yet in the page, then each script replaced by a fresh copy, which runs; the
# host is attached afterwards.
JUPYTERLAB = """(html) => {
  const host = document.createElement('div');
  host.innerHTML = html;
  for (const old of Array.from(host.getElementsByTagName('script'))) {
    const fresh = document.createElement('script');
    for (const a of old.attributes) fresh.setAttribute(a.name, a.value);
    fresh.textContent = old.textContent;
    old.parentNode.replaceChild(fresh, old);
  }
  document.body.appendChild(host);
}"""


def test_a_view_inserted_as_jupyterlab_does_is_explorable(outputs):
    _, tf = outputs
    with playwright.sync_playwright() as p:
        browser, page, tried, errors = _open(p, _page(""))
        try:
            page.evaluate(JUPYTERLAB, tf.to_html())
            page.locator(".attnmt-view .viz .heatmap").first.wait_for()
            assert page.locator(".attnmt-static").count() == 0
        finally:
            browser.close()
    assert not errors and not tried
