"""The models can be traced into graphs (torch.export, what an ONNX export starts from:
issue 42), with the batch and the source length left free: the Transformer's encoder (its
attention takes no branch on the data while exporting), the RNNsearch decoder step as flat
tensors, and Luong local-m's step counter given as a tensor instead of a Python int (a
Python int is baked into a graph as a constant)."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from attnmt.config import ModelConfig
from attnmt.data import EOS, pad_batch
from attnmt.models import build_model
from attnmt.models.rnn import RNNMemory, RNNState

CPU = torch.device("cpu")
FREE = Dim.AUTO  # a size the graph must not fix (an example size of 1 would be fixed)


def _model(**overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(**{"embed_size": 8, "hidden_size": 8, "dropout": 0.0, **overrides})
    return build_model(cfg, 20, 20).eval()


def _batch(lengths):
    return pad_batch(
        [[4 + (i + j) % 15 for j in range(n)] + [EOS] for i, n in enumerate(lengths)], CPU
    )


class Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src, src_mask):
        return self.model.encode(src, src_mask).encoded


def test_the_transformer_encoder_exports_with_free_batch_and_length():
    model = _model(name="transformer", heads=2, layers=2, ff_size=16)
    src, mask = _batch([5, 3, 7])
    free = {0: FREE, 1: FREE}
    with torch.no_grad():
        program = torch.export.export(
            Encoder(model), (src, mask), dynamic_shapes={"src": free, "src_mask": free}
        )
        for lengths in ([2], [9, 4, 6, 1, 3]):  # another batch and other lengths
            other, other_mask = _batch(lengths)
            expected = model.encode(other, other_mask).encoded
            got = program.module()(other, other_mask)
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


class RNNStep(torch.nn.Module):
    """One decoder step of an RNN model as flat tensors: (prev, hidden, [step], annotations,
    keys, mask) -> (log-probs, hidden, attention)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, prev, hidden, annotations, keys, mask, step=None):
        memory = RNNMemory(mask=mask, annotations=annotations, keys=keys)
        state = RNNState(hidden=hidden, step=0 if step is None else step)
        logits, state, weights = self.model.step(prev, state, memory, need_weights=True)
        return torch.log_softmax(logits, dim=-1), state.hidden, weights


# torch.export re-assigns an nn.GRU's `_flat_weights` list while tracing and warns about it;
# the weights are the module's own parameters, and the graph's numbers are checked below.
@pytest.mark.filterwarnings("ignore:The tensor attributes self.model.rnn._flat_weights")
def test_the_rnnsearch_step_exports_as_flat_tensors_and_matches_eager():
    model = _model(name="rnnsearch")
    src, mask = _batch([5, 3, 7])
    prev = torch.full((3,), 2)
    batch, both = {0: FREE}, {0: FREE, 1: FREE}
    shapes = {"prev": batch, "hidden": batch, "annotations": both, "keys": both, "mask": both}
    with torch.no_grad():
        memory = model.encode(src, mask)
        state = model.init_state(memory)
        program = torch.export.export(
            RNNStep(model),
            (prev, state.hidden, memory.annotations, memory.keys, mask),
            dynamic_shapes=shapes,
        )
        step = program.module()
        other, other_mask = _batch([2, 8])
        memory = model.encode(other, other_mask)
        state = model.init_state(memory)
        hidden, prev = state.hidden, torch.full((2,), 2)
        for _ in range(4):  # greedy, both ways from the same inputs
            logits, state, weights = model.step(prev, state, memory, need_weights=True)
            log_probs, hidden, attention = step(
                prev, hidden, memory.annotations, memory.keys, other_mask
            )
            torch.testing.assert_close(log_probs, torch.log_softmax(logits, -1), atol=1e-5, rtol=0)
            torch.testing.assert_close(attention, weights, atol=1e-6, rtol=0)
            torch.testing.assert_close(hidden, state.hidden, atol=1e-6, rtol=0)
            # The short row's padding: finite, and no attention (a finite mask value, not -inf).
            assert torch.isfinite(attention).all() and attention[0, 3:].abs().max() == 0
            prev = log_probs.argmax(-1)


def test_local_m_takes_its_step_as_a_tensor():
    """local-m's window centre is the step number: as a Python int a graph would keep the
    value it was traced with; as a (B, 1) tensor it is an input like the others."""
    model = _model(name="luong", attention="general", scope="local-m", window=2)
    src, mask = _batch([6, 9])
    prev = torch.full((2,), 2)
    with torch.no_grad():
        memory = model.encode(src, mask)
        counted = model.init_state(memory)
        tensored = model.init_state(memory)
        tensored.step = torch.zeros(2, 1)
        frozen = model.init_state(memory)  # the step kept at 0, as a traced int would be
        differed = False
        for _ in range(5):
            a, counted, wa = model.step(prev, counted, memory, need_weights=True)
            b, tensored, wb = model.step(prev, tensored, memory, need_weights=True)
            torch.testing.assert_close(b, a, atol=1e-6, rtol=0)
            torch.testing.assert_close(wb, wa, atol=1e-6, rtol=0)
            frozen.step = 0
            _, frozen, wf = model.step(prev, frozen, memory, need_weights=True)
            differed |= not torch.allclose(wf, wa, atol=1e-4)
            prev = a.argmax(-1)
    assert isinstance(counted.step, int) and tensored.step.tolist() == [[5.0], [5.0]]
    assert differed  # not vacuous: a step count frozen at 0 puts the window elsewhere
