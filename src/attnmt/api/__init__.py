"""attnmt from Python: what the command line does, returning objects that draw themselves.

    import attnmt
    run = attnmt.train("configs/reverse.yaml", train={"max_steps": 300})  # a TrainedRun
    model = attnmt.load(run.run_dir)                   # or a checkpoint, or [run, run]
    model.translate("In the beginning was the Word.")  # shows an explorable heatmap
    model.translate(lines, beam=5, explain="integrated-gradients")
    model.score("In the beginning", "Au commencement")
    model.align(sources, targets)                      # word links from the attention
    attnmt.align(sources, targets)                     # word links from eflomal
    attnmt.evaluate(run.run_dir, split="test", beam=5)  # BLEU, chrF, BLEU by length
    attnmt.compare(model_a.translate(x), model_b.translate(x), names=["a", "b"])
    attnmt.show(weights, source_words, target_words)   # your own matrix, the same view

Each result is what `attnmt.views.results` describes: inline HTML in a notebook, a figure
with `.plot()`, a standalone page with `.save_html(path)`, plain data in `.records`. The
numbers are those of the command line: the same `Translator`, search, scoring and
evaluation code (tests/test_api.py checks `translate` against `attnmt translate
--alignments json`). `attnmt.load` of an ONNX export translates without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnmt.lazy import lazy_names

# name -> the module of attnmt.api that defines it. Loaded on first use: `attnmt.load` of
# an ONNX export imports neither torch nor the training code (`runs`).
_EXPORTS = {
    "Alignments": "alignments",
    "align": "alignments",
    "Model": "model",
    "compare": "model",
    "load": "model",
    "show": "model",
    "Evaluation": "runs",
    "TrainedRun": "runs",
    "evaluate": "runs",
    "train": "runs",
}

# What type checkers and editors see: the names of _EXPORTS, from the same modules
# (tests/test_layout.py checks both lists agree). Re-exports, which ruff cannot tell
# from a `__all__` it does not see written out:
# ruff: noqa: F401
if TYPE_CHECKING:
    from attnmt.api.alignments import Alignments, align
    from attnmt.api.model import Model, compare, load, show
    from attnmt.api.runs import Evaluation, TrainedRun, evaluate, train

__getattr__, __dir__, __all__ = lazy_names(__name__, _EXPORTS)
