"""`attnmt <command>`: a thin dispatcher. `attnmt.cli.<name>` is `attnmt <name>`.

Each command module is imported only when that command runs (so `attnmt --help` stays
fast, without torch). A command module provides:

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int | None: ...

Commands are thin: they parse, call the library and print. Nothing outside `attnmt.cli`
imports it. `UserError`s are printed as one line on stderr with exit status 2; Ctrl-C
exits 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from attnmt import __version__
from attnmt.errors import UserError

# command name -> one-line help, in the order --help shows them.
COMMANDS: dict[str, str] = {
    "quickstart": "the main job: prepare, train, evaluate, translate, draw",
    "demo": "print the weights every attention variant gives on a small example",
    "data": "list, prepare and show the parallel corpora",
    "train": "train a model from a YAML config (checkpoints, resume, torchrun)",
    "translate": "translate text line by line, with alignments and plots",
    "evaluate": "BLEU, chrF, BLEU by length and AER of a run on a split",
    "plot": "draw the attention of chosen sentences, or redraw saved plots",
    "align": "word alignments from eflomal, scored against gold links (AER)",
    "compare": "one table and one BLEU-by-length plot for several runs",
    "export": "write a Transformer run as a CTranslate2 model (optionally int8)",
    "serve": "an HTTP translation API and a page that shows the attention",
}


def _module(command: str):
    # Lazy on purpose: only the command that runs pays for its imports (torch, matplotlib).
    return importlib.import_module(f"attnmt.cli.{command}")


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="attnmt",
        description="Attention in sequence models: train, decode, evaluate and see it.",
    )
    parser.add_argument("--version", action="version", version=f"attnmt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = {}
    for name, help_text in COMMANDS.items():
        # Arguments are added lazily, for the command that runs.
        commands[name] = sub.add_parser(name, help=help_text, description=help_text)
    return parser, commands


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, commands = build_parser()
    # First pass: find the command without failing on its own arguments.
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in COMMANDS:
        _module(command).add_arguments(commands[command])
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        code = _module(args.command).run(args)
    except UserError as err:
        print(f"attnmt {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"attnmt {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `attnmt ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    return int(code or 0)
