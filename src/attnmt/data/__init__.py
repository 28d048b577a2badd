"""Parallel data: corpora, cleaning, splits, subwords, batching and synthetic tasks.

    data = prepare(cfg.data)                      # token stores, vocabulary, stats (cached)
    batcher = TokenBatcher(data.train, batch_tokens=4096, seed=1)
    batch = next(iter(batcher))                   # attnmt.data.types.Batch

Modules: `vocab` (the special ids), `bible` (the built-in corpus), `files` (Moses / TSV
files), `alignments` (gold Greek→English word alignments, Pharaoh files), `subwords`
(sentencepiece, vocabularies), `preparation` (`prepare`: cached splits and vocabularies),
`streaming` (your own files, in bounded memory on every core), `store` (the memory-mapped
token store of a split), `cache` (the cache folder, written whole or not at all),
`buckets` (an epoch's batches planned from the lengths arrays), `batching` (token-budget
batches, resumable, sharded; decoding batches), `synthetic` (reverse, copy, sort).

The names below are loaded on first use (PEP 562): `attnmt data list` reads the corpus
database through `attnmt.data.bible` without paying for torch and sentencepiece.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnmt.lazy import lazy_names

# name -> the module of attnmt.data that defines it
_EXPORTS = {
    "load_pairs": "bible",  # the built-in corpus: every verse two versions both have
    "TokenBatcher": "batching",
    "eval_batches": "batching",
    "pad_batch": "batching",
    "collate": "batching",
    "batches_by_length": "buckets",
    "padding_fraction": "buckets",
    "PreparedData": "cache",
    "prepare": "preparation",
    "TokenStore": "store",
    "Vocab": "subwords",
    "load_vocab": "subwords",
    "Batch": "types",
    "Example": "types",
    "BOS": "vocab",
    "EOS": "vocab",
    "PAD": "vocab",
    "UNK": "vocab",
}

# What type checkers and editors see: the names of _EXPORTS, from the same modules
# (tests/test_layout.py checks both lists agree). Re-exports, which ruff cannot tell
# from a `__all__` it does not see written out:
# ruff: noqa: F401
if TYPE_CHECKING:
    from attnmt.data.batching import TokenBatcher, collate, eval_batches, pad_batch
    from attnmt.data.bible import load_pairs
    from attnmt.data.buckets import batches_by_length, padding_fraction
    from attnmt.data.cache import PreparedData
    from attnmt.data.preparation import prepare
    from attnmt.data.store import TokenStore
    from attnmt.data.subwords import Vocab, load_vocab
    from attnmt.data.types import Batch, Example
    from attnmt.data.vocab import BOS, EOS, PAD, UNK

__getattr__, __dir__, __all__ = lazy_names(__name__, _EXPORTS)
