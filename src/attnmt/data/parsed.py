"""Installed data read once per machine: what a slow parser makes of files that do not change,
kept as JSON in the user's cache folder and read back in a fraction of the time.

    value = cached_json("gold-words", [file_a, file_b], build)  # build() -> JSON-able

The key is the files' paths, sizes and modification times together with the parser's own
source file (pass it among `files`): a reinstalled package or an edited parser is read
afresh. The folder is $ATTNMT_CACHE, else attnmt/ under $XDG_CACHE_HOME or ~/.cache.
A cache that cannot be read is built again; one that cannot be written is skipped: the
cache only ever saves time, it never decides a result.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CACHE_ENV = "ATTNMT_CACHE"


def cache_root() -> Path:
    """attnmt's cache folder: $ATTNMT_CACHE, else attnmt/ under $XDG_CACHE_HOME or ~/.cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnmt"


def _key(kind: str, files: Sequence[Path]) -> str:
    stamps = []
    for file in files:
        stat = file.stat()
        stamps.append([str(file.resolve()), stat.st_size, stat.st_mtime_ns])
    return hashlib.sha256(json.dumps([kind, stamps]).encode()).hexdigest()[:20]


def cached_json(kind: str, files: Sequence[Path], build: Callable[[], Any]) -> Any:
    """`build()`'s JSON value, from the cache when `files` are as they were when it was made."""
    target = cache_root() / "parsed" / f"{kind}-{_key(kind, files)}.json"
    try:
        return json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass  # not made yet, or unreadable: made again below
    value = build()
    temporary = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, suffix=".part")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(value, out, ensure_ascii=False, separators=(",", ":"))
        os.replace(temporary, target)  # whole or not at all, whoever reads it meanwhile
    except OSError:  # a read-only home, a full disk: read afresh next time
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
    return value
