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
