"""attnmt.attention.functional: the pure pieces models and tests build on."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmt.attention import functional as AF


def test_masked_softmax_zeroes_masked_positions_exactly():
    scores = torch.tensor([[1.0, 2.0, 3.0, -1e30]])
    mask = torch.tensor([[True, False, True, True]])
    weights = AF.masked_softmax(scores, mask)
    assert weights[0, 1] == 0 and weights[0, 3] == 0  # masked, and underflowed to 0
    expected = torch.tensor([1.0, 3.0]).softmax(-1)
    torch.testing.assert_close(weights[0, [0, 2]], expected)
    torch.testing.assert_close(AF.masked_softmax(scores[:, :3]), scores[:, :3].softmax(-1))


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    scores = torch.randn(2, 3, requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    weights = AF.masked_softmax(scores, mask)
    assert (weights[1] == 0).all()
    log_probs = AF.masked_log_softmax(scores, mask)
    assert (log_probs[1] == float("-inf")).all() and log_probs[0, 2] == float("-inf")
    torch.testing.assert_close(log_probs[0, :2].exp(), weights[0, :2])
    (weights * torch.randn(2, 3)).sum().backward()
    assert torch.isfinite(scores.grad).all() and (scores.grad[1] == 0).all()


def test_attend_is_a_weighted_sum():
    weights = torch.tensor([[[0.25, 0.75]]])  # (B, T, S)
    value = torch.tensor([[[4.0, 0.0], [0.0, 8.0]]])  # (B, S, Dv)
    assert AF.attend(weights, value).tolist() == [[[1.0, 6.0]]]


def test_causal_mask_aligns_the_ends():
    assert AF.causal_mask(3).tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]
    # T = 2 queries are the last two of S = 4 positions: s <= t + (S - T)
    assert AF.causal_mask(2, 4).tolist() == [[True, True, True, False], [True] * 4]
    assert AF.causal_mask(1, 5).all()  # one decoding step sees the whole cache


def test_local_window_and_gaussian():
    center = torch.tensor([[1.0, 2.5]])  # (B, T)
    window = AF.local_window_mask(center, 6, 1)
    # 2D + 1 positions around the nearest position (2.5 -> 3), Luong's a_t ∈ R^{2D+1}
    assert window.int().tolist() == [[[1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 0]]]
    gaussian = AF.gaussian_window(center, 6, sigma=0.5)
    assert gaussian[0, 0, 1] == 1.0
    torch.testing.assert_close(gaussian[0, 0, 2], torch.tensor(2.0).mul(-1).exp())
    log = AF.gaussian_window(center, 6, sigma=0.5, log=True)
    torch.testing.assert_close(log.exp(), gaussian)


def test_source_lengths_from_padding_masks():
    padding = torch.tensor([[True, True, True], [True, False, False], [False, False, False]])
    assert AF.source_lengths(padding).tolist() == [3, 1, 0]
    per_step = padding.unsqueeze(1).expand(3, 2, 3)  # (B, T, S)
    assert AF.source_lengths(per_step).tolist() == [3, 1, 0]


def test_sample_positions_never_draws_a_zero_weight():
    torch.manual_seed(0)
    probs = torch.tensor([[0.0, 0.5, 0.5, 0.0]]).expand(500, 4)
    index = AF.sample_positions(probs)
    assert set(index.tolist()) == {1, 2}
    gen = torch.Generator().manual_seed(1)
    first = AF.sample_positions(probs, generator=gen)
    gen.manual_seed(1)
    assert torch.equal(first, AF.sample_positions(probs, generator=gen))
    assert AF.sample_positions(torch.zeros(2, 3)).shape == (2,)  # dead rows still draw


def test_expand_mask_shapes():
    assert AF.expand_mask(None, 2, 3, 4) is None
    assert AF.expand_mask(torch.ones(2, 4, dtype=torch.bool), 2, 3, 4).shape == (2, 1, 4)
    assert AF.expand_mask(torch.ones(2, 1, 4, dtype=torch.bool), 2, 3, 4).shape == (2, 1, 4)
    assert AF.expand_mask(torch.ones(2, 3, 4, dtype=torch.bool), 2, 3, 4).shape == (2, 3, 4)
    with pytest.raises(ValueError, match=r"\(B=2, S=4\) or \(B=2, T=3, S=4\), got \(4, 2\)"):
        AF.expand_mask(torch.ones(4, 2, dtype=torch.bool), 2, 3, 4)
    with pytest.raises(ValueError, match=r"dtype torch\.int64"):
        AF.expand_mask(torch.ones(2, 4, dtype=torch.long), 2, 3, 4)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_fused_equals_explicit_and_torch(causal):
    torch.manual_seed(0)
    query, key, value = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 6)
    mask = torch.ones(2, 1, 3, 5, dtype=torch.bool)  # (B, 1, T, S)
    mask[0, 0, :, 3:] = False
    fused = AF.scaled_dot_product(query, key, value, mask, causal=causal)
    explicit = AF.scaled_dot_product(query, key, value, mask, causal=causal, need_weights=True)
    assert fused.weights is None and explicit.weights.shape == (2, 2, 3, 5)
    torch.testing.assert_close(fused.context, explicit.context)
    full = mask & AF.causal_mask(3, 5) if causal else mask
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=full)
    torch.testing.assert_close(fused.context, expected)


def test_scaled_dot_product_fully_masked_rows_are_zero_not_nan():
    query, key, value = (torch.randn(1, 3, 4, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[[True, False, True], [False, False, False], [True, True, True]]])
    for need_weights in (False, True):
        out = AF.scaled_dot_product(query, key, value, mask, need_weights=need_weights)
        assert torch.isfinite(out.context).all() and (out.context[0, 1] == 0).all()
        out.context.sum().backward()
        for tensor in (query, key, value):
            assert torch.isfinite(tensor.grad).all()
            tensor.grad = None
    causal = AF.scaled_dot_product(query, key, value, causal=True)  # T == S, is_causal path
    explicit = AF.scaled_dot_product(query, key, value, causal=True, need_weights=True)
    torch.testing.assert_close(causal.context, explicit.context)
    assert (explicit.weights[0].triu(1) == 0).all()


def _sdpa_ops(query, key, value, mask):
    """The ATen operators one fused-attention call ran (forward)."""
    import warnings

    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():  # torch 2.11's profiler warns that it clears its events
        warnings.filterwarnings("ignore", "Warning: Profiler clears events")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            context = AF.scaled_dot_product(query, key, value, mask).context
    return context, {e.key for e in prof.key_averages()}


@pytest.mark.parametrize(("keys", "path"), [(32, "math"), (256, "flash")])
def test_bf16_on_the_cpu_takes_the_math_path_for_short_keys(keys, path):
    """bf16 short sequences: the math path (measured faster there), same values."""
    torch.manual_seed(0)
    query, key, value = (torch.randn(2, 4, n, 16) for n in (8, keys, keys))
    mask = torch.ones(2, 1, 1, keys, dtype=torch.bool)
    mask[0, ..., keys // 2 :] = False
    want = AF.scaled_dot_product(query, key, value, mask).context  # fp32: the fused kernel
    low = [t.to(torch.bfloat16) for t in (query, key, value)]
    context, ops = _sdpa_ops(*low, mask)
    # bf16 keeps 8 significant bits: q, k, v rounded by up to 2^-8 relative move each score
    # (16 products over sqrt(16)) by up to ~0.02, the weights by ~2% and the context by a few
    # hundredths at most. Measured: 0.005 at most, on an Intel Xeon with AMX and with AVX2 or
    # AVX512-BF16 kernels alike (tests/README.md).
    torch.testing.assert_close(context.float(), want, atol=0.05, rtol=0.05)
    math_ran = "aten::_scaled_dot_product_attention_math" in ops
    assert math_ran == (path == "math"), sorted(o for o in ops if "scaled" in o)


def test_gpu_attention_never_takes_cudnn():
    """cuDNN's attention plans every new batch shape (192 ms bf16 steps on an H200 against
    41 without it): it is left out of the GPU backends, and the others stay in."""
    from torch.nn.attention import SDPBackend

    assert SDPBackend.CUDNN_ATTENTION not in AF.GPU_BACKENDS
    assert {SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION} <= set(AF.GPU_BACKENDS)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_bf16_attention_with_a_padding_mask_on_a_gpu_skips_cudnn():
    torch.manual_seed(0)
    query, key, value = (torch.randn(8, 4, 40, 64, device="cuda", dtype=torch.bfloat16)
                         for _ in range(3))  # fmt: skip
    mask = torch.ones(8, 1, 1, 40, dtype=torch.bool, device="cuda")
    mask[0, ..., 20:] = False
    context, ops = _sdpa_ops(query, key, value, mask)
    assert not any("cudnn" in op for op in ops), sorted(o for o in ops if "attention" in o)
    want = AF.scaled_dot_product(query.float(), key.float(), value.float(), mask).context
    torch.testing.assert_close(context.float(), want, atol=0.05, rtol=0.05)
