"""One request, one service: how every face translates and scores.

    service = Service(loaded)                  # a torch run, an ensemble or an ONNX export
    request = Request(beam=5, n_best=3, explain=("occlusion",))
    sentences = service.translate(["In the beginning was the Word."], request)
    records = service.records(sentences, request)     # `SentenceRecord`s
    scored = service.score([("the cat", "le chat")], request)  # records of given targets

`attnmt translate` and `attnmt score`, the Python API (`Model.translate`, `Model.score`)
and the server (`attnmt.serve.decoding.RunDecoder`) each parse their input into a
`Request`, call a `Service` and format its records (`attnmt.decoding.records`). Every
check and every default of a request lives in `Request`: a face never restates one.

What an explanation is, in every face: each method of `Request.explain` explains the best
translation (forced decoding of it, `attnmt.explain`), and its matrix is one more map
*beside* the attention's own, after them in the record's `attention`. The words are linked
by the first method's map (`default_attention` points at it; `alignment`, `links`, the
`--alignments` outputs and `--plot` show it), so asking for an explanation is asking to
see the words as the method links them, with the attention still there to compare.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from attnmt.data.buckets import DECODE_BATCH_TOKENS
from attnmt.decoding.hypotheses import score_by_steps
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.records import SentenceRecord, scored_record, sentence_record
from attnmt.decoding.search_tree import StepHook
from attnmt.decoding.translator import Sentence, Translator, source_limit
from attnmt.errors import UserError
from attnmt.explain.names import IG_STEPS

if TYPE_CHECKING:
    from attnmt.decoding.runs import LoadedRun
    from attnmt.runtime.runs import ExportRun

Maps = Literal["every", "aligning"]


def as_is(name: str) -> str:
    """How the Python API and the server spell an option: its field name."""
    return name


def as_flag(name: str) -> str:
    """How the command line spells an option: `n_best` is `--n-best`."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Request:
    """How to translate (or score) lines: the search, what to steer and what to show.

    The search: `beam`, `alpha` (GNMT's length penalty), `n_best` (1..beam),
    `max_len_ratio` (`SearchOptions`). Steering: `prefix` (text or target subword ids)
    forced at the start of every line; `alternatives` (N >= 1 likeliest next subwords after
    it, each completed; those below `min_alternative_prob` left out, the likeliest kept);
    `search` records the whole search (its nodes). Showing: `links` (word alignment),
    `maps` ("every" map the model has, the "aligning" one, or None), `threshold` (also link
    words weighing that much), `layer`/`head`/`offset` (the attention that aligns words,
    1-based; `offset` the decoder step a row is read from). `explain`: explanation methods,
    each one more map beside the attention, the first linking the words (module
    docstring); `ig_steps`: integrated gradients' steps.
    """

    beam: int = SearchOptions.beam
    alpha: float = SearchOptions.alpha
    n_best: int = SearchOptions.n_best
    max_len_ratio: float = SearchOptions.max_len_ratio
    prefix: str | tuple[int, ...] | None = None
    alternatives: int | None = None
    min_alternative_prob: float = 0.0
    search: bool = False
    links: bool = True
    maps: Maps | None = "every"
    threshold: float | None = None
    layer: int | None = None
    head: int | None = None
    offset: int | None = None
    explain: tuple[str, ...] = field(default=())
    ig_steps: int = IG_STEPS

    def check(self, spell: Callable[[str], str] = as_is) -> Request:
        """The request itself, or `UserError` in one sentence naming the first impossible
        option as the face spells it (`as_is`, `as_flag`)."""
        if self.beam < 1:
            raise UserError(f"{spell('beam')} must be at least 1, got {self.beam}")
        if self.alpha < 0:
            raise UserError(f"{spell('alpha')} must be >= 0, got {self.alpha}")
        if self.max_len_ratio <= 0:
            raise UserError(f"{spell('max_len_ratio')} must be positive, got {self.max_len_ratio}")
        if not 1 <= self.n_best <= self.beam:
            raise UserError(
                f"{spell('n_best')}={self.n_best} needs {spell('beam')} >= {max(self.n_best, 1)}"
                f" ({spell('n_best')} is between 1 and {spell('beam')}, which is {self.beam})"
            )
        if self.alternatives is not None and self.alternatives < 1:
            raise UserError(f"{spell('alternatives')} must be at least 1, got {self.alternatives}")
        if self.alternatives and self.n_best > 1:
            raise UserError(
                f"{spell('alternatives')} and {spell('n_best')} each list several outputs; use one"
            )
        if not 0.0 <= self.min_alternative_prob <= 1.0:
            raise UserError(
                f"{spell('min_alternative_prob')} must be between 0 and 1, got "
                f"{self.min_alternative_prob}"
            )
        if self.threshold is not None and not 0.0 < self.threshold <= 1.0:
            raise UserError(f"{spell('threshold')} must be in (0, 1], got {self.threshold}")
        if self.ig_steps < 1:
            raise UserError(f"{spell('ig_steps')} must be at least 1, got {self.ig_steps}")
        if self.maps not in (None, "every", "aligning"):
            raise UserError(f"{spell('maps')} is 'every', 'aligning' or none, got {self.maps!r}")
        return self

    @property
    def draws(self) -> bool:
        """Whether anything read off the attention is asked for."""
        return self.links or self.maps is not None or self.search


