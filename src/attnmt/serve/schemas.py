"""What `attnmt serve` reads and writes: the typed request and response bodies.

FastAPI builds the OpenAPI schema (`GET /openapi.json`, the docs at `/docs`) from these
models, and checks every request against them: a field of the wrong type or one this
module does not name is refused with 422, saying which field. Indices are 0-based
(Pharaoh's `i-j`: source word i, target word j); layers and heads count from 1, as in the
`translate` command's `--align-layer` and `--align-head`.

A run reads text (`TranslateRequest`) or images (`ReadRequest`: the digit tasks of
`attnmt.data.images`, an image a list of rows of grey levels 0..16); `ModelInfo.input`
says which. A line's answer (`LineResult`, `ScoreResult`) and the models in it are the
sentence record of `attnmt.decoding.records` field for field (tests/test_records.py),
with descriptions for the OpenAPI schema; so are a search's answers (its nodes, the forced
prefix, the alternatives). Last, the answers about the server and its runs (`GET
/api/model(s)`: `ModelInfo`, `GET /api/health`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from attnmt.config.families import MODELS
from attnmt.explain import METHODS
from attnmt.serve.validation import MAX_LEVEL, exactly_one, image_problem, whole
from attnmt.service import Request

MAX_BEAM = 16
MAX_ALTERNATIVES = 16
MAX_IG_STEPS = 256
# Whole numbers, 5.0 as 5 (validation.py). The bounds come before the validator: after it,
# or on a field of `Beam | None`, pydantic publishes them as "ge"/"le", which JSON Schema
# ignores, instead of "minimum"/"maximum".
Whole = Annotated[int, BeforeValidator(whole)]
Beam = Annotated[int, Field(ge=1, le=MAX_BEAM), BeforeValidator(whole)]
Alternatives = Annotated[int, Field(ge=1, le=MAX_ALTERNATIVES), BeforeValidator(whole)]
Level = Annotated[int, Field(ge=0, le=MAX_LEVEL), BeforeValidator(whole)]
# An image is a non-empty list of non-empty rows (published as minItems; that the rows are
# equally long, which JSON Schema cannot say, `image_problem` checks).
Image = Annotated[list[Annotated[list[Level], Field(min_length=1)]], Field(min_length=1)]


# --- a search: its nodes, the forced prefix, the alternatives after it ---------------------
# The records of `attnmt.decoding.records` (`SearchNode`, `SearchRecord`, `PrefixRecord`,
# `AlternativeRecord`) field for field (tests/test_records.py); docs/decoding.md describes
# the fields. Answers of `POST /api/translate` with "search", "prefix" or "alternatives",
# and the stream's final answer.


class SearchNode(BaseModel):
    """One candidate of a recorded search: `piece` appended to its parent's hypothesis."""

    id: int
    parent: int | None = Field(description="the node it extends; null for the root")
    depth: int = Field(description="subwords from the root (the root 0)")
    token: int = Field(description="the subword's id (the root: <s>)")
    piece: str
    status: str = Field(
        description="root, forced (a prefix subword), kept (extended at the next step), "
        "pruned (lost the ranking at its step), finished (an </s> that ended a hypothesis), "
        "ended (in the beam when the search stopped)"
    )
    log_prob: float = Field(description="the subword's log-probability")
    cum_log_prob: float = Field(description="the hypothesis' log-probability, what beams rank")
    score: float = Field(description="cum_log_prob over the length penalty of `depth` subwords")
    best: bool = Field(description="on the path of the best finished hypothesis")
    rank: int | None = Field(description="finished nodes: their place in the n-best list")
    rejected: list[tuple[str, float]] = Field(
        description="on an expanded node: its best next subwords that went nowhere, with "
        "their log-probabilities"
    )
    attention: list[float] | None = Field(
        description="the attention row that produced the subword (the aligning map)"
    )


class SearchRecord(BaseModel):
    beam: int
    alpha: float
    source_pieces: list[str]
    nodes: list[SearchNode]
    nbest: list[int] = Field(description="ids of the returned hypotheses' finished nodes")


