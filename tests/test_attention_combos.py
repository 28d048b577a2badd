"""Every registered score x scope x mode: the invariants that must hold for all of them.

Rows sum to 1 over the positions that may be attended (local-p's weights: at most 1),
masked keys get exactly 0, fully masked rows give zeros (never NaN, nor NaN gradients),
shapes, T = 1, and gradients reach every input and parameter.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt import attention

NAMES = attention.names()
COMBOS = list(itertools.product(NAMES["score"], NAMES["scope"], NAMES["mode"]))
IDS = ["-".join(c) for c in COMBOS]
WINDOW = 2
DV = 3


def test_registry_has_every_combination():
    assert NAMES == {
        "score": ["dot", "general", "concat", "additive", "location", "scaled_dot", "cosine"],
        "scope": ["global", "local-m", "local-p"],
        "mode": ["soft", "hard"],
    }
    assert len(COMBOS) == 42


def make(score: str, scope: str, mode: str, *, train: bool = True, seed: int = 0):
    key_dim = 6 if score in ("dot", "scaled_dot") else 4
    torch.manual_seed(seed)
    attn = attention.build(
        score, query_dim=6, key_dim=key_dim, scope=scope, window=WINDOW, mode=mode,
        max_source_len=16,
    )  # fmt: skip
    return attn.train(train)


def make_inputs(attn, batch: int, tgt_len: int, src_len: int, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    query = torch.randn(batch, tgt_len, attn.query_dim, generator=gen)
    key = torch.randn(batch, src_len, attn.key_dim, generator=gen)
    value = torch.randn(batch, src_len, DV, generator=gen)
    return query, key, value


def allowed_positions(attn, out, mask, batch, tgt_len, src_len):
    """The (B, T, S) positions that may be attended: user mask AND the scope's window."""
    allowed = torch.ones(batch, tgt_len, src_len, dtype=torch.bool)
    if mask is not None:
        allowed = allowed & (mask.unsqueeze(1) if mask.dim() == 2 else mask)
    if attn.scope != "global":
        # The window [p - D, p + D] around the position nearest p: 2D + 1 positions.
        s = torch.arange(src_len, dtype=torch.float32)
        middle = torch.floor(out.position.detach() + 0.5).unsqueeze(-1)
        allowed = allowed & ((s - middle).abs() <= attn.window)
    return allowed


def check_invariants(attn, out, query, value, mask):
    batch, tgt_len, src_len = query.shape[0], query.shape[1], value.shape[1]
    assert out.context.shape == (batch, tgt_len, DV)
    assert out.weights.shape == out.probs.shape == (batch, tgt_len, src_len)
    for tensor in (out.context, out.weights, out.probs):
        assert torch.isfinite(tensor).all()
    if attn.mode == "hard":
        assert out.log_prob.shape == (batch, tgt_len) and torch.isfinite(out.log_prob).all()
    else:
        assert out.log_prob is None
    if attn.scope == "global":
        assert out.position is None
    else:
        assert out.position.shape == (batch, tgt_len)
    allowed = allowed_positions(attn, out, mask, batch, tgt_len, src_len)
    alive = allowed.any(dim=-1).to(out.probs.dtype)  # (B, T)
    # masked (or out-of-window) positions get exactly zero
    assert (out.weights[~allowed] == 0).all() and (out.probs[~allowed] == 0).all()
    # probs: rows sum to 1 where something may be attended, 0 where nothing may
    torch.testing.assert_close(out.probs.sum(-1), alive, atol=1e-5, rtol=0)
    sums = out.weights.sum(-1)
    if attn.scope == "local-p" and attn.mode == "soft":
        assert (sums <= alive + 1e-5).all() and (sums[alive == 0] == 0).all()
    else:
        torch.testing.assert_close(sums, alive, atol=1e-5, rtol=0)
    if attn.mode == "hard":
        assert ((out.weights == 0) | (out.weights == 1)).all()
    torch.testing.assert_close(out.context, out.weights @ value)
    dead = alive == 0
    assert (out.context[dead] == 0).all()


