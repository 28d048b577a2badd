"""RNNsearch's teacher-forced decoder loop as one autograd function, its backward by hand.

Bahdanau et al. 2015's decoder, for target steps i = 1..T (`attnmt.models.rnnsearch`):

    [g^h_i; q_i] = [U; W_a] s_{i-1} + [b_h; 0]       the GRU's recurrent product, the query
    e_ij = v_aᵀ tanh(q_i + k_j)                        k_j = U_a h_j, once per sentence
    alpha_ij = softmax_j(e_ij) over the real tokens    eq. 6
    c_i = Σ_j alpha_ij h_j                             eq. 5
    g^x_i = x_i + C c_i                                x_i = W E y_{i-1} + b, all T at once
    r, z = sigmoid(g^x_{r,z} + g^h_{r,z})
    n = tanh(g^x_n + r ⊙ g^h_n)
    s_i = (1 - z) ⊙ n + z ⊙ s_{i-1}                    eq. 4 (PyTorch's GRU)

Why by hand: run through autograd, each step records ~60 operations, and the backward
accumulates a full-size gradient of the annotations, the keys and every weight at every
step. Here the forward records nothing, and the backward walks the steps once, computing
per step only what the recurrence needs (the gradients of s_{i-1}, q_i and c_i); the
gradients of the weights, of h_j and of x_i come out of a few large products over all T
steps at the end. What it buys (Intel Xeon with AVX-512 and AMX, 2 threads, fp32,
2026-11-25): the loop's forward and backward at B = 30, S = 64, T = 68 (a real batch of
2,048 tokens, E = D = 256) 226 -> 152 ms; the whole RNNsearch training step 1.14x
(benchmarks/README.md).

Shapes legend: B batch, S source length, T target length, D decoder width, Dh attention
width, Dk annotation width (2D).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


def _gru_update(gx: Tensor, gh: Tensor, s: Tensor) -> tuple[Tensor, tuple[Tensor, ...]]:
    """PyTorch's GRU update from its two gate products: g^x = W x + b_x, g^h = U s + b_h,
    each [r; z; n] along the last axis (3D). Returns s' and what the backward needs.

    Shapes: gx, gh (..., 3D), s (..., D) -> s' (..., D)
    """
    D = s.shape[-1]
    r, z = torch.sigmoid(gx[..., : 2 * D] + gh[..., : 2 * D]).chunk(2, dim=-1)
    gh_n = gh[..., 2 * D :]
    n = torch.tanh(torch.addcmul(gx[..., 2 * D :], r, gh_n))
    return torch.lerp(n, s, z), (s, gh_n, r, z, n)  # (1 - z) n + z s


def _gru_update_backward(d_s: Tensor, cell: tuple[Tensor, ...], d_gx: Tensor, d_gh: Tensor):
    """The backward of `_gru_update`: writes d g^x and d g^h into `d_gx`, `d_gh` (..., 3D)
    and returns the gradient that reaches s directly (d s' ⊙ z; the rest flows through
    g^h = U s + b_h, which the caller multiplies out)."""
    s, gh_n, r, z, n = cell
    D = s.shape[-1]
    d_pre_n = d_s * (1 - z) * (1 - n * n)  # through n = tanh(.)
    torch.mul(d_pre_n * gh_n, r * (1 - r), out=d_gx[..., :D])  # through r's sigmoid
    torch.mul(d_s * (s - n), z * (1 - z), out=d_gx[..., D : 2 * D])  # through z's
    d_gx[..., 2 * D :] = d_pre_n
    d_gh[..., : 2 * D] = d_gx[..., : 2 * D]
    torch.mul(d_pre_n, r, out=d_gh[..., 2 * D :])
    return d_s * z


def bahdanau_loop(*inputs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """`BahdanauLoop` where a gradient is wanted; the same loop, keeping nothing for a
    backward, elsewhere (the dev loss in evaluation). Inputs and outputs: as
    `BahdanauLoop`."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        return BahdanauLoop.apply(*inputs)
    return BahdanauLoop.forward(None, *inputs)


