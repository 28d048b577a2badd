"""Every explanation method behind one call: a (T + 1, S + 1) matrix per sentence, the
attention's shape (each target subword and the final EOS × each source subword and the
source EOS; images: × pixels or grid cells), read while the model reads a given target.

    explained = explain(model, pairs, "integrated-gradients", choice)   # one per pair
    explained[0].matrix, explained[0].seconds, explained[0].forward
    # beside a translation's attention: attnmt.service (Request(explain=("occlusion",)))

Methods (`METHODS`; docs/explain.md has the equations):

- `attention`: the chosen attention matrix (`attnmt.decoding.attention_choice.select`).
- `attention-norm`: attention × the norm of what it mixes (Kobayashi et al. 2020,
  "Attention is Not Only a Weight"): ‖α_ts f(h_s)‖. RNN decoders mix the annotations h_s
  themselves (f = identity); a Transformer head mixes f^h(m_s) = (m_s W_V^h + b_V^h) W_O^h,
  and the mean of heads becomes ‖Σ_h α^h_ts f^h(m_s)‖, the layer's sum of vectors.
- `rollout` (Transformer): attention rollout (Abnar & Zuidema 2020, "Quantifying Attention
  Flow in Transformers"): the encoder's self-attention, each layer's mean of heads mixed
  with the identity for the residual (½A + ½I), multiplied through the layers, then the
  chosen cross-attention read through it: C · Â_L ⋯ Â_1.
- `grad-input`, `integrated-gradients`: `attnmt.explain.gradients` (zero baseline).
- `occlusion`: log p(y_t) − log p(y_t | source subword s replaced by <unk>), each subword
  of the source in turn (the source EOS is never replaced: its column is 0); for images,
  each 4x4 cell of the canvas blacked out in turn (one column per grid cell).

Long explanations stop when nobody waits for them (`attnmt.cancel`): `explain` calls
`checkpoint()` before each sentence, and the forced decoding under occlusion and the
attention methods between its batches.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnmt.cancel import checkpoint
from attnmt.data.batching import pad_batch
from attnmt.data.buckets import DECODE_BATCH_TOKENS
from attnmt.data.grid import FIRST_LEVEL_ID, cell_boxes
from attnmt.data.vocab import EOS, UNK
from attnmt.decoding.attention_choice import AttentionChoice, select
from attnmt.decoding.scoring import forced_decode
from attnmt.decoding.step_model import StepModel
from attnmt.errors import UserError
from attnmt.explain.gradients import gradient_times_input, input_site, integrated_gradients
from attnmt.explain.names import (
    ATTENTION_METHODS,
    EXPORT_EXPLAINS,
    GRADIENT_METHODS,
    IG_STEPS,
    METHODS,
    scale_of,
)


@dataclass
class Explanation:
    """One sentence explained by one method.

    Shapes:
        matrix: (T + 1, S + 1) text; images (T + 1, H·W) gradients, (T + 1, G) attention
        and occlusion (grid cells)
    """

    method: str
    matrix: Tensor
    seconds: float
    forward: int  # sequences passed forward for this sentence
    backward: int = 0  # ... and backward
    completeness: float | None = None  # integrated gradients' error (gradients module)

    @property
    def scale(self) -> str:
        """How a heatmap shades the matrix (`attnmt.explain.scale_of`)."""
        return scale_of(self.method)

    @property
    def reads_attention(self) -> bool:
        """Whether the matrix is read off the chosen attention (a Transformer's layer and
        head name it), as the attention methods' are."""
        return self.method in ATTENTION_METHODS


