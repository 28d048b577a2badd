"""The search from Python: `Model.translate(search=, prefix=, alternatives=)` gives what
the CLI gives, and its notebook output draws the tree (the explorer's component), with a
static n-best list before any script runs."""

from __future__ import annotations

import json

import pytest
from tests.test_views_browser import CHROMIUM, _open, _page

import attnmt
from attnmt.cli import main
from attnmt.errors import UserError

LINE = "the cat sat on the mat"


@pytest.fixture(scope="module")
def model(tiny_runs):
    return attnmt.load(tiny_runs["rnn"], device="cpu")


def test_translate_with_search_prefix_and_alternatives_as_the_cli(
    model, tiny_runs, tmp_path, capsys
):
    result = model.translate(LINE, beam=3, search=True, prefix="dog", alternatives=2)
    assert result.text.startswith("dog") and result.prefix["text"] == "dog"
    assert len(result.alternatives) == 2
    source = tmp_path / "in.txt"
    source.write_text(f"{LINE}\tdog\n", encoding="utf-8")
    searches = tmp_path / "s.jsonl"
    args = ["translate", str(tiny_runs["rnn"]), str(source), "--beam", "3", "--prefix"]
    assert (
        main([*args, "--search-json", str(searches), "--alternatives", "2", "--alignments", "json"])
        == 0
    )
    line = json.loads(capsys.readouterr().out)
    cli = json.loads(searches.read_text(encoding="utf-8"))["search"]
    assert [n["token"] for n in cli["nodes"]] == [n["token"] for n in result.search["nodes"]]
    assert [n["score"] for n in cli["nodes"]] == [n["score"] for n in result.search["nodes"]]
    assert line["alternatives"] == result.alternatives
    assert line["translation"] == result.text
    # Off by default: nothing recorded.
    plain = model.translate(LINE)
    assert plain.search is None and plain.alternatives is None and plain.prefix is None
    with pytest.raises(UserError, match="min_alternative_prob"):
        model.translate(LINE, alternatives=2, min_alternative_prob=3)


playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")
def test_the_notebook_output_draws_the_tree(model):
    result = model.translate(LINE, beam=3, search=True)
    html = result.to_html()
    with playwright.sync_playwright() as p:
        browser, page, tried, errors = _open(p, _page(html))
        try:
            nodes = page.locator(".attnmt-view .attnmt-tree g.node")
            nodes.first.wait_for()
            assert nodes.count() == len(result.search["nodes"])
            assert page.locator(".attnmt-view .viz .heatmap").count() == 1  # the heatmap too
            node = page.locator(".attnmt-tree g.node[data-best='true'][data-status='kept']").first
            node.hover()
            cells = page.locator(".attnmt-tree .attn-row .attn-cell")
            assert cells.count() == len(result.search["source_pieces"])
            node.click()
            page.locator(".attnmt-tree button.continue").click()
            call = page.locator(".attnmt-view code.attnmt-continue")
            call.wait_for()
            assert call.inner_text().startswith(f'model.translate("{LINE}", beam=3, search=True')
            assert tried == [] and errors == []
        finally:
            browser.close()
        browser, page, tried, _ = _open(p, _page(html), scripts=False)
        try:  # no script: the n-best list
            still = page.locator(".attnmt-search-static li")
            assert still.count() == len(result.search["nbest"])
            assert result.text in still.first.inner_text()
        finally:
            browser.close()
