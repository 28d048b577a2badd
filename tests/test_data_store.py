"""The token store and the streaming preparation of your own files: round trips, workers,
gz and stdin, the subword sample, the filters, the atomic cache and the bad-line errors."""

from __future__ import annotations

import gzip
import io
import json
import os
import sys

import numpy as np
import pytest

from attnmt.config import load_config
from attnmt.data import TokenBatcher, prepare, streaming
from attnmt.data.preparation import cache_key
from attnmt.data.store import StoreWriter, TokenStore, id_dtype
from attnmt.errors import DataError

WORDS = ["the", "a", "cat", "dog", "sees", "runs", "big", "small", "red", "old", "house"]
MOTS = ["le", "un", "chat", "chien", "voit", "court", "grand", "petit", "rouge", "vieux", "maison"]


def _corpus(folder, n: int, *, seed: int = 0, dev: int = 5) -> None:
    """n word-for-word 'translations' of random sentences, and a dev set of `dev`."""
    rng = np.random.default_rng(seed)
    for split, count in (("train", n), ("dev", dev)):
        src, tgt = [], []
        for _ in range(count):
            words = rng.integers(0, len(WORDS), rng.integers(1, 9))
            src.append(" ".join(WORDS[w] for w in words))
            tgt.append(" ".join(MOTS[w] for w in words))
        (folder / f"{split}.en").write_text("".join(s + "\n" for s in src), encoding="utf-8")
        (folder / f"{split}.fr").write_text("".join(t + "\n" for t in tgt), encoding="utf-8")


def _cfg(folder, *overrides, corpus: str = "files"):
    return load_config(
        None,
        [
            f"data.cache_dir={folder / 'cache'}",
            f"data.corpus={corpus}",
            "data.src=en",
            "data.tgt=fr",
            "data.vocab_size=40",
            f"data.train_path={folder / 'train'}",
            f"data.dev_path={folder / 'dev'}",
            *overrides,
        ],
    ).data


# --------------------------------------------------------------------------------------
# The store itself
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("vocab", [8000, 70000])
def test_store_round_trip_in_chunks(tmp_path, vocab):
    rng = np.random.default_rng(1)
    pairs = [
        (rng.integers(0, vocab, rng.integers(0, 12)), rng.integers(0, vocab, rng.integers(1, 12)))
        for _ in range(50)
    ]
    writer = StoreWriter(tmp_path, "train", dtype=id_dtype(vocab))
    for start in range(0, 50, 17):  # chunks of 17, 17, 16
        chunk = pairs[start : start + 17]
        writer.add(
            np.concatenate([np.r_[s, t] for s, t in chunk]),
            np.array([len(s) for s, _ in chunk]),
            np.array([len(t) for _, t in chunk]),
        )
    meta = writer.close()
    assert meta["pairs"] == 50 and meta["dtype"] == ("uint16" if vocab <= 65536 else "uint32")
    store = TokenStore(tmp_path, "train", dtype=meta["dtype"])
    assert len(store) == 50 and isinstance(store.ids, np.memmap)
    for i, (s, t) in enumerate(pairs):
        got_s, got_t = store.pair(i)
        assert got_s.tolist() == s.tolist() and got_t.tolist() == t.tolist()
    itemsize = np.dtype(meta["dtype"]).itemsize
    assert (tmp_path / "train.ids").stat().st_size == itemsize * sum(
        len(s) + len(t) for s, t in pairs
    )
    writer = StoreWriter(tmp_path, "bad", dtype=np.uint16)
    with pytest.raises(ValueError, match="add up"):
        writer.add(np.zeros(3), np.array([1]), np.array([1]))
    writer.discard()


def test_a_truncated_store_is_refused_with_a_clear_error(tmp_path):
    writer = StoreWriter(tmp_path, "dev", dtype=np.uint16)
    writer.add_lists([[4, 5], [6]], [[7], [8, 9]])
    writer.close()
    with open(tmp_path / "dev.ids", "r+b") as f:
        f.truncate(4)
    with pytest.raises(DataError, match="prepare"):
        TokenStore(tmp_path, "dev", dtype="uint16")


# --------------------------------------------------------------------------------------
# Streaming preparation
# --------------------------------------------------------------------------------------


