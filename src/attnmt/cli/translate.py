"""`attnmt translate RUN [FILE|-]`: a Unix filter over a trained run.

One output line per input line, in order, an empty line for an empty line: plain
translations, Moses n-best lines, `translation<TAB>Pharaoh links`, or one JSON object per
line; `--plot DIR` also draws each sentence's attention. The translating itself is
`attnmt.inference.Translator`; this module reads lines and formats what it returns (see
`add_arguments` and docs/decoding.md for the flags and the formats).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from attnmt.cli.options import (
    add_decoding_arguments,
    add_explain_arguments,
    check_decoding_arguments,
    explain_methods,
    load_decoding_run,
    open_output,
    split_runs,
)
from attnmt.data.alignments import format_pharaoh
from attnmt.data.files import read_lines
from attnmt.errors import UserError
from attnmt.explain.methods import scale_of
from attnmt.inference import Sentence, Translator, labels, write_attention

CHUNK_LINES = 256  # lines decoded together: output streams, and weights stay bounded


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Translate text, one sentence per line: one output line per input line, in order "
        "(an empty line gives an empty line). See docs/decoding.md."
    )
    parser.usage = "%(prog)s [options] RUN [RUN ...] [FILE]"
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="RUN",
        help="RUN [RUN ...] [FILE]: a run directory (its best checkpoint, else the latest) or "
        "one checkpoint directory in RUN/checkpoints/; several RUNs decode as an ensemble "
        "(same vocabulary). "
        "FILE: UTF-8 text, one sentence per line ('-' or nothing: standard input)",
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
    add_decoding_arguments(parser, quantize=True, ensemble=True)
    add_explain_arguments(parser)
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
        help="draw each sentence's attention into DIR (line-0001.png/.svg, and "
        "line-0001-layers.* for a Transformer) with its plot data (line-0001.npz, for "
        "`attnmt plot --from`)",
    )


def run(args: argparse.Namespace) -> int:
    args.runs, inputs = split_runs(args.paths, 1)
    args.input = inputs[0] if inputs else "-"
    check_decoding_arguments(args)
    args.explain = (explain_methods(args.explain) or [None])[0]
    if args.explain and not (args.alignments or args.plot):
        raise UserError(
            "--explain changes what --alignments and --plot show; add one of them "
            "(e.g. --alignments json)"
        )
    if args.threshold is not None and not 0.0 < args.threshold <= 1.0:
        raise UserError(f"--threshold must be in (0, 1], got {args.threshold}")
    if args.interactive and args.input != "-":
        raise UserError("--interactive reads standard input; leave out the FILE argument")
    # A terminal on standard input and no file: a person is typing, so prompt.
    interactive = args.interactive or (args.input == "-" and sys.stdin.isatty())
    loaded = load_decoding_run(args)
    session = _Session(loaded, args)
    # Read everything before opening the output, so `-o` may name the input file.
    lines = [] if interactive else read_lines(args.input)
    with open_output(args.output) as out:
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


class _Session:
    """A `Translator` and the output format asked for: formats each sentence's line(s)."""

    def __init__(self, loaded, args: argparse.Namespace) -> None:
        self.args = args
        self.vocab = loaded.vocab
        self.translator = Translator(
            loaded,
            beam=args.beam,
            alpha=args.alpha,
            n_best=args.n_best,
            max_len_ratio=args.max_len_ratio,
            batch_tokens=args.batch_tokens,
            max_source_len=args.max_source_len,
            align_layer=args.align_layer,
            align_head=args.align_head,
            align_offset=args.align_offset,
            need_weights=bool(args.alignments or args.plot),
            threshold=args.threshold,
            explain=args.explain,
            ig_steps=args.ig_steps,
        )
        self.limit = self.translator.limit
        self.truncated: list[tuple[int, int]] = []  # (line number, subwords before the cut)

    def translate(self, lines: Sequence[str], *, first_line: int, progress=None) -> list[str]:
        """Output text for input `lines` (numbered from `first_line`), one for each."""
        sentences = self.translator.translate(lines, first_line=first_line, progress=progress)
        for sentence in sentences:
            if sentence.truncated:
                self.truncated.append((sentence.line, len(self.vocab.src.encode(sentence.source))))
        return [self._format(sentence) for sentence in sentences]

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

    def _format(self, sentence: Sentence) -> str:
        result = sentence.translation
        if result is not None and self.args.plot:
            self._plot(sentence)
        if self.args.alignments == "json":
            return json.dumps(self.translator.record(sentence), ensure_ascii=False)
        if self.args.n_best > 1:
            return self._nbest_lines(sentence)
        if self.args.alignments == "pharaoh":
            if result is None:
                return "\t"
            return f"{result.text}\t{format_pharaoh(self.translator.words(sentence).links)}"
        return "" if result is None else result.text

    def _nbest_lines(self, sentence: Sentence) -> str:
        """Moses n-best lines `i ||| translation ||| score [||| links]`, i from 0."""
        result = sentence.translation
        hyps = [] if result is None else (result.nbest or [])
        rows = []
        for hyp in hyps or [None]:
            text = "" if hyp is None else self.vocab.tgt.decode(hyp.tokens)
            score = 0.0 if hyp is None else hyp.score
            row = f"{sentence.line - 1} ||| {text} ||| {score:.4f}"
            if self.args.alignments == "pharaoh":
                links = set() if hyp is None else self.translator.words(sentence, hyp).links
                row += f" ||| {format_pharaoh(links)}"
            rows.append(row)
        return "\n".join(rows)

    def _plot(self, sentence: Sentence) -> None:
        result = sentence.translation
        write_attention(
            Path(self.args.plot) / f"line-{sentence.line:04d}",
            result.weights,
            labels(self.vocab.src, sentence.ids),
            labels(self.vocab.tgt, result.tokens),
            self.translator.choice,
            **({"explain": self.args.explain} if self.args.explain else {}),
            scale=scale_of(self.args.explain),
            source=sentence.source,
            translation=result.text,
            model=self.translator.loaded.cfg.model.name,
            run=str(self.translator.loaded.run_dir),
        )
