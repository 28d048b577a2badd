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
`integrated_gradients` reports.

The cost: K forward passes, batched (the whole target in each: f_t reads the positions up
to t only, the states a copy of the sentence cut after t would read), and K·T backward
passes, one per (α_k, t): a backward per target t for all K steps at once, or, through
RNNsearch's fused decoder loop, every target at once (`attnmt.explain.bahdanau`, then
one batched backward through the encoder). Until 2026-11-26 each (t, α_k) was a copy of
the sentence cut after t, T·K sequences forward and backward (benchmarks/explain_cost.py
measures both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.autograd.graph import GradientEdge

from attnmt.cancel import checkpoint
from attnmt.data.batching import pad_batch
from attnmt.data.vocab import BOS, EOS
from attnmt.errors import UserError
from attnmt.explain.bahdanau import find_loop, loop_vjp
from attnmt.explain.names import IG_STEPS
from attnmt.models.vision import ConvEncoder

# (target, step) rows x the longer side (source or target) per chunk of backward passes:
# bounds their (rows, length, width) gradients. A 32-word sentence at 32 steps (38 targets
# x 48 source subwords) takes 4 forward passes of 8 steps on the quickstart RNNsearch: its
# memory grew by 260 MB where one chunk of all 32 took 830, in the same time.
CHUNK_TOKENS = 16384
COPY_TOKENS = 8192  # copies x longest target per batch of copies (`copies=True`)


@dataclass
class Attribution:
    """One sentence's attributions and what they cost.

    Shapes:
        matrix: (T + 1, S + 1) text (each target subword and EOS × each source subword and
        EOS) or (T + 1, H·W) images (per pixel).
    """

    matrix: Tensor
    forward: int  # sequences passed forward
    backward: int  # sequences passed backward (one per cotangent: target x step)
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
    """Per source position: text (N, K, S, E) -> (N, K, S); images (N, K, 1, H, W) ->
    (N, K, H·W)."""
    if grad_times_delta.dim() == 4:
        return grad_times_delta.sum(dim=-1)
    return grad_times_delta.flatten(2)


def _scaler(scale: Tensor, seen: list[Tensor]) -> Callable[[Tensor], Tensor]:
    """X -> X' + α (X − X') = α X per sentence (X' = 0), a leaf to differentiate against;
    X and that leaf are appended to `seen`."""

    def scaled(features: Tensor) -> Tensor:
        full = features.detach()
        shape = (scale.shape[0],) + (1,) * (full.dim() - 1)
        point = (scale.view(shape) * full).requires_grad_(True)
        seen.extend((full, point))
        return point

    return scaled


@contextmanager
def _linear_calls(model: nn.Module) -> Iterator[list[tuple[Tensor, Tensor]]]:
    """Inside the block, (input, output) of every `nn.Linear` call of `model`: the one
    whose output is the logits is the output layer, and its input the last thing a
    position's log-probability reads (before it, positions mix)."""
    calls: list[tuple[Tensor, Tensor]] = []

    def record(_module, inputs, output):
        calls.append((inputs[0], output))

    hooks = [m.register_forward_hook(record) for m in model.modules() if isinstance(m, nn.Linear)]
    try:
        yield calls
    finally:
        for hook in hooks:
            hook.remove()


def _head_input(calls: list[tuple[Tensor, Tensor]], logits: Tensor) -> Tensor | None:
    """The output layer's input (B, T, D) where the logits (B, T, V) are one `nn.Linear`'s
    output; else None."""
    for features, output in calls:
        if output is logits and features.shape[:2] == logits.shape[:2]:
            return features
    return None


def _batched_grad(outputs, point: Tensor, cotangents, batched: bool) -> Tensor:
    """∂/∂point of <outputs, cotangents[n]> for every row n: one batched backward
    (`is_grads_batched`), or one backward per row where an operation of the model has
    no batching rule (or `batched` is False). Shapes: cotangents (N, *output) -> (N,
    *point)."""
    if batched:
        try:
            (grad,) = torch.autograd.grad(
                outputs, point, cotangents, retain_graph=True, is_grads_batched=True
            )
            return grad
        except RuntimeError as err:
            text = str(err).lower()
            if "batching rule" not in text and "vmap" not in text:
                raise
    if isinstance(outputs, Tensor):
        outputs, cotangents = [outputs], [cotangents]
    rows = [
        torch.autograd.grad(outputs, point, [c[n] for c in cotangents], retain_graph=True)[0]
        for n in range(cotangents[0].shape[0])
    ]
    return torch.stack(rows)


def _per_target(f: Tensor, logits: Tensor, calls, point: Tensor, batched: bool):
    """A function (first, stop) -> ∂f_t/∂point for targets t = first..stop-1 of one
    forward pass: (N, K, *point.shape[1:]), each target's gradient its own.

    Each target's backward starts where positions stop mixing: at the output layer's
    input (the log-softmax and the output layer act on each position alone, so one
    backward of Σ_t f_t gives every position's gradient there, and target t's cotangent
    is that gradient at position t, zero elsewhere), all targets in one batched backward
    (`is_grads_batched`). For RNNsearch's fused decoder loop, whose hand-written backward
    cannot be batched, at the loop's outputs: through the loop by
    `attnmt.explain.bahdanau.loop_vjp`, then through the encoder in one batched backward.
    """
    loop = find_loop(f.grad_fn)
    if loop is not None:
        edges = [GradientEdge(loop, 0), GradientEdge(loop, 1)]  # s_i and c_i
        d_outputs, d_contexts = torch.autograd.grad(f.sum(), edges, retain_graph=True)

        def through_loop(first: int, stop: int) -> Tensor:
            grads = loop_vjp(loop, d_outputs, d_contexts, first, stop)
            inputs = {i: GradientEdge(*loop.next_functions[i]) for i in grads}
            live = [i for i in grads if inputs[i].node is not None]
            edges = [inputs[i] for i in live]
            return _batched_grad(edges, point, [grads[i] for i in live], batched)

        return through_loop
    boundary = _head_input(calls, logits)
    if boundary is None:
        boundary, per_position = f, torch.ones_like(f)  # (K, T)
    else:
        (per_position,) = torch.autograd.grad(f.sum(), boundary, retain_graph=True)

    def one_hot(first: int, stop: int) -> Tensor:
        rows = torch.arange(stop - first, device=f.device)
        cotangents = per_position.new_zeros(stop - first, *per_position.shape)
        cotangents[rows, :, first + rows] = per_position[:, first:stop].transpose(0, 1)
        return _batched_grad(boundary, point, cotangents, batched)

    return one_hot


def _shared(model, source, target, alphas, chunk_tokens: int, batched: bool) -> Tensor:
    """The rows of `path_gradients`, one forward pass per α_k (batched, the whole
    target) and every target's gradient from it (`_per_target`)."""
    device = next(model.parameters()).device
    steps = len(target) - 1
    rows_per_pass = max(1, chunk_tokens // max(len(source), steps))  # targets x alphas
    per_forward = max(1, rows_per_pass // steps)  # alphas in one forward pass
    per_backward = min(steps, rows_per_pass)  # targets in one backward pass
    rows = torch.zeros(0)
    for start in range(0, len(alphas), per_forward):
        checkpoint()
        scale = torch.tensor(alphas[start : start + per_forward], device=device)
        src, src_mask = pad_batch([source] * len(scale), device)
        tgt, _ = pad_batch([target] * len(scale), device)
        inputs: list[Tensor] = []
        override = input_override(model, src, _scaler(scale, inputs))
        with torch.enable_grad(), override, _linear_calls(model) as calls:
            logits = model(src, src_mask, tgt[:, :-1]).logits  # (K, T, V)
            log_probs = torch.log_softmax(logits.float(), dim=-1)
            f = log_probs.gather(2, tgt[:, 1:, None]).squeeze(2)  # f_t: (K, T)
        full, point = inputs
        gradients = _per_target(f, logits, calls, point, batched)
        calls.clear()
        for first in range(0, steps, per_backward):
            checkpoint()
            stop = min(steps, first + per_backward)
            grad = gradients(first, stop)  # (N, K, *X)
            contrib = _reduce(grad * full).sum(dim=1).detach().float().cpu() / len(alphas)
            if not len(rows):
                rows = torch.zeros(steps, contrib.shape[1])
            rows[first:stop] += contrib
    return rows


def _copies(model, source, target, alphas, copy_tokens: int) -> Tensor:
    """The rows of `path_gradients`, each (t, α_k) a copy of the sentence with its target
    cut after t, in batches of copies x longest target <= `copy_tokens`, one backward
    each: T·K sequences forward and backward."""
    device = next(model.parameters()).device
    steps = len(target) - 1
    copies = [(t, a) for t in range(steps) for a in alphas]  # t ascending: short first
    rows = torch.zeros(0)
    for chunk in _chunks([t + 1 for t, _ in copies], copy_tokens):
        checkpoint()
        batch = len(chunk)
        positions = torch.tensor([copies[i][0] for i in chunk], device=device)
        scale = torch.tensor([copies[i][1] for i in chunk], device=device)
        src, src_mask = pad_batch([source] * batch, device)
        tgt, _ = pad_batch([target[: int(positions.max()) + 2]] * batch, device)
        inputs: list[Tensor] = []
        with torch.enable_grad(), input_override(model, src, _scaler(scale, inputs)):
            logits = model(src, src_mask, tgt[:, :-1]).logits  # (B, T', V)
            everyone = torch.arange(batch, device=device)
            log_probs = torch.log_softmax(logits[everyone, positions].float(), dim=-1)
            total = log_probs.gather(1, tgt[everyone, positions + 1][:, None]).sum()
            full, point = inputs
            (grad,) = torch.autograd.grad(total, point)
        contrib = _reduce((grad * full)[None])[0].detach().float().cpu() / len(alphas)
        if not len(rows):
            rows = torch.zeros(steps, contrib.shape[1])
        rows.index_add_(0, positions.cpu(), contrib)
    return rows


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


def path_gradients(
    model: nn.Module,
    src_ids: Sequence[int],
    tgt_ids: Sequence[int],
    alphas: Sequence[float],
    *,
    chunk_tokens: int = CHUNK_TOKENS,
    copies: bool | None = None,
    batched: bool = True,
) -> Attribution:
    """Σ_k w_k ∂f_t/∂X (X' + α_k (X − X')) · (X − X') for every target t, X' = 0, with
    equal weights w_k = 1/K: gradient × input for alphas (1.0,), integrated gradients for
    the K midpoints. `src_ids`, `tgt_ids` exclude BOS/EOS.

    One teacher-forced forward pass per α_k (the whole target: the models are causal, so
    f_t reads the same states as a copy cut after t would), batched, and every target's
    gradient from it (`_shared`); chunks keep targets x steps x the longer side within
    `chunk_tokens`. `batched=False` takes one backward per target instead (what happens
    where an operation has no batching rule). Models with an LSTM (Luong's) take a copy
    of the sentence per (t, α_k) instead (`_copies`, `copies=True`, what every model took
    until 2026-11-26): the LSTM's backward and packed sequences have no batching rule and
    run once per target, op by op, step by step, which made one forward per step 2x (32
    steps) to 25x (gradient x input) slower than the copies on Luong's config
    (benchmarks/explain_cost.py, `--models luong`). Between chunks
    `attnmt.cancel.checkpoint()` stops abandoned work.
    """
    source = [*src_ids, EOS]
    target = [BOS, *tgt_ids, EOS]
    steps = len(target) - 1
    if copies is None:
        copies = any(isinstance(m, nn.LSTM) for m in model.modules())
    was_training = model.training
    model.eval()
    try:
        if copies:
            rows = _copies(model, source, target, alphas, COPY_TOKENS)
        else:
            rows = _shared(model, source, target, alphas, chunk_tokens, batched)
    finally:
        model.train(was_training)
    forward = len(alphas) * (steps if copies else 1)
    return Attribution(rows, forward=forward, backward=len(alphas) * steps)


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
    """∂f_t/∂X · X for every target t (one forward pass, a backward per target)."""
    return path_gradients(model, src_ids, tgt_ids, (1.0,))


def integrated_gradients(
    model: nn.Module, src_ids: Sequence[int], tgt_ids: Sequence[int], steps: int = IG_STEPS
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