def check_method(method: str, model: StepModel, choice: AttentionChoice) -> None:
    """`UserError` naming the choices when `method` is unknown or does not fit the model."""
    model_name = type(model).__name__
    if not isinstance(model, nn.Module):  # an export (attnmt.runtime): graphs, no autograd
        raise UserError(EXPORT_EXPLAINS)
    if choice.members:
        raise UserError("explanations are of one model; give one run, not an ensemble")
    if method not in METHODS:
        raise UserError(
            f"unknown explanation method {method!r}; choose one of {', '.join(METHODS)}"
        )
    if method in ATTENTION_METHODS and not model.uses_attention:
        raise UserError(
            f"the {method} explanation reads the attention, and this {model_name} model has "
            "none; "
            "use grad-input, integrated-gradients or occlusion"
        )
    if method == "rollout" and not choice.transformer:
        raise UserError(
            f"rollout multiplies a Transformer's encoder self-attention; this run's model is "
            f"{model_name}: use attention-norm or a gradient method"
        )
    if method == "attention-norm" and not (choice.transformer or hasattr(model, "attention")):
        raise UserError("attention-norm needs annotations; the glimpse model has none")
    if method in GRADIENT_METHODS:
        input_site(model)  # raises for a model without differentiable inputs


def explain(
    model: nn.Module,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    method: str,
    choice: AttentionChoice,
    *,
    ig_steps: int = IG_STEPS,
    image_height: int | None = None,
    batch_tokens: int = DECODE_BATCH_TOKENS,
) -> list[Explanation]:
    """Explain each (source ids, target ids) pair (no BOS/EOS) with `method`.

    `choice` picks the attention matrix for the attention methods (layer and head of a
    Transformer); `image_height` marks an image model (occlusion then blacks out cells).
    """
    check_method(method, model, choice)
    if method in GRADIENT_METHODS:
        out = []
        for src_ids, tgt_ids in pairs:
            checkpoint()  # the server's client may have left (attnmt.cancel)
            started = time.perf_counter()
            if method == "grad-input":
                result = gradient_times_input(model, src_ids, tgt_ids)
            else:
                result = integrated_gradients(model, src_ids, tgt_ids, ig_steps)
            seconds = time.perf_counter() - started
            out.append(
                Explanation(
                    method,
                    result.matrix,
                    seconds,
                    result.forward,
                    result.backward,
                    result.completeness,
                )
            )
        return out
    if method == "occlusion":
        return [
            _timed(method, lambda p=pair: occlusion(model, *p, image_height=image_height))
            for pair in pairs
        ]
    started = time.perf_counter()
    decoded = forced_decode(
        model, pairs, need_weights=True, need_log_probs=False, batch_tokens=batch_tokens
    )
    shared = (time.perf_counter() - started) / max(1, len(pairs))
    out = []
    for (src_ids, _), (_, weights) in zip(pairs, decoded, strict=True):
        checkpoint()
        started = time.perf_counter()
        if method == "attention":
            matrix, passes = torch.as_tensor(select(weights, choice)), 1
        elif method == "attention-norm":
            matrix, passes = attention_norm(model, src_ids, weights, choice), 2
        else:
            matrix, passes = rollout(model, src_ids, weights, choice), 2
        seconds = shared + time.perf_counter() - started
        out.append(Explanation(method, matrix.float(), seconds, passes))
    return out


def _timed(method: str, run) -> Explanation:
    checkpoint()  # the server's client may have left (attnmt.cancel)
    started = time.perf_counter()
    matrix, passes = run()
    return Explanation(method, matrix, time.perf_counter() - started, passes)


# --- attention × norm and rollout ---------------------------------------------------------


def _memory(model: nn.Module, src_ids: Sequence[int], **kw):
    device = next(model.parameters()).device
    src, src_mask = pad_batch([[*src_ids, EOS]], device)
    return model.encode(src, src_mask, **kw)


