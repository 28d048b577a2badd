"""Results that draw themselves: what `attnmt.load(...).translate/score/align`,
`attnmt.compare` and `attnmt.evaluate` return.

In Jupyter, JupyterLab, VS Code and Colab each shows as one self-contained HTML output
(`attnmt.views.html`): the heatmap already drawn, made explorable by its own inline script.
Everywhere:

    result.plot()             # the matplotlib figure (attnmt.plotting.heatmap_figure)
    result.save_html(path)    # a standalone page with the same view
    result.records            # the JSON-ready data the views draw

`settings.png` (on by default) adds a PNG of the first heatmap to each output's bundle, for
viewers that show neither HTML nor scripts (GitHub's notebook preview).
"""

from __future__ import annotations

import html
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from attnmt.plotting import Panel, figure_png, heatmap_figure, panels_figure
from attnmt.progress import in_notebook
from attnmt.views.html import view_html


@dataclass
class Settings:
    png: bool = True  # a PNG of every heatmap beside the HTML in every output
    png_dpi: int = 100  # 0.3 in a cell: 30 px, labels at 9 pt = 12.5 px
    png_columns: int = 4  # panels a row
    png_panels: int = 64  # at most (a Transformer of 4 layers x 4 heads is 16 panels)


settings = Settings()


def show_figures_inline() -> None:
    """In a Jupyter kernel, matplotlib figures made without pyplot (ours: `.plot()`)
    display as PNG whatever the backend (no `%matplotlib inline` needed); elsewhere
    nothing changes."""
    if not in_notebook():
        return
    formatter = sys.modules["IPython"].get_ipython().display_formatter.formatters["image/png"]
    formatter.for_type(Figure, lambda fig: figure_png(fig, dpi=90))


