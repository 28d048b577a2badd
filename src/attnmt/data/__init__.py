"""Parallel data: corpora, cleaning, splits, subwords, batching and synthetic tasks.

    data = prepare(cfg.data)                      # splits, vocabulary, stats (cached)
    batcher = TokenBatcher(data.train, batch_tokens=4096, seed=1)
    batch = next(iter(batcher))                   # attnmt.data.types.Batch

Modules: `bible` (the built-in corpus), `files` (Moses / TSV files), `alignments` (gold
Greek→English word alignments, Pharaoh files), `subwords` (sentencepiece, vocabularies),
`batching` (token-budget batches, resumable, sharded), `synthetic` (reverse, copy, sort).
"""

from attnmt.data.batching import (
    TokenBatcher,
    batches_by_length,
    eval_batches,
    pad_batch,
    padding_fraction,
)
from attnmt.data.prepare import PreparedData, prepare
from attnmt.data.subwords import Vocab, load_vocab
from attnmt.data.types import Batch, Example, collate
from attnmt.data.vocab import BOS, EOS, PAD, UNK

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
    "batches_by_length",
    "collate",
    "eval_batches",
    "load_vocab",
    "pad_batch",
    "padding_fraction",
    "prepare",
]
