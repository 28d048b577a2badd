"""A model's encoder and decoder step as modules of flat, named tensors: what an ONNX
graph can take and give (`attnmt.export.onnx` exports them; `attnmt.runtime`
runs them without torch).

    encoder:  src, src_mask                     -> memory fields..., initial state fields...
    step:     prev, memory fields..., state fields... -> log_probs, new state..., attention

Every tensor is batch first. The fields of each family (`flat_layout`):

    family        memory (besides src_mask)           state
    rnnencdec     summary (B, D)                       hidden (B, L, D)
    rnnsearch     annotations (B, S, 2D), keys (B, S, Dp)  hidden (B, L, D)
    luong         annotations (B, S, D), keys?         hidden, cell (B, L, D), feed? (B, D)
    transformer   cross_k0, cross_v0, ... (B, H, S, Dh)  self_k0, self_v0, ... (B, H, t, Dh)

Local-m attention (either RNN family) also carries `step` (B, 1): its window centre is the
number of target tokens read, a Python int in eager decoding that a graph would freeze at
the value it was traced with. The Transformer's position is its cache's length t. State
fields the encoder graph does not give start as zeros of the shape the layout states
(the Transformer's empty caches, local-m's step 0).

Shapes legend: B batch, S source length, t target tokens read, L layers, H heads,
Dh head width, D width, V target vocabulary.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from attnmt.models.rnn import RNNMemory, RNNState
from attnmt.models.transformer import Transformer, TransformerMemory, TransformerState

BATCH, SRC_LEN, TGT_LEN = "batch", "src_len", "tgt_len"
STATE_BATCH = "state_batch"  # the state's rows before the step picks them (`rows`)
RNN_MEMORY = ("annotations", "keys", "summary")
RNN_STATE = ("hidden", "cell", "feed")


@dataclass
class FlatLayout:
    """The named tensors of one exported model: which memory and state fields its graphs
    take and give, and each one's free axes ({axis: name}; every other axis is fixed).

    `zeros`: state fields that start as zeros, {name: shape after the batch axis} (the
    encoder graph does not give them). `equal_lengths`: the encoder graph reads sentences
    without padding only (an LSTM's final memory cells are taken after the last position),
    so the runtime encodes the sentences of each length together.
    """

    family: str
    memory: list[str]
    state: list[str]
    axes: dict[str, dict[int, str]]
    zeros: dict[str, list[int]] = field(default_factory=dict)
    equal_lengths: bool = False
    attention: list[str] | None = None  # the attention row's axes, None without attention

    def to_json(self) -> dict:
        return {
            "family": self.family,
            "memory": self.memory,
            "state": self.state,
            "axes": {n: {str(k): v for k, v in axes.items()} for n, axes in self.axes.items()},
            "zeros": self.zeros,
            "equal_lengths": self.equal_lengths,
            "attention": self.attention,
        }


def _local_m(model: nn.Module) -> bool:
    attention = getattr(model, "attention", None)
    return getattr(attention, "scope", None) == "local-m"


def flat_layout(model: nn.Module, family: str, example: tuple[Tensor, Tensor]) -> FlatLayout:
    """The layout of `model` (in eval mode), read from its own encode/init_state outputs
    on an `example` (src, src_mask) batch."""
    with torch.no_grad():
        memory = model.encode(*example)
        state = model.init_state(memory)
    if isinstance(model, Transformer):
        heads, width = model.heads, model.d_model // model.heads
        layers = range(len(model.decoder_layers))
        # One tensor per layer: a stacked (B, L, ...) cache would be sliced apart and stacked
        # again in every step (two more copies of the whole cache a step than our decoder).
        memory = [f"cross_{kv}{i}" for i in layers for kv in "kv"]
        state = [f"self_{kv}{i}" for i in layers for kv in "kv"]
        return FlatLayout(
            family=family,
            memory=memory,
            state=state,
            axes={
                **{name: {0: BATCH, 2: SRC_LEN} for name in memory},
                **{name: {0: BATCH, 2: TGT_LEN} for name in state},
            },
            zeros={name: [heads, 0, width] for name in state},
            attention=[BATCH, "layer", "head", SRC_LEN],
        )
    mem = [name for name in RNN_MEMORY if getattr(memory, name) is not None]
    st = [name for name in RNN_STATE if getattr(state, name) is not None]
    axes = {name: {0: BATCH} for name in mem + st}
    for name in ("annotations", "keys"):
        if name in axes:
            axes[name][1] = SRC_LEN
    zeros = {}
    if _local_m(model):
        st.append("step")
        axes["step"] = {0: BATCH}
        zeros["step"] = [1]
    encoder = getattr(model, "encoder", None)
    return FlatLayout(
        family=family,
        memory=mem,
        state=st,
        axes=axes,
        zeros=zeros,
        equal_lengths=getattr(encoder, "cell", None) == "lstm",
        attention=[BATCH, SRC_LEN] if model.uses_attention else None,
    )


class EncoderGraph(nn.Module):
    """src, src_mask -> the layout's memory fields, then the state fields the encoder gives."""

    def __init__(self, model: nn.Module, layout: FlatLayout) -> None:
        super().__init__()
        self.model, self.layout = model, layout

    def output_names(self) -> list[str]:
        given = [name for name in self.layout.state if name not in self.layout.zeros]
        return [f"memory.{n}" for n in self.layout.memory] + [f"state.{n}" for n in given]

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, ...]:
        memory = self.model.encode(src, src_mask)
        if isinstance(memory, TransformerMemory):  # each layer's keys, values: (B, H, S, Dh)
            return tuple(x for kv in memory.cross_kv for x in kv)
        state = self.model.init_state(memory)
        given = [name for name in self.layout.state if name not in self.layout.zeros]
        return tuple(getattr(memory, n) for n in self.layout.memory) + tuple(
            getattr(state, n) for n in given
        )


