"""`attnmt translate`: the line-for-line filter contract, alignments, plots and errors.

Two tiny runs are trained once for the module: an RNNsearch with a sentencepiece
vocabulary on a small mixed-script TSV corpus (trained just enough to write words rather
than stop at once) and a 2-layer, 2-head Transformer on the reverse task.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data.alignments import parse_pharaoh
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.runs import load_run
from attnmt.plotting import load_arrays
from attnmt.training import train
from conftest import TINY, mixed_corpus

# Awkward input: empty and blank lines, scripts, right-to-left text, emoji.
AWKWARD = [
    "the cat sat on the mat",
    "",
    "Ελληνικά λόγος Привет мир",
    "שלום עולם",
    "مرحبا بالعالم",
    "   ",
    "🙂 café 🚀 naïve",
    "dog",
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("translate")
    corpus = mixed_corpus(root)
    cache = f"data.cache_dir={root / 'cache'}"
    spm = [f"data.{split}_path={corpus}" for split in ("train", "dev", "test")]
    train(
        load_config(
            None,
            [
                *(
                    *TINY,
                    cache,
                    *spm,
                    "data.corpus=tsv",
                    "data.drop_held_out=false",
                    "data.vocab_size=120",
                ),
                *("train.lr=0.02", "train.max_steps=100", f"train.run_dir={root / 'rnn'}"),
            ],
        ),
        progress=False,
    )
    train(
        load_config(
            None,
            [
                *(*TINY, cache, "data.corpus=reverse", "data.synthetic_train_size=200"),
                *("data.synthetic_max_len=6", "model.name=transformer", "model.heads=2"),
                *("model.layers=2", "model.ff_size=32", "train.max_steps=2"),
                f"train.run_dir={root / 'tf'}",
            ],
        ),
        progress=False,
    )
    return {"rnn": root / "rnn", "tf": root / "tf", "root": root}


def attnmt(capsys, monkeypatch, *argv, stdin: bytes = b""):
    """Run the CLI in this process; returns (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("model", ["rnn", "tf"])
def test_one_output_line_per_input_line(runs, tmp_path, capsys, monkeypatch, model):
    long_line = " ".join(str(i % 51) for i in range(450))  # past the 400-subword limit
    lines = [*AWKWARD, long_line, "1 2 3"]
    source = _write(tmp_path / "in.txt", lines)
    # --max-len-ratio keeps the untrained outputs (and the test) short.
    code, out, err = attnmt(
        capsys, monkeypatch, "translate", runs[model], source, "--max-len-ratio", "0.25"
    )
    assert code == 0
    outputs = out.split("\n")
    assert outputs.pop() == ""  # the final newline
    assert len(outputs) == len(lines)
    for line, output in zip(lines, outputs, strict=True):
        if not line.strip():
            assert output == ""
    # The long line was cut to the limit and reported by its line number; nothing crashed.
    assert "line 9 (" in err and "400" in err
    assert "Traceback" not in err


def test_rnn_translates_words(runs, tmp_path, capsys, monkeypatch):
    code, out, _ = attnmt(capsys, monkeypatch, "translate", runs["rnn"], stdin=b"the cat sat\n")
    assert code == 0
    assert out.strip(), "the tiny RNN should write something; the tests below rely on it"


def test_reads_stdin_as_a_pipe(runs):
    data = "the cat\n\nשלום עולם\n".encode()
    for args in ([], ["-"]):
        result = subprocess.run(
            [sys.executable, "-m", "attnmt", "translate", str(runs["rnn"]), *args],
            input=data,
            capture_output=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr.decode()
        lines = result.stdout.decode("utf-8").split("\n")
        assert len(lines) == 4 and lines[1] == "" and lines[3] == ""


def test_invalid_utf8_names_the_line(runs, tmp_path):
    source = tmp_path / "latin1.txt"
    source.write_bytes("the cat\ncaf\xe9\n".encode("latin-1"))
    result = subprocess.run(
        [sys.executable, "-m", "attnmt", "translate", str(runs["rnn"]), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "line 2" in result.stderr and "UTF-8" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_missing_run_is_a_clear_error(tmp_path, capsys, monkeypatch):
    code, _, err = attnmt(capsys, monkeypatch, "translate", tmp_path / "nope", stdin=b"a\n")
    assert code == 2
    assert "does not exist" in err and len(err.strip().splitlines()) == 1


def test_pharaoh_links_index_the_words(runs, tmp_path, capsys, monkeypatch):
    source = _write(tmp_path / "in.txt", AWKWARD)
    code, out, _ = attnmt(
        capsys, monkeypatch, "translate", runs["rnn"], source, "--alignments", "pharaoh"
    )
    assert code == 0
    rows = out.split("\n")[:-1]
    assert len(rows) == len(AWKWARD)
    linked = 0
    for line, row in zip(AWKWARD, rows, strict=True):
        translation, links_text = row.split("\t")  # exactly one TAB per line
        links = parse_pharaoh(links_text)
        src_words, tgt_words = line.split(), translation.split()
        assert all(0 <= i < len(src_words) and 0 <= j < len(tgt_words) for i, j in links)
        # Without --threshold each target word gets exactly one link (its argmax).
        assert sorted(j for _, j in links) == list(range(len(tgt_words)))
        linked += len(links)
        if not line.strip():
            assert row == "\t"
    # Not vacuous: the run (fp32 on every CPU: conftest.TINY) wrote words for all 6 lines
    # that have any and 10-13 links for train.seed 1-3 (an Intel Xeon with AMX).
    assert linked > 0


def test_threshold_adds_one_to_many_links(runs, capsys, monkeypatch):
    text = b"the cat sat on the mat dog\n"
    _, plain, _ = attnmt(
        capsys, monkeypatch, "translate", runs["rnn"], "--alignments", "pharaoh", stdin=text
    )
    _, wide, _ = attnmt(
        capsys,
        monkeypatch,
        *("translate", runs["rnn"], "--alignments", "pharaoh", "--threshold", "0.01"),
        stdin=text,
    )
    few, many = parse_pharaoh(plain.split("\t")[1]), parse_pharaoh(wide.split("\t")[1])
    # A 100-step model's attention is far from one-hot: 2-4 links became 13-28 at 0.01 for
    # train.seed 1-3 (fp32, an Intel Xeon with AMX).
    assert few <= many and len(many) > len(few)


@pytest.mark.parametrize("model", ["rnn", "tf"])
def test_json_lines_hold_words_links_and_weights(runs, tmp_path, capsys, monkeypatch, model):
    # The last RNN line has a zero-width space inside a word and a ligature sentencepiece
    # normalises: the words (and link indices) must still be those of `line.split()`.
    lines = ["the cat sat", "", "Привет 🙂 мир", "a\u200bb \ufb01 \u200fcat"]
    if model == "tf":
        lines = ["1 2 3", "", "4 5", "6"]
    source = _write(tmp_path / "in.txt", lines)
    code, out, _ = attnmt(
        capsys, monkeypatch, "translate", runs[model], source, "--alignments", "json"
    )
    assert code == 0
    records = [json.loads(row) for row in out.splitlines()]
    assert [r["line"] for r in records] == [1, 2, 3, 4]
    assert records[1]["translation"] == "" and records[1]["links"] == []
    for record, line in zip(records, lines, strict=True):
        assert record["source"] == line and record["source_words"] == line.split()
        assert record["target_words"] == record["translation"].split()
        assert parse_pharaoh(record["alignment"]) == {tuple(x) for x in record["links"]}
        if not line:
            continue
        words = np.array(record["word_weights"])
        pieces = np.array(record["subword_weights"])
        if record["target_words"]:
            assert words.shape == (len(record["target_words"]), len(record["source_words"]))
        # Subword rows: every output piece plus the EOS; columns: source pieces plus EOS.
        assert pieces.shape == (len(record["target_pieces"]), len(record["source_pieces"]))
        assert record["source_pieces"][-1] == record["target_pieces"][-1] == "</s>"
        np.testing.assert_allclose(pieces.sum(axis=1), 1.0, atol=1e-3)
    expected = {"layer": 1, "head": "mean"} if model == "tf" else {"layer": None, "head": None}
    expected["offset"] = 0
    assert records[0]["attention"] == expected  # the second-to-last of 2 layers


def test_transformer_layer_and_head_are_checked(runs, capsys, monkeypatch):
    base = ("translate", runs["tf"], "--alignments", "pharaoh")
    code, out, _ = attnmt(
        capsys, monkeypatch, *base, "--align-layer", "2", "--align-head", "1", stdin=b"1 2\n"
    )
    assert code == 0 and out.count("\t") == 1
    for flags, words in (
        (("--align-layer", "3"), "2 decoder layer"),
        (("--align-layer", "0"), "out of range"),
        (("--align-head", "5"), "2 head"),
    ):
        code, out, err = attnmt(capsys, monkeypatch, *base, *flags, stdin=b"1 2\n")
        assert code == 2 and words in err and out == ""
    code, _, err = attnmt(
        capsys, monkeypatch, "translate", runs["rnn"], "--align-layer", "1", stdin=b"a\n"
    )
    assert code == 2 and "Transformer" in err


def test_beam_with_n_best(runs, tmp_path, capsys, monkeypatch):
    source = _write(tmp_path / "in.txt", ["1 2 3", "", "4 5 6 7"])
    code, out, _ = attnmt(
        capsys, monkeypatch, "translate", runs["tf"], source, "--beam", "3", "--n-best", "2"
    )
    assert code == 0
    rows = [row.split(" ||| ") for row in out.splitlines()]
    assert all(len(row) == 3 for row in rows)
    assert [int(r[0]) for r in rows] == [0, 0, 1, 2, 2]  # Moses n-best: 0-based line ids
    assert rows[2][1] == ""
    scores = [float(r[2]) for r in rows if r[0] == "0"]
    assert scores == sorted(scores, reverse=True)
    code, _, err = attnmt(
        capsys, monkeypatch, "translate", runs["tf"], source, "--beam", "2", "--n-best", "3"
    )
    assert code == 2 and "--beam" in err


def test_plot_writes_pictures_and_data(runs, tmp_path, capsys, monkeypatch):
    source = _write(tmp_path / "in.txt", ["1 2 3", "", "4 5"])
    plots = tmp_path / "plots"
    code, _, _ = attnmt(capsys, monkeypatch, "translate", runs["tf"], source, "--plot", plots)
    assert code == 0
    names = sorted(p.name for p in plots.iterdir())
    for line in ("line-0001", "line-0003"):
        for suffix in (".npz", ".png", ".svg", "-layers.png", "-layers.svg"):
            assert line + suffix in names
    assert not any(name.startswith("line-0002") for name in names)  # the empty line
    data = load_arrays(plots / "line-0001.npz")
    assert data.weights.shape == (2, 2, len(data.tgt_tokens), 4)  # (L, H, T, S) "1 2 3 </s>"
    assert data.src_tokens == ["1", "2", "3", "</s>"]
    assert data.meta["source"] == "1 2 3"


def test_output_file_and_interactive(runs, tmp_path, capsys, monkeypatch):
    target = tmp_path / "out.txt"
    code, out, _ = attnmt(
        capsys, monkeypatch, "translate", runs["rnn"], "-o", target, stdin=b"the cat\n\ndog\n"
    )
    assert code == 0 and out == ""
    assert len(target.read_text(encoding="utf-8").split("\n")) == 4
    code, out, err = attnmt(
        capsys,
        monkeypatch,
        *("translate", runs["rnn"], "--interactive", "--alignments", "pharaoh"),
        stdin=b"the cat\n\xff\ndog\n",
    )
    assert code == 0
    assert out.count("\n") == 3 and out.count("\t") == 3
    assert "line 2 is not valid UTF-8" in err


def test_translation_weights_are_cut_to_each_source(runs):
    loaded = load_run(runs["tf"])
    sources = [[4, 5], [4, 5, 6, 7, 8, 9]]  # batched together: the short one is padded
    for beam in (1, 2):
        out = translate_ids(
            loaded.model,
            sources,
            loaded.vocab.tgt.decode,
            SearchOptions(beam=beam, need_weights=True),
        )
        for source, translation in zip(sources, out, strict=True):
            assert translation.weights.shape[-1] == len(source) + 1
            assert translation.weights.shape[0] == len(translation.tokens) + 1
            sums = translation.weights.sum(dim=-1)
            torch.testing.assert_close(sums, torch.ones_like(sums))


def test_max_len_caps_every_output_whatever_its_source(runs):
    loaded = load_run(runs["tf"])
    sources = [[4, 5, 6, 7, 8, 9] * 5]  # ratio 2: up to 65 steps; max_len 3: two and EOS
    for beam in (1, 2):
        (capped,) = translate_ids(
            loaded.model, sources, str, SearchOptions(beam=beam, max_len=3, need_weights=True)
        )
        assert len(capped.tokens) <= 2 and capped.weights.shape[0] == len(capped.tokens) + 1
    (free,) = translate_ids(loaded.model, sources, str)  # greedy: the same steps, cut
    (capped,) = translate_ids(loaded.model, sources, str, SearchOptions(max_len=3))
    assert capped.tokens == free.tokens[: len(capped.tokens)]


def test_align_offset_links_each_word_to_a_later_steps_argmax(runs, tmp_path, capsys, monkeypatch):
    source = _write(tmp_path / "in.txt", ["1 2 3 4"])
    args = ("translate", runs["tf"], source, "--alignments", "json")
    code, out, _ = attnmt(capsys, monkeypatch, *args, "--align-offset", "1")
    assert code == 0
    record = json.loads(out)
    assert record["attention"]["offset"] == 1
    code, plain, _ = attnmt(capsys, monkeypatch, *args)
    plain_record = json.loads(plain)
    # Same translation and weights; only where the links are read differs.
    assert record["translation"] == plain_record["translation"]
    assert record["subword_weights"] == plain_record["subword_weights"]
