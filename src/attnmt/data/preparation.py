"""From a `DataConfig` to encoded splits, a vocabulary and statistics, cached on disk.

    data = prepare(cfg.data)
    data.train, data.dev, data.test      # lists of Example (ids filled in)
    data.vocab                           # attnmt.data.subwords.Vocab
    data.stats                           # what `attnmt data prepare` prints and writes
    data.directory                       # the cache folder holding all of it

The cache folder is named by a hash of the data options (all but `cache_dir` and
`batch_tokens`), so a second run with the same options only reads JSON. It holds:

    examples.json   the splits, text and ids       vocab/        the subword model(s)
    stats.json      counts, histograms, coverage   {split}.{src,tgt,refN}  plain text
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from attnmt.config import IMAGE_CORPORA, DataConfig, to_dict
from attnmt.data import alignments, bible, images
from attnmt.data.batching import padding_fraction
from attnmt.data.files import load_split
from attnmt.data.subwords import Vocab, load_vocab, train_vocab
from attnmt.data.synthetic import SymbolVocab, make_task
from attnmt.data.types import Example
from attnmt.data.vocab import UNK
from attnmt.errors import DataError

FORMAT = 2  # bump when the cached layout or the cleaning changes
SYNTHETIC = ("reverse", "copy", "sort")
IMAGES = IMAGE_CORPORA  # "digits", "cluttered": attnmt.data.images
CORPORA = ("bible", "files", "tsv", "alignments", *SYNTHETIC, *IMAGES)


@dataclass
class PreparedData:
    train: list[Example]
    dev: list[Example]
    test: list[Example]
    vocab: Vocab
    stats: dict[str, Any]
    directory: Path

    def split(self, name: str) -> list[Example]:
        if name not in ("train", "dev", "test"):
            raise DataError(f"unknown split '{name}'; valid splits: train, dev, test")
        return getattr(self, name)


def cache_key(cfg: DataConfig) -> str:
    """The cache folder's name: a hash of the data options (and of your files' identity)."""
    options = {k: v for k, v in to_dict(cfg).items() if k not in ("cache_dir", "batch_tokens")}
    if not options.get("swap"):  # the default leaves the caches made before it existed valid
        options.pop("swap", None)
    options["format"] = FORMAT
    if cfg.corpus in ("files", "tsv"):
        # Edited or replaced files must not hit the old cache: key on where they are,
        # their size and modification time.
        options["files"] = [
            _file_identity(p, cfg) for p in (cfg.train_path, cfg.dev_path, cfg.test_path) if p
        ]
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:12]
    own = cfg.corpus in SYNTHETIC or cfg.corpus in IMAGES  # no versions or languages
    name = cfg.corpus if own else f"{cfg.corpus}-{cfg.src}-{cfg.tgt}"
    return f"{name}-{digest}".replace("/", "_")


def _file_identity(path: str, cfg: DataConfig) -> list:
    names = [path] if cfg.corpus == "tsv" else [f"{path}.{cfg.src}", f"{path}.{cfg.tgt}"]
    identity = []
    for name in names:
        resolved = Path(name).resolve()
        try:
            stat = resolved.stat()
            identity.append([str(resolved), stat.st_size, stat.st_mtime_ns])
        except OSError:
            identity.append([str(resolved), None, None])  # reading it will say what is wrong
    return identity


def prepare(cfg: DataConfig, *, progress: bool = False) -> PreparedData:
    """Read, clean, split, subword and encode the corpus of `cfg` (or load it from cache)."""
    if cfg.corpus not in CORPORA:
        raise DataError(f"unknown data.corpus '{cfg.corpus}'; valid corpora: {', '.join(CORPORA)}")
    directory = Path(cfg.cache_dir) / cache_key(cfg)
    if (directory / "examples.json").is_file() and (directory / "stats.json").is_file():
        return _load(directory, cfg)
    started = time.perf_counter()
    splits, extra = _read_splits(cfg)
    if not splits["train"]:
        raise DataError(f"the training split of data.corpus '{cfg.corpus}' is empty")
    vocab_started = time.perf_counter()
    if cfg.corpus in SYNTHETIC:
        side = SymbolVocab()
        vocab = Vocab(side, side, True)
    elif cfg.corpus in IMAGES:
        vocab = Vocab(images.CanvasVocab(*images.CANVAS[cfg.corpus]), images.digit_vocab(), False)
    else:
        vocab = train_vocab(
            [ex.src for ex in splits["train"]],
            [ex.tgt for ex in splits["train"]],
            kind=cfg.subword_type,
            size=cfg.vocab_size,
            joint=cfg.joint_vocab,
            cache_dir=Path(cfg.cache_dir) / "subwords",
        )
    vocab_seconds = time.perf_counter() - vocab_started
    for examples in splits.values():
        for ex in examples:
            ex.src_ids = vocab.src.encode(ex.src)
            ex.tgt_ids = vocab.tgt.encode(ex.tgt)
    stats = compute_stats(splits, vocab, cfg)
    stats.update(extra)
    stats["seconds"] = {
        "total": round(time.perf_counter() - started, 2),
        "subwords": round(vocab_seconds, 2),
    }
    _save(directory, splits, vocab, stats, cfg)
    return PreparedData(splits["train"], splits["dev"], splits["test"], vocab, stats, directory)


def _read_splits(cfg: DataConfig) -> tuple[dict[str, list[Example]], dict[str, Any]]:
    if cfg.corpus == "bible":
        return _bible(cfg)
    if cfg.corpus in ("files", "tsv"):
        splits = {}
        for name in ("train", "dev", "test"):
            path = getattr(cfg, f"{name}_path")
            if not path:
                if name == "train":
                    raise DataError(f"data.corpus is '{cfg.corpus}' but data.train_path is empty")
                splits[name] = []
                continue
            splits[name] = load_split(path, cfg.src, cfg.tgt, cfg.corpus)
        long = [ex for ex in splits["train"] if _too_long(ex, cfg.max_words)]
        splits["train"] = [ex for ex in splits["train"] if not _too_long(ex, cfg.max_words)]
        return splits, {"removed_long": len(long)}
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
    bible.version(cfg.src)
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


# --------------------------------------------------------------------------------------
# The cache folder
# --------------------------------------------------------------------------------------


def _save(directory: Path, splits, vocab: Vocab, stats, cfg: DataConfig) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    vocab.save(directory / "vocab")
    for name, exs in splits.items():
        _write_text(directory / f"{name}.src", [ex.src for ex in exs])
        _write_text(directory / f"{name}.tgt", [ex.tgt for ex in exs])
        width = max((len(ex.refs) for ex in exs), default=0)
        for k in range(width):
            lines = [ex.refs[k] if k < len(ex.refs) else "" for ex in exs]
            _write_text(directory / f"{name}.ref{k + 2}", lines)
    payload = {name: [asdict(ex) for ex in exs] for name, exs in splits.items()}
    _write_text(directory / "examples.json", [json.dumps(payload, ensure_ascii=False)])
    # stats.json last: its presence marks a complete cache folder.
    _write_text(directory / "stats.json", [json.dumps(stats, ensure_ascii=False, indent=2)])


def _write_text(path: Path, lines: list[str]) -> None:
    """Write atomically; a unique temporary name, so two preparations never collide."""
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))
    os.replace(tmp, path)


def _load(directory: Path, cfg: DataConfig) -> PreparedData:
    try:
        payload = json.loads((directory / "examples.json").read_text(encoding="utf-8"))
        stats = json.loads((directory / "stats.json").read_text(encoding="utf-8"))
        splits = {n: [Example(**ex) for ex in payload[n]] for n in ("train", "dev", "test")}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DataError(
            f"the prepared data in '{directory}' is damaged ({err}); delete that folder "
            "and run again"
        ) from None
    vocab = load_vocab(directory / "vocab")
    if stats.get("batch_tokens") != cfg.batch_tokens:
        stats["batch_tokens"] = cfg.batch_tokens
        stats["padding_fraction"] = round(padding_fraction(splits["train"], cfg.batch_tokens), 4)
    stats["cached"] = True
    return PreparedData(splits["train"], splits["dev"], splits["test"], vocab, stats, directory)
