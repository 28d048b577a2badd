"""Where the mechanisms met their papers' equations again (each test failed before its fix):
local attention (Luong et al. 2015 §3.2), content-based attention (Graves et al. 2014),
hard and soft attention (Xu et al. 2015 §4), and the searches' scores and tokens."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt.attention import functional as AF
from attnmt.attention.scopes import LocalPredictor, apply_scope

# --- local attention (Luong et al. 2015 §3.2) ----------------------------------------------


def test_local_p_positions_and_gaussian_stay_fp32_under_bf16_autocast():
    torch.manual_seed(0)
    batch, steps, src_len, width = 2, 5, 300, 10
    predictor = LocalPredictor(16, 8)
    with torch.no_grad():  # spread p_t over the whole sentence, past position 256
        predictor.v_p.weight.mul_(40.0)
    query = torch.randn(batch, steps, 16)
    mask = torch.ones(batch, src_len, dtype=torch.bool)
    exact = apply_scope(
        "local-p", query, mask[:, None], src_len=src_len, window=width, predictor=predictor
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = apply_scope(
            "local-p", query, mask[:, None], src_len=src_len, window=width, predictor=predictor
        )
    assert autocast.position.dtype == autocast.log_prior.dtype == torch.float32
    assert float(exact.position.detach().max()) > 256  # the positions bf16 cannot all represent
    torch.testing.assert_close(autocast.position, exact.position)
    torch.testing.assert_close(autocast.log_prior, exact.log_prior)
    assert torch.equal(autocast.mask, exact.mask)


def test_gaussian_of_neighbouring_positions_past_256_differs():
    center = torch.tensor([[300.0]], dtype=torch.bfloat16)
    factor = AF.gaussian_window(center, 310, sigma=5.0)
    assert factor.dtype == torch.float32
    assert float(factor[0, 0, 299]) != float(factor[0, 0, 300])  # 299 and 300 stay apart


@pytest.mark.parametrize("center", [2.5, 2.4, 2.6, 3.0])
def test_local_window_holds_2d_plus_1_positions(center):
    mask = AF.local_window_mask(torch.tensor([[center]]), src_len=10, window=2)
    assert int(mask.sum()) == 5
    middle = math.floor(center + 0.5)
    assert mask[0, 0].nonzero().flatten().tolist() == list(range(middle - 2, middle + 3))


def test_local_p_gaussian_keeps_the_real_position():
    torch.manual_seed(0)
    predictor = LocalPredictor(4, 4)
    result = apply_scope(
        "local-p", torch.randn(1, 3, 4), None, src_len=12, window=3, predictor=predictor
    )
    position = result.position[0]  # (T,)
    expected = -((torch.arange(12.0)[None] - position[:, None]) ** 2) / (2 * 1.5**2)
    torch.testing.assert_close(result.log_prior[0], expected)


def test_local_m_past_the_source_end_reads_its_last_positions():
    # Two sentences of true lengths 4 and 7, padded to 7; eight target steps.
    mask = torch.tensor([[True] * 4 + [False] * 3, [True] * 7])
    result = apply_scope(
        "local-m", torch.zeros(2, 8, 3), mask[:, None], src_len=7, window=1, positions=None
    )
    assert result.position[0].tolist() == [0, 1, 2, 3, 3, 3, 3, 3]
    assert result.position[1].tolist() == [0, 1, 2, 3, 4, 5, 6, 6]
    assert bool(result.mask.any(dim=-1).all())  # no step is left with an empty window
    assert result.mask[0, 7].nonzero().flatten().tolist() == [2, 3]  # [p - D, p + D] ∩ sentence
    # Step by step (an int start, as the decoder's one-step calls give) agrees.
    for t in range(8):
        one = apply_scope(
            "local-m", torch.zeros(2, 1, 3), mask[:, None], src_len=7, window=1, positions=t
        )
        assert torch.equal(one.mask[:, 0], result.mask[:, t])


# --- content-based attention (Graves et al. 2014, NTM §3.3.1) ----------------------------


@pytest.mark.parametrize("model", ["rnnsearch", "luong"])
@pytest.mark.parametrize(("beta", "start"), [("query", 1.0), ("learned", 1.0), ("query", 5.0)])
def test_cosine_beta_starts_where_documented_inside_a_model(model, beta, start):
    from attnmt.config import load_config
    from attnmt.models import build_model

    config = load_config(
        None,
        [
            *(f"model.name={model}", "model.attention=cosine", f"model.cosine_beta={beta}"),
            *(f"model.cosine_beta_init={start}", "model.hidden_size=8", "model.embed_size=8"),
        ],
    )
    torch.manual_seed(0)
    network = build_model(config.model, 20, 20)  # runs the paper's initialiser
    (score,) = [m for m in network.modules() if type(m).__name__ == "CosineScore"]
    queries = torch.randn(3, 4, score.query_dim)
    strength = score.key_strength(queries)
    torch.testing.assert_close(strength, torch.full_like(strength, start))


def test_cosine_beta_fixed_from_the_config():
    from attnmt.config import attention_options, load_config

    config = load_config(
        None, ["model.attention=cosine", "model.cosine_beta=fixed", "model.cosine_beta_init=3"]
    )
    options = attention_options(config.model, 8, 8)
    assert options["beta"] == 3.0
    with pytest.raises(Exception, match="cosine_beta_init"):
        load_config(None, ["model.attention=cosine", "model.cosine_beta_init=0"])


# --- hard and soft attention (Xu et al. 2015 §4) -------------------------------------------


def _xu(model_overrides=(), train_overrides=()):
    """A tiny attentional RNN, its config and a batch of three sentences."""
    from attnmt.config import load_config
    from attnmt.data import Example, collate
    from attnmt.models import build_model

    config = load_config(
        None,
        [
            *("model.hidden_size=8", "model.embed_size=8", "model.dropout=0"),
            *(f"model.{o}" for o in model_overrides),
            *(f"train.{o}" for o in train_overrides),
        ],
    )
    torch.manual_seed(0)
    model = build_model(config.model, 16, 16)
    pairs = [([5, 6, 7, 8], [9, 10, 11]), ([5, 6], [12]), ([7], [9, 9])]
    examples = [Example("", "", src_ids=s, tgt_ids=t) for s, t in pairs]
    return model, config, collate(examples)


def _loss(model, config, batch, baseline=0.0, seed=1):
    from attnmt.training.distributed import Context
    from attnmt.training.losses import batch_loss
    from attnmt.training.run import Progress

    progress = Progress(baseline=baseline)
    torch.manual_seed(seed)  # the same sampled positions each time
    loss, _ = batch_loss(model, batch, config, Context(), progress)
    return loss, progress


def test_the_reward_is_the_unsmoothed_log_likelihood():
    model, plain, batch = _xu(["mode=hard"])
    _, smoothed, _ = _xu(["mode=hard"], ["label_smoothing=0.2"])
    _, without = _loss(model, plain, batch)
    _, with_smoothing = _loss(model, smoothed, batch)
    # The baseline moves by 0.1 * mean reward: the same reward whatever the smoothing.
    assert with_smoothing.baseline == pytest.approx(without.baseline, rel=1e-6)
    assert without.baseline < 0


def test_reinforce_weight_scales_only_the_reinforce_term():
    from attnmt.training import reinforce_loss

    log_prob = torch.tensor([[-1.0, -2.0]])
    entropy = torch.tensor([[0.5, 0.5]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    reward = torch.tensor([-3.0])
    one = reinforce_loss(log_prob, entropy, reward, -1.0, mask, entropy_weight=0.1)
    two = reinforce_loss(
        log_prob, entropy, reward, -1.0, mask, entropy_weight=0.1, reinforce_weight=2.0
    )
    policy = -(-3.0 + 1.0) * (-1.0 - 2.0)  # -(R - b) Σ log p
    assert float(one) == pytest.approx(policy - 0.1)
    assert float(two) == pytest.approx(2 * policy - 0.1)


def test_a_per_token_baseline_compares_each_sentence_with_its_length():
    model, config, batch = _xu(["mode=hard"], ["reinforce_baseline=token", "entropy_weight=0"])
    _, sentence_config, _ = _xu(["mode=hard"], ["entropy_weight=0"])
    lengths = batch.tgt_mask.sum(1).float()  # 4, 2, 3 (EOS included)
    _, plain = _loss(model, sentence_config, batch, baseline=0.0)
    _, per_token = _loss(model, config, batch, baseline=0.0)
    rewards_mean = plain.baseline / 0.1  # mean R
    # Per token: b moves by 0.1 * mean(R / |y|), not 0.1 * mean(R).
    assert per_token.baseline != pytest.approx(plain.baseline)
    assert per_token.baseline < 0 and abs(per_token.baseline) < abs(plain.baseline)
    assert abs(per_token.baseline / 0.1) <= abs(rewards_mean) / float(lengths.min()) + 1e-6
    # With b per token, the loss equals reinforce_loss with n·b per sentence.
    from attnmt.training import reinforce_loss

    torch.manual_seed(1)
    out = model(batch.src, batch.src_mask, batch.tgt_in)
    nll = torch.nn.functional.cross_entropy(
        out.logits.reshape(-1, 16), batch.tgt_out.reshape(-1), ignore_index=0, reduction="none"
    ).view_as(batch.tgt_out)
    reward = -(nll.detach() * batch.tgt_mask).sum(1)
    expected = (
        nll.sum() / lengths.sum()
        + reinforce_loss(
            out.attn_log_prob, None, reward, -0.5 * lengths, batch.tgt_mask, entropy_weight=0
        )
        / lengths.sum()
    )
    loss, _ = _loss(model, config, batch, baseline=-0.5)
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)


def test_reward_to_go_credits_each_choice_with_the_tokens_from_its_step_on():
    model, config, batch = _xu(["mode=hard"], ["reinforce_baseline=to-go", "entropy_weight=0"])
    _, token_config, _ = _xu(["mode=hard"], ["reinforce_baseline=token", "entropy_weight=0"])
    lengths = batch.tgt_mask.sum(1).float()  # 4, 2, 3 (EOS included)
    mask = batch.tgt_mask.float()
    torch.manual_seed(1)
    out = model(batch.src, batch.src_mask, batch.tgt_in)
    nll = torch.nn.functional.cross_entropy(
        out.logits.reshape(-1, 16), batch.tgt_out.reshape(-1), ignore_index=0, reduction="none"
    ).view_as(batch.tgt_out)
    log_p = -(nll.detach() * mask)  # (B, T)
    # By hand: step t of sentence b earns the log-likelihood of its tokens t, t+1, ...
    # and is compared with b times the number of those tokens.
    advantage = torch.zeros_like(log_p)
    for b in range(log_p.shape[0]):
        for t in range(int(lengths[b])):
            advantage[b, t] = log_p[b, t:].sum() - (-0.5) * (lengths[b] - t)
    policy = (advantage * out.attn_log_prob * mask).sum()
    expected = (nll.sum() - policy) / lengths.sum()
    loss, to_go = _loss(model, config, batch, baseline=-0.5)
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    # Not the sentence-level credit: the first step is credited alike, the later not.
    token_loss, token = _loss(model, token_config, batch, baseline=-0.5)
    assert float(token_loss.detach()) != pytest.approx(float(loss.detach()), rel=1e-4)
    # The moving baseline is the same per-token mean either way.
    assert to_go.baseline == pytest.approx(token.baseline, rel=1e-6)


def test_reward_to_go_needs_a_per_token_reward():
    from attnmt.config import load_config
    from attnmt.errors import ConfigError

    with pytest.raises(ConfigError, match="reinforce_baseline='to-go'"):
        load_config(
            None,
            ["model.mode=hard", "train.reinforce_baseline=to-go", "train.reinforce_reward=correct"],
        )


def test_hard_expectation_replaces_whole_sentences_by_the_soft_context():
    model, _, batch = _xu(["mode=hard", "hard_expectation=0.5"])
    model.train()
    seen = set()
    for seed in range(12):
        torch.manual_seed(seed)
        out = model(batch.src, batch.src_mask, batch.tgt_in, need_weights=True)
        for b in range(3):
            steps = int(batch.tgt_mask[b].sum())
            one_hot = (out.weights[b, :steps].max(dim=-1).values == 1).all()
            expected = bool((out.attn_log_prob[b, :steps] == 0).all())
            # Either every step of the sentence samples, or every step takes the expectation.
            assert bool(one_hot) != expected
            if expected:
                real = batch.src_mask[b]
                sums = out.weights[b, :steps][:, real].sum(-1)
                torch.testing.assert_close(sums, torch.ones_like(sums))
            seen.add(expected)
    assert seen == {True, False}  # both happen at p = 0.5
    model.eval()
    out = model(batch.src, batch.src_mask, batch.tgt_in, need_weights=True)
    assert (out.weights.max(dim=-1).values == 1).all()  # evaluation: argmax, no expectation


def test_doubly_stochastic_penalty_is_xu_eq_14():
    from attnmt.training.losses import doubly_stochastic

    model, config, batch = _xu([], ["doubly_stochastic=0.5"])
    _, plain_config, _ = _xu()
    with_penalty, _ = _loss(model, config, batch)
    without, _ = _loss(model, plain_config, batch)
    out = model(batch.src, batch.src_mask, batch.tgt_in, need_weights=True)
    by_hand = 0.0
    for b in range(3):
        steps, real = int(batch.tgt_mask[b].sum()), batch.src_mask[b]
        received = out.weights[b, :steps][:, real].sum(0)  # Σ_t α_ti over real positions
        by_hand += float(((1 - received) ** 2).sum().detach())
    penalty = float(doubly_stochastic(out.weights, batch).detach())
    assert penalty == pytest.approx(by_hand, rel=1e-5)
    tokens = float(batch.tgt_mask.sum())
    difference = float((with_penalty - without).detach())
    assert difference == pytest.approx(0.5 * by_hand / tokens, rel=1e-4)
    with_penalty.backward()
    assert model.attention.score.W_a.weight.grad.abs().sum() > 0


def test_doubly_stochastic_needs_soft_attention_in_an_rnn():
    from attnmt.config import load_config
    from attnmt.errors import ConfigError

    for bad in (["model.name=transformer"], ["model.mode=hard"]):
        with pytest.raises(ConfigError, match="doubly_stochastic"):
            load_config(None, [*bad, "train.doubly_stochastic=1"])
    with pytest.raises(ConfigError, match="context_gate"):
        load_config(None, ["model.name=transformer", "model.context_gate=true"])


@pytest.mark.parametrize("name", ["rnnsearch", "luong"])
def test_context_gate_scales_the_context_by_sigmoid_of_the_query(name):
    model, _, batch = _xu([f"name={name}", "context_gate=true"])
    model.eval()
    memory = model.encode(batch.src, batch.src_mask)
    query = torch.randn(3, 2, 8)
    gated = model.attend(query, memory, 0)
    gate, model.gate = model.gate, None
    plain = model.attend(query, memory, 0)
    beta = torch.sigmoid(gate(query))  # (B, T, 1)
    torch.testing.assert_close(gated.context, beta * plain.context)
    torch.testing.assert_close(gated.weights, plain.weights)  # the weights are not gated
