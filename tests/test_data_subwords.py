"""Sentencepiece vocabularies: fixed special ids, round trips, the subword->word map, caching."""

from __future__ import annotations

import itertools

import pytest

from attnmt.data import BOS, EOS, PAD, UNK, subwords
from attnmt.data.subwords import load_vocab, train_vocab, word_of_pieces
from attnmt.data.synthetic import SymbolVocab
from attnmt.errors import DataError

EN = [
    "In the beginning God created the heavens and the earth.",
    "The earth was formless and empty.",
    "God said, Let there be light, and there was light.",
    "God saw the light, and saw that it was good.",
    "God called the light Day, and the darkness he called Night.",
] * 4
FR = [
    "Au commencement, Dieu créa les cieux et la terre.",
    "La terre était informe et vide.",
    "Dieu dit: Que la lumière soit! Et la lumière fut.",
    "Dieu vit que la lumière était bonne.",
    "Dieu appela la lumière jour, et il appela les ténèbres nuit.",
] * 4


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    return train_vocab(EN, FR, size=120, cache_dir=tmp_path_factory.mktemp("spm"))


def test_special_ids_are_fixed(vocab):
    proc = vocab.src.processor
    assert (proc.pad_id(), proc.unk_id(), proc.bos_id(), proc.eos_id()) == (PAD, UNK, BOS, EOS)
    assert vocab.joint and vocab.src is vocab.tgt


@pytest.mark.parametrize("text", [*EN[:5], *FR[:5], "Dieu créa la lumière."])
def test_encode_decode_round_trip(vocab, text):
    ids = vocab.src.encode(text)
    assert BOS not in ids and EOS not in ids
    assert vocab.src.decode(ids) == text
    assert vocab.src.decode([*ids, EOS, 7, 8]) == text  # decoding stops at EOS


def test_word_map_covers_every_piece_and_every_word(vocab):
    for text in [*EN[:5], *FR[:5]]:
        pieces = vocab.src.pieces(text)
        word_of = vocab.src.word_of(text)
        assert len(word_of) == len(pieces)
        assert word_of[0] == 0 and word_of[-1] == len(text.split()) - 1
        assert all(b - a in (0, 1) for a, b in itertools.pairwise(word_of))


def test_word_of_pieces_by_hand():
    # "▁Au ▁commence ment , ▁Dieu" -> words Au, commencement, Dieu
    assert word_of_pieces(["▁Au", "▁commence", "ment", ",", "▁Dieu"]) == [0, 1, 1, 1, 2]
    # a lone "▁" starts the word the next piece continues
    assert word_of_pieces(["▁la", "▁", "É", "ternel"]) == [0, 1, 1, 1]
    assert word_of_pieces(["x", "▁y"]) == [0, 1]


def test_separate_vocabularies(tmp_path):
    vocab = train_vocab(EN, FR, size=100, joint=False, cache_dir=tmp_path)
    assert not vocab.joint and vocab.src is not vocab.tgt
    assert vocab.tgt.decode(vocab.tgt.encode(FR[0])) == FR[0]
    vocab.save(tmp_path / "v")
    again = load_vocab(tmp_path / "v")
    assert not again.joint and again.tgt.encode(FR[1]) == vocab.tgt.encode(FR[1])
    assert again.same_as(vocab)
    other = train_vocab(FR, EN, size=100, joint=False, cache_dir=tmp_path)
    assert not other.same_as(vocab)
    joint = train_vocab(EN, FR, size=100, cache_dir=tmp_path)
    assert not joint.same_as(vocab)


def test_training_is_cached_by_inputs_and_options(tmp_path, monkeypatch):
    train_vocab(EN, FR, size=100, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.model"))) == 1

    def boom(**kwargs):
        raise AssertionError("sentencepiece was trained again")

    monkeypatch.setattr(subwords.spm.SentencePieceTrainer, "train", boom)
    train_vocab(EN, FR, size=100, cache_dir=tmp_path)  # same inputs: reused
    with pytest.raises(AssertionError):
        train_vocab(EN, FR, size=101, cache_dir=tmp_path)  # other options: trained


def test_save_load_and_errors(vocab, tmp_path):
    vocab.save(tmp_path / "v")
    again = load_vocab(tmp_path / "v")
    assert again.src.encode(EN[0]) == vocab.src.encode(EN[0])
    with pytest.raises(DataError, match="cannot read the vocabulary"):
        load_vocab(tmp_path / "missing")
    (tmp_path / "v" / "joint.model").write_bytes(b"not a model")
    with pytest.raises(DataError, match="cannot read the vocabulary"):
        load_vocab(tmp_path / "v")


def test_symbol_vocabulary_saves_as_a_vocab(tmp_path):
    side = SymbolVocab()
    vocab = subwords.Vocab(side, side, True)
    vocab.save(tmp_path)
    again = load_vocab(tmp_path)
    assert again.src_vocab_size == 55 and again.tgt.encode("3 50") == side.encode("3 50")


def test_bad_kind_and_empty_text(tmp_path):
    with pytest.raises(DataError, match="'unigram' or 'bpe'"):
        train_vocab(EN, FR, kind="wordpiece", cache_dir=tmp_path)
    with pytest.raises(DataError, match="empty"):
        train_vocab([""], [" "], cache_dir=tmp_path)
