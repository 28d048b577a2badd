"""Every model: shapes, gradients, step == forward, weights, padding invariance, select,
decoding, and the builder's errors."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from attnmt.config import ModelConfig, load_config
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.search import beam_search, greedy
from attnmt.errors import ConfigError
from attnmt.models import ModelOutput, build_model, model_names
from attnmt.training import reinforce_loss

V = 20  # vocabulary: 0 PAD, 1 UNK, 2 BOS, 3 EOS, 4.. words
TINY = {"embed_size": 8, "hidden_size": 8, "heads": 2, "ff_size": 16, "dropout": 0.0}

# (id, overrides): every combination the brief asks for, and a few more scores.
LUONG = [
    (
        f"luong-{score}-{scope}-{'feed' if feed else 'nofeed'}",
        {"name": "luong", "attention": score, "scope": scope, "input_feeding": feed},
    )
    for score in ("dot", "general", "concat", "location")
    for scope in ("global", "local-m", "local-p")
    for feed in (True, False)
]
CONFIGS = [
    ("rnnencdec", {"name": "rnnencdec"}),
    ("rnnencdec-2layers", {"name": "rnnencdec", "layers": 2}),
    ("rnnsearch", {"name": "rnnsearch"}),
    ("rnnsearch-2layers", {"name": "rnnsearch", "layers": 2}),
    (
        "rnnsearch-general-local-m",
        {"name": "rnnsearch", "attention": "general", "scope": "local-m"},
    ),
    ("rnnsearch-concat-local-p", {"name": "rnnsearch", "attention": "concat", "scope": "local-p"}),
    ("rnnsearch-location", {"name": "rnnsearch", "attention": "location"}),
    ("rnnsearch-cosine", {"name": "rnnsearch", "attention": "cosine"}),
    ("rnnsearch-hard", {"name": "rnnsearch", "mode": "hard"}),
    ("rnnsearch-hard-local-p", {"name": "rnnsearch", "mode": "hard", "scope": "local-p"}),
    ("rnnsearch-hard-soft-eval", {"name": "rnnsearch", "mode": "hard", "hard_eval": "soft"}),
    *LUONG,
    ("luong-2layers", {"name": "luong", "attention": "general", "layers": 2}),
    ("luong-additive", {"name": "luong", "attention": "additive"}),
    ("luong-scaled_dot", {"name": "luong", "attention": "scaled_dot", "input_feeding": False}),
    ("luong-cosine-local-m", {"name": "luong", "attention": "cosine", "scope": "local-m"}),
    ("luong-hard-feed", {"name": "luong", "attention": "general", "mode": "hard"}),
    (
        "luong-hard-nofeed-local-m",
        {"name": "luong", "mode": "hard", "scope": "local-m", "input_feeding": False},
    ),
    ("luong-hard-soft-eval", {"name": "luong", "mode": "hard", "hard_eval": "soft"}),
    ("transformer-pre", {"name": "transformer", "pre_norm": True, "layers": 2}),
    ("transformer-post", {"name": "transformer", "pre_norm": False, "layers": 2}),
    ("transformer-untied", {"name": "transformer", "tie_embeddings": False}),
]
IDS = [c[0] for c in CONFIGS]


def make_cfg(overrides: dict) -> ModelConfig:
    values = {**TINY, "window": 2, "max_source_len": 16, **overrides}
    if values["name"] == "luong" and "attention" not in overrides:
        values["attention"] = "dot"
    return ModelConfig(**values)


def make_model(overrides: dict, seed: int = 0):
    torch.manual_seed(seed)
    return build_model(make_cfg(overrides), V, V)


def batch(lengths=(7, 5, 4), tgt_len=5, seed=1):
    """Right-padded sources of the given lengths (S = max) and targets (BOS + words)."""
    gen = torch.Generator().manual_seed(seed)
    src_len = max(lengths)
    src = torch.randint(4, V, (len(lengths), src_len), generator=gen)
    mask = torch.arange(src_len)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
    src = src.masked_fill(~mask, 0)
    tgt_in = torch.randint(4, V, (len(lengths), tgt_len), generator=gen)
    tgt_in[:, 0] = 2  # BOS
    return src, mask, tgt_in


def run_steps(model, src, mask, tgt_in, need_weights=False):
    memory = model.encode(src, mask)
    state = model.init_state(memory)
    logits, weights = [], []
    for t in range(tgt_in.shape[1]):
        step_logits, state, step_weights = model.step(
            tgt_in[:, t], state, memory, need_weights=need_weights
        )
        logits.append(step_logits)
        weights.append(step_weights)
    stacked = torch.stack(weights, dim=-2) if weights[0] is not None else None  # (..., T, S)
    return torch.stack(logits, dim=1), stacked, state


def is_hard(overrides):
    return overrides.get("mode") == "hard"


# ------------------------------------------------------------------------------------------
# Per model
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "overrides"), CONFIGS, ids=IDS)
def test_forward_shapes_and_gradients_reach_every_parameter(name, overrides):
    model = make_model(overrides).train()
    src, mask, tgt_in = batch()
    out = model(src, mask, tgt_in)
    assert isinstance(out, ModelOutput)
    assert out.logits.shape == (3, 5, V) and out.logits.dtype == torch.float32
    assert out.weights is None
    tgt_out = torch.randint(4, V, (3, 5), generator=torch.Generator().manual_seed(2))
    nll = F.cross_entropy(out.logits.reshape(-1, V), tgt_out.reshape(-1), reduction="none")
    loss = nll.sum()
    if is_hard(overrides):
        assert out.attn_log_prob.shape == (3, 5) and out.attn_entropy.shape == (3, 5)
        reward = -nll.view(3, 5).sum(1).detach()
        tgt_mask = torch.ones(3, 5, dtype=torch.bool)
        loss = loss + reinforce_loss(
            out.attn_log_prob, out.attn_entropy, reward, 0.0, tgt_mask, entropy_weight=0.1
        )
    else:
        assert out.attn_log_prob is None and out.attn_entropy is None
    loss.backward()
    # Every parameter gets a non-zero gradient: none is dead. (Hard mode needs the
    # REINFORCE term for the attention's parameters; see test_models_hard.py.)
    missing = [
        n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0
    ]
    assert missing == []


@pytest.mark.parametrize(("name", "overrides"), CONFIGS, ids=IDS)
def test_step_matches_forward(name, overrides):
    model = make_model(overrides).eval()
    src, mask, tgt_in = batch()
    with torch.no_grad():
        out = model(src, mask, tgt_in, need_weights=model.uses_attention)
        logits, weights, _ = run_steps(model, src, mask, tgt_in, need_weights=True)
    torch.testing.assert_close(logits, out.logits, atol=1e-5, rtol=0)
    if model.uses_attention:
        torch.testing.assert_close(weights, out.weights, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("name", "overrides"), CONFIGS, ids=IDS)
def test_weights_when_asked(name, overrides):
    model = make_model(overrides).eval()
    src, mask, tgt_in = batch()
    with torch.no_grad():
        out = model(src, mask, tgt_in, need_weights=True)
        memory = model.encode(src, mask)
        _, _, step_weights = model.step(tgt_in[:, 0], model.init_state(memory), memory)
    assert step_weights is None  # not asked
    if not model.uses_attention:
        assert out.weights is None
        return
    weights = out.weights
    if name.startswith("transformer"):
        layers = model.layers
        assert weights.shape == (3, layers, 2, 5, 7)  # (B, L, H, T, S)
        mask_b = mask[:, None, None, None, :]
    else:
        assert weights.shape == (3, 5, 7)  # (B, T, S)
        mask_b = mask[:, None, :]
    assert (weights >= 0).all()
    assert torch.all(weights.masked_select(~mask_b.expand_as(weights)) == 0)  # no padding
    sums = weights.sum(-1)
    if overrides.get("scope") == "local-p" and not is_hard(overrides):
        assert (sums <= 1 + 1e-5).all() and (sums > 0).all()  # Gaussian factor, eq. 10
    else:
        torch.testing.assert_close(sums, torch.ones_like(sums))


@pytest.mark.parametrize(("name", "overrides"), CONFIGS, ids=IDS)
def test_padding_invariance(name, overrides):
    """A sentence gives the same outputs alone and batched with a longer padded one (the
    backward GRU must start at the sentence's own end)."""
    model = make_model(overrides).eval()
    src, mask, tgt_in = batch(lengths=(4, 7))
    with torch.no_grad():
        alone = model(src[:1, :4], mask[:1, :4], tgt_in[:1], need_weights=model.uses_attention)
        batched = model(src, mask, tgt_in, need_weights=model.uses_attention)
        step_alone, _, _ = run_steps(model, src[:1, :4], mask[:1, :4], tgt_in[:1])
        step_batched, _, _ = run_steps(model, src, mask, tgt_in)
    torch.testing.assert_close(batched.logits[:1], alone.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(step_batched[:1], step_alone, atol=1e-5, rtol=0)
    if model.uses_attention:
        torch.testing.assert_close(batched.weights[:1, ..., :4], alone.weights, atol=1e-5, rtol=0)


FAMILIES = [
    c
    for c in CONFIGS
    if c[0] in ("rnnencdec-2layers", "rnnsearch", "luong-general-local-m-feed", "luong-hard-feed")
    or c[0].startswith("transformer-pre")
]


@pytest.mark.parametrize(("name", "overrides"), FAMILIES, ids=[c[0] for c in FAMILIES])
def test_select_reorders_memory_and_state(name, overrides):
    """`select` on memory and state (beam search) equals decoding the chosen rows."""
    model = make_model(overrides).eval()
    src, mask, tgt_in = batch()
    index = torch.tensor([2, 0, 0, 1])
    with torch.no_grad():
        memory = model.encode(src, mask)
        state = model.init_state(memory)
        _, state, _ = model.step(tgt_in[:, 0], state, memory)
        _, state, _ = model.step(tgt_in[:, 1], state, memory)
        logits, _, _ = model.step(tgt_in[index, 2], state.select(index), memory.select(index))
        expected, _, _ = run_steps(model, src[index], mask[index], tgt_in[index, :3])
    torch.testing.assert_close(logits, expected[:, 2], atol=1e-5, rtol=0)


@pytest.mark.parametrize(("name", "overrides"), FAMILIES, ids=[c[0] for c in FAMILIES])
def test_greedy_and_beam_search_run(name, overrides):
    model = make_model(overrides).eval()
    src, mask, _ = batch()
    need = model.uses_attention
    hyps = greedy(model, src, mask, SearchOptions(max_len=4, need_weights=need))
    beams = beam_search(
        model, src, mask, SearchOptions(beam=3, max_len=4, need_weights=need, n_best=2)
    )
    assert len(hyps) == 3 and len(beams) == 3 and all(len(b) == 2 for b in beams)
    # Beam size 1 is greedy.
    ones = beam_search(model, src, mask, SearchOptions(beam=1, max_len=4))
    assert [b[0].tokens for b in ones] == [h.tokens for h in hyps]
    if need:
        steps = len(hyps[0].tokens) + (len(hyps[0].tokens) < 4)
        extra = (model.layers, 2) if name.startswith("transformer") else ()
        assert hyps[0].weights.shape == (steps, *extra, 7)


def test_train_mode_dropout_is_used():
    model = make_model({"name": "rnnsearch", "dropout": 0.5}).train()
    src, mask, tgt_in = batch()
    first = model(src, mask, tgt_in).logits
    assert not torch.allclose(first, model(src, mask, tgt_in).logits)
    model.eval()
    torch.testing.assert_close(model(src, mask, tgt_in).logits, model(src, mask, tgt_in).logits)


def test_uses_attention():
    assert not make_model({"name": "rnnencdec"}).uses_attention
    for name in ("rnnsearch", "luong", "transformer"):
        assert make_model({"name": name}).uses_attention


def test_no_state_kept_between_calls():
    """Nothing tensor-valued appears on the modules after a forward pass."""
    for name in ("rnnsearch", "luong", "transformer"):
        model = make_model({"name": name}).eval()
        before = {k: set(vars(m)) for k, m in model.named_modules()}
        model(*batch(), need_weights=True)
        assert {k: set(vars(m)) for k, m in model.named_modules()} == before


def test_bad_inputs_raise_value_error():
    model = make_model({"name": "rnnsearch"})
    src, mask, tgt_in = batch()
    with pytest.raises(ValueError, match="src_mask must be a bool"):
        model(src, mask.long(), tgt_in)
    with pytest.raises(ValueError, match="tgt_in must be"):
        model(src, mask, tgt_in[:2])


# ------------------------------------------------------------------------------------------
# Builder
# ------------------------------------------------------------------------------------------


def test_model_names():
    assert model_names() == [
        "rnnencdec",
        "rnnsearch",
        "luong",
        "transformer",
        "show-attend-tell",
        "show-tell",
        "glimpses",
    ]


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"name": "rnnsarch"}, "model.name='rnnsarch' (did you mean 'rnnsearch'?); valid: "),
        ({"name": "lstm"}, "valid: rnnencdec, rnnsearch, luong, transformer"),
        ({"attention": "bilinear"}, "model.attention='bilinear'; valid: dot, general"),
        ({"attention": "genral"}, "did you mean 'general'?"),
        ({"scope": "local"}, "model.scope='local'"),
        ({"mode": "sampled"}, "valid: soft, hard"),
        ({"hard_eval": "mean"}, "valid: argmax, soft"),
        ({"name": "rnnsearch", "attention": "dot"}, "needs query_dim == key_dim"),
        ({"name": "transformer", "heads": 3}, "divisible by model.heads=3"),
        ({"name": "transformer", "mode": "hard"}, "model.mode='hard' works with rnnsearch"),
        ({"name": "rnnencdec", "mode": "hard"}, "not model.name='rnnencdec'"),
        ({"layers": 0}, "model.layers must be a positive integer"),
        ({"dropout": 1.0}, "model.dropout must be in [0, 1)"),
    ],
)
def test_builder_errors_name_the_options(overrides, needle):
    with pytest.raises(ConfigError) as err:
        build_model(dataclasses.replace(make_cfg({"name": "luong"}), **overrides), V, V)
    assert needle in str(err.value)


