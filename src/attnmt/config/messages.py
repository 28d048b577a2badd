"""How a value from a config file or an override appears in a `ConfigError`: its repr, on
one line (control characters and line separators escaped) and cut short, so that a string
of a megabyte, an integer of ten thousand digits or a list of a billion YAML aliases gives
a sentence, not a dump."""

from __future__ import annotations

import reprlib
from typing import Any


class _Shown(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 2
        self.maxstring = self.maxother = 80
        self.maxlong = 40
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdict = 4

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 1000:  # repr() refuses integers of more than 4,300 digits
            return f"an integer of {x.bit_length():,} bits"
        return super().repr_int(x, level)


_SHOWN = _Shown()


def shown(value: Any) -> str:
    """`value` as a message shows it: `'en-web'`, `[1, 2, 3, 4, ...]`, `'a\\nb'`."""
    return _SHOWN.repr(value)
