"""Translating sentences with a trained model: text in, translations with their attention
weights and word alignments out.

    loaded = load_run("runs/quickstart")                 # attnmt.decoding.runs
    translator = Translator(loaded, beam=5, need_weights=True)
    (sentence,) = translator.translate(["In the beginning was the Word."])
    sentence.translation.text, translator.words(sentence).links

`translate_ids` (attnmt.decoding.decode_ids) is the engine under it. Sources longer than
`source_limit` subwords are cut there (and reported), so one very long
line cannot exhaust memory: decoding time and memory grow with S x T. What became of a
sentence, as every face shows it, is `attnmt.decoding.records.sentence_record`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from attnmt.alignment.links import WordView, source_words, target_words, word_view
from attnmt.config import family
from attnmt.data.buckets import DECODE_BATCH_TOKENS
from attnmt.data.vocab import BOS, EOS, PAD
from attnmt.decoding.attention_choice import aligning, run_attention
from attnmt.decoding.decode_ids import Translation, translate_ids
from attnmt.decoding.hypotheses import Hypothesis
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.search import alternatives
from attnmt.decoding.search_tree import StepHook
from attnmt.errors import UserError

NOT_WORDS = (PAD, BOS, EOS)  # ids a prefix cannot force

if TYPE_CHECKING:
    from attnmt.decoding.runs import LoadedRun
    from attnmt.runtime.runs import ExportRun


# --------------------------------------------------------------------------------------
# `attnmt translate RUN [FILE|-]`
# --------------------------------------------------------------------------------------


MAX_SOURCE_TOKENS = 400  # longer sources are truncated: decoding time grows with S × T
IMAGE_TOKENS = 1 << 20  # image models: every pixel token of an image (never cut)


def source_limit(model_cfg, requested: int | None = None) -> int:
    """The longest source (subwords, EOS not counted) a run translates; longer are cut.

    `MAX_SOURCE_TOKENS` by default; the `location` score of an RNN can only score
    `model.max_source_len` positions, the EOS included. `requested` lowers the limit.
    """
    model = family(model_cfg.name)
    if model.reads_images:  # an image is read whole: a cut one is no image
        if requested is not None:
            raise UserError("--max-source-len cuts sentences; an image model reads whole images")
        return IMAGE_TOKENS
    limit = MAX_SOURCE_TOKENS
    hard = None
    if not model.transformer and model_cfg.attention == "location":
        hard = model_cfg.max_source_len - 1  # the EOS takes one position
        limit = min(limit, hard)
    if requested is not None:
        if requested < 1:
            raise UserError(f"--max-source-len must be at least 1, got {requested}")
        if hard is not None and requested > hard:
            raise UserError(
                f"--max-source-len {requested} is more than this model can read: its "
                f"location attention scores at most {hard} source subwords plus the EOS"
            )
        limit = requested
    return limit


@dataclass
class Sentence:
    """One input line and what became of it (`translation` is None for a blank line)."""

    line: int  # 1-based number of the line in its input
    source: str  # the line with its whitespace normalised
    ids: list[int] = field(default_factory=list)  # the source subwords translated
    translation: Translation | None = None
    truncated: bool = False  # the source was cut to `Translator.limit` subwords
    # `attnmt.explain.Explanation`s of the best translation, one per method asked
    explanations: list[Any] = field(default_factory=list)
    prefix: list[int] | None = None  # the target subwords forced at the start, if any
    alternatives: list[Alternative] | None = None  # `Translator.alternatives`' answer


@dataclass
class Alternative:
    """A subword that could follow a sentence's prefix, and the translation it leads to."""

    token: int
    log_prob: float  # the subword's log-probability after the prefix
    translation: Translation  # prefix, subword and completion, scored whole


