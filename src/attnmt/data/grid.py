"""The geometry of an image as the image models read it, torch-free: its grey levels as
token ids, the grid of cells the CNN encoder's annotations cover, and the longest reading.
`attnmt.models.vision` builds on it; the server of an export reads it without torch."""

from __future__ import annotations

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
