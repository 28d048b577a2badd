"""Greedy and beam search on a hand-built model whose probabilities we know, and on tiny
random models: every hypothesis keeps the attention weights of its own tokens."""

import math
from dataclasses import dataclass

import pytest
import torch

from attnmt.config import ModelConfig
from attnmt.data import BOS, EOS, PAD, pad_batch
from attnmt.decoding.hypotheses import length_penalty
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.scoring import forced_weights
from attnmt.decoding.search import beam_search, greedy
from attnmt.models import build_model
from attnmt.models.base import Seq2Seq
from attnmt.models.torch_ops import torch_ops

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


def _attended(prev, step, length):
    """The table model's attention: all mass on source position (step + previous token) % S.

    It depends on the token read, so beams with different histories get different weights.
    """
    return (step + prev) % length


def _table_weights(tokens, length):
    """The (T + 1, S) weights the table model gives while reading BOS + `tokens` (+ EOS)."""
    prev = torch.tensor([BOS, *tokens])
    return torch.nn.functional.one_hot(_attended(prev, torch.arange(len(prev)), length), length)


class TableModel(Seq2Seq):
    """Logits from a fixed table; weights put all mass on one source position (`_attended`)."""

    array_ops = torch_ops(torch.device("cpu"))  # no parameters to say where it lives

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
            weights = torch.nn.functional.one_hot(_attended(prev, state.step, S), S).float()
        return logits, State(state.step + 1), weights


def _src(batch=2, length=4):
    return torch.full((batch, length), 7), torch.ones(batch, length, dtype=torch.bool)


def test_greedy_follows_the_argmax_until_the_length_limit():
    src, mask = _src()
    hyps = greedy(TableModel(), src, mask, SearchOptions(max_len=5, need_weights=True))
    assert hyps[0].tokens == [4, 4, 4, 4]  # the 5th step is forced to EOS
    table = _table()
    expected = table[BOS, 4] + 3 * table[4, 4] + table[4, EOS]
    assert hyps[0].log_prob == pytest.approx(float(expected), abs=1e-5)
    assert hyps[0].weights.shape == (5, 4)
    assert torch.equal(hyps[0].weights, _table_weights([4, 4, 4, 4], 4).float())


def test_beam_finds_the_better_sequence_greedy_misses():
    src, mask = _src()
    best = beam_search(TableModel(), src, mask, SearchOptions(beam=3, alpha=0.0, max_len=5))
    assert best[0][0].tokens == [5]
    assert best[0][0].log_prob == pytest.approx(math.log(0.4 * 0.9), abs=1e-4)


def test_beam_one_equals_greedy():
    src, mask = _src(batch=3)
    g = greedy(TableModel(), src, mask, SearchOptions(max_len=6, need_weights=True))
    b = beam_search(
        TableModel(), src, mask, SearchOptions(beam=1, alpha=0.0, max_len=6, need_weights=True)
    )
    for hg, (hb,) in zip(g, b, strict=True):
        assert hg.tokens == hb.tokens
        assert hg.log_prob == pytest.approx(hb.log_prob, abs=1e-5)
        assert torch.equal(hg.weights, hb.weights)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_greedy_scores_as_beam_one_does(alpha):
    src, mask = _src(batch=3)
    g = greedy(TableModel(), src, mask, SearchOptions(alpha=alpha, max_len=6))
    b = beam_search(TableModel(), src, mask, SearchOptions(beam=1, alpha=alpha, max_len=6))
    for hg, (hb,) in zip(g, b, strict=True):
        assert hg.tokens == hb.tokens
        assert hg.score == pytest.approx(hb.score, abs=1e-5)
        length = len(hg.tokens) + 1  # the EOS counts
        assert hg.score == pytest.approx(hg.log_prob / length_penalty(length, alpha), abs=1e-5)


