"""Every chapter of notebooks/ runs top to bottom at the `smoke` budget, in a fresh Jupyter
kernel, as a newcomer's would; and every committed notebook is its source, executed at
the `full` budget, with its pictures and without widget state.

The kernel is this interpreter's (ipykernel); the runs go to a temporary folder
(ATTNMT_NOTEBOOK_RUNS), shared by the chapters of one session only for the prepared data.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SOURCES = sorted((NOTEBOOKS / "src").glob("[0-9]*.py"))

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nbclient") is None, reason="pip install -e '.[dev]' (nbclient)"
)


def _builder():
    sys.path.insert(0, str(NOTEBOOKS))
    try:
        import build
    finally:
        sys.path.remove(str(NOTEBOOKS))
    return build


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("notebook-runs")


def test_there_are_seven_chapters():
    assert [s.stem[:2] for s in SOURCES] == ["01", "02", "03", "04", "05", "06", "07"]


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_chapter_runs_at_the_smoke_budget(source, runs, monkeypatch):
    build = _builder()
    monkeypatch.setenv("ATTNMT_NOTEBOOK_RUNS", str(runs))
    notebook = build.notebook_of(source)
    seconds = build.execute(notebook, "smoke", NOTEBOOKS)  # raises CellExecutionError
    errors = [
        output
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors
    last = notebook.cells[-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.get("output_type") == "stream")
    assert "at the 'smoke' budget on" in text  # chapter.done(): the machine and the time
    # ≤ 30 s a chapter on a quiet 2-core machine; the bound here leaves room for a loaded one
    assert seconds < 180, f"{source.stem} took {seconds:.0f} s at the smoke budget"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_committed_notebook_is_its_source_run_at_full(source):
    build = _builder()
    committed = NOTEBOOKS / f"{source.stem}.ipynb"
    if not committed.exists():
        pytest.skip(f"{committed.name} not built yet: python notebooks/build.py {source.stem[:2]}")
    notebook = json.loads(committed.read_text(encoding="utf-8"))
    want = [(c.cell_type, c.source) for c in build.notebook_of(source).cells]
    got = [(c["cell_type"], "".join(c["source"])) for c in notebook["cells"]]
    assert got == want, f"{committed.name} differs from its source: rebuild it"
    assert notebook["metadata"]["attnmt"]["budget"] == "full"
    assert "widgets" not in notebook["metadata"]
    assert committed.stat().st_size < build.MAX_BYTES
    outputs = [o for c in notebook["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    done = "".join("".join(o.get("text", "")) for o in notebook["cells"][-1]["outputs"])
    assert "at the 'full' budget on" in done
    for output in outputs:  # each interactive view has its picture for static viewers
        data = output.get("data", {})
        if "attnmt-view" in "".join(data.get("text/html", "")):
            assert "image/png" in data or "attnmt-static" in "".join(data["text/html"])


def test_cells_of_reads_the_percent_format():
    build = _builder()
    cells = build.cells_of("# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\nx\n")
    assert [(c.cell_type, c.source) for c in cells] == [
        ("markdown", "# Title\n\ntext"),
        ("code", "x = 1\nx"),
    ]
