"""The committed reference runs (reference/NAME, made by benchmarks/reference.py): each one
loads by path, its recorded test BLEU is the BLEU of its recorded outputs, and decoding
the first verses of John again on this machine gives those outputs back."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch

import attnmt
from attnmt.checkpoint import load_weights
from attnmt.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("rnnsearch-en-fr", "transformer-en-fr", "rnnencdec-en-fr")
FIRST = 16  # verses decoded again here (beam 5 on the CPU: a few seconds a model)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("name", NAMES)
def test_a_reference_is_small_fp16_and_its_record_matches_its_outputs(name):
    ref = ROOT / "reference" / name
    record = json.loads((ref / "reference.json").read_text())
    best = json.loads((ref / "checkpoints" / "best.json").read_text())
    weights = ref / "checkpoints" / best["checkpoint"] / "model.safetensors"
    assert weights.stat().st_size <= 20e6  # the bound: the repository stays small
    floats = {v.dtype for v in load_weights(weights).values() if v.is_floating_point()}
    assert floats == {torch.float16}
    assert record["best_step"] == best["step"] and record["test_beam"] == 5
    report = json.loads((ref / "eval" / "test-beam5.json").read_text())
    assert record["parameters"] == report["parameters"]  # tied weights counted once
    # The recorded test BLEU is sacrebleu's over the recorded outputs and the 3 references.
    out = _lines(ref / "eval" / "test-beam5.txt")
    refs = [_lines(ref / "eval" / f"test-beam5.ref{k}.txt") for k in (1, 2, 3)]
    assert len(out) == record["test"]["sentences"] == 879 and record["test"]["references"] == 3
    assert sacrebleu.corpus_bleu(out, refs).score == pytest.approx(record["test"]["bleu"], abs=0.01)
    # attnmt.evaluate(recorded=True) reads the same evaluation back, decoding nothing.
    recorded = attnmt.evaluate(str(ref), recorded=True)
    assert recorded.bleu == record["test"]["bleu"] and recorded.hypotheses == out
    assert recorded.references[0] == [r[0] for r in refs]
    assert sum(row["sentences"] for row in recorded.by_length()) == 879
    with pytest.raises(UserError, match="no recorded test evaluation at beam 2"):
        attnmt.evaluate(str(ref), beam=2, recorded=True)


@pytest.mark.parametrize("name", NAMES)
def test_a_reference_loads_by_path_and_decodes_its_recorded_verses_again(name):
    ref = ROOT / "reference" / name
    recorded = _lines(ref / "eval" / "test-beam5.txt")[:FIRST]
    refs = [_lines(ref / "eval" / f"test-beam5.ref{k}.txt")[:FIRST] for k in (1, 2, 3)]
    model = attnmt.load(str(ref))
    john = model.examples("test")  # the run's own test split, in the recorded order
    assert len(john) == 879 and john[0].id == "John 1:1"
    assert [ex.tgt for ex in john[:FIRST]] == refs[0] and len(john[0].refs) == 2
    again = [r.text for r in model.translate([ex.src for ex in john[:FIRST]], beam=5)]
    # Recorded on a GPU, decoded here on a CPU: the sums run in another order, so a near
    # tie between two beams may fall the other way; most verses must come back word for
    # word and the BLEU of the few must stay close.
    same = sum(a == b for a, b in zip(again, recorded, strict=True))
    assert same >= 0.8 * FIRST, list(zip(again, recorded, strict=True))
    bleu_here = sacrebleu.corpus_bleu(again, refs).score
    bleu_recorded = sacrebleu.corpus_bleu(recorded, refs).score
    assert abs(bleu_here - bleu_recorded) <= 3.0


def test_the_driver_trains_finishes_and_then_leaves_a_reference_alone(tmp_path):
    command = [
        sys.executable, str(ROOT / "benchmarks" / "reference.py"), "rnnsearch-en-fr",
        "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "ref"), "--threads", "1",
        "--eval-limit", "3",
        *("--set", "train.max_steps=2", "--set", "train.validate_every=2"),
        *("--set", "train.checkpoint_every=2", "--set", "train.valid_sentences=3"),
        *("--set", "data.batch_tokens=600", "--set", "model.hidden_size=16"),
        *("--set", "model.embed_size=16"),
    ]  # fmt: skip
    first = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    record = json.loads((tmp_path / "ref" / "rnnsearch-en-fr" / "reference.json").read_text())
    assert record["steps"] == 2 and record["stopped"] == "max_steps"
    assert record["test"]["sentences"] == 3 and record["hardware"]["device"] == "cpu"
    assert attnmt.load(str(tmp_path / "ref" / "rnnsearch-en-fr")).translate("Jesus wept.")
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "finished already" in again.stdout
    with pytest.raises(UserError, match="unknown split 'train'"):
        attnmt.load(str(tmp_path / "ref" / "rnnsearch-en-fr")).examples("train")
    bad = subprocess.run([*command[:2], "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no reference named nope" in bad.stderr


def test_a_chapter_finds_the_references_by_name(tmp_path, monkeypatch):
    from attnmt.tutorial import Chapter

    monkeypatch.setenv("ATTNMT_NOTEBOOK_RUNS", str(tmp_path))
    chapter = Chapter("00-test", "smoke")
    assert chapter.reference("rnnsearch-en-fr") == ROOT / "reference" / "rnnsearch-en-fr"
    with pytest.raises(UserError, match="no reference run named nope"):
        chapter.reference("nope")
    # ...and the committed measurements a chapter reads back (the lab's claims)
    assert chapter.results("claims.jsonl") == ROOT / "benchmarks" / "results" / "claims.jsonl"
    with pytest.raises(UserError, match=r"no committed result named nope\.json"):
        chapter.results("nope.json")


IMAGES = ("captions-soft", "captions-plain", "captions-hard", "glimpses")
CANVASES = 8  # test canvases decoded again here (greedy, on the CPU they were trained on)


@pytest.mark.parametrize("name", IMAGES)
def test_an_image_reference_is_small_and_reads_its_recorded_canvases_again(name):
    """The image references (chapter 5): the shipped configs at their shipped budgets,
    evaluated greedily; the record's exact match is that of its recorded outputs, and the
    first canvases decoded again give those outputs back."""
    ref = ROOT / "reference" / name
    record = json.loads((ref / "reference.json").read_text())
    best = json.loads((ref / "checkpoints" / "best.json").read_text())
    weights = ref / "checkpoints" / best["checkpoint"] / "model.safetensors"
    assert weights.stat().st_size <= 2e6  # small models: a few hundred thousand parameters
    assert record["test_beam"] == 1 and record["config"] == f"configs/{name}.yaml"
    out = _lines(ref / "eval" / "test-beam1.txt")
    gold = _lines(ref / "eval" / "test-beam1.ref1.txt")
    assert len(out) == len(gold) == record["test"]["sentences"] == 500
    exact = 100 * sum(a == b for a, b in zip(out, gold, strict=True)) / len(out)
    assert exact == pytest.approx(record["test"]["exact"], abs=0.01)
    recorded = attnmt.evaluate(str(ref), beam=1, recorded=True)
    assert recorded.data["images"] == record["test"]["images"]
    # Decoded again here: the first canvases give the recorded outputs back.
    model = attnmt.load(str(ref))
    again = attnmt.evaluate(model, split="test", beam=1, limit=CANVASES).hypotheses
    # Trained and recorded on a CPU; another CPU kind sums in another order, so allow one
    # near tie to fall the other way.
    same = sum(a == b for a, b in zip(again, out[:CANVASES], strict=True))
    assert same >= CANVASES - 1, list(zip(again, out[:CANVASES], strict=True))
    with pytest.raises(UserError, match="this run reads images"):
        model.translate(out[0])
