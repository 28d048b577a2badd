"""`attnmt demo` and the usage examples of docs/attention.md."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from attnmt import attention
from attnmt.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "attention.md"
NAMES = attention.names()


def row_pattern(score: str, scope: str, mode: str) -> re.Pattern[str]:
    """A table row: the three names, p_t, then five weights with one `*`."""
    weights = r"(?:\s+\d\.\d{3}\*?){5}"
    return re.compile(rf"^{score}\s+{scope}\s+{mode}\s+(?:-|\d+\.\d\d){weights}$", re.M)


def test_demo_prints_every_combination(capsys):
    assert main(["demo"]) == 0
    output = capsys.readouterr().out
    for score, scope, mode in itertools.product(NAMES["score"], NAMES["scope"], NAMES["mode"]):
        assert len(row_pattern(score, scope, mode).findall(output)) == 1, (score, scope, mode)
    assert row_pattern("multihead", "H=2", "avg").search(output)
    rows = [line for line in output.splitlines() if re.search(r"\d\.\d{3}", line)]
    assert len(rows) == 43
    assert all(line.count("*") == 1 for line in rows)
    assert len({line.index("s=4") for line in output.splitlines() if "s=4" in line}) == 1
    # the content scores pick key 2, the one the query is closest to
    dot = row_pattern("dot", "global", "soft").search(output).group(0)
    assert dot.split()[6].endswith("*")


def test_demo_filters_and_window(capsys):
    assert main(["demo", "--score", "dot,cosine", "--scope", "local-m", "--window", "2"]) == 0
    output = capsys.readouterr().out
    rows = [line for line in output.splitlines() if re.search(r"\d\.\d{3}", line)]
    assert [line.split()[:3] for line in rows] == [
        ["dot", "local-m", "soft"],
        ["dot", "local-m", "hard"],
        ["cosine", "local-m", "soft"],
        ["cosine", "local-m", "hard"],
        ["multihead", "H=2", "avg"],
    ]
    assert "window D = 2" in output


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--score", "dott"], "--score 'dott' names no known score (dott); use one or more of"),
        (["--mode", ""], "--mode '' names no known mode (empty)"),
        (["--window", "0"], "--window must be at least 1, got 0"),
    ],
)
def test_demo_bad_options_are_user_errors(capsys, argv, needle):
    assert main(["demo", *argv]) == 2
    assert needle in capsys.readouterr().err


def test_docs_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 3
    namespace: dict = {"__name__": "__attention_doc__"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)


def test_docs_have_a_section_per_name():
    text = DOC.read_text(encoding="utf-8")
    for name in [*NAMES["score"], *NAMES["scope"], *NAMES["mode"]]:
        assert f"### `{name}`" in text, name
    assert "## MultiHeadAttention" in text and "True` means may attend" in text
