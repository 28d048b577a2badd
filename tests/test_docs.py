"""Every command in the README and docs/ runs: as written, in a short form, or skipped.

Conventions in the markdown files:
- ```console blocks: each line starting with `$ ` is a shell command, run from the repo
  root with the virtual environment's bin/ first on PATH; it must exit 0. A plain
  `attnmt ...` command (or a chain of them joined by `&&`) runs through `attnmt.cli.main`
  in the test's process, as the console script runs it (`in_process`): no Python start
  and torch import per command.
- ```python blocks: run in order, one namespace per file.
- A line `<!-- doc-test: DIRECTIVE ... -->` right before a block changes how it runs:
  - `skip REASON` skips it (REASON required: e.g. the command is the test suite itself);
  - `instead COMMAND` runs COMMAND once in place of the block's commands (a shorter
    variant of a long job);
  - `scratch` runs the block's commands, as written, in a scratch directory that holds
    `runs/reverse` (configs/reverse.yaml trained for 5 steps), `input.txt` (three lines
    to translate) and links to the repo's `configs/` and `data-cache/`; `scratch COMMAND`
    runs COMMAND there once instead. One scratch directory serves the whole session, in
    the order of the files and blocks, so a command may use what an earlier one wrote
    there (`attnmt plot --from` a plot). Nothing is written outside it but data-cache/.

A command that needs an install the Makefile allows to fail (eflomal, which builds from
source with a C compiler) is skipped with that reason where the install is missing, as
`make setup` itself goes on without it (`OPTIONAL`); so is a static site's (`--format
web`) where onnxruntime-web is neither cached nor to be fetched from the npm registry.
"""

from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A directive and its argument are on one line; an argument may be empty (`scratch`).
BLOCK = re.compile(r"(?:<!-- doc-test: (\w+)(?: ([^\n]*?))? -->\n)?```(\w+)\n(.*?)```", re.S)
DIRECTIVES = ("", "skip", "instead", "scratch")
# module -> what marks a command that needs it: `attnmt align` (and `attnmt.align(` from
# Python), and the guided training that reads the links an earlier `attnmt align` wrote
# into the scratch directory.
OPTIONAL = {"eflomal": ("attnmt align", "attnmt.align(", "guided_alignment=aligned/")}
# The run the scratch blocks work on: the reverse task, 5 steps (seconds, not minutes).
SCRATCH_RUN = (
    "attnmt train configs/reverse.yaml --quiet --set train.max_steps=5 "
    "--set train.validate_every=5 --set train.valid_sentences=5 "
    "--set train.run_dir=runs/reverse --set data.synthetic_train_size=500"
)


def _blocks(path: Path, language: str):
    for directive, argument, lang, body in BLOCK.findall(path.read_text(encoding="utf-8")):
        if lang != language:
            continue
        assert directive in DIRECTIVES, f"{path.name}: unknown doc-test directive '{directive}'"
        if directive == "skip":
            assert argument.strip(), f"{path.name}: a doc-test skip needs a reason"
            continue
        yield directive, argument, body


def _console_cases():
    for path in DOCS:
        for directive, argument, body in _blocks(path, "console"):
            lines = [line[2:] for line in body.splitlines() if line.startswith("$ ")]
            where = "scratch" if directive == "scratch" else "root"
            if directive == "instead" or (directive == "scratch" and argument.strip()):
                assert argument.strip(), f"{path.name}: a doc-test instead needs a command"
                yield pytest.param(argument, where, id=f"{path.name}: {lines[0][:58]} (short)")
                continue
            for line in lines:
                yield pytest.param(line, where, id=f"{path.name}: {line[:60]}")


