"""Synthetic tasks (reverse, copy, sort) and their symbol vocabulary."""

import json

import pytest

from attnmt.data import BOS, EOS, PAD, UNK
from attnmt.data.synthetic import SymbolVocab, make_task
from attnmt.errors import DataError

SIZES = {"train_size": 2000, "dev_size": 200, "test_size": 200}


def _numbers(text: str) -> list[int]:
    return [int(token) for token in text.split()]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("reverse", lambda s: s[::-1]), ("copy", lambda s: s), ("sort", sorted)],
)
def test_targets_follow_the_task(name, expected):
    vocab = SymbolVocab()
    splits = make_task(name, **SIZES)
    for split in ("train", "dev", "test"):
        for ex in splits[split]:
            assert _numbers(ex.tgt) == expected(_numbers(ex.src))
            assert ex.src_ids == vocab.encode(ex.src) and ex.tgt_ids == vocab.encode(ex.tgt)
            assert UNK not in ex.src_ids


def test_reverse_example_by_hand():
    ex = make_task("reverse", **SIZES)["train"][0]
    assert ex.tgt.split() == ex.src.split()[::-1]
    assert ex.tgt_ids == ex.src_ids[::-1]
    assert ex.id == "reverse.train:0"


def test_lengths_and_symbols_in_range():
    splits = make_task("copy", **SIZES, max_len=25, eval_max_len=30)
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [2000, 200, 200]
    train = [len(ex.src_ids) for ex in splits["train"]]
    evals = [len(ex.src_ids) for s in ("dev", "test") for ex in splits[s]]
    assert min(train) == 1 and max(train) == 25
    assert min(evals) >= 1 and max(evals) == 30
    symbols = {n for ex in splits["train"] for n in _numbers(ex.src)}
    assert symbols == set(range(51))


def test_deterministic_by_seed():
    a = make_task("reverse", **SIZES, seed=3)
    b = make_task("reverse", **SIZES, seed=3)
    c = make_task("reverse", **SIZES, seed=4)
    for split in ("train", "dev", "test"):
        assert [ex.src for ex in a[split]] == [ex.src for ex in b[split]]
        assert [ex.src for ex in a[split]] != [ex.src for ex in c[split]]


def test_dev_and_test_are_unseen_and_distinct():
    # Short sequences make collisions with train frequent, so resampling must happen.
    splits = make_task("sort", train_size=3000, max_len=3, eval_max_len=3, seed=2)
    train = {ex.src for ex in splits["train"]}
    dev = [ex.src for ex in splits["dev"]]
    test = [ex.src for ex in splits["test"]]
    assert len(dev) == len(test) == 1000
    assert not train & set(dev) and not train & set(test) and not set(dev) & set(test)
    assert len(set(dev)) == len(dev) and len(set(test)) == len(test)


def test_impossible_unseen_request_and_bad_sizes_are_errors():
    with pytest.raises(ValueError, match="unseen"):
        make_task("copy", train_size=0, eval_max_len=1, dev_size=52, test_size=0)
    with pytest.raises(ValueError, match="max_len"):
        make_task("copy", train_size=10, max_len=0)


def test_unknown_task_lists_the_valid_names():
    with pytest.raises(ValueError, match="reverse, copy, sort"):
        make_task("rotate", train_size=10)


def test_vocab_encodes_decodes_and_keeps_special_ids():
    vocab = SymbolVocab()
    assert vocab.size == 55
    ids = vocab.encode("0 50 7 banana")
    assert ids == [4, 54, 11, UNK]
    assert vocab.decode([BOS, *ids[:3], EOS, 5, 6]) == "0 50 7"
    assert vocab.decode([*vocab.encode("12 5 40"), PAD, PAD]) == "12 5 40"
    assert vocab.decode([UNK]) == "<unk>"
    assert vocab.id_pieces([PAD, UNK, BOS, EOS]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert vocab.word_of("3 4 5") == [0, 1, 2]


def test_vocab_save_load_round_trip(tmp_path):
    vocab = SymbolVocab()
    path = vocab.save(tmp_path / "vocab")
    assert path == tmp_path / "vocab" / "symbols.json"
    assert json.loads(path.read_text())["symbols"][:2] == ["0", "1"]
    loaded = SymbolVocab.load(tmp_path / "vocab")
    assert loaded == vocab and loaded.size == vocab.size
    assert loaded.encode("3 2 1") == vocab.encode("3 2 1")


def test_vocab_load_errors_and_bad_symbols(tmp_path):
    with pytest.raises(DataError, match=r"symbols\.json"):
        SymbolVocab.load(tmp_path)
    (tmp_path / "symbols.json").write_text("{not json")
    with pytest.raises(DataError, match=r"SymbolVocab\.save"):
        SymbolVocab.load(tmp_path)
    with pytest.raises(ValueError, match="distinct"):
        SymbolVocab(["a", "a"])
    with pytest.raises(ValueError, match="distinct"):
        SymbolVocab(["a b"])
