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

from attnmt.explain.measures import explanation_report
from attnmt.explain.methods import METHODS, Explanation, check_method, explain, scale_of

__all__ = ["METHODS", "Explanation", "check_method", "explain", "explanation_report", "scale_of"]