@torch.no_grad()
def attention_norm(
    model: nn.Module, src_ids: Sequence[int], weights: Tensor, choice: AttentionChoice
) -> Tensor:
    """‖α_ts f(source vector s)‖ (Kobayashi et al. 2020) for one sentence.

    Shapes:
        weights: (T, S) RNN or (T, L, H, S) Transformer, as `forced_decode` returns them
        -> (T, S)
    """
    model.eval()
    memory = _memory(model, src_ids)
    if not choice.transformer:
        norms = memory.annotations[0].float().norm(dim=-1).cpu()  # ‖h_s‖: (S,)
        return weights.float() * norms
    layer = choice.layer - 1
    values = memory.cross_kv[layer][1][0].float()  # (H, S, Dh): m_s W_V^h + b_V^h
    out_proj = model.decoder_layers[layer].cross_attn.out_proj.weight.float()  # (D, D)
    heads, _, head_dim = values.shape
    per_head = out_proj.view(out_proj.shape[0], heads, head_dim).permute(1, 2, 0)  # (H, Dh, D)
    vectors = torch.einsum("hsd,hde->hse", values, per_head).cpu()  # f^h(m_s): (H, S, D)
    alpha = weights[:, layer].float()  # (T, H, S)
    if choice.head is not None:
        h = choice.head - 1
        return alpha[:, h] * vectors[h].norm(dim=-1)  # (T, S)
    mixed = torch.einsum("ths,hse->tse", alpha, vectors)  # Σ_h α^h_ts f^h(m_s): (T, S, D)
    return mixed.norm(dim=-1)


@torch.no_grad()
def rollout(
    model: nn.Module, src_ids: Sequence[int], weights: Tensor, choice: AttentionChoice
) -> Tensor:
    """C · Â_L ⋯ Â_1 with Â_l = ½ mean_h A_l^h + ½ I (Abnar & Zuidema 2020), C the chosen
    cross-attention. Shapes: weights (T, L, H, S) -> (T, S)."""
    model.eval()
    memory = _memory(model, src_ids, need_weights=True)
    size = memory.self_weights[0].shape[-1]
    flow = torch.eye(size)
    for layer_weights in memory.self_weights:  # (1, H, S, S), first layer first
        mixed = 0.5 * layer_weights[0].float().mean(dim=0).cpu() + 0.5 * torch.eye(size)
        flow = mixed @ flow  # Â_l ⋯ Â_1
    cross = torch.as_tensor(select(weights, choice)).float()  # (T, S)
    return cross @ flow


# --- occlusion ------------------------------------------------------------------------------


@torch.no_grad()
def occlusion(
    model: nn.Module,
    src_ids: Sequence[int],
    tgt_ids: Sequence[int],
    *,
    image_height: int | None = None,
) -> tuple[Tensor, int]:
    """log p(y_t | source) − log p(y_t | source with one position occluded), every t;
    returns (the (T + 1, P) matrix, the sequences passed forward). Text: each source
    subword replaced by <unk> (P = S + 1, the EOS column 0). Images: each 4x4 grid cell of
    the canvas set to black, level 0 (P = G cells)."""
    variants = occluded_sources(src_ids, image_height)
    pairs = [(list(src_ids), list(tgt_ids))] + [(v, list(tgt_ids)) for v in variants]
    decoded = forced_decode(model, pairs, need_weights=False, need_log_probs=True)
    full = decoded[0][0]  # (T + 1,)
    columns = [full - log_probs for log_probs, _ in decoded[1:]]  # each (T + 1,)
    if image_height is None:
        columns.append(torch.zeros_like(full))  # the EOS, never occluded
    return torch.stack(columns, dim=1), len(pairs)


def occluded_sources(src_ids: Sequence[int], image_height: int | None) -> list[list[int]]:
    """The sources `occlusion` reads: one per occluded subword or grid cell."""
    if image_height is None:
        return [[*src_ids[:s], UNK, *src_ids[s + 1 :]] for s in range(len(src_ids))]
    if len(src_ids) % image_height:
        raise UserError(f"{len(src_ids)} pixel tokens do not make images of height {image_height}")
    width = len(src_ids) // image_height
    out = []
    for top, left, bottom, right in cell_boxes(image_height, width):
        ids = list(src_ids)
        for row in range(top, bottom):
            ids[row * width + left : row * width + right] = [FIRST_LEVEL_ID] * (right - left)
        out.append(ids)
    return out
