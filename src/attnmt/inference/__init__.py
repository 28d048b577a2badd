"""Inference: decoding with a trained model, and reading its attention.

    loaded = load_run("runs/quickstart")                    # config, vocabulary, weights
    translator = Translator(loaded, beam=5, need_weights=True)
    sentence = translator.translate(["In the beginning ..."])[0]
    sentence.translation.text, translator.words(sentence).links

Modules: `search` (greedy and beam search, both returning attention weights),
`translator` (text in, hypotheses with weights out), `records` (what became of a sentence
as JSON-ready data, the one record every face shows), `runs` (loading a run),
`attention_choice` (which matrix counts), `scoring` (forced decoding), `attention_maps`
(plot files), `alignment` (subwords to words, links, AER) and `evaluation` (decode a split
and score it).

The names below load on first use: the searches (`search`, `hypotheses`, `search_tree`)
import no torch, so `attnmt.runtime` decodes an ONNX export with them, without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnmt.lazy import lazy_names

# name -> the module of attnmt.inference that defines it
_EXPORTS = {
    "SideWords": "alignment",
    "WordView": "alignment",
    "alignment_scores": "alignment",
    "collapsed": "alignment",
    "diagonal_alignment": "alignment",
    "extract_alignment": "alignment",
    "merge_to_words": "alignment",
    "source_words": "alignment",
    "target_words": "alignment",
    "word_view": "alignment",
    "AttentionChoice": "attention_choice",
    "choose_attention": "attention_choice",
    "labels": "attention_choice",
    "select": "attention_choice",
    "draw_saved": "attention_maps",
    "write_attention": "attention_maps",
    "Translation": "decode_ids",
    "translate_ids": "decode_ids",
    "alignment_report": "evaluation",
    "evaluate_examples": "evaluation",
    "symmetrized_report": "evaluation",
    "Hypothesis": "hypotheses",
    "length_penalty": "hypotheses",
    "LoadedRun": "runs",
    "find_checkpoint": "runs",
    "load_run": "runs",
    "forced_weights": "scoring",
    "beam_search": "search",
    "greedy": "search",
    "MAX_SOURCE_TOKENS": "translator",
    "Sentence": "translator",
    "Translator": "translator",
    "source_limit": "translator",
}
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

if TYPE_CHECKING:  # what type checkers and editors see
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
    from attnmt.inference.attention_choice import AttentionChoice, choose_attention, labels, select
    from attnmt.inference.attention_maps import draw_saved, write_attention
    from attnmt.inference.decode_ids import Translation, translate_ids
    from attnmt.inference.evaluation import (
        alignment_report,
        evaluate_examples,
        symmetrized_report,
    )
    from attnmt.inference.hypotheses import Hypothesis, length_penalty
    from attnmt.inference.runs import LoadedRun, find_checkpoint, load_run
    from attnmt.inference.scoring import forced_weights
    from attnmt.inference.search import beam_search, greedy
    from attnmt.inference.translator import MAX_SOURCE_TOKENS, Sentence, Translator, source_limit


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
