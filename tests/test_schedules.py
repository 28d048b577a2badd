"""Learning-rate schedules: the formulas, and exact state round trips."""

import math

import pytest
import torch

from attnmt.training import build_schedule


def _optimizer():
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)


def test_noam_peaks_at_the_base_rate_after_warmup():
    sched = build_schedule("noam", _optimizer(), 1e-3, warmup_steps=100)
    rates = [sched.step() for _ in range(400)]
    assert max(rates) == pytest.approx(1e-3)
    assert rates.index(max(rates)) == 99  # step 100
    assert rates[9] == pytest.approx(1e-3 * 10 / 100)  # linear warm-up
    assert rates[399] == pytest.approx(1e-3 * math.sqrt(100 / 400))  # inverse square root


def test_plateau_halves_after_two_bad_validations():
    opt = _optimizer()
    sched = build_schedule("plateau", opt, 1.0)
    for loss in (3.0, 2.0, 2.5, 2.4):
        sched.on_validation(loss)
    assert sched.lr == 0.5 and opt.param_groups[0]["lr"] == 0.5


def test_state_round_trip_continues_identically():
    a = build_schedule("noam", _optimizer(), 1e-3, warmup_steps=10)
    for _ in range(7):
        a.step()
    b = build_schedule("noam", _optimizer(), 1e-3, warmup_steps=10)
    b.load_state_dict(a.state_dict())
    assert [a.step() for _ in range(5)] == [b.step() for _ in range(5)]


def test_unknown_schedule():
    with pytest.raises(ValueError, match="constant, noam, plateau"):
        build_schedule("cosine", _optimizer(), 1.0)
