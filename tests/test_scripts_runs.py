"""Three tiny Bible runs in other scripts, each through quickstart (prepare, train, evaluate,
translate, draw), then `translate`, `evaluate` and `plot` by hand: English→Chinese,
English→Arabic and Russian→English. Text comes out as UTF-8 in data order (the shaping of
right-to-left labels is for the drawing only), and BLEU is tokenized for the target.

160 steps of a 16-wide RNNsearch on the verses of at most 6 words: enough to write words
(at 80, how many words a model wrote hung on the seed and the order of its random draws: two
of the three said nothing after a change that only moved a dropout mask).
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import unicodedata
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from attnmt import scripts
from attnmt.cli import main
from attnmt.data import prepare
from attnmt.data.alignments import format_pharaoh, parse_pharaoh
from attnmt.decoding.attention_choice import labels
from attnmt.decoding.runs import load_run
from attnmt.plotting import load_arrays

ROOT = Path(__file__).resolve().parents[1]
# name -> (source version, target version, BLEU tokenizer, a Unicode name of target letters)
PAIRS = {
    "en-zh": ("en-web", "zh-ncv", "zh", "CJK"),
    "en-ar": ("en-web", "ar-svd", "13a", "ARABIC"),
    "ru-en": ("ru-synodal", "en-web", "13a", "LATIN"),
}
TINY = [
    "data.max_words=6",
    "data.vocab_size=1200",  # Chinese alone needs ~600 characters
    "data.dev_books=[Jude]",
    "data.test_books=[Philemon]",
    "model.embed_size=16",
    "model.hidden_size=16",
    "train.lr=0.02",
    "train.max_steps=160",
    "train.validate_every=160",
    "train.checkpoint_every=160",
    "train.valid_sentences=5",
    # One path on every CPU: `auto` trains RNNsearch in bf16 on an AMD EPYC Zen 4 only, and
    # whether these runs write words at all hangs on the rounding of their updates.
    "train.precision=fp32",
]


def _in_script(text: str, name: str) -> bool:
    return any(unicodedata.name(c, "").startswith(name) for c in text)


@pytest.fixture(scope="module", params=list(PAIRS))
def pair(request, tmp_path_factory):
    """(name, run directory, the quickstart's printed summary), trained once per pair."""
    name = request.param
    src, tgt = PAIRS[name][:2]
    root = tmp_path_factory.mktemp(name)
    overrides = [*TINY, f"data.src={src}", f"data.tgt={tgt}", f"data.cache_dir={root / 'cache'}"]
    overrides.append(f"train.run_dir={root / 'run'}")
    args = ["quickstart", "--config", str(ROOT / "configs" / "quickstart.yaml")]
    args += ["--min-dev-bleu", "0", "--beam", "1", "--examples", "2", "--limit", "5"]
    printed = io.StringIO()
    with redirect_stdout(printed):
        assert main([*args, *(a for o in overrides for a in ("--set", o))]) == 0
    return name, root / "run", printed.getvalue()


def _test_verses(run: Path):
    """The loaded run and its test split (Philemon), from the run's own data config."""
    loaded = load_run(run)
    return loaded, prepare(loaded.cfg.data).split("test")


@pytest.mark.slow
def test_quickstart_summary_prints_the_script_as_utf8(pair):
    name, run, out = pair
    _, examples = _test_verses(run)
    assert f"  reference: {examples[0].tgt}" in out  # the verse exactly as in the data
    assert _in_script(out, PAIRS[name][3])


@pytest.mark.slow
def test_translate_keeps_data_order_in_text_links_and_plot_data(pair, tmp_path, capsys):
    name, run, _ = pair
    _, examples = _test_verses(run)
    lines = [examples[0].src, "", examples[1].src]
    source = tmp_path / "in.txt"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    plots = tmp_path / "plots"
    args = ["translate", str(run), str(source), "--alignments", "json", "--plot", str(plots)]
    assert main(args) == 0
    rows = [json.loads(row) for row in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and rows[1]["translation"] == ""  # one line a line
    rows = [rows[0], rows[2]]
    for row in rows:
        words = row["translation"].split()
        assert row["target_words"] == words and row["source_words"] == row["source"].split()
        links = parse_pharaoh(row["alignment"])
        assert format_pharaoh(links) == row["alignment"]
        assert all(0 <= i < len(row["source_words"]) and 0 <= j < len(words) for i, j in links)
        # The plot data holds the pieces as decoded: read in order, they are the translation.
        saved = load_arrays(plots / f"line-{row['line']:04d}.npz")
        assert saved.src_tokens == row["source_pieces"]
        assert saved.tgt_tokens == row["target_pieces"]
        text = "".join(saved.tgt_tokens[:-1]).replace("▁", " ").strip()
        assert " ".join(text.split()) == row["translation"]
    # One of two is enough, and 2 of 2 wrote the target's script in every pair for train.seed
    # 1-2 (fp32, an Intel Xeon with AMX), as did 5 of 5 in `evaluate` below.
    assert any(_in_script(row["translation"], PAIRS[name][3]) for row in rows)
    if name == "ru-en":
        return
    # A C locale (no UTF-8 in its name): Chinese and Arabic still come out as UTF-8.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8")}
    result = subprocess.run(
        [sys.executable, "-m", "attnmt", "translate", str(run), str(source)],
        capture_output=True,
        env={**env, "LC_ALL": "C", "LANG": "C"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode("utf-8", "replace")
    assert result.stdout.decode("utf-8").split("\n")[:3] == [
        rows[0]["translation"],
        "",
        rows[1]["translation"],
    ]


@pytest.mark.slow
def test_evaluate_tokenizes_bleu_for_the_target_and_reports_chrf(pair, capsys):
    name, run, _ = pair
    assert main(["evaluate", str(run), "--limit", "5"]) == 0
    out = capsys.readouterr().out
    result = json.loads((run / "eval" / "test-beam1.json").read_text(encoding="utf-8"))
    tokenizer = PAIRS[name][2]
    assert result["bleu_tokenizer"] == tokenizer and result["bleu_note"] == ""
    assert f"tok:{tokenizer}|" in result["bleu_signature"] and f"tok:{tokenizer}|" in out
    assert "chrF" in out and result["chrf_signature"].startswith("nrefs:")
    assert all("chrf" in row for row in result["bleu_by_length"])
    report = (run / "eval" / "test-beam1.md").read_text(encoding="utf-8")
    assert "| chrF |" in report
    hypotheses = (run / "eval" / "test-beam1.txt").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == 5 and any(_in_script(h, PAIRS[name][3]) for h in hypotheses)


@pytest.mark.slow
def test_plot_draws_the_reference_labels_as_they_are(pair, capsys, caplog, monkeypatch):
    name, run, _ = pair
    monkeypatch.setattr(scripts, "_warned", set())
    with caplog.at_level(logging.WARNING):
        assert main(["plot", str(run), "--sentences", "1", "--reference"]) == 0
    capsys.readouterr()
    loaded, examples = _test_verses(run)
    vocab = loaded.vocab
    saved = load_arrays(run / "plots" / "test-1.npz")
    assert saved.tgt_tokens == labels(vocab.tgt, vocab.tgt.encode(examples[1].tgt))
    assert saved.src_tokens == labels(vocab.src, vocab.src.encode(examples[1].src))
    assert _in_script("".join(saved.tgt_tokens), PAIRS[name][3])
    missing = scripts.missing_glyphs([*saved.src_tokens, *saved.tgt_tokens])
    warned = [r.getMessage() for r in caplog.records if r.name == "attnmt.scripts"]
    assert bool(warned) == bool(missing)  # one warning where a font is missing, else none
    if scripts.RENDERER_SHAPES:  # the SVG keeps the labels as text, as in the data
        svg = (run / "plots" / "test-1.svg").read_text(encoding="utf-8")
        assert all(t.replace("<", "&lt;").replace(">", "&gt;") in svg for t in saved.tgt_tokens)
