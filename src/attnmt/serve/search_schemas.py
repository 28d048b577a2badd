"""The typed answers about a search (`POST /api/translate` with "search", "prefix" or
"alternatives", and the stream's final answer): its nodes, the forced prefix, the
alternatives after it. They are the records of `attnmt.decoding.records` (`SearchNode`,
`SearchRecord`, `PrefixRecord`, `AlternativeRecord`) field for field, checked by
tests/test_records.py; docs/decoding.md describes the fields."""

from __future__ import annotations

from pydantic import BaseModel, Field

MAX_ALTERNATIVES = 16


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
