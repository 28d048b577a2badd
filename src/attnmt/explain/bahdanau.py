"""Every target's gradient through RNNsearch's fused decoder loop at once.

`attnmt.models.fused.BahdanauLoop` is RNNsearch's teacher-forced decoder (and Show,
Attend and Tell's) with a backward written by hand for training: one cotangent, written
into its saved tensors. An explanation needs T cotangents through one forward, one per
target position t (the gradient of f_t = log p(y_t) alone), which autograd's batched
backward cannot give it (the loop's backward writes into tensors with `out=`, which
vmap cannot batch, and into its saved tensors, so it cannot run twice either). So here is
the same backward for N cotangents sharing one forward, read off the loop's autograd
node (its saved tensors and `cells`, as `BahdanauLoop.backward` reads them).

What sharing the forward buys: the cotangents of all targets meet the same s_{i-1}, the
same gates and the same tanh(q_i + k_j) at step i, so the step's products are (N, ·)
matrices against one primal, the keys' share Σ_i d e_ij (1 − h_ij²) is one batched
product at the end rather than an (N, S, Dh) update at every step, and target t's
cotangent is zero after step t (f_t does not depend on later steps), so step i runs only
the rows of targets t ≥ i. The equations, for the rows of targets still live at step i,
are `BahdanauLoop.backward`'s; the gradients of the weights and of the target embeddings
are not computed (an explanation differentiates only the source).

Shapes legend: K sentences in the forward (one per integration step), T target
positions, N targets explained (rows), S source length, D decoder width, Dh attention
width, Dk annotation width.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.graph import Node

from attnmt.models.fused import BahdanauLoop

# BahdanauLoop's inputs that carry a source's gradient, by position (its forward's
# arguments: x, s0, keys, annotations, mask, w_s, b_s, w_c, v).
S0, KEYS, ANNOTATIONS = 1, 2, 3


def find_loop(root: Node | None) -> Node | None:
    """The `BahdanauLoop` node in the autograd graph below `root`, or None."""
    seen, todo = set(), [root]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        if isinstance(node, BahdanauLoop._backward_cls):
            return node
        seen.add(node)
        todo.extend(next_node for next_node, _ in node.next_functions)
    return None


@torch.no_grad()  # the saved tensors require grad; this backward records nothing
def loop_vjp(
    node: Node, d_outputs: Tensor, d_contexts: Tensor, first: int, stop: int
) -> dict[int, Tensor]:
    """The gradients of the loop's source inputs for targets t = first..stop-1, each
    target's own: row n is ∂f_t/∂(s_0, keys, annotations), t = first + n.

    `d_outputs`, `d_contexts`: ∂f_t/∂s_t and ∂f_t/∂c_t at each position t (the readout
    above the loop reads each position alone, so one backward of Σ_t f_t gives them all).
    Returns {input position: gradient} for `S0`, `KEYS`, `ANNOTATIONS`.

    Shapes:
        d_outputs (K, T, D), d_contexts (K, T, Dk) -> s_0 (N, K, D), keys (N, K, S, Dh),
        annotations (N, K, S, Dk)
    """
    _, annotations, w_s, w_c, v, _, alpha, hiddens = node.saved_tensors  # keys, contexts unused
    K, _, S = alpha.shape
    D, Dk, N = w_s.shape[1], annotations.shape[2], stop - first
    d_s = d_outputs.new_zeros(K, N, D)  # d s_i, one row per target
    d_c_steps = d_outputs.new_zeros(K, stop, N, Dk)  # d c_i
    d_e_steps = d_outputs.new_zeros(K, stop, N, S)  # d e_ij
    annotations_t = annotations.transpose(1, 2)  # (K, Dk, S)
    for i in reversed(range(stop)):
        live = max(i - first, 0)  # rows of targets t >= i: earlier ones ignore step i
        if i >= first:
            d_s[:, live] += d_outputs[:, i]  # target i's own cotangent enters
        d_si = d_s[:, live:]  # (K, A, D)
        s_prev, gh_n, r, z, n = (part.unsqueeze(1) for part in node.cells[i])  # (K, 1, D)
        # PyTorch's GRU update backward (fused._gru_update_backward), A rows at once
        d_pre_n = d_si * (1 - z) * (1 - n * n)
        d_gate_r = d_pre_n * gh_n * r * (1 - r)
        d_gx = torch.cat([d_gate_r, d_si * (s_prev - n) * z * (1 - z), d_pre_n], dim=-1)
        d_c = d_gx @ w_c  # the context's share of the input gates: (K, A, Dk)
        if i >= first:
            d_c[:, 0] += d_contexts[:, i]
        d_c_steps[:, i, live:] = d_c
        a = alpha[:, i].unsqueeze(1)  # (K, 1, S)
        d_a = torch.bmm(d_c, annotations_t)  # (K, A, S)
        d_e = a * (d_a - (a * d_a).sum(dim=-1, keepdim=True))  # through the softmax
        d_e_steps[:, i, live:] = d_e
        # d q_i = v ⊙ Σ_j d e_ij (1 − h_ij²): (K, A, Dh)
        squares = hiddens[i] * hiddens[i]  # h_ij² = tanh(q_i + k_j)²: (K, S, Dh)
        d_q = (d_e.sum(dim=-1, keepdim=True) - torch.bmm(d_e, squares)) * v
        d_hs = torch.cat([d_gx[..., : 2 * D], d_pre_n * r, d_q], dim=-1)  # d [g^h; q]
        d_s[:, live:] = d_si * z + d_hs @ w_s  # d s_{i-1}
    # d h_j = Σ_i alpha_ij d c_i: (K, S, T') @ (K, T', N·Dk)
    d_annotations = torch.bmm(alpha[:, :stop].transpose(1, 2), d_c_steps.flatten(2))
    del d_c_steps  # the largest of these (K·T'·N·Dk): gone before the keys' share
    # d k_j = v ⊙ Σ_i d e_ij (1 − h_ij²): per (sentence, j), (N, T') @ (T', Dh)
    d_e_by_key = d_e_steps.permute(0, 3, 2, 1).reshape(K * S, N, stop)
    by_key = hiddens[:stop].permute(1, 2, 0, 3)  # (K, S, T', Dh), a view
    squares_by_key = torch.mul(by_key, by_key).view(K * S, stop, -1)  # h_ij², a new tensor
    d_keys = torch.bmm(d_e_by_key, squares_by_key).view(K, S, N, -1)  # (K, S, N, Dh)
    d_keys.neg_().add_(d_e_steps.sum(dim=1).transpose(1, 2).unsqueeze(-1)).mul_(v)
    # views in the (N, K, ...) order of a batched backward, not copies
    return {
        S0: d_s.transpose(0, 1),
        KEYS: d_keys.permute(2, 0, 1, 3),
        ANNOTATIONS: d_annotations.view(K, S, N, Dk).permute(2, 0, 1, 3),
    }
