"""The recurrent encoder: the GRU without packing computes what PyTorch's packed GRU does."""

from __future__ import annotations

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmt.models.layers import RecurrentEncoder


def _packed_reference(encoder: RecurrentEncoder, src: torch.Tensor, mask: torch.Tensor):
    """The same module's nn.GRU over a packed batch: the reference for the unpacked path."""
    embedded = encoder.dropout(encoder.embed(src))
    lengths = mask.sum(dim=1).clamp(min=1)
    packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
    outputs, final_h = encoder.rnn(packed)
    annotations, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
    return annotations, final_h


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_gru_encoder_matches_packed_gru(layers, bidirectional):
    torch.manual_seed(0)
    encoder = RecurrentEncoder(30, 8, 6, layers, 0.0, cell="gru", bidirectional=bidirectional)
    lengths = torch.tensor([7, 3, 5, 0, 1])  # an empty source runs one padding step
    positions = torch.arange(7)
    mask = positions < lengths[:, None]
    src = torch.randint(1, 30, (5, 7)) * mask  # PAD = 0 after each sentence
    out = encoder(src, mask)
    want_annotations, want_final = _packed_reference(encoder, src, mask)
    torch.testing.assert_close(out.annotations, want_annotations)
    torch.testing.assert_close(out.final_h, want_final)
    assert out.final_c is None
    assert out.annotations[mask.logical_not() & (lengths[:, None] > 0)].abs().sum() == 0


def test_gru_encoder_gradients_match_packed_gru():
    torch.manual_seed(1)
    encoder = RecurrentEncoder(30, 8, 6, 2, 0.0, cell="gru", bidirectional=True)
    lengths = torch.tensor([6, 2, 4])
    mask = torch.arange(6) < lengths[:, None]
    src = torch.randint(1, 30, (3, 6)) * mask
    weights = torch.randn(3, 6, 12)  # a loss that reads every annotation differently

    def grads(run):
        encoder.zero_grad()
        annotations, final_h = run()
        ((annotations * weights).sum() + final_h.pow(2).sum()).backward()
        return {n: p.grad.clone() for n, p in encoder.named_parameters()}

    def unpacked():
        out = encoder(src, mask)
        return out.annotations, out.final_h

    ours = grads(unpacked)
    reference = grads(lambda: _packed_reference(encoder, src, mask))
    for name in reference:
        torch.testing.assert_close(ours[name], reference[name], msg=name)