def test_streamed_files_encode_like_the_vocabulary_and_batch_from_the_store(tmp_path):
    _corpus(tmp_path, 300)
    data = prepare(_cfg(tmp_path))
    assert isinstance(data.train, TokenStore) and data.stats["lines"]["train"] == 300
    kept = data.stats["pairs"]["train"]
    assert kept == len(data.train) == 300 - data.stats["removed_duplicates"]
    lines = (tmp_path / "train.en").read_text(encoding="utf-8").splitlines()
    for ex in data.train[:40]:
        number = int(ex.id.split(":")[1])
        assert ex.src == lines[number - 1]
        assert ex.src_ids == data.vocab.src.encode(ex.src)
        assert ex.tgt_ids == data.vocab.tgt.encode(ex.tgt)
    # The store's lengths and a list of the same Examples give the same batches.
    from_store = TokenBatcher(data.train, batch_tokens=60, seed=3)
    from_list = TokenBatcher(list(data.train), batch_tokens=60, seed=3)
    assert from_store.shard(0) == from_list.shard(0)
    a, b = next(from_store), next(from_list)
    assert a.indices == b.indices and a.src.equal(b.src) and a.tgt_out.equal(b.tgt_out)
    assert data.stats["train"]["subwords"]["src"] == int(data.train.src_lengths.sum())


def test_worker_processes_write_the_same_cache_as_one_process(tmp_path, monkeypatch):
    _corpus(tmp_path, 400)
    monkeypatch.setattr(streaming, "CHUNK", 37)  # 11 chunks, enough to start workers
    one = prepare(_cfg(tmp_path, "data.workers=1", f"data.cache_dir={tmp_path / 'one'}"))
    two = prepare(_cfg(tmp_path, "data.workers=2", f"data.cache_dir={tmp_path / 'two'}"))
    assert one.stats["workers"] == 1 and two.stats["workers"] == 2
    for name in ("train.ids", "train.lengths.npy", "train.offsets.npy", "train.src", "train.id"):
        assert (one.directory / name).read_bytes() == (two.directory / name).read_bytes(), name


