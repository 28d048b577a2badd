"""The cross-entropy over the vocabulary without the (N, V) logits: the output layer and the
loss fused, row chunk by row chunk, the gradient computed on the way.

The plain loss, `F.cross_entropy(generator(features), target)`, keeps whole (N, V) tensors
alive for one step, N the batch's target tokens and V the vocabulary: the logits, the
log-softmax saved for the backward, its gradient, and under bf16 autocast a bf16 and an
fp32 copy of each (2,048 tokens x 8,000 subwords: 65 MB per fp32 copy; at 8,192 tokens a
quarter of a GB each). Here the logits of `chunk_rows` rows at a time are made, used and
dropped. The loss is a sum over rows, so its gradient with respect to each row's logits is
known in the forward, up to the one number the backward brings (d loss / d sum):

    z = x Wᵀ + b,  p = softmax(z),  ℓ = (1 - ε)(lse(z) - z_y) + ε (lse(z) - mean(z))
    ∂ℓ/∂z = p - (1 - ε) onehot(y) - ε / V          (Szegedy et al. 2016's smoothing ε)
    ∂ℓ/∂x = (∂ℓ/∂z) W,  ∂ℓ/∂W = Σ_rows (∂ℓ/∂z)ᵀ x,  ∂ℓ/∂b = Σ_rows ∂ℓ/∂z

so each chunk's gradients go into three accumulators of the size of x, W and b, and the
backward only scales them: no second pass over the vocabulary, the same matrix products
as the plain loss. Rows whose target is `ignore_index` (padding) count for nothing. Under
autocast the products run in its dtype and everything else in fp32, as the plain loss's
`logits.float()` does. Without a gradient (validation) only the loss is computed.
"""

from __future__ import annotations

import torch
from torch import Tensor

# Rows per chunk: (chunk_rows, V) fp32 logits at a time, 32 MB at V = 8,000; large enough
# that the products keep the speed of one large product.
CHUNK_ROWS = 1024


def linear_cross_entropy(
    features: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    target: Tensor,
    *,
    ignore_index: int,
    label_smoothing: float = 0.0,
    chunk_rows: int = CHUNK_ROWS,
) -> tuple[Tensor, Tensor]:
    """The summed cross-entropy of `features @ weight.T + bias` against `target`, and each
    row's plain negative log-likelihood (no smoothing; 0 at ignored rows, no gradient).

    The loss equals `F.cross_entropy(F.linear(features, weight, bias), target,
    ignore_index=..., label_smoothing=..., reduction="sum")`, with its gradients to
    `features`, `weight` and `bias`.

    Shapes:
        features (N, D), weight (V, D), bias (V,) | None, target (N,) -> (), (N,)
    """
    device = features.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    inputs = (features, weight, bias)
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)
    with torch.autocast(device, enabled=False):
        return _LinearCrossEntropy.apply(
            *inputs, target, ignore_index, label_smoothing, chunk_rows, dtype, grad
        )


class _LinearCrossEntropy(torch.autograd.Function):
    """`linear_cross_entropy`'s forward (and gradient) and backward (the module docstring)."""

    @staticmethod
    def forward(
        ctx, features, weight, bias, target, ignore_index, smoothing, chunk_rows, dtype, grad
    ):
        compute = dtype or features.dtype  # the products' dtype: autocast's, or the inputs'
        acc = torch.promote_types(features.dtype, torch.float32)  # the rest: fp32 (or fp64)
        w = weight.detach().to(compute)
        b = bias.detach().to(acc) if bias is not None else None
        x_all = features.detach()
        vocab = weight.shape[0]
        if compute != acc:
            # A chunk then holds its logits twice, in the products' dtype and in fp32 (and
            # later the gradient likewise): fewer rows, so that a bf16 step's chunk peaks no
            # higher than an fp32 step's (682 rows at 2 + 4 bytes against 1,024 at 4).
            per_row = acc.itemsize + compute.itemsize
            chunk_rows = max(1, chunk_rows * acc.itemsize // per_row)
        nll = torch.zeros(target.shape[0], dtype=acc, device=features.device)
        total = torch.zeros((), dtype=acc, device=features.device)
        if grad:
            d_x = torch.empty(x_all.shape, dtype=acc, device=features.device)
            d_w = torch.zeros(weight.shape, dtype=acc, device=features.device)
            d_b = torch.zeros(vocab, dtype=acc, device=features.device)
        for start in range(0, target.shape[0], chunk_rows):
            rows = slice(start, start + chunk_rows)
            x = x_all[rows].to(compute)  # (n, D)
            y = target[rows]  # (n,)
            keep = y != ignore_index  # (n,)
            z = (torch.addmm(b.to(compute), x, w.t()) if b is not None else x @ w.t()).to(acc)
            picked = z.gather(1, y.clamp(min=0).unsqueeze(1)).squeeze(1)  # z_y: (n,)
            mean = z.mean(dim=-1) if smoothing else None  # (n,)
            # log Σ exp z with exp(z - max) written over z: torch.logsumexp would make a
            # second (n, V) tensor, the step's peak (benchmarks/results/train_memory.md).
            top = z.amax(dim=-1, keepdim=True)  # (n, 1)
            sums = z.sub_(top).exp_().sum(dim=-1)  # (n,)
            lse = top.squeeze(1) + sums.log()  # (n,)
            plain = torch.where(keep, lse - picked, 0.0)  # -log p(y): (n,)
            nll[rows] = plain
            if smoothing:
                spread = torch.where(keep, lse - mean, 0.0)  # -mean_v log p(v)
                total += ((1 - smoothing) * plain + smoothing * spread).sum()
            else:
                total += plain.sum()
            if not grad:
                continue
            d_z = z.div_(sums.unsqueeze(1))  # p = exp(z - max) / Σ, written over z: (n, V)
            if smoothing:
                d_z -= smoothing / vocab
            d_z.scatter_add_(
                1, y.clamp(min=0).unsqueeze(1), d_z.new_full((len(y), 1), smoothing - 1.0)
            )
            ignored = (~keep).nonzero().squeeze(1)
            if ignored.numel():  # padding rows: no gradient (a few rows, not a pass over all)
                d_z.index_fill_(0, ignored, 0.0)
            d_zc = d_z.to(compute)
            d_x[rows] = d_zc @ w  # (n, D)
            d_w += d_zc.t() @ x  # (V, D)
            if b is not None:
                d_b += d_z.sum(dim=0)
        ctx.mark_non_differentiable(nll)
        if grad:
            ctx.save_for_backward(d_x, d_w, d_b)
            ctx.input_dtypes = (features.dtype, weight.dtype)
            ctx.has_bias = bias is not None
        return total, nll

    @staticmethod
    def backward(ctx, d_total, _d_nll):
        d_x, d_w, d_b = ctx.saved_tensors
        x_dtype, w_dtype = ctx.input_dtypes
        wanted = ctx.needs_input_grad
        return (
            (d_x * d_total).to(x_dtype) if wanted[0] else None,
            (d_w * d_total).to(w_dtype) if wanted[1] else None,
            (d_b * d_total).to(w_dtype) if ctx.has_bias and wanted[2] else None,
            None, None, None, None, None, None,
        )  # fmt: skip
