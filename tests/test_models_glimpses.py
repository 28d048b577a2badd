"""The recurrent attention model of Mnih et al. 2014 (`attnmt.models.glimpses`): its sensor,
its location policy and baseline, the decoding protocol, the weights, and a tiny run."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmt.data.vocab import BOS, EOS, PAD
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.search import beam_search, greedy
from attnmt.models.glimpses import Glimpses, footprint, location_log_prob
from attnmt.models.vision import pixels_of

V = 12  # target vocabulary: PAD UNK BOS EOS and eight labels


def _pixels(batch: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    """Random pixel tokens (grey levels 0..16 are ids 4..20), then EOS: (B, H·W + 1)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 21, (batch, height * width), generator=g)
    return torch.cat([ids, torch.full((batch, 1), EOS)], dim=1)


def _model(seed: int = 0, **kw) -> Glimpses:
    torch.manual_seed(seed)
    options = {"image_height": 16, "hidden_size": 24, "glimpses": 3, "patch": 4, "scales": 3}
    return Glimpses(21, V, **{**options, **kw})


def _inputs(batch: int = 3, height: int = 16, width: int = 16, seed: int = 0):
    src = _pixels(batch, height, width, seed)
    mask = torch.ones_like(src, dtype=torch.bool)
    labels = torch.arange(batch) % 8 + 4
    tgt_in = torch.stack([torch.full((batch,), BOS), labels], dim=1)  # (B, 2)
    tgt_out = torch.stack([labels, torch.full((batch,), EOS)], dim=1)  # (B, 2)
    return src, mask, tgt_in, tgt_out


# -- shapes, modes, inputs ------------------------------------------------------------------


def test_shapes_in_train_and_eval_mode():
    model = _model()
    src, mask, tgt_in, _ = _inputs()
    out = model.train()(src, mask, tgt_in, need_weights=True)
    assert out.logits.shape == (3, 2, V)
    assert out.weights.shape == (3, 2, 16 * 16)
    assert out.attn_log_prob.shape == out.reward_baseline.shape == (3, 2)  # N - 1 actions
    assert out.attn_entropy is None
    memory = model.encode(src, mask)
    assert memory.logits0.shape == (3, V)
    assert memory.locations.shape == (3, 3, 2)
    assert memory.width == 16

    out = model.eval()(src, mask, tgt_in)
    assert out.weights is None and out.attn_log_prob is None and out.reward_baseline is None
    memory = model.encode(src, mask)
    assert memory.log_prob is None and memory.baseline is None
    assert model.uses_attention


def test_a_40_pixel_canvas_and_one_glimpse():
    model = _model(image_height=40, glimpses=1, patch=8)
    src, mask, tgt_in, _ = _inputs(2, 40, 40)
    out = model.train()(src, mask, tgt_in)
    assert out.logits.shape == (2, 2, V)
    assert out.attn_log_prob.shape == out.reward_baseline.shape == (2, 0)  # l_1 is fixed
    assert model.eval().encode(src, mask).locations.shape == (2, 1, 2)


def test_eval_is_deterministic_and_training_samples_locations():
    model = _model(location_std=1.0)  # wide: many samples land outside and are clamped
    src, mask, _, _ = _inputs(8)
    model.eval()
    first, second = model.encode(src, mask), model.encode(src, mask)
    torch.testing.assert_close(first.locations, second.locations, rtol=0, atol=0)
    torch.testing.assert_close(first.logits0, second.logits0, rtol=0, atol=0)

    model.train()
    torch.manual_seed(1)
    first, second = model.encode(src, mask), model.encode(src, mask)
    assert not torch.equal(first.locations[:, 1:], second.locations[:, 1:])
    assert (first.locations[:, 0] == 0).all()  # l_1: the centre, always
    for memory in (first, second):
        assert memory.locations.abs().max() <= 1.0
    assert (first.locations.abs() == 1.0).any()  # some were clamped


