"""`attnmt score RUN [RUN ...] SRC TGT | TSV | -`: how likely a model finds given translations.

    attnmt score runs/quickstart test.en test.fr              # two line-aligned files
    attnmt score runs/quickstart pairs.tsv --alignments json  # source<TAB>target lines
    cut -f1,2 pairs.tsv | attnmt score runs/quickstart        # TSV on standard input

One output line per pair, in order: `score<TAB>log_prob<TAB>token log-probs` (the
length-normalised score the search ranks by, log P(target, EOS | source), and each target
subword's log-probability then the EOS's, space-separated); `--alignments pharaoh` adds the
links read off the forced-decoding attention; `--alignments json` prints one JSON object
per pair with the attention too. A pair whose two sides are empty gives an empty line. The
scoring itself is `attnmt.decoding.scoring` (docs/decoding.md, "Scoring translations").
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from attnmt.cli.options import (
    add_decoding_arguments,
    check_decoding_arguments,
    load_decoding_run,
    open_output,
    split_runs,
)
from attnmt.data.files import STDIN, read_parallel, read_tsv
from attnmt.decoding.records import flat_record
from attnmt.errors import UserError
from attnmt.service import Request, Service, as_flag

CHUNK_PAIRS = 512  # pairs scored together: output streams, and weights stay bounded


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Score given translations with a trained run (forced decoding): per pair the "
        "length-normalised score, log P(target | source) and each subword's log-probability; "
        "the attention and links with --alignments. See docs/decoding.md."
    )
    parser.usage = "%(prog)s [options] RUN [RUN ...] [SRC TGT | TSV | -]"
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="RUN",
        help="RUN [RUN ...] then SRC TGT (two line-aligned files), one TSV file "
        "(source<TAB>target), or '-' / nothing (TSV on standard input); several RUNs score "
        "as an ensemble",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here, not to stdout")
    parser.add_argument(
        "--alignments",
        choices=("pharaoh", "json"),
        help="pharaoh: a fourth column of 'i-j' word links; json: one JSON object per pair "
        "with the words, links and the word- and subword-level attention",
    )
    add_decoding_arguments(parser, quantize=True, ensemble=True, search=False)


def read_pairs(inputs: list[str]) -> list[tuple[str, str]]:
    """(source, target) pairs from two files, one TSV file, or TSV on standard input."""
    if len(inputs) == 2:
        return read_parallel(inputs[0], inputs[1])
    return [(src, tgt) for src, tgt, _ in read_tsv(inputs[0] if inputs else STDIN)]


def run(args: argparse.Namespace) -> int:
    args.runs, inputs = split_runs(args.paths, 2)
    check_decoding_arguments(args)
    if not inputs and sys.stdin.isatty():
        raise UserError(
            "give SRC TGT files or a TSV file after RUN, or pipe source<TAB>target lines in"
        )
    pairs = read_pairs(inputs)  # before the output opens: -o may name an input
    loaded = load_decoding_run(args)
    if loaded.model.reads_images:
        raise UserError("attnmt score reads text pairs; this run's model reads images")
    need_weights = args.alignments is not None
    if need_weights and not loaded.model.uses_attention:
        raise UserError(
            f"this run's model ({loaded.cfg.model.name}) has no attention, so it has no "
            "alignments; leave out --alignments"
        )
    request = Request(
        alpha=args.alpha,
        links=need_weights,
        maps="aligning" if need_weights else None,  # the plain lines need none
        layer=args.align_layer,
        head=args.align_head,
        offset=args.align_offset,
    ).check(as_flag)
    service = Service(loaded, batch_tokens=args.batch_tokens, max_source_len=args.max_source_len)
    choice = service.translator(request).choice
    truncated = 0
    with open_output(args.output) as out:
        for start in range(0, len(pairs), CHUNK_PAIRS):
            chunk = pairs[start : start + CHUNK_PAIRS]
            for record in service.score(chunk, request, first_line=start + 1):
                if record is None:  # two empty sides: an empty line
                    out.write("\n")
                    continue
                truncated += record["truncated"]
                out.write(format_line(flat_record(record, choice), args.alignments) + "\n")
            out.flush()
    if truncated:
        print(
            f"attnmt score: {truncated} source(s) longer than {service.limit} subwords were "
            "cut there (--max-source-len); their scores are of the cut source",
            file=sys.stderr,
        )
    return 0


def format_line(record: dict[str, Any], alignments: str | None) -> str:
    """The output line of one scored pair (`--alignments` chooses the format)."""
    if alignments == "json":
        return json.dumps(record, ensure_ascii=False)
    columns = [
        f"{record['score']:.4f}",
        f"{record['log_prob']:.4f}",
        " ".join(f"{x:.4f}" for x in record["token_log_probs"]),
    ]
    if alignments == "pharaoh":
        columns.append(record["alignment"])
    return "\t".join(columns)
