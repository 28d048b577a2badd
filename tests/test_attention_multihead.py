"""MultiHeadAttention: equal to torch.nn.MultiheadAttention (after converting the mask
polarity: torch's key_padding_mask and bool attn_mask mean True = ignore), fused path equal
to explicit path, fully masked rows, causal masks and incremental decoding."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnmt.attention import MultiHeadAttention
from attnmt.attention import functional as AF

# fp32 at D <= 12: sums of a dozen products in another order (torch's own fast path, MKL or
# oneDNN by CPU) differ by ~1e-7 relative. The comparisons with torch used 1.2% of this at
# most on an Intel Xeon with AMX and with AVX2 or AVX512-BF16 kernels (tests/README.md).
TOL = {"atol": 1e-5, "rtol": 1e-5}


def torch_pair(embed_dim=8, heads=2, **kwargs):
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(embed_dim, heads, batch_first=True, **kwargs)
    with torch.no_grad():  # torch starts its biases at zero: make them matter
        for name, param in reference.named_parameters():
            if "bias" in name:
                param.normal_()
    return reference.eval(), MultiHeadAttention.from_torch(reference).eval()


@pytest.mark.parametrize("average", [True, False])
def test_from_torch_equals_torch_without_masks(average):
    reference, ours = torch_pair()
    query, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    expected, expected_weights = reference(
        query, memory, memory, need_weights=True, average_attn_weights=average
    )
    out = ours(query, memory, memory, need_weights=True, average_weights=average)
    assert out.weights.shape == ((2, 3, 5) if average else (2, 2, 3, 5))
    torch.testing.assert_close(out.context, expected, **TOL)
    torch.testing.assert_close(out.weights, expected_weights, **TOL)
    fused = ours(query, memory, memory)  # no weights: the fused kernel
    assert fused.weights is None
    torch.testing.assert_close(fused.context, expected, **TOL)


def test_from_torch_equals_torch_with_key_padding():
    reference, ours = torch_pair()
    query, memory = torch.randn(3, 4, 8), torch.randn(3, 6, 8)
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3, [False, True] * 3])  # (B, S)
    expected, weights = reference(query, memory, memory, key_padding_mask=~mask)  # True = ignore
    for need_weights in (True, False):
        out = ours(query, memory, memory, mask, need_weights=need_weights, average_weights=True)
        torch.testing.assert_close(out.context, expected, **TOL)
    torch.testing.assert_close(out.weights, weights, **TOL)


def test_from_torch_equals_torch_causal_self_attention_with_padding():
    reference, ours = torch_pair(embed_dim=12, heads=3)
    x = torch.randn(2, 5, 12)
    padding = torch.tensor([[True] * 5, [True] * 4 + [False]])
    causal = AF.causal_mask(5)  # (T, S), True = may attend
    expected, weights = reference(
        x, x, x, key_padding_mask=~padding, attn_mask=~causal, need_weights=True
    )
    for need_weights in (True, False):
        out = ours(x, x, x, padding, causal=True, need_weights=need_weights, average_weights=True)
        torch.testing.assert_close(out.context, expected, **TOL)
    torch.testing.assert_close(out.weights, weights, **TOL)


def test_from_torch_with_different_key_and_value_widths():
    reference, ours = torch_pair(embed_dim=8, heads=4, kdim=6, vdim=5)
    assert not reference._qkv_same_embed_dim  # separate q/k/v_proj_weight
    assert (ours.kdim, ours.vdim) == (6, 5) and ours.k_proj.in_features == 6
    query, key, value = torch.randn(2, 3, 8), torch.randn(2, 4, 6), torch.randn(2, 4, 5)
    mask = torch.tensor([[True] * 4, [True, False, True, False]])
    expected, weights = reference(query, key, value, key_padding_mask=~mask)
    out = ours(query, key, value, mask, average_weights=True)
    torch.testing.assert_close(out.context, expected, **TOL)
    torch.testing.assert_close(out.weights, weights, **TOL)


def test_from_torch_without_bias_and_unsupported_options():
    reference, ours = torch_pair(bias=False)
    assert ours.q_proj.bias is None and ours.out_proj.bias is None
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ours(x, x, x).context, reference(x, x, x)[0], **TOL)
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))


def test_fused_equals_explicit_in_training_mode_without_dropout():
    _, ours = torch_pair()
    ours.train()
    query, memory = torch.randn(2, 4, 8), torch.randn(2, 6, 8)
    mask = torch.ones(2, 4, 6, dtype=torch.bool)
    mask[0, :, 4:] = False
    mask[1, 2] = False  # a fully masked row
    for causal in (False, True):
        fused = ours(query, memory, memory, mask, causal=causal)
        explicit = ours(query, memory, memory, mask, causal=causal, need_weights=True)
        torch.testing.assert_close(fused.context, explicit.context, **TOL)
        assert explicit.weights.shape == (2, 2, 4, 6)


def test_fully_masked_rows_give_the_output_bias_and_finite_gradients():
    _, ours = torch_pair()
    query = torch.randn(2, 3, 8, requires_grad=True)
    memory = torch.randn(2, 4, 8, requires_grad=True)
    mask = torch.tensor([[True] * 4, [False] * 4])  # sentence 1: nothing to attend
    for need_weights in (False, True):
        out = ours(query, memory, memory, mask, need_weights=need_weights)
        # a zero context per head, so the output is out_proj's bias
        torch.testing.assert_close(out.context[1], ours.out_proj.bias.expand(3, 8))
        if need_weights:
            assert (out.weights[1] == 0).all()
        out.context.sum().backward()
        assert torch.isfinite(query.grad).all() and torch.isfinite(memory.grad).all()
        query.grad = memory.grad = None


def test_causal_with_fewer_queries_than_keys_aligns_the_ends():
    _, ours = torch_pair()
    query, memory = torch.randn(1, 2, 8), torch.randn(1, 4, 8)
    out = ours(query, memory, memory, causal=True, average_weights=True)
    assert (out.weights[0, 0, 3] == 0) and (out.weights[0, 0, :3] > 0).all()  # s <= 0 + 2
    assert (out.weights[0, 1] > 0).all()  # s <= 1 + 2


def test_incremental_decoding_with_a_cache_matches_the_full_pass():
    _, ours = torch_pair()
    x = torch.randn(2, 5, 8)
    padding = torch.tensor([[True] * 5, [True] * 5])
    full = ours(x, x, x, padding, causal=True)
    cache_k = cache_v = None
    for t in range(5):
        step = x[:, t : t + 1]  # (B, 1, D)
        k, v = ours.precompute_kv(step, step)  # (B, H, 1, Dh)
        cache_k = k if cache_k is None else torch.cat([cache_k, k], dim=2)
        cache_v = v if cache_v is None else torch.cat([cache_v, v], dim=2)
        mask = padding[:, : t + 1].unsqueeze(1)  # (B, 1, S)
        cached = ours(step, None, None, mask, causal=True, projected_kv=(cache_k, cache_v))
        torch.testing.assert_close(cached.context, full.context[:, t : t + 1], **TOL)
        raw = ours(step, x[:, : t + 1], x[:, : t + 1], padding[:, : t + 1], causal=True)
        torch.testing.assert_close(raw.context, full.context[:, t : t + 1], **TOL)


def test_dropout_only_in_training():
    torch.manual_seed(0)
    ours = MultiHeadAttention(8, 2, dropout=0.5)
    x = torch.randn(2, 3, 8)
    ours.eval()
    first, second = ours(x, x, x), ours(x, x, x, need_weights=True)
    torch.testing.assert_close(first.context, second.context)
    ours.train()
    dropped = ours(x, x, x, need_weights=True)
    assert (dropped.weights == 0).any()
    torch.testing.assert_close(dropped.context, ours.out_proj(_merge(dropped.weights, x, ours)))


def _merge(weights, x, mha):
    v = mha._split_heads(mha.v_proj(x))  # (B, H, S, Dh)
    context = (weights @ v).transpose(1, 2)  # (B, T, H, Dh)
    return context.reshape(x.shape[0], x.shape[1], mha.embed_dim)  # (B, T, D)


def test_bad_inputs():
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads"):
        MultiHeadAttention(10, 3)
    mha = MultiHeadAttention(8, 2, kdim=6)
    with pytest.raises(ValueError, match=r"query must have shape \(B, T, D=8\), got \(2, 3, 6\)"):
        mha(torch.randn(2, 3, 6), torch.randn(2, 4, 6), torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=r"key must have shape \(B, S, kdim=6\), got \(2, 4, 8\)"):
        mha(torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        mha(torch.randn(2, 3, 8), torch.randn(2, 4, 6), torch.randn(2, 4, 8), torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"projected_kv\[0\] \(keys\) must have shape"):
        mha(torch.randn(2, 3, 8), None, None, projected_kv=(torch.randn(2, 4, 8),) * 2)