class FondOfSpecials(TableModel):
    """The table model with PAD and BOS the most likely next tokens after every token."""

    def __init__(self):
        super().__init__()
        probs = self.table.exp()
        probs[:, PAD], probs[:, BOS] = 5.0, 4.0
        self.table = (probs / probs.sum(1, keepdim=True)).log()


def test_neither_search_emits_pad_or_bos():
    src, mask = _src()
    model = FondOfSpecials()
    (hyp, _) = greedy(model, src, mask, SearchOptions(max_len=5))
    assert hyp.tokens == [4, 4, 4, 4]  # the best tokens that are words
    table = model.table  # log_prob stays the model's own, not renormalised
    assert hyp.log_prob == pytest.approx(
        float(table[BOS, 4] + 3 * table[4, 4] + table[4, EOS]), abs=1e-5
    )
    for nbest in beam_search(model, src, mask, SearchOptions(beam=4, n_best=4, max_len=5)):
        for h in nbest:
            assert PAD not in h.tokens and BOS not in h.tokens


def test_n_best_sorted_with_weights_per_hypothesis():
    src, mask = _src()
    nbest = beam_search(
        TableModel(),
        src,
        mask,
        SearchOptions(beam=4, n_best=4, alpha=0.6, max_len=5, need_weights=True),
    )
    for hyps in nbest:
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 4
        for h in hyps:
            assert h.weights.shape == (len(h.tokens) + 1, 4)  # one row per token and EOS
            # Its own weights, not those of the beam that sat in its row at some step.
            assert torch.equal(h.weights, _table_weights(h.tokens, 4).float()), h.tokens
            lp = float(length_penalty(len(h.tokens) + 1, 0.6))
            assert h.score == pytest.approx(h.log_prob / lp)


def test_length_limit_follows_the_source_length():
    src = torch.full((2, 6), 7)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 2:] = False  # second sentence: 2 tokens -> limit 2 * 1.0 + 5 = 7
    hyps = greedy(TableModel(), src, mask, SearchOptions(max_len_ratio=1.0))
    assert len(hyps[0].tokens) == 6 + 5 - 1 and len(hyps[1].tokens) == 2 + 5 - 1


def test_n_best_larger_than_beam_is_refused():
    src, mask = _src()
    with pytest.raises(ValueError, match="n_best"):
        beam_search(TableModel(), src, mask, SearchOptions(beam=2, n_best=3))


# ------------------------------------------------------------------------------------------
# Real models: the weights follow their hypothesis through the beam's reordering
# ------------------------------------------------------------------------------------------

RANDOM_MODELS = {
    # (model settings, seed, std of the re-drawn weights): the papers' RNN initialisation
    # (std 0.01) gives near-uniform logits and ties between beams; wider random weights make
    # the beams disagree. Seeds picked so that in every sentence some hypotheses end before
    # the length limit and the beams change places from step to step (they still do on an
    # Intel Xeon with AMX and with AVX2 or AVX512-BF16 kernels: tests/README.md).
    "rnnsearch": ({"name": "rnnsearch"}, 11, 0.5),
    "luong": ({"name": "luong", "attention": "general"}, 21, 0.5),
    "transformer": ({"name": "transformer", "heads": 2, "layers": 2, "ff_size": 16}, 10, None),
}


def _random_model(name: str) -> torch.nn.Module:
    overrides, seed, std = RANDOM_MODELS[name]
    torch.manual_seed(seed)
    cfg = ModelConfig(**{"embed_size": 8, "hidden_size": 8, "dropout": 0.0, **overrides})
    model = build_model(cfg, 12, 12)
    if std is not None:
        with torch.no_grad():
            for param in model.parameters():
                param.normal_(0.0, std)
    return model.eval()


def _differ(a, b) -> bool:
    """Whether two hypotheses' weights differ on the steps both have."""
    rows = min(a.weights.shape[0], b.weights.shape[0])
    return not torch.allclose(a.weights[:rows], b.weights[:rows], atol=1e-3)


