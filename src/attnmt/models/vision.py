"""Attention over images (Xu et al. 2015, "Show, Attend and Tell"), with the same decoder
interface as the translation models.

An image travels through the data pipeline as a "sentence" of pixel tokens (`attnmt.data.
images`): one token per pixel, row by row, for its grey level 0..16, then EOS; the models
here turn that back into a picture (`pixels_of`). So batching, training, greedy and beam
search, evaluation and plots work unchanged.

- `ConvEncoder`: a small CNN whose last feature map is the grid of annotation vectors
  a_i (Xu §3.1.1), each cell with a learned row and column embedding added (the CNN
  alone does not tell the decoder *where* a cell is).
- `ShowAttendTell`: the attentional GRU decoder of `RNNSearch` reading those annotations
  with any score, scope and mode of `attnmt.attention` (soft, or hard with REINFORCE);
  its initial state is f_init(mean_i a_i) (Xu §3.1.2).
- `ShowTell`: the same CNN pooled into 2x8 regions and squeezed into one vector that
  starts and feeds a GRU decoder without attention (Vinyals et al. 2015, "Show and
  Tell"): the no-attention baseline.

Shapes legend: B batch, S pixel tokens (H·W + 1 with EOS), H, W image height and width,
G grid cells (the attention's source positions), D hidden width, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

# The image's geometry (torch-free, re-exported here where the models use it).
from attnmt.data.grid import (  # noqa: F401
    DOWNSAMPLE,
    FIRST_LEVEL_ID,
    LEVELS,
    MAX_SYMBOLS,
    cell_boxes,
    grid_size,
)
from attnmt.models.base import check_inputs
from attnmt.models.layers import init_xavier_outside_encoder
from attnmt.models.rnn import RNNEncDec, RNNMemory, RNNState
from attnmt.models.rnnsearch import RNNSearch

POOL = (2, 8)  # ShowTell's regions (rows, columns): on a 24x64 canvas each is 12x8 pixels


def pixels_of(src: Tensor, height: int) -> Tensor:
    """The images behind a batch of pixel tokens, grey levels scaled to [0, 1].

    The first H·W tokens of each row are the pixels row by row; the rest (EOS, padding)
    is dropped. PAD/UNK/BOS/EOS ids below the first level count as black.

    Shapes:
        src (B, S) long -> (B, 1, H, W) float, W = (S - 1) // height

    Raises ValueError when S - 1 is not a multiple of `height` (the wrong image height).
    """
    pixels = src.shape[1] - 1
    if height < 1 or pixels < height or pixels % height:
        raise ValueError(
            f"a batch of {pixels} pixel tokens (+ EOS) does not make images of height "
            f"{height}; set model.image_height to the data's canvas height"
        )
    width = pixels // height
    levels = (src[:, :pixels] - FIRST_LEVEL_ID).clamp(0, LEVELS).float() / LEVELS
    return levels.view(src.shape[0], 1, height, width)  # (B, 1, H, W)


class ConvEncoder(nn.Module):
    """Four 3x3 convolutions (the second and third with stride 2), each followed by a ReLU
    (and with `normalise`, batch normalisation before it), and a learned position
    embedding per grid row and column: an image becomes G = ceil(H/4)·ceil(W/4) annotation
    vectors of width `out_size`, row by row. Each cell sees 17x17 pixels (its receptive
    field), a whole digit of these canvases with some of its neighbours (three
    convolutions would see 9x9 pixels, part of a digit).

    Batch normalisation (Ioffe & Szegedy 2015) is on for the no-attention baseline only.
    Measured with the captioner (configs/captions-soft.yaml, with `init_xavier_outside_
    encoder`; Intel Xeon, 2026-11-24): it started far sooner (dev exact 16.8 / 36.8% at
    steps 500 / 750, against 0.0 / 0.4% at 500 / 1,000 without) but ended lower and noisier
    at the 2,000-step budget (best 65.4%, dev loss swinging 0.68-1.99 between validations,
    against 84.0%), and the hard captioner was worse at 4,000 steps (best 17.6% against
    66.8%): the running statistics used in evaluation lag the features the decoder learns
    on. The baseline, which without it stayed at chance, is given it.

    Shapes:
        images (B, 1, H, W) -> annotations (B, G, out_size)
    """

    def __init__(
        self, out_size: int, *, channels: int = 32, max_cells: int = 64, normalise: bool = False
    ) -> None:
        super().__init__()
        widths = [(1, channels, 1), (channels, 2 * channels, 2)]
        widths += [(2 * channels, 2 * channels, 2), (2 * channels, out_size, 1)]
        layers: list[nn.Module] = []
        for inputs, outputs, stride in widths:
            conv = nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1, bias=not normalise)
            if normalise:  # drawn here: the random order of the published baseline runs
                nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
            layers += [conv, nn.BatchNorm2d(outputs), nn.ReLU()] if normalise else [conv, nn.ReLU()]
        self.convs = nn.Sequential(*layers)
        self.row_embed = nn.Embedding(max_cells, out_size)
        self.col_embed = nn.Embedding(max_cells, out_size)
        # He initialisation for the ReLU stack, and small position embeddings: with
        # PyTorch's defaults (and N(0, 1) embeddings) a CNN over the mostly black 40x40
        # cluttered canvas stayed at chance for 200 Adam steps; with these, 42% accuracy.
        for conv in self.convs:
            if isinstance(conv, nn.Conv2d) and not normalise:
                nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
                nn.init.zeros_(conv.bias)
        nn.init.normal_(self.row_embed.weight, std=0.1)
        nn.init.normal_(self.col_embed.weight, std=0.1)
        # Channels-last weights: oneDNN then runs every convolution (and its backward) on
        # NHWC feature maps, and the last map is already the (B, Gh, Gw, Dk) layout the
        # annotations take. The encoder's forward+backward at a 64-canvas batch (Intel
        # Xeon, 2 threads, fp32): 56 -> 43 ms on 24x64 digits, 81 -> 66 ms with batch
        # normalisation on 40x40 cluttered canvases (benchmarks/README.md).
        self.convs.to(memory_format=torch.channels_last)

    def forward(self, images: Tensor) -> Tensor:
        features = self.convs(images)  # (B, Dk, Gh, Gw)
        _, _, rows, cols = features.shape
        if max(rows, cols) > self.row_embed.num_embeddings:
            raise ValueError(
                f"the image gives a {rows}x{cols} grid; at most "
                f"{self.row_embed.num_embeddings} cells a side are supported"
            )
        position = (
            self.row_embed.weight[:rows, None, :] + self.col_embed.weight[None, :cols, :]
        )  # (Gh, Gw, Dk)
        annotations = features.permute(0, 2, 3, 1) + position  # (B, Gh, Gw, Dk)
        return annotations.flatten(1, 2)  # (B, G, Dk), row by row


def _image_inputs(src: Tensor, src_mask: Tensor, height: int) -> Tensor:
    check_inputs(src, src_mask)
    return pixels_of(src, height)  # (B, 1, H, W)


class ShowAttendTell(RNNSearch):
    """Xu et al. 2015's captioner: a CNN's grid of annotation vectors a_i read by the
    attentional GRU decoder of `RNNSearch` (the same step, deep output and hard-attention
    bookkeeping; Xu use an LSTM, the attention is the same).

    The annotations have width 2D (the keys `RNNSearch`'s attention expects); the initial
    state is s_0 = tanh(W_init mean_i a_i) (Xu §3.1.2's f_init, one layer of it).
    Every grid cell is a real position (the source mask is all True).

    Shapes:
        src (B, H·W + 1) pixel tokens; tgt_in (B, T) -> logits (B, T, V), weights (B, T, G)
    """

    reads_images = True
    max_output_tokens = MAX_SYMBOLS + 1  # with the EOS

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, image_height: int, **kw):
        super().__init__(src_vocab_size, tgt_vocab_size, **kw)
        D = self.hidden_size
        self.image_height = image_height
        self.encoder = ConvEncoder(2 * D)  # a_i, in place of the recurrent encoder
        self.init_proj = nn.Linear(2 * D, self.layers * D)  # f_init over mean_i a_i

    def encode(self, src: Tensor, src_mask: Tensor) -> RNNMemory:
        """Shapes: src, src_mask (B, S) -> annotations (B, G, 2D), keys (B, G, Dp), mask
        (B, G)."""
        images = _image_inputs(src, src_mask, self.image_height)
        annotations = self.encoder(images)  # a_i: (B, G, 2D)
        mask = torch.ones(annotations.shape[:2], dtype=torch.bool, device=src.device)
        keys = self.attention.precompute_keys(annotations)  # once per image
        return RNNMemory(mask=mask, annotations=annotations, keys=keys)

    def init_state(self, memory: RNNMemory) -> RNNState:
        """s_0 = tanh(W_init mean_i a_i). Shapes: hidden (B, L, D)."""
        mean = memory.annotations.mean(dim=1)  # (B, 2D)
        hidden = torch.tanh(self.init_proj(mean))  # (B, L·D)
        return RNNState(hidden=hidden.view(-1, self.layers, self.hidden_size))  # (B, L, D)


class ShowTell(RNNEncDec):
    """The no-attention baseline (Vinyals et al. 2015, "Show and Tell"): the `ConvEncoder`
    grid pooled to a fixed POOL of regions and flattened into one vector
    c = tanh(V vec(pool(a))), which starts the GRU decoder of `RNNEncDec` and is fed at
    every step. Everything the decoder knows of the image passes through c.

    c keeps *where* things are, as the fully connected layer on top of Show and Tell's CNN
    does: a mean over the grid (this model until 2026-11-24) keeps which digits are on a
    canvas but not their order, so it could not read a string at all (exact 0.0% after
    2,000 steps) and compared attention with a model that had no chance. It is also given
    the help the captioner does without (see `ConvEncoder`): a batch-normalised CNN, and
    Xavier's initialisation for its decoder (`init_xavier_outside_encoder`), so it is the
    stronger of the two in everything but attention.

    Shapes:
        src (B, H·W + 1) pixel tokens; tgt_in (B, T) -> logits (B, T, V)
    """

    reads_images = True
    max_output_tokens = MAX_SYMBOLS + 1  # with the EOS

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, image_height: int, **kw):
        super().__init__(src_vocab_size, tgt_vocab_size, **kw)
        D = self.hidden_size
        self.image_height = image_height
        self.encoder = ConvEncoder(D, normalise=True)
        self.pool = nn.AdaptiveAvgPool2d(POOL)
        self.summarize = nn.Linear(POOL[0] * POOL[1] * D, D)  # V over the pooled grid
        init_xavier_outside_encoder(self)  # as the captioner's decoder

    def encode(self, src: Tensor, src_mask: Tensor) -> RNNMemory:
        """Shapes: src, src_mask (B, S) -> RNNMemory(mask (B, G), summary (B, D))."""
        images = _image_inputs(src, src_mask, self.image_height)
        annotations = self.encoder(images)  # (B, G, D)
        rows, cols = grid_size(*images.shape[2:])
        grid = annotations.transpose(1, 2).unflatten(2, (rows, cols))  # (B, D, Gh, Gw)
        pooled = self.pool(grid).flatten(1)  # (B, D·POOL)
        summary = torch.tanh(self.summarize(pooled))  # c: (B, D)
        mask = torch.ones(annotations.shape[:2], dtype=torch.bool, device=src.device)
        return RNNMemory(mask=mask, summary=summary)


__all__ = [
    "ConvEncoder",
    "ShowAttendTell",
    "ShowTell",
    "cell_boxes",
    "grid_size",
    "pixels_of",
]
