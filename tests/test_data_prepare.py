"""`prepare` and `attnmt data`: splits, stats, the cache, the CLI."""

from __future__ import annotations

import json
import time

import pytest

from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data import prepare
from attnmt.data.preparation import cache_key


def _cfg(tmp_path, *overrides):
    return load_config(None, [f"data.cache_dir={tmp_path / 'cache'}", *overrides])


@pytest.fixture(scope="module")
def bible_data(tmp_path_factory):
    """The default English->French pair, short verses and a small vocabulary (speed)."""
    tmp = tmp_path_factory.mktemp("bible")
    cfg = _cfg(tmp, "data.max_words=12", "data.vocab_size=1000")
    started = time.perf_counter()
    data = prepare(cfg.data)
    return cfg, data, time.perf_counter() - started


def test_bible_splits_stats_and_files(bible_data):
    _, data, _ = bible_data
    assert data.stats["pairs"] == {"train": len(data.train), "dev": 433, "test": 879}
    assert {ex.id.split()[0] for ex in data.test} == {"John"}
    assert {ex.id.split()[0] for ex in data.dev} == {"Romans"}
    assert data.stats["references"]["test"] == 3  # Segond + Ostervald + Darby
    assert data.stats["extra_references"] == ["fr-ostervald", "fr-darby"]
    assert all(len(ex.src.split()) <= 12 for ex in data.train)
    for name in ("train", "dev", "test"):
        assert data.stats[name]["coverage"] > 0.999
        ex = data.split(name)[0]
        assert data.vocab.src.decode(ex.src_ids) == ex.src
    assert 0 <= data.stats["padding_fraction"] < 0.2
    assert (data.directory / "vocab" / "joint.model").is_file()
    lines = (data.directory / "test.ref3").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 879 and lines[0].startswith("Au commencement")


def test_second_prepare_reads_the_cache(bible_data):
    cfg, data, _ = bible_data
    again = prepare(cfg.data)
    assert again.stats.get("cached") is True
    assert [ex.src_ids for ex in again.test[:20]] == [ex.src_ids for ex in data.test[:20]]


def test_cache_key_ignores_where_and_budget_but_not_content(tmp_path):
    a = load_config(None, ["data.cache_dir=a", "data.batch_tokens=100"]).data
    b = load_config(None, ["data.cache_dir=b", "data.batch_tokens=200"]).data
    c = load_config(None, ["data.vocab_size=100"]).data
    assert cache_key(a) == cache_key(b) != cache_key(c)


def test_plain_files_corpus(tmp_path):
    for split, n in (("train", 30), ("dev", 3)):
        (tmp_path / f"{split}.en").write_text(
            "".join(f"the cat number {i} sleeps\n" for i in range(n)), encoding="utf-8"
        )
        (tmp_path / f"{split}.fr").write_text(
            "".join(f"le chat numéro {i} dort\n" for i in range(n)), encoding="utf-8"
        )
    cfg = _cfg(
        tmp_path,
        "data.corpus=files",
        "data.src=en",
        "data.tgt=fr",
        "data.vocab_size=60",
        f"data.train_path={tmp_path / 'train'}",
        f"data.dev_path={tmp_path / 'dev'}",
    )
    data = prepare(cfg.data)
    # The three dev pairs are also lines 1-3 of train: the leak check drops those copies.
    assert len(data.train) == 27 and len(data.dev) == 3 and data.test == []
    assert data.stats["removed_duplicates"] == 3
    assert data.train[0].tgt == "le chat numéro 3 dort" and data.train[0].id == "train.en:4"
    assert data.vocab.tgt.decode(data.dev[2].tgt_ids) == "le chat numéro 2 dort"


def test_synthetic_corpus_uses_the_symbol_vocabulary(tmp_path):
    cfg = _cfg(tmp_path, "data.corpus=reverse", "data.synthetic_train_size=50")
    data = prepare(cfg.data)
    assert data.vocab.src_vocab_size == 55
    ex = data.train[0]
    assert ex.tgt.split() == ex.src.split()[::-1]


