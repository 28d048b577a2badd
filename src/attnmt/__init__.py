"""attnmt: attention in sequence models, from Bahdanau (2014) to the Transformer."""

import os

# oneDNN (PyTorch's CPU kernels for bf16 on AMX) compiles one primitive per matrix shape
# and keeps 1,024 of them by default. Batches of varying length ask for thousands of
# shapes, so under bf16 the cache thrashes and every training step recompiles kernels:
# measured on the 2-core machine, RNNsearch's step time grew 25% over its first 300 steps
# with the default and stayed flat with a larger cache (docs/training.md). Set before torch
# creates its first primitive; a value the user exported wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "65536")

__version__ = "0.1.0"


# The Python API (attnmt.api), imported on first use: `import attnmt` stays light (no torch)
# for the commands and the runtime that do without it.
_API = ("load", "train", "evaluate", "compare", "show", "Model")


def __getattr__(name: str):
    if name in _API:
        from attnmt import api

        return getattr(api, name)
    raise AttributeError(f"module 'attnmt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
