"""Streaming preparation of a user's own parallel text, in bounded memory, on every core.

A training split of any size (`data.corpus: files` or `tsv`; plain or `.gz` files, or a TSV
on standard input) is read twice, a chunk of `CHUNK` lines at a time, and never held whole:

1. `scan` checks every line (UTF-8, equal line counts, a tab in every TSV line: a bad one
   stops here, naming file and line, before anything is encoded), counts the pairs and
   keeps a uniform random sample of them (reservoir sampling, Li's algorithm L, seeded) for
   the subword model, so its training costs the same at 30k pairs or 30M (each chunk's
   text is decoded and split into lines once, and the sample takes its pairs from there).
   Standard input is copied to a spool file in the (temporary) cache folder on the way.
2. `encode` reads the chunks back whole (the scan keeps each one's size in bytes, so no
   line is split twice) and sends them to worker processes (one per core, `data.workers`),
   which clean (`files.normalize`), filter (an empty side, more than `max_words` words, a
   word-count ratio above `max_ratio`, a copy of a dev/test pair found by an 8-byte
   BLAKE2b hash of the pair, computed only where the lengths of both sides match a
   held-out pair's) and encode them with sentencepiece; the main process writes
   the ids to the token store and the text to plain files, in line order. At most two
   chunks per worker are in flight, so memory does not grow with the corpus.

Opening the files is here too: plain, `.gz` or standard input ("-"), read as lines of
bytes; a file that cannot be opened or read (missing, a directory, not readable, a .gz
damaged anywhere: a bad header, bad data, cut short, a wrong CRC; a disk error) is one
`DataError` naming the file and, once reading has begun, the line.

The workers import only this module and `attnmt.data.files` (numpy and sentencepiece, no
torch) and start with `spawn`, safe in a process that already runs
torch's threads.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import math
import multiprocessing
import os
import random
import sys
import zlib
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import sentencepiece as spm

from attnmt.data.files import normalize
from attnmt.data.vocab import UNK
from attnmt.errors import DataError

CHUNK = 20_000  # lines a task: large enough to amortise a task, small in memory (~5 MB)
HISTOGRAM_WIDTH = 10  # words a bin of the length histograms, as in preparation.py

BOM = "\ufeff".encode()
# What reading a damaged .gz raises (a bad header or CRC: OSError; cut short: EOFError; bad
# compressed data: zlib.error); a disk error is an OSError too.
GZIP_ERRORS = (OSError, EOFError, zlib.error)


def display(path: str) -> str:
    """A path as messages name it ("<stdin>" for "-")."""
    return "<stdin>" if path == "-" else path


def open_binary(path: str) -> BinaryIO:
    """A file (or standard input for "-") as bytes, `.gz` decompressed; a DataError naming
    the file when it cannot be opened."""
    if path == "-":
        return sys.stdin.buffer
    opener = gzip.open if path.endswith(".gz") else open
    try:
        handle = opener(path, "rb")  # the caller closes it
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; check the path and the file name.") from None
    except IsADirectoryError:
        raise DataError(f"{path} is a directory; give the path of a text file.") from None
    except PermissionError:
        raise DataError(f"{path}: permission denied; make the file readable.") from None
    except OSError as err:
        raise DataError(
            f"{path}: cannot be read ({err.strerror or err}); check the file."
        ) from None
    if isinstance(handle, gzip.GzipFile):
        try:
            handle.peek(1)  # a file that is not gzip fails here, not in the middle
        except GZIP_ERRORS as err:
            handle.close()
            raise DataError(unreadable(path, err, 1)) from None
    return handle  # type: ignore[return-value]


def unreadable(path: str, err: BaseException, line: int) -> str:
    """The sentence for a file that fails while it is read, at `line`."""
    if path.endswith(".gz"):
        return (
            f"{path}: not a readable gzip file at line {line:,} ({err}); check the file "
            "(`gzip -t` tests it)."
        )
    reason = err.strerror if isinstance(err, OSError) and err.strerror else err
    return f"{display(path)}: cannot be read at line {line:,} ({reason}); check the file."


def guarded(handle: BinaryIO, path: str) -> Iterator[bytes]:
    """The lines of `handle`; a failure in the middle (`unreadable`) is a DataError naming
    the file and the line."""
    number = 0
    try:
        for number, line in enumerate(handle, start=1):  # noqa: B007 (read in `except`)
            yield line
    except GZIP_ERRORS as err:
        raise DataError(unreadable(path, err, number + 1)) from None


def pair_hash(src: str, tgt: str) -> bytes:
    """The 8-byte fingerprint of a pair that the held-out leak check compares."""
    return hashlib.blake2b(f"{src}\t{tgt}".encode(), digest_size=8).digest()


def held_out_index(pairs: Iterable[tuple[str, str]]) -> dict[tuple[int, int], frozenset[bytes]]:
    """The dev/test pairs as the workers look them up: their `pair_hash`es by the length
    of each side (in characters), so that a training pair of other lengths, nearly every
    one, is never hashed."""
    index: dict[tuple[int, int], set[bytes]] = {}
    for src, tgt in pairs:
        index.setdefault((len(src), len(tgt)), set()).add(pair_hash(src, tgt))
    return {lengths: frozenset(hashes) for lengths, hashes in index.items()}


def _decode(blob: bytes, path: str, first_line: int) -> str:
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as err:
        line = first_line + blob.count(b"\n", 0, err.start)
        column = err.start - (blob.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(
            f"{display(path)}: line {line} is not valid UTF-8 (byte 0x{blob[err.start]:02x} "
            f"at column {column}); convert the file to UTF-8 (e.g. `iconv -t UTF-8`)."
        ) from None
    return text.removeprefix("\ufeff") if first_line == 1 else text


def _lines(text: str, count: int) -> list[str]:
    return text.split("\n")[:count]


@dataclass
class Source:
    """Where a training split is read from: two parallel files or one TSV."""

    paths: tuple[str, ...]  # (src, tgt) for files, (tsv,) for a TSV; "-" is standard input
    tsv: bool

    @property
    def name(self) -> str:
        """The file name pair ids start with ("train.en:12"), as `files.load_split` does."""
        return "<stdin>" if self.paths[0] == "-" else Path(self.paths[0]).name

    @property
    def shown(self) -> str:
        """The paths as messages name them ("train.en, train.fr"; "<stdin>")."""
        return ", ".join(display(p) for p in self.paths)


@dataclass
class Scan:
    """What the first pass found: the pairs (lines) and a sample of raw (src, tgt) text."""

    lines: int
    sample: list[tuple[str, str]]
    source: Source  # where the second pass reads (the spool file for standard input)
    # Each chunk's lines and bytes in each file: the second pass reads them back whole,
    # without splitting lines again.
    chunks: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)


def _shrink(weight: float, rng: random.Random, size: int) -> float:
    """Algorithm L's weight update: W <- W * U^(1/k), U uniform in (0, 1]."""
    return weight * math.exp(math.log(1.0 - rng.random()) / size) if size else 0.0


