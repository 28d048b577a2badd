"""Pure attention math: masks, masked softmax, context, local windows, Gaussians, sampling.

No parameters, no state. Every mask here has ONE polarity: `True` means *may attend*.
Masks of every origin (padding, causal, local window) are combined with `&`. A row where
nothing may be attended gets zero weights and a zero context, never NaN (nor NaN
gradients).

Shapes legend: B batch, S source length, T target length, H heads, Dk key width, Dv value
width; `...` any leading batch dimensions (B, or B and H).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnmt.attention.base import AttentionOutput

__all__ = [
    "attend",
    "causal_mask",
    "expand_mask",
    "gaussian_window",
    "local_window_mask",
    "masked_log_softmax",
    "masked_softmax",
    "sample_positions",
    "scaled_dot_product",
    "source_lengths",
]


def expand_mask(mask: Tensor | None, batch: int, tgt_len: int, src_len: int) -> Tensor | None:
    """Check a user mask and give it a target axis.

    Args:
        mask: bool, True = may attend; `(B, S)` (padding), `(B, T, S)`, or `(B, 1, S)`
            (the same row for every target step); `None` for no mask.

    Shapes:
        mask (B, S) | (B, T, S) | (B, 1, S) -> (B, 1, S) | (B, T, S)

    Raises:
        ValueError: not bool, or a shape other than the three above.
    """
    if mask is None:
        return None
    shape = tuple(mask.shape)
    expected = f"(B={batch}, S={src_len}) or (B={batch}, T={tgt_len}, S={src_len})"
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a bool tensor {expected} with True = may attend, got dtype "
            f"{mask.dtype}; convert with `mask.bool()` (or `~mask` for a True = ignore mask)"
        )
    if shape == (batch, src_len):
        return mask.unsqueeze(1)  # (B, 1, S)
    if mask.dim() == 3 and shape[0] == batch and shape[1] in (1, tgt_len) and shape[2] == src_len:
        return mask  # (B, T, S) or (B, 1, S)
    raise ValueError(f"mask must have shape {expected}, got {shape}")


def masked_softmax(scores: Tensor, mask: Tensor | None = None, *, dim: int = -1) -> Tensor:
    """Softmax over `dim` restricted to the positions where `mask` is True.

    Masked positions get weight exactly 0; a row with no True gets all zeros (not NaN, and
    its gradient is zero, not NaN).

    Shapes:
        scores (..., S), mask broadcastable to scores -> weights (..., S)
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    # A finite fill (not -inf) keeps fully masked rows finite; the product zeroes them.
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=dim) * mask


def masked_log_softmax(scores: Tensor, mask: Tensor | None = None, *, dim: int = -1) -> Tensor:
    """Log of `masked_softmax`: `-inf` at masked positions (and everywhere in a row with
    no True), finite gradients everywhere.

    Shapes:
        scores (..., S), mask broadcastable to scores -> log-probabilities (..., S)
    """
    if mask is None:
        return torch.log_softmax(scores, dim=dim)
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    log_probs = torch.log_softmax(filled, dim=dim)
    return log_probs.masked_fill(~mask, float("-inf"))


def attend(weights: Tensor, value: Tensor) -> Tensor:
    """The context: weighted sum of the values, `weights @ value` (Bahdanau eq. 5's
    c_i = sum_j alpha_ij h_j).

    Shapes:
        weights (..., T, S), value (..., S, Dv) -> context (..., T, Dv)
    """
    return torch.matmul(weights, value)


def causal_mask(tgt_len: int, src_len: int | None = None, *, device=None) -> Tensor:
    """Decoder self-attention mask, True = may attend, with the two sequences' ends aligned.

    Key position s may be attended by query position t iff `s <= t + (S - T)`. With T == S
    this is the usual lower triangle; with T < S the queries are the last T positions of
    the sequence (incremental decoding with cached keys: T = 1 sees all S keys).

    Shapes:
        -> (T, S) bool
    """
    src_len = tgt_len if src_len is None else src_len
    t = torch.arange(tgt_len, device=device).unsqueeze(1)  # (T, 1)
    s = torch.arange(src_len, device=device).unsqueeze(0)  # (1, S)
    return s <= t + (src_len - tgt_len)  # (T, S)


