"""Explanation methods against what can be computed by hand: gradient × input and
integrated gradients on a one-layer model whose gradient has a closed form, rollout
against a by-hand product of hand-computed attention matrices, attention × norm against
the value and output projections, occlusion against re-decoding step by step; and the
pieces of the faithfulness measures."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch
from torch import nn

from attnmt.alignment.links import SideWords
from attnmt.cancel import Cancelled, stop_when
from attnmt.config import load_config
from attnmt.data.vocab import BOS, EOS, UNK
from attnmt.decoding.attention_choice import AttentionChoice, choose_attention
from attnmt.decoding.runs import load_run
from attnmt.errors import UserError
from attnmt.evaluation.splits import synthetic_links
from attnmt.explain import METHODS, explain
from attnmt.explain.bahdanau import find_loop
from attnmt.explain.gradients import input_override, integrated_gradients, path_gradients
from attnmt.explain.measures import FRACTIONS, masked, word_ranking
from attnmt.models import build_model
from attnmt.models.base import ModelOutput, Seq2Seq
from conftest import CONFIGS


class OneLayer(Seq2Seq):
    """logits_t = W Σ_s e(x_s) + U e'(y_{t-1}): log p(y_t) = log softmax(logits_t)[y_t],
    whose gradient with respect to each e(x_s) is W_y − Σ_k p_k W_k (closed form)."""

    uses_attention = False

    def __init__(self, vocab: int = 7, width: int = 3) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.src_embed = nn.Embedding(vocab, width)
        self.tgt_embed = nn.Embedding(vocab, width)
        self.W = nn.Parameter(torch.randn(vocab, width, generator=gen))
        self.U = nn.Parameter(torch.randn(vocab, width, generator=gen))
        with torch.no_grad():
            self.src_embed.weight.copy_(torch.randn(vocab, width, generator=gen))
            self.tgt_embed.weight.copy_(torch.randn(vocab, width, generator=gen))

    def forward(self, src, src_mask, tgt_in, *, need_weights=False):
        x = (self.src_embed(src) * src_mask[..., None]).sum(dim=1)  # (B, E)
        logits = (x @ self.W.T)[:, None] + self.tgt_embed(tgt_in) @ self.U.T  # (B, T, V)
        return ModelOutput(logits=logits)


def _closed_form(model: OneLayer, src_ids, tgt_ids, alphas):
    """Σ_k (1/K) ∂f_t/∂e_s (α_k X) · e_s for every t and source position s, in float64."""
    W = model.W.detach().double().numpy()
    U = model.U.detach().double().numpy()
    E = model.src_embed.weight.detach().double().numpy()
    T_in = model.tgt_embed.weight.detach().double().numpy()
    source = [*src_ids, EOS]
    prefix, wanted = [BOS, *tgt_ids], [*tgt_ids, EOS]
    x = E[source].sum(axis=0)
    out = np.zeros((len(wanted), len(source)))
    for t, (prev, y) in enumerate(zip(prefix, wanted, strict=True)):
        for alpha in alphas:
            logits = alpha * W @ x + U @ T_in[prev]
            p = np.exp(logits - logits.max())
            p /= p.sum()
            grad = W[y] - p @ W  # ∂ log p_y / ∂x, the same for every source position
            out[t] += (E[source] @ grad) / len(alphas)
    return out


def test_gradient_times_input_and_integrated_gradients_match_the_closed_form():
    model = OneLayer().eval()
    src, tgt = [4, 5, 6, 4], [5, 6]
    choice = AttentionChoice()
    (gi,) = explain(model, [(src, tgt)], "grad-input", choice)
    np.testing.assert_allclose(gi.matrix.numpy(), _closed_form(model, src, tgt, [1.0]), atol=1e-5)
    steps = 32
    (ig,) = explain(model, [(src, tgt)], "integrated-gradients", choice, ig_steps=steps)
    midpoints = [(k + 0.5) / steps for k in range(steps)]
    np.testing.assert_allclose(
        ig.matrix.numpy(), _closed_form(model, src, tgt, midpoints), atol=1e-5
    )
    # Completeness: the rows sum to f(X) - f(0), here within 1% (reported by the method).
    exact = _closed_form(model, src, tgt, [(k + 0.5) / 20000 for k in range(20000)])
    assert ig.completeness < 0.01
    np.testing.assert_allclose(ig.matrix.numpy().sum(1), exact.sum(1), rtol=0.01, atol=1e-4)
    # One forward per step (and the two endpoints), one backward per (target, step).
    assert ig.forward == steps + 2 and ig.backward == 3 * steps


def test_gradient_chunks_do_not_change_the_result():
    model = OneLayer().eval()
    src, tgt = [4, 5, 6], [5, 6, 4, 4]
    whole = integrated_gradients(model, src, tgt, 8).matrix
    alphas = [(k + 0.5) / 8 for k in range(8)]
    # 3 tokens a pass: one step per forward, one target per backward
    small = path_gradients(model, src, tgt, alphas, chunk_tokens=3)
    torch.testing.assert_close(whole, small.matrix)
    assert small.forward == 8 and small.backward == 8 * 5


def _one_target_at_a_time(model, src_ids, tgt_ids, alphas):
    """The definition, one backward per (target t, step α): the sentence with its target
    cut after t, f_t = log p(y_t) differentiated against α X, times X."""
    source = torch.tensor([[*src_ids, EOS]])
    mask = torch.ones_like(source, dtype=torch.bool)
    target = [BOS, *tgt_ids, EOS]
    rows = []
    for t in range(len(target) - 1):
        row = 0.0
        for alpha in alphas:
            seen = []

            def scaled(features, alpha=alpha, seen=seen):
                seen.append(features.detach())
                seen.append((alpha * features.detach()).requires_grad_(True))
                return seen[-1]

            with input_override(model, source, scaled):
                logits = model(source, mask, torch.tensor([target[: t + 1]])).logits
            f = torch.log_softmax(logits[0, t].double(), dim=-1)[target[t + 1]]
            full, point = seen
            (grad,) = torch.autograd.grad(f, point)
            product = (grad * full)[0]  # (S, E) or (1, H, W)
            row = row + (product.sum(-1) if full.dim() == 3 else product.flatten()) / len(alphas)
        rows.append(row)
    return torch.stack(rows)


def _tiny_model(config, overrides, vocab):
    cfg = load_config(config, ["model.embed_size=8", "model.hidden_size=16", *overrides])
    torch.manual_seed(0)
    return build_model(cfg.model, *vocab).eval()


TINY_MODELS = {  # config, overrides, (source, target vocabulary), source ids
    "rnnsearch (fused loop)": (None, ["model.init=uniform"], (30, 30), [5, 6, 7, 8, 9, 10]),
    "rnnsearch, 2 layers": (None, ["model.layers=2", "model.init=uniform"], (30, 30), [5, 7]),
    "luong": (None, ["model.name=luong", "model.init=uniform"], (30, 30), [5, 6, 7, 8]),
    "transformer": (
        None,
        ["model.name=transformer", "model.heads=2", "model.layers=2", "model.ff_size=32"],
        (30, 30),
        [5, 6, 7, 8, 9],
    ),
    # 24x8 canvases of random grey levels (ids 4..20)
    "show-attend-tell": (CONFIGS / "captions-soft.yaml", [], (21, 14), 192),
    "show-tell": (CONFIGS / "captions-plain.yaml", [], (21, 14), 192),
}


@pytest.fixture
def one_thread():
    """Tiny models on one thread: two threads spin on tensors this small (10x the time
    of the LSTM's with other work on the cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", list(TINY_MODELS))
def test_batched_gradients_equal_one_backward_per_target(name, one_thread):
    config, overrides, vocab, src = TINY_MODELS[name]
    model = _tiny_model(config, overrides, vocab)
    if isinstance(src, int):  # pixels
        src = torch.randint(4, 21, (src,), generator=torch.Generator().manual_seed(1)).tolist()
    tgt, alphas = [5, 9, 6, 11], [0.2, 0.7, 1.0]
    expected = _one_target_at_a_time(model, src, tgt, alphas).float()
    scale = float(expected.abs().max())
    assert scale > 1e-6  # attributions worth comparing
    # the default; one backward per target; a copy per (target, step); one forward per step
    for options in ({}, {"batched": False}, {"copies": True}, {"copies": False}):
        done = path_gradients(model, src, tgt, alphas, **options)
        torch.testing.assert_close(done.matrix, expected, atol=1e-5 * scale, rtol=1e-4)
        copies = options.get("copies", name == "luong")  # an LSTM: copies by default
        assert (done.forward, done.backward) == ((3 * 5 if copies else 3), 3 * 5)
    fused = name in ("rnnsearch (fused loop)", "show-attend-tell")
    with torch.enable_grad():  # the fused loop takes its own batched backward
        out = model(
            torch.tensor([[*src, EOS]]), torch.ones(1, len(src) + 1).bool(), torch.tensor([[BOS]])
        )
    assert (find_loop(out.logits.grad_fn) is not None) == fused


def test_an_abandoned_explanation_stops_between_chunks():
    model = OneLayer().eval()
    asked = []

    def abandoned():
        asked.append(True)
        return len(asked) > 2  # the client leaves after the second chunk

    alphas = [(k + 0.5) / 8 for k in range(8)]
    with stop_when(abandoned), pytest.raises(Cancelled):
        path_gradients(model, [4, 5, 6], [5, 6], alphas, chunk_tokens=3)
    assert len(asked) == 3


@pytest.mark.parametrize("name", ["rnn", "tf"])
def test_integrated_gradients_are_complete_on_trained_models(tiny_runs, name):
    loaded = load_run(tiny_runs[name])
    src = loaded.vocab.src.encode("the cat sat on the mat")
    tgt = loaded.vocab.tgt.encode("mat the on sat cat the")
    result = integrated_gradients(loaded.model, src, tgt, 64)
    assert result.matrix.shape == (len(tgt) + 1, len(src) + 1)
    # The runs train in fp32 on every CPU (conftest.TINY). Measured, train.seed 1-3 (an Intel
    # Xeon with AMX; seed 1 the same with AVX2 kernels): the Transformer 0.003-0.005,
    # RNNsearch 1e-5 to 7e-4. A wrong path or scaling misses by far more, as one step alone
    # does (0.02-1.3).
    assert result.completeness < 0.01


def test_rollout_is_the_product_of_hand_computed_attention(tiny_runs):
    loaded = load_run(tiny_runs["tf"])
    model = loaded.model
    src = loaded.vocab.src.encode("dog ran far 🙂")
    tgt = loaded.vocab.tgt.encode("🙂 far ran dog")
    inputs = []  # each encoder layer's self-attention input, captured
    hooks = [
        layer.self_attn.register_forward_pre_hook(lambda m, a: inputs.append(a[0].detach()))
        for layer in model.encoder_layers
    ]
    with torch.no_grad():
        model.encode(torch.tensor([[*src, EOS]]), torch.ones(1, len(src) + 1, dtype=torch.bool))
    for hook in hooks:
        hook.remove()
    flow = np.eye(len(src) + 1)
    for layer, y in zip(model.encoder_layers, inputs, strict=True):
        attn, heads = layer.self_attn, model.heads
        q = (y[0] @ attn.q_proj.weight.T + attn.q_proj.bias).detach().double().numpy()
        k = (y[0] @ attn.k_proj.weight.T + attn.k_proj.bias).detach().double().numpy()
        width = q.shape[1] // heads
        mean = np.zeros((len(src) + 1, len(src) + 1))
        for h in range(heads):
            part = slice(h * width, (h + 1) * width)
            scores = q[:, part] @ k[:, part].T / math.sqrt(width)
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            mean += weights / weights.sum(axis=1, keepdims=True) / heads
        flow = (0.5 * mean + 0.5 * np.eye(len(mean))) @ flow
    choice = choose_attention(loaded.cfg.model)
    (attention,) = explain(model, [(src, tgt)], "attention", choice)
    (rolled,) = explain(model, [(src, tgt)], "rollout", choice)
    np.testing.assert_allclose(rolled.matrix.numpy(), attention.matrix.numpy() @ flow, atol=1e-5)


def test_attention_norm_weighs_each_head_by_its_transformed_values(tiny_runs):
    loaded = load_run(tiny_runs["tf"])
    model = loaded.model
    src = loaded.vocab.src.encode("the cat sat")
    tgt = loaded.vocab.tgt.encode("sat cat the")
    base = choose_attention(loaded.cfg.model)
    head = AttentionChoice(True, base.layer, 2, base.layers, base.heads)
    (attention,) = explain(model, [(src, tgt)], "attention", head)
    (normed,) = explain(model, [(src, tgt)], "attention-norm", head)
    with torch.no_grad():
        memory = model.encode(torch.tensor([[*src, EOS]]), torch.ones(1, len(src) + 1).bool())
        cross = model.decoder_layers[base.layer - 1].cross_attn
        values = memory.encoded[0] @ cross.v_proj.weight.T + cross.v_proj.bias  # (S, D)
        width = values.shape[1] // model.heads
        part = slice(width, 2 * width)  # head 2
        f = values[:, part] @ cross.out_proj.weight[:, part].T  # (S, D)
    expected = attention.matrix.numpy() * f.norm(dim=1).numpy()
    np.testing.assert_allclose(normed.matrix.numpy(), expected, rtol=1e-4, atol=1e-6)


def _log_probs_by_steps(model, src_ids, tgt_ids):
    src = torch.tensor([[*src_ids, EOS]])
    with torch.no_grad():
        memory = model.encode(src, torch.ones_like(src, dtype=torch.bool))
        state, prev, out = model.init_state(memory), torch.tensor([BOS]), []
        for token in [*tgt_ids, EOS]:
            logits, state, _ = model.step(prev, state, memory)
            out.append(float(torch.log_softmax(logits.float(), -1)[0, token]))
            prev = torch.tensor([token])
    return np.array(out)


@pytest.mark.parametrize("name", ["rnn", "tf", "plain"])
def test_occlusion_is_the_drop_in_log_prob_when_each_subword_becomes_unk(tiny_runs, name):
    loaded = load_run(tiny_runs[name])
    src = loaded.vocab.src.encode("the cat sat on the mat")
    tgt = loaded.vocab.tgt.encode("mat the on sat")
    choice = choose_attention(loaded.cfg.model)
    (occluded,) = explain(loaded.model, [(src, tgt)], "occlusion", choice)
    full = _log_probs_by_steps(loaded.model, src, tgt)
    for s in range(len(src)):
        changed = [*src[:s], UNK, *src[s + 1 :]]
        expected = full - _log_probs_by_steps(loaded.model, changed, tgt)
        np.testing.assert_allclose(occluded.matrix[:, s].numpy(), expected, atol=1e-4)
    assert not occluded.matrix[:, -1].any()  # the EOS is never occluded
    assert occluded.forward == len(src) + 1


def test_methods_that_do_not_fit_the_model_say_so(tiny_runs):
    plain = load_run(tiny_runs["plain"])
    rnn = load_run(tiny_runs["rnn"])
    pair = [([5, 6], [5])]
    with pytest.raises(UserError, match="has none; use grad-input"):
        explain(plain.model, pair, "attention", AttentionChoice())
    with pytest.raises(UserError, match="rollout multiplies a Transformer"):
        explain(rnn.model, pair, "rollout", AttentionChoice())
    with pytest.raises(UserError, match="choose one of"):
        explain(rnn.model, pair, "saliency", AttentionChoice())
    for method in METHODS:
        if method in ("attention", "attention-norm", "rollout"):
            continue
        (done,) = explain(plain.model, pair, method, AttentionChoice(), ig_steps=4)
        assert done.matrix.shape == (2, 3)


def test_faithfulness_pieces():
    source = SideWords([0, 0, 1, 2, -1], ["ab", "c", "d"])  # 5 pieces, the last dropped
    target = SideWords([0, 1], ["x", "y"])
    matrix = np.array(
        [[0.1, 0.1, 0.5, 0.0, 0.3, 0.0], [0.0, 0.0, 0.1, 0.9, 0.0, 0.0], [0, 0, 0, 0, 0, 1.0]]
    )
    assert word_ranking(matrix, source, target) == [2, 1, 0]  # 0.9 > 0.6 > 0.2
    assert masked([7, 8, 9, 10, 11], source.word_of, {0, 2}) == [UNK, UNK, 9, UNK, 11]
    assert FRACTIONS[0] == 0.0 and FRACTIONS[-1] == 1.0 and len(FRACTIONS) == 11


def test_synthetic_tasks_know_their_links():
    assert synthetic_links("reverse", [7, 3, 9]) == {(2, 0), (1, 1), (0, 2)}
    assert synthetic_links("copy", [7, 3]) == {(0, 0), (1, 1)}
    assert synthetic_links("sort", [7, 3, 9]) == {(1, 0), (0, 1), (2, 2)}


def test_the_cost_benchmark_runs_and_before_equals_after(one_thread, capsys):
    sys.path.insert(0, str(CONFIGS.parent / "benchmarks"))
    import explain_cost

    result = explain_cost.measure(["rnnsearch"], steps=2, repeats=1, threads=None, smoke=True)
    for row in result["rows"]:
        assert row["max_difference"] <= 1e-5 * row["largest_entry"]
        assert row["wall_s"]["after"]["median"] > 0 and row["speedup_cpu"] > 0
    assert {row["method"] for row in result["rows"]} == {"integrated-gradients", "grad-input"}
