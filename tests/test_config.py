"""Config: strict loading, overrides, round trips."""

import pytest

from attnmt.config import Config, load_config, save_config
from attnmt.errors import ConfigError


def test_defaults_without_file():
    cfg = load_config(None)
    assert isinstance(cfg, Config)
    assert cfg.data.src == "en-web" and cfg.data.tgt == "fr-segond"


def test_yaml_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  hidden_size: 64\ntrain:\n  lr: 0.01\n")
    cfg = load_config(path, ["model.hidden_size=128", "data.dev_books=[Acts, 45]"])
    assert cfg.model.hidden_size == 128
    assert cfg.train.lr == 0.01
    assert cfg.data.dev_books == ["Acts", "45"]


def test_int_accepted_for_float():
    assert load_config(None, ["train.lr=1"]).train.lr == 1.0


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        (
            "model.hiden_size=3",
            "unknown key 'model.hiden_size' (did you mean 'model.hidden_size'?)",
        ),
        ("modle.name=x", "unknown key 'modle'"),
        ("model.hidden_size=abc", "model.hidden_size must be an integer"),
        ("train.precision=fp16", "'fp32' or 'bf16', got 'fp16'"),
        ("model.input_feeding=3", "must be true or false"),
        ("novalue", "not of the form section.key=value"),
    ],
)
def test_errors_name_the_key(override, needle):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert needle in str(err.value)


def test_unknown_key_lists_valid_keys(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  learning_rate: 0.1\n")
    with pytest.raises(ConfigError, match=r"valid keys: .*lr"):
        load_config(path)


def test_bad_yaml_and_missing_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML at line") as err:
        load_config(path)
    assert "bad.yaml" in str(err.value) and "<unicode string>" not in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_save_round_trip(tmp_path):
    cfg = load_config(None, ["model.name=transformer", "train.max_steps=7"])
    save_config(cfg, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == cfg
    assert not list(tmp_path.glob("*.tmp"))


def test_exponent_without_a_dot_is_a_number():
    """YAML 1.1 reads 1e-4 as a string; a float key takes it as the number it spells."""
    assert load_config(None, ["train.lr=1e-4"]).train.lr == 1e-4
    with pytest.raises(ConfigError, match=r"train\.lr must be a number, got 'fast'"):
        load_config(None, ["train.lr=fast"])
