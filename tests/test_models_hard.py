"""Hard attention in the RNN decoders (Xu et al. 2015 §4.1) and the REINFORCE terms."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnmt.attention.functional import attention_entropy
from attnmt.config import ModelConfig
from attnmt.models import build_model
from attnmt.training import reinforce_loss

V = 16

HARD = [
    {"name": "rnnsearch"},
    {"name": "rnnsearch", "scope": "local-p"},
    {"name": "luong", "attention": "general"},
    {"name": "luong", "attention": "general", "scope": "local-p", "input_feeding": False},
    {"name": "luong", "attention": "location", "scope": "local-m"},
]
IDS = ["-".join(str(v) for v in h.values()) for h in HARD]


def make_model(overrides: dict, seed: int = 0):
    torch.manual_seed(seed)
    cfg = ModelConfig(
        **{
            "embed_size": 8,
            "hidden_size": 8,
            "dropout": 0.0,
            "mode": "hard",
            "window": 2,
            "max_source_len": 16,
            **overrides,
        }
    )
    return build_model(cfg, V, V)


def batch():
    gen = torch.Generator().manual_seed(3)
    lengths = torch.tensor([6, 4, 5])
    mask = torch.arange(6)[None, :] < lengths[:, None]  # (B, S)
    src = torch.randint(4, V, (3, 6), generator=gen).masked_fill(~mask, 0)
    tgt_in = torch.randint(4, V, (3, 5), generator=gen)
    tgt_in[:, 0] = 2
    tgt_out = torch.randint(4, V, (3, 5), generator=gen)
    tgt_mask = torch.ones(3, 5, dtype=torch.bool)
    tgt_mask[1, 3:] = False
    return src, mask, tgt_in, tgt_out.masked_fill(~tgt_mask, 0), tgt_mask


def losses(model):
    src, mask, tgt_in, tgt_out, tgt_mask = batch()
    out = model(src, mask, tgt_in, need_weights=True)
    nll = F.cross_entropy(
        out.logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=0, reduction="none"
    ).view(3, 5)
    reward = -(nll.detach() * tgt_mask).sum(1)  # (B,) log p(y | x, s)
    term = reinforce_loss(
        out.attn_log_prob, out.attn_entropy, reward, -5.0, tgt_mask, entropy_weight=0.01
    )
    return out, nll.sum(), term


def attention_grads(model):
    return {n: p.grad for n, p in model.named_parameters() if n.startswith("attention.")}


@pytest.mark.parametrize("overrides", HARD, ids=IDS)
def test_train_mode_samples_one_position_per_step(overrides):
    model = make_model(overrides).train()
    out, _, _ = losses(model)
    weights = out.weights  # (B, T, S)
    assert weights.shape == (3, 5, 6)
    assert torch.all((weights == 0) | (weights == 1)) and torch.all(weights.sum(-1) == 1)
    _, mask, *_ = batch()
    assert torch.all(weights.masked_select(~mask[:, None, :].expand_as(weights)) == 0)
    assert out.attn_log_prob.shape == (3, 5) and torch.all(out.attn_log_prob <= 0)
    assert torch.all(out.attn_entropy >= 0) and torch.all(out.attn_entropy <= math.log(6) + 1e-5)


@pytest.mark.parametrize("overrides", HARD, ids=IDS)
def test_reinforce_term_is_the_only_gradient_to_the_attention(overrides):
    """With a sampled position the context does not depend on the scores: the cross-entropy
    gives the attention's parameters no gradient; the REINFORCE term does."""
    model = make_model(overrides).train()
    attention_names = list(attention_grads(model))
    assert attention_names  # every configuration here has attention parameters
    torch.manual_seed(7)
    _, nll, _ = losses(model)
    nll.backward()
    assert all(g is None or not g.any() for g in attention_grads(model).values())
    model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    _, _, term = losses(model)
    term.backward()
    reached = {n for n, g in attention_grads(model).items() if g is not None and g.abs().sum() > 0}
    assert reached == set(attention_names)


def test_eval_mode_argmax_and_soft():
    src, mask, tgt_in, *_ = batch()
    argmax = make_model({"name": "rnnsearch"}).eval()
    out = argmax(src, mask, tgt_in, need_weights=True)
    assert out.attn_log_prob is None and out.attn_entropy.shape == (3, 5)
    assert torch.all((out.weights == 0) | (out.weights == 1))
    torch.testing.assert_close(out.logits, argmax(src, mask, tgt_in).logits)  # deterministic
    soft = make_model({"name": "rnnsearch", "hard_eval": "soft"}).eval()
    weights = soft(src, mask, tgt_in, need_weights=True).weights
    assert not torch.all((weights == 0) | (weights == 1))  # a distribution, not one-hot
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 5))
    # Same parameters (same seed): only evaluation differs; training is identical.
    soft.train(), argmax.train()
    torch.manual_seed(1)
    a = argmax(src, mask, tgt_in).logits
    torch.manual_seed(1)
    torch.testing.assert_close(soft(src, mask, tgt_in).logits, a)


def test_training_samples_vary_and_follow_the_generator_seed():
    model = make_model({"name": "luong", "attention": "general"}).train()
    src, mask, tgt_in, *_ = batch()
    torch.manual_seed(0)
    a = model(src, mask, tgt_in, need_weights=True).weights
    torch.manual_seed(0)
    torch.testing.assert_close(model(src, mask, tgt_in, need_weights=True).weights, a)
    draws = [model(src, mask, tgt_in, need_weights=True).weights for _ in range(5)]
    assert any(not torch.equal(d, a) for d in draws)


def test_reinforce_loss_by_hand():
    log_prob = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, -4.0]], requires_grad=True)
    entropy = torch.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 9.0]], requires_grad=True)
    reward = torch.tensor([-3.0, -1.0])
    tgt_mask = torch.tensor([[True, True, True], [True, True, False]])
    loss = reinforce_loss(log_prob, entropy, reward, -2.0, tgt_mask, entropy_weight=0.1)
    # -[(-3 + 2)(-6) + (-1 + 2)(-1)] - 0.1 (3 + 4) = -(6 - 1) - 0.7
    assert float(loss.detach()) == pytest.approx(-5.7)
    loss.backward()
    expected = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, 0.0]])  # -(R - b) · mask
    torch.testing.assert_close(log_prob.grad, expected)
    torch.testing.assert_close(entropy.grad, -0.1 * tgt_mask.float())  # maximises entropy


def test_reinforce_loss_never_differentiates_the_reward():
    reward = torch.tensor([1.0], requires_grad=True)
    log_prob = torch.tensor([[-1.0]], requires_grad=True)
    ones = torch.ones(1, 1, dtype=torch.bool)
    reinforce_loss(log_prob, None, reward, torch.tensor(0.5), ones, entropy_weight=0.0).backward()
    assert reward.grad is None and float(log_prob.grad) == -0.5


def test_attention_entropy():
    probs = torch.tensor([[[0.5, 0.5, 0.0, 0.0], [0.25] * 4, [1.0, 0.0, 0.0, 0.0]]])
    probs.requires_grad_(True)
    entropy = attention_entropy(probs)
    torch.testing.assert_close(entropy, torch.tensor([[math.log(2), math.log(4), 0.0]]))
    entropy.sum().backward()
    assert torch.isfinite(probs.grad).all()