def _skip(rng: random.Random, weight: float) -> int:
    """How many pairs to pass over before the next one enters the sample."""
    if not 0.0 < weight < 1.0:
        return 0 if weight >= 1.0 else 1 << 62  # no sample asked for: never take one
    return int(math.log(1.0 - rng.random()) / math.log(1.0 - weight))


def _chunks(source: Source) -> Iterator[tuple[int, list[list[bytes]]]]:
    """(first line number, [lines of each file]) for every CHUNK lines, line counts checked.
    A file that is only a byte-order mark has no line, as `files.read_lines` reads it."""
    handles = [open_binary(p) for p in source.paths]
    lines = [guarded(h, p) for h, p in zip(handles, source.paths, strict=True)]
    try:
        first = 1
        while True:
            parts = [list(itertools.islice(f, CHUNK)) for f in lines]
            if first == 1:
                parts = [[] if p == [BOM] else p for p in parts]
            sizes = [len(p) for p in parts]
            if len(set(sizes)) > 1:  # one file ended first: count the other to the end
                totals = [
                    first - 1 + n + sum(1 for _ in f) for n, f in zip(sizes, lines, strict=True)
                ]
                a, b = source.paths
                raise DataError(
                    f"{display(a)} has {totals[0]:,} lines but {display(b)} has "
                    f"{totals[1]:,}; parallel files need exactly one sentence per line on "
                    "both sides, so find the line that was split, joined or dropped."
                )
            if not sizes[0]:
                return
            yield first, parts
            first += sizes[0]
    finally:
        for h in handles:
            if h is not sys.stdin.buffer:
                h.close()