def local_window_mask(center: Tensor, src_len: int, window: float) -> Tensor:
    """Local attention window [p_t - D, p_t + D] (Luong et al. 2015 §3.2), True = inside.

    The window is centred on the position nearest p_t (round half up), so it always holds
    2D + 1 positions, Luong's a_t ∈ R^{2D+1} (fewer where it passes a sentence edge). A
    real-valued p_t (local-p) keeps its exact value in the Gaussian (`gaussian_window`).

    Args:
        center: aligned positions p_t (integer or real), 0-based.
        window: the half-width D.

    Shapes:
        center (B, T) -> (B, T, S) bool
    """
    s = torch.arange(src_len, device=center.device, dtype=torch.float32)  # (S,)
    middle = torch.floor(center.to(torch.float32) + 0.5)  # nearest position: (B, T)
    return (s - middle.unsqueeze(-1)).abs() <= window  # (B, T, S)


def gaussian_window(center: Tensor, src_len: int, sigma: float, *, log: bool = False) -> Tensor:
    """Luong et al. 2015 eq. 10's factor exp(-(s - p_t)^2 / (2 sigma^2)), or its log.

    Differentiable in `center`, so gradients reach whatever predicted p_t. Computed in fp32
    whatever the input dtype or autocast: in bf16 the positions past 256 are no longer all
    representable, and neighbouring positions would get one and the same factor.

    Shapes:
        center (B, T) -> (B, T, S) float32
    """
    s = torch.arange(src_len, device=center.device, dtype=torch.float32)  # (S,)
    center = center.to(torch.float32)
    log_factor = -((s - center.unsqueeze(-1)) ** 2) / (2.0 * sigma**2)  # (B, T, S)
    return log_factor if log else log_factor.exp()


def source_lengths(mask: Tensor) -> Tensor:
    """True (unpadded) source length of each sentence: one past its last position that any
    target step may attend (0 when there is none).

    Shapes:
        mask (B, S) | (B, T, S) bool -> lengths (B,) long
    """
    attendable = mask.any(dim=1) if mask.dim() == 3 else mask  # (B, S)
    positions = torch.arange(1, attendable.shape[-1] + 1, device=mask.device)  # (S,)
    return (attendable * positions).amax(dim=-1)  # (B,)


