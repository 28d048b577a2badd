"""The Transformer: key/value cache, fused attention path, causality, positions, norms,
tied embeddings."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnmt.config import ModelConfig
from attnmt.models import Transformer, build_model
from attnmt.models.transformer import sinusoidal_positions

V = 20


def make_model(seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    values = {"name": "transformer", "hidden_size": 8, "heads": 2, "ff_size": 16, "layers": 2}
    return build_model(ModelConfig(**{**values, "dropout": 0.0, **overrides}), V, V)


def batch():
    gen = torch.Generator().manual_seed(4)
    mask = torch.arange(6)[None, :] < torch.tensor([6, 3])[:, None]  # (B, S)
    src = torch.randint(4, V, (2, 6), generator=gen).masked_fill(~mask, 0)
    tgt_in = torch.randint(4, V, (2, 7), generator=gen)
    tgt_in[:, 0] = 2
    return src, mask, tgt_in


@pytest.mark.parametrize("pre_norm", [True, False])
def test_cache_grows_and_equals_full_forward(pre_norm):
    model = make_model(pre_norm=pre_norm).eval()
    src, mask, tgt_in = batch()
    with torch.no_grad():
        full = model(src, mask, tgt_in, need_weights=True)
        memory = model.encode(src, mask)
        assert [kv[0].shape for kv in memory.cross_kv] == [(2, 2, 6, 4)] * 2  # (B, H, S, Dh)
        state = model.init_state(memory)
        for t in range(tgt_in.shape[1]):
            logits, state, weights = model.step(tgt_in[:, t], state, memory, need_weights=True)
            assert state.step == t + 1
            assert [kv[1].shape for kv in state.self_kv] == [(2, 2, t + 1, 4)] * 2
            torch.testing.assert_close(logits, full.logits[:, t], atol=1e-5, rtol=0)
            torch.testing.assert_close(weights, full.weights[:, :, :, t], atol=1e-5, rtol=0)


def test_fused_attention_unless_weights_are_asked(monkeypatch):
    """need_weights=False: all 3L attention calls of a forward (and 2L per step) use the
    fused kernel; need_weights=True moves only the L cross-attentions off it."""
    calls = []
    fused = F.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(kwargs.get("is_causal", False))
        return fused(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    model = make_model().train()
    src, mask, tgt_in = batch()
    model(src, mask, tgt_in)
    assert len(calls) == 6 and calls.count(True) == 2  # decoder self-attention: is_causal
    calls.clear()
    model(src, mask, tgt_in, need_weights=True)
    assert len(calls) == 4
    calls.clear()
    memory = model.encode(src, mask)
    calls.clear()
    model.step(tgt_in[:, 0], model.init_state(memory), memory)
    assert len(calls) == 4


def test_causal_and_padding_invariant():
    """Changing a later target token leaves earlier logits alone; changing a padded source
    token changes nothing."""
    model = make_model().eval()
    src, mask, tgt_in = batch()
    with torch.no_grad():
        base = model(src, mask, tgt_in).logits
        later = tgt_in.clone()
        later[:, 4] = 5
        changed = model(src, mask, later).logits
        padded = src.clone()
        padded[1, 4] = 7
        noisy_pad = model(padded, mask, tgt_in).logits
    torch.testing.assert_close(changed[:, :4], base[:, :4])  # inputs 0..3 unchanged
    assert not torch.allclose(changed[:, 4:], base[:, 4:])
    torch.testing.assert_close(noisy_pad, base)


def test_sinusoidal_positions():
    table = sinusoidal_positions(0, 50, 6, device=torch.device("cpu"), dtype=torch.float32)
    assert table.shape == (50, 6)
    torch.testing.assert_close(table[0], torch.tensor([0.0, 1.0] * 3))
    pos, i = 7, 1  # PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...)
    assert float(table[pos, 2 * i]) == pytest.approx(math.sin(pos / 10000 ** (2 * i / 6)))
    assert float(table[pos, 2 * i + 1]) == pytest.approx(math.cos(pos / 10000 ** (2 * i / 6)))
    shifted = sinusoidal_positions(7, 3, 6, device=torch.device("cpu"), dtype=torch.float32)
    torch.testing.assert_close(shifted, table[7:10])
    odd = sinusoidal_positions(0, 4, 5, device=torch.device("cpu"), dtype=torch.float32)
    assert odd.shape == (4, 5)


def test_norms_tying_and_init():
    pre, post = make_model(pre_norm=True), make_model(pre_norm=False)
    assert isinstance(pre.encoder_norm, torch.nn.LayerNorm)
    assert isinstance(post.encoder_norm, torch.nn.Identity)
    assert pre.generator.weight is pre.tgt_embed.weight
    assert pre.src_embed.weight is not pre.tgt_embed.weight
    untied = make_model(tie_embeddings=False)
    assert untied.generator.weight is not untied.tgt_embed.weight
    assert not untied.tgt_embed.weight[0].any()  # PAD row
    wide = make_model(hidden_size=64, heads=4)
    std = float(wide.src_embed.weight.detach()[1:].std())
    # A sample of 19 x 64 draws: its std's standard error is 1 / sqrt(2 n) = 2%, so 10% is 5.
    assert std == pytest.approx(64**-0.5, rel=0.1)
    assert len(pre.state_dict()) == len(post.state_dict()) + 4  # two final norms


def test_gradients_with_dropout_in_train_mode():
    model = make_model(dropout=0.3).train()
    src, mask, tgt_in = batch()
    a, b = model(src, mask, tgt_in).logits, model(src, mask, tgt_in).logits
    assert not torch.allclose(a, b)
    a.sum().backward()
    # Every parameter gets a non-zero gradient (a zero one is a dead parameter too).
    dead = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert dead == []
