"""Translating sentences with a model, and the `attnmt translate` command.

`translate_ids` batches source id lists by length, decodes them (greedy or beam, with the
attention weights when asked) and detokenizes, keeping the input order. It is used by
validation during training and by the `translate`, `evaluate` and `plot` commands.

`attnmt translate RUN [FILE|-]` is a Unix filter: one output line per input line, in order,
an empty line for an empty line (see `add_arguments` and docs/decoding.md for the flags
and the output formats).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import torch
from torch import Tensor
from tqdm import tqdm

from attnmt.data.alignments import format_pharaoh
from attnmt.decode import EOS, Hypothesis, beam_search, greedy
from attnmt.decode_options import (
    add_decoding_arguments,
    check_decoding_arguments,
    pick_device,
    source_limit,
)
from attnmt.errors import DataError, UserError

PAD = 0


@dataclass
class Translation:
    """One translated sentence: text, token ids, score and (when asked) attention weights."""

    text: str
    tokens: list[int]
    score: float
    weights: Tensor | None = None  # (T, S) RNN, (T, L, H, S) Transformer
    nbest: list[Hypothesis] | None = None
    log_prob: float | None = None  # log P(tokens, EOS | source), before the length penalty


def pad_batch(sequences: Sequence[Sequence[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad id lists into a (B, S) tensor and its mask (True = real token)."""
    width = max(1, max(len(s) for s in sequences))
    ids = torch.full((len(sequences), width), PAD, dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    mask = torch.arange(width)[None, :] < torch.tensor([len(s) for s in sequences])[:, None]
    return ids.to(device), mask.to(device)


def batches_by_length(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Group sentence indices into batches of similar length under a padded-token budget."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = max(lengths[index], *(lengths[i] for i in current)) if current else lengths[index]
        if current and width * (len(current) + 1) > max_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


@torch.no_grad()
def translate_ids(
    model: torch.nn.Module,
    sources: Sequence[Sequence[int]],
    decode_text,
    *,
    beam_size: int = 1,
    alpha: float = 0.6,
    n_best: int = 1,
    max_len_ratio: float = 2.0,
    need_weights: bool = False,
    max_tokens: int = 4000,
    progress=None,
) -> list[Translation]:
    """Translate source id lists (without EOS: it is added, as the batcher does) in batches.

    `decode_text(ids) -> str` detokenizes; `progress` (a tqdm bar or None) is advanced by
    the number of sentences in each batch. The output keeps the input order.

    Shapes:
        Translation.weights (and those of `nbest`): (T, S) RNN, (T, L, H, S) Transformer,
        T = len(tokens) + 1 and S = len(source) + 1 (the EOS on each side), padding cut off.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    results: list[Translation | None] = [None] * len(sources)
    # Beam search multiplies the rows by K: keep the padded-token budget per beam row.
    budget = max(1, max_tokens // max(1, beam_size))
    sources = [[*s, EOS] for s in sources]
    try:
        for batch in batches_by_length([len(s) for s in sources], budget):
            src, src_mask = pad_batch([sources[i] for i in batch], device)
            if beam_size == 1 and n_best == 1:
                hyps = [
                    [h]
                    for h in greedy(
                        model, src, src_mask, max_len_ratio=max_len_ratio, need_weights=need_weights
                    )
                ]
            else:
                hyps = beam_search(
                    model,
                    src,
                    src_mask,
                    beam_size=beam_size,
                    alpha=alpha,
                    n_best=n_best,
                    max_len_ratio=max_len_ratio,
                    need_weights=need_weights,
                )
            for index, nbest in zip(batch, hyps, strict=True):
                # Weights cover the batch's padded width: keep this sentence's S columns.
                width = len(sources[index])
                nbest = [_trim(h, width) for h in nbest]
                best = nbest[0]
                results[index] = Translation(
                    text=decode_text(best.tokens),
                    tokens=best.tokens,
                    score=best.score,
                    weights=best.weights,
                    nbest=nbest if n_best > 1 else None,
                    log_prob=best.log_prob,
                )
            if progress is not None:
                progress.update(len(batch))
    finally:
        model.train(was_training)
    return [r for r in results if r is not None]


def _trim(hyp: Hypothesis, width: int) -> Hypothesis:
    """The hypothesis with its weights cut to the first `width` source positions."""
    if hyp.weights is None or hyp.weights.shape[-1] == width:
        return hyp
    return replace(hyp, weights=hyp.weights[..., :width].clone())


# --------------------------------------------------------------------------------------
# `attnmt translate RUN [FILE|-]`
# --------------------------------------------------------------------------------------

CHUNK_LINES = 256  # lines decoded together: output streams, and weights stay bounded


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Translate text, one sentence per line: one output line per input line, in order "
        "(an empty line gives an empty line). See docs/decoding.md."
    )
    parser.add_argument(
        "run",
        metavar="RUN",
        help="a run directory (its best checkpoint, else the latest) or one "
        "checkpoint directory in RUN/checkpoints/",
    )
    parser.add_argument(
        "input",
        nargs="?",
        default="-",
        metavar="FILE",
        help="UTF-8 text, one sentence per line ('-' or nothing: standard input)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the translations here instead of standard output",
    )
    parser.add_argument(
        "--n-best",
        type=int,
        default=1,
        metavar="N",
        help="print the N best hypotheses (needs --beam >= N): Moses n-best "
        "lines 'i ||| translation ||| score' (with --alignments json: an nbest list)",
    )
    parser.add_argument(
        "--interactive",
        action="store_true",
        help="a prompt: translate each line typed as soon as it is entered; Ctrl-D ends",
    )
    add_decoding_arguments(parser)
    group = parser.add_argument_group("alignments and plots")
    group.add_argument(
        "--alignments",
        choices=("pharaoh", "json"),
        help="pharaoh: 'translation<TAB>links' lines, links as 'i-j' word "
        "pairs; json: one JSON object per line with words, links and the "
        "word- and subword-level attention",
    )
    group.add_argument(
        "--threshold",
        type=float,
        default=None,
        metavar="X",
        help="also link a target word to every source word with at least "
        "this much of its attention (one-to-many links)",
    )
    group.add_argument(
        "--plot",
        metavar="DIR",
        help="draw each sentence's attention into DIR (line-N.png/.svg) with "
        "its plot data (line-N.npz, for `attnmt plot --from`)",
    )


def run(args: argparse.Namespace) -> int:
    from attnmt.data.files import read_lines
    from attnmt.runs import load_run

    check_decoding_arguments(args)
    if args.threshold is not None and not 0.0 < args.threshold <= 1.0:
        raise UserError(f"--threshold must be in (0, 1], got {args.threshold}")
    if args.interactive and args.input != "-":
        raise UserError("--interactive reads standard input; leave out the FILE argument")
    # A terminal on standard input and no file: a person is typing, so prompt.
    interactive = args.interactive or (args.input == "-" and sys.stdin.isatty())
    loaded = load_run(args.run, device=pick_device(args.device))
    session = _Session(loaded, args)
    # Read everything before opening the output, so `-o` may name the input file.
    lines = [] if interactive else read_lines(args.input)
    with _open_output(args.output) as out:
        if interactive:
            session.interactive(out)
            return 0
        bar = tqdm(
            total=sum(1 for line in lines if line.strip()),
            unit="sent",
            file=sys.stderr,
            dynamic_ncols=True,
            disable=args.input == "-" or not sys.stderr.isatty(),
        )
        with bar:
            for start in range(0, len(lines), CHUNK_LINES):
                chunk = lines[start : start + CHUNK_LINES]
                for text in session.translate(chunk, first_line=start + 1, progress=bar):
                    out.write(text + "\n")
                out.flush()
    session.report_truncated()
    return 0


@contextmanager
def _open_output(path: str | None) -> Iterator[TextIO]:
    if path is None:
        if (sys.stdout.encoding or "").lower().replace("-", "") != "utf8":
            with suppress(AttributeError, ValueError):
                sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
        yield sys.stdout
        return
    try:
        handle = open(path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115
    except OSError as err:
        raise DataError(f"{path}: cannot be written ({err.strerror}); check the path") from None
    with handle:
        yield handle


class _Session:
    """One run loaded for translating: encodes lines, decodes, formats output lines."""

    def __init__(self, loaded, args: argparse.Namespace) -> None:
        from attnmt.attention_maps import choose_attention

        self.loaded, self.args = loaded, args
        self.vocab = loaded.vocab
        self.choice = choose_attention(
            loaded.cfg.model, layer=args.align_layer, head=args.align_head
        )
        self.need_weights = bool(args.alignments or args.plot)
        if self.need_weights and not getattr(loaded.model, "uses_attention", True):
            raise UserError(
                f"this run's model ({loaded.cfg.model.name}) has no attention, so it has no "
                "alignments or attention plots; leave out --alignments and --plot"
            )
        self.limit = source_limit(loaded.cfg.model, args.max_source_len)
        self.truncated: list[tuple[int, int]] = []  # (line number, subwords before the cut)

    def translate(self, lines: Sequence[str], *, first_line: int, progress=None) -> list[str]:
        """Output lines for input `lines` (numbered from `first_line`), one for each."""
        texts = [" ".join(line.split()) for line in lines]
        todo = [i for i, text in enumerate(texts) if text]
        sources = []
        for i in todo:
            ids = self.vocab.src.encode(texts[i])
            if len(ids) > self.limit:
                self.truncated.append((first_line + i, len(ids)))
                ids = ids[: self.limit]
            sources.append(ids)
        results = translate_ids(
            self.loaded.model,
            sources,
            self.vocab.tgt.decode,
            beam_size=self.args.beam,
            alpha=self.args.alpha,
            n_best=self.args.n_best,
            max_len_ratio=self.args.max_len_ratio,
            need_weights=self.need_weights,
            max_tokens=self.args.batch_tokens,
            progress=progress,
        )
        done = dict(zip(todo, zip(sources, results, strict=True), strict=True))
        out = []
        for i, text in enumerate(texts):
            ids, result = done.get(i, ([], None))
            out.append(self._format(first_line + i, text, ids, result))
        return out

    def interactive(self, out: TextIO) -> None:
        """Read lines until EOF; print each translation as soon as it is made."""
        tty = sys.stdin.isatty()
        if tty:
            print("Type a sentence and press Enter; Ctrl-D ends.", file=sys.stderr)
        number = 0
        while True:
            if tty:
                print("> ", end="", file=sys.stderr, flush=True)
            raw = sys.stdin.buffer.readline()
            if not raw:
                break
            number += 1
            try:
                line = raw.decode("utf-8").removesuffix("\n").removesuffix("\r")
            except UnicodeDecodeError as err:
                print(
                    f"attnmt translate: line {number} is not valid UTF-8 (byte "
                    f"0x{raw[err.start]:02x}); type or paste UTF-8 text",
                    file=sys.stderr,
                )
                line = ""
            (text,) = self.translate([line], first_line=number)
            out.write(text + "\n")
            out.flush()
            self.report_truncated()

    def report_truncated(self) -> None:
        if not self.truncated:
            return
        shown = ", ".join(f"{n} ({k} subwords)" for n, k in self.truncated[:20])
        more = f" and {len(self.truncated) - 20} more" if len(self.truncated) > 20 else ""
        print(
            f"attnmt translate: warning: {len(self.truncated)} line(s) longer than the "
            f"limit of {self.limit} source subwords were translated from their first "
            f"{self.limit} only: line {shown}{more}",
            file=sys.stderr,
        )
        self.truncated = []

    # --- output formats ---------------------------------------------------------------

    def _format(self, line: int, source: str, ids: list[int], result: Translation | None) -> str:
        if result is not None and self.args.plot:
            self._plot(line, source, ids, result)
        if self.args.alignments == "json":
            return json.dumps(self._json(line, source, ids, result), ensure_ascii=False)
        if self.args.n_best > 1:
            return self._nbest_lines(line, source, ids, result)
        if self.args.alignments == "pharaoh":
            links = "" if result is None else self._words(source, ids, result).links
            text = "" if result is None else result.text
            return f"{text}\t{format_pharaoh(links)}"
        return "" if result is None else result.text

    def _words(self, source: str, ids: list[int], hyp: Translation | Hypothesis, text=None):
        from attnmt.attention_maps import select, source_words, target_words, word_view

        matrix = select(hyp.weights, self.choice)
        return word_view(
            matrix,
            source_words(self.vocab.src, source, len(ids)),
            target_words(self.vocab.tgt, hyp.tokens, getattr(hyp, "text", text)),
            threshold=self.args.threshold,
        )

    def _nbest_lines(self, line: int, source: str, ids: list[int], result) -> str:
        """Moses n-best lines `i ||| translation ||| score [||| links]`, i from 0."""
        hyps = [] if result is None else (result.nbest or [])
        rows = []
        for hyp in hyps or [None]:
            text = "" if hyp is None else self.vocab.tgt.decode(hyp.tokens)
            score = 0.0 if hyp is None else hyp.score
            row = f"{line - 1} ||| {text} ||| {score:.4f}"
            if self.args.alignments == "pharaoh":
                links = set() if hyp is None else self._words(source, ids, hyp, text).links
                row += f" ||| {format_pharaoh(links)}"
            rows.append(row)
        return "\n".join(rows)

    def _json(self, line: int, source: str, ids: list[int], result) -> dict[str, Any]:
        from attnmt.attention_maps import labels, select

        record: dict[str, Any] = {
            "line": line,
            "source": source,
            "translation": "" if result is None else result.text,
            "score": 0.0 if result is None else round(result.score, 6),
            "log_prob": 0.0 if result is None else round(result.log_prob or 0.0, 6),
            "truncated": result is not None and len(self.vocab.src.encode(source)) > len(ids),
            "attention": self.choice.as_dict(),
        }
        if result is None:
            empty: dict[str, Any] = {"source_words": [], "target_words": [], "alignment": ""}
            empty.update(links=[], word_weights=[], source_pieces=[], target_pieces=[])
            record.update(empty, subword_weights=[])
            return record
        words = self._words(source, ids, result)
        record.update(
            source_words=words.src_words,
            target_words=words.tgt_words,
            alignment=format_pharaoh(words.links),
            links=[list(link) for link in sorted(words.links)],
            word_weights=_rounded(words.word_weights),
            source_pieces=labels(self.vocab.src, ids),
            target_pieces=labels(self.vocab.tgt, result.tokens),
            subword_weights=_rounded(select(result.weights, self.choice)),
        )
        if result.nbest is not None:
            record["nbest"] = [
                {
                    "translation": self.vocab.tgt.decode(h.tokens),
                    "score": round(h.score, 6),
                    "log_prob": round(h.log_prob, 6),
                    "alignment": format_pharaoh(self._words(source, ids, h).links),
                }
                for h in result.nbest
            ]
        return record

    def _plot(self, line: int, source: str, ids: list[int], result: Translation) -> None:
        from attnmt.attention_maps import labels, write_attention

        write_attention(
            Path(self.args.plot) / f"line-{line:04d}",
            result.weights,
            labels(self.vocab.src, ids),
            labels(self.vocab.tgt, result.tokens),
            self.choice,
            source=source,
            translation=result.text,
            model=self.loaded.cfg.model.name,
            run=str(self.loaded.run_dir),
        )


def _rounded(matrix) -> list[list[float]]:
    return [[round(float(x), 5) for x in row] for row in matrix]