def _check_tsv(lines: list[bytes], path: str, first: int) -> None:
    for number, line in enumerate(lines, start=first):
        if b"\t" not in line:
            if not line.strip():
                raise DataError(
                    f"{display(path)}: line {number} is empty; every line needs "
                    "`source<TAB>target`, so remove the line or fill it in."
                )
            raise DataError(
                f"{display(path)}: line {number} has no tab; write it as `source<TAB>target` "
                "(with a real tab character, not spaces)."
            )


def scan(
    source: Source,
    *,
    sample_pairs: int,
    seed: int,
    spool: Path | None = None,
    on_chunk=lambda lines: None,
) -> Scan:
    """The first pass (see the module docstring): check, count, sample, spool stdin.
    `on_chunk(lines)` after each chunk (a progress bar)."""
    rng = random.Random(f"attnmt-subword-sample:{seed}")
    sample: list[tuple[str, str]] = []
    # Algorithm L (Li 1994): once the sample is full, `take` is the index of the next pair
    # to put in it, at a random place; `weight` shrinks as the stream grows.
    weight = _shrink(1.0, rng, sample_pairs)
    take = sample_pairs + _skip(rng, weight)
    spooled = open(spool, "wb") if spool is not None else None  # noqa: SIM115
    lines = 0
    sizes: list[tuple[int, tuple[int, ...]]] = []
    try:
        for first, parts in _chunks(source):
            blobs = [b"".join(lines_of) for lines_of in parts]
            if spooled is not None:
                spooled.write(blobs[0])
            if source.tsv:
                _check_tsv(parts[0], source.paths[0], first)
            base, count = lines, len(parts[0])  # this chunk holds pairs base .. base+count-1
            # Every byte checked; the text split into lines once, for the sample to take from.
            texts = [
                _lines(_decode(blob, path, first), count)
                for blob, path in zip(blobs, source.paths, strict=True)
            ]
            sizes.append((count, tuple(map(len, blobs))))
            lines += count
            on_chunk(count)

            def row(i: int, texts=texts, base=base) -> tuple[str, str]:
                """Pair `i` (of the whole split) as text."""
                if source.tsv:
                    src, tgt = texts[0][i - base].split("\t")[:2]
                    return src, tgt
                return texts[0][i - base], texts[1][i - base]

            sample.extend(row(i) for i in range(len(sample), min(sample_pairs, lines)))
            while sample_pairs and take < lines:
                sample[rng.randrange(sample_pairs)] = row(take)
                weight = _shrink(weight, rng, sample_pairs)
                take += _skip(rng, weight) + 1
    finally:
        if spooled is not None:
            spooled.close()
    read_from = Source((str(spool),), True) if spool is not None else source
    return Scan(lines, sample, read_from, sizes)


# --------------------------------------------------------------------------------------
# The second pass: workers clean, filter and encode; the main process writes
# --------------------------------------------------------------------------------------


@dataclass
class Settings:
    """What every worker needs, sent once when it starts."""

    src_model: bytes
    tgt_model: bytes
    tsv: bool
    name: str  # the source file's name, for pair ids
    max_words: int
    max_ratio: float
    held_out: dict[tuple[int, int], frozenset[bytes]]  # `held_out_index`
    dtype: str


