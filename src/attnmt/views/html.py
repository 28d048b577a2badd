"""One self-contained HTML string per result: a heatmap already drawn, made explorable.

Each output is a `<div class="attnmt-view">` with a unique id, holding
  1. the picture, drawn here as a table with inline colours: what a notebook opened
     untrusted, an HTML export or a static viewer shows (no script, no stylesheet needed);
  2. the data, as rounded JSON in a `<script type="application/json">`;
  3. `heatmap.css` and `heatmap.js` inline (the same files the explorer page includes:
     one component, two homes), and a few lines that replace each picture with the
     explorable view: hover a cell for its weight and its two words, click a word to pin
     its row or column, switch level, method and layer/head.
Nothing is fetched: no CDN, no require.js, no server, no kernel extension. The ids are
unique per output, so any number of outputs share a page without touching each other.

The records are those of the server's `POST /api/translate` with `"weights": true`
(`attnmt.decoding.records.SentenceRecord`, built there): source/target words and pieces,
`attention` (a list of maps {name, method, scale, layer, head, word, subword, alignment}),
`default_attention`.
"""

from __future__ import annotations

import html
import json
import math
import uuid
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from typing import Any

CELL_PX = 22  # the interactive table's word-level cell (heatmap.css), so both look alike
PLACEHOLDERS = {
    "/*@heatmap.js@*/": "heatmap.js",
    "/*@heatmap.css@*/": "heatmap.css",
    "/*@tree.js@*/": "tree.js",
    "/*@tree.css@*/": "tree.css",
}


