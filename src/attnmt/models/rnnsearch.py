"""RNNsearch (Bahdanau, Cho and Bengio 2015, "Neural Machine Translation by Jointly
Learning to Align and Translate").

Shapes legend: B batch, S source length, T target length, E embedding width, D hidden
width (per encoder direction; the decoder's width), L layers, V vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.attention import Attention, AttentionOutput
from attnmt.attention.additive import AdditiveScore
from attnmt.models.base import ModelOutput, check_inputs, scored
from attnmt.models.fused import bahdanau_loop
from attnmt.models.layers import (
    Maxout,
    RecurrentEncoder,
    init_gaussian_orthogonal,
    recur_exportable,
    rnn_dropout,
)
from attnmt.models.rnn import AttentionalRNN, RNNMemory, RNNState, from_layers, to_layers


class RNNSearch(AttentionalRNN):
    """Bahdanau et al. 2015: a bidirectional GRU encoder and an attentional GRU decoder.

    Encoder (§3.2): annotations h_j = [→h_j; ←h_j] (B, S, 2D), over the real tokens only
    (packed), so the backward GRU starts at each sentence's own last token.
    Decoder (§3.1, appendix A.2.2), at target step i:
        e_ij = a(s_{i-1}, h_j)            alignment scores, query s_{i-1} (eq. 6)
        alpha_ij = softmax_j(e_ij)         weights (eq. 6)
        c_i = Σ_j alpha_ij h_j             context (eq. 5)
        s_i = GRU(s_{i-1}, [E y_{i-1}; c_i])  (eq. 4; the context enters the cell)
        t_i = maxout(W_o [s_i; E y_{i-1}; c_i])  deep output (A.2.2), then W_g t_i -> V
    with s_0 = tanh(W_s ←h_1) from the backward encoder's first state (A.2.2). The GRUs
    are PyTorch's, whose reset gate acts after the recurrent product (r ⊙ (U s + b), the
    cuDNN form), where appendix A.1.1 writes U (r ⊙ s): see `attnmt.models.rnn`.

    Simplification, documented: the paper's deep output reads s_{i-1} (A.2.2's
    t̃_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i) while eq. 4 writes p(y_i) = g(y_{i-1}, s_i,
    c_i); we use s_i, as GroundHog and later implementations do. The maxout has D units
    (the paper: l = 500 for n = 1000).

    The score is configurable (default `additive`, the paper's v_aᵀ tanh(W_a s_{i-1} + U_a
    h_j)); its key part (U_a h_j) is computed once per sentence in `encode`. Scope and mode
    too; local-m's p_i is the target index i. With L layers, encoder and decoder are
    stacked; the query is the top decoder layer's s_{i-1}, and each layer gets its own s_0.

    Initialisation (appendix B.1): orthogonal recurrent matrices, N(0, 0.01²) elsewhere,
    zero biases (`init_gaussian_orthogonal`).

    Shapes:
        src, src_mask (B, S); tgt_in (B, T) -> logits (B, T, V), weights (B, T, S)
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        *,
        embed_size: int,
        hidden_size: int,
        attention: Attention,
        layers: int = 1,
        dropout: float = 0.0,
        hard_eval: str = "argmax",
        context_gate: bool = False,
        hard_expectation: float = 0.0,
    ) -> None:
        super().__init__(
            attention, hard_eval, context_gate=context_gate, hard_expectation=hard_expectation
        )
        E, D = embed_size, hidden_size
        if attention.query_dim != D or attention.key_dim != 2 * D:
            raise ValueError(
                f"RNNsearch attention needs query_dim={D} (s_{{i-1}}) and key_dim={2 * D} "
                f"([→h_j; ←h_j]), got {attention.query_dim} and {attention.key_dim}"
            )
        self.layers, self.hidden_size = layers, hidden_size
        self.encoder = RecurrentEncoder(
            src_vocab_size, E, D, layers, dropout, cell="gru", bidirectional=True
        )
        self.init_proj = nn.Linear(D, layers * D)  # W_s in s_0 = tanh(W_s ←h_1), per layer
        self.tgt_embed = nn.Embedding(tgt_vocab_size, E, padding_idx=0)  # E y
        self.rnn = nn.GRU(
            E + 2 * D, D, layers, batch_first=True, dropout=rnn_dropout(dropout, layers)
        )  # f in s_i = f(s_{i-1}, y_{i-1}, c_i), eq. 4
        self.readout = Maxout(D + E + 2 * D, D)  # t_i over [s_i; E y_{i-1}; c_i]
        self.dropout = nn.Dropout(dropout)
        self.generator = nn.Linear(D, tgt_vocab_size)  # W_o t_i -> scores of y_i
        init_gaussian_orthogonal(self)

    def encode(self, src: Tensor, src_mask: Tensor) -> RNNMemory:
        """Annotations and their key projection, once per source batch.

        Shapes:
            src, src_mask (B, S) -> annotations (B, S, 2D), keys (B, S, Dp), mask (B, S)
        """
        check_inputs(src, src_mask)
        annotations = self.encoder(src, src_mask).annotations  # h_j = [→h_j; ←h_j]
        keys = self.attention.precompute_keys(annotations)  # U_a h_j, once per sentence
        return RNNMemory(mask=src_mask, annotations=annotations, keys=keys)

    def init_state(self, memory: RNNMemory) -> RNNState:
        """s_0 = tanh(W_s ←h_1) (Bahdanau appendix A.2.2). Shapes: hidden (B, L, D)."""
        backward_first = memory.annotations[:, 0, self.hidden_size :]  # ←h_1: (B, D)
        hidden = torch.tanh(self.init_proj(backward_first))  # (B, L·D)
        hidden = hidden.view(-1, self.layers, self.hidden_size)  # (B, L, D)
        return RNNState(hidden=hidden)

    def _recur(
        self, embedded: Tensor, state: RNNState, memory: RNNMemory
    ) -> tuple[Tensor, Tensor, RNNState, AttentionOutput]:
        """The recurrent part of decoder step i: attention, then the GRU.

        Shapes:
            embedded (B, 1, E) -> s_i (B, 1, D), c_i (B, 1, 2D), state, attention (T = 1)
        """
        # s_{i-1} in Bahdanau eq. 6 (top layer): (B, 1, D). One layer: the state itself, not
        # a slice (a slice's backward zero-fills a (B, L, D) gradient at every step).
        query = state.hidden if self.layers == 1 else state.hidden[:, -1:]
        out = self.attend(query, memory, state.step)
        context = out.context  # c_i, eq. 5: (B, 1, 2D)
        outputs, hidden = recur_exportable(
            self.rnn, torch.cat([embedded, context], dim=-1), to_layers(state.hidden)
        )  # s_i, eq. 4: (B, 1, D)
        return outputs, context, RNNState(hidden=from_layers(hidden), step=state.step + 1), out

    def _readout(self, outputs: Tensor, embedded: Tensor, context: Tensor) -> Tensor:
        """t_i = maxout(W_o [s_i; E y_{i-1}; c_i]) (appendix A.2.2), then dropout.

        Shapes:
            outputs (B, T, D), embedded (B, T, E), context (B, T, 2D) -> t (B, T, D)
        """
        return self.dropout(self.readout(torch.cat([outputs, embedded, context], dim=-1)))

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor,
        tgt_in: Tensor,
        *,
        need_weights: bool = False,
        logits: bool = True,
    ) -> ModelOutput:
        """Teacher forcing: the decoder reads BOS + target, step by step.

        Shapes:
            src, src_mask (B, S); tgt_in (B, T) -> ModelOutput(logits (B, T, V),
            weights (B, T, S) | None, attn_log_prob (B, T) | None, attn_entropy (B, T) | None)
        """
        check_inputs(src, src_mask, tgt_in)
        memory = self.encode(src, src_mask)
        self.draw_expectations(memory)
        state = self.init_state(memory)
        embedded = self.dropout(self.tgt_embed(tgt_in))  # E y_{i-1}: (B, T, E)
        if self._fusable():
            outputs, contexts, weights = self._decode_fused(embedded, state, memory, need_weights)
            features = self._readout(outputs, embedded, contexts)
            return scored(features, self.generator, logits, weights=weights)  # (B, T, V)
        states, contexts, outs = [], [], []
        # split, not embedded[:, i : i + 1]: the backward of T slices writes T zero-filled
        # (B, T, E) gradients and adds them up (O(T²) memory traffic); split's backward is
        # one cat. Bit-identical gradients; about 1% of the step at T = 42, more as T grows.
        for embedded_i in embedded.split(1, dim=1):  # E y_{i-1}: (B, 1, E) each
            output, context, state, out = self._recur(embedded_i, state, memory)
            states.append(output)
            contexts.append(context)
            outs.append(out)
        # The deep output reads no recurrent state, so it runs once over all T steps after
        # the loop: one large matrix product instead of T small ones, and T fewer maxouts
        # and dropouts (the same function as `step`'s, one dropout mask for all steps).
        features = self._readout(torch.cat(states, dim=1), embedded, torch.cat(contexts, dim=1))
        weights, log_prob, entropy = self.collect(outs, need_weights)
        return scored(
            features, self.generator, logits, weights=weights, attn_log_prob=log_prob,
            attn_entropy=entropy,
        )  # fmt: skip

    def _fusable(self) -> bool:
        """Whether `_decode_fused` computes this model's decoder: Bahdanau's own attention
        (additive, global, soft, no gate) and one GRU layer (the shipped configuration),
        under autocast too (the loop then runs in fp32, see `_decode_fused`)."""
        att = self.attention
        return (
            isinstance(att.score, AdditiveScore)
            and att.scope == "global"
            and att.mode == "soft"
            and self.gate is None
            and self.layers == 1
        )

    def _decode_fused(
        self, embedded: Tensor, state: RNNState, memory: RNNMemory, need_weights: bool
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """The teacher-forced decoder loop of `forward` (`_recur` T times) with fewer,
        larger operations: the same function, written out for `_fusable` models.

        What it saves, per step: s_{i-1} is multiplied once by [U; W_a] (the GRU's
        recurrent matrix and the attention's query matrix stacked), the embeddings' share
        of the GRU's input gates is one product for all T steps before the loop, and the
        gates are computed by hand on (B, 3D) rows rather than through `nn.GRU` and the
        attention module's checks; and `attnmt.models.fused.BahdanauLoop` records no
        autograd graph, its backward written by hand (the loop's forward and backward
        226 -> 152 ms on a real 2,048-token batch; tests/test_fused.py checks outputs,
        weights and every gradient against the module path in float64).

        Under autocast (bf16 training) the loop runs in the parameters' precision, its
        inputs cast up once: its per-step work is small products and element-wise gates,
        which bf16 does not speed up, and its backward by hand makes no autocast casts.
        The module path it replaced there kept every step's activations twice (bf16
        products beside fp32 states) and a graph of ~60 operations per step; with the
        loop, bf16 training keeps what fp32 keeps (benchmarks/train_memory.py).

        Shapes:
            embedded (B, T, E) -> s (B, T, D), c (B, T, 2D), weights (B, T, S) | None
        """
        E, score, rnn = embedded.shape[-1], self.attention.score, self.rnn
        dtype = rnn.weight_hh_l0.dtype
        with torch.autocast(embedded.device.type, enabled=False):
            w_s = torch.cat([rnn.weight_hh_l0, score.W_a.weight])  # [U; W_a]: (3D + Dh, D)
            b_s = torch.cat([rnn.bias_hh_l0, rnn.bias_hh_l0.new_zeros(score.hidden_dim)])
            x = F.linear(embedded.to(dtype), rnn.weight_ih_l0[:, :E], rnn.bias_ih_l0)
            outputs, contexts, weights = bahdanau_loop(
                x,  # W E y_{i-1} + b: (B, T, 3D)
                state.hidden[:, 0].to(dtype),
                memory.keys.to(dtype),
                memory.annotations.to(dtype),
                memory.mask,
                w_s,
                b_s,
                rnn.weight_ih_l0[:, E:],  # the context's share of the input gates: (3D, 2D)
                score.v_a.weight[0],
            )
        return outputs, contexts, weights if need_weights else None

    def step(
        self,
        prev_tokens: Tensor,
        state: RNNState,
        memory: RNNMemory,
        *,
        need_weights: bool = False,
    ) -> tuple[Tensor, RNNState, Tensor | None]:
        """Shapes: prev_tokens (B,) -> logits (B, V), weights (B, S) | None."""
        embedded = self.dropout(self.tgt_embed(prev_tokens)).unsqueeze(1)  # (B, 1, E)
        output, context, state, out = self._recur(embedded, state, memory)
        logits = self.generator(self._readout(output, embedded, context)[:, 0])  # (B, V)
        return logits, state, out.weights[:, 0] if need_weights else None
