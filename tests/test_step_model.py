"""What a search asks of a model (`attnmt.decoding.step_model.StepModel`): every model
family, an ensemble and (tests/test_onnx_export.py) an ONNX export keep it, with
`step_log_probs` giving log-probabilities; and the search's settings, `SearchOptions`."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnmt.config import ModelConfig
from attnmt.config.checks import IMAGE_MODELS, MODELS
from attnmt.data import BOS, EOS
from attnmt.decoding.attention_choice import choose_attention
from attnmt.decoding.ensemble import Ensemble
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.step_model import StepModel
from attnmt.models import build_model
from attnmt.models.torch_ops import TorchOps

V = 14  # target vocabulary
SIZES = {"embed_size": 8, "hidden_size": 8, "dropout": 0.0}


def _model(name: str, seed: int = 0):
    torch.manual_seed(seed)
    extra = {"image_height": 8} if name in IMAGE_MODELS else {}
    if name == "transformer":
        extra = {"heads": 2, "layers": 1, "ff_size": 16}
    return build_model(ModelConfig(name=name, **SIZES, **extra), 21, V).eval()


def _source(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Two sources: pixel tokens of an 8 x 8 image for the image families, else words."""
    length = 8 * 8 if name in IMAGE_MODELS else 5
    ids = torch.randint(4, 21, (2, length), generator=torch.Generator().manual_seed(1))
    src = torch.cat([ids, torch.full((2, 1), EOS)], dim=1)
    return src, torch.ones_like(src, dtype=torch.bool)


@pytest.mark.parametrize("name", MODELS)
def test_every_model_family_is_a_step_model(name):
    model = _model(name)
    assert isinstance(model, StepModel)
    assert isinstance(model.uses_attention, bool)
    assert model.uses_attention is (name not in ("rnnencdec", "show-tell"))
    assert isinstance(model.array_ops, TorchOps) and model.array_ops.device.type == "cpu"
    src, mask = _source(name)
    memory = model.encode(src, mask)
    state = model.init_state(memory)
    prev = torch.full((2,), BOS)
    with torch.no_grad():
        logits, _, _ = model.step(prev, state, memory)
        log_probs, _, weights = model.step_log_probs(
            prev, state, memory, need_weights=model.uses_attention
        )
    # Log-probabilities, float32: the log-softmax of the step's logits, rows summing to one.
    assert log_probs.dtype == torch.float32 and log_probs.shape == (2, V)
    torch.testing.assert_close(log_probs, torch.log_softmax(logits.float(), dim=-1))
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2))
    assert (weights is not None) is model.uses_attention


def test_an_ensemble_is_a_step_model_of_its_members():
    members = [_model("rnnsearch", seed=0), _model("rnnencdec", seed=1)]
    choices = [choose_attention(ModelConfig(name=n)) for n in ("rnnsearch", "rnnencdec")]
    ensemble = Ensemble(members, choices, "log-linear").eval()
    assert isinstance(ensemble, StepModel)
    assert ensemble.uses_attention is False  # one member has none
    assert ensemble.max_output_tokens is None
    src, mask = _source("rnnsearch")
    memory = ensemble.encode(src, mask)
    with torch.no_grad():
        log_probs, _, _ = ensemble.step_log_probs(
            torch.full((2,), BOS), ensemble.init_state(memory), memory
        )
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2))


def test_something_without_the_step_interface_is_no_step_model():
    assert not isinstance(torch.nn.Linear(2, 2), StepModel)


def test_search_options_are_one_frozen_value():
    options = SearchOptions(beam=4, n_best=2, alpha=0.0, need_weights=True)
    assert (options.beam, options.n_best, options.alpha, options.max_len) == (4, 2, 0.0, None)
    assert SearchOptions() == SearchOptions(beam=1, alpha=0.6, n_best=1, max_len_ratio=2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.beam = 5  # type: ignore[misc]


@pytest.mark.parametrize(("beam", "n_best"), [(2, 3), (1, 0), (0, 1)])
def test_search_options_refuse_an_n_best_outside_the_beam(beam, n_best):
    with pytest.raises(ValueError, match="n_best must be between 1 and beam"):
        SearchOptions(beam=beam, n_best=n_best)