@dataclass
class Encoded:
    """One chunk's output, in line order (see `Settings` for the filters)."""

    ids: np.ndarray  # each kept pair's source then target ids
    src_lengths: np.ndarray
    tgt_lengths: np.ndarray
    src_text: bytes  # kept pairs' cleaned text, a line each
    tgt_text: bytes
    id_text: bytes
    counts: dict[str, int] = field(default_factory=dict)
    histograms: dict[str, np.ndarray] = field(default_factory=dict)


_WORKER: dict = {}


def _start(settings: Settings) -> None:
    """Worker initializer: load the sentencepiece model(s) once."""
    _WORKER["settings"] = settings
    _WORKER["src"] = spm.SentencePieceProcessor(model_proto=settings.src_model)
    _WORKER["tgt"] = (
        _WORKER["src"]
        if settings.tgt_model == settings.src_model
        else spm.SentencePieceProcessor(model_proto=settings.tgt_model)
    )


def filtered(src_words: int, tgt_words: int, *, max_words: int, max_ratio: float) -> str:
    """Why a training pair of these word counts is dropped ("long", "ratio"), or "" if it is
    kept: more than `max_words` words on a side, or one side `max_ratio` times the other
    (0 turns either check off). Every corpus's training split goes through it."""
    longer, shorter = max(src_words, tgt_words), min(src_words, tgt_words)
    if max_words and longer > max_words:
        return "long"
    if max_ratio and longer > max_ratio * shorter:
        return "ratio"
    return ""


