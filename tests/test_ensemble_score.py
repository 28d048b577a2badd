"""Ensembles and scoring: the combination's math, the search and forced decoding through an
ensemble of mixed families, `attnmt score` against decoding and a by-hand step loop, and
`POST /api/score`. The runs are conftest's tiny ones (an RNNsearch and a Transformer on
one vocabulary); one more tiny run on a symbol vocabulary is trained for the mismatch.
"""

from __future__ import annotations

import io
import json
import math
import sys

import pytest
import torch
from fastapi.testclient import TestClient

from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data.vocab import BOS, EOS
from attnmt.decoding.decode_ids import translate_ids
from attnmt.decoding.ensemble import Ensemble, load_ensemble
from attnmt.decoding.hypotheses import length_penalty
from attnmt.decoding.options import SearchOptions
from attnmt.decoding.runs import load_run
from attnmt.decoding.scoring import score_pairs
from attnmt.errors import UserError
from attnmt.models.base import Seq2Seq
from attnmt.serve.app import create_app
from attnmt.serve.decoding import RunDecoder, Settings
from attnmt.training import train

SOURCES = ["the cat sat on the mat", "Привет мир 🙂", "dog ran far"]


def _stdin(text: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8")


def _ids(loaded, texts):
    return [loaded.vocab.src.encode(text) for text in texts]


def test_combination_is_the_mean_log_prob_or_the_log_mean_prob():
    logits = [torch.randn(3, 7), torch.randn(3, 7) * 3]
    ensemble = Ensemble([Seq2Seq()] * 2, [None, None], "log-linear")  # members unused
    p, q = (torch.softmax(x, dim=-1) for x in logits)
    geometric = (p * q).sqrt()
    expected = torch.log(geometric / geometric.sum(-1, keepdim=True))
    torch.testing.assert_close(ensemble.combine(logits), expected)
    ensemble.mode = "linear"
    torch.testing.assert_close(ensemble.combine(logits), torch.log((p + q) / 2))
    with pytest.raises(UserError, match="log-linear, linear"):
        Ensemble([Seq2Seq()], [None], "average")


@pytest.mark.parametrize("mode", ["log-linear", "linear"])
def test_an_ensemble_of_one_model_twice_decodes_as_the_model(tiny_runs, mode):
    single = load_run(tiny_runs["tf"])
    double = load_ensemble([tiny_runs["tf"], tiny_runs["tf"]], mode=mode)
    sources = _ids(single, SOURCES)
    for beam in (1, 3):
        one = translate_ids(
            single.model, sources, single.vocab.tgt.decode, SearchOptions(beam=beam)
        )
        two = translate_ids(
            double.model, sources, double.vocab.tgt.decode, SearchOptions(beam=beam)
        )
        assert [t.tokens for t in one] == [t.tokens for t in two]
        for a, b in zip(one, two, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)


def test_mixed_families_step_and_forward_agree_with_their_members(tiny_runs):
    rnn, tf = load_run(tiny_runs["rnn"]), load_run(tiny_runs["tf"])
    ensemble = load_ensemble([tiny_runs["rnn"], tiny_runs["tf"]]).model
    src = torch.tensor([[*rnn.vocab.src.encode("the cat sat"), EOS]])
    mask = torch.ones_like(src, dtype=torch.bool)
    tgt_in = torch.tensor([[BOS, *rnn.vocab.tgt.encode("sat cat the")]])
    with torch.no_grad():
        out = ensemble(src, mask, tgt_in, need_weights=True)
        members = [m.model(src, mask, tgt_in, need_weights=True) for m in (rnn, tf)]
        expected = torch.stack([torch.log_softmax(m.logits, -1) for m in members]).mean(0)
        torch.testing.assert_close(out.logits, torch.log_softmax(expected, -1))
        # Weights: the RNN's own, the Transformer's second-to-last layer's mean of heads.
        assert out.weights.shape == (1, tgt_in.size(1), 2, src.size(1))
        torch.testing.assert_close(out.weights[:, :, 0], members[0].weights)
        torch.testing.assert_close(out.weights[:, :, 1], members[1].weights[:, 0].mean(1))
        # The step interface gives the same distribution, position by position.
        memory = ensemble.encode(src, mask)
        state = ensemble.init_state(memory)
        for t in range(tgt_in.size(1)):
            log_probs, state, weights = ensemble.step(
                tgt_in[:, t], state, memory, need_weights=True
            )
            torch.testing.assert_close(log_probs, out.logits[:, t], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(weights, out.weights[:, t], atol=1e-5, rtol=1e-4)


def test_ensemble_hypotheses_score_as_forced_decoding_scores_them(tiny_runs):
    loaded = load_ensemble([tiny_runs["rnn"], tiny_runs["tf"]])
    sources = _ids(loaded, SOURCES)
    done = translate_ids(
        loaded.model, sources, loaded.vocab.tgt.decode, SearchOptions(need_weights=True)
    )
    scored = score_pairs(
        loaded.model, [(s, t.tokens) for s, t in zip(sources, done, strict=True)], need_weights=True
    )
    for hyp, forced in zip(done, scored, strict=True):
        assert forced.log_prob == pytest.approx(hyp.log_prob, abs=1e-3)
        assert hyp.weights.shape == forced.weights.shape  # (T, 2, S)
        torch.testing.assert_close(hyp.weights, forced.weights, atol=1e-4, rtol=1e-3)


def test_ensemble_on_the_command_line(tiny_runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", _stdin("\n".join(SOURCES) + "\n"))
    rnn, tf = str(tiny_runs["rnn"]), str(tiny_runs["tf"])
    assert main(["translate", rnn, tf, "-", "--alignments", "json", "--beam", "2"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == len(SOURCES)
    for record in records:
        assert record["attention"]["members"] == 2
        members = torch.tensor(record["member_weights"])  # (2, T, S)
        mean = torch.tensor(record["subword_weights"])
        torch.testing.assert_close(members.mean(0), mean, atol=2e-5, rtol=0)
    # evaluate writes beside the first run, never over its own report
    assert main(["evaluate", rnn, tf, "--limit", "4", "--ensemble-mode", "linear"]) == 0
    report = tiny_runs["rnn"] / "eval" / f"ensemble-{tiny_runs['tf'].name}" / "test-beam1.json"
    result = json.loads(report.read_text())
    assert result["ensemble"]["mode"] == "linear" and len(result["ensemble"]["runs"]) == 2


@pytest.fixture(scope="module")
def symbol_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("symbols")
    overrides = ["data.corpus=reverse", "data.synthetic_train_size=40", "data.batch_tokens=64"]
    overrides += ["model.embed_size=8", "model.hidden_size=8", "train.max_steps=1"]
    overrides += [f"train.run_dir={root / 'run'}", f"data.cache_dir={root / 'cache'}"]
    train(load_config(None, overrides), progress=False)
    return root / "run"


def test_runs_on_other_vocabularies_are_refused_naming_the_side(tiny_runs, symbol_run, capsys):
    with pytest.raises(UserError, match="target vocabulary"):
        load_ensemble([tiny_runs["rnn"], symbol_run])
    assert main(["evaluate", str(tiny_runs["rnn"]), str(symbol_run)]) == 2
    assert "cannot decode as an ensemble" in capsys.readouterr().err


# --- scoring -------------------------------------------------------------------------------


def _by_steps(model, src_ids, tgt_ids):
    """log P of each target token and EOS, read off the step interface one token at a time."""
    src = torch.tensor([[*src_ids, EOS]])
    mask = torch.ones_like(src, dtype=torch.bool)
    with torch.no_grad():
        memory = model.encode(src, mask)
        state = model.init_state(memory)
        prev, out = torch.tensor([BOS]), []
        for token in [*tgt_ids, EOS]:
            logits, state, _ = model.step(prev, state, memory)
            out.append(float(torch.log_softmax(logits.float(), -1)[0, token]))
            prev = torch.tensor([token])
    return out


@pytest.mark.parametrize("name", ["rnn", "tf", "plain"])
def test_scores_are_the_decoder_s_own_numbers(tiny_runs, name):
    loaded = load_run(tiny_runs[name])
    sources = _ids(loaded, SOURCES)
    done = translate_ids(loaded.model, sources, loaded.vocab.tgt.decode)
    targets = [t.tokens for t in done]
    targets[1] = loaded.vocab.tgt.encode("mat the on")  # a target the model did not write
    scored = score_pairs(loaded.model, list(zip(sources, targets, strict=True)), alpha=0.6)
    for i, (src, tgt, one) in enumerate(zip(sources, targets, scored, strict=True)):
        steps = _by_steps(loaded.model, src, tgt)
        assert one.token_log_probs == pytest.approx(steps, abs=1e-4)
        assert one.log_prob == pytest.approx(math.fsum(steps), abs=1e-3)
        assert one.score == pytest.approx(one.log_prob / length_penalty(len(tgt) + 1, 0.6))
        if i != 1:  # the model's own output: greedy's score and log-probability
            assert one.score == pytest.approx(done[i].score, abs=1e-3)
            assert one.log_prob == pytest.approx(done[i].log_prob, abs=1e-3)


@pytest.fixture()
def pair_files(tmp_path):
    src, tgt = tmp_path / "test.src", tmp_path / "test.tgt"
    src.write_text("the cat\nПривет мир\n\ndog\n", encoding="utf-8")
    tgt.write_text("cat the\nмир Привет\n\n\n", encoding="utf-8")
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("the cat\tcat the\nПривет мир\tмир Привет\n", encoding="utf-8")
    return src, tgt, tsv


def test_score_reads_two_files_a_tsv_or_stdin_alike(tiny_runs, pair_files, capsys, monkeypatch):
    src, tgt, tsv = pair_files
    run = str(tiny_runs["rnn"])
    assert main(["score", run, str(src), str(tgt), "--alpha", "0"]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 5 and lines[2] == "" and lines[3] != ""  # both sides blank: blank
    score, log_prob, per_token = lines[0].split("\t")
    assert float(score) == pytest.approx(float(log_prob))  # alpha 0: no length penalty
    assert float(log_prob) == pytest.approx(sum(map(float, per_token.split())), abs=1e-3)
    assert main(["score", "--alpha", "0", run, str(tsv)]) == 0
    assert capsys.readouterr().out.split("\n")[:2] == lines[:2]
    monkeypatch.setattr(sys, "stdin", _stdin(tsv.read_text(encoding="utf-8")))
    assert main(["score", run, "--alpha", "0"]) == 0
    assert capsys.readouterr().out.split("\n")[:2] == lines[:2]


def test_score_alignments_and_errors(tiny_runs, pair_files, tmp_path, capsys):
    src, _, tsv = pair_files
    run = str(tiny_runs["tf"])
    assert main(["score", run, str(tsv), "--alignments", "pharaoh"]) == 0
    first = capsys.readouterr().out.splitlines()[0].split("\t")
    assert len(first) == 4 and all("-" in link for link in first[3].split())
    assert main(["score", run, str(tsv), "--alignments", "json", "--align-layer", "1"]) == 0
    record = json.loads(capsys.readouterr().out.splitlines()[0])
    assert record["target_pieces"][-1] == "</s>"
    assert len(record["token_log_probs"]) == len(record["target_pieces"])
    assert record["attention"]["layer"] == 1 and record["links"]
    assert len(record["subword_weights"]) == len(record["target_pieces"])
    short = tmp_path / "short.tgt"
    short.write_text("one line\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    out.write_text("kept\n", encoding="utf-8")
    assert main(["score", run, str(src), str(short), "-o", str(out)]) == 2
    assert "lines" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "kept\n"  # nothing written over
    assert main(["score", str(tiny_runs["plain"]), str(tsv), "--alignments", "json"]) == 2
    assert "no attention" in capsys.readouterr().err


def test_api_score_answers_what_the_command_prints(tiny_runs, pair_files, capsys):
    _, _, tsv = pair_files
    assert main(["score", str(tiny_runs["rnn"]), str(tsv), "--alignments", "json"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    settings = Settings()
    app = create_app({"rnn": RunDecoder("rnn", load_run(tiny_runs["rnn"]), settings)}, settings)
    pairs = [{"source": r["source"], "target": r["target"]} for r in printed]
    with TestClient(app) as client:
        answer = client.post("/api/score", json={"pairs": pairs, "alignments": True})
        assert answer.status_code == 200, answer.text
        for got, want in zip(answer.json()["scores"], printed, strict=True):
            assert got["translation"] == want["target"]
            assert got["log_prob"] == pytest.approx(want["log_prob"], abs=1e-4)
            assert got["token_log_probs"] == pytest.approx(want["token_log_probs"], abs=1e-4)
            assert got["alignment"] == want["alignment"]
        refused = client.post("/api/score", json={"pair": pairs[0], "pairs": pairs})
        assert refused.status_code == 422 and "exactly one" in refused.json()["detail"]
