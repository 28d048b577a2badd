"""A corpus too small for data.vocab_size: sentencepiece makes fewer subwords (so tiny
corpora still train), and preparation says so, in its output and in the stats."""

from __future__ import annotations

import json

from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data import prepare
from conftest import mixed_corpus


def tsv_overrides(root, vocab_size: int) -> list[str]:
    """conftest's small TSV corpus for every split, the cache under `root`."""
    corpus = mixed_corpus(root)
    overrides = [f"data.cache_dir={root / 'cache'}", "data.corpus=tsv"]
    overrides += [f"data.{s}_path={corpus}" for s in ("train", "dev", "test")]
    return [*overrides, "data.drop_held_out=false", f"data.vocab_size={vocab_size}"]


def test_fewer_subwords_than_asked_are_said_and_recorded(tmp_path, capsys):
    overrides = tsv_overrides(tmp_path, 5000)
    data = prepare(load_config(None, overrides).data)
    got = data.vocab.src_vocab_size
    assert got < 5000
    assert data.stats["vocab_asked"] == 5000 and data.stats["vocab_size"]["src"] == got
    err = capsys.readouterr().err
    said = f"data.vocab_size asks for 5,000 subwords but the training text supports only {got:,}"
    assert said in err
    assert err.count("\n") == 1
    # Cached: `data prepare` still says it, and the JSON stats carry both numbers.
    config = tmp_path / "c.yaml"
    config.write_text("data:\n  corpus: tsv\n", encoding="utf-8")
    sets = [x for o in overrides[1:] for x in ("--set", o)]
    assert main(["data", "prepare", str(config), "--set", overrides[0], *sets]) == 0
    assert "(data.vocab_size asked for 5,000: the training text supports no more)" in (
        capsys.readouterr().out
    )
    assert main(["data", "prepare", str(config), "--set", overrides[0], *sets, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["vocab_asked"], stats["vocab_size"]["tgt"]) == (5000, got)


def test_a_vocabulary_the_corpus_supports_says_nothing(tmp_path, capsys):
    data = prepare(load_config(None, tsv_overrides(tmp_path, 60)).data)
    assert data.vocab.src_vocab_size == 60
    assert "vocab_size" not in capsys.readouterr().err
