"""`attnmt <command>`: a thin dispatcher.

Each command lives in its own module, imported only when that command runs (so `attnmt
--help` stays fast). A command module provides:

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int | None: ...

`UserError`s are printed as one line on stderr with exit status 2; Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from attnmt import __version__
from attnmt.errors import UserError

# command name -> (module, one-line help). Order is the order shown in --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "quickstart": ("attnmt.quickstart", "the main job: prepare, train, evaluate, translate, draw"),
    "demo": ("attnmt.demo", "print the weights every attention variant gives on a small example"),
    "data": ("attnmt.data.commands", "list, prepare and show the parallel corpora"),
    "train": ("attnmt.train", "train a model from a YAML config (checkpoints, resume, torchrun)"),
    "translate": ("attnmt.translate", "translate text line by line, with alignments and plots"),
    "evaluate": ("attnmt.report", "BLEU, chrF, BLEU by length and AER of a run on a split"),
    "plot": ("attnmt.plot_cmd", "draw the attention of chosen sentences, or redraw saved plots"),
    "compare": ("attnmt.compare", "one table and one BLEU-by-length plot for several runs"),
}


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="attnmt",
        description="Attention in sequence models: train, decode, evaluate and see it.",
    )
    parser.add_argument("--version", action="version", version=f"attnmt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = {}
    for name, (module_name, help_text) in COMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        sub_parser.set_defaults(_module=module_name)
        commands[name] = sub_parser  # arguments are added lazily, for the command that runs
    return parser, commands


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, commands = build_parser()
    # First pass: find the command without failing on its own arguments.
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in COMMANDS:
        module = importlib.import_module(COMMANDS[command][0])
        module.add_arguments(commands[command])
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    module = importlib.import_module(args._module)
    try:
        code = module.run(args)
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
