"""RNNsearch's fused decoder loop (`attnmt.models.fused`) computes what the module path
(`_recur` at every step, through autograd) computes: outputs, weights and every gradient."""

from __future__ import annotations

import pytest
import torch

from attnmt.config import load_config
from attnmt.models import build_model
from attnmt.models.rnnsearch import RNNSearch


def _model(overrides=(), dtype=torch.float64) -> RNNSearch:
    cfg = load_config("configs/rnnsearch.yaml", ["model.embed_size=6", "model.hidden_size=5"])
    for item in overrides:
        key, value = item.split("=")
        setattr(cfg.model, key, type(getattr(cfg.model, key))(value))
    torch.manual_seed(0)
    model = build_model(cfg.model, 40, 50).to(dtype)
    for p in model.parameters():  # away from the tiny init, so every path matters
        torch.nn.init.normal_(p, std=0.3)
    return model


def _batch():
    torch.manual_seed(1)
    lengths = torch.tensor([9, 6, 2, 0, 1])  # one source with nothing to attend
    mask = torch.arange(9) < lengths[:, None]
    src = torch.randint(4, 40, (5, 9)) * mask
    tgt = torch.randint(4, 50, (5, 7))
    return src, mask, tgt


def _run(model, fused: bool, *, seed: int = 2):
    """Logits, weights and the gradient of a loss that reads both, by one path."""
    model.zero_grad()
    model._fusable = (lambda: True) if fused else (lambda: False)
    torch.manual_seed(seed)  # the same dropout masks on both paths
    out = model(*_batch(), need_weights=True)
    weight_of = torch.linspace(-1, 1, out.weights.shape[-1], dtype=out.weights.dtype)
    (out.logits.square().mean() + (out.weights * weight_of).sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.logits.detach(), out.weights.detach(), grads


def test_shipped_rnnsearch_takes_the_fused_loop():
    assert _model()._fusable()
    for override in ("scope=local-m", "mode=hard", "layers=2", "attention=concat"):
        assert not _model([override])._fusable(), override
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _model()._fusable()  # the loop runs in fp32 under autocast


def test_under_bf16_autocast_the_loop_runs_in_fp32_and_keeps_what_fp32_keeps():
    """bf16 training: the loop's outputs and gradients are the fp32 loop's on the same
    (bf16-rounded) inputs, and autograd keeps no more for the step than in fp32 (the
    module path kept each step's activations in bf16 beside the fp32 states)."""
    model = _model(dtype=torch.float32)
    model.train()
    src, mask, tgt = _batch()

    def saved_bytes(autocast: bool, fused: bool) -> tuple[int, dict]:
        model.zero_grad()
        model._fusable = (lambda: True) if fused else (lambda: False)
        seen: dict[int, int] = {}

        def pack(t):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        torch.manual_seed(2)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = model(src, mask, tgt, need_weights=True)
            loss = out.logits.float().square().mean()
        loss.backward()
        if fused:
            assert out.weights.dtype == torch.float32  # the loop's weights, in fp32
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        return sum(seen.values()), grads

    fused_bf16, grads = saved_bytes(True, True)
    module_bf16, _ = saved_bytes(True, False)
    fused_fp32, _ = saved_bytes(False, True)
    assert all(g.isfinite().all() and g.abs().sum() > 0 for g in grads.values())
    assert fused_bf16 < module_bf16 and fused_bf16 <= fused_fp32


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_fused_loop_matches_the_module_path(dropout):
    model = _model([f"dropout={dropout}"])
    model.train()
    logits, weights, grads = _run(model, fused=True)
    want_logits, want_weights, want_grads = _run(model, fused=False)
    # float64 on every CPU: the paths differ only in the order of their sums, ~1e-15
    # relative, far inside 1e-10; the GRU step's backward scaled by 1 + 1e-6 fails it.
    torch.testing.assert_close(logits, want_logits, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(weights, want_weights, rtol=1e-10, atol=1e-12)
    assert grads.keys() == want_grads.keys()
    for name in want_grads:
        torch.testing.assert_close(grads[name], want_grads[name], rtol=1e-9, atol=1e-12, msg=name)
    assert weights[3].abs().sum() == 0  # the empty source: zero weights, as masked_softmax


def test_fused_loop_without_gradients_matches_and_keeps_nothing():
    model = _model()
    model.eval()
    src, mask, tgt = _batch()
    with torch.no_grad():
        fused = model(src, mask, tgt, need_weights=True)
        model._fusable = lambda: False
        plain = model(src, mask, tgt, need_weights=True)
    torch.testing.assert_close(fused.logits, plain.logits, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(fused.weights, plain.weights, rtol=1e-10, atol=1e-12)
    assert fused.logits.grad_fn is None


def test_fused_loop_backward_runs_once():
    model = _model(dtype=torch.float32)
    model.train()
    out = model(*_batch())
    loss = out.logits.square().mean()
    loss.backward(retain_graph=True)
    # its backward overwrites the saved tanh with its square: a second one must fail loudly
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_the_decoder_loop_benchmark_times_both_paths():
    """benchmarks/decoder_loop.py cannot rot: a toy size, one round."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import decoder_loop

    result = decoder_loop.measure(
        3, 5, 4, rounds=1, repeats=1, overrides=["model.embed_size=8", "model.hidden_size=8"]
    )
    assert len(result["module_ms"]) == len(result["fused_ms"]) == 1
    assert result["module_ms"][0] > 0 and result["fused_ms"][0] > 0 and result["speedup"] > 0
    with pytest.raises(SystemExit, match="fused loop"):
        decoder_loop.measure(3, 5, 4, rounds=1, repeats=1, overrides=["model.mode=hard"])
