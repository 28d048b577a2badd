"""`attnmt <command>`: a thin dispatcher. `attnmt.cli.<name>` is `attnmt <name>`.

Each command module is imported only when that command runs (so `attnmt --help` stays
fast, without torch). A command module provides:

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int | None: ...

Commands are thin: they parse, call the library and print. Nothing outside `attnmt.cli`
imports it. `UserError`s are printed as one line on stderr with exit status 2, and so is a
package that one of attnmt's extras installs, missing (`pip install 'attnmt[train]'`);
Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from attnmt import __version__
from attnmt.errors import UserError, missing_extra

# command name -> one-line help, in the order --help shows them.
COMMANDS: dict[str, str] = {
    "quickstart": "the main job: prepare, train, evaluate, translate, draw",
    "demo": "print the weights every attention variant gives on a small example",
    "data": "list, prepare and show the parallel corpora",
    "train": "train a model from a YAML config (checkpoints, resume, torchrun)",
    "translate": "translate text line by line, with alignments and plots",
    "score": "log-probabilities and attention of given translations (forced decoding)",
    "evaluate": "BLEU, chrF, BLEU by length and AER of a run on a split",
    "plot": "draw the attention of chosen sentences, or redraw saved plots",
    "align": "word alignments from eflomal, scored against gold links (AER)",
    "average": "one model from the mean of a run's last or best N checkpoints",
    "compare": "one table and one BLEU-by-length plot for several runs",
    "export": "write a run as ONNX graphs (any text model, decoded without torch) or a "
    "Transformer as a CTranslate2 model (optionally int8)",
    "serve": "an HTTP translation API and a page that shows the attention",
}


def _module(command: str):
    # Lazy on purpose: only the command that runs pays for its imports (torch, matplotlib).
    return importlib.import_module(f"attnmt.cli.{command}")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: `attnmt --help`, `--version` and the list of commands."""
    parser = argparse.ArgumentParser(
        prog="attnmt",
        description="Attention in sequence models: train, decode, evaluate and see it.",
    )
    parser.add_argument("--version", action="version", version=f"attnmt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def command_parser(command: str) -> argparse.ArgumentParser:
    """The parser of one command, standalone: its errors print its own usage."""
    help_text = COMMANDS[command]
    parser = argparse.ArgumentParser(prog=f"attnmt {command}", description=help_text)
    _module(command).add_arguments(parser)
    return parser


def parse_command(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Options and positionals in any order (`translate RUN --beam 5 FILE`), for a command
    and for each action of a command that has actions (`data prepare CONFIG --json`)."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        return parser.parse_intermixed_args(argv)
    sub = actions[0]
    name = next((a for a in argv if not a.startswith("-")), None)
    if name not in sub.choices:  # none or a wrong one: argparse says which ones exist
        return parser.parse_args(argv)
    at = argv.index(name)
    parser.parse_args(argv[:at])  # the command's own flags before the action (--help)
    args = parse_command(sub.choices[name], argv[at + 1 :])
    setattr(args, sub.dest, name)
    return args


def parse(argv: list[str]) -> argparse.Namespace:
    """`attnmt ARGV` parsed: `args.command` is None where no command was given."""
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in COMMANDS or argv.index(command) > 0:
        # No command, a misspelt one, or a top-level flag first (--help, --version).
        return build_parser().parse_args(argv)
    args = parse_command(command_parser(command), argv[1:])
    args.command = command
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if a in COMMANDS), "")
    try:
        args = parse(argv)  # imports the command's module, and what it imports
    except ModuleNotFoundError as err:
        return _missing(command, err)
    if args.command is None:
        build_parser().print_help()
        return 0
    try:
        code = _module(args.command).run(args)
    except ModuleNotFoundError as err:
        return _missing(args.command, err)
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


def _missing(command: str, err: ModuleNotFoundError) -> int:
    """A package an extra installs is missing (a plain install, without torch): say which
    extra, in one sentence, exit 2; any other missing module is a bug and raises."""
    error = missing_extra(err)
    if error is None:
        raise err
    print(f"attnmt {command}: error: {error}", file=sys.stderr)
    return 2