class Translator:
    """A loaded run ready to translate text, with alignments and weights when asked.

    Options are those of `attnmt translate` (docs/decoding.md); the search's (`beam`,
    `alpha`, `n_best`, `max_len_ratio`, `max_len`, `need_weights`) are kept as one
    `SearchOptions`, `options`; `align_layer` and `align_head` (1-based) choose the
    Transformer attention that aligns words; `max_len` caps every output (EOS included)
    whatever its source length (`translate_ids`).
    """

    def __init__(
        self,
        loaded: LoadedRun | ExportRun,
        *,
        beam: int = SearchOptions.beam,
        alpha: float = SearchOptions.alpha,
        n_best: int = SearchOptions.n_best,
        max_len_ratio: float = SearchOptions.max_len_ratio,
        max_len: int | None = None,
        batch_tokens: int = DECODE_BATCH_TOKENS,
        max_source_len: int | None = None,
        align_layer: int | None = None,
        align_head: int | None = None,
        align_offset: int | None = None,
        need_weights: bool = False,
        threshold: float | None = None,
        record_search: bool = False,
    ) -> None:
        self.loaded = loaded
        self.record_search = record_search
        self.vocab = loaded.vocab
        self.options = SearchOptions(
            beam=beam,
            alpha=alpha,
            n_best=n_best,
            max_len_ratio=max_len_ratio,
            max_len=max_len,
            need_weights=need_weights,
        )
        self.batch_tokens = batch_tokens
        self.threshold = threshold
        self.choice = run_attention(loaded, layer=align_layer, head=align_head, offset=align_offset)
        if need_weights and not loaded.model.uses_attention:
            raise UserError(
                f"this run's model ({loaded.cfg.model.name}) has no attention, so it has no "
                "alignments or attention plots; leave out --alignments and --plot"
            )
        self.limit = source_limit(loaded.cfg.model, max_source_len)

    def translate(
        self,
        lines: Sequence[str],
        *,
        first_line: int = 1,
        progress=None,
        prefixes: Sequence[str | Sequence[int] | None] | None = None,
        on_step: StepHook | None = None,
        record: bool | None = None,
    ) -> list[Sentence]:
        """One `Sentence` for each of `lines` (numbered from `first_line`), in order.

        `prefixes` (one per line: text, target ids, or None): the translation begins with
        it; text is split into the model's subwords as the tokenizer splits a sentence.
        `on_step(index, nodes)`: each search step's new nodes as they are made, `index`
        the line's position in `lines` (the search is recorded, see `record_search`).
        `record`: record the search or not this time (None: `record_search`).
        """
        sentences = [
            Sentence(first_line + i, " ".join(line.split())) for i, line in enumerate(lines)
        ]
        if prefixes is not None:
            if len(prefixes) != len(lines):
                raise ValueError(f"{len(prefixes)} prefixes for {len(lines)} lines")
            for sentence, prefix in zip(sentences, prefixes, strict=True):
                sentence.prefix = self.prefix_ids(prefix)
        todo = [s for s in sentences if s.source]
        for sentence in todo:
            ids = self.vocab.src.encode(sentence.source)
            sentence.truncated = len(ids) > self.limit
            sentence.ids = ids[: self.limit]
        hook = None
        if on_step is not None:
            where = {id(s): i for i, s in enumerate(sentences)}
            places = [where[id(s)] for s in todo]
            hook = lambda i, nodes: on_step(places[i], nodes)  # noqa: E731
        results = translate_ids(
            self.loaded.model,
            [s.ids for s in todo],
            self.vocab.tgt.decode,
            self.options,
            batch_tokens=self.batch_tokens,
            progress=progress,
            prefixes=None if prefixes is None else [s.prefix for s in todo],
            record_search=(self.record_search if record is None else record) or on_step is not None,
            on_step=hook,
        )
        for sentence, result in zip(todo, results, strict=True):
            sentence.translation = result
        return sentences

    def prefix_ids(self, prefix: str | Sequence[int] | None) -> list[int] | None:
        """A prefix as target subword ids: text split as the tokenizer splits a sentence,
        or ids checked against the vocabulary (no PAD, BOS or EOS: not words)."""
        if prefix is None:
            return None
        if isinstance(prefix, str):
            text = " ".join(prefix.split())
            return self.vocab.tgt.encode(text) if text else None
        ids = [int(i) for i in prefix]
        size = self.vocab.tgt.size
        bad = [i for i in ids if not 0 <= i < size or i in NOT_WORDS]
        if bad:
            raise UserError(
                f"prefix token {bad[0]} is not a word of this model's target vocabulary: "
                f"give ids from 4 to {size - 1} (or 1, unknown), or the prefix as text"
            )
        return ids or None

    def alternatives(
        self, sentence: Sentence, count: int = 5, min_prob: float = 0.0
    ) -> list[Alternative]:
        """The `count` most likely next subwords after the sentence's prefix (none: at the
        start), each completed by this translator's search (its beam), scored whole; the
        answer is also kept as `sentence.alternatives`. CTranslate2's `return_alternatives`
        and `min_alternative_expansion_prob` (`attnmt.decoding.search.alternatives`)."""
        if not sentence.source:
            sentence.alternatives = []
            return []
        if not sentence.ids:
            sentence.ids = self.vocab.src.encode(sentence.source)[: self.limit]
        model = self.loaded.model
        ops = model.array_ops
        src, src_mask = ops.pad([[*sentence.ids, EOS]])
        prefix = None
        if sentence.prefix:
            prefix = ops.tensor([sentence.prefix], ops.long)
        was_training = getattr(model, "training", False)  # a torch module; an export has none
        if was_training:
            model.eval()
        try:
            options = self.options
            if options.max_len is None:
                options = replace(options, max_len=model.max_output_tokens)
            hyps = alternatives(
                model, src, src_mask, prefix, options, count=count, min_prob=min_prob
            )
        finally:
            if was_training:
                model.train(was_training)
        sentence.alternatives = [
            Alternative(
                token,
                log_prob,
                Translation(
                    text=self.vocab.tgt.decode(h.tokens),
                    tokens=h.tokens,
                    score=h.score,
                    weights=h.weights,  # one sentence: no padding to cut
                    log_prob=h.log_prob,
                ),
            )
            for token, log_prob, h in hyps
        ]
        return sentence.alternatives

    def words(self, sentence: Sentence, hyp: Translation | Hypothesis | None = None) -> WordView:
        """Word-level attention and links of the sentence's best (or the given) hypothesis."""
        hyp = sentence.translation if hyp is None else hyp
        if hyp is None or hyp.weights is None:
            raise ValueError("words() needs a translation decoded with need_weights=True")
        text = hyp.text if isinstance(hyp, Translation) else self.vocab.tgt.decode(hyp.tokens)
        return word_view(
            aligning(hyp.weights, self.choice),
            source_words(self.vocab.src, sentence.source, len(sentence.ids)),
            target_words(self.vocab.tgt, hyp.tokens, text),
            threshold=self.threshold,
        )
