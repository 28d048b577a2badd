"""Decoding with a trained model, and reading its attention.

    from attnmt.decoding.runs import load_run
    from attnmt.decoding.translator import Translator

    loaded = load_run("runs/quickstart")                    # config, vocabulary, weights
    translator = Translator(loaded, beam=5, need_weights=True)
    sentence = translator.translate(["In the beginning ..."])[0]
    sentence.translation.text, translator.words(sentence).links

Modules: `search` (greedy and beam search, both returning attention weights) over
`hypotheses` (what a search starts from and returns) and `array_ops` (the array operations
a search uses: `attnmt.models.torch_ops` for a torch model, `attnmt.runtime.arrays` for an
ONNX export),
`search_tree` (the search recorded as a tree), `decode_ids` (id lists in batches),
`translator` (text in, hypotheses with weights out), `records` (what became of a sentence
as JSON-ready data, the one record every face shows), `runs` (loading a run), `loading`
(what decodes, from paths: runs, checkpoints, ensembles, int8, exports), `ensemble`,
`quantize`, `scoring` (forced decoding), `attention_choice` (which matrix counts) and
`attention_maps` (plot files).

The searches import no torch, so `attnmt.runtime` decodes an ONNX export with them.
"""
