"""Results that draw themselves in notebooks, and the heatmap the explorer page shares.

`html` builds one self-contained HTML string per output (`heatmap.js` and `heatmap.css`
inline, the picture drawn before any script runs) from the sentence records the library
builds (`attnmt.decoding.records`); `results` holds the objects `attnmt.load(...)` and
friends return (`Translated`, `Translations`, `Comparison`, ...). The names load on first
use: the server of an export takes the page's assets without matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnmt.lazy import lazy_names

_EXPORTS = {
    "Comparison": "results",
    "Translated": "results",
    "Translations": "results",
    "settings": "results",
    "inline_assets": "html",
    "view_html": "html",
}

# ruff: noqa: F401
if TYPE_CHECKING:
    from attnmt.views.html import inline_assets, view_html
    from attnmt.views.results import Comparison, Translated, Translations, settings

__getattr__, __dir__, __all__ = lazy_names(__name__, _EXPORTS)
