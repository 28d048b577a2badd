"""A plain install is the runtime (pyproject.toml, docs/export.md "Without torch"): what
decoding an ONNX export imports, from the command line and from Python, is the declared
dependencies and theirs; torch, the server and the rest are extras, and a command whose
extra is missing says which to install."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from attnmt.config import load_config
from attnmt.decoding.runs import load_run
from attnmt.errors import EXTRAS
from attnmt.export.onnx import export_onnx
from attnmt.training import train
from conftest import TINY, mixed_corpus

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# Each needs a run, the server or an exporter: none is in a plain install.
NOT_IN_THE_RUNTIME = ["torch", "safetensors", "sacrebleu", "scikit-learn", "fastapi", "uvicorn"]
NOT_IN_THE_RUNTIME += ["onnx", "onnxscript", "ctranslate2"]


def names(requirements: list[str], *, extras: bool = True) -> set[str]:
    """The distributions `requirements` name, attnmt's own extras (`attnmt[train]`) opened
    unless `extras` is false."""
    found = set()
    for line in requirements:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) == "attnmt":
            for extra in requirement.extras if extras else ():
                found |= names(PROJECT["optional-dependencies"][extra])
        else:
            found.add(canonicalize_name(requirement.name))
    return found


def installed_with(requirements: list[str]) -> set[str]:
    """The distributions `requirements` name and, installed here, everything they require."""
    found: set[str] = set()
    todo = [Requirement(line) for line in requirements]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        if name in found:
            continue
        found.add(name)
        todo += [Requirement(line) for line in metadata.requires(name) or []]
    return found


def test_a_plain_install_has_no_torch_nor_server():
    base = names(PROJECT["dependencies"])
    assert not base & set(NOT_IN_THE_RUNTIME)
    assert {"numpy", "sentencepiece", "pyyaml", "onnxruntime"} <= base


def test_torch_is_a_range_in_the_train_extra_and_the_makefile_installs_it_first():
    """The Makefile installs torch==2.13.0 (the CPU build), then the project: a range here
    lets pip keep it instead of resolving a second torch."""
    extras = PROJECT["optional-dependencies"]
    holding = [e for e, lines in extras.items() if "torch" in names(lines, extras=False)]
    assert holding == ["train"]
    (torch,) = [Requirement(r) for r in extras["train"] if r.startswith("torch")]
    assert str(torch.specifier).startswith(">=")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert makefile.index("pip install -q torch==2.13.0") < makefile.index("-e '.[all,dev]'")


def test_all_is_every_feature_and_dev_is_all_with_the_tools():
    extras = PROJECT["optional-dependencies"]
    every = set().union(*(names(extras[e]) for e in ("train", "serve", "explain", "onnx")))
    assert names(extras["all"]) == every | names(extras["export"])
    assert names(extras["all"]) <= names(extras["dev"])


@pytest.mark.parametrize("module", sorted(EXTRAS))
def test_a_missing_module_is_named_with_the_extra_that_installs_it(module):
    (distribution,) = metadata.packages_distributions()[module]
    assert canonicalize_name(distribution) in names([f"attnmt[{EXTRAS[module]}]"])


# A process where `blocked` are missing, as in a plain install: importing one raises what
# Python raises for a package that is not there.
BLOCKER = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
"""


@pytest.mark.parametrize(
    ("blocked", "argv", "extra"),
    [
        ("torch", ["train", "--help"], "train"),
        ("torch", ["train", "configs/reverse.yaml"], "train"),
        ("uvicorn", ["serve", "--help"], "serve"),
    ],
)
def test_a_command_without_its_extra_says_which_to_install(blocked, argv, extra):
    code = BLOCKER.format(blocked=(blocked,)) + "from attnmt.cli import main\nsys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"attnmt {argv[0]}: error: {blocked} is not installed (a plain install of attnmt "
        f"decodes ONNX exports only): pip install 'attnmt[{extra}]'"
    ]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A tiny RNNsearch's ONNX export (2 steps: what it says does not matter here)."""
    root = tmp_path_factory.mktemp("install")
    corpus = mixed_corpus(root)
    data = [f"data.{split}_path={corpus}" for split in ("train", "dev", "test")]
    data += [f"data.cache_dir={root / 'cache'}", "data.corpus=tsv", "data.vocab_size=60"]
    data += ["data.drop_held_out=false", "train.max_steps=2", f"train.run_dir={root / 'run'}"]
    train(load_config(None, [*TINY, *data]), progress=False)
    return export_onnx(load_run(root / "run"), root / "export")


RUNTIME = """
import json, sys
before = set(sys.modules)
import attnmt
from attnmt.cli import main
export, source, plots = sys.argv[1:]
assert main(["translate", export, source, "--beam", "2", "--plot", plots]) == 0
translated = attnmt.load(export).translate("the cat sat", beam=2)
translated.plot(), translated._repr_mimebundle_()
print(json.dumps(sorted({name.split(".")[0] for name in set(sys.modules) - before})))
"""


def test_decoding_an_export_imports_only_the_plain_install(export, tmp_path):
    """`attnmt translate EXPORT_DIR --plot`, `attnmt.load(EXPORT_DIR).translate` and its
    views import nothing a plain `pip install attnmt` leaves out."""
    source = tmp_path / "in.txt"
    source.write_text("the cat sat\nmat on dog\n", encoding="utf-8")
    code = BLOCKER.format(blocked=tuple(EXTRAS)) + RUNTIME
    args = [str(export), str(source), str(tmp_path / "plots")]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout.splitlines()[-1])
    distributions = metadata.packages_distributions()
    used = {
        canonicalize_name(d) for m in imported if m != "attnmt" for d in distributions.get(m, [])
    }
    assert used, imported
    assert used <= installed_with(PROJECT["dependencies"]), sorted(used)
