"""Recurrent models: what the RNN decoders share, and the encoder–decoder without attention.

- `RNNMemory` / `RNNState`: the batch-first containers of `encode` and `step`.
- `AttentionalRNN`: the attention call and the bookkeeping of hard attention (REINFORCE
  log-probabilities, entropies, `hard_eval`) shared by `RNNSearch` and `LuongNMT`.
- `RNNEncDec`: Cho et al. 2014's encoder–decoder, which squeezes the whole source into one
  fixed-length vector c: the bottleneck attention removes.

The GRUs are PyTorch's `nn.GRU`/`nn.GRUCell`: the reset gate acts after the recurrent
product, tanh(W x + r ⊙ (U h + b_h)) (the cuDNN form), not inside it as Cho et al. 2014
eq. 8 and Bahdanau et al. 2014 appendix A write it, tanh(W x + U (r ⊙ h)).

Shapes legend: B batch, S source length, T target length, E embedding width, D hidden
width, L layers, V vocabulary, Dk annotation width, Dp projected-key width.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnmt.attention import Attention, AttentionOutput
from attnmt.attention import functional as AF
from attnmt.attention.functional import attention_entropy
from attnmt.models.base import BatchFirst, ModelOutput, Seq2Seq, check_inputs, scored
from attnmt.models.layers import (
    Maxout,
    RecurrentEncoder,
    init_gaussian_orthogonal,
    recur_exportable,
    rnn_dropout,
)

HARD_EVAL = ("argmax", "soft")


@dataclass
class RNNMemory(BatchFirst):
    """What an RNN decoder reads from the encoder, once per source batch.

    Fields:
        mask: True at real source tokens.
        annotations: encoder states, the attention's keys and values (h_j, h̄_s); None
            for rnnencdec, which never looks at them.
        keys: the attention's key-only part `attention.precompute_keys(annotations)`
            (Bahdanau's U_a h_j), computed once per sentence; None without attention.
        summary: rnnencdec's fixed-length summary c of the source (Cho et al. 2014 §2.2).
        final_h, final_c: Luong: the encoder's last states, which start the decoder.

    Shapes:
        mask (B, S); annotations (B, S, Dk); keys (B, S, Dp); summary (B, D);
        final_h, final_c (B, L, D)
    """

    mask: Tensor
    annotations: Tensor | None = None
    keys: Tensor | None = None
    summary: Tensor | None = None
    final_h: Tensor | None = None
    final_c: Tensor | None = None
    expect: Tensor | None = None  # (B,) bool: Xu's expectation instead of a sample (§4.1)


@dataclass
class RNNState(BatchFirst):
    """An RNN decoder between steps.

    Fields:
        hidden: every layer's last state (s_{i-1} in Bahdanau, h_{t-1} in Luong).
        cell: LSTM memory cells; None for a GRU.
        feed: Luong's input feeding: the last attentional state h̃_{t-1}; else None.
        step: how many target tokens have been read (local-m's p_t for the next step).

    Shapes:
        hidden, cell (B, L, D); feed (B, D)
    """

    hidden: Tensor
    cell: Tensor | None = None
    feed: Tensor | None = None
    step: int = 0


def to_layers(x: Tensor) -> Tensor:
    """Batch-first layer states to PyTorch's RNN layout: (B, L, D) -> (L, B, D)."""
    return x.transpose(0, 1).contiguous()  # (L, B, D)


def from_layers(x: Tensor) -> Tensor:
    """PyTorch's RNN layout to batch first: (L, B, D) -> (B, L, D)."""
    return x.transpose(0, 1)  # (B, L, D)


class AttentionalRNN(Seq2Seq):
    """Shared by the attentional RNN decoders: one `Attention` over the annotations, and
    what hard attention (Xu et al. 2015 §4.1) adds to the output.

    Args:
        attention: built by `attention.build` (score, scope, mode).
        hard_eval: hard mode in eval(): "argmax" (the attention's own choice) or "soft"
            (the expected context Σ_s p_s h_s under the distribution positions are sampled
            from, Xu et al. §4.2's deterministic approximation).
        context_gate: Xu et al. §4.2.1's gating scalar: the context is multiplied by
            beta_t = sigmoid(w_betaᵀ q_t + b_beta), q_t the attention's query (s_{i-1} in
            RNNsearch, which is Xu's h_{t-1}; h_t in Luong's decoder).
        hard_expectation: hard mode in training: the probability that a sentence uses the
            expected context Σ_s p_s h_s instead of sampled positions for the whole forward
            pass (Xu et al. §4.1: 0.5), which lowers the variance of learning; such a
            sentence contributes no REINFORCE term (its log-probabilities are 0).
    """

    def __init__(
        self,
        attention: Attention,
        hard_eval: str = "argmax",
        *,
        context_gate: bool = False,
        hard_expectation: float = 0.0,
    ) -> None:
        super().__init__()
        if hard_eval not in HARD_EVAL:
            raise ValueError(f"hard_eval must be one of {list(HARD_EVAL)}, got {hard_eval!r}")
        if not 0.0 <= hard_expectation < 1.0:
            raise ValueError(f"hard_expectation must be in [0, 1), got {hard_expectation!r}")
        self.attention = attention
        self.hard_eval = hard_eval
        self.hard_expectation = hard_expectation
        self.gate = nn.Linear(attention.query_dim, 1) if context_gate else None  # f_beta

    @property
    def hard(self) -> bool:
        return self.attention.mode == "hard"

    def attend(self, query: Tensor, memory: RNNMemory, positions: int) -> AttentionOutput:
        """Attend from decoder states to the annotations.

        `positions` is the target index of the first query (local-m's p_t = t).

        Shapes:
            query (B, T, Dq) -> context (B, T, Dk), weights (B, T, S)
        """
        out = self.attention(
            query,
            None,
            memory.annotations,
            memory.mask,
            positions=positions,
            projected_key=memory.keys,
        )
        if self.hard and not self.training and self.hard_eval == "soft":
            context = AF.attend(out.probs, memory.annotations)  # E_p[h_s]: (B, T, Dk)
            out = dataclasses.replace(out, context=context, weights=out.probs, log_prob=None)
        if self.hard and self.training and memory.expect is not None:
            rows = memory.expect[:, None]  # (B, 1): these sentences take the expectation
            expected = AF.attend(out.probs, memory.annotations)  # E_p[h_s]: (B, T, Dk)
            out = dataclasses.replace(
                out,
                context=torch.where(rows[..., None], expected, out.context),
                weights=torch.where(rows[..., None], out.probs, out.weights),
                log_prob=torch.where(rows, torch.zeros_like(out.log_prob), out.log_prob),
            )
        if self.gate is not None:
            beta = torch.sigmoid(self.gate(query))  # beta_t, Xu §4.2.1: (B, T, 1)
            out = dataclasses.replace(out, context=beta * out.context)
        return out

    def draw_expectations(self, memory: RNNMemory) -> None:
        """Training with `hard_expectation`: choose the sentences of this forward pass that
        use the expected context (one draw per sentence, kept for all its steps)."""
        if self.hard and self.training and self.hard_expectation > 0:
            batch = memory.annotations.shape[0]
            draw = torch.rand(batch, device=memory.annotations.device)
            memory.expect = draw < self.hard_expectation  # (B,)

    def collect(
        self, outs: list[AttentionOutput], need_weights: bool
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """Join the attention outputs of successive steps along T: weights (only when
        asked), REINFORCE log-probabilities (hard, train mode) and entropies (hard).

        Shapes:
            outs: each weights (B, T_i, S) -> weights (B, T, S), log_prob (B, T),
            entropy (B, T)
        """
        weights = torch.cat([o.weights for o in outs], dim=1) if need_weights else None
        log_prob = entropy = None
        if self.hard:
            if self.training:
                log_prob = torch.cat([o.log_prob for o in outs], dim=1)  # (B, T)
            entropy = torch.cat([attention_entropy(o.probs) for o in outs], dim=1)  # (B, T)
        return weights, log_prob, entropy


class RNNEncDec(Seq2Seq):
    """RNN encoder–decoder without attention (Cho et al. 2014, "Learning Phrase
    Representations using RNN Encoder–Decoder").

    A GRU encoder reads the source; its last state gives the summary c = tanh(V h_N)
    (appendix A). The decoder starts at h'_0 = tanh(V' c) and sees c at every step: its
    GRU input is [E y_{t-1}; c] (h_t = f(h_{t-1}, y_{t-1}, c), §2.2) and its output is a
    maxout over [h_t; E y_{t-1}; c] (P(y_t | ...) = g(h_t, y_{t-1}, c), §2.2; maxout as in
    appendix A), then a linear map to V. The
    whole source must pass through c: the fixed-length bottleneck that attention removes.
    With L layers, every layer is initialised from c.

    Initialisation: orthogonal recurrent matrices, N(0, 0.01²) elsewhere, zero biases
    (`init_gaussian_orthogonal`).

    Shapes:
        src, src_mask (B, S); tgt_in (B, T) -> logits (B, T, V)
    """

    uses_attention = False

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        *,
        embed_size: int,
        hidden_size: int,
        layers: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        E, D = embed_size, hidden_size
        self.layers, self.hidden_size = layers, hidden_size
        self.encoder = RecurrentEncoder(src_vocab_size, E, D, layers, dropout, cell="gru")
        self.summarize = nn.Linear(D, D)  # V in c = tanh(V h_N)
        self.init_proj = nn.Linear(D, layers * D)  # V' in h'_0 = tanh(V' c), per layer
        self.tgt_embed = nn.Embedding(tgt_vocab_size, E, padding_idx=0)  # e(y)
        self.rnn = nn.GRU(E + D, D, layers, batch_first=True, dropout=rnn_dropout(dropout, layers))
        self.readout = Maxout(D + E + D, D)  # deep output over [h_t; e(y_{t-1}); c]
        self.dropout = nn.Dropout(dropout)
        self.generator = nn.Linear(D, tgt_vocab_size)  # G: scores of y_t
        init_gaussian_orthogonal(self)

    def encode(self, src: Tensor, src_mask: Tensor) -> RNNMemory:
        """Shapes: src, src_mask (B, S) -> RNNMemory(mask, summary (B, D))."""
        check_inputs(src, src_mask)
        enc = self.encoder(src, src_mask)
        summary = torch.tanh(self.summarize(enc.final_h[-1]))  # c = tanh(V h_N): (B, D)
        return RNNMemory(mask=src_mask, summary=summary)

    def init_state(self, memory: RNNMemory) -> RNNState:
        batch = memory.summary.shape[0]
        hidden = torch.tanh(self.init_proj(memory.summary))  # h'_0 = tanh(V' c): (B, L·D)
        hidden = hidden.view(batch, self.layers, self.hidden_size)  # (B, L, D)
        return RNNState(hidden=hidden)

    def _decode(self, embedded: Tensor, state: RNNState, memory: RNNMemory):
        """Run the decoder over T given tokens at once (c is the same at every step).

        Shapes:
            embedded (B, T, E) -> features (B, T, D), state
        """
        steps = embedded.shape[1]
        summary = memory.summary.unsqueeze(1).expand(-1, steps, -1)  # c at each t: (B, T, D)
        outputs, hidden = recur_exportable(
            self.rnn, torch.cat([embedded, summary], dim=-1), to_layers(state.hidden)
        )  # h_t: (B, T, D)
        features = self.readout(torch.cat([outputs, embedded, summary], dim=-1))  # (B, T, D)
        new_state = RNNState(hidden=from_layers(hidden), step=state.step + steps)
        return self.dropout(features), new_state

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor,
        tgt_in: Tensor,
        *,
        need_weights: bool = False,
        logits: bool = True,
    ) -> ModelOutput:
        check_inputs(src, src_mask, tgt_in)
        memory = self.encode(src, src_mask)
        embedded = self.dropout(self.tgt_embed(tgt_in))  # e(y_{t-1}): (B, T, E)
        features, _ = self._decode(embedded, self.init_state(memory), memory)
        return scored(features, self.generator, logits)  # logits (B, T, V)

    def step(
        self,
        prev_tokens: Tensor,
        state: RNNState,
        memory: RNNMemory,
        *,
        need_weights: bool = False,
    ) -> tuple[Tensor, RNNState, None]:
        """Shapes: prev_tokens (B,) -> logits (B, V); weights always None."""
        embedded = self.dropout(self.tgt_embed(prev_tokens)).unsqueeze(1)  # (B, 1, E)
        features, state = self._decode(embedded, state, memory)
        return self.generator(features[:, 0]), state, None  # (B, V)
