"""The loss over the vocabulary fused with the output layer (`attnmt.training.vocab_loss`):
the same loss, per-token log-likelihoods and gradients as PyTorch's cross-entropy of the
logits, without keeping any (tokens, vocabulary) tensor for the backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmt.config import load_config
from attnmt.models import build_model
from attnmt.training.losses import vocab_cross_entropy
from attnmt.training.vocab_loss import linear_cross_entropy

PAD = 0


def _inputs(bias: bool, dtype=torch.float64):
    torch.manual_seed(0)
    x = torch.randn(37, 6, dtype=dtype, requires_grad=True)  # N = 37 rows, D = 6
    w = torch.randn(11, 6, dtype=dtype, requires_grad=True)  # V = 11
    b = torch.randn(11, dtype=dtype, requires_grad=True) if bias else None
    y = torch.randint(1, 11, (37,))
    y[::5] = PAD  # padding rows count for nothing
    return x, w, b, y


def _grads(loss, tensors):
    return torch.autograd.grad(loss, [t for t in tensors if t is not None])


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("chunk_rows", [1, 8, 64])  # one row, a last partial chunk, one chunk
def test_fused_loss_equals_cross_entropy_of_the_logits(bias, smoothing, chunk_rows):
    x, w, b, y = _inputs(bias)
    summed, nll = linear_cross_entropy(
        x, w, b, y, ignore_index=PAD, label_smoothing=smoothing, chunk_rows=chunk_rows
    )
    logits = F.linear(x, w, b)
    want = F.cross_entropy(logits, y, ignore_index=PAD, label_smoothing=smoothing, reduction="sum")
    want_nll = F.cross_entropy(logits, y, ignore_index=PAD, reduction="none")
    # float64: the two differ only in the order of their sums, ~1e-15 relative
    torch.testing.assert_close(summed, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(nll, want_nll.detach(), rtol=1e-12, atol=1e-12)
    assert not nll.requires_grad and (nll[::5] == 0).all()
    # a loss that scales the sum: the backward only scales what the forward computed
    got = _grads(2.5 * summed, (x, w, b))
    expected = _grads(2.5 * want, (x, w, b))
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)


def test_without_gradients_only_the_loss_is_computed():
    x, w, b, y = _inputs(True)
    with torch.no_grad():
        summed, _ = linear_cross_entropy(x, w, b, y, ignore_index=PAD)
    want = F.cross_entropy(F.linear(x, w, b), y, ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(summed, want.detach(), rtol=1e-12, atol=1e-12)
    assert summed.grad_fn is None


def test_under_bf16_autocast_it_agrees_with_the_autocast_logits():
    """The products in bf16, the rest in fp32, as `F.cross_entropy(logits.float())` of
    autocast's bf16 logits: the same up to bf16's rounding of the products."""
    x, w, b, y = _inputs(True, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        summed, _ = linear_cross_entropy(x, w, b, y, ignore_index=PAD, chunk_rows=8)
        logits = F.linear(x, w, b)
    assert logits.dtype == torch.bfloat16 and summed.dtype == torch.float32
    want = F.cross_entropy(logits.float(), y, ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(summed, want, rtol=2e-2, atol=0.0)
    got, expected = _grads(summed, (x, w, b)), _grads(want, (x, w, b))
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g, e, rtol=0.05, atol=0.05)


def _saved_bytes(fn) -> int:
    """Bytes autograd keeps for the backward of what `fn` builds (distinct storages)."""
    seen: dict[int, int] = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def test_no_tokens_by_vocabulary_tensor_is_kept_for_the_backward():
    torch.manual_seed(0)
    N, D, V = 512, 16, 4000
    x = torch.randn(N, D, requires_grad=True)
    w = torch.randn(V, D, requires_grad=True)
    y = torch.randint(1, V, (N,))
    logits_bytes = N * V * 4

    def fused():
        linear_cross_entropy(x, w, None, y, ignore_index=PAD, chunk_rows=128)

    def plain():
        F.cross_entropy(F.linear(x, w), y, ignore_index=PAD, reduction="sum")

    assert _saved_bytes(plain) >= logits_bytes  # the log-softmax, (N, V)
    # what the fused loss keeps: the gradients of x and W, (N + V) x D, and of nothing else
    assert _saved_bytes(fused) <= (N + V) * D * 4 + V * 4


@pytest.mark.parametrize("name", ["rnnsearch", "transformer", "luong", "rnnencdec"])
def test_every_text_family_leaves_its_output_layer_to_the_loss(name):
    """`model(..., logits=False)` gives the output layer's input and the layer; the loss
    from them equals the loss of the model's own logits, gradients included (float64)."""
    cfg = load_config(f"configs/{name}.yaml" if name != "luong" else "configs/luong-local-p.yaml")
    cfg.model.embed_size = cfg.model.hidden_size = 8
    if name == "transformer":
        cfg.model.ff_size = 16
        cfg.model.heads = 2
    cfg.model.dropout = 0.0
    torch.manual_seed(0)
    model = build_model(cfg.model, 40, 40).double()  # one joint vocabulary (Transformer)
    src = torch.randint(4, 40, (3, 5))
    mask = torch.ones(3, 5, dtype=torch.bool)
    tgt_in = torch.randint(4, 40, (3, 6))
    tgt_out = torch.randint(4, 40, (3, 6))
    tgt_out[2, 4:] = PAD
    out = model(src, mask, tgt_in, logits=False)
    assert out.logits is None and out.features is not None
    summed, nll = vocab_cross_entropy(out, tgt_out, 0.1)
    got = _grads(summed, list(model.parameters()))
    full = model(src, mask, tgt_in)
    want, want_nll = vocab_cross_entropy(full, tgt_out, 0.1)
    assert full.features is None
    expected = _grads(want, list(model.parameters()))
    torch.testing.assert_close(summed, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(nll, want_nll, rtol=1e-10, atol=1e-12)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-8, atol=1e-12)
