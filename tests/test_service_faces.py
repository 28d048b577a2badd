"""The three faces are one service (`attnmt.service`): the same request through `attnmt
translate`/`attnmt score` (their `--alignments json` lines), `attnmt.load(...).translate`/
`.score` and the server's /api/translate and /api/score gives the same record, field for
field: plain translation, n-best, a prefix, alternatives, an explanation, a score.

The command line writes the record with its aligning map flattened (`flat_record`), so
against it the maps are compared through the map the links are read off; the API and the
server answer every map, compared whole. An explanation's `ms` is its own time, the only
field that may differ.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

import attnmt
from attnmt.cli import main
from attnmt.decoding.runs import load_run
from attnmt.serve import RunDecoder, Settings, create_app

LINES = ["the cat sat on the mat", "", "dog"]
PAIRS = [("the cat sat", "sat cat the"), ("dog", "dog dog")]

# name -> (the CLI's flags, the API's and the server's options); each translates LINES.
CASES = {
    "greedy": ([], {}),
    "beam": (["--beam", "3", "--alpha", "0.2"], {"beam": 3, "alpha": 0.2}),
    "n-best": (["--beam", "3", "--n-best", "3"], {"beam": 3, "n_best": 3}),
    "alternatives": (["--alternatives", "3"], {"alternatives": 3}),
    "explained": (["--explain", "occlusion"], {"explain": "occlusion"}),
}


def _same(got, want, path="record"):
    """Equal field for field (floats to the records' rounding); `ms` is each run's own."""
    if isinstance(want, dict):
        assert set(got) == set(want), f"{path}: {sorted(set(got) ^ set(want))}"
        for key in want:
            if key != "ms":
                _same(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, (list, tuple)) and not isinstance(got, str):
        assert len(got) == len(want), f"{path}: {len(got)} items, not {len(want)}"
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            _same(a, b, f"{path}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, abs=2e-5), path
    else:
        assert got == want, path


@pytest.fixture(scope="module")
def faces(tiny_runs):
    run = tiny_runs["rnn"]
    model = attnmt.load(run, device="cpu")
    settings = Settings()
    app = create_app({"rnn": RunDecoder("rnn", load_run(run), settings)}, settings)
    with TestClient(app) as client:
        yield run, model, client


def _cli(capsys, tmp_path, command, run, flags, lines):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main([command, str(run), str(source), "--alignments", "json", *flags]) == 0
    return [json.loads(line) if line else None for line in capsys.readouterr().out.splitlines()]


def _served(client, path, body):
    answer = client.post(path, json={**body, "model": "rnn"})
    assert answer.status_code == 200, answer.text
    key = "scores" if path.endswith("score") else "translations"
    return answer.json()[key]


def _served_is(theirs, mine):
    """The server's answer is the record, plus its `error` and a null for each optional
    field the record leaves out."""
    absent = {k: None for k in theirs if k not in mine}
    _same(theirs, {**absent, **mine})


def _against_the_line(record, line):
    """A full record and the CLI's flattened line agree: every field the line has, and
    the line's map is the record's default one."""
    chosen = record["attention"][record["default_attention"]]
    _same(line["subword_weights"], chosen["subword"])
    _same(line["word_weights"], chosen["word"])
    flat = {
        k: v for k, v in line.items() if k not in ("attention", "word_weights", "subword_weights")
    }
    _same({k: record[k] for k in flat}, flat)


@pytest.mark.parametrize("case", CASES)
def test_a_translation_is_one_record_in_every_face(faces, capsys, tmp_path, case):
    run, model, client = faces
    flags, options = CASES[case]
    api = [t.record for t in model.translate(LINES, **options)]
    served = _served(client, "/api/translate", {"lines": LINES, "weights": True, **options})
    cli = _cli(capsys, tmp_path, "translate", run, flags, LINES)
    assert len(api) == len(served) == len(cli) == len(LINES)
    for mine, theirs, line in zip(api, served, cli, strict=True):
        _served_is(theirs, mine)
        if mine["translation"]:
            _against_the_line(mine, line)
    if case == "explained":  # beside the attention, and the links are the method's
        methods = [m["method"] for m in api[0]["attention"]]
        assert methods == ["attention", "occlusion"] and api[0]["default_attention"] == 1
    if case == "n-best":
        assert len(api[0]["nbest"]) == 3


def test_a_prefix_is_one_record_in_every_face(faces, capsys, tmp_path):
    run, model, client = faces
    first = model.translate(LINES[0]).record["target_words"]
    prefix = first[0] if first else "the"
    api = model.translate(LINES[0], prefix=prefix).record
    (served,) = _served(
        client, "/api/translate", {"text": LINES[0], "prefix": prefix, "weights": True}
    )
    (line,) = _cli(capsys, tmp_path, "translate", run, ["--prefix"], [f"{LINES[0]}\t{prefix}"])
    _served_is(served, api)
    _against_the_line(api, line)
    assert api["prefix"]["text"] == prefix


def test_a_score_is_one_record_in_every_face(faces, capsys, tmp_path):
    run, model, client = faces
    sources, targets = zip(*PAIRS, strict=True)
    api = [t.record for t in model.score(list(sources), list(targets))]
    body = {"pairs": [{"source": s, "target": t} for s, t in PAIRS], "weights": True}
    served = _served(client, "/api/score", {**body, "alignments": True})
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    assert main(["score", str(run), str(tsv), "--alignments", "json"]) == 0
    cli = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for mine, theirs, line in zip(api, served, cli, strict=True):
        _served_is(theirs, {k: v for k, v in mine.items() if k != "target"})  # = translation
        _against_the_line(mine, line)
        assert np.isfinite(mine["score"]) and mine["token_log_probs"]


def test_the_defaults_are_the_requests():
    """The faces restate no default: the CLI's flags and the API's keywords default to
    `Request`'s fields."""
    from attnmt.cli import parse
    from attnmt.service import Request

    args = parse(["translate", "RUN"])
    for name in ("beam", "alpha", "n_best", "max_len_ratio", "min_alternative_prob", "ig_steps"):
        assert getattr(args, name) == getattr(Request, name), name