@cache
def asset(name: str) -> str:
    """The text of `heatmap.js` or `heatmap.css`."""
    text = files("attnmt.views").joinpath(name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():  # would end the tag early
        raise ValueError(f"{name} must not contain a closing script or style tag")
    return text


def inline_assets(page: str) -> str:
    """A page (the explorer's) with its placeholders replaced by the component's files."""
    for mark, name in PLACEHOLDERS.items():
        if mark not in page:
            raise ValueError(f"the page has no {mark} placeholder")
        page = page.replace(mark, asset(name))
    return page


# --- the picture before any script ---------------------------------------------------------


def _gamma(w: float) -> float:
    return math.sqrt(min(1.0, max(0.0, w)))


def _rgba(rgb: tuple[int, int, int], a: float) -> str:
    # JavaScript's toFixed(3), as heatmap.js writes the same colour
    return f"rgba({rgb[0]}, {rgb[1]}, {rgb[2]}, {a:.3f})"


BLUE, RED = (30, 60, 160), (190, 30, 45)


def shade(scale: str, value: float, top: float) -> str:
    """A cell's colour: heatmap.js's `shade`, the same formula."""
    w = float(value) if math.isfinite(value) else 0.0
    if scale in ("weights", "", None):
        return _rgba(BLUE, _gamma(w))
    a = _gamma(abs(w) / (top or 1.0))
    return _rgba(RED if scale == "signed" and w > 0 else BLUE, a)


def _links(pharaoh: str) -> set[tuple[int, int]]:
    """Pharaoh 'i-j' pairs as (row j, column i)."""
    out = set()
    for pair in (pharaoh or "").split():
        i, _, j = pair.partition("-")
        if i.isdigit() and j.isdigit():
            out.add((int(j), int(i)))
    return out


def static_table(record: dict[str, Any], map_index: int | None = None) -> str:
    """The word-level heatmap of one record as a table with inline styles only."""
    maps = record.get("attention") or []
    if map_index is None:
        map_index = record.get("default_attention") or 0
    if not maps:
        return '<p style="color:#57606a">(no attention weights)</p>'
    chosen = maps[min(map_index, len(maps) - 1)]
    matrix = chosen.get("word") or []
    src, tgt = record.get("source_words") or [], record.get("target_words") or []
    if not matrix:
        return '<p style="color:#57606a">(the translation has no words)</p>'
    scale = chosen.get("scale") or "weights"
    links = _links(chosen.get("alignment", ""))
    esc = html.escape
    cell = (
        f"width:{CELL_PX}px;height:{CELL_PX}px;min-width:{CELL_PX}px;padding:0;"
        "border:1px solid #eef1f4"
    )
    label = "font-weight:normal;font-size:0.85em;padding:0 0.3em"
    vertical = "writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap"
    head = "".join(
        f'<th style="{label};vertical-align:bottom"><span style="{vertical}">{esc(w)}</span></th>'
        for w in src
    )
    rows = []
    for j, row in enumerate(matrix):
        top = max((abs(float(x)) for x in row), default=0.0)
        word = esc(tgt[j]) if j < len(tgt) else ""
        cells = []
        for i, value in enumerate(row):
            link = ";box-shadow:inset 0 0 0 2px #c2410c" if (j, i) in links else ""
            colour = shade(scale, float(value), top)
            source = esc(src[i]) if i < len(src) else ""
            title = f"{float(value):.3f}: {word} ← {source}"
            cells.append(
                f'<td style="{cell};background-color:{colour}{link}" title="{title}"></td>'
            )
        rows.append(
            f'<tr><th style="{label};text-align:right;white-space:nowrap">{word}</th>'
            + "".join(cells)
            + "</tr>"
        )
    caption = esc(chosen.get("name") or "")
    return (
        '<table class="attnmt-static-table" dir="ltr" style="border-collapse:separate;'
        f'border-spacing:1px;background:#fff" aria-label="{caption}, word level">'
        f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


# --- the whole output ----------------------------------------------------------------------


SHOWN_DIGITS = 3  # weights in the page: 0.001 is finer than any colour step of the view


def _for_page(record: dict[str, Any]) -> dict[str, Any]:
    """The record as the page needs it: its maps' weights rounded to `SHOWN_DIGITS` (a
    Transformer's 6 layers x 9 maps of a 40-word sentence: 1.2 MB at 5 digits, 0.7 at 3);
    `records` keep the library's full values."""
    maps = [
        {
            **m,
            "word": [[round(x, SHOWN_DIGITS) for x in row] for row in m.get("word") or []],
            "subword": [[round(x, SHOWN_DIGITS) for x in row] for row in m.get("subword") or []],
        }
        for m in record.get("attention") or []
    ]
    return {**record, "attention": maps}


def _json_for_script(data: Any) -> str:
    """JSON that cannot end its <script> element early."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


HYDRATE = """
(() => {
  // JupyterLab runs this script inside the output, possibly before the output is in the
  // page: find the view from the script itself. The classic notebook runs it from <head>
  // (jQuery), after the output is in the page: find it by its id (as Altair does, its #1986).
  const me = document.currentScript;
  const root = (me && me.closest && me.closest('.attnmt-view')) || document.getElementById(%(id)s);
  if (!root || root.dataset.live) return;  // run once, even if the output is shown twice
  root.dataset.live = '1';
  const records = JSON.parse(root.querySelector('script.attnmt-data').textContent);
  root.querySelectorAll('.attnmt-record').forEach((box) => {
    const record = records[Number(box.dataset.index)];
    const view = AttnmtHeatmap.create();
    const picture = box.querySelector('.attnmt-static');
    picture.replaceWith(view.el);
    view.show(record);
    const still = box.querySelector('.attnmt-search-static');
    if (record.search && still && typeof AttnmtTree !== 'undefined') {
      // No kernel to call from here: "Continue from here" shows the call that does it.
      const call = box.querySelector('.attnmt-continue');
      const tree = AttnmtTree.create({
        onContinue: (node, path) => {
          const ids = path.map((n) => n.token);
          const beam = record.search.beam;
          call.textContent = `model.translate(${JSON.stringify(record.source)}, ` +
            `beam=${beam}, search=True, prefix=${JSON.stringify(ids)})`;
          call.hidden = false;
        },
      });
      still.replaceWith(tree.el);
      tree.show(record.search);
    }
  });
})();
"""


def view_html(
    records: Sequence[dict[str, Any]],
    *,
    titles: Sequence[str | None] | None = None,
    side_by_side: bool = False,
    heading: str | None = None,
) -> str:
    """The HTML of one output: a heatmap view per record (beside each other with
    `side_by_side`, as a comparison of runs), each under its title."""
    uid = f"attnmt-{uuid.uuid4().hex[:12]}"
    esc = html.escape
    titles = list(titles) if titles is not None else [None] * len(records)
    layout = (
        "display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:1em"
        if side_by_side
        else "display:block"
    )
    parts = [
        f'<div class="attnmt-view" id="{uid}" style="font-family:system-ui,sans-serif;'
        'line-height:1.4">',
        f"<style>{asset('heatmap.css')}</style>",
    ]
    if heading:
        parts.append(f'<p style="font-weight:600;margin:0.2em 0">{esc(heading)}</p>')
    parts.append(f'<div style="{layout}">')
    for index, (record, title) in enumerate(zip(records, titles, strict=True)):
        parts.append(f'<div class="attnmt-record" data-index="{index}" style="min-width:0">')
        if title:
            parts.append(
                f'<p style="color:#57606a;font-size:0.9em;margin:0.2em 0">{esc(title)}</p>'
            )
        source, translation = record.get("source", ""), record.get("translation", "")
        if record.get("target") is not None:  # a scored pair: the target was given
            translation = record["target"]
        parts.append(f'<p dir="auto" style="margin:0.2em 0;color:#57606a">{esc(source)}</p>')
        parts.append(
            f'<p dir="auto" style="margin:0.2em 0;font-size:1.15em">{esc(translation)}</p>'
        )
        meta = _meta(record)
        if meta:
            parts.append(
                f'<p style="color:#57606a;font-size:0.8em;margin:0 0 0.4em">{esc(meta)}</p>'
            )
        parts.append(
            f'<div class="attnmt-static" style="overflow:auto;max-width:100%">'
            f"{static_table(record)}</div>"
        )
        if record.get("search"):
            parts.append(static_search(record))
        parts.append("</div>")
    parts.append("</div>")
    data = _json_for_script([_for_page(r) for r in records])
    parts.append(f'<script type="application/json" class="attnmt-data">{data}</script>')
    searched = any(r.get("search") for r in records)
    if searched:  # the tree's component only where a search is shown
        parts.insert(2, f"<style>{asset('tree.css')}</style>")
    script = (
        asset("heatmap.js")
        + (asset("tree.js") if searched else "")
        + HYDRATE % {"id": json.dumps(uid)}
    )
    parts.append(f"<script>(() => {{\n{script}\n}})();</script>")
    parts.append("</div>")
    return "".join(parts)


def static_search(record: dict[str, Any]) -> str:
    """The search before any script: how big it was and its n-best list (the tree itself
    is drawn by tree.js), then the place where "Continue from here" writes its call."""
    search = record["search"]
    nodes = {n["id"]: n for n in search["nodes"]}
    counts: dict[str, int] = {}
    for node in search["nodes"]:
        counts[node["status"]] = counts.get(node["status"], 0) + 1
    rows = []
    for node_id in search["nbest"]:
        pieces = []
        node = nodes[node_id]
        while node["parent"] is not None:
            pieces.append(node["piece"])
            node = nodes[node["parent"]]
        text = "".join(p for p in reversed(pieces) if p != "</s>").replace("\u2581", " ").strip()
        score = nodes[node_id]["score"]
        rows.append(f'<li>{html.escape(text)} <span style="color:#57606a">{score:.3f}</span></li>')
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    return (
        '<div class="attnmt-search-static" style="margin:0.5em 0;font-size:0.9em">'
        f'<p style="margin:0.2em 0;color:#57606a">The search (beam {search["beam"]}): '
        f"{html.escape(summary)}. Its n-best:</p><ol>{''.join(rows)}</ol></div>"
        '<code class="attnmt-continue" hidden style="display:block;margin:0.3em 0"></code>'
    )


def _meta(record: dict[str, Any]) -> str:
    bits = []
    if record.get("score") is not None:
        bits.append(f"score {float(record['score']):.3f}")
    if record.get("log_prob") is not None:
        bits.append(f"log P {float(record['log_prob']):.2f}")
    if record.get("truncated"):
        bits.append("source cut at the model's length limit")
    return " · ".join(bits)
