"""Image runs behind `attnmt serve`: what they read (`ImageInfo`), what they read in an
image and where they looked (`ImageResult`), and their test canvases as examples.

An image reaches the model as the pipeline's "sentence" of pixel tokens
(`attnmt.data.images.canvas_text`), so text and images share the `Translator`, the worker
queue and its batches; only the answer differs. Show-Attend-Tell attends over grid cells
(each 4x4 pixels) and the glimpse model over pixels: both become maps over the pixels
(`attnmt.data.grid.pixel_map`), so a client draws every model's attention alike.
An explanation method (`explain`) replaces the attention the same way: occlusion and
Show-Attend-Tell's attention methods give a value per grid cell, the gradient methods (and
the glimpses' attention) one per pixel.

    run = ImageRun(loaded)
    texts = [canvas_text(np.array(image)) for image in images]   # what the worker decodes
    results = run.results(translator, translator.translate(texts), weights=True)

Shapes legend: T decoder steps (the symbols read, then EOS), G grid cells, H, W image
height and width, N glimpses.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from attnmt.data.grid import DOWNSAMPLE, MAX_SYMBOLS, grid_size
from attnmt.data.images import Canvas, CanvasVocab
from attnmt.decoding.attention_choice import AttentionChoice
from attnmt.decoding.records import image_record
from attnmt.decoding.runs import LoadedRun
from attnmt.decoding.translator import Sentence, Translator
from attnmt.evaluation.vision import glimpse_path, split_canvases
from attnmt.explain import explain
from attnmt.serve.schemas import MAX_LEVEL, ImageExample, ImageInfo, ImageResult

MAX_DIGITS = MAX_SYMBOLS  # symbols read in one image before the reading is cut (tasks: <= 5)
SPLIT = "test"  # the split examples come from: never trained on, never chosen a checkpoint


class ImageRun:
    """The image side of a served run: its size, its answers, its test canvases."""

    def __init__(self, loaded: LoadedRun) -> None:
        src = loaded.vocab.src
        if not isinstance(src, CanvasVocab):
            raise TypeError(f"run {loaded.run_dir} does not read images (its source is {src!r})")
        self.loaded = loaded
        self.height, self.width = src.height, src.width
        self.has_glimpses = hasattr(loaded.model, "glimpse_path")
        self._canvases: list[Canvas] | None = None
        self._lock = threading.Lock()

    def info(self) -> ImageInfo:
        cfg = self.loaded.cfg
        grid = None
        if self.loaded.model.uses_attention and not self.has_glimpses:  # over the CNN's cells
            grid = grid_size(self.height, self.width)
        return ImageInfo(
            task=cfg.data.corpus,
            height=self.height,
            width=self.width,
            min_level=0,
            max_level=MAX_LEVEL,
            grid=grid,
            cell=DOWNSAMPLE if grid else None,
            glimpses=cfg.model.glimpses if self.has_glimpses else None,
            max_digits=MAX_DIGITS,
            examples=cfg.data.synthetic_dev_size,
        )

    # --- reading ---------------------------------------------------------------------------

    def explain(
        self, sentences: Sequence[Sentence], method: str, choice: AttentionChoice, ig_steps: int
    ) -> None:
        """Give each decoded image `method`'s matrix of what it read in place of its weights
        (forced decoding of the reading): (T, G) grid cells or (T, H·W) pixels."""
        pairs = [(s.ids, s.translation.tokens) for s in sentences]  # an image is never blank
        done = explain(
            self.loaded.model, pairs, method, choice, ig_steps=ig_steps, image_height=self.height
        )
        for sentence, why in zip(sentences, done, strict=True):
            sentence.translation.weights = why.matrix
            sentence.explanations = [why]

    def results(
        self, translator: Translator, sentences: Sequence[Sentence], *, weights: bool
    ) -> list[ImageResult]:
        """One `ImageResult` per decoded image, in order (`image` counts from 1)."""
        return [
            self._result(translator, sentence, index=i + 1, weights=weights)
            for i, sentence in enumerate(sentences)
        ]

    def _result(
        self, translator: Translator, sentence: Sentence, *, index: int, weights: bool
    ) -> ImageResult:
        """A reading's answer: its record (`attnmt.decoding.records.image_record`)."""
        path = None
        if weights and self.has_glimpses:
            path = glimpse_path(self.loaded.model, sentence.ids)  # (N, 2)
        record = image_record(
            sentence, translator.vocab, image=index, height=self.height, width=self.width,
            longest=MAX_DIGITS, maps=weights, glimpses=path,
        )  # fmt: skip
        return ImageResult(**record)

    # --- examples ---------------------------------------------------------------------------

    def examples(self, start: int, count: int) -> tuple[int, list[ImageExample]]:
        """The split's size and its canvases start, start + 1, ... (at most `count`).

        The canvases are made again from the run's data config on the first call (about a
        second: the scans are loaded), then kept.
        """
        canvases = self._split()
        chosen = range(start, min(len(canvases), start + count))
        return len(canvases), [self._example(i, canvases[i]) for i in chosen]

    def _split(self) -> list[Canvas]:
        with self._lock:
            if self._canvases is None:
                self._canvases = split_canvases(self.loaded.cfg.data, SPLIT)
            return self._canvases

    def _example(self, index: int, canvas: Canvas) -> ImageExample:
        return ImageExample(
            index=index,
            id=f"{self.loaded.cfg.data.corpus}.{SPLIT}:{index}",
            image=np.asarray(canvas.pixels, dtype=int).tolist(),  # (H, W)
            digits=" ".join(map(str, canvas.digits)),
            boxes=[tuple(int(v) for v in box) for box in canvas.boxes],
        )
