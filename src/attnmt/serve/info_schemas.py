"""The typed answers about the server and its runs: `GET /api/model(s)` (`ModelInfo`: what
a run is, its attention, limits and best validation) and `GET /api/health`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from attnmt.serve.validation import MAX_LEVEL


class AttentionInfo(BaseModel):
    score: str = Field(description="dot, general, concat, additive, location, scaled_dot, cosine")
    scope: str = Field(description="global, local-m or local-p (a window of 2D+1 positions)")
    mode: str = Field(description="soft or hard")
    window: int | None = Field(description="D of a local scope")


class BestDev(BaseModel):
    metric: str = Field(description="the dev metric the best checkpoint was chosen by")
    value: float
    step: int


class Limits(BaseModel):
    max_body_bytes: int
    max_lines: int
    max_line_chars: int
    max_source_tokens: int = Field(description="longer sources are cut (truncated: true)")
    max_beam: int
    max_search_steps: int = Field(
        description="a request's beam x its lines' longest outputs (2 x (source subwords + 1) "
        "+ 5 each); more is answered 413"
    )
    max_explain_passes: int = Field(
        description="sequences a request's explanation runs through the model (integrated "
        "gradients: ig_steps x (target subwords + 1) + 2 a line, a translation's target "
        "estimated as long as its source; occlusion: source subwords + 1); more is answered 413"
    )


class ImageInfo(BaseModel):
    """What an image run reads (`ModelInfo.image`)."""

    task: str = Field(description='"digits" (2-5 digits in a row) or "cluttered" (one digit)')
    height: int = Field(description="rows of pixels")
    width: int = Field(description="pixels per row")
    min_level: int = Field(0, description="the lowest grey level (the background)")
    max_level: int = Field(MAX_LEVEL, description="the highest grey level (full ink)")
    grid: tuple[int, int] | None = Field(
        description="show-attend-tell: the rows and columns of grid cells it attends over"
    )
    cell: int | None = Field(description="show-attend-tell: a grid cell's side in pixels")
    glimpses: int | None = Field(description="glimpses: the glimpses taken of each image")
    max_digits: int = Field(description="a longer reading is cut there (truncated: true)")
    examples: int = Field(description="test canvases GET /api/examples can give")


class ModelInfo(BaseModel):
    name: str
    model: Literal[
        "rnnencdec", "rnnsearch", "luong", "transformer",  # text
        "show-attend-tell", "show-tell", "glimpses",  # images
    ]  # fmt: skip
    input: Literal["text", "image"] = Field(
        description="what the run reads: text (POST /api/translate) or images (POST /api/read)"
    )
    image: ImageInfo | None = Field(description="the images an image run reads; null for text")
    attention: AttentionInfo | None = Field(
        description="null for the Transformer (multi-head scaled dot), RNNencdec and "
        "show-tell (none), and glimpses (its own policy: see image.glimpses)"
    )
    has_attention: bool
    layers: int
    heads: int | None = Field(description="Transformer attention heads")
    source_language: str = Field(description="the corpus version or file the source came from")
    target_language: str
    parameters: int
    step: int = Field(description="the training step of the served checkpoint")
    checkpoint: str
    best_dev: BestDev | None
    beam: int = Field(description="the default beam size")
    explain_methods: list[str] = Field(
        description="the explanation methods this run answers (a request's explain)"
    )
    limits: Limits


class ModelList(BaseModel):
    models: list[ModelInfo]


class QueueState(BaseModel):
    waiting: int
    capacity: int
    cancelled: int = Field(
        description="batches stopped part-way since the start: all their clients had left "
        "or waited past the timeout"
    )


class Health(BaseModel):
    status: Literal["ok"]
    models: dict[str, QueueState]
