"""`attnmt.load` and the `Model` it returns: translate, score, align and compare from
Python, each result drawing itself in a notebook (`attnmt.views.results`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from attnmt.decoding.attention_choice import labels
from attnmt.decoding.loading import open_model
from attnmt.decoding.records import given_record, sentence_record
from attnmt.decoding.translator import Sentence, Translator, source_limit
from attnmt.errors import CheckpointError, UserError
from attnmt.rundir import RunDir
from attnmt.service import Request, Service
from attnmt.views.results import Comparison, Translated, Translations, show_figures_inline

show_figures_inline()  # `.plot()` figures draw in a notebook without `%matplotlib inline`


def _request(explain: str | Sequence[str] | None, options: dict[str, Any]) -> Request:
    """The service's request of a call's keyword options (`UserError` for one it has not,
    or an impossible one)."""
    methods = (explain,) if isinstance(explain, str) else tuple(explain or ())
    known = {f.name for f in fields(Request)} - {"explain"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UserError(
            f"unknown option {unknown[0]!r}; the options are {', '.join(sorted(known))}"
        )
    if isinstance(options.get("prefix"), list):  # target subword ids
        options = {**options, "prefix": tuple(options["prefix"])}
    return Request(explain=methods, **options).check()


def _blank(line: int, pair: tuple[str, str]) -> dict[str, Any]:
    """The record of a pair with two empty sides: nothing was read."""
    return sentence_record(Sentence(line, pair[0]), None, None)


def _lines(text: str | Sequence[str], what: str) -> tuple[list[str], bool]:
    """(lines, whether one string was given)."""
    if isinstance(text, str):
        return [text], True
    if not isinstance(text, Sequence) or not all(isinstance(t, str) for t in text):
        raise UserError(f"{what} must be a string or a list of strings")
    return list(text), False


class Model:
    """A loaded run (or an ensemble) ready to translate, score and align.

    `config` is the run's `attnmt.config.Config`, `metrics` its training log (one dict per
    event, `RunDir.metrics`), `best` its best validation (`RunDir.best`) or None.
    """

    def __init__(self, loaded, name: str | None = None) -> None:
        self.loaded = loaded
        self.name = name or loaded.run_dir.name
        self._service: Service | None = None

    config = property(lambda self: self.loaded.cfg)
    run_dir = property(lambda self: self.loaded.run_dir)
    checkpoint = property(lambda self: self.loaded.checkpoint)
    step = property(lambda self: self.loaded.step)
    vocab = property(lambda self: self.loaded.vocab)
    module = property(lambda self: self.loaded.model)  # the torch.nn.Module

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return RunDir(self.run_dir).metrics()

    @property
    def best(self) -> dict[str, Any] | None:
        try:
            return RunDir(self.run_dir).best()
        except CheckpointError:
            return None

    def examples(self, split: str = "test") -> list:
        """The run's own dev or test sentences, as `attnmt evaluate` decodes them: each with
        `.id` (a verse reference such as "John 6:47" on the Bible), `.src`, `.tgt` and
        `.refs` (further references). Read from the corpus the run was trained on (from the
        data cache when it is there; nothing is written)."""
        from attnmt.data.preparation import decoding_split

        if split not in ("dev", "test"):
            raise UserError(f"unknown split '{split}'; examples() gives 'dev' or 'test'")
        return list(decoding_split(self.config.data, split, self.vocab))

    def __repr__(self) -> str:
        cfg = self.config
        members = self.loaded.members
        what = f"ensemble of {len(members)}" if members else cfg.model.name
        return f"<attnmt.Model {self.name}: {what}, step {self.step}, {self.checkpoint}>"

    # --- translating ----------------------------------------------------------------------

    def translator(self, **options):
        """The `attnmt.decoding.translator.Translator` under `translate` (options as its own)."""
        return Translator(self.loaded, **options)

    @property
    def service(self) -> Service:
        """The `attnmt.service.Service` every face translates and scores through."""
        if self._service is None:
            self._service = Service(self.loaded)
        return self._service

    def translate(
        self,
        text: str | Sequence[str],
        *,
        explain: str | Sequence[str] | None = None,
        **options: Any,
    ) -> Translated | Translations:
        """Translate one sentence (a `Translated`) or a list (`Translations`).

        Options are those of `attnmt.service.Request`, as `attnmt translate`'s
        (docs/decoding.md): `beam`, `n_best`, `alpha` (the length penalty),
        `max_len_ratio`, `layer`/`head` (the Transformer attention that aligns words),
        `threshold`. `explain` adds one or more explanation methods
        (attnmt.explain.METHODS), each drawn beside the attention as decoded, the first
        linking the words; `ig_steps` is integrated gradients' step count.

        `search=True` keeps the whole search (`.search`, drawn as a tree under the
        heatmap); `prefix` (text, or target subword ids) forces the start of every
        translation; `alternatives=N` adds the N likeliest next subwords after the prefix,
        each completed by the search (`.alternatives`; below `min_alternative_prob` left
        out, the likeliest always kept).
        """
        if self.loaded.model.reads_images:
            raise UserError(
                "translate() reads text; this run reads images, its attention over the "
                "canvas's grid: looks(index) draws it, attnmt.evaluate(model) reads canvases"
            )
        lines, single = _lines(text, "text")
        request = _request(explain, options)
        sentences = self.service.translate(lines, request)
        records = self.service.records(sentences, request)
        items = [Translated(record, self.name) for record in records]
        return items[0] if single else Translations(items)

    # --- scoring and aligning -------------------------------------------------------------

    def score(
        self,
        source: str | Sequence[str],
        target: str | Sequence[str],
        *,
        explain: str | Sequence[str] | None = None,
        **options: Any,
    ) -> Translated | Translations:
        """How likely the model finds each target given its source (forced decoding): each
        result's `score` (length-normalised as the search does, `alpha`), `log_prob`, the
        `token_log_probs`, and the attention while reading the target (its view); options
        and `explain` as `translate`'s."""
        if self.loaded.model.reads_images:
            raise UserError("score() reads text pairs; this run's model reads images")
        sources, single = _lines(source, "source")
        targets, single_target = _lines(target, "target")
        if single != single_target or len(sources) != len(targets):
            raise UserError(
                f"give as many targets as sources ({len(sources)} sources, {len(targets)} "
                "targets): two strings, or two lists of the same length"
            )
        pairs = [
            (" ".join(s.split()), " ".join(t.split()))
            for s, t in zip(sources, targets, strict=True)
        ]
        request = _request(explain, options)
        records = self.service.score(pairs, request)
        items = [
            Translated(record if record is not None else _blank(n, pair), self.name)
            for n, (pair, record) in enumerate(zip(pairs, records, strict=True), start=1)
        ]
        return items[0] if single else Translations(items)

    def align(
        self,
        source: str | Sequence[str],
        target: str | Sequence[str],
        *,
        layer: int | None = None,
        head: int | None = None,
        threshold: float | None = None,
    ) -> Translated | Translations:
        """Word alignments of given sentence pairs: the model reads each target (forced
        decoding) and each target word is linked to the source word its attention weighs
        most (plus any above `threshold`), as `attnmt align --method attention` does.
        Each result's `links` are (source word, target word) pairs, 0-based."""
        if not self.loaded.model.uses_attention:
            raise UserError(
                f"this run's model ({self.config.model.name}) has no attention, so it has no "
                "alignments"
            )
        return self.score(source, target, layer=layer, head=head, threshold=threshold)

    def looks(self, index: int = 0, split: str = "test"):
        """An image run's canvas `index` of `split`, read greedily: one panel per output
        step, its attention spread over the pixels, the true digit's box dashed (a glimpse
        model's path drawn on it) — Xu et al.'s Fig. 2–3 as a matplotlib figure."""
        if not self.loaded.model.reads_images:
            raise UserError("looks() draws an image run's attention; this run reads text")
        from attnmt.evaluation.vision import canvas_looks  # torch and the canvases

        return canvas_looks(self.loaded, index, split)

    def self_attention(self, source: str) -> Translated:
        """The encoder's self-attention over `source`, in the view of a translation: one
        map per encoder layer and head, rows and columns both the source's subwords (its
        </s> last). A Transformer's; the recurrent encoders do not attend."""
        from attnmt.decoding.scoring import self_attention_weights  # torch

        (text,), _ = _lines(source, "source")
        text = " ".join(text.split())
        ids = self.vocab.src.encode(text)[: source_limit(self.config.model)]
        pieces = labels(self.vocab.src, ids)
        maps = {
            (layer, head): w
            for layer, weights in enumerate(self_attention_weights(self.loaded.model, ids), 1)
            for head, w in enumerate(weights.numpy(), 1)
        }
        shown = show(maps, pieces, pieces, title=self.name, links=False)
        shown.records[0]["translation"] = "(encoder self-attention)"
        shown.records[0]["source"] = text
        return shown

    def compare(self, other: Model, text: str | Sequence[str], **options) -> Comparison:
        """The same text translated by this model and `other`, side by side."""
        return compare(
            self.translate(text, **options),
            other.translate(text, **options),
            names=[self.name, other.name],
        )


