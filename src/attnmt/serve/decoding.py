"""A served run: what it is (`ModelInfo`) and how its lines become `LineResult`s.

The decoding is the library's `Service` (attnmt.service), the one `attnmt translate` and
`attnmt.load(...).translate` use: the app parses a request into its `Request`, this module
checks each line, calls the service and answers its records. A bad line is answered on its
own (`error`), never failing the others. A run that reads images gets its lines as image
texts and answers `ImageResult`s (`attnmt.serve.images`), where an explanation method's
matrix of each reading takes the attention's place.
Before any of it, `RunDecoder.over_budget` counts the request's work against the server's
budget (`attnmt.serve.budget`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnmt.config import family
from attnmt.data.grid import cell_boxes
from attnmt.decoding.attention_choice import labels
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.translator import Translator
from attnmt.errors import CheckpointError, UserError
from attnmt.explain.names import EXPORT_EXPLAINS, METHODS
from attnmt.rundir import RunDir
from attnmt.serve.budget import LineSize, refusal
from attnmt.serve.schemas import (
    MAX_BEAM,
    AttentionInfo,
    BestDev,
    ImageResult,
    Limits,
    LineResult,
    ModelInfo,
    ScoreResult,
)
from attnmt.serve.stream import step_event
from attnmt.serve.validation import clean_line
from attnmt.serve.worker import Options
from attnmt.service import Request, Service

if TYPE_CHECKING:
    from attnmt.decoding.runs import LoadedRun
    from attnmt.runtime.runs import ExportRun


@dataclass(frozen=True)
class Settings:
    """The server's limits and defaults (the `attnmt serve` flags)."""

    beam: int = SearchOptions.beam
    max_body_bytes: int = 1 << 20
    max_lines: int = 256
    max_line_chars: int = 2000
    queue_size: int = 64
    batch_lines: int = 64
    timeout: float = 60.0
    api_key: str | None = None
    # A request's compute (attnmt.serve.budget): the largest allowed takes the quickstart
    # model under a minute, the timeout, on one thread of a busy Xeon (docs/serving.md).
    max_search_steps: int = 1 << 17  # beam x longest outputs: beam 5 on 256 30-subword lines
    max_explain_passes: int = 1 << 12  # integrated gradients at 32 steps on 4 such lines