def test_inputs_are_checked():
    model = _model()
    src, mask, tgt_in, _ = _inputs()
    with pytest.raises(ValueError, match="image_height"):
        model(src[:, 1:], mask[:, 1:], tgt_in)  # 255 pixels: not a 16-row image
    with pytest.raises(ValueError, match="src_mask"):
        model(src, mask.long(), tgt_in)
    with pytest.raises(ValueError, match="tgt_in"):
        model(src, mask, tgt_in[:2])
    with pytest.raises(ValueError, match="location_std"):
        Glimpses(21, V, image_height=16, location_std=0.0)
    with pytest.raises(ValueError, match="glimpses"):
        Glimpses(21, V, image_height=16, glimpses=0)


# -- the glimpse sensor ---------------------------------------------------------------------


def test_the_sensor_reads_a_bright_pixel_at_every_scale():
    model = _model()  # P = 4, K = 3: sides 4, 8, 16
    ids = torch.full((1, 16 * 16), 4)
    ids[0, 7 * 16 + 7] = 20  # one white pixel at (7, 7)
    images = pixels_of(torch.cat([ids, torch.tensor([[EOS]])], dim=1), 16)
    patches = model.sense(images, torch.zeros(1, 2)).view(3, 4, 4)  # (K, P, P)
    # finest: pixels 6..9 copied; then 2x2 and 4x4 blocks averaged
    for k, value in enumerate([1.0, 1 / 4, 1 / 16]):
        expected = torch.zeros(4, 4)
        expected[1, 1] = value
        torch.testing.assert_close(patches[k], expected)


def test_the_sensor_reads_zeros_outside_and_coordinates_are_row_col():
    model = _model()
    images = torch.zeros(1, 1, 16, 16)
    images[0, 0, :8, 8:] = 1.0  # top-right quadrant white
    far = model.sense(images, torch.tensor([[5.0, 5.0]])).view(3, 4, 4)
    assert (far[0] == 0).all()
    top_right = model.sense(images, torch.tensor([[-0.5, 0.5]])).view(3, 4, 4)  # (row, col)
    assert (top_right[0] == 1).all()
    bottom_left = model.sense(images, torch.tensor([[0.5, -0.5]])).view(3, 4, 4)
    assert (bottom_left[0] == 0).all()
    corner = model.sense(torch.ones(1, 1, 16, 16), torch.tensor([[-1.0, -1.0]])).view(3, 4, 4)
    assert corner[0].sum() == 4  # a quarter of the finest patch lies on the image


# -- the location policy and the baseline ---------------------------------------------------


def _grads(model: Glimpses) -> dict[str, bool]:
    """Which parameters received a non-zero gradient."""
    return {
        name: p.grad is not None and bool(p.grad.abs().sum() > 0)
        for name, p in model.named_parameters()
    }


def test_reinforce_reaches_only_the_location_network():
    model = _model().train()
    src, mask, _, _ = _inputs(4)
    memory = model.encode(src, mask)
    advantage = torch.tensor([1.0, -0.5, 2.0, -1.0])  # a hand-made A = R - b
    (-(advantage[:, None] * memory.log_prob).sum()).backward()
    got = _grads(model)
    assert got["locate.weight"] and got["locate.bias"]
    assert not any(v for k, v in got.items() if not k.startswith("locate."))


def test_the_baseline_regression_reaches_only_the_baseline():
    model = _model().train()
    src, mask, _, _ = _inputs(4)
    memory = model.encode(src, mask)
    reward = torch.tensor([1.0, 0.0, 1.0, 0.0])
    ((memory.baseline - reward[:, None]) ** 2).sum().backward()
    got = _grads(model)
    assert got["baseline.weight"] and got["baseline.bias"]
    assert not any(v for k, v in got.items() if not k.startswith("baseline."))


def test_the_classification_loss_never_reaches_the_policy_or_baseline():
    model = _model().train()
    src, mask, tgt_in, tgt_out = _inputs(4)
    out = model(src, mask, tgt_in)
    F.cross_entropy(out.logits.reshape(-1, V), tgt_out.reshape(-1)).backward()
    got = _grads(model)
    assert not any(got[f"{net}.{p}"] for net in ("locate", "baseline") for p in ("weight", "bias"))
    for name in ("what.weight", "join_what.weight", "core.weight_hh", "classify.weight"):
        assert got[name], name


