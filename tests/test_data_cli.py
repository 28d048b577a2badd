"""`attnmt data`: the action list, what `list` says and how fast it counts, `prepare` output,
and preparing without torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data import bible
from attnmt.errors import ConfigError


def test_data_without_an_action_lists_the_actions(capsys):
    assert main(["data"]) == 0
    out = capsys.readouterr().out
    for action in ("list", "prepare", "show"):
        assert any(
            line.split()[:1] == [action] and len(line.split()) > 1 for line in out.splitlines()
        )
    assert "attnmt data ACTION --help" in out


def test_list_says_what_it_lists(capsys):
    assert main(["data", "list"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "Bible" in first and "versions" in first and "verses" in first
    assert main(["data", "list", "--books"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "books" in first.lower() and "dev_books" in first


def test_verse_counts_clean_only_the_few_texts_that_can_be_empty(monkeypatch):
    calls = []
    real_clean = bible.clean

    def counting_clean(text):
        calls.append(text)
        return real_clean(text)

    monkeypatch.setattr(bible, "clean", counting_clean)
    counts = bible.verse_counts()
    assert len(calls) < 1000  # not the 964k texts of the database (that took seconds)
    monkeypatch.setattr(bible, "clean", real_clean)
    for name in ("en-bbe", "en-web", "zh-ncv", "ar-svd"):  # the definition, one version at a time
        assert counts[name] == sum(1 for text in bible.read_version(name).values() if text)


@pytest.mark.parametrize("text", ["", " ", "...", "[]", "(8:1)", " (٣:١) ", "\u3000.\u00a0"])
def test_every_text_clean_can_empty_is_a_candidate(text):
    # The SQL prefilter of verse_counts may let through more than it needs, never less.
    points = set(bible._removable())
    assert bible.clean(text) == ""
    assert all(ord(c) in points for c in text)


def test_prepare_of_a_synthetic_task_names_no_bible_version(tmp_path, capsys):
    cache = f"data.cache_dir={tmp_path}"
    overrides = ["--set", "data.corpus=reverse", "--set", "data.synthetic_train_size=40"]
    assert main(["data", "prepare", "configs/quickstart.yaml", *overrides, "--set", cache]) == 0
    out = capsys.readouterr().out
    assert out.startswith("prepared reverse")
    assert "en-web" not in out and "fr-segond" not in out
    assert (
        main(["data", "prepare", "configs/quickstart.yaml", *overrides, "--set", cache, "--json"])
        == 0
    )
    stats = json.loads(capsys.readouterr().out)
    assert "src" not in stats and "tgt" not in stats


# --------------------------------------------------------------------------------------
# Preparing without torch (issue 39: importing it cost 1.5 s before any work)
# --------------------------------------------------------------------------------------

# In a fresh interpreter: prepare and show a corpus of your own files, then say which
# modules of torch got loaded (none) and the exit codes.
NO_TORCH = """
import json, sys
from attnmt.cli import main
codes = [main(["data", action, sys.argv[1]]) for action in ("prepare", "show")]
print(json.dumps({"codes": codes, "torch": [m for m in sys.modules if m.split(".")[0] == "torch"]}))
"""


def test_preparing_and_showing_your_files_never_imports_torch(tmp_path):
    words = ["the cat", "a dog runs", "the big red house", "old dogs", "a small cat sees"]
    mots = ["le chat", "un chien court", "la grande maison rouge", "vieux chiens", "un petit chat"]
    for split, count in (("train", 60), ("dev", 5)):
        for lang, texts in (("en", words), ("fr", mots)):
            lines = (texts[i % len(texts)] + f" {i}" for i in range(count))
            (tmp_path / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tmp_path / "mine.yaml"
    config.write_text(
        "data:\n  corpus: files\n  src: en\n  tgt: fr\n  vocab_size: 40\n"
        f"  train_path: {tmp_path / 'train'}\n  dev_path: {tmp_path / 'dev'}\n"
        f"  cache_dir: {tmp_path / 'cache'}\n"
        # the sections `attnmt train` reads are there too, checked as far as torch allows
        "model:\n  name: rnnsearch\n  attention: additive\ntrain:\n  device: cpu\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-c", NO_TORCH, str(config)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got == {"codes": [0, 0], "torch": []}
    assert "prepared files en -> fr" in result.stdout and "== train:" in result.stdout


def test_a_config_checked_without_torch_leaves_out_only_the_attention_and_the_device():
    # Everything else is refused as at a full load, so `attnmt data` still stops before
    # preparing anything; the attention and the device are checked by `attnmt train`.
    for override in ("model.attention=dott", "model.scope=local", "train.device=tpu"):
        load_config(None, [override], torch=False)
        with pytest.raises(ConfigError, match=override.split("=")[0]):
            load_config(None, [override])
    for override in ("model.name=lstm", "model.hidden_size=-5", "data.max_ratio=0.5"):
        with pytest.raises(ConfigError, match=override.split("=")[0]):
            load_config(None, [override], torch=False)