def load(
    path: str | Path | Sequence[str | Path],
    *,
    device: str = "auto",
    quantize: str | None = None,
    ensemble_mode: str = "log-linear",
    layer: int | None = None,
    head: int | None = None,
    name: str | None = None,
) -> Model:
    """A trained run as a `Model`: a run directory (its best checkpoint, else its latest),
    one checkpoint directory (`RUN/checkpoints/step-N`, or one `attnmt average` wrote), or
    a list of runs decoded as an ensemble (`ensemble_mode`: log-linear or linear), or an
    ONNX export (`attnmt export RUN --format onnx`: decoded by onnxruntime, no torch needed;
    explanations need the run).
    `device` is "auto" (a GPU where there is one), "cpu", "cuda", ...; `quantize="int8"`
    decodes with PyTorch's dynamic int8 on the CPU."""

    paths = [path] if isinstance(path, (str, Path)) else list(path)
    loaded = open_model(
        paths, device=device, quantize=quantize, ensemble_mode=ensemble_mode, layer=layer,
        head=head,
    )  # fmt: skip
    if name is None and len(paths) > 1:
        name = " + ".join(Path(p).name for p in paths)
    return Model(loaded, name)


def show(
    weights: Any,
    source: Sequence[str],
    target: Sequence[str],
    *,
    scale: str = "weights",
    title: str | None = None,
    links: bool = True,
) -> Translated:
    """Attention weights of your own in the view every result draws: `weights` one (T, S)
    matrix (rows the `target` words, columns the `source` words), or a dict of them by
    name (the view's map selector; a key (layer, head) is named "encoder layer L, head H").
    `scale` "weights" (0..1) or "signed" (attributions). With `links`, each target word is
    linked to the source word it weighs most (the view's outlined cells)."""
    named = weights if isinstance(weights, dict) else {"attention": weights}
    maps, placed = {}, {}
    for key, matrix in named.items():
        array = np.asarray(matrix, dtype=np.float64)
        if array.shape != (len(target), len(source)):
            raise UserError(
                f"weights {key!r} are {array.shape}; they must be (target words, source words) "
                f"= ({len(target)}, {len(source)})"
            )
        name = str(key)
        if isinstance(key, tuple):
            name = f"encoder layer {key[0]}, head {key[1]}"
            placed[name] = key
        maps[name] = array
    record = given_record(maps, source, target, scale=scale, links=links, placed=placed)
    return Translated(record, title)


def compare(*results: Translated | Translations, names: Sequence[str] | None = None) -> Comparison:
    """Results of the same sentences from different runs, side by side in one view."""
    if len(results) < 2:
        raise UserError("compare() takes two results or more")
    if names is None:
        names = [
            (r.titles[0] if r.titles and r.titles[0] else f"run {i + 1}")
            for i, r in enumerate(results)
        ]
    return Comparison(results, names)