class StepGraph(nn.Module):
    """One decoder step: prev (B,), src_mask (B, S), rows (B,), memory fields, state fields
    -> log_probs (B, V), the new state fields, and the attention row (when the model has
    one). The step first takes rows `rows` of every state field (B' rows in, B out): a
    beam search's reordering, done by onnxruntime's Gather inside the graph rather than
    by numpy between steps (a Transformer's caches are most of what a step moves)."""

    def __init__(self, model: nn.Module, layout: FlatLayout) -> None:
        super().__init__()
        self.model, self.layout = model, layout

    def input_names(self) -> list[str]:
        memory = [f"memory.{n}" for n in self.layout.memory]
        return ["prev", "src_mask", "rows", *memory, *(f"state.{n}" for n in self.layout.state)]

    def output_names(self) -> list[str]:
        names = ["log_probs", *(f"new_state.{n}" for n in self.layout.state)]
        return names + (["attention"] if self.layout.attention else [])

    def forward(
        self,
        prev: Tensor,
        src_mask: Tensor,
        rows: Tensor,
        memory: list[Tensor],
        state: list[Tensor],
    ) -> tuple[Tensor, ...]:
        state = [field.index_select(0, rows) for field in state]
        if isinstance(self.model, Transformer):  # the layout `flat_layout` gave it
            mem = TransformerMemory(
                encoded=memory[0],  # unused by the step
                mask=src_mask,
                cross_kv=list(zip(memory[0::2], memory[1::2], strict=True)),
            )
            st = TransformerState(
                self_kv=list(zip(state[0::2], state[1::2], strict=True)),
                step=state[0].shape[2],  # the position: how many target tokens were read
            )
            log_probs, st, weights = self.model.step_log_probs(prev, st, mem, need_weights=True)
            caches = [x for kv in st.self_kv for x in kv]  # (B, H, t + 1, Dh) each
            return (log_probs, *caches, weights)
        mem = RNNMemory(mask=src_mask, **dict(zip(self.layout.memory, memory, strict=True)))
        fields = dict(zip(self.layout.state, state, strict=True))
        st = RNNState(**{"step": 0, **fields})
        log_probs, st, weights = self.model.step_log_probs(prev, st, mem, need_weights=True)
        out = [log_probs]
        out += [getattr(st, n) for n in self.layout.state]
        if self.layout.attention:
            out.append(weights)
        return tuple(out)


def step_inputs(
    model: nn.Module, layout: FlatLayout, src: Tensor, src_mask: Tensor, steps: int = 0
) -> tuple[Tensor, Tensor, Tensor, list[Tensor], list[Tensor]]:
    """Example inputs of the step graph after `steps` greedy steps of the eager model
    (the Transformer's caches are empty at 0: export with `steps` >= 2 so that t is free)."""
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        state = model.init_state(memory)
        if "step" in layout.zeros:
            state = dataclasses.replace(state, step=torch.zeros(src.shape[0], 1))
        prev = torch.full((src.shape[0],), 2, dtype=torch.long)  # BOS
        for _ in range(steps):
            logits, state, _ = model.step(prev, state, memory)
            prev = logits.argmax(-1)
        encoder = EncoderGraph(model, layout)
        given = encoder(src, src_mask)
    mem = list(given[: len(layout.memory)])
    if isinstance(state, TransformerState):
        st = [x for kv in state.self_kv for x in kv]
    else:
        st = [getattr(state, n) for n in layout.state]
    return prev, src_mask, torch.arange(src.shape[0]), mem, st
