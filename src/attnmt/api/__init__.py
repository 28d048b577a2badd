"""attnmt from Python: what the command line does, returning objects that draw themselves.

    import attnmt
    run = attnmt.train("configs/reverse.yaml", train={"max_steps": 300})  # a TrainedRun
    model = attnmt.load(run.run_dir)                   # or a checkpoint, or [run, run]
    model.translate("In the beginning was the Word.")  # shows an explorable heatmap
    model.translate(lines, beam=5, explain="integrated-gradients")
    model.score("In the beginning", "Au commencement")
    model.align(sources, targets)                      # word links from the attention
    attnmt.evaluate(run.run_dir, split="test", beam=5)  # BLEU, chrF, BLEU by length
    attnmt.compare(model_a.translate(x), model_b.translate(x), names=["a", "b"])

Each result is what `attnmt.views.results` describes: inline HTML in a notebook, a figure
with `.plot()`, a standalone page with `.save_html(path)`, plain data in `.records`. The
numbers are those of the command line: the same `Translator`, search, scoring and
evaluation code (tests/test_api.py checks `translate` against `attnmt translate
--alignments json`).
"""

from attnmt.api.model import Model, compare, load
from attnmt.api.runs import Evaluation, TrainedRun, evaluate, train
from attnmt.views.results import show_figures_inline

show_figures_inline()  # `.plot()` figures draw in a notebook without `%matplotlib inline`

__all__ = ["Evaluation", "Model", "TrainedRun", "compare", "evaluate", "load", "train"]
