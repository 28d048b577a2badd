"""What every export directory shares (CTranslate2's and ONNX's): where it came from and
how its vocabulary is described in `attnmt.json`, and writing the directory whole or not
at all."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attnmt import __version__
from attnmt.data.synthetic import SymbolVocab
from attnmt.data.vocab import BOS, EOS, PAD, UNK
from attnmt.errors import UserError


def provenance(loaded: Any, export_format: str) -> dict:
    """The first keys of an export's `attnmt.json`: its format and the run it came from."""
    return {
        "format": export_format,
        "attnmt_version": __version__,
        "run": loaded.run_dir.name,
        "run_dir": str(loaded.run_dir),
        "checkpoint": loaded.checkpoint.name,
        "step": loaded.step,
        "model": loaded.cfg.model.name,
    }


@contextmanager
def building(out: str | Path, *, force: bool) -> Iterator[Path]:
    """A temporary folder beside `out` to build the export in, renamed to `out` when the
    block ends without an error (removed otherwise: a failure leaves nothing). `out` must
    be a new or empty directory, or any directory with `force`: checked first.

    Raises:
        UserError: `out` is a file, or a non-empty directory without `force`.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"'{out}' is a file; --out names a directory to create")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(f"'{out}' already exists and is not empty; use --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        yield tmp
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def vocab_info(loaded: Any) -> dict:
    """How to tokenise for the exported model: the vocabulary files beside it, and ours
    special ids (kept by every export)."""
    vocab = loaded.vocab
    if isinstance(vocab.src, SymbolVocab):
        kind, files = "symbols", ["vocab/symbols.json"]
    else:
        kind = "sentencepiece"
        names = ["joint"] if vocab.joint else ["src", "tgt"]
        files = [f"vocab/{name}.model" for name in names]
    return {
        "kind": kind,  # sentencepiece: pieces; symbols: whitespace-separated tokens
        "joint": vocab.joint,
        "files": files,
        "special_ids": {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS},
    }


def replace_dir(new: Path, out: Path) -> None:
    """Rename `new` to `out`; an old `out` is moved aside first and removed after. `new`
    (a `mkdtemp` folder, private) gets the permissions a new folder gets."""
    umask = os.umask(0)
    os.umask(umask)
    new.chmod(0o777 & ~umask)
    if not out.exists():
        os.replace(new, out)
        return
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
    os.replace(out, old / out.name)
    os.replace(new, out)
    shutil.rmtree(old, ignore_errors=True)