class Service:
    """Translate and score with one loaded run, ensemble or export (module docstring).

    One `Translator` per distinct search (made on first use, then kept); `batch_tokens`
    bounds a batch, `max_source_len` lowers the longest source read (`source_limit`).
    """

    def __init__(
        self,
        loaded: LoadedRun | ExportRun,
        *,
        batch_tokens: int = DECODE_BATCH_TOKENS,
        max_source_len: int | None = None,
    ) -> None:
        self.loaded = loaded
        self.vocab = loaded.vocab
        self.model = loaded.model
        self.batch_tokens = batch_tokens
        self.max_source_len = max_source_len
        self.limit = source_limit(loaded.cfg.model, max_source_len)
        self.has_attention = loaded.model.uses_attention
        # Explanations need the model's gradients: a torch module (an export has none). A
        # process that never imported torch holds no torch module, and need not import it.
        torch = sys.modules.get("torch")
        self.explains = torch is not None and isinstance(loaded.model, torch.nn.Module)
        self._translators: dict[tuple, Translator] = {}

    # --- what a request needs -------------------------------------------------------------

    def translator(self, request: Request) -> Translator:
        """The translator of a request's search (its attention choice and threshold too)."""
        weights = self.has_attention and request.draws
        key = (
            request.beam, request.alpha, request.n_best, request.max_len_ratio, weights,
            request.layer, request.head, request.offset, request.threshold,
        )  # fmt: skip
        if key not in self._translators:
            self._translators[key] = Translator(
                self.loaded,
                beam=request.beam,
                alpha=request.alpha,
                n_best=request.n_best,
                max_len_ratio=request.max_len_ratio,
                batch_tokens=self.batch_tokens,
                max_source_len=self.max_source_len,
                align_layer=request.layer,
                align_head=request.head,
                align_offset=request.offset,
                need_weights=weights,
                threshold=request.threshold,
            )
        return self._translators[key]

    def check(self, request: Request, spell: Callable[[str], str] = as_is) -> Translator:
        """The request's translator, once the request and its explanation methods are
        known to fit this run (else `UserError`)."""
        request.check(spell)
        translator = self.translator(request)
        if request.explain:  # the methods (and torch) are loaded only when asked
            from attnmt.explain import check_method

            for method in request.explain:
                check_method(method, self.model, translator.choice)
        return translator

    # --- translating ----------------------------------------------------------------------

    def translate(
        self,
        lines: Sequence[str],
        request: Request,
        *,
        prefixes: Sequence[str | Sequence[int] | None] | None = None,
        first_line: int = 1,
        progress: Any = None,
        on_step: StepHook | None = None,
    ) -> list[Sentence]:
        """One `Sentence` per line: searched, explained and given its alternatives as the
        request asks. `prefixes` (one per line) take the place of `request.prefix`;
        `on_step(index, nodes)` hears each search step (`Translator.translate`)."""
        translator = self.check(request)
        if prefixes is None and request.prefix is not None:
            prefixes = [request.prefix] * len(lines)
        sentences = translator.translate(
            lines,
            first_line=first_line,
            progress=progress,
            prefixes=prefixes,
            on_step=on_step,
            record=request.search,
        )
        self._explain(translator, sentences, request)
        if request.alternatives:
            for sentence in sentences:
                translator.alternatives(
                    sentence, request.alternatives, request.min_alternative_prob
                )
        return sentences

    def records(
        self, sentences: Sequence[Sentence], request: Request, **shown: Any
    ) -> list[SentenceRecord]:
        """Each sentence's record, showing what the request asks (`shown` overrides
        `sentence_record`'s options, e.g. `search=False` where it is written elsewhere)."""
        translator = self.translator(request)
        options = {
            "links": request.links, "maps": request.maps, "threshold": request.threshold,
            "search": request.search, **shown,
        }  # fmt: skip
        return [
            sentence_record(
                s, self.vocab, translator.choice, explanations=s.explanations, **options
            )
            for s in sentences
        ]

    # --- scoring --------------------------------------------------------------------------

    def score(
        self, pairs: Sequence[tuple[str, str]], request: Request, *, first_line: int = 1
    ) -> list[SentenceRecord | None]:
        """The record of each (source, target) pair read by the model (forced decoding):
        its score as the search ranks (`request.alpha`), log-probabilities, the attention
        while reading the target and the request's explanations, as a translation's. A pair
        whose two sides are empty gives None. Texts are taken as given (a face cleans
        them first); sources longer than the run reads are cut (`truncated`)."""
        translator = self.check(request)
        todo, ids = [], []
        for n, (source, target) in enumerate(pairs, start=first_line):
            if not (source or target):
                continue
            encoded = self.vocab.src.encode(source)
            cut = len(encoded) > self.limit
            todo.append((Sentence(n, source, encoded[: self.limit], truncated=cut), target))
            ids.append((todo[-1][0].ids, self.vocab.tgt.encode(target)))
        weights = self.has_attention and request.draws
        if self.explains:  # a torch module: one teacher-forced pass a batch
            from attnmt.decoding.scoring import score_pairs

            scored = score_pairs(
                self.model, ids, alpha=request.alpha, need_weights=weights,
                batch_tokens=self.batch_tokens,
            )  # fmt: skip
        else:  # an export (no torch): its steps read each target, one pair at a time
            scored = score_by_steps(self.model, ids, alpha=request.alpha, need_weights=weights)
        for method in request.explain:
            for (sentence, _), why in zip(todo, self._explained(ids, method, request), strict=True):
                sentence.explanations.append(why)
        records: list[SentenceRecord | None] = [None] * len(pairs)
        for (sentence, target), (_, tgt_ids), one in zip(todo, ids, scored, strict=True):
            records[sentence.line - first_line] = scored_record(
                sentence,
                target,
                tgt_ids,
                one,
                self.vocab,
                translator.choice,
                links=request.links,
                maps=request.maps,
                threshold=request.threshold,
                explanations=sentence.explanations,
            )
        return records

    # --- explaining -----------------------------------------------------------------------

    def _explain(
        self, translator: Translator, sentences: Sequence[Sentence], request: Request
    ) -> None:
        """Each method's explanation of each best translation, kept in order in
        `sentence.explanations` (one forced-decoding batch a method)."""
        done = [s for s in sentences if s.translation is not None]
        if not request.explain or not done:
            return
        pairs = [(s.ids, s.translation.tokens) for s in done]
        for method in request.explain:
            for sentence, why in zip(done, self._explained(pairs, method, request), strict=True):
                sentence.explanations.append(why)

    def _explained(self, pairs, method: str, request: Request) -> list:
        from attnmt.explain.methods import explain  # gradients: torch, loaded on use

        if not pairs:
            return []
        return explain(
            self.model,
            pairs,
            method,
            self.translator(request).choice,
            ig_steps=request.ig_steps,
            batch_tokens=self.batch_tokens,
        )
