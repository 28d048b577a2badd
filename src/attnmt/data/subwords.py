"""Subwords and vocabularies: sentencepiece models trained on the training split only.

A `Vocab` has two sides, `src` and `tgt` (the same object when the vocabulary is joint).
Each side encodes text to ids, decodes ids to text, and maps subword positions to word
positions, which is how subword attention becomes word alignments:

    vocab = train_vocab(train_pairs, kind="unigram", size=8000, joint=True, cache_dir=...)
    ids = vocab.src.encode("In the beginning")     # [..], no BOS/EOS
    vocab.src.word_of("In the beginning")          # [0, 1, 2, 2]: word index of each piece
    vocab.tgt.decode(ids)                          # text; stops at EOS
    vocab.save(run_dir / "vocab"); load_vocab(run_dir / "vocab")

Special ids are fixed in every vocabulary (see `attnmt.data.types`): PAD 0, UNK 1, BOS 2,
EOS 3. Sentencepiece models are trained with exactly these ids.

Trained models are cached by a hash of their training text and options, so a second run of
the same preparation reuses them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sentencepiece as spm

from attnmt.data.images import CanvasVocab
from attnmt.data.synthetic import SymbolVocab
from attnmt.data.vocab import BOS, EOS, PAD, UNK
from attnmt.errors import DataError

WORD_START = "\u2581"  # sentencepiece's "▁": this piece begins a new word


def _until_eos(ids: Sequence[int]) -> list[int]:
    out = []
    for i in ids:
        i = int(i)
        if i == EOS:
            break
        if i not in (PAD, BOS):
            out.append(i)
    return out


class SentencePieceSide:
    """A sentencepiece model as one side of a vocabulary."""

    def __init__(self, model_proto: bytes):
        self.model_proto = model_proto
        self.processor = spm.SentencePieceProcessor(model_proto=model_proto)
        self.size = self.processor.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.processor.encode(text, out_type=int)

    def decode(self, ids: Sequence[int]) -> str:
        return self.processor.decode(_until_eos(ids))

    def pieces(self, text: str) -> list[str]:
        return self.processor.encode(text, out_type=str)

    def id_pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.processor.id_to_piece(int(i)) for i in ids]

    def word_of(self, text: str) -> list[int]:
        """The word index (0-based, words as `text.split()`) of every piece of `text`."""
        return word_of_pieces(self.pieces(text))


def word_of_pieces(pieces: Sequence[str]) -> list[int]:
    """Word index of each piece: a piece starting with "▁" starts a new word.

    A lone "▁" piece (sentencepiece emits it before a word it cannot join) starts the word
    that the next piece continues.
    """
    word, out, pending_start = -1, [], False
    for piece in pieces:
        starts = piece.startswith(WORD_START)
        if (starts and not pending_start) or word < 0:
            word += 1
        pending_start = piece == WORD_START
        out.append(word)
    return out


@dataclass
class Vocab:
    """The source and target sides (one shared object when `joint`)."""

    src: SentencePieceSide | SymbolVocab | CanvasVocab
    tgt: SentencePieceSide | SymbolVocab
    joint: bool

    @property
    def src_vocab_size(self) -> int:
        return self.src.size

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.size

    def decode_tgt(self, ids: Sequence[int]) -> str:
        return self.tgt.decode(ids)

    def same_as(self, other: Vocab) -> bool:
        """True when both map every piece to the same id (same models or symbol lists)."""

        def key(side) -> object:
            if isinstance(side, CanvasVocab):
                return (side.height, side.width)
            return side.itos if isinstance(side, SymbolVocab) else side.model_proto

        return (self.joint, key(self.src), key(self.tgt)) == (
            other.joint,
            key(other.src),
            key(other.tgt),
        )

    def save(self, directory: str | Path) -> None:
        """Write the vocabulary (sentencepiece models or the symbol list) into `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if isinstance(self.src, CanvasVocab):  # images: pixel levels in, symbols out
            meta = {"kind": "images", "joint": False}
            self.src.save(directory)
            self.tgt.save(directory)
        elif isinstance(self.src, SymbolVocab):
            meta = {"kind": "symbols", "joint": True}
            self.src.save(directory)
        else:
            meta = {"kind": "sentencepiece", "joint": self.joint}
            sides = {"joint": self.src} if self.joint else {"src": self.src, "tgt": self.tgt}
            for name, side in sides.items():
                _write_atomic(directory / f"{name}.model", side.model_proto)
        _write_atomic(directory / "vocab.json", json.dumps(meta, ensure_ascii=False).encode())


def load_vocab(directory: str | Path) -> Vocab:
    """Read a vocabulary written by `Vocab.save`; a missing or foreign one is a DataError."""
    directory = Path(directory)
    meta_path = directory / "vocab.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta["kind"] == "symbols":
            side = SymbolVocab.load(directory)
            return Vocab(side, side, True)
        if meta["kind"] == "images":
            return Vocab(CanvasVocab.load(directory), SymbolVocab.load(directory), False)
        if meta["kind"] != "sentencepiece":
            raise KeyError("kind")
        if meta["joint"]:
            side = SentencePieceSide((directory / "joint.model").read_bytes())
            return Vocab(side, side, True)
        src = SentencePieceSide((directory / "src.model").read_bytes())
        tgt = SentencePieceSide((directory / "tgt.model").read_bytes())
        return Vocab(src, tgt, False)
    except (OSError, KeyError, TypeError, ValueError, RuntimeError) as err:
        raise DataError(
            f"cannot read the vocabulary in '{directory}' ({type(err).__name__}: {err}); "
            "it must be the vocab/ folder a training run wrote"
        ) from None


def _write_atomic(path: Path, data: bytes) -> None:
    """A unique temporary name, then a rename: parallel writers never collide."""
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------
# Training (cached)
# --------------------------------------------------------------------------------------


def _train_model(sentences: Sequence[str], kind: str, size: int, cache_dir: Path) -> bytes:
    """Train one sentencepiece model on `sentences`, or reuse the cached one."""
    options = {
        "model_type": kind,
        "vocab_size": size,
        "character_coverage": 1.0,  # every character: French ç is rarer than 0.05%
        "pad_id": PAD,
        "unk_id": UNK,
        "bos_id": BOS,
        "eos_id": EOS,
        # Small corpora (tests, tiny files) may not support the requested size.
        "hard_vocab_limit": False,
        "input_sentence_size": 2_000_000,
        "shuffle_input_sentence": True,
        "seed_sentencepiece_size": 200_000,
        "num_threads": 2,
        "minloglevel": 2,
    }
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    for sentence in sentences:
        digest.update(sentence.encode("utf-8"))
        digest.update(b"\n")
    path = cache_dir / f"spm-{kind}-{size}-{digest.hexdigest()[:16]}.model"
    if path.is_file():
        return path.read_bytes()
    if not any(s.strip() for s in sentences):
        raise DataError("cannot train a subword model: the training text is empty")
    buffer = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter([s for s in sentences if s.strip()]),
            model_writer=buffer,
            **options,
        )
    except RuntimeError as err:
        reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        fix = "try another data.vocab_size"
        if "!sentences_.empty()" in reason:  # it skips sentences past 4,192 bytes
            reason = "every sentence is longer than its limit of 4,192 bytes"
            fix = "check that each file has one sentence a line (\\n line ends)"
        elif "all_chars_count" in reason:  # it normalises these characters away
            reason = "the text has only control, zero-width or other invisible characters"
            fix = "check the content and the encoding of the files"
        elif needed := re.search(r"required_chars\. \d+ vs (\d+)", reason):
            reason = f"the text has {int(needed[1]) - 4:,} distinct characters, each a subword"
            fix = f"set data.vocab_size to {needed[1]} (with the 4 special ones) or more"
        raise DataError(
            f"sentencepiece could not train a {size}-piece {kind} model ({reason}); {fix}"
        ) from None
    cache_dir.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, buffer.getvalue())
    return buffer.getvalue()


def train_vocab(
    sources: Sequence[str],
    targets: Sequence[str],
    *,
    kind: str = "unigram",
    size: int = 8000,
    joint: bool = True,
    cache_dir: str | Path = "data-cache",
) -> Vocab:
    """Train sentencepiece on the training split (both sides together when `joint`)."""
    if kind not in ("unigram", "bpe"):
        raise DataError(f"data.subword_type must be 'unigram' or 'bpe', got '{kind}'")
    cache_dir = Path(cache_dir)
    if joint:
        side = SentencePieceSide(_train_model([*sources, *targets], kind, size, cache_dir))
        return Vocab(side, side, True)
    src = SentencePieceSide(_train_model(sources, kind, size, cache_dir))
    tgt = SentencePieceSide(_train_model(targets, kind, size, cache_dir))
    return Vocab(src, tgt, False)


def vocab_note(stats: dict[str, Any]) -> str | None:
    """One sentence when sentencepiece made fewer subwords than data.vocab_size asked (the
    training text supports no more: `hard_vocab_limit` is off so that small corpora still
    train), else None."""
    asked, sizes = stats.get("vocab_asked"), stats.get("vocab_size", {})
    if not asked or all(size >= asked for size in sizes.values()):
        return None
    if stats.get("joint_vocab"):
        got = f"{sizes['src']:,}"
    else:
        got = f"{sizes['src']:,} (source) and {sizes['tgt']:,} (target)"
    return (
        f"data.vocab_size asks for {asked:,} subwords but the training text supports only "
        f"{got}, which sentencepiece made instead; set data.vocab_size to at most that, or "
        "train on more text"
    )
