"""Gradient attributions of log p(y_t) to the source: gradient × input and integrated
gradients (Sundararajan et al. 2017, "Axiomatic Attribution for Deep Networks").

The model's *input features* X are what its encoder reads first: the source embeddings
(B, S, E) of a text model (the output of its source `nn.Embedding`, before the
Transformer's √D scaling and positions), the grey-level canvas (B, 1, H, W) of an image
model with a CNN encoder. `input_override` swaps them for a function of themselves inside
an ordinary forward pass, so every model family is explained by the same code.

For target position t, f_t(X) = log p(y_t | y_<t, X) (teacher forcing on the reference
or on the model's own output). With a baseline X' (zeros: an all-zero embedding, a black
canvas):

    gradient × input:       A_ts = Σ_e ∂f_t/∂X_se (X) · X_se
    integrated gradients:   A_ts = Σ_e (X_se − X'_se) · (1/K) Σ_k ∂f_t/∂X_se (X' + α_k (X − X'))
                            with α_k = (k + ½)/K (the midpoint rule, K steps)

Completeness (IG's axiom): Σ_s A_ts = f_t(X) − f_t(X') up to the integration error, which
`integrated_gradients` reports. Each (t, α_k) is one copy of the sentence in a batch (its
target cut after position t), so one backward pass serves a whole chunk of copies: a
sentence with T targets costs T·K sequence passes forward and backward, batched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnmt.data.batching import pad_batch
from attnmt.data.vocab import BOS, EOS
from attnmt.errors import UserError
from attnmt.models.vision import ConvEncoder

# Sequences x target positions per forward/backward chunk: bounds the (B, T, V) logits.
COPY_TOKENS = 8192


@dataclass
class Attribution:
    """One sentence's attributions and what they cost.

    Shapes:
        matrix: (T + 1, S + 1) text (each target subword and EOS × each source subword and
        EOS) or (T + 1, H·W) images (per pixel).
    """

    matrix: Tensor
    forward: int  # sequences passed forward
    backward: int  # sequences passed backward
    completeness: float | None = None  # |Σ_s A_ts − Δf_t| summed over t, / Σ_t |Δf_t|


def input_site(model: nn.Module) -> tuple[nn.Module, str]:
    """The module whose output (text: the source embedding) or input (images: the CNN
    encoder's canvas) holds the model's input features; `UserError` for a model without one.
    """
    encoder = getattr(model, "encoder", None)
    if isinstance(encoder, ConvEncoder):
        return encoder, "image"
    embed = getattr(model, "src_embed", None) or getattr(encoder, "embed", None)
    if isinstance(embed, nn.Embedding):
        return embed, "text"
    raise UserError(
        f"gradient explanations need a source embedding or a CNN encoder to differentiate "
        f"against; this {type(model).__name__} has neither, so use --explain occlusion"
    )


@contextmanager
def input_override(
    model: nn.Module, src: Tensor, change: Callable[[Tensor], Tensor]
) -> Iterator[None]:
    """Inside the block, a forward pass of `model` on `src` reads `change(X)` for its input
    features X. Only the call on `src` itself is changed (a shared source/target embedding
    also embeds the target, which stays as it is)."""
    module, kind = input_site(model)
    if kind == "text":

        def after(_module, inputs, output):
            return change(output) if inputs[0] is src else output

        handle = module.register_forward_hook(after)
    else:

        def before(_module, inputs):
            return (change(inputs[0]), *inputs[1:])

        handle = module.register_forward_pre_hook(before)
    try:
        yield
    finally:
        handle.remove()


def _reduce(grad_times_delta: Tensor) -> Tensor:
    """Per source position: text (B, S, E) -> (B, S); images (B, 1, H, W) -> (B, H·W)."""
    if grad_times_delta.dim() == 3:
        return grad_times_delta.sum(dim=-1)
    return grad_times_delta.flatten(1)


def _chunks(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Copy indices in order, grouped so that copies x longest target <= budget."""
    chunks: list[list[int]] = [[]]
    longest = 0
    for index, length in enumerate(lengths):
        longest = max(longest, length)
        if chunks[-1] and longest * (len(chunks[-1]) + 1) > budget:
            chunks.append([])
            longest = length
        chunks[-1].append(index)
    return [c for c in chunks if c]


def _scaler(scale: Tensor, seen: list[Tensor]) -> Callable[[Tensor], Tensor]:
    """X -> X' + α (X − X') = α X per copy (X' = 0), a leaf to differentiate against;
    X and that leaf are appended to `seen`."""

    def scaled(features: Tensor) -> Tensor:
        full = features.detach()
        shape = (scale.shape[0],) + (1,) * (full.dim() - 1)
        point = (scale.view(shape) * full).requires_grad_(True)
        seen.extend((full, point))
        return point

    return scaled


def path_gradients(
    model: nn.Module,
    src_ids: Sequence[int],
    tgt_ids: Sequence[int],
    alphas: Sequence[float],
    *,
    copy_tokens: int = COPY_TOKENS,
) -> Attribution:
    """Σ_k w_k ∂f_t/∂X (X' + α_k (X − X')) · (X − X') for every target t, X' = 0, with
    equal weights w_k = 1/K: gradient × input for alphas (1.0,), integrated gradients for
    the K midpoints. `src_ids`, `tgt_ids` exclude BOS/EOS."""
    device = next(model.parameters()).device
    source = [*src_ids, EOS]
    target = [BOS, *tgt_ids, EOS]
    steps = len(target) - 1
    copies = [(t, a) for t in range(steps) for a in alphas]  # t ascending: short first
    weight = 1.0 / len(alphas)
    rows: Tensor | None = None
    was_training = model.training
    model.eval()
    try:
        for chunk in _chunks([t + 1 for t, _ in copies], copy_tokens):
            batch = len(chunk)
            positions = torch.tensor([copies[i][0] for i in chunk], device=device)
            scale = torch.tensor([copies[i][1] for i in chunk], device=device)
            longest = int(positions.max()) + 1
            src, src_mask = pad_batch([source] * batch, device)
            tgt, _ = pad_batch([target[: longest + 1]] * batch, device)
            inputs: list[Tensor] = []
            with torch.enable_grad(), input_override(model, src, _scaler(scale, inputs)):
                logits = model(src, src_mask, tgt[:, :-1]).logits  # (B, T', V)
                picked = logits[torch.arange(batch, device=device), positions].float()
                log_probs = torch.log_softmax(picked, dim=-1)  # (B, V)
                wanted = tgt[torch.arange(batch, device=device), positions + 1]
                total = log_probs.gather(1, wanted[:, None]).sum()
                full, point = inputs
                (grad,) = torch.autograd.grad(total, point)
            contrib = _reduce(grad * full).detach().float().cpu() * weight  # (B, S')
            if rows is None:
                rows = torch.zeros(steps, contrib.shape[1])
            rows.index_add_(0, positions.cpu(), contrib)
    finally:
        model.train(was_training)
    assert rows is not None
    return Attribution(rows, forward=len(copies), backward=len(copies))


@torch.no_grad()
def endpoint_log_probs(
    model: nn.Module, src_ids: Sequence[int], tgt_ids: Sequence[int]
) -> tuple[Tensor, Tensor]:
    """f_t(X) and f_t(X') (the zero baseline) for every target t: two forward passes.

    Shapes: -> (T + 1,), (T + 1,)
    """
    device = next(model.parameters()).device
    src, src_mask = pad_batch([[*src_ids, EOS]] * 2, device)
    tgt, _ = pad_batch([[BOS, *tgt_ids, EOS]] * 2, device)
    keep = torch.tensor([1.0, 0.0], device=device)

    def endpoints(features: Tensor) -> Tensor:
        return keep.view((2,) + (1,) * (features.dim() - 1)) * features

    was_training = model.training
    model.eval()
    try:
        with input_override(model, src, endpoints):
            logits = model(src, src_mask, tgt[:, :-1]).logits.float()  # (2, T + 1, V)
    finally:
        model.train(was_training)
    picked = torch.log_softmax(logits, dim=-1).gather(2, tgt[:, 1:, None]).squeeze(2).cpu()
    return picked[0], picked[1]


def gradient_times_input(model: nn.Module, src_ids: Sequence[int], tgt_ids: Sequence[int]):
    """∂f_t/∂X · X for every target t (one forward and backward per target, batched)."""
    return path_gradients(model, src_ids, tgt_ids, (1.0,))


def integrated_gradients(
    model: nn.Module, src_ids: Sequence[int], tgt_ids: Sequence[int], steps: int = 32
) -> Attribution:
    """Integrated gradients from the zero baseline in `steps` midpoint steps, with the
    completeness error: Σ_t |Σ_s A_ts − (f_t(X) − f_t(X'))| / Σ_t |f_t(X) − f_t(X')|."""
    if steps < 1:
        raise UserError(f"--ig-steps must be at least 1, got {steps}")
    alphas = [(k + 0.5) / steps for k in range(steps)]
    result = path_gradients(model, src_ids, tgt_ids, alphas)
    full, baseline = endpoint_log_probs(model, src_ids, tgt_ids)
    delta = (full - baseline).double()
    gap = (result.matrix.double().sum(dim=1) - delta).abs().sum()
    result.completeness = float(gap / delta.abs().sum().clamp(min=1e-12))
    result.forward += 2
    return result