def _run(command: str, cwd: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MPLBACKEND", "Agg")
    result = subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, f"`{command}` failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="session")
def scratch(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("doc-scratch")
    (folder / "input.txt").write_text("12 5 40\n\n7 8 9\n", encoding="utf-8")
    (ROOT / "data-cache").mkdir(exist_ok=True)  # the default data.cache_dir, git-ignored
    for name in ("configs", "data-cache"):
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    _run(SCRATCH_RUN, folder)
    return folder


def missing_install(command: str) -> str | None:
    """Why `command` cannot run here (an optional install is missing), or None."""
    for module, marks in OPTIONAL.items():
        if any(mark in command for mark in marks) and importlib.util.find_spec(module) is None:
            return (
                f"{module} is not installed: the Makefile's build of it needs a C compiler "
                "(`attnmt align` says how to install it)"
            )
    return None


def test_commands_that_need_eflomal_skip_without_it(monkeypatch):
    commands = [param.values[0] for param in _console_cases()]
    needing = [c for c in commands if any(mark in c for mark in OPTIONAL["eflomal"])]
    assert len(needing) >= 3  # docs/alignment.md's blocks, README's
    monkeypatch.setitem(sys.modules, "eflomal", None)  # as if the install had failed
    assert all(missing_install(c) for c in needing)
    assert not any(missing_install(c) for c in commands if c not in needing)


def missing_runtime(command: str) -> str | None:
    """Why a static site (`--format web`) cannot be built here: onnxruntime-web is neither
    in the cache nor to be had from the npm registry (as tests/test_web_site.py skips)."""
    if "--format web" not in command:
        return None
    from attnmt.errors import UserError
    from attnmt.export.web import runtime_tarball

    try:
        runtime_tarball()
    except UserError as err:
        return f"onnxruntime-web cannot be had here: {err}"
    return None


# What only a shell can run: pipes, redirections, quoting, variables, other separators.
SHELL_SYNTAX = re.compile(r"[|<>;$`'\"\\(){}*?~#]|&(?!&)")


def in_process(command: str) -> list[list[str]] | None:
    """The argument lists of a command that is one `attnmt ...` call, or a chain of them
    joined by `&&`, with nothing a shell would interpret; None for anything else."""
    if SHELL_SYNTAX.search(command.replace("&&", " ")):
        return None
    calls = [part.split() for part in command.split("&&")]
    if not all(call and call[0] == "attnmt" for call in calls):
        return None
    return [call[1:] for call in calls]


def _run_in_process(calls: list[list[str]], cwd: Path, monkeypatch, capsys) -> None:
    """Each call through `attnmt.cli.main`, as the console script calls it, in `cwd`: the
    same parser, code and exit status, without a Python start and a torch import per
    command (~2 s of CPU each; ~40 of the docs' commands run this way). Standard input is
    empty, as the shell's is (DEVNULL); the thread count a command sets is put back for
    the tests that follow in this worker."""
    import torch

    from attnmt.cli import main

    threads = torch.get_num_threads()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))  # as DEVNULL
    try:
        for argv in calls:
            try:
                status = main(argv)
            except SystemExit as exit:  # argparse, or a command's own exit
                status = exit.code
            out = capsys.readouterr()
            shown = " ".join(["attnmt", *argv])
            assert status in (0, None), f"`{shown}` failed ({status}):\n{out.out}\n{out.err}"
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize(("command", "where"), list(_console_cases()))
def test_console_command_runs(command, where, request, monkeypatch, capsys):
    reason = missing_install(command) or missing_runtime(command)
    if reason:
        pytest.skip(reason)
    cwd = request.getfixturevalue("scratch") if where == "scratch" else ROOT
    calls = in_process(command)
    if calls is None:
        _run(command, cwd)
    else:
        _run_in_process(calls, cwd, monkeypatch, capsys)


def test_only_plain_attnmt_commands_run_in_process():
    assert in_process("attnmt train configs/reverse.yaml --set train.max_steps=5") == [
        ["train", "configs/reverse.yaml", "--set", "train.max_steps=5"]
    ]
    assert in_process("attnmt data prepare configs/x.yaml && attnmt train configs/x.yaml") == [
        ["data", "prepare", "configs/x.yaml"],
        ["train", "configs/x.yaml"],
    ]
    for command in (
        "echo 12 | attnmt translate runs/reverse",
        "attnmt translate runs/reverse input.txt > output.txt",
        "attnmt translate runs/reverse - < input.txt",
        "attnmt align --src t.de --tgt t.en; ls",
        "attnmt evaluate runs/$RUN",
        "attnmt translate runs/reverse 'two words'",
        "attnmt train configs/*.yaml",
        "cd /tmp && attnmt align --src a --tgt b",
        "python benchmarks/bench.py --smoke",
        "attnmt serve runs/reverse &",
    ):
        assert in_process(command) is None, command


@pytest.mark.parametrize("path", [p for p in DOCS if list(_blocks(p, "python"))], ids=str)
def test_python_blocks_run(path, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "__doc_test__"}
    for _, _, body in _blocks(path, "python"):
        exec(compile(body, str(path), "exec"), namespace)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_relative_links_and_images_exist(path):
    """Every relative link and image of a page points at a file of the repository."""
    missing = [
        target
        for target in LINK.findall(path.read_text(encoding="utf-8"))
        if "://" not in target and not (path.parent / target).exists()
    ]
    assert missing == [], f"{path.name} links to files that are not there: {missing}"
