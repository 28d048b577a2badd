"""Parallel data: corpora, cleaning, splits, subwords, batching and synthetic tasks.

    data = prepare(cfg.data)                      # splits, vocabulary, stats (cached)
    batcher = TokenBatcher(data.train, batch_tokens=4096, seed=1)
    batch = next(iter(batcher))                   # attnmt.data.types.Batch

Modules: `bible` (the built-in corpus), `files` (Moses / TSV files), `alignments` (gold
Greek→English word alignments, Pharaoh files), `subwords` (sentencepiece, vocabularies),
`batching` (token-budget batches, resumable, sharded), `synthetic` (reverse, copy, sort).
"""

from attnmt.data.batching import TokenBatcher, eval_batches, padding_fraction
from attnmt.data.prepare import PreparedData, prepare
from attnmt.data.subwords import Vocab, load_vocab
from attnmt.data.types import BOS, EOS, PAD, UNK, Batch, Example, collate

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "UNK",
    "Batch",
    "Example",
    "PreparedData",
    "TokenBatcher",
    "Vocab",
    "collate",
    "eval_batches",
    "load_vocab",
    "padding_fraction",
    "prepare",
]
