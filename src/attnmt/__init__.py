"""attnmt: attention in sequence models, from Bahdanau (2014) to the Transformer."""

import os
from typing import TYPE_CHECKING

from attnmt.lazy import lazy_names

# oneDNN (PyTorch's CPU kernels for bf16 on AMX) compiles one primitive per matrix shape
# and keeps 1,024 of them by default. Batches of varying length ask for thousands of
# shapes, so under bf16 the cache thrashes and every training step recompiles kernels:
# measured on the 2-core machine, RNNsearch's step time grew 25% over its first 300 steps
# with the default and stayed flat with a larger cache (docs/training.md). Set before torch
# creates its first primitive; a value the user exported wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "65536")

__version__ = "0.1.0"


# The Python API, loaded on first use (each name from attnmt.api): `import attnmt` stays
# light (no torch) for the commands and the runtime that do without it.
_EXPORTS = {
    name: "api"
    for name in ("Model", "TrainedRun", "align", "compare", "evaluate", "load", "show", "train")
}

# What type checkers and editors see: the names of _EXPORTS, from the same modules
# (tests/test_layout.py checks both lists agree). Re-exports, which ruff cannot tell
# from a `__all__` it does not see written out:
# ruff: noqa: F401
if TYPE_CHECKING:
    from attnmt.api import Model, TrainedRun, align, compare, evaluate, load, show, train

__getattr__, __dir__, __all__ = lazy_names(__name__, _EXPORTS)
