"""Every shipped config loads strictly, builds its model, and comments every key."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt.config import load_config
from attnmt.models import build_model

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))
EXPECTED = {
    "reverse",
    "quickstart",
    "rnnencdec",
    "rnnsearch",
    "luong-global-general",
    "luong-local-p",
    "hard",
    "transformer",
    "align-grc-en",
    "captions-soft",
    "captions-hard",
    "captions-plain",
    "glimpses",
    "cluttered-cnn",
}


def test_the_shipped_configs_are_all_there():
    assert {p.stem for p in CONFIGS} >= EXPECTED


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_loads_and_builds(path):
    cfg = load_config(path)
    model = build_model(cfg.model, 100, 100)
    assert sum(p.numel() for p in model.parameters()) > 0
    assert cfg.train.run_dir == f"runs/{path.stem}"
    assert cfg.train.max_steps > 0 and not cfg.train.max_minutes  # a step budget: any machine


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_key_is_commented(path):
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.endswith(":"):
            continue  # comments, blank lines and section headers
        assert " # " in line, f"{path.name}:{number}: key without a comment: {line!r}"
