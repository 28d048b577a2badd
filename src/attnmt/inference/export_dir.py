"""What every export directory shares (CTranslate2's and ONNX's): how its vocabulary is
described in `attnmt.json`, and writing the directory whole or not at all."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from attnmt.data.synthetic import SymbolVocab
from attnmt.data.vocab import BOS, EOS, PAD, UNK


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