@pytest.mark.parametrize("name", list(RANDOM_MODELS))
def test_beam_weights_are_those_of_forced_decoding_of_each_hypothesis(name):
    model = _random_model(name)
    sources = [[4, 5, 6, 7, 8], [9, 10, 4]]  # different lengths: the second one is padded
    src, mask = pad_batch([[*s, EOS] for s in sources], torch.device("cpu"))
    nbest = beam_search(
        model, src, mask, SearchOptions(beam=4, n_best=4, max_len=8, need_weights=True)
    )
    for source, hyps in zip(sources, nbest, strict=True):
        assert len(hyps) == 4
        assert len({tuple(h.tokens) for h in hyps}) == 4
        forced = forced_weights(model, [(source, h.tokens) for h in hyps])
        width = len(source) + 1  # the source EOS; the columns after it are padding
        for h, expected in zip(hyps, forced, strict=True):
            assert h.weights.shape[0] == len(h.tokens) + 1 == expected.shape[0]
            torch.testing.assert_close(h.weights[..., :width], expected, atol=1e-5, rtol=0)
            assert not h.weights[..., width:].any()
        # Not vacuous: the beams' weights differ (mixing them up would show), and some
        # hypotheses ended early (their weights were taken from the beam mid-search).
        assert any(_differ(a, b) for i, a in enumerate(hyps) for b in hyps[i + 1 :])
        assert min(len(h.tokens) for h in hyps) < 7


@pytest.mark.parametrize("name", list(RANDOM_MODELS))
def test_beam_search_of_a_batch_finds_what_each_sentence_alone_finds(name):
    """Sentences leave the batch as they finish: those that go on are not disturbed."""
    model = _random_model(name)
    sources = [[4], [9, 10, 4], [4, 5, 6, 7, 8, 9]]  # length limits 7, 9 and 12 steps
    src, mask = pad_batch([[*s, EOS] for s in sources], torch.device("cpu"))
    options = SearchOptions(beam=3, n_best=3, max_len_ratio=1.0, need_weights=True)
    together = beam_search(model, src, mask, options)
    for i, source in enumerate(sources):
        alone_src, alone_mask = pad_batch([[*source, EOS]], torch.device("cpu"))
        (alone,) = beam_search(model, alone_src, alone_mask, options)
        assert [h.tokens for h in together[i]] == [h.tokens for h in alone]
        for a, b in zip(together[i], alone, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-5)
            width = len(source) + 1
            torch.testing.assert_close(a.weights[..., :width], b.weights, atol=1e-5, rtol=0)
    # Not vacuous: the sentences finish at different steps, so the batch shrinks mid-search.
    longest = [max(len(h.tokens) for h in hyps) for hyps in together]
    assert len(set(longest)) > 1, longest


def test_beam_wider_than_the_vocabulary_finds_every_sequence_in_order():
    """K = 13 covers every output of at most 2 words (UNK, a, b) before EOS, and 2K = 26
    is more than the 6 tokens a beam can extend by: the n-best list must be the whole
    set, ranked as brute force ranks it."""
    table = TableModel().table
    words = [1, 4, 5]  # UNK a b: PAD and BOS are never emitted
    sequences = [[]] + [[w] for w in words] + [[w, u] for w in words for u in words]

    def log_prob(tokens):
        prev = [BOS, *tokens]
        return float(sum(table[p, t] for p, t in zip(prev, [*tokens, EOS], strict=True)))

    want = sorted(sequences, key=log_prob, reverse=True)
    src, mask = _src(batch=1)
    hyps = beam_search(
        TableModel(), src, mask, SearchOptions(beam=13, n_best=13, alpha=0.0, max_len=3)
    )
    assert [h.tokens for h in hyps[0]] == want
    for h in hyps[0]:
        assert h.log_prob == pytest.approx(log_prob(h.tokens), abs=1e-4)