def test_the_score_function_estimates_the_gradient_of_the_expected_reward():
    # E_l[r(l) ∇_μ log π(l | μ)] = ∇_μ E_l[r(l)] for r(l) = -|l - c|²: -2 (μ - c)
    torch.manual_seed(0)
    std, samples = 0.3, 200_000
    mean = torch.tensor([0.0, 0.5], requires_grad=True)
    target = torch.tensor([0.3, -0.2])
    means = mean.expand(samples, 2)
    sample = (means + std * torch.randn(samples, 2)).detach()
    reward = -((sample - target) ** 2).sum(dim=-1)  # (M,)
    (reward * location_log_prob(sample, means, std)).mean().backward()
    # A Monte Carlo mean: each sample's term has a standard deviation of about 3.7 here, so
    # the estimate's standard error is 3.7 / sqrt(200,000) = 0.009 and 0.03 is 3.5 of them.
    torch.testing.assert_close(mean.grad, -2 * (mean.detach() - target), atol=0.03, rtol=0)


def test_the_log_density_is_the_gaussian_one():
    sample, mean = torch.tensor([[0.1, -0.4]]), torch.tensor([[0.0, 0.0]])
    normal = torch.distributions.Normal(mean, 0.15)
    torch.testing.assert_close(
        location_log_prob(sample, mean, 0.15), normal.log_prob(sample).sum(dim=-1)
    )


# -- decoding -------------------------------------------------------------------------------


def test_step_gives_the_label_then_eos_and_matches_forward():
    model = _model().eval()
    src, mask, tgt_in, _ = _inputs(4)
    memory = model.encode(src, mask)
    state = model.init_state(memory)
    logits, state, weights = model.step(tgt_in[:, 0], state, memory, need_weights=True)
    assert logits.shape == (4, V) and weights.shape == (4, 16 * 16)
    assert torch.equal(logits.argmax(-1), memory.logits0.argmax(-1))
    out = model(src, mask, tgt_in, need_weights=True)
    torch.testing.assert_close(out.logits[:, 0], logits)
    torch.testing.assert_close(out.weights[:, 0], weights)

    logits, state, _ = model.step(logits.argmax(-1), state, memory)
    assert (logits.argmax(-1) == EOS).all()
    torch.testing.assert_close(out.logits[:, 1], logits)
    assert F.log_softmax(logits, -1)[:, EOS].exp().min() > 0.999


def test_greedy_and_beam_search_read_one_label():
    model = _model().eval()
    src, mask, _, _ = _inputs(3)
    scores = model.encode(src, mask).logits0.clone()
    scores[:, [PAD, BOS]] = float("-inf")  # never emitted by the searches
    best = scores.argmax(-1).tolist()
    hyps = greedy(model, src, mask, SearchOptions(need_weights=True))
    assert [h.tokens for h in hyps] == [[b] for b in best]
    assert hyps[0].weights.shape == (2, 16 * 16)  # the label and the EOS
    beams = beam_search(model, src, mask, SearchOptions(beam=3, need_weights=True))
    assert [b[0].tokens for b in beams] == [[b] for b in best]
    assert beams[0][0].weights.shape == (2, 16 * 16)


def test_memory_and_state_follow_a_beam_reorder():
    model = _model().train()
    src, mask, _, _ = _inputs(3)
    memory = model.encode(src, mask)
    rows = torch.tensor([2, 2, 0])
    picked = memory.select(rows)
    assert torch.equal(picked.locations, memory.locations[rows])
    assert torch.equal(picked.log_prob, memory.log_prob[rows]) and picked.width == 16
    state = model.init_state(memory)
    _, state, _ = model.step(torch.full((3,), BOS), state, memory)
    assert state.select(rows).read.tolist() == [1, 1, 1]


# -- weights and the path -------------------------------------------------------------------


