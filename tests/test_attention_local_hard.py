"""Scopes (local-m, local-p: Luong et al. 2015 §3.2) and hard mode (Xu et al. 2015 §4.1)."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt import attention


def inputs(batch=2, tgt_len=4, src_len=9, dim=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, tgt_len, dim, generator=gen),
        torch.randn(batch, src_len, dim, generator=gen),
        torch.randn(batch, src_len, 3, generator=gen),
    )


@pytest.mark.parametrize("window", [1, 2, 3])
def test_local_m_centres_on_t_and_is_zero_outside_the_window(window):
    torch.manual_seed(0)
    attn = attention.build("general", query_dim=4, scope="local-m", window=window)
    query, key, value = inputs(tgt_len=9)
    out = attn(query, key, value)
    s = torch.arange(9)
    for t in range(9):
        assert (out.position[:, t] == t).all()  # p_t = t
        inside = (s - t).abs() <= window
        assert (out.weights[:, t, ~inside] == 0).all()
        assert (out.weights[:, t, inside] > 0).all()  # the whole window, clipped to [0, S)
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, 9))


def test_local_m_positions_tensor_and_offset():
    torch.manual_seed(0)
    attn = attention.build("dot", query_dim=4, scope="local-m", window=1)
    query, key, value = inputs(tgt_len=2)
    positions = torch.tensor([[5, 0], [8, 3]])
    out = attn(query, key, value, positions=positions)
    assert out.position.tolist() == [[5.0, 0.0], [8.0, 3.0]]
    assert out.weights[0, 0].nonzero().flatten().tolist() == [4, 5, 6]
    assert out.weights[1, 0].nonzero().flatten().tolist() == [7, 8]  # clipped at S - 1
    shifted = attn(query, key, value, positions=4)  # an int t0: positions t0, t0 + 1, ...
    assert shifted.position.tolist() == [[4.0, 5.0], [4.0, 5.0]]
    # Past the source's end p_t stays at its last position (S - 1 = 8): never a blind step.
    beyond = attn(query, key, value, positions=20)
    assert beyond.position.tolist() == [[8.0, 8.0], [8.0, 8.0]]
    assert (beyond.weights[..., :7] == 0).all() and (beyond.weights.sum(-1) > 0.99).all()


def test_local_p_weights_are_softmax_times_the_gaussian():
    torch.manual_seed(0)
    window = 3
    attn = attention.build("additive", query_dim=4, scope="local-p", window=window)
    query, key, value = inputs(tgt_len=5, src_len=12)
    out = attn(query, key, value)
    s = torch.arange(12, dtype=torch.float32)
    p = out.position.unsqueeze(-1)  # (B, T, 1)
    sigma = window / 2
    gaussian = torch.exp(-((s - p) ** 2) / (2 * sigma**2))  # Luong eq. 10
    inside = (s - torch.floor(p + 0.5)).abs() <= window  # 2D + 1 around the nearest position
    assert (out.weights[~inside] == 0).all() and (out.probs[~inside] == 0).all()
    assert (out.probs[inside] > 0).all()
    ratio = out.weights[inside] / out.probs[inside]
    torch.testing.assert_close(ratio, gaussian.expand_as(inside)[inside])
    torch.testing.assert_close(out.probs.sum(-1), torch.ones(2, 5))  # softmax over window
    assert (out.weights.sum(-1) < 1).all()  # the Gaussian makes rows sum to less than 1
    torch.testing.assert_close(out.context, out.weights @ value)


def test_local_p_position_uses_the_true_source_length():
    attn = attention.build("dot", query_dim=4, scope="local-p", window=2)
    with torch.no_grad():
        attn.predictor.v_p.weight.zero_()  # sigmoid(0) = 1/2: p_t = S / 2
    query, key, value = inputs(batch=3, tgt_len=2, src_len=8)
    padding = torch.tensor([[True] * 8, [True] * 4 + [False] * 4, [False] * 8])  # (B, S)
    out = attn(query, key, value, padding)
    assert out.position.tolist() == [[4.0, 4.0], [2.0, 2.0], [0.0, 0.0]]
    no_mask = attn(query, key, value)
    assert (no_mask.position == 4.0).all()
    per_step = padding.unsqueeze(1).expand(3, 2, 8).clone()  # (B, T, S): same lengths
    per_step[1, 0, 3] = False  # a hole does not shorten the sentence
    assert attn(query, key, value, per_step).position.tolist() == out.position.tolist()


def test_local_p_position_lies_in_zero_to_s():
    torch.manual_seed(1)
    attn = attention.build("general", query_dim=4, scope="local-p", window=2)
    with torch.no_grad():
        attn.predictor.v_p.weight.mul_(100.0)  # saturate the sigmoid both ways
    query, key, value = inputs(batch=2, tgt_len=30, src_len=7)
    position = attn(query, key, value).position
    assert position.min() >= 0.0 and position.max() <= 7.0
    assert position.min() < 0.5 and position.max() > 6.5


def hard_and_soft(score="general", scope="global", seed=0):
    torch.manual_seed(seed)
    hard = attention.build(score, query_dim=4, scope=scope, window=2, mode="hard")
    torch.manual_seed(seed)
    soft = attention.build(score, query_dim=4, scope=scope, window=2, mode="soft")
    return hard, soft


@pytest.mark.parametrize("scope", ["global", "local-m", "local-p"])
def test_hard_is_one_hot_with_the_log_probability_of_its_choice(scope):
    hard, _ = hard_and_soft(scope=scope)
    query, key, value = inputs(tgt_len=6)
    torch.manual_seed(3)
    out = hard(query, key, value)
    index = out.weights.argmax(-1)  # (B, T)
    torch.testing.assert_close(out.weights, torch.nn.functional.one_hot(index, 9).float())
    chosen = out.probs.gather(-1, index.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(out.log_prob, chosen.log())
    torch.testing.assert_close(out.context, value.gather(1, index.unsqueeze(-1).expand(2, 6, 3)))


def test_hard_eval_takes_the_argmax_of_the_soft_weights():
    hard, soft = hard_and_soft()
    query, key, value = inputs(tgt_len=6)
    soft_out = soft(query, key, value)
    hard_out = hard.eval()(query, key, value)
    assert torch.equal(hard_out.weights.argmax(-1), soft_out.weights.argmax(-1))
    torch.testing.assert_close(hard_out.probs, soft_out.weights)
    again = hard(query, key, value)
    assert torch.equal(again.weights, hard_out.weights)  # deterministic in eval


def test_hard_local_p_samples_from_the_gaussian_weighted_softmax():
    hard, soft = hard_and_soft(scope="local-p")
    query, key, value = inputs(tgt_len=6)
    soft_out = soft(query, key, value)
    hard_out = hard.eval()(query, key, value)
    renormalised = soft_out.weights / soft_out.weights.sum(-1, keepdim=True)
    torch.testing.assert_close(hard_out.probs, renormalised)


def test_hard_samples_follow_the_soft_distribution():
    hard, _ = hard_and_soft()
    draws = 4000
    query = torch.randn(1, 1, 4).expand(1, draws, 4)  # the same query, many times
    key, value = torch.randn(1, 5, 4), torch.randn(1, 5, 3)
    mask = torch.tensor([[True, True, False, True, True]])
    torch.manual_seed(0)
    out = hard(query, key, value, mask)
    frequencies = out.weights[0].mean(0)  # (S,)
    # A frequency over 4,000 draws has a standard error of sqrt(p (1 - p) / 4000) <= 0.008:
    # 0.03 is 3.8 of them, whatever the CPU's rounding of the probabilities.
    torch.testing.assert_close(frequencies, out.probs[0, 0], atol=0.03, rtol=0)
    assert frequencies[2] == 0


def test_hard_reinforce_gradient_is_the_score_function():
    """d log_prob / d scores = one_hot - probs, so REINFORCE moves the choice's score."""
    hard, _ = hard_and_soft(score="dot")
    query, key, value = inputs(batch=1, tgt_len=1, src_len=4)
    key.requires_grad_(True)
    torch.manual_seed(0)
    out = hard(query, key, value)
    out.log_prob.sum().backward()
    score_grad = out.weights - out.probs  # (1, 1, S)
    expected = score_grad[0, 0].unsqueeze(-1) * query[0, 0]  # d score_s / d key_s = query
    torch.testing.assert_close(key.grad[0], expected.detach())


def test_fully_masked_hard_row_has_zero_log_prob_and_gradient():
    hard, _ = hard_and_soft()
    query, key, value = inputs(batch=2, tgt_len=2, src_len=4)
    query.requires_grad_(True)
    mask = torch.tensor([[True] * 4, [False] * 4])
    out = hard(query, key, value, mask)
    assert (out.log_prob[1] == 0).all() and (out.weights[1] == 0).all()
    assert math.isfinite(out.log_prob.sum().item())
    out.log_prob.sum().backward()
    assert torch.isfinite(query.grad).all() and (query.grad[1] == 0).all()
