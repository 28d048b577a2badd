"""Every command in the README and docs/ runs.

Conventions in the markdown files:
- ```console blocks: each line starting with `$ ` is a shell command, run from the repo
  root with the virtual environment's bin/ first on PATH; it must exit 0.
- ```python blocks: run in order, one namespace per file.
- A line `<!-- doc-test: skip REASON -->` right before a block skips it (REASON required:
  e.g. the command is the test suite itself). `<!-- doc-test: instead COMMAND -->` runs
  COMMAND in place of each of the block's commands (a shorter variant of a long job).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- doc-test: (\w+) ?(.*?) -->\n)?```(\w+)\n(.*?)```", re.S)


def _blocks(path: Path, language: str):
    for directive, argument, lang, body in BLOCK.findall(path.read_text(encoding="utf-8")):
        if lang != language:
            continue
        if directive == "skip":
            assert argument.strip(), f"{path.name}: a doc-test skip needs a reason"
            continue
        yield directive, argument, body


def _console_cases():
    for path in DOCS:
        for directive, argument, body in _blocks(path, "console"):
            for line in body.splitlines():
                if line.startswith("$ "):
                    command = argument if directive == "instead" else line[2:]
                    yield pytest.param(command, id=f"{path.name}: {line[2:60]}")


@pytest.mark.parametrize("command", list(_console_cases()))
def test_console_command_runs(command):
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MPLBACKEND", "Agg")
    result = subprocess.run(
        command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, f"`{command}` failed:\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize("path", [p for p in DOCS if list(_blocks(p, "python"))], ids=str)
def test_python_blocks_run(path, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "__doc_test__"}
    for _, _, body in _blocks(path, "python"):
        exec(compile(body, str(path), "exec"), namespace)