def test_weights_are_a_distribution_over_pixels_at_the_glimpses():
    model = _model().eval()
    src, mask, tgt_in, _ = _inputs(3)
    out = model(src, mask, tgt_in, need_weights=True)
    assert (out.weights >= 0).all()
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(3, 2))
    torch.testing.assert_close(out.weights[:, 0], out.weights[:, 1])

    centre = footprint(torch.zeros(1, 1, 2), 16, 16, 4)[0, 0]  # (H, W)
    expected = torch.zeros(16, 16)
    expected[6:10, 6:10] = 1 / 16
    torch.testing.assert_close(centre, expected)
    corner = footprint(torch.full((1, 1, 2), -1.0), 16, 16, 4)[0, 0]
    assert corner[:2, :2].sum() == pytest.approx(1.0)  # the quarter on the image
    edge = footprint(torch.tensor([[[0.9, -1.0]]]), 40, 40, 8)
    assert edge.sum().item() == pytest.approx(1.0)


def test_glimpse_path_is_in_pixel_coordinates():
    model = _model(image_height=40, glimpses=4, patch=8)
    src, mask, _, _ = _inputs(2, 40, 40)
    memory = model.eval().encode(src, mask)
    path = model.glimpse_path(memory)
    assert path.shape == (2, 4, 2)
    torch.testing.assert_close(path[:, 0], torch.full((2, 2), 19.5))  # the centre
    assert path.min() >= -0.5 and path.max() <= 39.5
    corners = memory.locations.new_tensor([[[-1.0, -1.0], [1.0, 1.0]]])
    memory.locations = corners
    assert model.glimpse_path(memory).tolist() == [[[-0.5, -0.5], [39.5, 39.5]]]