class BahdanauLoop(torch.autograd.Function):
    """The decoder loop above. Inputs, all batch first:

        x (B, T, 3D): the target embeddings' share of the GRU's input gates, with its bias
        s0 (B, D): s_0
        keys (B, S, Dh): U_a h_j; annotations (B, S, Dk): h_j; mask (B, S) bool, True = real
        w_s (3D + Dh, D), b_s (3D + Dh): [U; W_a] and [b_h; 0]
        w_c (3D, Dk): C, the context's share of the input gates; v (Dh): v_a

    Outputs: s (B, T, D) = s_1..s_T, c (B, T, Dk), alpha (B, T, S).
    """

    @staticmethod
    def forward(ctx, x, s0, keys, annotations, mask, w_s, b_s, w_c, v):
        D = s0.shape[1]
        blocked = ~mask
        empty_rows = bool(blocked.all(dim=1).any())  # as `masked_softmax`: zero weights
        lowest = torch.finfo(keys.dtype).min
        s = s0
        cells, outputs, contexts, alphas = [], [], [], []
        # tanh(q_i + k_j) for every step, kept for the backward: (T, B, S, Dh)
        hiddens = keys.new_empty(x.shape[1], *keys.shape) if ctx is not None else None
        for i, x_i in enumerate(x.unbind(dim=1)):  # (B, 3D)
            gh, query = torch.addmm(b_s, s, w_s.t()).split([3 * D, v.shape[0]], dim=1)
            out = hiddens[i] if hiddens is not None else None
            hidden = torch.add(keys, query.unsqueeze(1), out=out).tanh_()  # (B, S, Dh)
            alpha = torch.softmax((hidden @ v).masked_fill(blocked, lowest), dim=-1)  # (B, S)
            if empty_rows:
                alpha = alpha * mask
            c = torch.bmm(alpha.unsqueeze(1), annotations).squeeze(1)  # (B, Dk)
            gx = torch.addmm(x_i, c, w_c.t())  # (B, 3D)
            s, cell = _gru_update(gx, gh, s)  # s_i, eq. 4
            if ctx is not None:  # kept for the backward only
                cells.append(cell)
            outputs.append(s)
            contexts.append(c)
            alphas.append(alpha)
        outputs = torch.stack(outputs, dim=1)  # (B, T, D)
        contexts = torch.stack(contexts, dim=1)  # (B, T, Dk)
        alpha = torch.stack(alphas, dim=1)  # (B, T, S)
        if ctx is not None:
            ctx.save_for_backward(keys, annotations, w_s, w_c, v, contexts, alpha, hiddens)
            ctx.cells = cells
        return outputs, contexts, alpha

    @staticmethod
    @once_differentiable
    def backward(ctx, d_outputs, d_contexts, d_alpha):
        keys, annotations, w_s, w_c, v, contexts, alpha, hiddens = ctx.saved_tensors
        cells = ctx.cells
        B, T, S = alpha.shape
        D = w_s.shape[1]
        d_outputs = _or_zeros(d_outputs, (B, T, D), alpha)
        d_contexts = _or_zeros(d_contexts, contexts.shape, contexts)
        # per-step gradients, step-major so that each step's slice is contiguous
        d_hs = alpha.new_empty(T, B, w_s.shape[0])  # d [g^h; q]
        d_gx = alpha.new_empty(T, B, 3 * D)  # d g^x (= d x)
        d_c_all = alpha.new_empty(T, B, contexts.shape[2])  # d c, both paths
        d_e_all = alpha.new_empty(T, B, S)  # d e
        d_v_rows = v.new_zeros(B, v.shape[0])  # Σ_i Σ_j d e_ij h_ij, per sentence
        d_keys_h2 = torch.zeros_like(keys)  # Σ_i d e_ij h_ij²: (B, S, Dh)
        d_s = alpha.new_zeros(B, D)  # from step i + 1
        for i in reversed(range(T)):
            d_s = d_s + d_outputs[:, i]
            d_s = _gru_update_backward(d_s, cells[i], d_gx[i], d_hs[i, :, : 3 * D])
            # the context: into the gates, and to the model's output directly
            d_c = torch.addmm(d_contexts[:, i], d_gx[i], w_c, out=d_c_all[i])  # (B, Dk)
            d_a = torch.bmm(annotations, d_c.unsqueeze(2)).squeeze(2)  # (B, S)
            if d_alpha is not None:
                d_a = d_a + d_alpha[:, i]
            a = alpha[:, i]
            d_e = torch.mul(a, d_a - (a * d_a).sum(dim=1, keepdim=True), out=d_e_all[i])
            # Through tanh without building d e ⊗ v ⊙ (1 - h²), (B, S, Dh), at each step:
            # Σ_j d e_ij v ⊙ (1 - h_ij²) = v ⊙ (Σ_j d e_ij - Σ_j d e_ij h_ij²), two
            # products that read h once each; the keys' share waits for the end.
            hidden, d_e_row = hiddens[i], d_e.unsqueeze(1)  # (B, S, Dh), (B, 1, S)
            d_v_rows += torch.bmm(d_e_row, hidden).squeeze(1)  # Σ_j d e_ij h_ij: (B, Dh)
            hidden.mul_(hidden)  # h² from here on: h itself is not needed again
            d_q = d_e.sum(dim=1, keepdim=True) - torch.bmm(d_e_row, hidden).squeeze(1)
            torch.mul(d_q, v, out=d_hs[i, :, 3 * D :])  # d q_i
            d_keys_h2.addcmul_(d_e.unsqueeze(2), hidden)  # Σ_i d e_ij h_ij², while in cache
            d_s = torch.addmm(d_s, d_hs[i], w_s)  # + [U; W_a]ᵀ d [g^h; q]: d s_{i-1}
        # The T steps' shares of the weights' and the annotations' gradients, each in one
        # product over all steps.
        s_prev = torch.stack([cell[0] for cell in cells])  # (T, B, D)
        d_w_s = d_hs.flatten(0, 1).t() @ s_prev.flatten(0, 1)  # (3D + Dh, D)
        d_b_s = d_hs.sum(dim=(0, 1))
        c_steps = contexts.transpose(0, 1).flatten(0, 1)  # (T·B, Dk)
        d_w_c = d_gx.flatten(0, 1).t() @ c_steps  # (3D, Dk)
        # Σ_i alpha_ij d c_i: (B, S, T) @ (B, T, Dk)
        d_annotations = torch.bmm(alpha.transpose(1, 2), d_c_all.transpose(0, 1))
        # d k_j = v ⊙ Σ_i d e_ij (1 - h_ij²)
        d_keys = (d_e_all.sum(dim=0).unsqueeze(2) - d_keys_h2).mul_(v)  # (B, S, Dh)
        d_v = d_v_rows.sum(dim=0)
        return d_gx.transpose(0, 1), d_s, d_keys, d_annotations, None, d_w_s, d_b_s, d_w_c, d_v


def _or_zeros(grad: Tensor | None, shape, like: Tensor) -> Tensor:
    """An output's gradient, or zeros where the loss did not use that output."""
    return grad if grad is not None else like.new_zeros(shape)