def test_builder_share_embeddings():
    cfg = make_cfg({"name": "transformer", "share_embeddings": True})
    with pytest.raises(ConfigError, match="joint vocabulary"):
        build_model(cfg, V, V + 1)
    model = build_model(cfg, V, V)
    assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight


def test_builder_from_loaded_config():
    cfg = load_config(None, ["model.name=luong", "model.hard_eval=soft", "model.hidden_size=8"])
    assert cfg.model.hard_eval == "soft"
    with pytest.raises(ConfigError, match=r"model\.hard_eval must be 'argmax' or 'soft'"):
        load_config(None, ["model.hard_eval=maybe"])
    model = build_model(dataclasses.replace(cfg.model, embed_size=8), V, V)
    assert model.hard_eval == "soft"


def test_builder_uniform_init_replaces_the_papers_start():
    paper = make_model({"name": "rnnsearch"})
    uniform = make_model({"name": "rnnsearch", "init": "uniform"})
    weights = dict(uniform.named_parameters())
    assert all(p.abs().max() <= 0.1 for p in weights.values())
    # Bahdanau's start: zero biases and N(0, 0.01²); uniform: biases drawn, wider weights.
    assert paper.generator.bias.abs().sum() == 0 < uniform.generator.bias.abs().sum()
    assert uniform.generator.weight.std() > 5 * paper.generator.weight.std()
    assert not uniform.tgt_embed.weight[0].any()  # the PAD row stays zero


def test_uniform_init_is_refused_where_normalisation_layers_would_break():
    with pytest.raises(ConfigError, match="uniform is for the recurrent text models"):
        make_model({"name": "transformer", "init": "uniform"})
