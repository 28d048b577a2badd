"""Inference: decoding with a trained model, and reading its attention.

    loaded = load_run("runs/quickstart")                    # config, vocabulary, weights
    translator = Translator(loaded, beam=5, need_weights=True)
    sentence = translator.translate(["In the beginning ..."])[0]
    sentence.translation.text, translator.words(sentence).links

Modules: `search` (greedy and beam search, both returning attention weights),
`translator` (text in, hypotheses with weights out), `runs` (loading a run),
`attention_maps` (which matrix counts, forced decoding, plot files), `alignment`
(subwords to words, links, AER) and `evaluation` (decode a split and score it).
"""

from attnmt.inference.alignment import (
    SideWords,
    WordView,
    alignment_scores,
    collapsed,
    diagonal_alignment,
    extract_alignment,
    merge_to_words,
    source_words,
    target_words,
    word_view,
)
from attnmt.inference.attention_maps import (
    AttentionChoice,
    choose_attention,
    draw_saved,
    forced_weights,
    labels,
    select,
    write_attention,
)
from attnmt.inference.decode_ids import Translation, translate_ids
from attnmt.inference.evaluation import (
    alignment_report,
    evaluate_examples,
    symmetrized_report,
)
from attnmt.inference.runs import LoadedRun, find_checkpoint, load_run
from attnmt.inference.search import Hypothesis, beam_search, greedy, length_penalty
from attnmt.inference.translator import MAX_SOURCE_TOKENS, Sentence, Translator, source_limit

__all__ = [
    "MAX_SOURCE_TOKENS",
    "AttentionChoice",
    "Hypothesis",
    "LoadedRun",
    "Sentence",
    "SideWords",
    "Translation",
    "Translator",
    "WordView",
    "alignment_report",
    "alignment_scores",
    "beam_search",
    "choose_attention",
    "collapsed",
    "diagonal_alignment",
    "draw_saved",
    "evaluate_examples",
    "extract_alignment",
    "find_checkpoint",
    "forced_weights",
    "greedy",
    "labels",
    "length_penalty",
    "load_run",
    "merge_to_words",
    "select",
    "source_limit",
    "source_words",
    "symmetrized_report",
    "target_words",
    "translate_ids",
    "word_view",
    "write_attention",
]
