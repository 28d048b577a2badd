"""The grammar lab as a corpus (`data.corpus: grammar`): the splits of `attnmt.data.grammar`
as Examples with a word-level vocabulary, and their gold links and causes in files.

    data:
      corpus: grammar               # the English->French-like pair at the sizes below
      grammar_pair: en-de           # or en-ja
      synthetic_train_size: 20000   # training pairs; synthetic_dev_size: dev and test each
      grammar_test_words: [2, 60]   # the test split longer than training ([2, 25])

Each word is one token (the lexicon is a few hundred words a side: no subwords needed, and
the gold links index the tokens themselves). The vocabulary is every word of the training
split, both languages in one list; a dev or test word training never saw reads as <unk>,
as a rare word does in real text. Example ids are "grammar:SPLIT:N".

`attnmt data prepare` writes, beside the token store, `gold/` with one file per split and
kind (Pharaoh "i-j", one line per pair, in the split's order):

    gold/SPLIT.src, SPLIT.tgt      the text, one pair a line (for `attnmt align`)
    gold/SPLIT.sure                the sure links
    gold/SPLIT.possible            sure and possible links (P includes S, Och & Ney)
    gold/SPLIT.causes.jsonl        per pair: "causes" and "prefix_causes" (one list of
                                   positions per target word) and "phenomena"
    gold/all.*                     train, dev and test together, for an aligner that learns
                                   from what it aligns

The splits are regenerated from the config whenever they are needed (deterministic, a few
seconds at 20,000 pairs, once per process): `grammar_pairs(cfg)`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from attnmt.config import DataConfig
from attnmt.data.alignments import format_pharaoh
from attnmt.data.grammar import crossings, make_splits
from attnmt.data.grammar_rules import GrammarPair
from attnmt.data.synthetic import SymbolVocab
from attnmt.data.types import Example

SPLITS = ("train", "dev", "test")


def grammar_pairs(cfg: DataConfig) -> dict[str, list[GrammarPair]]:
    """The three splits of `cfg`'s grammar corpus (cached per process)."""
    return _pairs(
        cfg.grammar_pair,
        cfg.synthetic_train_size,
        cfg.synthetic_dev_size,
        cfg.seed,
        tuple(cfg.grammar_train_words),
        tuple(cfg.grammar_dev_words),
        tuple(cfg.grammar_test_words),
    )


@lru_cache(maxsize=2)
def _pairs(pair, train, held, seed, words, dev_words, test_words):
    return make_splits(
        pair, train_size=train, dev_size=held, test_size=held, seed=seed, words=words,
        dev_words=dev_words, test_words=test_words,
    )  # fmt: skip


def example_id(split: str, index: int) -> str:
    return f"grammar:{split}:{index}"


def read_splits(cfg: DataConfig) -> tuple[dict[str, list[Example]], dict[str, Any]]:
    """Examples of every split, and what `attnmt data show` reports about them."""
    pairs = grammar_pairs(cfg)
    splits = {
        name: [
            Example(" ".join(p.src), " ".join(p.tgt), id=example_id(name, i))
            for i, p in enumerate(pairs[name])
        ]
        for name in SPLITS
    }
    extra = {
        "grammar_pair": cfg.grammar_pair,
        "words": {
            "train": list(cfg.grammar_train_words),
            "dev": list(cfg.grammar_dev_words),
            "test": list(cfg.grammar_test_words),
        },
        "gold_links": {n: sum(len(p.sure) for p in pairs[n]) for n in ("dev", "test")},
        "crossing_links": {n: sum(len(crossings(p)) for p in pairs[n]) for n in ("dev", "test")},
    }
    return splits, extra


def vocabulary(train: Sequence[Example]) -> SymbolVocab:
    """One word-level vocabulary of both languages: every word of the training split."""
    words = {w for ex in train for side in (ex.src, ex.tgt) for w in side.split()}
    return SymbolVocab(sorted(words))


def write_gold(cfg: DataConfig, folder: Path) -> None:
    """`folder/gold/`: the text, links and causes of every split (module docstring)."""
    gold = folder / "gold"
    gold.mkdir(parents=True, exist_ok=True)
    pairs = grammar_pairs(cfg)
    every = [p for name in SPLITS for p in pairs[name]]
    for name, chosen in [*((n, pairs[n]) for n in SPLITS), ("all", every)]:
        files = {
            "src": [" ".join(p.src) for p in chosen],
            "tgt": [" ".join(p.tgt) for p in chosen],
            "sure": [format_pharaoh(p.sure) for p in chosen],
            "possible": [format_pharaoh(p.possible) for p in chosen],
            "causes.jsonl": [json.dumps(causes_record(p)) for p in chosen],
        }
        for kind, lines in files.items():
            (gold / f"{name}.{kind}").write_text(
                "".join(line + "\n" for line in lines), encoding="utf-8"
            )


def causes_record(pair: GrammarPair) -> dict[str, Any]:
    """One line of a causes file: per target word, its causes and what it shows."""
    return {
        "causes": [sorted(c) for c in pair.causes],
        "prefix_causes": [sorted(c) for c in pair.prefix_causes],
        "phenomena": list(pair.phenomena),
    }


def gold_pair(cfg: DataConfig, example_id_: str) -> GrammarPair | None:
    """The generated pair behind an example id ("grammar:test:17"), or None."""
    parts = example_id_.split(":")
    if len(parts) != 3 or parts[0] != "grammar" or parts[1] not in SPLITS:
        return None
    chosen = grammar_pairs(cfg)[parts[1]]
    index = int(parts[2]) if parts[2].isdigit() else -1
    return chosen[index] if 0 <= index < len(chosen) else None