class PrefixInfo(BaseModel):
    text: str = Field(description="the forced prefix as text")
    tokens: int = Field(description="how many subwords it is")
    pieces: list[str]
    ids: list[int] = Field(description="its subword ids (a 'prefix' to send again)")


class NbestResult(BaseModel):
    """One hypothesis of an n-best list (with `n_best` > 1), best first."""

    translation: str
    score: float
    log_prob: float
    alignment: str = Field(description="its word links, Pharaoh i-j; empty without weights")


class AlternativeResult(BaseModel):
    token: int
    piece: str = Field(description="the subword after the prefix")
    prob: float = Field(description="its probability there")
    log_prob_token: float
    translation: str = Field(description="prefix, subword and the search's completion")
    score: float
    log_prob: float = Field(description="log P of the whole output, as POST /api/score gives")
    target_pieces: list[str]
    subword_weights: list[list[float]] | None = None


class _Strict(BaseModel):
    # Unknown fields are an error, and no value is coerced ("5" is not a beam of 5).
    model_config = ConfigDict(extra="forbid", strict=True)


# Checked by the app against the run (`attnmt.explain.check_method`), so an unknown or
# unfitting method is refused with the library's sentence rather than pydantic's.
EXPLAIN = Field(
    None,
    description="an explanation method (GET /api/model lists the run's): its matrix of the "
    "output (forced decoding) is one more map after the attention's, and the alignments "
    "are read off it; null: the attention as decoded",
    json_schema_extra={"anyOf": [{"type": "string", "enum": list(METHODS)}, {"type": "null"}]},
)
IG_STEPS = Field(
    Request.ig_steps, ge=1, le=MAX_IG_STEPS, description="integration steps of integrated-gradients"
)


class _Decoding(_Strict):
    """How to translate: the fields a translation and a streamed translation share."""

    model: str | None = Field(
        None, description="the name of a served run (GET /api/models); the first one if left out"
    )
    beam: Beam | None = Field(None, description="beam size (1 = greedy); by default the server's")
    alpha: float = Field(
        Request.alpha,
        ge=0.0,
        le=10.0,
        description="the length penalty's exponent (GNMT's; 0 ranks by log P alone)",
    )
    n_best: Beam = Field(
        1, description="the N best hypotheses of the beam as `nbest` (at most the beam; 1: none)"
    )
    alignments: bool | None = Field(
        None,
        description="word alignments (words, links, Pharaoh); by default whenever the model "
        "has attention",
    )
    weights: bool = Field(
        False,
        description="the attention matrices, subword and word level (for the Transformer one "
        "per layer and head, and each layer's mean over heads; with explain, its matrix after "
        "them)",
    )
    search: bool = Field(
        False,
        description="the whole search of each line: every candidate of every step with its "
        "parent, scores, fate, rejected next subwords and attention row (docs/decoding.md)",
    )
    prefix: str | list[Whole] | None = Field(
        None,
        description="every translation begins with this (text, split into subwords as the "
        "tokenizer splits a sentence, or target subword ids); the rest is searched",
        examples=["Au commencement"],
    )
    alternatives: Alternatives | None = Field(
        None,
        description="the N most likely next subwords after the prefix (at the start without "
        "one), each completed by the search and scored whole",
    )
    min_alternative_prob: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="leave out alternatives less likely than this; the most likely is kept",
    )


class TranslateRequest(_Decoding):
    """One sentence (`text`) or several (`lines`), and how to translate them."""

    model_config = exactly_one("text", "lines")

    text: str | None = Field(
        None, description="one sentence; line breaks in it count as spaces", examples=["Hello"]
    )
    lines: list[str] | None = Field(
        None, description="several sentences, one per item, translated in one batch"
    )
    explain: str | None = EXPLAIN
    ig_steps: Whole = IG_STEPS

    @model_validator(mode="after")
    def _one_input(self) -> TranslateRequest:
        if (self.text is None) == (self.lines is None):
            raise ValueError("give exactly one of 'text' (a sentence) or 'lines' (a list of them)")
        return self