def test_bf16_autocast_runs():
    model = _model().train()
    src, mask, tgt_in, _ = _inputs(2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(src, mask, tgt_in, need_weights=True)
    assert torch.isfinite(out.logits.float()).all()
    assert out.attn_log_prob.dtype == out.reward_baseline.dtype == torch.float32


# -- a tiny run -----------------------------------------------------------------------------


def _quadrants(batch: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """16x16 canvases with a white 4x4 square somewhere in one quadrant; label 4 + the
    quadrant. Shapes: -> src (B, 257), labels (B,)"""
    quadrant = torch.randint(0, 4, (batch,), generator=g)
    images = torch.zeros(batch, 16, 16, dtype=torch.long)
    for i, q in enumerate(quadrant.tolist()):
        top = 8 * (q // 2) + int(torch.randint(0, 5, (), generator=g))
        left = 8 * (q % 2) + int(torch.randint(0, 5, (), generator=g))
        images[i, top : top + 4, left : left + 4] = 16
    src = torch.cat([images.flatten(1) + 4, torch.full((batch, 1), EOS)], dim=1)
    return src, quadrant + 4


def _train_on_quadrants(model: Glimpses, steps: int = 150) -> tuple[list, list, float]:
    """Cross-entropy, REINFORCE (R = 1 for the right label, minus b_n) and the baseline's
    squared error, Adam 3e-3, 32 canvases a step: the training losses and rewards per step
    and the accuracy on 200 fresh canvases in eval mode."""
    g = torch.Generator().manual_seed(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses, rewards = [], []
    model.train()
    for _ in range(steps):
        src, labels = _quadrants(32, g)
        mask = torch.ones_like(src, dtype=torch.bool)
        tgt_in = torch.stack([torch.full_like(labels, BOS), labels], dim=1)
        tgt_out = torch.stack([labels, torch.full_like(labels, EOS)], dim=1)
        out = model(src, mask, tgt_in)
        nll = F.cross_entropy(out.logits.reshape(-1, 8), tgt_out.reshape(-1))
        reward = (out.logits[:, 0].detach().argmax(-1) == labels).float()  # R: (B,)
        loss = nll
        if out.attn_log_prob.shape[1]:  # no action at all: one glimpse, no context network
            advantage = reward[:, None] - out.reward_baseline.detach()  # R - b_n: (B, A)
            policy = -(advantage * out.attn_log_prob).sum(dim=1).mean()
            loss = loss + policy + ((out.reward_baseline - reward[:, None]) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(nll.item())
        rewards.append(reward.mean().item())
    src, labels = _quadrants(200, g)
    model.eval()
    with torch.no_grad():
        memory = model.encode(src, torch.ones_like(src, dtype=torch.bool))
    return losses, rewards, (memory.logits0.argmax(-1) == labels).float().mean().item()


def test_cross_entropy_and_reinforce_learn_the_quadrant():
    torch.manual_seed(0)
    model = Glimpses(21, 8, image_height=16, hidden_size=32, glimpses=3, patch=4, scales=3)
    losses, rewards, accuracy = _train_on_quadrants(model)
    # Far from what training reaches, whose rounding differs by CPU (fp32 here, no autocast):
    # seeds 0-2 ended at a loss ratio of 0.008-0.046, accuracy 1.0 and rewards 0.98-1.0 (an
    # Intel Xeon with AMX; seed 0 the same with AVX2 kernels). Chance is 0.25.
    assert sum(losses[-20:]) / 20 < 0.5 * sum(losses[:20]) / 20
    assert accuracy > 0.6
    assert sum(rewards[-20:]) / 20 > 0.6


# -- the context network (Ba et al. 2015) ---------------------------------------------------


def test_a_context_network_chooses_the_first_glimpse_too():
    model = _model(context=4)
    src, mask, tgt_in, _ = _inputs()
    out = model.train()(src, mask, tgt_in)
    assert out.attn_log_prob.shape == out.reward_baseline.shape == (3, 3)  # N actions
    memory = model.eval().encode(src, mask)
    first = memory.locations[:, 0]  # (B, 2): read off the thumbnail, not the centre
    assert not torch.equal(first, torch.zeros_like(first))
    other = model.encode(*_inputs(seed=1)[:2]).locations[:, 0]
    assert not torch.allclose(first, other)  # another image, another first glimpse
    with pytest.raises(ValueError, match="context"):
        _model(context=-1)


def test_with_a_context_network_each_loss_trains_its_own_side():
    src, mask, tgt_in, tgt_out = _inputs(4)
    where = {"locate", "context_in", "context_out", "where_core"}

    def nets(got: dict[str, bool]) -> set[str]:
        return {name.split(".")[0] for name, hit in got.items() if hit}

    model = _model(context=4).train()
    memory = model.encode(src, mask)
    advantage = torch.tensor([1.0, -0.5, 2.0, -1.0])
    (-(advantage[:, None] * memory.log_prob).sum()).backward()
    assert nets(_grads(model)) == where  # REINFORCE: the whole "where" side, nothing else

    model = _model(context=4).train()
    memory = model.encode(src, mask)
    ((memory.baseline - 1.0) ** 2).sum().backward()
    assert nets(_grads(model)) == {"baseline"}

    model = _model(context=4).train()
    out = model(src, mask, tgt_in)
    F.cross_entropy(out.logits.reshape(-1, V), tgt_out.reshape(-1)).backward()
    assert nets(_grads(model)) == {"what", "where", "join_what", "join_where", "core", "classify"}


def _one_glimpse_accuracy(context: int) -> float:
    """A one-glimpse, one-4x4-patch model trained on the quadrant task for 150 steps: its
    test accuracy. Without a context network the glimpse sits at the centre."""
    torch.manual_seed(0)
    model = Glimpses(
        21, 8, image_height=16, hidden_size=32, glimpses=1, patch=4, scales=1, context=context
    )
    return _train_on_quadrants(model)[2]


def test_reinforce_teaches_the_context_network_a_first_glimpse_that_pays():
    # One glimpse of one 4x4 patch. At the centre it rarely shows the square (0.35 here;
    # chance 0.25); placed by a context network trained with REINFORCE, the glimpse (its
    # patch and its "where" input, which can carry what the thumbnail saw) names the
    # quadrant (0.985 here). Seeds 0-2: 0.365-0.375 and 0.97-1.0 (an Intel Xeon with AMX, and
    # seed 0 the same with AVX2 kernels): both bounds hold with room for any CPU's rounding.
    assert _one_glimpse_accuracy(context=0) < 0.6
    assert _one_glimpse_accuracy(context=4) > 0.8
