"""Results that draw themselves in notebooks, and the heatmap the explorer page shares.

`html` builds one self-contained HTML string per output (`heatmap.js` and `heatmap.css`
inline, the picture drawn before any script runs) from the sentence records the library
builds (`attnmt.decoding.records`); `results` holds the objects `attnmt.load(...)` and
friends return (`Translated`, `Translations`, `Comparison`, ...).
"""

from attnmt.views.html import inline_assets, view_html
from attnmt.views.results import Comparison, Translated, Translations, settings

__all__ = ["Comparison", "Translated", "Translations", "inline_assets", "settings", "view_html"]