class View:
    """A result with heatmaps: `records` (one per sentence) and how they are shown."""

    records: list[dict[str, Any]]
    titles: list[str | None] | None = None
    side_by_side: bool = False
    heading: str | None = None

    def to_html(self) -> str:
        """The output's HTML: one string, styles, data and script inline."""
        return view_html(
            self.records, titles=self.titles, side_by_side=self.side_by_side, heading=self.heading
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": repr(self), "text/html": self.to_html()}
        panels = self.panels() if settings.png else []
        if panels:  # the picture kept where the view's script does not run (a static render)
            shown = panels[: settings.png_panels]
            labels = [side for p in shown for side in (p.src, p.tgt, [p.title])]
            fig = panels_figure(shown, columns=settings.png_columns)
            bundle["image/png"] = figure_png(fig, dpi=settings.png_dpi, labels=labels)
        return bundle

    def panels(self) -> list[Panel]:
        """Every map of every record as a picture's panel (word level where the record has
        words; subwords where its output has none, the </s> step only), titled by its map
        and, with several records, its sentence."""
        out = []
        for index, record in enumerate(self.records):
            maps = record.get("attention") or []
            level = "word" if record.get("target_words") else "subword"
            for m, chosen in enumerate(maps):
                matrix, src, tgt, _ = self.matrix(index, m, level)
                if matrix.ndim != 2:
                    continue
                title = chosen["name"]
                if len(self.records) > 1:  # a model's name where each record has its own
                    names = self.titles or [None] * len(self.records)
                    own = names[index] and len(set(names)) == len(names)
                    title = f"{names[index] if own else f'sentence {index + 1}'}: {title}"
                matrix = matrix.reshape(-1, len(src)) if matrix.size == 0 else matrix
                out.append(
                    Panel(
                        matrix[:, : len(src)],
                        src,
                        tgt[: matrix.shape[0]],
                        title,
                        chosen.get("scale") or "weights",
                    )
                )
        return out

    def save_html(self, path: str | Path) -> Path:
        """A standalone page with this view (nothing fetched: open it anywhere)."""
        path = Path(path)
        title = html.escape(self.heading or "attnmt")
        page = (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}'
            f"</title></head><body>{self.to_html()}</body></html>\n"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
        return path

    def matrix(self, index: int = 0, map: int | str | None = None, level: str = "word"):
        """(matrix, source labels, target labels, map) of a record's map: `map` an index
        into its `attention` list or a map's name (default: the record's default)."""
        record = self.records[index]
        maps = record.get("attention") or []
        if not maps:
            raise ValueError("this result has no attention weights to draw")
        if map is None:
            map = record.get("default_attention") or 0
        if isinstance(map, str):
            names = [m["name"] for m in maps]
            if map not in names:
                raise ValueError(f"no map named {map!r}; this result has: {', '.join(names)}")
            map = names.index(map)
        if level not in ("word", "subword"):
            raise ValueError(f"level must be 'word' or 'subword', got {level!r}")
        chosen = maps[map]
        side = "words" if level == "word" else "pieces"
        return (
            np.asarray(chosen[level], dtype=np.float32),
            record[f"source_{side}"],
            record[f"target_{side}"],
            chosen,
        )

    def plot(self, index: int = 0, map: int | str | None = None, level: str | None = None):
        """The heatmap of record `index` as a matplotlib figure: word level, or subword
        (`level`) — the default where the output has no words (the </s> step only)."""
        if level is None:
            _, _, tgt, _ = self.matrix(index, map, "word")
            level = "word" if tgt else "subword"
        matrix, src, tgt, chosen = self.matrix(index, map, level)
        cols = len(src)
        if matrix.size == 0:
            matrix = np.zeros((0, cols), dtype=np.float32)
        return heatmap_figure(
            matrix[:, :cols] if matrix.ndim == 2 else matrix,
            src,
            tgt[: matrix.shape[0]],
            title=chosen["name"],
            scale=chosen.get("scale") or "weights",
        )


class Translated(View):
    """One translated sentence: `text`, `score`, `log_prob`, `nbest`, `links`."""

    def __init__(self, record: dict[str, Any], title: str | None = None) -> None:
        self.record = record
        self.records = [record]
        self.titles = [title]

    text = property(lambda self: self.record["translation"])
    source = property(lambda self: self.record["source"])
    score = property(lambda self: self.record.get("score"))
    log_prob = property(lambda self: self.record.get("log_prob"))
    nbest = property(lambda self: self.record.get("nbest"))
    alignment = property(lambda self: self.record.get("alignment", ""))
    # With translate(search=True / prefix= / alternatives=N): the recorded search (beam,
    # source_pieces, nodes, nbest: docs/decoding.md), the forced prefix, the alternatives.
    search = property(lambda self: self.record.get("search"))
    prefix = property(lambda self: self.record.get("prefix"))
    alternatives = property(lambda self: self.record.get("alternatives"))

    @property
    def links(self) -> list[tuple[int, int]]:
        """Word links (source word i, target word j), 0-based, as Pharaoh counts them."""
        return [tuple(link) for link in self.record.get("links", [])]

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Translated({self.text!r}, score={self.score})"


class Translations(View):
    """Several translated sentences (a list of `Translated`), one view each."""

    def __init__(self, items: Sequence[Translated], heading: str | None = None) -> None:
        self.items = list(items)
        self.records = [t.record for t in self.items]
        self.titles = [t.titles[0] for t in self.items]
        self.heading = heading

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Translated]:
        return iter(self.items)

    def __getitem__(self, index: int) -> Translated:
        return self.items[index]

    @property
    def texts(self) -> list[str]:
        return [t.text for t in self.items]

    def __repr__(self) -> str:
        shown = "\n".join(f"  {t.text!r}" for t in self.items[:10])
        more = f"\n  ... {len(self.items) - 10} more" if len(self.items) > 10 else ""
        return f"Translations({len(self.items)}):\n{shown}{more}"


class Comparison(View):
    """The same sentences from two (or more) runs, side by side."""

    def __init__(self, results: Sequence[Translations | Translated], names: Sequence[str]):
        per_run = [r.items if isinstance(r, Translations) else [r] for r in results]
        if len({len(r) for r in per_run}) != 1:
            raise ValueError("compare results of the same sentences (as many of each)")
        self.names = list(names)
        self.records, self.titles = [], []
        for row in zip(*per_run, strict=True):
            for name, item in zip(self.names, row, strict=True):
                self.records.append(item.record)
                self.titles.append(name)
        self.side_by_side = True

    def __repr__(self) -> str:
        rows = [
            f"  {title}: {record['translation']!r}"
            for title, record in zip(self.titles, self.records, strict=True)
        ]
        return "Comparison:\n" + "\n".join(rows)


class Table:
    """Scores and figures as an HTML table in a notebook, a dict everywhere."""

    data: dict[str, Any]

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(str(k))}</th>"
            f"<td>{html.escape(_short(v))}</td></tr>"
            for k, v in self.data.items()
        )
        return f"<table>{rows}</table>"

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({json.dumps(self.data, ensure_ascii=False)[:400]})"


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= 200 else text[:197] + "..."
