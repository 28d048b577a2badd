"""The geometry of an image as the image models read it, torch-free: its grey levels as
token ids, the grid of cells the CNN encoder's annotations cover, the longest reading, and
a map over the cells spread over the pixels.
`attnmt.models.vision` builds on it; the server of an export reads it without torch."""

from __future__ import annotations

import numpy as np

FIRST_LEVEL_ID = 4  # the id of grey level 0 (after PAD UNK BOS EOS: attnmt.data.images)
LEVELS = 16  # the brightest grey level (the UCI digits' scale)
DOWNSAMPLE = 4  # the encoder's two stride-2 convolutions: a grid cell steps 4x4 pixels
# Symbols read in one image before the reading is cut (the image tasks write at most 5).
# An image's source is thousands of pixel tokens, so the translation models' length limit
# (twice the source) would let an untrained model write ~3,000 tokens per canvas.
MAX_SYMBOLS = 15


def grid_size(height: int, width: int) -> tuple[int, int]:
    """The encoder's grid for an H x W image (each side divided by 4, rounded up)."""
    return -(-height // DOWNSAMPLE), -(-width // DOWNSAMPLE)


def cell_boxes(height: int, width: int) -> list[tuple[int, int, int, int]]:
    """The pixel box (top, left, bottom, right; exclusive) each grid cell covers, row by row
    (the order of the attention's source positions)."""
    rows, cols = grid_size(height, width)
    return [
        (r * DOWNSAMPLE, c * DOWNSAMPLE, min(height, (r + 1) * DOWNSAMPLE),
         min(width, (c + 1) * DOWNSAMPLE))
        for r in range(rows) for c in range(cols)
    ]  # fmt: skip


def pixel_map(weights: np.ndarray, height: int, width: int) -> np.ndarray:
    """Attention over grid cells (or already over pixels) as mass per pixel.

    A cell's weight is spread evenly over the pixels it covers (4x4; fewer at a ragged
    edge), so every row still sums to its total mass.

    Shapes:
        weights (T, G) with G = grid cells, or (T, H·W) -> (T, H, W)
    """
    steps = weights.shape[0]
    if weights.shape[1] == height * width:  # the glimpse model attends over pixels
        return weights.reshape(steps, height, width)
    rows, cols = grid_size(height, width)
    if weights.shape[1] != rows * cols:
        raise ValueError(
            f"weights over {weights.shape[1]} positions fit neither the {rows}x{cols} grid "
            f"nor the {height}x{width} pixels of the image"
        )
    cells = weights.reshape(steps, rows, cols)  # (T, Gh, Gw)
    row_cell = np.arange(height)[:, None] // DOWNSAMPLE  # the cell of each pixel: (H, 1)
    col_cell = np.arange(width)[None, :] // DOWNSAMPLE  # (1, W)
    covered = np.zeros((rows, cols))
    np.add.at(covered, (row_cell, col_cell), 1)  # pixels per cell
    return cells[:, row_cell, col_cell] / covered[row_cell, col_cell]  # (T, H, W)
