"""The package's map stays readable (README.md, "Layout"): no import circles, between
modules or between packages, nothing imports the commands, imports at the top of modules, a
warning for a file past 600 lines and a failure past 1,000.

An import is an import wherever it is written: at the top of a module or inside a function
(a lazy import still makes its module depend on the other), so the graph below has both;
only those under `if TYPE_CHECKING:` (names for type checkers, never run) are left out."""

from __future__ import annotations

import ast
import importlib
import tomllib
import warnings
from itertools import pairwise
from pathlib import Path

import pytest

from attnmt.views.html import PLACEHOLDERS

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "attnmt"
# A file past WARN_LINES is asked to be looked at (a warning in the test report): it holds
# two concepts, or one that has grown. A file is split by concept, never to pass a number
# (issue 49: the old hard cap of 450 split files by size). Past MAX_LINES it fails: no one
# concept of this package has needed that many.
WARN_LINES = 600
MAX_LINES = 1000
# Imports inside functions, each lazy on purpose (the reason is in a comment beside it).
LAZY_IMPORTS = {
    ("attnmt.training.run", "torch.utils.tensorboard"),  # an optional dependency
    # Loading a config stays free of torch; model checks import it when they run.
    ("attnmt.config.checks", "torch"),
    ("attnmt.config.checks", "attnmt.attention"),
    # `attnmt data list` reads the corpus database without torch and sentencepiece.
    ("attnmt.cli.data", "attnmt.data.preparation"),
    ("attnmt.cli.data", "attnmt.data.alignments"),
    ("attnmt.cli.data", "attnmt.data.images"),
    # scikit-learn (the digits) and matplotlib load only when canvases are made or drawn.
    ("attnmt.data.images", "sklearn.datasets"),
    ("attnmt.data.images", "matplotlib.figure"),
    ("attnmt.data.images", "matplotlib.patches"),
    # eflomal is optional (it builds from source): its absence is explained when it is used.
    ("attnmt.alignment.aligners", "eflomal"),
    # The notebook widget bar, only inside a Jupyter kernel with ipywidgets installed.
    ("attnmt.progress", "tqdm.notebook"),
    # An ONNX export decodes without torch (attnmt.runtime; a plain install, tests/test_install):
    # the command line loads torch (devices, ensembles, int8), CTranslate2, the ONNX
    # exporter and matplotlib (--plot) only for what needs them; the searches take torch's
    # operations only for a torch model; onnxruntime loads when a session is made (a run's
    # user need not have it: `is_export` reads a JSON file).
    ("attnmt.cli.export", "attnmt.decoding.runs"),
    ("attnmt.cli.export", "attnmt.export.ctranslate2"),
    ("attnmt.cli.export", "attnmt.export.onnx"),
    ("attnmt.cli.export", "attnmt.cli.export_web"),  # the site: the server's page and infos
    ("attnmt.cli.options", "attnmt.runtime.model"),
    ("attnmt.decoding.loading", "attnmt.devices"),
    ("attnmt.decoding.loading", "attnmt.decoding.ensemble"),
    ("attnmt.decoding.loading", "attnmt.decoding.quantize"),
    # The service translates an export without torch: explanations and forced scoring
    # (torch) load when asked for.
    ("attnmt.service", "attnmt.explain"),
    ("attnmt.service", "attnmt.explain.methods"),
    ("attnmt.service", "attnmt.decoding.scoring"),
    # ...and the server of an export asks the methods (torch) only of a run.
    ("attnmt.serve.decoding", "attnmt.explain"),
    ("attnmt.serve.decoding", "attnmt.serve.images"),  # an image run's canvases (torch)
    # ...as `Model.self_attention` reads a Transformer's encoder (torch) when asked.
    ("attnmt.api.model", "attnmt.decoding.scoring"),
    # ...and a run's own dev/test sentences (`Model.examples`) read the corpus when asked.
    ("attnmt.api.model", "attnmt.data.preparation"),
    # ...and an image run's pictures (`Model.looks`) draw its canvases when asked.
    ("attnmt.api.model", "attnmt.evaluation.vision"),
    ("attnmt.cli.translate", "attnmt.decoding.attention_maps"),
    ("attnmt.runtime.arrays", "onnxruntime"),
    ("attnmt.runtime.model", "onnxruntime"),
    ("attnmt.runtime.sessions", "onnxruntime"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(path: Path) -> tuple[list[str], list[str]]:
    """(attnmt modules imported at the top, modules imported inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if _type_checking(node) for n in ast.walk(node)}
    top_level = {id(node) for node in tree.body}
    top, nested = [], []
    for node in ast.walk(tree):
        if id(node) in skipped or not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            # `from package import submodule` depends on the submodule, not the package.
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        (top if id(node) in top_level else nested).extend(names)
    return [n for n in top if n.startswith("attnmt")], nested


def depends_on(path: Path) -> list[str]:
    """The attnmt modules a module imports, at the top or inside functions."""
    top, nested = imports(path)
    return sorted({n for n in [*top, *nested] if n.split(".")[0] == "attnmt"})


GRAPH = {name: depends_on(path) for name, path in MODULES.items()}


def package_of(name: str) -> str | None:
    """The room a module is in: its subpackage (`attnmt.data` for `attnmt.data.bible`), or
    the module itself at the top (`attnmt.errors`). None for the root package, which every
    import runs first (its `__version__`, and the Python API it loads on first use)."""
    return ".".join(name.split(".")[:2]) if "." in name else None


def package_edges() -> dict[str, dict[str, list[str]]]:
    """package -> {each package it imports: the module imports that make the edge}."""
    edges: dict[str, dict[str, list[str]]] = {}
    for name, deps in GRAPH.items():
        for dep in deps:
            low, high = package_of(name), package_of(dep)
            if low is not None and high is not None and low != high:
                edges.setdefault(low, {}).setdefault(high, []).append(f"{name} -> {dep}")
    return edges


PACKAGE_EDGES = package_edges()
PACKAGE_GRAPH = {package: sorted(edges) for package, edges in PACKAGE_EDGES.items()}


def circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """One circle for each edge that closes one (a depth-first search's back edges)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    found: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in graph.get(node, []):
            if state.get(dep) == 1:
                found.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name, [name])
    return found


def test_the_layout_has_its_rooms():
    for package in (
        "attention", "data", "models", "training", "alignment", "decoding", "evaluation",
        "export", "explain", "runtime", "serve", "api", "cli",
    ):  # fmt: skip
        assert f"attnmt.{package}" in MODULES, package
    for module in ("metrics", "plotting", "config", "errors", "checkpoint", "devices", "report"):
        assert f"attnmt.{module}" in MODULES, module


def test_every_command_is_cli_slash_its_name():
    from attnmt.cli import COMMANDS

    for command in COMMANDS:
        assert f"attnmt.cli.{command}" in MODULES, command


def test_nothing_outside_cli_imports_cli():
    offenders = {
        name: [m for m in deps if m == "attnmt.cli" or m.startswith("attnmt.cli.")]
        for name, deps in GRAPH.items()
        if not (name == "attnmt.cli" or name.startswith("attnmt.cli.") or name == "attnmt.__main__")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


# The house from the ground up: a room (a subpackage, or a module at the top) imports only
# rooms on lower floors, never one on its own floor or above, at the top of a module or
# inside a function. Every room is on one floor (a test keeps the list complete).
LAYERS = [
    # nothing of attnmt below them
    ("attnmt.errors", "attnmt.arrays", "attnmt.lazy", "attnmt.cancel", "attnmt.metrics",
     "attnmt.progress", "attnmt.scripts", "attnmt.attention"),
    ("attnmt.config",  # the corpora it checks against are its own tables (config.corpora)
     "attnmt.rundir"),  # a run directory's layout: read without torch (report, server, API)
    ("attnmt.devices", "attnmt.checkpoint", "attnmt.plotting"),
    ("attnmt.data",),
    ("attnmt.models", "attnmt.alignment", "attnmt.runtime", "attnmt.averaging"),
    # the searches, the translator, the one record, the one loader
    ("attnmt.decoding",),
    ("attnmt.evaluation", "attnmt.export", "attnmt.training", "attnmt.views"),
    # explains what decoding returned: the front-ends above call it, the decoder never does
    ("attnmt.explain",),
    # the evaluation record of `attnmt evaluate` and `attnmt.evaluate`; the one service under
    # the three faces (translate and score, explanations beside the attention)
    ("attnmt.report", "attnmt.service"),
    ("attnmt.serve",),
    ("attnmt.api",),
    ("attnmt.tutorial", "attnmt.cli"),
    ("attnmt.__main__",),
]  # fmt: skip
FLOOR = {room: floor for floor, rooms in enumerate(LAYERS) for room in rooms}


def test_every_room_is_on_one_floor():
    rooms = [room for rooms in LAYERS for room in rooms]
    assert len(rooms) == len(set(rooms))
    assert {package_of(name) for name in MODULES} - {None} == set(rooms)


def test_a_room_imports_only_rooms_on_lower_floors():
    upward = [
        f"{name} (floor {FLOOR[low]}) -> {dep} (floor {FLOOR[high]})"
        for name, deps in GRAPH.items()
        for dep in deps
        if (low := package_of(name)) is not None
        and (high := package_of(dep)) is not None
        and low != high
        and FLOOR[high] >= FLOOR[low]
    ]
    assert not upward, "imports against the floors of LAYERS:\n" + "\n".join(upward)


def test_the_import_graph_has_no_circle():
    found = circles(GRAPH)
    assert not found, "import circles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_packages_import_one_another_without_circle():
    """A lower package never reaches a higher one, not even lazily: `attnmt.config` and
    `attnmt.data`, `attnmt.decoding` and `attnmt.explain` each import one way."""
    found = circles(PACKAGE_GRAPH)
    described = [
        " -> ".join(circle)
        + "".join(f"\n  {a} -> {b}: {', '.join(PACKAGE_EDGES[a][b])}" for a, b in pairwise(circle))
        for circle in found
    ]
    assert not found, "package import circles:\n" + "\n".join(described)


def test_imports_are_at_the_top_except_where_laziness_is_the_point():
    nested = {(name, imported) for name, path in MODULES.items() for imported in imports(path)[1]}
    assert nested <= LAZY_IMPORTS, sorted(nested - LAZY_IMPORTS)
    assert nested >= LAZY_IMPORTS, f"no longer lazy, drop them: {sorted(LAZY_IMPORTS - nested)}"


# Packages whose names load on first use (attnmt.lazy): `import attnmt` stays light (no
# torch), `attnmt.data` prepares without torch. importlib loads them, which the graph above
# does not see; the root package is left out of it anyway (`package_of`).
LAZY_PACKAGES = sorted(
    name
    for name, path in MODULES.items()
    for node in ast.parse(path.read_text(encoding="utf-8")).body
    if isinstance(node, ast.Assign) and "lazy_names(" in ast.unparse(node.value)
)


def type_checking_imports(path: Path) -> set[tuple[str, str]]:
    """(module, name) of each `from module import name` under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    blocks = [node for node in tree.body if _type_checking(node)]
    return {
        (node.module, alias.name)
        for block in blocks
        for node in ast.walk(block)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def test_the_lazy_packages_are_found():
    assert {"attnmt", "attnmt.api", "attnmt.data", "attnmt.explain"} <= set(LAZY_PACKAGES)


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_a_lazy_package_keeps_one_list_of_its_names(name):
    """`_EXPORTS` (name -> module) is the one list: `__all__` and `dir()` come from it, the
    imports type checkers and editors see are its names from its modules, and each name is
    what its module defines."""
    package = importlib.import_module(name)
    exports = package._EXPORTS
    expected = {(f"{name}.{module}", export) for export, module in exports.items()}
    assert type_checking_imports(MODULES[name]) == expected
    assert package.__all__ == sorted(exports)
    assert set(exports) <= set(dir(package))
    for export, module in exports.items():
        defined = getattr(importlib.import_module(f"{name}.{module}"), export)
        assert getattr(package, export) is defined
    star: dict = {}
    exec(f"from {name} import *", star)
    assert set(exports) <= star.keys()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_long_file_is_flagged_and_none_is_past_the_cap(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines: split it by concept"
    if lines > WARN_LINES:
        warnings.warn(f"{MODULES[name]} has {lines} lines: two concepts?", stacklevel=1)


def test_the_special_token_ids_are_defined_once():
    definitions = [
        name
        for name, path in MODULES.items()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        for element in (target.elts if isinstance(target, ast.Tuple) else [target])
        if isinstance(element, ast.Name) and element.id in {"PAD", "UNK", "BOS", "EOS"}
    ]
    assert definitions == ["attnmt.data.vocab"] * 4


def test_the_page_and_view_assets_are_package_data():
    """A non-editable install ships only what pyproject lists: every file the explorer page
    and the notebook views paste in (`attnmt.views.html.PLACEHOLDERS`) must be there."""
    data = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = data["tool"]["setuptools"]["package-data"]
    assert set(PLACEHOLDERS.values()) <= set(shipped["attnmt.views"])
    assert "explorer.html" in shipped["attnmt.serve"]
    assert "*.js" in shipped["attnmt.web"]  # the static site's modules (attnmt.export.web)
    for name in PLACEHOLDERS.values():
        assert (PACKAGE / "views" / name).is_file()


def test_annotations_name_only_rooms_below_too():
    """The types a module names under `TYPE_CHECKING` (for annotations only) obey the floors
    as its imports do: a record never names a type defined above it."""
    upward = [
        f"{name} (floor {FLOOR[low]}) -> {module}.{what} (floor {FLOOR[high]})"
        for name, path in MODULES.items()
        for module, what in type_checking_imports(path)
        if name not in LAZY_PACKAGES  # their TYPE_CHECKING block is their own _EXPORTS
        and (low := package_of(name)) is not None
        and (high := package_of(module)) is not None
        and low != high
        and FLOOR[high] >= FLOOR[low]
    ]
    assert not upward, "annotations against the floors of LAYERS:\n" + "\n".join(upward)