def sample_positions(probs: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
    """Draw one position per row from `probs` (rows of zeros draw an arbitrary position).

    Shapes:
        probs (..., S) -> index (...) long
    """
    flat = probs.detach().reshape(-1, probs.shape[-1])  # (N, S)
    alive = flat.sum(dim=-1, keepdim=True) > 0  # (N, 1)
    flat = torch.where(alive, flat, torch.ones_like(flat))
    index = torch.multinomial(flat, 1, generator=generator)  # (N, 1)
    return index.reshape(probs.shape[:-1])  # (...)


def scaled_dot_product(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    *,
    need_weights: bool = False,
    causal: bool = False,
    dropout_p: float = 0.0,
) -> AttentionOutput:
    """Vaswani et al. 2017 eq. 1: softmax(Q K^T / sqrt(d_k)) V, with our mask polarity.

    Without `need_weights` this calls the fused `F.scaled_dot_product_attention` (whose
    bool `attn_mask` also means True = take part), patched so that fully masked rows give
    zeros instead of NaN; with it, the explicit path returns the weights too. `causal` adds
    `causal_mask(T, S)` (ends aligned). `dropout_p` drops weights (pass 0 in eval).

    Shapes:
        query (..., T, Dk), key (..., S, Dk), value (..., S, Dv),
        mask broadcastable to (..., T, S) -> context (..., T, Dv), weights (..., T, S)
    """
    tgt_len, src_len = query.shape[-2], key.shape[-2]
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must be bool with True = may attend, got dtype {mask.dtype}")
    if causal and (mask is not None or tgt_len != src_len or need_weights):
        causal_part = causal_mask(tgt_len, src_len, device=query.device)  # (T, S)
        mask = causal_part if mask is None else mask & causal_part
        causal = False
    if need_weights:
        scores = torch.matmul(query, key.transpose(-2, -1))  # (..., T, S)
        scores = scores / math.sqrt(query.shape[-1])  # Q Kᵀ / sqrt(d_k), Vaswani eq. 1
        weights = masked_softmax(scores, mask)  # (..., T, S)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        return AttentionOutput(context=attend(weights, value), weights=weights)
    if mask is None:
        context = _sdpa(query, key, value, dropout_p=dropout_p, is_causal=causal)
        return AttentionOutput(context=context, weights=None)
    alive = mask.any(dim=-1, keepdim=True)  # (..., T, 1)
    if query.device.type == "cpu" and not torch.compiler.is_exporting() and bool(alive.all()):
        # The usual case (padding masks leave every row something): the mask goes straight
        # to SDPA, without the two extra passes below (benchmarks/kernels.py, multi-head).
        # On the CPU only: on a GPU the check would cost a device synchronisation. Not
        # while exporting a graph (torch.export, ONNX): a branch on the data cannot be
        # traced, and the path below is right for every mask.
        context = _sdpa(query, key, value, attn_mask=mask, dropout_p=dropout_p)
        return AttentionOutput(context=context, weights=None)
    # SDPA gives NaN for a row with nothing to attend: let such rows see everything, then
    # zero their output.
    context = _sdpa(query, key, value, attn_mask=mask | ~alive, dropout_p=dropout_p)
    return AttentionOutput(context=context * alive, weights=None)


# bf16 on the CPU: PyTorch's fused (flash) kernel is slower than its plain "math" path for
# short key sequences. Forward + backward, 4 heads x 64, a padding mask, Intel Xeon with AMX,
# 2 threads (2026-11-25): B x T = 64 x 32: 12.9 ms fused vs 4.9 math; 16 x 128: 14.7 vs 9.3;
# 8 x 256: 10.4 vs 14.9; 2 x 1024: 23.1 vs 64.3 (math holds the T x S weights). In fp32 the
# fused kernel is the faster (64 x 32, causal: 2.7 vs 4.7 ms), so only bf16 changes path.
MATH_MAX_KEYS = 128

# On a GPU, every backend but cuDNN's. PyTorch 2.11 sends bf16 attention with a padding mask
# to cuDNN first on Hopper, and cuDNN builds an execution plan for each new (batch, length)
# shape, a hundred milliseconds or more: token-sized batches bring a new shape at almost
# every step. Measured on an NVIDIA H200 (benchmarks/throughput.py configs/transformer.yaml
# --device cuda, 8,192-token batches, 2026-11-28): the bf16 step took 192 ms against 27 ms in
# fp32 (which cuDNN does not take), the GPU busy 5% of it; docs/results.md has the figures
# without cuDNN.
GPU_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def _sdpa(query: Tensor, key: Tensor, value: Tensor, **options) -> Tensor:
    """`F.scaled_dot_product_attention`, on the math path where that is measured faster,
    and never through cuDNN's (see `GPU_BACKENDS`)."""
    if query.device.type == "cuda":
        with sdpa_kernel(GPU_BACKENDS):
            return F.scaled_dot_product_attention(query, key, value, **options)
    short = key.shape[-2] <= MATH_MAX_KEYS
    if short and query.device.type == "cpu" and query.dtype == torch.bfloat16:
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(query, key, value, **options)
    return F.scaled_dot_product_attention(query, key, value, **options)


def attention_entropy(probs: Tensor) -> Tensor:
    """Entropy H = -Σ_s p_s log p_s of each attention distribution (0 log 0 = 0, with
    finite gradients).

    Shapes:
        probs (B, T, S) -> (B, T)
    """
    tiny = torch.finfo(probs.dtype).tiny
    return -(probs * probs.clamp_min(tiny).log()).sum(dim=-1)
