"""The beam-search tree (attnmt/views/tree.js, tree.css) in a real browser: Debian's
Chromium through Playwright, every network request refused and recorded, as in
tests/test_views_browser.py. A static page inlines the two files and draws a hand-written
search record (beam 3, five steps) in two trees; each is drawn, explorable, streamable and
leaves the other alone.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tests.test_views_browser import CHROMIUM, _open, _page

import attnmt

playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"
    ),
]

VIEWS = Path(attnmt.__file__).parent / "views"
SOURCE = ["▁In", "▁the", "▁beginning", "</s>"]
# id, parent, piece, status, log_prob, best, rank, rejected
NODES = [
    (0, None, "<s>", "root", 0.0, True, None, []),
    (1, 0, "▁Au", "forced", -0.1, True, None, []),
    (2, 1, "▁commencement", "kept", -0.4, True, None, [["▁Le", -2.3], ["▁Dans", -3.1]]),
    (3, 1, "▁début", "kept", -0.8, False, None, []),
    (4, 1, "▁départ", "kept", -1.5, False, None, []),
    (5, 1, "▁premier", "pruned", -2.9, False, None, []),
    (6, 2, ",", "kept", -0.3, True, None, [["▁.", -4.0]]),
    (7, 3, "</s>", "finished", -0.4, False, 1, []),
    (8, 3, "▁du", "kept", -0.5, False, None, []),
    (9, 4, "▁était", "pruned", -1.3, False, None, []),
    (10, 2, "▁de", "pruned", -2.8, False, None, []),
    (11, 6, "▁Dieu", "kept", -0.2, True, None, []),
    (12, 8, "▁monde", "kept", -0.3, False, None, [["▁entier", -2.0]]),
    (13, 6, "▁le", "pruned", -2.6, False, None, []),
    (14, 11, "</s>", "finished", -0.1, True, 0, []),
    (15, 12, "▁.", "ended", -0.3, False, None, []),
    (16, 12, "</s>", "finished", -0.9, False, None, []),
    (17, 11, "▁créa", "ended", -0.6, False, None, []),
    (18, 12, "▁fut", "pruned", -1.7, False, None, []),
]


def _record() -> dict:
    """The search record: cumulative log-probs and scores follow from the token log-probs."""
    nodes: dict[int, dict] = {}
    for i, (id_, parent, piece, status, lp, best, rank, rejected) in enumerate(NODES):
        up = nodes.get(parent)
        depth = up["depth"] + 1 if up else 0
        cum = round((up["cum_log_prob"] if up else 0.0) + lp, 4)
        row = [0.7, 0.2, 0.06, 0.04]
        row = row[i % 4 :] + row[: i % 4]
        nodes[id_] = dict(
            id=id_,
            parent=parent,
            depth=depth,
            piece=piece,
            token=10 + id_,
            status=status,
            log_prob=lp,
            cum_log_prob=cum,
            score=round(cum / ((5 + depth) / 6) ** 0.6, 4),
            best=best,
            rank=rank,
            rejected=rejected,
            attention=None if parent is None else row,
        )
    ordered = sorted(nodes.values(), key=lambda n: n["depth"])
    return {"beam": 3, "alpha": 0.6, "source_pieces": SOURCE, "nodes": ordered, "nbest": [14, 7]}


RECORD = _record()
BY_ID = {n["id"]: n for n in RECORD["nodes"]}

SCRIPT = """
const SEARCH = @DATA@;
window.continued = [];
window.selected = [];
window.trees = ['one', 'two'].map((name) => {
  const tree = AttnmtTree.create({
    onContinue: (node, path) =>
      window.continued.push({tree: name, id: node.id, path: path.map((n) => n.id)}),
    onSelect: (node) => window.selected.push(node ? node.id : null),
  });
  tree.el.id = name;
  document.body.append(tree.el);
  return tree;
});
window.trees[0].show(SEARCH);
window.trees[1].show(Object.assign({}, SEARCH, {nodes: []}));
window.trees[1].add(SEARCH.nodes.slice(0, 9));
window.trees[1].add(SEARCH.nodes.slice(9));
window.trees[1].flush();
"""


@pytest.fixture(scope="module")
def html(tmp_path_factory) -> str:
    """A static page (written to a tmp dir as a file would be) inlining tree.css and tree.js."""
    css, js = ((VIEWS / f).read_text(encoding="utf-8") for f in ("tree.css", "tree.js"))
    for text in (css, js):
        assert "</script" not in text.lower() and "</style" not in text.lower()
    data = json.dumps(RECORD).replace("</", "<\\/")
    script = SCRIPT.replace("@DATA@", data)
    body = f"<style>{css}</style><script>{js}\n{script}</script>"
    page = tmp_path_factory.mktemp("tree") / "tree.html"
    page.write_text(_page(body), encoding="utf-8")
    return page.read_text(encoding="utf-8")


@pytest.fixture
def page(html):
    with playwright.sync_playwright() as p:
        browser, page, tried, errors = _open(p, html)
        try:
            page.locator("#one .node").first.wait_for()
            yield page
        finally:
            browser.close()
    assert not errors, errors
    assert not tried, f"the tree asked the network for {tried}"


def _ids(locator) -> list[int]:
    return sorted(int(i) for i in locator.evaluate_all("es => es.map(e => e.dataset.id)"))


def test_nodes_statuses_best_path_and_faded_pruned(page):
    one = page.locator("#one")
    assert one.get_attribute("class") == "attnmt-tree"
    nodes = one.locator("svg .node")
    assert nodes.count() == len(NODES)
    counts: dict[str, int] = {}
    for node in RECORD["nodes"]:
        counts[node["status"]] = counts.get(node["status"], 0) + 1
    for status, n in counts.items():
        assert one.locator(f".node[data-status='{status}']").count() == n, status
    best = [n["id"] for n in RECORD["nodes"] if n["best"]]
    assert _ids(one.locator(".node[data-best='true']")) == best == [0, 1, 2, 6, 11, 14]
    assert one.locator(".node[data-best='false']").count() == len(NODES) - len(best)
    assert one.locator(".edge").count() == len(NODES) - 1
    opacity = "es => es.map(e => parseFloat(getComputedStyle(e).opacity))"
    assert all(o < 0.5 for o in one.locator(".node[data-status='pruned']").evaluate_all(opacity))
    assert all(o == 1 for o in one.locator(".node[data-status='kept']").evaluate_all(opacity))
    # finished nodes: a double outline and their rank; the n-best list beneath
    assert one.locator(".node[data-status='finished'] .outer").count() == 3
    assert one.locator(".node[data-id='14'] .rank").text_content() == "#1"
    rows = one.locator(".nbest-row")
    assert rows.count() == 2
    assert rows.nth(0).locator(".nbest-text").inner_text() == "Au commencement, Dieu"
    assert rows.nth(1).locator(".nbest-text").inner_text() == "Au début"
    rows.nth(1).hover()
    assert _ids(one.locator(".node.path-hl")) == [0, 1, 3, 7]
    assert one.locator(".edge.path-hl").count() == 3
    page.mouse.move(1, 1)
    assert one.locator(".path-hl").count() == 0
    # The box scrolls rather than grows.
    box = one.locator(".tree-box")
    assert box.evaluate("b => getComputedStyle(b).overflow") == "auto"
    assert box.evaluate("b => b.getBoundingClientRect().height") <= 422


def test_hover_shows_details_and_the_other_tree_stays_empty(page):
    one, two = page.locator("#one"), page.locator("#two")
    node = BY_ID[2]
    one.locator(".node[data-id='2']").hover()
    details = one.locator(".details")
    assert details.get_attribute("data-id") == "2"
    text = details.inner_text()
    p = math.exp(node["log_prob"])
    assert f"{100 * p:.1f}%" in text and "kept" in text
    assert f"{node['cum_log_prob']:.3f}" in text and f"{node['score']:.3f}" in text
    cells = details.locator(".attn-row .attn-cell")
    assert cells.all_inner_texts() == SOURCE
    weights = [float(w) for w in cells.evaluate_all("cs => cs.map(c => c.dataset.weight)")]
    assert weights == node["attention"]
    styles = cells.evaluate_all("cs => cs.map(c => c.getAttribute('style'))")
    for w, style in zip(weights, styles, strict=True):  # heatmap.js's shade, scale "weights"
        assert f"background-color: rgba(30, 60, 160, {math.sqrt(w):.3f})" in style
    cands = details.locator(".rejected .cand").all_inner_texts()
    assert cands == [f"Le {100 * math.exp(-2.3):.1f}%", f"Dans {100 * math.exp(-3.1):.1f}%"]
    assert details.locator("button.continue").count() == 0  # only when pinned
    # the other tree: nothing shown, nothing lit
    assert two.locator(".details").inner_text() == ""
    assert two.locator(".details *").count() == 0
    assert two.locator(".selected, .path-hl").count() == 0
    page.mouse.move(1, 1)
    assert details.inner_text() == ""


def test_click_pins_and_continue_gets_the_path(page):
    one, two = page.locator("#one"), page.locator("#two")
    one.locator(".node[data-id='12']").click()
    page.mouse.move(1, 1)  # pinned: the details stay
    details = one.locator(".details")
    assert details.get_attribute("data-id") == "12"
    assert one.locator(".node.selected").get_attribute("data-id") == "12"
    assert page.evaluate("window.selected") == [12]
    one.locator(".node[data-id='3']").hover()  # another node's details, while hovered
    assert details.get_attribute("data-id") == "3"
    assert details.locator("button.continue").count() == 0
    page.mouse.move(1, 1)  # back to the pinned node, its button
    details.locator("button.continue").click()
    assert page.evaluate("window.continued") == [{"tree": "one", "id": 12, "path": [1, 3, 8, 12]}]
    assert two.locator(".selected").count() == 0 and two.locator(".details *").count() == 0
    # Escape lets go
    page.keyboard.press("Escape")
    assert details.inner_text() == "" and one.locator(".selected").count() == 0
    assert page.evaluate("window.selected") == [12, None]
    # a double click continues too
    two.locator(".node[data-id='7']").dblclick()
    assert page.evaluate("window.continued")[-1] == {"tree": "two", "id": 7, "path": [1, 3, 7]}
    assert one.locator(".selected").count() == 0 and details.inner_text() == ""
    # a click on the empty background lets go
    one.locator(".node[data-id='6']").click()
    assert details.get_attribute("data-id") == "6"
    box = one.locator(".tree-box").bounding_box()
    page.mouse.click(box["x"] + box["width"] - 4, box["y"] + box["height"] - 4)
    assert details.inner_text() == "" and page.evaluate("window.selected")[-1] is None


def test_show_pruned_off_removes_them(page):
    one, two = page.locator("#one"), page.locator("#two")
    pruned = sum(n["status"] == "pruned" for n in RECORD["nodes"])
    one.locator("input.show-pruned").uncheck()
    assert one.locator(".node").count() == len(NODES) - pruned
    assert one.locator(".node[data-status='pruned']").count() == 0
    assert one.locator(".edge").count() == len(NODES) - pruned - 1
    assert two.locator(".node[data-status='pruned']").count() == pruned  # the other tree
    one.locator("input.show-pruned").check()
    assert one.locator(".node").count() == len(NODES)


def test_streamed_in_chunks_draws_the_same_tree(page):
    one, two = page.locator("#one"), page.locator("#two")
    assert two.locator(".node").count() == one.locator(".node").count() == len(NODES)
    assert _ids(two.locator(".node")) == _ids(one.locator(".node"))
    best = ".node[data-best='true']"
    assert _ids(two.locator(best)) == _ids(one.locator(best))
    assert two.locator(".edge").count() == one.locator(".edge").count()
    # streaming: the newest column scrolled into view, in a narrow box
    page.evaluate("document.querySelector('#two .tree-box').style.width = '220px'")
    page.evaluate("window.trees[1].show(Object.assign({}, window.trees[1].search, {nodes: []}))")
    assert two.locator(".node").count() == 0
    page.evaluate("(nodes) => window.trees[1].add(nodes)", RECORD["nodes"])
    page.wait_for_function("document.querySelectorAll('#two .node').length > 0")  # a frame
    assert two.locator(".tree-box").evaluate("b => b.scrollLeft > 0")
    page.evaluate("(search) => window.trees[1].finish(search)", RECORD)
    assert two.locator(".node").count() == len(NODES)
    assert two.locator(".nbest-row").count() == 2
