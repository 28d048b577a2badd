"""Luong, Pham and Manning 2015, "Effective Approaches to Attention-based Neural Machine
Translation": stacked LSTMs with global or local attention and input feeding.

Shapes legend: B batch, S source length, T target length, E embedding width, D hidden
width, L layers, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmt.attention import Attention, AttentionOutput
from attnmt.models.base import ModelOutput, check_inputs, scored
from attnmt.models.layers import RecurrentEncoder, init_uniform, recur_exportable, rnn_dropout
from attnmt.models.rnn import AttentionalRNN, RNNMemory, RNNState, from_layers, to_layers


class LuongNMT(AttentionalRNN):
    """Luong et al. 2015's attentional stacked-LSTM encoder–decoder.

    The encoder is an L-layer LSTM (source states h̄_s: the top layer); the decoder an
    L-layer LSTM started from the encoder's last states. At target step t (§3):
        h_t = LSTM(h_{t-1}, input)            top layer state: the attention's query
        c_t = Σ_s a_t(s) h̄_s                  context; a_t = align(h_t, h̄_s) (eq. 7)
        h̃_t = tanh(W_c [c_t; h_t])            attentional hidden state (eq. 5)
        p(y_t | y_<t, x) = softmax(W_s h̃_t)    (eq. 6)
    Input feeding (§3.3, `input_feeding=True`): the input at step t is [E y_{t-1}; h̃_{t-1}]
    (h̃_0 = 0), so the model knows its past alignment choices; without it the input is
    E y_{t-1} and the decoder LSTM runs over the whole target at once.

    Any score (dot, general, concat, location; also additive, scaled_dot, cosine) and
    scope: global, local-m (p_t = t, the target index, 0-based) or local-p (eq. 9). Mode
    soft, or hard (Xu et al. 2015, see `AttentionalRNN`). Dropout on the embeddings,
    between LSTM layers and on h̃_t (Luong §4.1 used 0.2 for some models). The source is
    not reversed.

    Initialisation (§4.1): every parameter uniform in [-0.1, 0.1] (`init_uniform`).

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
        input_feeding: bool = True,
        hard_eval: str = "argmax",
        context_gate: bool = False,
        hard_expectation: float = 0.0,
    ) -> None:
        super().__init__(
            attention, hard_eval, context_gate=context_gate, hard_expectation=hard_expectation
        )
        E, D = embed_size, hidden_size
        if attention.query_dim != D or attention.key_dim != D:
            raise ValueError(
                f"Luong attention needs query_dim = key_dim = {D}, got "
                f"{attention.query_dim} and {attention.key_dim}"
            )
        self.hidden_size, self.input_feeding = hidden_size, input_feeding
        self.encoder = RecurrentEncoder(src_vocab_size, E, D, layers, dropout, cell="lstm")
        self.tgt_embed = nn.Embedding(tgt_vocab_size, E, padding_idx=0)
        in_size = E + D if input_feeding else E  # [E y_{t-1}; h̃_{t-1}] with input feeding
        self.rnn = nn.LSTM(
            in_size, D, layers, batch_first=True, dropout=rnn_dropout(dropout, layers)
        )
        self.W_c = nn.Linear(2 * D, D, bias=False)  # W_c in h̃_t = tanh(W_c [c_t; h_t]), eq. 5
        self.W_s = nn.Linear(D, tgt_vocab_size)  # W_s in softmax(W_s h̃_t), eq. 6
        self.dropout = nn.Dropout(dropout)
        init_uniform(self)

    def encode(self, src: Tensor, src_mask: Tensor) -> RNNMemory:
        """Source states, their key projection, and the final states that start the decoder.

        Shapes:
            src, src_mask (B, S) -> annotations (B, S, D), keys (B, S, Dp),
            final_h, final_c (B, L, D)
        """
        check_inputs(src, src_mask)
        enc = self.encoder(src, src_mask)
        return RNNMemory(
            mask=src_mask,
            annotations=enc.annotations,  # h̄_s
            keys=self.attention.precompute_keys(enc.annotations),  # e.g. W_a h̄_s (general)
            final_h=from_layers(enc.final_h),  # (B, L, D)
            final_c=from_layers(enc.final_c),  # (B, L, D)
        )

    def init_state(self, memory: RNNMemory) -> RNNState:
        """The encoder's last (h, c) in every layer; h̃_0 = 0 with input feeding."""
        feed = None
        if self.input_feeding:
            feed = memory.final_h.new_zeros(memory.final_h.shape[0], self.hidden_size)  # (B, D)
        return RNNState(hidden=memory.final_h, cell=memory.final_c, feed=feed)

    def _run(
        self, embedded: Tensor, state: RNNState, memory: RNNMemory
    ) -> tuple[Tensor, RNNState, AttentionOutput]:
        """Decoder over T steps at once (T = 1 with input feeding).

        Shapes:
            embedded (B, T, E) -> h̃ (B, T, D), state, attention over (B, T, S)
        """
        inputs = embedded
        if self.input_feeding:
            inputs = torch.cat([embedded, state.feed.unsqueeze(1)], dim=-1)  # (B, 1, E + D)
        outputs, (hidden, cell) = recur_exportable(
            self.rnn, inputs, (to_layers(state.hidden), to_layers(state.cell))
        )  # h_t (top layer): (B, T, D)
        out = self.attend(outputs, memory, state.step)  # a_t(s) from h_t, eq. 7
        h_tilde = torch.tanh(self.W_c(torch.cat([out.context, outputs], dim=-1)))  # eq. 5
        h_tilde = self.dropout(h_tilde)  # (B, T, D)
        new_state = RNNState(
            hidden=from_layers(hidden),
            cell=from_layers(cell),
            feed=h_tilde[:, -1] if self.input_feeding else None,  # h̃_{t} for step t + 1
            step=state.step + embedded.shape[1],
        )
        return h_tilde, new_state, out

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor,
        tgt_in: Tensor,
        *,
        need_weights: bool = False,
        logits: bool = True,
    ) -> ModelOutput:
        """Teacher forcing.

        Shapes:
            src, src_mask (B, S); tgt_in (B, T) -> ModelOutput(logits (B, T, V),
            weights (B, T, S) | None, attn_log_prob (B, T) | None, attn_entropy (B, T) | None)
        """
        check_inputs(src, src_mask, tgt_in)
        memory = self.encode(src, src_mask)
        self.draw_expectations(memory)
        state = self.init_state(memory)
        embedded = self.dropout(self.tgt_embed(tgt_in))  # E y_{t-1}: (B, T, E)
        if self.input_feeding:  # h̃_{t-1} feeds step t: one step at a time
            tildes, outs = [], []
            for embedded_t in embedded.split(1, dim=1):  # (B, 1, E); see RNNSearch.forward
                h_tilde, state, out = self._run(embedded_t, state, memory)
                tildes.append(h_tilde)
                outs.append(out)
            h_tilde = torch.cat(tildes, dim=1)  # (B, T, D)
        else:
            h_tilde, _, out = self._run(embedded, state, memory)
            outs = [out]
        weights, log_prob, entropy = self.collect(outs, need_weights)
        return scored(
            h_tilde, self.W_s, logits, weights=weights, attn_log_prob=log_prob, attn_entropy=entropy
        )  # eq. 6 logits (B, T, V)

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
        h_tilde, state, out = self._run(embedded, state, memory)
        logits = self.W_s(h_tilde[:, 0])  # (B, V)
        return logits, state, out.weights[:, 0] if need_weights else None