class StreamRequest(_Decoding):
    """One sentence, translated step by step (POST /api/translate/stream): the search's
    steps are sent as they are decoded. Explanations are not streamed."""

    text: str = Field(
        description="one sentence; line breaks in it count as spaces", examples=["Jesus wept."]
    )


class ReadRequest(_Strict):
    """One image (`image`) or several (`images`) for a run that reads images, and how to
    read them. An image is its rows, top to bottom, each a list of grey levels 0..16 left
    to right (0 is the background, 16 full ink), of the size the run reads (GET
    /api/model: `image.height` rows of `image.width` levels)."""

    model_config = exactly_one("image", "images")

    image: Image | None = Field(
        None, description="one image: rows of grey levels 0..16 (ink is high, paper 0)"
    )
    images: list[Image] | None = Field(None, description="several images, read in one batch")
    model: str | None = Field(
        None, description="the name of a served run (GET /api/models); the first one if left out"
    )
    beam: Beam | None = Field(None, description="beam size (1 = greedy); by default the server's")
    weights: bool | None = Field(
        None,
        description="the attention of each step as a map over the pixels (and the glimpse "
        "path); by default whenever the model has attention or explain is given",
    )
    explain: str | None = EXPLAIN
    ig_steps: Whole = IG_STEPS

    # Checked before the types: one sentence for a bad image, not one error per pixel.
    @field_validator("image", mode="before")
    @classmethod
    def _one_image(cls, value: Any) -> Any:
        if value is not None and (problem := image_problem(value, "the image")):
            raise ValueError(problem)
        return value

    @field_validator("images", mode="before")
    @classmethod
    def _each_image(cls, value: Any) -> Any:
        if isinstance(value, list):
            for i, image in enumerate(value):
                if problem := image_problem(image, f"image {i} (from 0)"):
                    raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _one_input(self) -> ReadRequest:
        if (self.image is None) == (self.images is None):
            raise ValueError("give exactly one of 'image' or 'images' (a list of them)")
        return self


class AttentionMap(BaseModel):
    """One attention matrix of a sentence, at the subword and at the word level."""

    layer: int | None = Field(description="1-based Transformer decoder layer; null for an RNN")
    head: int | None = Field(
        description="1-based head; null for the mean over the layer's heads (or an RNN)"
    )
    name: str = Field(description='e.g. "decoder attention", "layer 2, mean of heads"')
    method: str = Field(description='"attention", or the explanation method that made it')
    scale: Literal["weights", "row", "signed"] = Field(
        description="how to shade its values, as the explanation's `scale`"
    )
    subword: list[list[float]] = Field(
        description="rows: target_pieces, columns: source_pieces (each ends with </s>)"
    )
    word: list[list[float]] = Field(description="rows: target_words, columns: source_words")
    alignment: str = Field(description="the word links read off this matrix, Pharaoh i-j")


class ExplanationInfo(BaseModel):
    """The explanation method that made a result's weights, and what it cost."""

    method: str
    scale: Literal["weights", "row", "signed"] = Field(
        description="how to shade its values (attnmt.plotting.SCALES): weights 0..1; row: "
        "each row divided by its largest value; signed: by its largest magnitude, negative "
        "values in a second colour"
    )
    ms: float = Field(description="milliseconds the explanation took (not the decoding)")
    forward: int = Field(description="sequences passed forward to explain the output")
    backward: int = Field(0, description="... and backward (the gradient methods)")
    completeness_error: float | None = Field(
        None,
        description="integrated-gradients: |sum of attributions - change of log p|, summed "
        "over the steps, over the sum of |change|: the integration's error",
    )


class LineResult(BaseModel):
    """What became of one input line: its record (`attnmt.decoding.records`), or the
    `error` that kept it from being decoded."""

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
    explanations: list[ExplanationInfo] | None = Field(
        None,
        description="with explain: the method, one more map after the attention's, the one "
        "the links are read off (`default_attention`), and what it cost",
    )
    nbest: list[NbestResult] | None = Field(None, description="with n_best > 1")
    prefix: PrefixInfo | None = Field(None, description="the forced prefix, when one was given")
    search: SearchRecord | None = Field(None, description="with search: true")
    alternatives: list[AlternativeResult] | None = Field(None, description="with alternatives: N")


