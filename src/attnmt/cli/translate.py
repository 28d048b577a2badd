"""`attnmt translate RUN [FILE|-]`: a Unix filter over a trained run.

One output line per input line, in order, an empty line for an empty line: plain
translations, Moses n-best lines, `translation<TAB>Pharaoh links`, or one JSON object per
line; `--plot DIR` also draws each sentence's attention. The translating itself is
`attnmt.decoding.translator.Translator`; this module reads lines and formats what it returns (see
`add_arguments` and docs/decoding.md for the flags and the formats).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
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
from attnmt.data.files import read_lines
from attnmt.decoding.attention_choice import labels
from attnmt.decoding.records import flat_record, search_record
from attnmt.decoding.translator import Sentence
from attnmt.errors import UserError
from attnmt.explain.names import scale_of
from attnmt.service import Request, Service, as_flag

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
        default=Request.n_best,
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
    group = parser.add_argument_group("the search: see it and steer it (docs/decoding.md)")
    group.add_argument(
        "--prefix",
        action="store_true",
        help="each input line is 'source<TAB>prefix': the translation begins with the "
        "prefix (split into subwords as the tokenizer splits text), the rest is searched; "
        "a line without a TAB, or with an empty prefix, is translated as usual",
    )
    group.add_argument(
        "--search-json",
        metavar="FILE",
        help="also write the whole search to FILE, one JSON object per input line: every "
        "candidate of every step with its parent, scores, fate (kept, pruned, finished, "
        "ended, forced), rejected next subwords and attention row",
    )
    group.add_argument(
        "--alternatives",
        type=int,
        metavar="N",
        help="the N most likely next subwords after the prefix (at the start without "
        "--prefix), each completed by the search: N lines 'i ||| translation ||| score "
        "||| subword ||| probability' per input line (with --alignments json: an "
        "'alternatives' list)",
    )
    group.add_argument(
        "--min-alternative-prob",
        type=float,
        default=Request.min_alternative_prob,
        metavar="P",
        help="with --alternatives: leave out subwords less likely than P (0-1); the most "
        "likely is always kept (CTranslate2's min_alternative_expansion_prob)",
    )
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
    request = _request(args)
    same = args.search_json is not None and args.output is not None
    if same and Path(args.search_json).resolve() == Path(args.output).resolve():
        raise UserError("--search-json and -o name the same file; give two files")
    if args.interactive and args.input != "-":
        raise UserError("--interactive reads standard input; leave out the FILE argument")
    # A terminal on standard input and no file: a person is typing, so prompt.
    interactive = args.interactive or (args.input == "-" and sys.stdin.isatty())
    loaded = load_decoding_run(args)
    session = _Session(loaded, args, request)
    # Read everything before opening the output, so `-o` may name the input file.
    lines = [] if interactive else read_lines(args.input)
    with open_output(args.output) as out, _search_output(args.search_json) as searches:
        session.searches = searches
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
                if searches is not None:
                    searches.flush()
    session.report_truncated()
    return 0


@contextlib.contextmanager
def _search_output(path: str | None):
    """The --search-json file (None without it), written whole or not at all: into a
    temporary file beside it, renamed when translating ended without an error."""
    if path is None:
        yield None
        return
    target = Path(path)
    if target.is_dir():
        raise UserError(f"--search-json {path} is a directory; give a file name")
    if not target.parent.is_dir():
        raise UserError(f"--search-json {path}: the folder {target.parent} does not exist")
    partial = target.with_name(f".{target.name}.partial")
    try:
        with open(partial, "w", encoding="utf-8") as handle:
            yield handle
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def _request(args: argparse.Namespace) -> Request:
    """The service's request of the command's flags (each checked there, named as a flag)."""
    return Request(
        beam=args.beam,
        alpha=args.alpha,
        n_best=args.n_best,
        max_len_ratio=args.max_len_ratio,
        alternatives=args.alternatives,
        min_alternative_prob=args.min_alternative_prob,
        search=args.search_json is not None,
        links=args.alignments is not None,
        maps="aligning" if args.alignments == "json" or args.plot else None,
        threshold=args.threshold,
        layer=args.align_layer,
        head=args.align_head,
        offset=args.align_offset,
        explain=(args.explain,) if args.explain else (),
        ig_steps=args.ig_steps,
    ).check(as_flag)


class _Session:
    """The run's `Service`, the request and the output format asked for: formats each
    sentence's line(s)."""

    def __init__(self, loaded, args: argparse.Namespace, request: Request) -> None:
        self.args = args
        self.request = request
        self.vocab = loaded.vocab
        self.service = Service(
            loaded, batch_tokens=args.batch_tokens, max_source_len=args.max_source_len
        )
        self.translator = self.service.check(request, as_flag)
        drawn = self.args.alignments or self.args.plot
        if drawn and not (loaded.model.uses_attention or request.explain):  # nothing to draw
            raise UserError(
                f"this run's model ({loaded.cfg.model.name}) has no attention, so it has "
                "no alignments or attention plots; leave out --alignments and --plot"
            )
        self.searches: TextIO | None = None  # the --search-json file
        self.limit = self.translator.limit
        self.truncated: list[tuple[int, int]] = []  # (line number, subwords before the cut)

    def translate(self, lines: Sequence[str], *, first_line: int, progress=None) -> list[str]:
        """Output text for input `lines` (numbered from `first_line`), one for each."""
        prefixes = None
        if self.args.prefix:
            split = [line.split("\t", 1) for line in lines]
            lines = [parts[0] for parts in split]
            prefixes = [parts[1] if len(parts) > 1 else None for parts in split]
        sentences = self.service.translate(
            lines, self.request, first_line=first_line, progress=progress, prefixes=prefixes
        )
        if self.searches is not None:
            for sentence in sentences:
                self.searches.write(json.dumps(self._search(sentence), ensure_ascii=False))
                self.searches.write("\n")
        for sentence in sentences:
            if sentence.truncated:
                self.truncated.append((sentence.line, len(self.vocab.src.encode(sentence.source))))
        # The search is in --search-json's file, not in the lines.
        records = self.service.records(sentences, self.request, search=False)
        return [self._format(s, r) for s, r in zip(sentences, records, strict=True)]

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

    def _search(self, sentence: Sentence) -> dict:
        """The --search-json line of a sentence (a blank line's search is null)."""
        result = sentence.translation
        return {
            "line": sentence.line,
            "source": sentence.source,
            "translation": "" if result is None else result.text,
            "search": None
            if result is None
            else search_record(sentence, self.vocab, self.translator.choice, heads=True),
        }

    def _format(self, sentence: Sentence, record: dict) -> str:
        result = sentence.translation
        if result is not None and self.args.plot:
            self._plot(sentence)
        if self.args.alignments == "json":
            return json.dumps(flat_record(record, self.translator.choice), ensure_ascii=False)
        if self.args.alternatives is not None:
            return self._alternative_lines(sentence)
        if self.args.n_best > 1:
            return self._nbest_lines(sentence, record)
        if self.args.alignments == "pharaoh":
            return "\t" if result is None else f"{result.text}\t{record['alignment']}"
        return "" if result is None else result.text

    def _alternative_lines(self, sentence: Sentence) -> str:
        """`i ||| translation ||| score ||| subword ||| probability`, one per alternative."""
        rows = []
        for alt in sentence.alternatives or []:
            piece = self.vocab.tgt.id_pieces([alt.token])[0]
            rows.append(
                f"{sentence.line - 1} ||| {alt.translation.text} ||| "
                f"{alt.translation.score:.4f} ||| {piece} ||| {math.exp(alt.log_prob):.4f}"
            )
        return "\n".join(rows or [f"{sentence.line - 1} ||| ||| 0.0000 ||| ||| 0.0000"])

    def _nbest_lines(self, sentence: Sentence, record: dict) -> str:
        """Moses n-best lines `i ||| translation ||| score [||| links]`, i from 0."""
        rows = []
        for hyp in record.get("nbest") or [None]:
            text, score = ("", 0.0) if hyp is None else (hyp["translation"], hyp["score"])
            row = f"{sentence.line - 1} ||| {text} ||| {score:.4f}"
            if self.args.alignments == "pharaoh":
                row += f" ||| {'' if hyp is None else hyp['alignment']}"
            rows.append(row)
        return "\n".join(rows)

    def _plot(self, sentence: Sentence) -> None:
        from attnmt.decoding.attention_maps import write_attention  # matplotlib: on use

        result = sentence.translation
        shown = sentence.explanations  # the first method's matrix, as the links are read
        write_attention(
            Path(self.args.plot) / f"line-{sentence.line:04d}",
            shown[0].matrix if shown else result.weights,
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