class RunDecoder:
    """Translate lines with one loaded run through its `Service` (one `Translator` per
    search, made on use).

    A run that reads images (`images` is its `ImageRun`, else None) decodes image texts
    (`attnmt.data.images.canvas_text`) into `ImageResult`s instead.
    """

    def __init__(self, name: str, loaded: LoadedRun | ExportRun, settings: Settings) -> None:
        self.name = name
        self.loaded = loaded
        self.settings = settings
        self.service = Service(loaded)
        self.has_attention = loaded.model.uses_attention
        self.images = None
        if loaded.model.reads_images:  # canvases and pixel maps: torch, a run's own
            from attnmt.serve.images import ImageRun

            self.images = ImageRun(loaded)
        self.family = family(loaded.cfg.model.name)
        self.default = self._translator(settings.beam).choice
        self.explain_methods = [m for m in METHODS if self.service.explains and self._fits(m)]

    @property
    def input(self) -> str:
        """What the run reads: "text" or "image"."""
        return "text" if self.images is None else "image"

    def _translator(self, beam: int) -> Translator:
        """The run's translator for a beam size (an image run's readings stop at its
        model's `max_output_tokens`)."""
        return self.service.translator(Request(beam=beam))

    def _fits(self, method: str) -> bool:
        from attnmt.explain import check_method  # torch: a run's, never an export's

        try:
            check_method(method, self.loaded.model, self.default)
        except UserError:
            return False
        return True

    def check_explain(self, method: str | None) -> None:
        """`UserError` (the library's sentence) when `method` cannot explain this run."""
        if method is not None and method not in self.explain_methods:
            if not self.service.explains:  # the library's sentence, without torch
                raise UserError(EXPORT_EXPLAINS)
            from attnmt.explain import check_method

            check_method(method, self.loaded.model, self.default)

    # --- what the run is -----------------------------------------------------------------

    def info(self) -> ModelInfo:
        cfg, loaded = self.loaded.cfg, self.loaded
        attention = None
        if self.has_attention and self.family.composed_attention:  # score x scope x mode
            local = cfg.model.scope != "global"
            attention = AttentionInfo(
                score=cfg.model.attention,
                scope=cfg.model.scope,
                mode=cfg.model.mode,
                window=cfg.model.window if local else None,
            )
        return ModelInfo(
            name=self.name,
            model=cfg.model.name,
            input=self.input,
            image=None if self.images is None else self.images.info(),
            attention=attention,
            has_attention=self.has_attention,
            layers=cfg.model.layers,
            heads=cfg.model.heads if self.family.transformer else None,
            source_language=_side(cfg.data, "src", images=self.images is not None),
            target_language=_side(cfg.data, "tgt", images=self.images is not None),
            parameters=getattr(loaded.model, "parameter_count", None)  # an ONNX export's
            or sum(p.numel() for p in loaded.model.parameters()),
            step=loaded.step,
            checkpoint=loaded.checkpoint.name,
            best_dev=_best_dev(loaded),
            beam=self.settings.beam,
            explain_methods=self.explain_methods,
            limits=Limits(
                max_body_bytes=self.settings.max_body_bytes,
                max_lines=self.settings.max_lines,
                max_line_chars=self.settings.max_line_chars,
                max_source_tokens=self._translator(self.settings.beam).limit,
                max_beam=MAX_BEAM,
                max_search_steps=self.settings.max_search_steps,
                max_explain_passes=self.settings.max_explain_passes,
            ),
        )

    # --- the budget ----------------------------------------------------------------------

    def over_budget(self, lines: Sequence[Any], options: Options) -> str | None:
        """Why decoding `lines` with `options` is over the server's compute budget, as one
        sentence saying what to lower (`attnmt.serve.budget`); None when it is within."""
        settings = self.settings
        if options.explain is None:  # a search only: its bound needs no subwords counted
            if options.task == "score":
                return None
            searches = options.beam * (1 + (options.request.alternatives or 0))  # each completed
            if searches * len(lines) * self._output(None) <= settings.max_search_steps:
                return None
        cells, what = None, "pairs" if options.task == "score" else "lines"
        if self.images is not None:
            cells, what = len(cell_boxes(self.images.height, self.images.width)), "images"
        return refusal(
            options,
            self._sizes(lines, options),
            max_search_steps=settings.max_search_steps,
            max_explain_passes=settings.max_explain_passes,
            what=what,
            cells=cells,
        )

    def _output(self, source: int | None) -> int:
        """The longest output the search allows a source of `source` subwords (None: of
        the longest source this run reads), EOS included (`hypotheses.max_lengths`)."""
        translator = self._translator(self.settings.beam)
        if source is None:
            source = translator.limit
        longest = int((source + 1) * translator.options.max_len_ratio) + 5
        cap = self.loaded.model.max_output_tokens
        return longest if cap is None else min(longest, cap)

    def _sizes(self, lines: Sequence[Any], options: Options) -> list[LineSize]:
        """The budget's view of each line that will be decoded (a line answered with an
        error of its own, or an empty one, is not)."""
        if self.images is not None:  # the reading's length is unknown: its longest
            pixels = self.images.height * self.images.width
            return [LineSize(pixels, self._output(None), self._output(None)) for _ in lines]
        translator, chars = self._translator(self.settings.beam), self.settings.max_line_chars
        sizes = []
        for line in lines:
            source, target = line if options.task == "score" else (line, None)
            text, error = clean_line(source, chars)
            if error is not None or (target is None and not text):
                continue
            length = min(len(translator.vocab.src.encode(text)), translator.limit)
            explained = length + 1  # a translation is estimated as long as its source
            if target is not None:
                target, error = clean_line(target, chars)
                if error is not None:
                    continue
                explained = len(translator.vocab.tgt.encode(target)) + 1
            sizes.append(LineSize(length, self._output(length), explained))
        return sizes

    def source_of(self, line: str) -> dict[str, Any]:
        """A line as the run will read it: the text, its subwords (and </s>), and whether it
        is cut (the start of a streamed answer)."""
        translator = self._translator(self.settings.beam)
        text, _ = clean_line(line, self.settings.max_line_chars)
        ids = translator.vocab.src.encode(text) if text else []
        return {
            "source": text,
            "source_pieces": labels(translator.vocab.src, ids[: translator.limit]),
            "truncated": len(ids) > translator.limit,
        }

    # --- translating ---------------------------------------------------------------------

    def __call__(
        self, lines: Sequence[Any], options: Options
    ) -> list[LineResult] | list[ImageResult] | list[ScoreResult]:
        if options.task == "score":
            return self.score(lines, options)
        request = options.request
        if self.images is not None:  # image texts, made by the app from checked images
            translator = self._translator(request.beam)
            sentences = translator.translate(lines)
            if options.explain is not None:
                self.images.explain(sentences, options.explain, self.default, options.ig_steps)
            return self.images.results(translator, sentences, weights=request.maps is not None)
        cleaned = [clean_line(line, self.settings.max_line_chars) for line in lines]
        good = [i for i, (_, error) in enumerate(cleaned) if error is None]
        on_step = None
        if options.sink is not None:  # a streamed answer: each step's nodes as they come
            sink, translator = options.sink, self.service.translator(request)
            on_step = lambda _, nodes: sink.put(  # noqa: E731
                "step", step_event(translator, nodes)
            )
        sentences = self.service.translate([cleaned[i][0] for i in good], request, on_step=on_step)
        results = [
            LineResult(line=n + 1, source=text, translation="", error=error)
            for n, (text, error) in enumerate(cleaned)
        ]
        for i, record in zip(good, self.service.records(sentences, request), strict=True):
            results[i] = LineResult(**{**record, "line": i + 1})
        return results

    def score(self, pairs: Sequence[tuple[str, str]], options: Options) -> list[ScoreResult]:
        """Forced decoding of (source, target) pairs (`Service.score`): the same numbers
        and maps as a translation, of the target given."""
        results, todo = [], []
        for n, (source, target) in enumerate(pairs, start=1):
            (src, bad_src), (tgt, bad_tgt) = (
                clean_line(text, self.settings.max_line_chars) for text in (source, target)
            )
            error = (bad_src and f"source: {bad_src}") or (bad_tgt and f"target: {bad_tgt}")
            results.append(ScoreResult(line=n, source=src, translation=tgt, error=error or None))
            if not error:
                todo.append((n, (src, tgt)))
        records = self.service.score([pair for _, pair in todo], options.request)
        for (n, _), record in zip(todo, records, strict=True):
            if record is not None:  # two empty sides: an empty answer, as a blank line's
                record.pop("target")  # a served score's `translation` is the target given
                results[n - 1] = ScoreResult(**{**record, "line": n})
        return results


def _side(data, side: str, *, images: bool = False) -> str:
    """What a side's language is called: the corpus version or suffix, else the task."""
    if images:
        return f"{data.corpus} images" if side == "src" else "digits"
    if data.corpus in ("bible", "files"):
        return getattr(data, side)
    if data.corpus == "alignments":
        return "grc" if side == "src" else "en"
    if data.corpus == "tsv":
        return "tsv " + ("source" if side == "src" else "target")
    return f"{data.corpus} task"


def _best_dev(loaded: LoadedRun) -> BestDev | None:
    """The best validation of the run (`RunDir.best`), if it has one."""
    try:
        best = RunDir(loaded.run_dir).best()
        if best is None:
            return None
        return BestDev(
            metric=loaded.cfg.train.early_stopping_metric,
            value=float(best["metric"]),
            step=int(best["step"]),
        )
    except (CheckpointError, ValueError, KeyError, TypeError):
        return None
