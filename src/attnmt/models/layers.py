"""Recurrent encoders and the pieces RNN decoders share: initialisation as in the papers,
and the maxout deep-output layer.

The encoders run over the real tokens only (`pack_padded_sequence`): padding never enters
a recurrence, so the backward direction of a bidirectional encoder starts at each
sentence's own last token, and a sentence's annotations do not depend on what it is
batched with. Padding must be at the end of each row (`src_mask` a prefix of True).

Shapes legend: B batch, S source length, T target length, E embedding width, D hidden
width, L layers, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmt.data.vocab import PAD


@dataclass
class EncoderOutput:
    """A recurrent encoder's result.

    Fields:
        annotations: the top layer's state at every source position (Bahdanau's h_j, Luong's
            h̄_s); zeros at padding. Bidirectional: [→h_j; ←h_j] (Bahdanau eq. 7's
            concatenation), forward half first.
        final_h: each layer's (and direction's) last state, PyTorch layout: layer-major,
            forward before backward (index 2l + d).
        final_c: LSTM memory cells in the same layout; None for a GRU.

    Shapes:
        annotations (B, S, D · directions); final_h, final_c (L · directions, B, D)
    """

    annotations: Tensor
    final_h: Tensor
    final_c: Tensor | None


def rnn_dropout(dropout: float, layers: int) -> float:
    """`nn.GRU`/`nn.LSTM` dropout between stacked layers (0 for one layer, where PyTorch
    would warn that it has no effect)."""
    return dropout if layers > 1 else 0.0


class RecurrentEncoder(nn.Module):
    """Embeddings, dropout, then a stacked (bi)directional GRU or LSTM over the real tokens.

    Args:
        vocab_size, embed_size, hidden_size (D per direction), layers (L), dropout: on the
            embeddings and between layers.
        cell: "gru" (Cho et al. 2014; Bahdanau et al. 2015) or "lstm" (Luong et al. 2015).
        bidirectional: Bahdanau's BiRNN (§3.2), annotations [→h_j; ←h_j].

    Shapes:
        src (B, S) long, src_mask (B, S) bool -> EncoderOutput
    """

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        hidden_size: int,
        layers: int,
        dropout: float,
        *,
        cell: Literal["gru", "lstm"],
        bidirectional: bool = False,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=PAD)
        self.dropout = nn.Dropout(dropout)
        rnn_class = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = rnn_class(
            embed_size,
            hidden_size,
            num_layers=layers,
            batch_first=True,
            dropout=rnn_dropout(dropout, layers),
            bidirectional=bidirectional,
        )
        self.cell = cell
        self.hidden_size = hidden_size
        self.directions = 2 if bidirectional else 1

    def forward(self, src: Tensor, src_mask: Tensor) -> EncoderOutput:
        src_len = src.shape[1]
        embedded = self.dropout(self.embed(src))  # E x_j: (B, S, E)
        # An empty source still runs one (padding) step; its mask keeps it unattended.
        lengths = src_mask.sum(dim=1).clamp(min=1)  # (B,)
        if self.cell == "gru" and embedded.device.type == "cpu":  # cuDNN packs well
            return self._gru_over_real_tokens(embedded, lengths)
        if torch.compiler.is_exporting():
            # A packed sequence cannot be traced into a graph. The exported LSTM reads whole
            # rows: its final states are those of each sentence only when no row is padded,
            # so attnmt.runtime encodes the sentences of each length together (the export's
            # layout says `equal_lengths`, and its verification checks a mixed batch).
            outputs, final = self.rnn(embedded)
            final_h, final_c = final if self.cell == "lstm" else (final, None)
            return EncoderOutput(annotations=outputs, final_h=final_h, final_c=final_c)
        packed = pack_padded_sequence(
            embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        outputs, final = self.rnn(packed)  # final: (L · dirs, B, D), with cells for an LSTM
        final_h, final_c = final if self.cell == "lstm" else (final, None)
        annotations, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src_len)
        return EncoderOutput(annotations=annotations, final_h=final_h, final_c=final_c)

    def _gru_over_real_tokens(self, embedded: Tensor, lengths: Tensor) -> EncoderOutput:
        """The GRU encoder without packing, the same function as the packed one.

        Each layer and direction runs as its own one-layer GRU over the padded batch: the
        forward direction reads the padding after each sentence's last token, which no
        real position depends on (its states there are masked to zero); the backward one
        reads each sentence reversed within its length, so it starts at the sentence's own
        last token. Why: on the CPU, PyTorch steps a packed sequence by narrowing one
        (tokens, 3D) input-gate matrix, and each narrow's backward zero-fills and adds a
        whole matrix of that size, S times per direction (O(S²)); unpacked, the step is
        one unbind. The RNNsearch encoder's forward and backward went from 96 to 70 ms
        (B = 29, S = 67, E = D = 256; Intel Xeon, 2 threads, 2026-11-25), ~5% of a
        training step. An LSTM keeps the packed path: its last memory cells at each
        sentence's end are not among the outputs; on a GPU, cuDNN's packed GRU is kept.

        Shapes:
            embedded (B, S, E), lengths (B,) -> EncoderOutput (annotations (B, S, D · dirs))
        """
        batch, src_len, _ = embedded.shape
        positions = torch.arange(src_len, device=embedded.device)  # (S,)
        real = positions < lengths[:, None]  # (B, S)
        # j -> length - 1 - j inside the sentence, padding where it is: its own inverse.
        reverse = torch.where(real, lengths[:, None] - 1 - positions, positions)  # (B, S)
        last = (lengths - 1)[:, None, None]  # (B, 1, 1): each sentence's last position
        x, finals = embedded, []
        for layer in range(self.rnn.num_layers):
            if layer > 0:  # as nn.GRU: dropout between stacked layers, none after the top
                x = F.dropout(x, self.rnn.dropout, self.training)
            outputs = []
            for direction in range(self.directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                weights = [
                    getattr(self.rnn, name + suffix)
                    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
                ]
                inputs = _gather_steps(x, reverse) if direction else x
                h0 = x.new_zeros(1, batch, self.hidden_size)
                out, _ = torch.gru(inputs, h0, weights, True, 1, 0.0, self.training, False, True)
                if direction:
                    out = _gather_steps(out, reverse)  # back in source order: (B, S, D)
                    finals.append(out[:, 0])  # ←h after reading the first token: (B, D)
                else:
                    finals.append(out.gather(1, last.expand(-1, 1, out.shape[-1]))[:, 0])
                outputs.append(out)
            x = torch.cat(outputs, dim=-1)  # (B, S, D · dirs)
        annotations = x * real[..., None]  # zeros at padding, as pad_packed_sequence gives
        return EncoderOutput(annotations=annotations, final_h=torch.stack(finals), final_c=None)


def recur_exportable(rnn: nn.GRU | nn.LSTM, inputs: Tensor, hidden):
    """`rnn(inputs, hidden)` (batch first); while a graph is exported, one step is written
    out as its cells' equations instead (PyTorch's GRU/LSTM gates, layer by layer, eval
    mode: no dropout between layers). onnxruntime runs the GRU operator's single step at
    about 150 us where the two matrix products and the gates take a fraction of it (the
    quickstart RNNsearch step at batch 5, Intel Xeon, 2 threads); the numbers are the same.

    Shapes:
        inputs (B, T, I); hidden (L, B, D), or (h, c) for an LSTM
    """
    if not torch.compiler.is_exporting() or inputs.shape[1] != 1 or rnn.bidirectional:
        return rnn(inputs, hidden)
    lstm = isinstance(rnn, nn.LSTM)
    h, c = hidden if lstm else (hidden, None)
    x, new_h, new_c = inputs[:, 0], [], []
    for layer in range(rnn.num_layers):
        weights = [
            getattr(rnn, f"{name}_l{layer}")
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        ]
        gates = F.linear(x, weights[0], weights[2])  # W x + b: (B, G·D)
        recurrent = F.linear(h[layer], weights[1], weights[3])  # U h + b: (B, G·D)
        if lstm:
            i, f, g, o = (gates + recurrent).chunk(4, dim=-1)
            cell = torch.sigmoid(f) * c[layer] + torch.sigmoid(i) * torch.tanh(g)
            x = torch.sigmoid(o) * torch.tanh(cell)
            new_c.append(cell)
        else:
            x_r, x_z, x_n = gates.chunk(3, dim=-1)
            h_r, h_z, h_n = recurrent.chunk(3, dim=-1)
            reset = torch.sigmoid(x_r + h_r)
            update = torch.sigmoid(x_z + h_z)
            candidate = torch.tanh(x_n + reset * h_n)  # the reset after the product
            x = (1 - update) * candidate + update * h[layer]
        new_h.append(x)
    outputs = x.unsqueeze(1)  # (B, 1, D)
    if lstm:
        return outputs, (torch.stack(new_h), torch.stack(new_c))
    return outputs, torch.stack(new_h)


def _gather_steps(x: Tensor, index: Tensor) -> Tensor:
    """x[b, index[b, j]] for every b, j. Shapes: x (B, S, F), index (B, S) -> (B, S, F)."""
    return x.gather(1, index[..., None].expand(-1, -1, x.shape[-1]))


class Maxout(nn.Module):
    """Maxout deep output (Goodfellow et al. 2013), as in Bahdanau et al. 2015 appendix
    A.2.2 and Cho et al. 2014 appendix A: t̃ = U_o a + V_o b + C_o c (one linear map of the
    concatenated inputs), t_k = max(t̃_{2k-1}, t̃_{2k}).

    Shapes:
        x (..., in_size) -> t (..., out_size)
    """

    def __init__(self, in_size: int, out_size: int, pool: int = 2) -> None:
        super().__init__()
        self.linear = nn.Linear(in_size, out_size * pool)  # [U_o V_o C_o] and a bias
        self.out_size = out_size
        self.pool = pool

    def forward(self, x: Tensor) -> Tensor:
        pre = self.linear(x)  # t̃: (..., out_size · pool)
        pre = pre.view(*x.shape[:-1], self.out_size, self.pool)  # (..., out_size, pool)
        return pre.amax(dim=-1)  # t_k = max_j t̃_{k,j}: (..., out_size)


def init_gaussian_orthogonal(module: nn.Module, std: float = 0.01) -> None:
    """Bahdanau et al. 2015 appendix B.1 (also Cho et al. 2014 appendix A.1): recurrent
    matrices random orthogonal, other matrices N(0, std²), biases 0.

    Simplified: the paper draws W_a and U_a from N(0, 0.001²) and sets v_a to zero; here
    every non-recurrent matrix is N(0, 0.01²) (with v_a = 0 the alignment model gets no
    gradient on the first update, and a shared rule keeps the attention module opaque).
    The embedding row of PAD stays zero.
    """
    for name, param in module.named_parameters():
        if param.dim() < 2:
            nn.init.zeros_(param)
        elif "weight_hh" in name:
            for gate in param.data.split(param.shape[1], dim=0):  # one square per gate
                nn.init.orthogonal_(gate)
        else:
            nn.init.normal_(param, mean=0.0, std=std)
    _zero_padding_rows(module)
    documented_starts(module)


def init_uniform(module: nn.Module, bound: float = 0.1) -> None:
    """Luong et al. 2015 §4.1: every parameter uniform in [-0.1, 0.1] (PAD row kept 0)."""
    for param in module.parameters():
        nn.init.uniform_(param, -bound, bound)
    _zero_padding_rows(module)
    documented_starts(module)


def init_xavier_outside_encoder(model: nn.Module) -> None:
    """Xavier's initialisation (Glorot & Bengio 2010) for every matrix outside the CNN
    encoder but the recurrent ones (which stay orthogonal), biases unchanged, the
    PAD embedding row zero. (The image models: `attnmt.models.vision`.)

    The text models' N(0, 0.01²) (Bahdanau et al. appendix B) gives the decoder a tiny view
    of the image at first. Measured on configs/captions-soft.yaml with a batch-normalised
    CNN (2026-11-24, Intel Xeon, 200 dev canvases): dev exact 8.0 / 39.0% at steps
    200 / 400 with this, 0.0 / 0.0% with N(0, 0.01²); either initialisation without batch
    normalisation sat near the unigram loss for 600+ steps. The no-attention baseline uses
    it (`ShowTell`); the captioner keeps Bahdanau's (see `ConvEncoder` for why).
    """
    for name, param in model.named_parameters():
        if name.startswith("encoder.") or param.dim() < 2 or "weight_hh" in name:
            continue
        nn.init.xavier_uniform_(param)
    _zero_padding_rows(model)
    documented_starts(model)


def documented_starts(module: nn.Module) -> None:
    """Give back the start values a submodule documents (its `documented_init`, e.g.
    cosine attention's beta = 1), which a paper's blanket initialisation overwrote."""
    for sub in module.modules():
        if sub is not module and hasattr(sub, "documented_init"):
            sub.documented_init()


def _zero_padding_rows(module: nn.Module) -> None:
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.Embedding) and sub.padding_idx is not None:
                sub.weight[sub.padding_idx].zero_()
