"""A family is asked, not spelled (`attnmt.config.families`): the registry says what each
model family is, the models built from it agree, and no module outside the registry and
the builder compares a family's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tests.test_step_model import SIZES, _model

from attnmt.config.families import FAMILIES, IMAGE_MODELS, MODELS, TEXT_MODELS, family, names
from attnmt.errors import ConfigError
from attnmt.models import model_names
from attnmt.models.transformer import Transformer

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "attnmt"
# The modules that may spell a family: the registry, and the builder mapping names to classes.
SPELLERS = {PACKAGE / "config" / "families.py", PACKAGE / "models" / "builder.py"}
# The registry's derived lists: for messages that name them, never to test a name against.
NAME_LISTS = {
    "IMAGE_MODELS",
    "TEXT_MODELS",
    "ATTENTIONAL_RNNS",
    "UNIFORM_INIT_MODELS",
    "KEY_WIDTHS",
}


def _spells_a_family(node: ast.AST) -> bool:
    """A family's name as a string, a literal collection holding one, or a list of names."""
    if isinstance(node, ast.Constant):
        return node.value in FAMILIES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_spells_a_family(element) for element in node.elts)
    if isinstance(node, ast.Name):
        return node.id in NAME_LISTS
    if isinstance(node, ast.Attribute):
        return node.attr in NAME_LISTS
    return False


def family_name_tests(source: str, filename: str = "<source>") -> list[str]:
    """Every comparison (`==`, `!=`, `in`, `not in`; a `case` of a match) of a value with
    a family's name in `source`, as "file:line: code"."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            sides = [node.value]
        else:
            continue
        if any(_spells_a_family(side) for side in sides):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_compares_a_family_name():
    found = [
        test
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in SPELLERS
        for test in family_name_tests(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not found, "ask the model or attnmt.config.family(name) instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "code",
    [
        'cfg.model.name == "transformer"',
        'name != "glimpses"',
        'cfg.name in ("rnnsearch", "luong")',
        "cfg.model.name not in IMAGE_MODELS",
        "name in checks.KEY_WIDTHS",
        'match cfg.name:\n    case "luong":\n        pass',
    ],
)
def test_a_family_name_test_is_found(code):
    assert len(family_name_tests(code)) == 1


@pytest.mark.parametrize(
    "code",
    [
        "family(cfg.model.name).transformer",
        'cfg.model.attention == "location"',
        "cfg.name in MODELS",  # a known name: the check that it is one
        'precision.name == "bf16"',
    ],
)
def test_asking_is_not_spelling(code):
    assert family_name_tests(code) == []


def test_the_builder_builds_every_family_and_no_other():
    assert model_names() == list(MODELS) == list(FAMILIES)
    assert all(f.name == name for name, f in FAMILIES.items())


@pytest.mark.parametrize("name", MODELS)
def test_a_built_model_is_what_its_family_says(name):
    """The model's own flags (what code holding a model asks) equal its registry entry
    (what torch-free code holding a config asks)."""
    model, entry = _model(name), family(name)
    assert model.uses_attention is entry.uses_attention
    assert model.reads_images is entry.reads_images
    assert isinstance(model, Transformer) is entry.transformer
    attention = getattr(model, "attention", None)  # a composed attention: score x scope x mode
    assert (attention is not None) is entry.composed_attention
    if entry.composed_attention:
        assert attention.key_dim == entry.key_width * SIZES["hidden_size"]
    assert entry.own_policy is hasattr(model, "glimpse_path")


def test_the_lists_come_from_the_entries():
    assert set(IMAGE_MODELS) | set(TEXT_MODELS) == set(MODELS)
    assert not set(IMAGE_MODELS) & set(TEXT_MODELS)
    assert names("transformer") == ("transformer",)
    assert names("composed_attention") == ("rnnsearch", "luong", "show-attend-tell")
    assert names("uniform_init") == ("rnnencdec", "rnnsearch", "luong")


def test_an_unknown_family_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown model 'gpt'; valid: rnnencdec, rnnsearch"):
        family("gpt")


def test_the_servers_schema_enumerates_the_families():
    from attnmt.serve.schemas import ModelInfo

    schema = ModelInfo.model_json_schema()
    assert schema["properties"]["model"]["enum"] == list(MODELS)


def test_an_onnx_export_reads_text():
    from attnmt.runtime.model import OnnxModel

    assert OnnxModel.reads_images is False  # attnmt.export.onnx exports the text families
