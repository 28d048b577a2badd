"""What `attnmt serve` reads and writes: the typed request and response bodies.

FastAPI builds the OpenAPI schema (`GET /openapi.json`, the docs at `/docs`) from these
models, and checks every request against them: a field of the wrong type or one this
module does not name is refused with 422, saying which field. Indices are 0-based
(Pharaoh's `i-j`: source word i, target word j); layers and heads count from 1, as in the
`translate` command's `--align-layer` and `--align-head`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_BEAM = 16


class _Strict(BaseModel):
    # Unknown fields are an error, and no value is coerced ("5" is not a beam of 5).
    model_config = ConfigDict(extra="forbid", strict=True)


class TranslateRequest(_Strict):
    """One sentence (`text`) or several (`lines`), and how to translate them."""

    text: str | None = Field(
        None, description="one sentence; line breaks in it count as spaces", examples=["Hello"]
    )
    lines: list[str] | None = Field(
        None, description="several sentences, one per item, translated in one batch"
    )
    model: str | None = Field(
        None, description="the name of a served run (GET /api/models); the first one if left out"
    )
    beam: int | None = Field(
        None, ge=1, le=MAX_BEAM, description="beam size (1 = greedy); by default the server's"
    )
    alignments: bool | None = Field(
        None,
        description="word alignments (words, links, Pharaoh); by default whenever the model "
        "has attention",
    )
    weights: bool = Field(
        False,
        description="the attention matrices, subword and word level (for the Transformer one "
        "per layer and head, and each layer's mean over heads)",
    )

    @model_validator(mode="after")
    def _one_input(self) -> TranslateRequest:
        if (self.text is None) == (self.lines is None):
            raise ValueError("give exactly one of 'text' (a sentence) or 'lines' (a list of them)")
        return self


class AttentionMap(BaseModel):
    """One attention matrix of a sentence, at the subword and at the word level."""

    layer: int | None = Field(description="1-based Transformer decoder layer; null for an RNN")
    head: int | None = Field(
        description="1-based head; null for the mean over the layer's heads (or an RNN)"
    )
    name: str = Field(description='e.g. "decoder attention", "layer 2, mean of heads"')
    subword: list[list[float]] = Field(
        description="rows: target_pieces, columns: source_pieces (each ends with </s>)"
    )
    word: list[list[float]] = Field(description="rows: target_words, columns: source_words")
    alignment: str = Field(description="the word links read off this matrix, Pharaoh i-j")


class LineResult(BaseModel):
    """What became of one input line."""

    line: int = Field(description="1-based position of the line in the request")
    source: str = Field(description="the line with its whitespace normalised")
    translation: str
    error: str | None = Field(
        None, description="why this line was not translated (the other lines still are)"
    )
    truncated: bool = Field(
        False, description="the source was cut to the model's longest source (GET /api/model)"
    )
    score: float = Field(0.0, description="the hypothesis score (length-normalised under beam)")
    log_prob: float = Field(0.0, description="log P(translation, </s> | source)")
    source_pieces: list[str] = Field(
        default_factory=list, description="the source subwords translated, then </s>"
    )
    target_pieces: list[str] = Field(
        default_factory=list, description="the output subwords, then </s>"
    )
    source_words: list[str] = Field(default_factory=list)
    target_words: list[str] = Field(default_factory=list)
    alignment: str = Field("", description="word links, Pharaoh i-j (source i, target j)")
    links: list[tuple[int, int]] = Field(
        default_factory=list, description="the same links as [source word, target word] pairs"
    )
    attention: list[AttentionMap] | None = Field(
        None,
        description="with weights: true; for the Transformer each layer's mean over heads, "
        "then its heads, layer by layer",
    )
    default_attention: int | None = Field(
        None, description="the index in `attention` of the map the alignment is read from"
    )


class TranslateResponse(BaseModel):
    model: str = Field(description="the run that translated")
    beam: int
    translations: list[LineResult]


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


class ModelInfo(BaseModel):
    name: str
    model: Literal["rnnencdec", "rnnsearch", "luong", "transformer"]
    attention: AttentionInfo | None = Field(
        description="null for the Transformer (multi-head scaled dot) and RNNencdec (none)"
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
    limits: Limits


class ModelList(BaseModel):
    models: list[ModelInfo]


class QueueState(BaseModel):
    waiting: int
    capacity: int


class Health(BaseModel):
    status: Literal["ok"]
    models: dict[str, QueueState]


class ErrorBody(BaseModel):
    detail: str