def _histogram(words: np.ndarray) -> np.ndarray:
    return np.bincount(np.maximum(words - 1, 0) // HISTOGRAM_WIDTH)


def encode_chunk(task: tuple[int, list[bytes]]) -> Encoded:
    """Clean, filter and encode the lines of one chunk (runs in a worker)."""
    first, blobs = task
    s: Settings = _WORKER["settings"]
    texts = [blob.decode("utf-8") for blob in blobs]
    if first == 1:
        texts = [t.removeprefix("\ufeff") for t in texts]
    count = texts[0].count("\n") + (not texts[0].endswith("\n"))
    if s.tsv:
        fields = [line.split("\t", 2) for line in _lines(texts[0], count)]
        raw = [(f[0], f[1]) for f in fields]
    else:
        raw = list(zip(_lines(texts[0], count), _lines(texts[1], count), strict=True))
    counts = dict.fromkeys(("empty", "long", "ratio", "duplicates"), 0)
    sources, targets, numbers, src_words, tgt_words = [], [], [], [], []
    for number, (a, b) in enumerate(raw, start=first):
        src, tgt = normalize(a), normalize(b)
        if not src or not tgt:
            counts["empty"] += 1
            continue
        ws, wt = src.count(" ") + 1, tgt.count(" ") + 1
        dropped = filtered(ws, wt, max_words=s.max_words, max_ratio=s.max_ratio)
        if dropped:
            counts[dropped] += 1
            continue
        hashes = s.held_out.get((len(src), len(tgt)))
        if hashes and pair_hash(src, tgt) in hashes:
            counts["duplicates"] += 1
            continue
        sources.append(src)
        targets.append(tgt)
        numbers.append(number)
        src_words.append(ws)
        tgt_words.append(wt)
    src_ids = _WORKER["src"].encode(sources, out_type=int, num_threads=1) if sources else []
    tgt_ids = _WORKER["tgt"].encode(targets, out_type=int, num_threads=1) if targets else []
    src_len = np.fromiter(map(len, src_ids), np.int64, len(src_ids))
    tgt_len = np.fromiter(map(len, tgt_ids), np.int64, len(tgt_ids))
    rows = itertools.chain.from_iterable(zip(src_ids, tgt_ids, strict=True))
    ids = np.fromiter(
        itertools.chain.from_iterable(rows), s.dtype, int(src_len.sum() + tgt_len.sum())
    )
    ws_arr, wt_arr = np.array(src_words, np.int64), np.array(tgt_words, np.int64)
    counts.update(
        kept=len(sources),
        src_words=int(ws_arr.sum()),
        tgt_words=int(wt_arr.sum()),
        src_subwords=int(src_len.sum()),
        tgt_subwords=int(tgt_len.sum()),
        unk=int(np.count_nonzero(ids == UNK)),
    )
    return Encoded(
        ids=ids,
        src_lengths=src_len,
        tgt_lengths=tgt_len,
        src_text="".join(f"{t}\n" for t in sources).encode(),
        tgt_text="".join(f"{t}\n" for t in targets).encode(),
        id_text="".join(f"{s.name}:{n}\n" for n in numbers).encode(),
        counts=counts,
        histograms={"src": _histogram(ws_arr), "tgt": _histogram(wt_arr)},
    )


def workers_for(requested: int, lines: int) -> int:
    """Worker processes: `requested`, or every core of this process when 0; none (work in
    this process) for a corpus too small to pay for starting them."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    count = requested or cores or 1
    return 0 if count <= 1 or lines < 4 * CHUNK else count


def _tasks(scanned: Scan) -> Iterator[tuple[int, tuple[int, list[bytes]]]]:
    """(lines, task) for every chunk the scan found: its bytes read back whole."""
    handles = [open_binary(p) for p in scanned.source.paths]
    try:
        first = 1
        for count, sizes in scanned.chunks:
            blobs = [h.read(n) for h, n in zip(handles, sizes, strict=True)]
            for blob, n, path in zip(blobs, sizes, scanned.source.paths, strict=True):
                if len(blob) != n:
                    raise DataError(
                        f"{display(path)} changed while it was being prepared (it ends "
                        f"before line {first + count - 1:,}); prepare again once it is written."
                    )
            yield count, (first, blobs)
            first += count
    finally:
        for h in handles:
            h.close()


def encode(scanned: Scan, settings: Settings, *, workers: int, on_chunk) -> Iterator[Encoded]:
    """The second pass over what `scan` read: every chunk's `Encoded`, in order.
    `on_chunk(lines)` after each."""
    if not workers:
        _start(settings)
        for count, task in _tasks(scanned):
            result = encode_chunk(task)
            on_chunk(count)
            yield result
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_start, initargs=(settings,)) as pool:
        pending: deque = deque()
        for count, task in _tasks(scanned):
            pending.append((pool.apply_async(encode_chunk, (task,)), count))
            if len(pending) >= 2 * workers:
                result, lines = pending.popleft()
                yield result.get()
                on_chunk(lines)
        while pending:
            result, lines = pending.popleft()
            yield result.get()
            on_chunk(lines)


def add_histograms(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(max(len(a), len(b)), np.int64)
    out[: len(a)] += a
    out[: len(b)] += b
    return out


def train_stats(totals: Counter, histograms: dict[str, np.ndarray]) -> dict[str, Any]:
    """The train entry of stats.json from the workers' counters (the shape of
    `preparation.compute_stats`)."""
    width = HISTOGRAM_WIDTH

    def bins(counts: np.ndarray) -> dict[str, int]:
        return {f"{k * width + 1}-{(k + 1) * width}": int(c) for k, c in enumerate(counts) if c}

    subwords = totals["src_subwords"] + totals["tgt_subwords"]
    return {
        "words": {"src": totals["src_words"], "tgt": totals["tgt_words"]},
        "subwords": {"src": totals["src_subwords"], "tgt": totals["tgt_subwords"]},
        "subwords_per_word": {
            "src": round(totals["src_subwords"] / max(1, totals["src_words"]), 3),
            "tgt": round(totals["tgt_subwords"] / max(1, totals["tgt_words"]), 3),
        },
        "coverage": round(1.0 - totals["unk"] / max(1, subwords), 5),
        "length_histogram_words": {"src": bins(histograms["src"]), "tgt": bins(histograms["tgt"])},
    }
