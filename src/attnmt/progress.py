"""Progress bars that work in a terminal and in a notebook.

`progress_bar(**tqdm_options)` is tqdm's bar on standard error where a person watches it:
a terminal (as before), or a Jupyter kernel (JupyterLab, VS Code, Colab), where it is the
notebook widget when ipywidgets is installed and tqdm's text bar otherwise (never tqdm's
"IProgress not found" warning). Elsewhere (a log file, CI) it is disabled and the callers
print log lines instead. No widget state is written into a notebook by this module: the
committed notebooks are executed without ipywidgets (`make notebooks`).
"""

from __future__ import annotations

import importlib.util
import os
import sys

from tqdm import tqdm


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel attached)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except AttributeError:
        return False
    return shell is not None and hasattr(shell, "kernel")


def watched() -> bool:
    """Whether a person is likely watching standard error: a terminal or a notebook.
    ATTNMT_PROGRESS=0 says nobody is (`make notebooks` executes the chapters so: their
    outputs keep the log lines, not a bar's hundreds of redraws)."""
    if os.environ.get("ATTNMT_PROGRESS") == "0":
        return False
    return sys.stderr.isatty() or in_notebook()


def progress_bar(*, enabled: bool = True, **options) -> tqdm:
    """A tqdm bar on standard error, shown where `watched()`; `options` go to tqdm."""
    options.setdefault("file", sys.stderr)
    show = enabled and watched()
    if show and in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm as notebook_tqdm

        options.pop("file", None)
        options.pop("dynamic_ncols", None)
        return notebook_tqdm(**options)
    if show and not sys.stderr.isatty():  # a notebook's text bar: no terminal to size
        options.pop("dynamic_ncols", None)
        options.setdefault("ncols", 90)
        options.setdefault("mininterval", 1.0)
    return tqdm(disable=not show, **options)
