"""Names a package re-exports, each loaded from its module on first use (PEP 562), so that
importing the package loads nothing heavy: `attnmt` (the Python API, `attnmt.api`),
`attnmt.data` (no torch for preparing data), `attnmt.explain` (its methods load torch).

The package keeps one list, `_EXPORTS` (name -> the module under the package that defines
it, dotted for a deeper one: "api", "data.vocab"); the rest derives from it:

    _EXPORTS = {"load_vocab": "subwords", ...}
    __getattr__, __dir__, __all__ = lazy_names(__name__, _EXPORTS)

    if TYPE_CHECKING:  # what type checkers and editors see: the same names
        from attnmt.data.subwords import load_vocab

tests/test_layout.py checks that the `TYPE_CHECKING` imports are exactly `_EXPORTS`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`package`'s `__getattr__`, `__dir__` and `__all__`: its name N is that of the module
    `package.exports[N]`, imported when N is first asked for."""
    namespace = sys.modules[package].__dict__

    def load(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        namespace[name] = value  # once loaded, an ordinary attribute
        return value

    def names() -> list[str]:
        return sorted({*namespace, *exports})

    return load, names, sorted(exports)