class ScorePair(_Strict):
    source: str = Field(description="a source sentence", examples=["Jesus wept."])
    target: str = Field(description="a translation of it to score", examples=["Jésus pleura."])


class ScoreRequest(_Strict):
    """Given translations to score (forced decoding), one `pair` or several (`pairs`)."""

    model_config = exactly_one("pair", "pairs")

    pair: ScorePair | None = Field(None, description="one source and its translation")
    pairs: list[ScorePair] | None = Field(None, description="several, scored in one batch")
    model: str | None = Field(
        None, description="the name of a served run (GET /api/models); the first one if left out"
    )
    alignments: bool = Field(
        False, description="word alignments read off the attention while reading the target"
    )
    weights: bool = Field(False, description="the attention matrices, as in /api/translate")
    explain: str | None = EXPLAIN
    ig_steps: Whole = IG_STEPS

    @model_validator(mode="after")
    def _one_input(self) -> ScoreRequest:
        if (self.pair is None) == (self.pairs is None):
            raise ValueError("give exactly one of 'pair' or 'pairs' (a list of them)")
        return self


class ScoreResult(LineResult):
    """One scored pair: `translation` is the target as given (whitespace normalised),
    `score` log P / GNMT's length penalty (alpha 0.6, as the search ranks), `log_prob`
    log P(target, </s> | source)."""

    token_log_probs: list[float] = Field(
        default_factory=list, description="log-probability of each of target_pieces (</s> last)"
    )


class ScoreResponse(BaseModel):
    model: str = Field(description="the run that scored")
    scores: list[ScoreResult]


class TranslateResponse(BaseModel):
    model: str = Field(description="the run that translated")
    beam: int
    translations: list[LineResult]


class ImageResult(BaseModel):
    """What a run read in one image, and where it looked while reading each symbol."""

    image: int = Field(description="1-based position of the image in the request")
    text: str = Field(description='the digits read, separated by spaces ("3 1 4")')
    truncated: bool = Field(
        False, description="the reading had not ended after image.max_digits symbols: cut there"
    )
    score: float = Field(0.0, description="the hypothesis score (length-normalised under beam)")
    log_prob: float = Field(0.0, description="log P(text, </s> | image)")
    target_pieces: list[str] = Field(
        default_factory=list, description="the symbols read, then </s>: one per decoder step"
    )
    attention: list[list[list[float]]] | None = Field(
        None,
        description="with weights: one map per step (rows: target_pieces), each height x "
        "width, the step's attention mass on every pixel (a grid cell's weight spread over "
        "its pixels; each map sums to the step's mass, 1); with explain, the method's value "
        "(grid-cell methods spread the same way; signed for gradients and occlusion)",
    )
    glimpses: list[tuple[float, float]] | None = Field(
        None,
        description="the glimpse model, with weights: the (row, col) pixel centre of each "
        "glimpse, in the order taken (pixel (i, j) is centred on (i, j))",
    )
    explanation: ExplanationInfo | None = Field(
        None, description="with explain: the method whose values the maps are"
    )


class ReadResponse(BaseModel):
    model: str = Field(description="the run that read")
    beam: int
    readings: list[ImageResult]


class ImageExample(BaseModel):
    """One canvas of a run's test split, made again from its data config."""

    index: int = Field(description="0-based position in the split")
    id: str = Field(description='the example id, "TASK.test:INDEX"')
    image: list[list[int]] = Field(description="rows of grey levels 0..16")
    digits: str = Field(description='the true digits, separated by spaces ("3 1 4")')
    boxes: list[tuple[int, int, int, int]] = Field(
        description="per digit (top, left, bottom, right) in pixels, bottom and right exclusive"
    )


class ExampleList(BaseModel):
    model: str
    split: Literal["test"]
    total: int = Field(description="canvases in the split (index runs from 0 to total - 1)")
    examples: list[ImageExample]


class ErrorBody(BaseModel):
    detail: str


# --- the server and its runs: `GET /api/model(s)`, `GET /api/health` -----------------------


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
    model: Literal[MODELS]  # the families of attnmt.config.families
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
