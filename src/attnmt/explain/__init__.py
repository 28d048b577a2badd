"""Explanations of a prediction beyond the attention, and measures of whether they are
true (docs/explain.md).

    from attnmt.explain import explain, explanation_report, METHODS
    explained = explain(model, [(src_ids, tgt_ids)], "integrated-gradients", choice)
    explained[0].matrix          # (T + 1, S + 1), the attention's shape
    report = explanation_report(loaded, examples, METHODS, choice, limit)

`methods` has the methods (attention, attention × norm, rollout, occlusion),
`gradients` gradient × input and integrated gradients, `measures` AER against gold
links, deletion/insertion curves, ERASER's comprehensiveness and sufficiency and cost,
`images` the same for the image models (maps over the canvas, mass on the digit's box).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnmt.lazy import lazy_names

# name -> the module of attnmt.explain that defines it (loaded on first use: the names
# alone need no torch)
_EXPORTS = {
    "METHODS": "names",
    "scale_of": "names",
    "Explanation": "methods",
    "check_method": "methods",
    "explain": "methods",
    "explanation_report": "measures",
}

# What type checkers and editors see: the names of _EXPORTS, from the same modules
# (tests/test_layout.py checks both lists agree). Re-exports, which ruff cannot tell
# from a `__all__` it does not see written out:
# ruff: noqa: F401
if TYPE_CHECKING:
    from attnmt.explain.measures import explanation_report
    from attnmt.explain.methods import Explanation, check_method, explain
    from attnmt.explain.names import METHODS, scale_of

__getattr__, __dir__, __all__ = lazy_names(__name__, _EXPORTS)