@pytest.mark.parametrize(("score", "scope", "mode"), COMBOS, ids=IDS)
def test_invariants_with_padding_and_dead_rows(score, scope, mode):
    attn = make(score, scope, mode)
    query, key, value = make_inputs(attn, batch=3, tgt_len=4, src_len=6)
    mask = torch.ones(3, 4, 6, dtype=torch.bool)
    mask[1, :, 4:] = False  # padding: sentence 1 has 4 tokens
    mask[2, 1] = False  # a fully masked row
    out = attn(query, key, value, mask)
    check_invariants(attn, out, query, value, mask)
    assert (out.weights[2, 1] == 0).all() and (out.context[2, 1] == 0).all()


@pytest.mark.parametrize(("score", "scope", "mode"), COMBOS, ids=IDS)
def test_single_step_and_padding_mask(score, scope, mode):
    attn = make(score, scope, mode, train=False)
    query, key, value = make_inputs(attn, batch=2, tgt_len=1, src_len=5)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])  # (B, S)
    out = attn(query, key, value, mask, positions=3)
    check_invariants(attn, out, query, value, mask)
    if scope == "local-m":  # p_t = 3; the 3-token sentence stays at its last position
        assert out.position.tolist() == [[3.0], [2.0]]


@pytest.mark.parametrize(("score", "scope", "mode"), COMBOS, ids=IDS)
def test_gradients_reach_inputs_and_parameters(score, scope, mode):
    attn = make(score, scope, mode)
    query, key, value = make_inputs(attn, batch=2, tgt_len=3, src_len=5)
    for tensor in (query, key, value):
        tensor.requires_grad_(True)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[1, 2] = False  # a fully masked row must not give NaN gradients
    out = attn(query, key, value, mask)
    loss = out.context.square().sum()
    if mode == "hard":  # REINFORCE: the sampled choice is scored by a reward
        reward = torch.linspace(-1.0, 1.0, 6).view(2, 3)
        loss = loss - (reward * out.log_prob).sum()
    if scope == "local-p":
        loss = loss + out.position.sum()
    loss.backward()
    inputs = {"query": query, "value": value} | ({} if score == "location" else {"key": key})
    for name, tensor in inputs.items():
        assert torch.isfinite(tensor.grad).all(), name
        assert tensor.grad.abs().sum() > 0, f"no gradient reaches {name}"
    if score == "location":
        assert key.grad is None  # the location score never looks at the keys
    for name, param in attn.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, f"no gradient reaches {name}"


@settings(max_examples=80, deadline=None, database=None)
@given(data=st.data())
def test_invariants_hold_for_random_shapes_and_masks(data):
    score, scope, mode = data.draw(st.sampled_from(COMBOS), label="combo")
    batch = data.draw(st.integers(1, 3), label="B")
    tgt_len = data.draw(st.integers(1, 4), label="T")
    src_len = data.draw(st.integers(1, 7), label="S")
    kind = data.draw(st.sampled_from(["none", "padding", "full"]), label="mask kind")
    shape = {"none": None, "padding": (batch, src_len), "full": (batch, tgt_len, src_len)}[kind]
    mask = None
    if shape is not None:
        size = int(torch.Size(shape).numel())
        bits = data.draw(st.lists(st.booleans(), min_size=size, max_size=size), label="mask")
        mask = torch.tensor(bits, dtype=torch.bool).view(shape)
    train = data.draw(st.booleans(), label="train")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    attn = make(score, scope, mode, train=train, seed=seed)
    query, key, value = make_inputs(attn, batch, tgt_len, src_len, seed=seed)
    positions = torch.randint(0, src_len + 2, (batch, tgt_len)) if scope == "local-m" else None
    out = attn(query, key, value, mask, positions=positions)
    check_invariants(attn, out, query, value, mask)
