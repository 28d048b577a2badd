"""Build the chapters: notebooks/src/NN-name.py (cells marked `# %%` and `# %% [markdown]`)
become notebooks/NN-name.ipynb, executed top to bottom.

    python notebooks/build.py                    # every chapter at the full budget
    python notebooks/build.py 02 --budget smoke  # one chapter (a name prefix), fast

`make notebooks` runs the first. The sources are what is edited and reviewed; the .ipynb
files are what readers open, with the outputs of the full budget (the interactive views,
a PNG beside each for static viewers, and each chapter's machine and time in its last
cell). Widget state is never stored; outputs are checked to stay under 2 MB a chapter.
tests/test_notebooks.py executes every source at the smoke budget and checks that each
committed notebook holds exactly its source's cells.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
MAX_BYTES = 2 * 1024 * 1024
CELL_TIMEOUT = {"smoke": 120, "full": 1200}  # seconds per cell
MARK = re.compile(r"^# %%(?: \[(markdown)\])?[ \t]*$")


def cells_of(text: str) -> list[nbformat.NotebookNode]:
    """The cells of a percent-format source: code cells, and markdown cells whose lines
    are comments ('# ' stripped)."""
    cells = []
    kind, lines = None, []

    def flush() -> None:
        body = "\n".join(lines).strip("\n")
        if kind is None or not body:
            return
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", line) for line in body.splitlines())
            cells.append(nbformat.v4.new_markdown_cell(body))
        else:
            cells.append(nbformat.v4.new_code_cell(body))

    for line in text.splitlines():
        match = MARK.match(line)
        if match:
            flush()
            kind, lines = match.group(1) or "code", []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def notebook_of(source: Path) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook(cells=cells_of(source.read_text(encoding="utf-8")))
    notebook.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    return notebook


def execute(notebook: nbformat.NotebookNode, budget: str, cwd: Path) -> float:
    """Run every cell in a fresh kernel with ATTNMT_BUDGET=budget; returns the seconds."""
    from nbclient import NotebookClient

    os.environ["ATTNMT_BUDGET"] = budget
    os.environ["ATTNMT_PROGRESS"] = "0"  # log lines in the saved outputs, not bar redraws
    os.environ.setdefault("PYTHONWARNINGS", "ignore::DeprecationWarning")
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT[budget],
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
        store_widget_state=False,
    )
    started = time.perf_counter()
    client.execute()
    return time.perf_counter() - started


def clean(notebook: nbformat.NotebookNode) -> None:
    """No widget state, no execution timestamps: what a reader needs, nothing else."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        for output in cell.get("outputs", []):
            output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="chapter name prefixes (default: all)")
    parser.add_argument("--budget", choices=("smoke", "full"), default="full")
    parser.add_argument("--no-execute", action="store_true", help="write the cells only")
    args = parser.parse_args()
    sources = sorted(SOURCES.glob("[0-9]*.py"))
    if args.only:
        sources = [s for s in sources if any(s.stem.startswith(p) for p in args.only)]
    if not sources:
        print("no chapter matches", file=sys.stderr)
        return 2
    for source in sources:
        notebook = notebook_of(source)
        if not args.no_execute:
            seconds = execute(notebook, args.budget, HERE)
            notebook.metadata["attnmt"] = {"budget": args.budget, "seconds": round(seconds)}
            print(f"{source.stem}: {seconds / 60:.1f} min at {args.budget}", flush=True)
        clean(notebook)
        out = HERE / f"{source.stem}.ipynb"
        text = nbformat.writes(notebook)
        if len(text.encode()) > MAX_BYTES:
            print(f"{out.name}: {len(text) / 1e6:.1f} MB, over the 2 MB a chapter", file=sys.stderr)
            return 1
        out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