def test_cli_list_prepare_show(tmp_path, capsys, bible_data):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert "fr-segond" in out and "31 versions" in out
    assert main(["data", "list", "--books"]) == 0
    assert " 43  John" in capsys.readouterr().out
    cfg_path = tmp_path / "reverse.yaml"
    cfg_path.write_text(
        f"data:\n  corpus: reverse\n  synthetic_train_size: 40\n  cache_dir: {tmp_path}\n",
        encoding="utf-8",
    )
    assert main(["data", "prepare", str(cfg_path)]) == 0
    assert "pairs: train 40" in capsys.readouterr().out
    assert main(["data", "prepare", str(cfg_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pairs"]["train"] == 40
    assert main(["data", "show", str(cfg_path), "-n", "1"]) == 0
    assert "== test: 1,000 pairs" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["data", "prepare", str(tmp_path / "nope.yaml")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("data:\n  corpus: bibel\n", encoding="utf-8")
    assert main(["data", "prepare", str(bad), "--set", f"data.cache_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err  # refused at config load or by prepare: either names it
    assert "data.corpus" in err and "'bibel'" in err and "Traceback" not in err


def test_edited_files_are_prepared_again(tmp_path):
    (tmp_path / "train.en").write_text("one cat\ntwo cats\n", encoding="utf-8")
    (tmp_path / "train.fr").write_text("un chat\ndeux chats\n", encoding="utf-8")
    (tmp_path / "dev.en").write_text("three cats\n", encoding="utf-8")
    (tmp_path / "dev.fr").write_text("trois chats\n", encoding="utf-8")
    cfg = _cfg(
        tmp_path,
        "data.corpus=files",
        "data.src=en",
        "data.tgt=fr",
        "data.vocab_size=30",
        f"data.train_path={tmp_path / 'train'}",
        f"data.dev_path={tmp_path / 'dev'}",
    )
    first = prepare(cfg.data)
    (tmp_path / "train.fr").write_text("un chat\ntrois chats\n", encoding="utf-8")
    second = prepare(cfg.data)
    assert first.directory != second.directory
    assert second.train[1].tgt == "trois chats"


def test_alignment_corpus_drops_training_copies_of_held_out_verses(tmp_path, monkeypatch):
    from attnmt.data import alignments
    from attnmt.data.alignments import AlignedVerse, GoldAlignments
    from attnmt.data.preparation import _read_splits

    def verse(book, number, src, tgt):
        return AlignedVerse(f"{book}:{number}", book, 1, number, src.split(), tgt.split(), {(0, 0)})

    gold = GoldAlignments(
        verses=[
            verse(40, 1, "αμην λεγω", "truly I say"),  # Matthew: train
            verse(40, 3, "αμην αμην λεγω υμιν", "truly truly I say to you"),  # too long
            verse(40, 2, "και ειπεν", "and he said"),  # a copy of a John verse
            verse(43, 1, "και ειπεν", "and he said"),  # John: test
            verse(45, 1, "χαρις υμιν", "grace to you"),  # Romans: dev
        ],
        unlinked=[verse(41, 1, "χαρις υμιν", "grace to you")],  # Mark: a copy of Romans
    )
    monkeypatch.setattr(alignments, "load_gold", lambda: gold)
    cfg = _cfg(tmp_path, "data.corpus=alignments", "data.max_words=3")
    splits, stats = _read_splits(cfg.data)
    assert [ex.src for ex in splits["train"]] == ["αμην λεγω"]
    assert [ex.src for ex in splits["test"]] == ["και ειπεν"]
    assert stats["removed_duplicates"] == 2 and stats["removed_long"] == 1


def test_swap_is_for_the_alignments_corpus_and_keys_its_own_cache(tmp_path):
    from attnmt.data.alignments import AlignedVerse
    from attnmt.data.preparation import cache_key
    from attnmt.errors import ConfigError

    with pytest.raises(ConfigError, match=r"data\.src and data\.tgt"):
        _cfg(tmp_path, "data.corpus=bible", "data.swap=true")
    plain = _cfg(tmp_path, "data.corpus=alignments")
    swapped = _cfg(tmp_path, "data.corpus=alignments", "data.swap=true")
    assert cache_key(plain.data) != cache_key(swapped.data)
    verse = AlignedVerse("John 1:1", 43, 1, 1, ["εν", "αρχη"], ["in", "the", "beginning"],
                         {(0, 0), (1, 1), (1, 2)})  # fmt: skip
    turned = verse.transposed()
    assert (turned.src, turned.tgt) == (verse.tgt, verse.src)
    assert turned.links == {(0, 0), (1, 1), (2, 1)} and turned.transposed() == verse
