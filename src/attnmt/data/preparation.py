"""From a `DataConfig` to encoded splits, a vocabulary and statistics, cached on disk.

    data = prepare(cfg.data)
    data.train                           # a TokenStore: memory-mapped ids, any size
    data.dev, data.test                  # lists of Example (text, references, ids)
    data.vocab                           # attnmt.data.subwords.Vocab
    data.stats                           # what `attnmt data prepare` prints and writes
    data.directory                       # the cache folder holding all of it

The cache folder is named by a hash of the data options (all but `cache_dir`,
`batch_tokens` and `workers`), so a second run with the same options only maps it. It holds
the token store of each split (`attnmt.data.store`: `{split}.ids`, `.lengths.npy`,
`.offsets.npy`), the cleaned text (`{split}.src`, `.tgt`, `.id`, `.refN`), `vocab/`,
`stats.json` and `store.json`. It is written in a temporary folder beside it and renamed
into place when complete, so a cache folder is whole or absent: a killed preparation leaves
only a `.KEY.tmp-PID-*` folder that no run trusts (the next preparation removes it).

Your own files (`files`, `tsv`) stream through `attnmt.data.streaming` in bounded memory on
every core; the other corpora are small and prepared in memory.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from attnmt.config import DataConfig, corpora
from attnmt.data import alignments, bible, grammar_corpus, images, streaming
from attnmt.data.buckets import padding_fraction
from attnmt.data.cache import (
    CORPORA,
    IMAGES,
    SYNTHETIC,
    PreparedData,
    cache_key,
    load_folder,
    remove_abandoned,
    save_folder,
    say_old_caches,
    write_text,
)
from attnmt.data.files import load_split, normalize, with_suffix
from attnmt.data.store import StoreWriter, TokenStore, id_dtype
from attnmt.data.subwords import SentencePieceSide, Vocab, train_vocab, vocab_note
from attnmt.data.synthetic import SymbolVocab, make_task
from attnmt.data.types import Example
from attnmt.data.vocab import UNK
from attnmt.errors import DataError


def prepare(cfg: DataConfig, *, progress: bool = False) -> PreparedData:
    """Read, clean, split, subword and encode the corpus of `cfg` (or map it from cache)."""
    if cfg.corpus not in CORPORA:
        raise DataError(f"unknown data.corpus '{cfg.corpus}'; valid corpora: {', '.join(CORPORA)}")
    key = cache_key(cfg)
    root = Path(cfg.cache_dir)
    directory = root / key
    if (directory / "store.json").is_file():
        return load_folder(directory)
    root.mkdir(parents=True, exist_ok=True)
    remove_abandoned(root, key)
    say_old_caches(root, key, directory)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{key}.tmp-{os.getpid()}-"))
    try:
        if cfg.corpus in ("files", "tsv"):
            stats = _prepare_streaming(cfg, tmp, progress)
        else:
            stats = _prepare_in_memory(cfg, tmp)
        stats["seconds"]["total"] = round(time.perf_counter() - started, 2)
        write_text(tmp / "stats.json", [json.dumps(stats, ensure_ascii=False, indent=2)])
        try:
            os.rename(tmp, directory)
        except OSError:  # another preparation of the same options finished first: use it
            if not (directory / "store.json").is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    data = load_folder(directory)
    data.stats.pop("cached", None)
    note = vocab_note(data.stats)
    if note:
        print(f"attnmt: {note}", file=sys.stderr)
    return data


def decoding_split(cfg: DataConfig, name: str, vocab: Vocab) -> Sequence[Example]:
    """The split `attnmt evaluate` and `plot` decode, without preparing the training split
    for it: dev and test come from the cache when it is there, else they are read and
    encoded with `vocab` (the run's own) and nothing is written. `train` is the store."""
    if name not in ("train", "dev", "test"):
        raise DataError(f"unknown split '{name}'; valid splits: train, dev, test")
    directory = Path(cfg.cache_dir) / cache_key(cfg)
    if name == "train" or (directory / "store.json").is_file():
        return prepare(cfg).split(name)
    if cfg.corpus in ("files", "tsv"):
        path = getattr(cfg, f"{name}_path")
        examples = load_split(path, cfg.src, cfg.tgt, cfg.corpus) if path else []
    else:  # the built-in, synthetic and image corpora: small, read whole
        examples = _read_splits(cfg)[0][name]
    for ex in examples:
        ex.src_ids = vocab.src.encode(ex.src)
        ex.tgt_ids = vocab.tgt.encode(ex.tgt)
    return examples


def _vocab(
    cfg: DataConfig, sources: list[str], targets: list[str], train: Sequence[Example] = ()
) -> Vocab:
    if cfg.corpus == "grammar":  # one token a word, both languages (grammar_corpus)
        side = grammar_corpus.vocabulary(train)
        return Vocab(side, side, True)
    if cfg.corpus in SYNTHETIC:
        side = SymbolVocab()
        return Vocab(side, side, True)
    if cfg.corpus in IMAGES:
        return Vocab(images.CanvasVocab(*images.CANVAS[cfg.corpus]), images.digit_vocab(), False)
    return train_vocab(
        sources,
        targets,
        kind=cfg.subword_type,
        size=cfg.vocab_size,
        joint=cfg.joint_vocab,
        cache_dir=Path(cfg.cache_dir) / "subwords",
    )


def _prepare_in_memory(cfg: DataConfig, folder: Path) -> dict[str, Any]:
    """The built-in, synthetic and image corpora: small, read whole, written to `folder`."""
    splits, extra = _read_splits(cfg)
    if cfg.max_ratio and cfg.corpus not in (*SYNTHETIC, *IMAGES):  # as for your own files
        kept = [ex for ex in splits["train"] if _filtered(ex.src, ex.tgt, cfg) != "ratio"]
        extra["removed_ratio"] = len(splits["train"]) - len(kept)
        splits["train"] = kept
    if not splits["train"]:
        raise DataError(f"the training split of data.corpus '{cfg.corpus}' is empty")
    vocab_started = time.perf_counter()
    train = splits["train"]
    if len(train) > cfg.subword_sample:  # as for your own files: a sample, in corpus order
        rng = random.Random(f"attnmt-subword-sample:{cfg.seed}")
        train = [train[i] for i in sorted(rng.sample(range(len(train)), cfg.subword_sample))]
    vocab = _vocab(cfg, [ex.src for ex in train], [ex.tgt for ex in train], splits["train"])
    vocab_seconds = time.perf_counter() - vocab_started
    for examples in splits.values():
        for ex in examples:
            ex.src_ids = vocab.src.encode(ex.src)
            ex.tgt_ids = vocab.tgt.encode(ex.tgt)
    stats = compute_stats(splits, vocab, cfg)
    stats.update(extra)
    stats["seconds"] = {"subwords": round(vocab_seconds, 2)}
    save_folder(folder, splits, vocab, stats)
    if cfg.corpus == "grammar":
        grammar_corpus.write_gold(cfg, folder)
    return stats


def _prepare_streaming(cfg: DataConfig, folder: Path, progress: bool) -> dict[str, Any]:
    """Your own files: dev/test in memory, the training split streamed (module docstring of
    `attnmt.data.streaming`), in memory that does not grow with it."""
    if not cfg.train_path:
        raise DataError(f"data.corpus is '{cfg.corpus}' but data.train_path is empty")
    held = {}
    for name in ("dev", "test"):
        path = getattr(cfg, f"{name}_path")
        held[name] = load_split(path, cfg.src, cfg.tgt, cfg.corpus) if path else []
    tsv = cfg.corpus == "tsv"
    if cfg.train_path == "-" and not tsv:
        raise DataError(
            "data.train_path '-' (standard input) needs data.corpus: tsv; two parallel files "
            "cannot both come from standard input"
        )
    paths = (
        (cfg.train_path,)
        if tsv
        else tuple(with_suffix(cfg.train_path, lang) for lang in (cfg.src, cfg.tgt))
    )
    source = streaming.Source(paths, tsv)
    started = time.perf_counter()
    spool = folder / "train.stdin" if cfg.train_path == "-" else None
    bar = tqdm(
        unit=" pairs", unit_scale=True, desc="checking", disable=not progress, file=sys.stderr
    )
    with bar:
        scanned = streaming.scan(
            source, sample_pairs=cfg.subword_sample, seed=cfg.seed, spool=spool, on_chunk=bar.update
        )
    scan_seconds = time.perf_counter() - started
    sample = [(normalize(s), normalize(t)) for s, t in scanned.sample]
    sample = [(s, t) for s, t in sample if s and t and not _filtered(s, t, cfg)]
    if not scanned.lines or not sample:
        raise DataError(
            f"the training split in {source.shown} has no pair with text on both sides within "
            f"data.max_words={cfg.max_words} and data.max_ratio={cfg.max_ratio}; check the "
            "files and the filters"
        )
    vocab_started = time.perf_counter()
    try:
        vocab = _vocab(cfg, [s for s, _ in sample], [t for _, t in sample])
    except DataError as err:  # sentencepiece's reason: name the files it read
        raise DataError(f"the training split in {source.shown}: {err}") from None
    vocab_seconds = time.perf_counter() - vocab_started
    sampled = len(sample)
    scanned.sample, sample = [], []  # not held through the encoding
    dtype = id_dtype(max(vocab.src_vocab_size, vocab.tgt_vocab_size))
    settings = streaming.Settings(
        src_model=vocab.src.model_proto,
        tgt_model=vocab.tgt.model_proto,
        tsv=tsv,
        name=source.name,
        max_words=cfg.max_words,
        max_ratio=cfg.max_ratio,
        held_out=streaming.held_out_index(
            (ex.src, ex.tgt) for exs in held.values() for ex in exs if cfg.drop_held_out
        ),
        dtype=dtype.name,
    )
    encode_started = time.perf_counter()
    workers = streaming.workers_for(cfg.workers, scanned.lines)
    totals: Counter = Counter()
    histograms: dict[str, np.ndarray] = {"src": np.zeros(0, np.int64), "tgt": np.zeros(0, np.int64)}
    writer = StoreWriter(folder, "train", dtype=dtype)
    texts = {side: open(folder / f"train.{side}", "wb") for side in ("src", "tgt", "id")}  # noqa: SIM115
    bar = tqdm(
        total=scanned.lines,
        unit=" pairs",
        unit_scale=True,
        desc="encoding",
        disable=not progress,
        file=sys.stderr,
    )
    try:
        for part in streaming.encode(scanned, settings, workers=workers, on_chunk=bar.update):
            writer.add(part.ids, part.src_lengths, part.tgt_lengths)
            texts["src"].write(part.src_text)
            texts["tgt"].write(part.tgt_text)
            texts["id"].write(part.id_text)
            totals.update(part.counts)
            for side, counts in part.histograms.items():
                histograms[side] = streaming.add_histograms(histograms[side], counts)
    except BaseException:
        writer.discard()
        raise
    finally:
        bar.close()
        for handle in texts.values():
            handle.close()
    store = writer.close()
    if spool is not None:
        spool.unlink()
    if not totals["kept"]:
        raise DataError(
            f"every training pair in {source.shown} was filtered out (empty sides, "
            f"data.max_words={cfg.max_words}, data.max_ratio={cfg.max_ratio}, copies of "
            "dev/test pairs: data.drop_held_out); check the files and the filters"
        )
    encode_seconds = time.perf_counter() - encode_started
    for exs in held.values():
        for ex in exs:
            ex.src_ids = vocab.src.encode(ex.src)
            ex.tgt_ids = vocab.tgt.encode(ex.tgt)
    stats = compute_stats({"train": [], **held}, vocab, cfg)
    stats["pairs"]["train"] = totals["kept"]
    stats["train"] = streaming.train_stats(totals, histograms)
    stats["removed_long"] = totals["long"]
    stats["removed_duplicates"] = totals["duplicates"]
    stats["removed_ratio"] = totals["ratio"]
    stats["removed_empty"] = totals["empty"]
    stats["lines"] = {"train": scanned.lines}
    stats["subword_sample"] = sampled
    stats["workers"] = workers or 1
    save_folder(folder, {"train": [], **held}, vocab, stats, skip=("train",), train_store=store)
    lengths = TokenStore(folder, "train", dtype=dtype.name)
    stats["padding_fraction"] = round(padding_fraction(lengths, cfg.batch_tokens), 4)
    stats["seconds"] = {
        "scan": round(scan_seconds, 2),
        "subwords": round(vocab_seconds, 2),
        "encode": round(encode_seconds, 2),
    }
    return stats


def _filtered(src: str, tgt: str, cfg: DataConfig) -> str:
    """`streaming.filtered` for a pair of texts under `cfg`'s limits."""
    return streaming.filtered(
        src.count(" ") + 1, tgt.count(" ") + 1, max_words=cfg.max_words, max_ratio=cfg.max_ratio
    )


def _read_splits(cfg: DataConfig) -> tuple[dict[str, list[Example]], dict[str, Any]]:
    if cfg.corpus == "bible":
        return _bible(cfg)
    if cfg.corpus == "grammar":
        return grammar_corpus.read_splits(cfg)
    if cfg.corpus == "alignments":
        gold = alignments.load_gold()
        parts = alignments.split_by_book(
            gold.verses, test_books=cfg.test_books, dev_books=cfg.dev_books
        )
        splits = {name: alignments.to_examples(parts[name]) for name in ("train", "dev", "test")}
        # Verses without gold links are still parallel text: train on those of train books.
        unlinked = alignments.split_by_book(
            gold.unlinked, test_books=cfg.test_books, dev_books=cfg.dev_books
        )
        splits["train"] += alignments.to_examples(unlinked["train"])
        # As for the Bible: a training pair identical to a dev/test pair is not trained on.
        held_out = {(ex.src, ex.tgt) for name in ("dev", "test") for ex in splits[name]}
        kept = [ex for ex in splits["train"] if (ex.src, ex.tgt) not in held_out]
        duplicates = len(splits["train"]) - len(kept)
        long = [ex for ex in kept if _too_long(ex, cfg.max_words)]
        splits["train"] = [ex for ex in kept if not _too_long(ex, cfg.max_words)]
        gold_links = {n: sum(len(v.links) for v in parts[n]) for n in ("dev", "test")}
        books = {"dev_books": list(cfg.dev_books), "test_books": list(cfg.test_books)}
        if cfg.swap:  # English -> Greek
            splits = {
                name: [Example(src=ex.tgt, tgt=ex.src, id=ex.id) for ex in examples]
                for name, examples in splits.items()
            }
            books["direction"] = "en-grc"
        return splits, {
            "gold_links": gold_links,
            "removed_duplicates": duplicates,
            "removed_long": len(long),
            **books,
        }
    if cfg.corpus in IMAGES:
        canvases = images.make_image_task(
            cfg.corpus,
            train_size=cfg.synthetic_train_size,
            dev_size=cfg.synthetic_dev_size,
            test_size=cfg.synthetic_dev_size,
            seed=cfg.seed,
        )
        splits = {n: images.to_examples(cfg.corpus, c, n) for n, c in canvases.items()}
        return splits, {"canvas": list(images.CANVAS[cfg.corpus])}

    splits = make_task(
        cfg.corpus,
        train_size=cfg.synthetic_train_size,
        max_len=cfg.synthetic_max_len,
        seed=cfg.seed,
    )
    return splits, {}


def _too_long(ex: Example, max_words: int) -> bool:
    return bool(max_words) and max(len(ex.src.split()), len(ex.tgt.split())) > max_words


def _bible(cfg: DataConfig) -> tuple[dict[str, list[Example]], dict[str, Any]]:

    extra_refs = bible.other_versions(cfg.tgt, src=cfg.src)
    corpora.version(cfg.src)
    pairs = bible.load_pairs(cfg.src, cfg.tgt, extra_refs=extra_refs)
    parts = bible.split_by_books(
        pairs, dev=list(cfg.dev_books), test=list(cfg.test_books), max_words=cfg.max_words
    )
    splits = {
        name: [Example(p.src, p.tgt, list(p.refs), id=p.ref) for p in getattr(parts, name)]
        for name in ("train", "dev", "test")
    }
    for ex in splits["train"]:
        ex.refs = []
    extra = {
        "removed_duplicates": parts.removed_duplicates,
        "removed_long": parts.removed_long,
        "extra_references": extra_refs,
        "dev_books": list(cfg.dev_books),
        "test_books": list(cfg.test_books),
    }
    return splits, extra


# --------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------


def _histogram(lengths: list[int], width: int = 10) -> dict[str, int]:
    counts = Counter((n - 1) // width if n > 0 else 0 for n in lengths)
    return {f"{k * width + 1}-{(k + 1) * width}": counts[k] for k in sorted(counts)}


def compute_stats(
    splits: dict[str, list[Example]], vocab: Vocab, cfg: DataConfig
) -> dict[str, Any]:
    """Pair counts, length histograms, vocabulary coverage and padding at the budget."""

    stats: dict[str, Any] = {
        "corpus": cfg.corpus,
        "src": cfg.src,
        "tgt": cfg.tgt,
        "pairs": {name: len(exs) for name, exs in splits.items()},
        "vocab_size": {"src": vocab.src_vocab_size, "tgt": vocab.tgt_vocab_size},
        "joint_vocab": vocab.joint,
        # What data.vocab_size asked of sentencepiece, which gives fewer pieces where the
        # training text cannot support that many (`vocab_note` says so).
        **({"vocab_asked": cfg.vocab_size} if isinstance(vocab.tgt, SentencePieceSide) else {}),
        "references": {
            name: 1 + max((len(ex.refs) for ex in exs), default=0) for name, exs in splits.items()
        },
    }
    for name, exs in splits.items():
        if not exs:
            continue
        src_ids = sum(len(ex.src_ids) for ex in exs)
        tgt_ids = sum(len(ex.tgt_ids) for ex in exs)
        src_words = sum(len(ex.src.split()) for ex in exs)
        tgt_words = sum(len(ex.tgt.split()) for ex in exs)
        unk = sum(ex.src_ids.count(UNK) + ex.tgt_ids.count(UNK) for ex in exs)
        stats[name] = {
            "words": {"src": src_words, "tgt": tgt_words},
            "subwords": {"src": src_ids, "tgt": tgt_ids},
            "subwords_per_word": {
                "src": round(src_ids / max(1, src_words), 3),
                "tgt": round(tgt_ids / max(1, tgt_words), 3),
            },
            # The share of subword tokens the vocabulary covers (not <unk>).
            "coverage": round(1.0 - unk / max(1, src_ids + tgt_ids), 5),
            "length_histogram_words": {
                "src": _histogram([len(ex.src.split()) for ex in exs]),
                "tgt": _histogram([len(ex.tgt.split()) for ex in exs]),
            },
        }
    stats["batch_tokens"] = cfg.batch_tokens
    stats["padding_fraction"] = round(padding_fraction(splits["train"], cfg.batch_tokens), 4)
    return stats
