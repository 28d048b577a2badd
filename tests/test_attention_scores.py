"""The scores, checked against numbers worked out by hand, the papers' formulas and each
other; key precomputation; and the errors for bad names and shapes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnmt import attention


def weights_of(attn, query, keys, mask=None):
    """Weights for one sentence: query (T, Dq) and keys (S, Dk) as Python lists."""
    query = torch.tensor([query], dtype=torch.float32)  # (1, T, Dq)
    keys = torch.tensor([keys], dtype=torch.float32)  # (1, S, Dk)
    return attn(query, keys, keys, mask).weights[0]  # (T, S)


def set_weight(linear: torch.nn.Linear, values) -> None:
    with torch.no_grad():
        linear.weight.copy_(torch.as_tensor(values, dtype=torch.float32))


def test_dot_two_keys_one_apart_give_one_and_e():
    attn = attention.build("dot", query_dim=2)
    weights = weights_of(attn, [[1.0, 0.0]], [[1.0, 5.0], [2.0, -3.0]])  # scores 1 and 2
    expected = torch.tensor([[1.0, math.e]]) / (1.0 + math.e)
    torch.testing.assert_close(weights, expected)


def test_scaled_dot_divides_by_sqrt_dk():
    attn = attention.build("scaled_dot", query_dim=4)
    # scores 1 and 4, over sqrt(4) = 2: 0.5 and 2, one and a half apart
    weights = weights_of(attn, [[1.0, 1.0, 1.0, 1.0]], [[1.0, 0, 0, 0], [1.0, 1.0, 1.0, 1.0]])
    expected = torch.tensor([[1.0, math.exp(1.5)]]) / (1.0 + math.exp(1.5))
    torch.testing.assert_close(weights, expected)


def test_general_with_identity_equals_dot_and_maps_widths():
    general = attention.build("general", query_dim=3)
    set_weight(general.score.W_a, torch.eye(3))
    dot = attention.build("dot", query_dim=3)
    query, keys = [[0.3, -1.0, 2.0]], [[1.0, 0.0, 0.5], [0.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
    torch.testing.assert_close(weights_of(general, query, keys), weights_of(dot, query, keys))
    wide = attention.build("general", query_dim=2, key_dim=3)
    set_weight(wide.score.W_a, [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # W_a: (Dq, Dk)
    # hᵀ W_a h̄ = [1, 0] . [h̄_0, h̄_2]: scores 0 and 1
    weights = weights_of(wide, [[1.0, 0.0]], [[0.0, 9.0, 5.0], [1.0, -9.0, 0.0]])
    torch.testing.assert_close(weights, torch.tensor([[1.0, math.e]]) / (1.0 + math.e))


def test_additive_by_hand():
    attn = attention.build("additive", query_dim=2, key_dim=2, hidden_dim=2)
    set_weight(attn.score.W_a, torch.eye(2))
    set_weight(attn.score.U_a, torch.eye(2))
    set_weight(attn.score.v_a, [[1.0, 1.0]])
    weights = weights_of(attn, [[0.5, -1.0]], [[1.0, 0.0], [0.0, 2.0]])
    e = [math.tanh(1.5) + math.tanh(-1.0), math.tanh(0.5) + math.tanh(1.0)]  # e_ij, eq. 6
    expected = torch.tensor([e]).softmax(-1)
    torch.testing.assert_close(weights, expected)


def test_concat_matches_the_concatenation_formula():
    torch.manual_seed(0)
    attn = attention.build("concat", query_dim=3, key_dim=2, hidden_dim=5)
    query, key = torch.randn(2, 4, 3), torch.randn(2, 6, 2)
    scores = attn.score(query, attn.score.precompute_keys(key))  # (B, T, S)
    pairs = torch.cat(
        [query.unsqueeze(2).expand(2, 4, 6, 3), key.unsqueeze(1).expand(2, 4, 6, 2)], dim=-1
    )  # [h_t; h̄_s]: (B, T, S, Dq + Dk)
    expected = attn.score.v_a(torch.tanh(attn.score.W_a(pairs))).squeeze(-1)
    torch.testing.assert_close(scores, expected)


def test_location_uses_the_query_alone_and_drops_positions_beyond_s():
    attn = attention.build("location", query_dim=2, key_dim=3, max_source_len=4)
    set_weight(attn.score.W_a, [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    keys = [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [-5.0, 1.0, 0.0]]  # S = 3: scores 1, 2, 3
    expected = torch.tensor([[1.0, 2.0, 3.0]]).softmax(-1)
    torch.testing.assert_close(weights_of(attn, [[1.0, 2.0]], keys), expected)
    other_keys = [[9.0, 9.0, 9.0], [1.0, 1.0, 1.0], [0.0, 0.0, 7.0]]
    torch.testing.assert_close(weights_of(attn, [[1.0, 2.0]], other_keys), expected)
    with pytest.raises(ValueError, match=r"max_source_len=4 .* S=5"):
        weights_of(attn, [[1.0, 2.0]], [[0.0, 0.0, 0.0]] * 5)


def test_cosine_with_fixed_beta():
    attn = attention.build("cosine", query_dim=2, beta=2.0)
    assert list(attn.parameters()) == []
    # cos = 1 and 0 whatever the lengths: beta * cos = 2 and 0
    weights = weights_of(attn, [[3.0, 0.0]], [[1.0, 0.0], [0.0, 5.0]])
    expected = torch.tensor([[math.exp(2.0), 1.0]]) / (math.exp(2.0) + 1.0)
    torch.testing.assert_close(weights, expected)
    longer = weights_of(attn, [[0.1, 0.0]], [[7.0, 0.0], [0.0, 0.2]])
    torch.testing.assert_close(longer, expected)


def test_cosine_beta_from_the_query_and_learned():
    from_query = attention.build("cosine", query_dim=2)  # beta = softplus(w·h + b)
    with torch.no_grad():
        from_query.score.w_beta.weight.zero_()
        from_query.score.w_beta.bias.fill_(1.0)
    beta = math.log1p(math.e)  # softplus(1)
    weights = weights_of(from_query, [[3.0, 0.0]], [[1.0, 0.0], [0.0, 5.0]])
    torch.testing.assert_close(weights, torch.tensor([[beta, 0.0]]).softmax(-1))
    learned = attention.build("cosine", query_dim=2, beta="learned")
    assert [name for name, _ in learned.named_parameters()] == ["score.beta_raw"]
    weights = weights_of(learned, [[3.0, 0.0]], [[1.0, 0.0], [0.0, 5.0]])
    torch.testing.assert_close(weights, torch.tensor([[1.0, 0.0]]).softmax(-1))  # beta = 1


def test_cosine_projects_keys_when_widths_differ():
    same = attention.build("cosine", query_dim=3)
    assert same.score.key_proj is None
    different = attention.build("cosine", query_dim=3, key_dim=5)
    assert different.precompute_keys(torch.randn(2, 4, 5)).shape == (2, 4, 3)


@pytest.mark.parametrize("score", attention.names()["score"])
@pytest.mark.parametrize("scope", attention.names()["scope"])
def test_precomputed_keys_and_step_by_step_decoding_match_one_call(score, scope):
    """An RNN decoder: precompute keys once, then call with T = 1 and positions = t."""
    torch.manual_seed(0)
    key_dim = 4 if score in ("dot", "scaled_dot") else 3
    attn = attention.build(score, query_dim=4, key_dim=key_dim, scope=scope, window=2)
    query, key, value = torch.randn(2, 5, 4), torch.randn(2, 6, key_dim), torch.randn(2, 6, 3)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])  # (B, S)
    full = attn(query, key, value, mask)
    projected_key = attn.precompute_keys(key)  # once per sentence
    assert projected_key.shape == (2, 6, attn.score.projected_key_dim)
    for t in range(5):
        step = attn(
            query[:, t : t + 1], None, value, mask, positions=t, projected_key=projected_key
        )
        torch.testing.assert_close(step.weights, full.weights[:, t : t + 1])
        torch.testing.assert_close(step.context, full.context[:, t : t + 1])


@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_scores_without_parameters_need_equal_widths(score):
    with pytest.raises(ValueError, match=rf"'{score}' needs query_dim == key_dim.*512.*1024"):
        attention.build(score, query_dim=512, key_dim=1024)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"score": "dott"}, "unknown attention score 'dott'; valid scores: ['dot', 'general'"),
        ({"scope": "local"}, "valid scopes: ['global', 'local-m', 'local-p']"),
        ({"mode": "stochastic"}, "valid modes: ['soft', 'hard']"),
        ({"window": 0, "scope": "local-m"}, "window (D) must be a positive integer, got 0"),
        ({"query_dim": 0}, "query_dim must be a positive integer, got 0"),
        ({"score": "cosine", "beta": -1.0}, "cosine beta must be one of ['query', 'learned']"),
        ({"score": "location", "max_source_len": 0}, "max_source_len must be a positive"),
    ],
)
def test_bad_options_name_what_is_valid(kwargs, needle):
    options = {"score": "general", "query_dim": 4} | kwargs
    with pytest.raises(ValueError) as err:
        attention.build(options.pop("score"), **options)
    assert needle in str(err.value)


@pytest.mark.parametrize(
    ("shapes", "needle"),
    [
        ({"query": (2, 3, 5)}, "query must have shape (B, T, Dq=4), got (2, 3, 5)"),
        ({"query": (2, 4)}, "query must have shape (B, T, Dq=4), got (2, 4)"),
        ({"key": (3, 6, 3)}, "key must have shape (B=2, S, Dk=3), got (3, 6, 3)"),
        ({"key": (2, 6, 4)}, "key must have shape (B=2, S, Dk=3), got (2, 6, 4)"),
        ({"value": (2, 5, 7)}, "value must have shape (B=2, S=6, Dv), got (2, 5, 7)"),
        ({"mask": (2, 5)}, "mask must have shape (B=2, S=6) or (B=2, T=3, S=6), got (2, 5)"),
        ({"mask": (2, 2, 6)}, "got (2, 2, 6)"),
    ],
)
def test_wrong_shapes_name_expected_and_actual(shapes, needle):
    attn = attention.build("general", query_dim=4, key_dim=3)
    sizes = {"query": (2, 3, 4), "key": (2, 6, 3), "value": (2, 6, 7), "mask": (2, 6)} | shapes
    query, key, value = (torch.randn(sizes[n]) for n in ("query", "key", "value"))
    mask = torch.ones(sizes["mask"], dtype=torch.bool)
    with pytest.raises(ValueError) as err:
        attn(query, key, value, mask)
    assert needle in str(err.value)


def test_other_bad_inputs():
    attn = attention.build("additive", query_dim=4, key_dim=3, hidden_dim=8, scope="local-m")
    query, key, value = torch.randn(2, 3, 4), torch.randn(2, 6, 3), torch.randn(2, 6, 3)
    with pytest.raises(ValueError, match=r"mask must be a bool tensor .* got dtype torch.float32"):
        attn(query, key, value, torch.ones(2, 6))
    with pytest.raises(ValueError, match=r"projected_key \(from precompute_keys\) must have shape"):
        attn(query, key, value, projected_key=key)  # not projected: width 3, not 8
    with pytest.raises(ValueError, match="pass key, or projected_key"):
        attn(query, None, value)
    with pytest.raises(ValueError, match=r"positions must have shape \(B=2, T=3\), got \(3,\)"):
        attn(query, key, value, positions=torch.arange(3))


def test_mechanisms_keep_no_state_between_calls():
    torch.manual_seed(0)
    attn = attention.build("additive", query_dim=4, scope="local-p", window=2).eval()
    query, key = torch.randn(1, 2, 4), torch.randn(1, 5, 4)
    attributes, buffers = dict(vars(attn)), list(attn.buffers())
    first = attn(query, key, key)
    attn(torch.randn(3, 4, 4), torch.randn(3, 7, 4), torch.randn(3, 7, 2))
    again = attn(query, key, key)
    torch.testing.assert_close(first.weights, again.weights)
    assert dict(vars(attn)) == attributes and list(attn.buffers()) == buffers == []


def test_scaled_dot_equals_torch_sdpa():
    torch.manual_seed(0)
    attn = attention.build("scaled_dot", query_dim=8)
    query, key, value = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 6)
    mask = torch.tensor([[True] * 5, [True, True, False, True, False]])  # (B, S)
    out = attn(query, key, value, mask)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask.unsqueeze(1))
    torch.testing.assert_close(out.context, expected)
