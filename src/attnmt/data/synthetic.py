"""Synthetic tasks: the demo and smoke test of every model (as JoeyNMT's reverse task).

A source is a sequence of integer symbols 0–50 written as space-separated tokens; the
target is that sequence reversed ("reverse"), unchanged ("copy") or sorted in numeric
order ("sort"):

    reverse   "12 5 40" -> "40 5 12"     (a good attention model draws an anti-diagonal)
    copy      "12 5 40" -> "12 5 40"     (a diagonal)
    sort      "12 5 40" -> "5 12 40"

    splits = make_task("reverse", train_size=20000)   # {"train", "dev", "test"}
    vocab = SymbolVocab()                              # PAD UNK BOS EOS, then "0".."50"

Training sequences have lengths 1..max_len, dev/test 1..eval_max_len (longer, to see
whether a model generalises in length). Dev/test come from their own random stream and
hold only sources that are not in the training set, nor in each other.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from attnmt.data.types import Example
from attnmt.data.vocab import BOS, EOS, PAD, UNK
from attnmt.errors import DataError

NUM_SYMBOLS = 51  # the integers 0..50
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")  # ids PAD, UNK, BOS, EOS
VOCAB_FILE = "symbols.json"

TASKS: dict[str, Callable[[list[int]], list[int]]] = {
    "reverse": lambda seq: seq[::-1],
    "copy": lambda seq: list(seq),
    "sort": sorted,
}


class SymbolVocab:
    """A word-level vocabulary: the four special ids, then one id per symbol.

    The default symbols are "0".."50" (ids 4..54, `size` 55). The same object serves as
    source and target vocabulary. `encode` maps an unknown token to UNK; `decode` stops at
    the first EOS and skips PAD and BOS.
    """

    def __init__(self, symbols: Sequence[str] | None = None):
        symbols = [str(i) for i in range(NUM_SYMBOLS)] if symbols is None else list(symbols)
        bad = [s for s in symbols if not isinstance(s, str) or not s or s != s.strip()]
        bad += [s for s in symbols if isinstance(s, str) and len(s.split()) > 1]
        if bad or len(set(symbols)) != len(symbols) or set(symbols) & set(SPECIALS):
            raise ValueError(
                "symbols must be distinct non-empty strings without spaces and not "
                f"{list(SPECIALS)}; bad: {bad or 'duplicates or specials'}"
            )
        self.symbols = list(symbols)
        self.itos = [*SPECIALS, *self.symbols]
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    @property
    def size(self) -> int:
        """Number of ids (specials included)."""
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        """Ids of the whitespace-separated tokens of `text` (no BOS/EOS; unknown -> UNK)."""
        return [self.stoi.get(token, UNK) for token in text.split()]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` up to the first EOS, without PAD and BOS."""
        tokens = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i in (PAD, BOS):
                continue
            tokens.append(self.itos[i] if 0 <= i < len(self.itos) else SPECIALS[UNK])
        return " ".join(tokens)

    def pieces(self, text: str) -> list[str]:
        """The tokens of `text` (each symbol is one piece and one word)."""
        return text.split()

    def id_pieces(self, ids: Sequence[int]) -> list[str]:
        """The symbol of every id, specials included (for attention plot labels)."""
        return [self.itos[int(i)] for i in ids]

    def word_of(self, text: str) -> list[int]:
        """Word index of each piece: here every piece is its own word."""
        return list(range(len(text.split())))

    def save(self, directory: str | Path) -> Path:
        """Write `directory/symbols.json` (created if needed); returns its path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / VOCAB_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"symbols": self.symbols}), encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, directory: str | Path) -> SymbolVocab:
        """Read `directory/symbols.json` written by `save`; a bad or missing file is a
        DataError."""
        path = Path(directory) / VOCAB_FILE
        try:
            symbols = json.loads(path.read_text(encoding="utf-8"))["symbols"]
            if not isinstance(symbols, list):
                raise TypeError("'symbols' is not a list")
            return cls(symbols)
        except (OSError, KeyError, TypeError, ValueError) as err:
            raise DataError(
                f"cannot read the symbol vocabulary '{path}' ({type(err).__name__}: {err}); "
                "it must be a file written by SymbolVocab.save"
            ) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymbolVocab) and self.symbols == other.symbols

    def __hash__(self) -> int:
        return hash(tuple(self.symbols))

    def __repr__(self) -> str:
        return f"SymbolVocab(size={self.size})"


def _sequence(rng: random.Random, max_len: int) -> tuple[int, ...]:
    length = rng.randint(1, max_len)
    return tuple(rng.randrange(NUM_SYMBOLS) for _ in range(length))


def _example(name: str, seq: Sequence[int], vocab: SymbolVocab, example_id: str) -> Example:
    src = " ".join(map(str, seq))
    tgt = " ".join(map(str, TASKS[name](list(seq))))
    return Example(src, tgt, src_ids=vocab.encode(src), tgt_ids=vocab.encode(tgt), id=example_id)


def _unseen(rng: random.Random, count: int, max_len: int, seen: set[tuple[int, ...]]) -> list:
    """`count` distinct sequences not in `seen` (which grows with them)."""
    out: list[tuple[int, ...]] = []
    attempts, limit = 0, 100 * count + 10_000
    while len(out) < count:
        attempts += 1
        if attempts > limit:
            raise ValueError(
                f"could not draw {count} unseen sequences of length <= {max_len} in {limit} "
                "tries; lower dev_size/test_size or raise eval_max_len"
            )
        seq = _sequence(rng, max_len)
        if seq not in seen:
            seen.add(seq)
            out.append(seq)
    return out


def make_task(
    name: str,
    *,
    train_size: int,
    max_len: int = 25,
    eval_max_len: int = 30,
    dev_size: int = 1000,
    test_size: int = 1000,
    seed: int = 1,
) -> dict[str, list[Example]]:
    """The "train", "dev" and "test" examples of the synthetic task `name`.

    Symbols are uniform over 0..50 and lengths uniform over 1..max_len (train) or
    1..eval_max_len (dev/test). Deterministic in `seed`: train uses `random.Random(seed)`,
    dev and test a second stream seeded from it. Dev/test sources are all distinct and
    never occur in train: a draw that does is rejected and drawn again.
    `src_ids`/`tgt_ids` are filled with `SymbolVocab()`.

    Raises ValueError for an unknown `name` (listing the valid ones) or bad sizes.
    """
    if name not in TASKS:
        raise ValueError(f"unknown synthetic task {name!r}; valid: {', '.join(TASKS)}")
    minimums = {"train_size": 0, "dev_size": 0, "test_size": 0, "max_len": 1, "eval_max_len": 1}
    values = [train_size, dev_size, test_size, max_len, eval_max_len]
    for (key, least), value in zip(minimums.items(), values, strict=True):
        if value < least:
            raise ValueError(f"{key} must be at least {least}, got {value}")
    vocab = SymbolVocab()
    train_rng = random.Random(seed)
    train_seqs = [_sequence(train_rng, max_len) for _ in range(train_size)]
    eval_rng = random.Random(f"attnmt-synthetic-eval:{seed}")
    seen = set(train_seqs)
    dev_seqs = _unseen(eval_rng, dev_size, eval_max_len, seen)
    test_seqs = _unseen(eval_rng, test_size, eval_max_len, seen)
    splits = {"train": train_seqs, "dev": dev_seqs, "test": test_seqs}
    return {
        split: [_example(name, seq, vocab, f"{name}.{split}:{i}") for i, seq in enumerate(seqs)]
        for split, seqs in splits.items()
    }
