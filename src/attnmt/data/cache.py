"""The cache folder of a prepared corpus: its name, its files, written whole or not at all.

    directory = Path(cfg.cache_dir) / cache_key(cfg)      # named by the data options
    save_folder(tmp, splits, vocab, stats)                # into a temporary folder...
    data = load_folder(directory)                         # ...renamed, then mapped

A folder holds each split's token store (`attnmt.data.store`), its cleaned text, `vocab/`,
`stats.json` and `store.json` (the format, the id type, each split's size). `prepare`
(`attnmt.data.preparation`) writes it in a temporary folder `.KEY.tmp-PID-*` beside it and
renames it into place when complete; `remove_abandoned` deletes the temporary folders of
processes that died, `say_old_caches` names the caches of the JSON layout before the store.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from attnmt.config import IMAGE_CORPORA, DataConfig, to_dict
from attnmt.data.files import with_suffix
from attnmt.data.store import StoreWriter, TokenStore, id_dtype
from attnmt.data.subwords import Vocab, load_vocab
from attnmt.data.types import Example
from attnmt.errors import DataError

FORMAT = 3  # bump when the cached layout or the cleaning changes (2: one examples.json)
SYNTHETIC = ("reverse", "copy", "sort")
IMAGES = IMAGE_CORPORA  # "digits", "cluttered": attnmt.data.images
CORPORA = ("bible", "files", "tsv", "alignments", "grammar", *SYNTHETIC, *IMAGES)


@dataclass
class PreparedData:
    """A prepared cache folder. `train` maps the token store when first used (`evaluate`,
    `translate`, `plot` and `serve` never touch it); `dev` and `test` are read whole."""

    vocab: Vocab
    stats: dict[str, Any]
    directory: Path
    dtype: str

    @cached_property
    def train(self) -> TokenStore:
        return TokenStore(self.directory, "train", dtype=self.dtype)

    @cached_property
    def dev(self) -> list[Example]:
        return list(TokenStore(self.directory, "dev", dtype=self.dtype))

    @cached_property
    def test(self) -> list[Example]:
        return list(TokenStore(self.directory, "test", dtype=self.dtype))

    def split(self, name: str) -> TokenStore | list[Example]:
        """A split by name: the train store (a lazy sequence of Examples) or a list."""
        if name not in ("train", "dev", "test"):
            raise DataError(f"unknown split '{name}'; valid splits: train, dev, test")
        return getattr(self, name)


def cache_key(cfg: DataConfig) -> str:
    """The cache folder's name: a hash of the data options (and of your files' identity)."""
    ignored = ("cache_dir", "batch_tokens", "workers")  # where, and how fast: not what
    options = {k: v for k, v in to_dict(cfg).items() if k not in ignored}
    if not options.get("swap"):  # the default leaves the caches made before it existed valid
        options.pop("swap", None)
    if cfg.corpus != "grammar":  # likewise: the grammar lab's keys, for other corpora
        for key in [k for k in options if k.startswith("grammar_")]:
            options.pop(key)
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
    if cfg.corpus == "grammar":
        name = f"grammar-{cfg.grammar_pair}"
    return f"{name}-{digest}".replace("/", "_")


def _file_identity(path: str, cfg: DataConfig) -> list:
    names = (
        [path] if cfg.corpus == "tsv" else [with_suffix(path, cfg.src), with_suffix(path, cfg.tgt)]
    )
    identity = []
    for name in names:
        resolved = Path(name).resolve()
        try:
            stat = resolved.stat()
            identity.append([str(resolved), stat.st_size, stat.st_mtime_ns])
        except OSError:
            identity.append([str(resolved), None, None])  # reading it will say what is wrong
    return identity


def remove_abandoned(root: Path, key: str) -> None:
    """Delete temporary folders of this key left by preparations that died (their process
    is gone); a live one (another process preparing the same data) is left alone."""
    for folder in root.glob(f".{key}.tmp-*"):
        try:
            pid = int(folder.name.split(".tmp-")[1].split("-")[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (ValueError, IndexError, PermissionError, OSError):
            continue


def say_old_caches(root: Path, key: str, directory: Path) -> None:
    """One sentence when a cache of the same corpus is in the old JSON layout."""
    name = key.rsplit("-", 1)[0]
    for old in sorted(root.glob(f"{name}-*/examples.json")):
        size = sum(f.stat().st_size for f in old.parent.iterdir() if f.is_file())
        print(
            f"{old.parent} is a data cache in the old JSON layout; this corpus is prepared "
            f"once more as a token store in {directory} (delete the old folder to free "
            f"{size / 1e6:,.1f} MB)",
            file=sys.stderr,
        )


def save_folder(
    directory: Path,
    splits: dict[str, list[Example]],
    vocab: Vocab,
    stats: dict[str, Any],
    *,
    skip: tuple[str, ...] = (),
    train_store: dict | None = None,
) -> None:
    """Write the vocabulary, each split's text and token store (those not in `skip`, which
    the caller wrote), and `store.json`."""
    vocab.save(directory / "vocab")
    dtype = id_dtype(max(vocab.src_vocab_size, vocab.tgt_vocab_size))
    meta: dict[str, Any] = {"format": FORMAT, "dtype": dtype.name, "splits": {}}
    if train_store is not None:
        meta["splits"]["train"] = train_store
    for name, exs in splits.items():
        if name in skip:
            continue
        write_text(directory / f"{name}.src", [ex.src for ex in exs])
        write_text(directory / f"{name}.tgt", [ex.tgt for ex in exs])
        write_text(directory / f"{name}.id", [ex.id for ex in exs])
        width = max((len(ex.refs) for ex in exs), default=0)
        for k in range(width):
            lines = [ex.refs[k] if k < len(ex.refs) else "" for ex in exs]
            write_text(directory / f"{name}.ref{k + 2}", lines)
        writer = StoreWriter(directory, name, dtype=dtype)
        writer.add_lists([ex.src_ids for ex in exs], [ex.tgt_ids for ex in exs])
        meta["splits"][name] = writer.close()
    stats["store"] = meta
    write_text(directory / "store.json", [json.dumps(meta, indent=2)])


def write_text(path: Path, lines: list[str]) -> None:
    """Write atomically; a unique temporary name, so two preparations never collide."""
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))
    os.replace(tmp, path)


def load_folder(directory: Path) -> PreparedData:
    try:
        meta = json.loads((directory / "store.json").read_text(encoding="utf-8"))
        stats = json.loads((directory / "stats.json").read_text(encoding="utf-8"))
        dtype = str(meta["dtype"])
        if meta.get("format") != FORMAT:
            raise ValueError(f"format {meta.get('format')}, expected {FORMAT}")
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DataError(
            f"the prepared data in '{directory}' is damaged ({err}); delete that folder "
            "and run again"
        ) from None
    vocab = load_vocab(directory / "vocab")
    stats["cached"] = True
    return PreparedData(vocab, stats, directory, dtype)
