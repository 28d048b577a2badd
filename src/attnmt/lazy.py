"""Names a package re-exports, each loaded from its module on first use (PEP 562), so that
importing the package loads nothing heavy: `attnmt.data` (no torch for preparing data),
`attnmt.explain` (its methods load torch).

    __getattr__, __dir__ = lazy_names(__name__, {"load_vocab": "subwords", ...})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose name N is `package.exports[N]`'s."""
    namespace = sys.modules[package].__dict__

    def load(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        namespace[name] = value  # once loaded, an ordinary attribute
        return value

    def names() -> list[str]:
        return sorted([*namespace, *exports])

    return load, names