def test_gzip_files_and_a_tsv_on_stdin_give_the_same_pairs(tmp_path, monkeypatch):
    _corpus(tmp_path, 60)
    plain = prepare(_cfg(tmp_path))
    for lang in ("en", "fr"):
        raw = (tmp_path / f"train.{lang}").read_bytes()
        (tmp_path / f"train.{lang}").unlink()
        (tmp_path / f"train.{lang}.gz").write_bytes(gzip.compress(raw))
    zipped = prepare(_cfg(tmp_path, f"data.cache_dir={tmp_path / 'gz'}"))
    assert zipped.train.ids.tolist() == plain.train.ids.tolist()
    with (
        gzip.open(tmp_path / "train.en.gz", "rt") as a,
        gzip.open(tmp_path / "train.fr.gz", "rt") as b,
    ):
        tsv = "".join(f"{s.strip()}\t{t.strip()}\n" for s, t in zip(a, b, strict=True))
    dev = tmp_path / "dev.tsv"
    dev.write_text(
        "".join(
            f"{s}\t{t}\n"
            for s, t in zip(
                (tmp_path / "dev.en").read_text().splitlines(),
                (tmp_path / "dev.fr").read_text().splitlines(),
                strict=True,
            )
        )
    )
    stdin = io.TextIOWrapper(io.BytesIO(tsv.encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    piped = prepare(_cfg(tmp_path, "data.train_path='-'", f"data.dev_path={dev}", corpus="tsv"))
    assert piped.train.ids.tolist() == plain.train.ids.tolist()
    assert piped.train[0].id == "<stdin>:" + plain.train[0].id.split(":")[1]
    assert not (piped.directory / "train.stdin").exists()  # the spool is not kept


def test_filters_and_the_held_out_leak_check_by_hash(tmp_path):
    (tmp_path / "train.en").write_text(
        "a cat\n\none two three four five six\nx\nthe dog\nthe dog\n", encoding="utf-8"
    )
    (tmp_path / "train.fr").write_text(
        "un chat\nvide\nun\nun deux trois quatre cinq six sept\nle chien\nle chien\n",
        encoding="utf-8",
    )
    (tmp_path / "dev.en").write_text("the dog\n", encoding="utf-8")
    (tmp_path / "dev.fr").write_text("le chien\n", encoding="utf-8")
    data = prepare(_cfg(tmp_path, "data.max_words=6", "data.max_ratio=3"))
    assert [ex.src for ex in data.train] == ["a cat"]
    s = data.stats
    assert (s["removed_empty"], s["removed_ratio"], s["removed_long"]) == (1, 1, 1)
    assert s["removed_duplicates"] == 2  # both copies of the dev pair
    assert streaming.pair_hash("the dog", "le chien") != streaming.pair_hash("the do", "g le chien")


def test_the_subword_model_trains_on_a_uniform_sample(tmp_path):
    (tmp_path / "train.en").write_text("".join(f"s{i}\n" for i in range(5000)))
    (tmp_path / "train.fr").write_text("".join(f"t{i}\n" for i in range(5000)))
    source = streaming.Source((str(tmp_path / "train.en"), str(tmp_path / "train.fr")), False)
    got = streaming.scan(source, sample_pairs=500, seed=1)
    again = streaming.scan(source, sample_pairs=500, seed=1)
    assert got.lines == 5000 and got.sample == again.sample
    index = np.array([int(s[1:]) for s, _ in got.sample])
    assert len(set(index)) == 500 and all(
        f"t{i}" == t for i, (_, t) in zip(index, got.sample, strict=True)
    )
    assert 2000 < index.mean() < 3000 and index.min() < 500 and index.max() > 4500
    everything = streaming.scan(source, sample_pairs=9000, seed=1)
    assert [s for s, _ in everything.sample] == [f"s{i}" for i in range(5000)]


# --------------------------------------------------------------------------------------
# Bad input, the atomic cache
# --------------------------------------------------------------------------------------


def _nothing_left(tmp_path, cfg) -> None:
    cache = tmp_path / "cache"
    assert not (cache / cache_key(cfg)).exists()
    assert not [p for p in cache.glob(".*") if ".tmp-" in p.name] if cache.exists() else True


def test_a_bad_byte_deep_in_the_file_names_file_and_line(tmp_path):
    _corpus(tmp_path, 2000)
    path = tmp_path / "train.fr"
    lines = path.read_bytes().split(b"\n")
    lines[1776] = b"caf\xe9 au lait"
    path.write_bytes(b"\n".join(lines))
    cfg = _cfg(tmp_path)
    with pytest.raises(DataError, match=r"train\.fr: line 1777 is not valid UTF-8 .*0xe9"):
        prepare(cfg)
    _nothing_left(tmp_path, cfg)


def test_unequal_line_counts_name_both_files_and_counts(tmp_path):
    _corpus(tmp_path, 100)
    path = tmp_path / "train.en"
    path.write_text(path.read_text() + "one more line\n")
    cfg = _cfg(tmp_path)
    with pytest.raises(DataError, match=r"train\.en has 101 lines but .*train\.fr has 100"):
        prepare(cfg)
    _nothing_left(tmp_path, cfg)


def test_a_tsv_line_without_a_tab_is_an_error_naming_it(tmp_path):
    (tmp_path / "train.tsv").write_text("a\tb\nc d\n", encoding="utf-8")
    cfg = _cfg(
        tmp_path, f"data.train_path={tmp_path / 'train.tsv'}", "data.dev_path=", corpus="tsv"
    )
    with pytest.raises(DataError, match=r"train\.tsv: line 2 has no tab"):
        prepare(cfg)


def test_a_killed_preparation_leaves_nothing_trusted(tmp_path, monkeypatch):
    _corpus(tmp_path, 200)
    cfg = _cfg(tmp_path)

    def killed(*args, **kwargs):
        yield from ()
        raise KeyboardInterrupt  # as if Ctrl-C arrived in the middle of encoding

    monkeypatch.setattr(streaming, "encode", killed)
    with pytest.raises(KeyboardInterrupt):
        prepare(cfg)
    _nothing_left(tmp_path, cfg)
    monkeypatch.undo()
    # A folder a dead process left behind (kill -9: no cleanup ran) is removed, not read.
    key = cache_key(cfg)
    stale = tmp_path / "cache" / f".{key}.tmp-999999999-abc"
    stale.mkdir(parents=True)
    (stale / "store.json").write_text("{}")
    data = prepare(cfg)
    assert not stale.exists() and data.directory.name == key and len(data.train) > 0


def test_an_old_json_cache_is_rebuilt_once_with_a_sentence(tmp_path, capsys):
    _corpus(tmp_path, 50)
    cfg = _cfg(tmp_path)
    old = tmp_path / "cache" / "files-en-fr-0123456789ab"
    old.mkdir(parents=True)
    (old / "examples.json").write_text(json.dumps({"train": []}))
    data = prepare(cfg)
    err = capsys.readouterr().err
    assert "old JSON layout" in err and str(old) in err and "token store" in err
    assert (data.directory / "store.json").is_file()
    prepare(cfg)
    assert capsys.readouterr().err == ""  # read from the new cache: nothing said


def test_the_cli_prepares_your_files_and_says_what_it_dropped(tmp_path, capsys):
    from attnmt.cli import main

    _corpus(tmp_path, 80)
    config = tmp_path / "mine.yaml"
    config.write_text(
        "data:\n  corpus: files\n  src: en\n  tgt: fr\n  vocab_size: 40\n"
        f"  train_path: {tmp_path / 'train'}\n  dev_path: {tmp_path / 'dev'}\n"
        f"  cache_dir: {tmp_path / 'cache'}\n",
        encoding="utf-8",
    )
    assert main(["data", "prepare", str(config)]) == 0
    out = capsys.readouterr().out
    assert "pairs: train" in out and "removed duplicates from train" in out
    assert "token store" in out
    assert os.path.isdir(tmp_path / "cache")


def test_decoding_a_held_out_split_never_reads_the_training_split(tmp_path):
    import shutil

    from attnmt.data.preparation import decoding_split

    _corpus(tmp_path, 120)
    (tmp_path / "test.en").write_text("the cat\na red house\n", encoding="utf-8")
    (tmp_path / "test.fr").write_text("le chat\nun rouge maison\n", encoding="utf-8")
    cfg = _cfg(tmp_path, f"data.test_path={tmp_path / 'test'}")
    data = prepare(cfg)
    cached = decoding_split(cfg, "test", data.vocab)
    shutil.rmtree(data.directory)  # the cache is gone, and so are the training files:
    (tmp_path / "train.en").unlink()
    (tmp_path / "train.fr").unlink()
    again = decoding_split(cfg, "test", data.vocab)
    assert [(e.src, e.tgt_ids) for e in again] == [(e.src, e.tgt_ids) for e in cached]
    assert [e.tgt for e in again] == ["le chat", "un rouge maison"]
    assert not data.directory.exists()  # nothing was prepared for it


def test_two_ranks_share_an_epoch_of_the_store_and_resume_exactly(tmp_path):
    _corpus(tmp_path, 500)
    data = prepare(_cfg(tmp_path))
    whole = TokenBatcher(data.train, batch_tokens=80, seed=5).shard(1)
    ranks = [
        TokenBatcher(data.train, batch_tokens=80, seed=5, rank=r, world_size=2) for r in (0, 1)
    ]
    shares = [b.shard(1) for b in ranks]
    assert len(shares[0]) == len(shares[1]) == len(whole) // 2
    together = sorted(map(tuple, shares[0] + shares[1]))
    assert together == sorted(map(tuple, whole[: 2 * len(shares[0])]))  # each batch once
    # Resume: a fresh process maps the store again and continues with the same batches.
    straight = TokenBatcher(data.train, batch_tokens=80, seed=5, rank=1, world_size=2)
    for _ in range(straight.num_batches + 3):  # into the second epoch
        next(straight)
    state = straight.state_dict()
    expected = [next(straight) for _ in range(4)]
    reopened = TokenStore(data.directory, "train", dtype=data.dtype)
    resumed = TokenBatcher(reopened, batch_tokens=80, seed=5, rank=1, world_size=2)
    resumed.load_state_dict(state)
    for want, got in zip(expected, (next(resumed) for _ in range(4)), strict=True):
        assert (
            want.indices == got.indices
            and want.src.equal(got.src)
            and want.tgt_in.equal(got.tgt_in)
        )


def test_a_ratio_below_one_is_refused_at_load(tmp_path):
    from attnmt.errors import ConfigError

    with pytest.raises(ConfigError, match=r"data\.max_ratio is 0\.5.*use 0"):
        _cfg(tmp_path, "data.max_ratio=0.5")


def test_gzip_dev_and_test_files_too_and_an_edited_gz_is_prepared_again(tmp_path):
    _corpus(tmp_path, 80)
    for name in ("train.en", "train.fr", "dev.en", "dev.fr"):
        path = tmp_path / name
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    cfg = _cfg(tmp_path)
    first = prepare(cfg)
    assert len(first.dev) == 5 and first.dev[0].src_ids == first.vocab.src.encode(first.dev[0].src)
    raw = gzip.decompress((tmp_path / "train.fr.gz").read_bytes()).replace(b"le ", b"la ", 1)
    (tmp_path / "train.fr.gz").write_bytes(gzip.compress(raw))
    assert prepare(cfg).directory != first.directory  # keyed on the .gz file's size and time


def test_the_ratio_filter_applies_to_the_built_in_corpora_too(tmp_path, monkeypatch):
    from attnmt.data import preparation
    from attnmt.data.types import Example

    train = [
        Example("a b", "c d", id="1"),
        Example("a", "b c d e", id="2"),
        *(Example(f"w{i} x", f"y z{i}", id=str(i + 3)) for i in range(20)),
    ]
    dev = [Example("a b", "c d", id="dev")]
    monkeypatch.setattr(
        preparation,
        "_read_splits",
        lambda cfg: ({"train": list(train), "dev": dev, "test": []}, {}),
    )
    cfg = load_config(
        None, [f"data.cache_dir={tmp_path}", "data.vocab_size=30", "data.max_ratio=3"]
    ).data
    data = prepare(cfg)
    assert data.stats["removed_ratio"] == 1 and "a" not in [ex.src for ex in data.train]
    assert len(data.train) == 21
    assert streaming.filtered(1, 4, max_words=0, max_ratio=3) == "ratio"
    assert streaming.filtered(2, 6, max_words=0, max_ratio=3) == ""  # 3x exactly: kept
    assert streaming.filtered(7, 2, max_words=6, max_ratio=3) == "long"
