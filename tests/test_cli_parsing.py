"""Every command takes its options before, between or after its positional arguments, and a
wrong argument prints the usage of the command that was typed (not the top-level one)."""

from __future__ import annotations

import pytest

from attnmt.cli import COMMANDS, main, parse

# command -> (argv with options after positionals, what it must parse to)
CASES = {
    "quickstart": (["--beam", "2", "--set", "train.max_steps=5"], {"beam": 2}),
    "demo": (["--score", "dot", "--seed", "3"], {"score": "dot", "seed": 3}),
    "data": (["prepare", "c.yaml", "--json", "--set", "a=1"], {"config": "c.yaml", "json": True}),
    "train": (["c.yaml", "--quiet", "--set", "a=1"], {"config": "c.yaml", "quiet": True}),
    "translate": (["runs/a", "--beam", "5", "in.txt"], {"paths": ["runs/a", "in.txt"], "beam": 5}),
    "score": (
        ["runs/a", "s.txt", "--alpha", "0", "t.txt"],
        {"paths": ["runs/a", "s.txt", "t.txt"]},
    ),
    "evaluate": (["runs/a", "--beam", "2", "runs/b"], {"runs": ["runs/a", "runs/b"], "beam": 2}),
    "plot": (["runs/a", "--sentences", "3", "--reference"], {"run": "runs/a", "reference": True}),
    "align": (["--src", "a", "--tgt", "b"], {"src": "a", "tgt": "b"}),
    "average": (["runs/a", "--last", "4", "-o", "x"], {"run": "runs/a", "last": 4, "out": "x"}),
    "compare": (["runs/a", "--out", "x", "runs/b"], {"runs": ["runs/a", "runs/b"], "out": "x"}),
    "export": (["runs/a", "--quantize", "int8"], {"run": "runs/a", "quantize": "int8"}),
    "serve": (["runs/a", "--port", "9", "runs/b"], {"runs": ["runs/a", "runs/b"], "port": 9}),
}


def test_every_command_has_a_case():
    assert set(CASES) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(CASES))
def test_options_mix_with_positionals(command):
    argv, expected = CASES[command]
    args = parse([command, *argv])
    assert args.command == command
    for key, value in expected.items():
        assert getattr(args, key) == value, key


@pytest.mark.parametrize("command", sorted(CASES))
def test_an_error_shows_the_command_s_usage(command, capsys):
    argv, _ = CASES[command]
    with pytest.raises(SystemExit) as exit_:
        main([command, *argv, "--no-such-option"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    prog = "attnmt data prepare" if command == "data" else f"attnmt {command}"
    assert err.startswith(f"usage: {prog} ")
    assert f"{prog}: error: unrecognized arguments: --no-such-option" in err


def test_top_level_errors_and_help_stay_top_level(capsys):
    with pytest.raises(SystemExit):
        main(["transalte", "runs/a"])
    assert "invalid choice: 'transalte'" in capsys.readouterr().err
    assert main([]) == 0
    assert "COMMAND" in capsys.readouterr().out


def test_translate_run_then_options_then_file(tiny_runs, tmp_path, capsys):
    """The line of the issue: `attnmt translate runs/quickstart --beam 5 input.txt`."""
    text = tmp_path / "input.txt"
    text.write_text("the cat sat\n\ndog\n", encoding="utf-8")
    assert main(["translate", str(tiny_runs["rnn"]), "--beam", "3", str(text)]) == 0
    first = capsys.readouterr().out
    assert main(["translate", "--beam", "3", str(tiny_runs["rnn"]), str(text)]) == 0
    assert capsys.readouterr().out == first and first.count("\n") == 3
