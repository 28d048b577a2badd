"""Greedy and beam search on a hand-built model whose probabilities we know."""

import math
from dataclasses import dataclass

import pytest
import torch

from attnmt.data.vocab import BOS, EOS
from attnmt.inference import beam_search, greedy, length_penalty

V = 6  # PAD UNK BOS EOS a=4 b=5


def _table():
    """Next-token probabilities by previous token: greedy takes 'a', beam finds 'b' EOS."""
    probs = torch.full((V, V), 1e-6)
    probs[BOS, 4], probs[BOS, 5], probs[BOS, EOS] = 0.5, 0.4, 0.1
    probs[4, 4], probs[4, 5], probs[4, EOS] = 0.34, 0.33, 0.33
    probs[5, EOS], probs[5, 4] = 0.9, 0.1
    return (probs / probs.sum(1, keepdim=True)).log()


@dataclass
class Memory:
    mask: torch.Tensor  # (B, S)

    def select(self, index):
        return Memory(self.mask[index])


@dataclass
class State:
    step: torch.Tensor  # (B,)

    def select(self, index):
        return State(self.step[index])


class TableModel(torch.nn.Module):
    """Logits from a fixed table; weights put all mass on source position `step % S`."""

    def __init__(self):
        super().__init__()
        self.table = _table()

    def encode(self, src, src_mask):
        return Memory(src_mask)

    def init_state(self, memory):
        return State(torch.zeros(memory.mask.size(0), dtype=torch.long))

    def step(self, prev, state, memory, *, need_weights=False):
        logits = self.table[prev]
        weights = None
        if need_weights:
            S = memory.mask.size(1)
            weights = torch.nn.functional.one_hot(state.step % S, S).float()
        return logits, State(state.step + 1), weights


def _src(batch=2, length=4):
    return torch.full((batch, length), 7), torch.ones(batch, length, dtype=torch.bool)


def test_greedy_follows_the_argmax_until_the_length_limit():
    src, mask = _src()
    hyps = greedy(TableModel(), src, mask, max_len=5, need_weights=True)
    assert hyps[0].tokens == [4, 4, 4, 4]  # the 5th step is forced to EOS
    table = _table()
    expected = table[BOS, 4] + 3 * table[4, 4] + table[4, EOS]
    assert hyps[0].log_prob == pytest.approx(float(expected), abs=1e-5)
    assert hyps[0].weights.shape == (5, 4)
    assert torch.equal(hyps[0].weights.argmax(1), torch.tensor([0, 1, 2, 3, 0]))


def test_beam_finds_the_better_sequence_greedy_misses():
    src, mask = _src()
    best = beam_search(TableModel(), src, mask, beam_size=3, alpha=0.0, max_len=5)
    assert best[0][0].tokens == [5]
    assert best[0][0].log_prob == pytest.approx(math.log(0.4 * 0.9), abs=1e-4)


def test_beam_one_equals_greedy():
    src, mask = _src(batch=3)
    g = greedy(TableModel(), src, mask, max_len=6, need_weights=True)
    b = beam_search(TableModel(), src, mask, beam_size=1, alpha=0.0, max_len=6, need_weights=True)
    for hg, (hb,) in zip(g, b, strict=True):
        assert hg.tokens == hb.tokens
        assert hg.log_prob == pytest.approx(hb.log_prob, abs=1e-5)
        assert torch.equal(hg.weights, hb.weights)


def test_n_best_sorted_with_weights_per_hypothesis():
    src, mask = _src()
    nbest = beam_search(
        TableModel(), src, mask, beam_size=4, n_best=4, alpha=0.6, max_len=5, need_weights=True
    )
    for hyps in nbest:
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 4
        for h in hyps:
            assert h.weights.shape == (len(h.tokens) + 1, 4)  # one row per token and EOS
            lp = float(length_penalty(len(h.tokens) + 1, 0.6))
            assert h.score == pytest.approx(h.log_prob / lp)


def test_length_limit_follows_the_source_length():
    src = torch.full((2, 6), 7)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 2:] = False  # second sentence: 2 tokens -> limit 2 * 1.0 + 5 = 7
    hyps = greedy(TableModel(), src, mask, max_len_ratio=1.0)
    assert len(hyps[0].tokens) == 6 + 5 - 1 and len(hyps[1].tokens) == 2 + 5 - 1


def test_n_best_larger_than_beam_is_refused():
    src, mask = _src()
    with pytest.raises(ValueError, match="n_best"):
        beam_search(TableModel(), src, mask, beam_size=2, n_best=3)
