"""`attnmt evaluate` (scores, report files, AER on the gold alignments) and `attnmt compare`.

Runs trained once for the module, a few steps each: an RNNsearch on a tiny TSV corpus with
a second reference column, and an RNNsearch and a 2-layer, 2-head Transformer on the
Greek→English gold-alignment corpus (`bible-alignments`, sentencepiece with 500 pieces),
and an RNNsearch the other way (English→Greek, `data.swap`).
"""

from __future__ import annotations

import json
import random

import pytest

from attnmt.alignment.links import alignment_scores, diagonal_alignment
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data import prepare
from attnmt.data.alignments import load_gold, read_pharaoh
from attnmt.training import train

TINY = [
    "model.embed_size=8",
    "model.hidden_size=16",
    "train.max_steps=2",
    "train.validate_every=1000",
    "train.valid_sentences=2",
    "train.log_every=1",
    # One path on every CPU (`auto` trains the Transformer in bf16 on some): the links these
    # runs' attention gives are compared with the gold ones below.
    "train.precision=fp32",
]
TRANSFORMER = ["model.name=transformer", "model.heads=2", "model.layers=2", "model.ff_size=32"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    rng = random.Random(1)
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "home", "slept"]
    rows = []
    for _ in range(40):
        source = [rng.choice(words) for _ in range(rng.randint(1, 25))]
        target = " ".join(reversed(source))
        rows.append(f"{' '.join(source)}\t{target}\t{target} too")
    corpus = root / "corpus.tsv"
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    cache = f"data.cache_dir={root / 'cache'}"
    tsv = [f"data.{split}_path={corpus}" for split in ("train", "dev", "test")]
    common = [*TINY, cache]
    configs = {
        "tsv": [
            *common,
            *tsv,
            "data.corpus=tsv",
            "data.drop_held_out=false",
            "data.vocab_size=60",
            "data.batch_tokens=128",
        ],
        "gold": [*common, "data.corpus=alignments", "data.vocab_size=500", "data.batch_tokens=300"],
    }
    configs["gold-tf"] = [*configs["gold"], *TRANSFORMER]
    configs["gold-swap"] = [*configs["gold"], "data.swap=true"]  # English -> Greek
    configs["gold-plain"] = [*configs["gold"], "model.name=rnnencdec"]  # no attention
    for name, overrides in configs.items():
        train(load_config(None, [*overrides, f"train.run_dir={root / name}"]), progress=False)
    return {name: root / name for name in configs}


@pytest.fixture(scope="module")
def gold():
    """The gold verses by reference (read once: a few seconds)."""
    return {verse.ref: verse for verse in load_gold().verses}


def attnmt(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _result(run, stem="test-beam1"):
    return json.loads((run / "eval" / f"{stem}.json").read_text(encoding="utf-8"))


def test_evaluate_writes_scores_against_every_reference(runs, capsys):
    code, out, _ = attnmt(capsys, "evaluate", runs["tsv"], "--limit", "12")
    assert code == 0
    result = _result(runs["tsv"])
    assert result["sentences"] == 12 and result["split"] == "test" and result["beam"] == 1
    assert result["references"] == 2 and "nrefs:2" in result["bleu_signature"]
    assert "nrefs:2" in result["chrf_signature"]
    assert 0.0 <= result["bleu"] <= 100.0 and 0.0 <= result["chrf"] <= 100.0
    rows = result["bleu_by_length"]
    assert sum(row["sentences"] for row in rows) == 12 and len(rows) >= 2
    speed = result["speed"]
    assert speed["sentences"] == 12 and speed["seconds"] > 0 and speed["sentences_per_s"] > 0
    assert result["parameters"] > 0 and "alignment" not in result
    eval_dir = runs["tsv"] / "eval"
    for name in (
        "test-beam1.md",
        "test-beam1.txt",
        "test-beam1-length.png",
        "test-beam1-length.svg",
    ):
        assert (eval_dir / name).is_file(), name
    assert len((eval_dir / "test-beam1.txt").read_text(encoding="utf-8").splitlines()) == 12
    report = (eval_dir / "test-beam1.md").read_text(encoding="utf-8")
    for text in ("| BLEU |", "| chrF |", "nrefs:2", "## BLEU by source length", "| 1-10 |"):
        assert text in report
    assert "sentences/s" in report
    assert "BLEU" in out and "sentences/s" in out


def test_evaluate_dev_split_with_beam(runs, capsys):
    code, _, _ = attnmt(capsys, "evaluate", runs["tsv"], "--split", "dev", "--beam", "2")
    assert code == 0
    result = _result(runs["tsv"], "dev-beam2")
    assert result["split"] == "dev" and result["beam"] == 2 and result["sentences"] == 40


def test_evaluate_refuses_bad_input(runs, tmp_path, capsys):
    code, _, err = attnmt(capsys, "evaluate", runs["tsv"], "--limit", "0")
    assert code == 2 and "--limit" in err
    code, _, err = attnmt(capsys, "evaluate", tmp_path / "missing")
    assert code == 2 and "does not exist" in err
    code, _, err = attnmt(capsys, "evaluate", runs["tsv"], "--align-head", "1")
    assert code == 2 and "Transformer" in err


def test_aer_against_the_gold_links(runs, gold, capsys):
    code, out, _ = attnmt(capsys, "evaluate", runs["gold"], "--limit", "6")
    assert code == 0
    alignment = _result(runs["gold"])["alignment"]
    for key in ("precision", "recall", "aer"):
        assert 0.0 <= alignment[key] <= 1.0
        assert 0.0 <= alignment["diagonal"][key] <= 1.0
    assert alignment["sentences"] == 6 and sum(alignment["skipped"].values()) == 0
    # The diagonal baseline is the one computed here from the gold verses.
    cfg = load_config(runs["gold"] / "config.yaml")
    verses = [gold[ex.id] for ex in prepare(cfg.data).test[:6]]
    diagonal = alignment_scores(
        [diagonal_alignment(len(v.src), len(v.tgt)) for v in verses], [v.links for v in verses]
    )
    assert alignment["diagonal"]["aer"] == pytest.approx(diagonal["aer"], abs=1e-4)
    assert alignment["sure"] == diagonal["sure"]
    # One Pharaoh line per verse; every link inside the verse's words; one per English word.
    predicted = read_pharaoh(runs["gold"] / "eval" / alignment["file"])
    assert len(predicted) == 6
    for links, verse in zip(predicted, verses, strict=True):
        assert all(i < len(verse.src) and j < len(verse.tgt) for i, j in links)
        assert sorted(j for _, j in links) == list(range(len(verse.tgt)))
    report = (runs["gold"] / "eval" / "test-beam1.md").read_text(encoding="utf-8")
    assert "## Alignment error rate" in report and "| diagonal baseline |" in report
    assert "AER" in out and "diagonal baseline" in out
    # Which step aligns: the table's k = 0 is the report's own reading (the default offset).
    offsets = {row["offset"]: row for row in alignment["by_offset"]}
    assert set(offsets) == {-1, 0, 1, 2, 3}
    assert offsets[0]["aer"] == alignment["aer"]
    assert "decoder step t+k" in out and "| k | -1 | +0 | +1 | +2 | +3 |" in report


@pytest.mark.parametrize("name", ["gold", "gold-tf"])
def test_the_align_file_rescored_against_the_gold_links_gives_the_reported_aer(
    runs, gold, tmp_path, capsys, name
):
    # What `evaluate` reports is what it wrote: score its Pharaoh file against the gold
    # verses here, independently of the report's own counting.
    out_dir = tmp_path / "eval"
    code, _, _ = attnmt(capsys, "evaluate", runs[name], "--limit", "8", "--out", out_dir)
    assert code == 0
    alignment = json.loads((out_dir / "test-beam1.json").read_text(encoding="utf-8"))["alignment"]
    predicted = read_pharaoh(out_dir / alignment["file"])
    cfg = load_config(runs[name] / "config.yaml")
    verses = [gold[ex.id] for ex in prepare(cfg.data).test[:8]]
    assert len(predicted) == len(verses) == alignment["sentences"] == 8
    rescored = alignment_scores(predicted, [v.links for v in verses])
    for key in ("aer", "precision", "recall"):
        assert alignment[key] == pytest.approx(rescored[key], abs=5e-5), key  # 4 decimals
    for key in ("predicted", "sure", "sure_hits", "possible_hits"):
        assert alignment[key] == rescored[key], key
    # Some links right, some wrong: 2 steps leave the attention near chance, which still
    # hits 14-16 of the 110 sure links (train.seed 1-3, both models, fp32, Intel Xeon AMX).
    assert 0 < rescored["sure_hits"] < rescored["sure"]


def test_aer_per_layer_and_head_for_the_transformer(runs, capsys):
    code, _, _ = attnmt(capsys, "evaluate", runs["gold-tf"], "--limit", "4")
    assert code == 0
    alignment = _result(runs["gold-tf"])["alignment"]
    assert alignment["attention"] == {"layer": 1, "head": "mean", "offset": 0}
    heads = {(row["layer"], row["head"]): row for row in alignment["by_head"]}
    assert set(heads) == {(layer, head) for layer in (1, 2) for head in (1, 2, "mean")}
    assert alignment["aer"] == heads[(1, "mean")]["aer"]
    report = (runs["gold-tf"] / "eval" / "test-beam1.md").read_text(encoding="utf-8")
    assert "| layer | head |" in report and "(best)" in report
    code, _, _ = attnmt(
        capsys,
        "evaluate",
        runs["gold-tf"],
        "--limit",
        "4",
        "--align-layer",
        "2",
        "--align-head",
        "1",
        "--out",
        runs["gold-tf"] / "eval-head",
    )
    assert code == 0
    chosen = _result(runs["gold-tf"])
    picked = json.loads(
        (runs["gold-tf"] / "eval-head" / "test-beam1.json").read_text(encoding="utf-8")
    )["alignment"]
    assert picked["attention"] == {"layer": 2, "head": 1, "offset": 0}
    assert picked["aer"] == pytest.approx(heads[(2, 1)]["aer"])
    assert chosen["alignment"]["attention"] == {"layer": 1, "head": "mean", "offset": 0}  # kept


def test_compare_two_runs(runs, tmp_path, capsys):
    for name in ("tsv", "gold"):
        assert attnmt(capsys, "evaluate", runs[name], "--limit", "4")[0] == 0
    out_dir = tmp_path / "cmp"
    code, out, _ = attnmt(capsys, "compare", runs["tsv"], runs["gold"], "--out", out_dir)
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("| ")]
    header, tsv_row, gold_row = lines
    for column in ("BLEU", "chrF", "AER (%)", "parameters", "training time", "train tokens/s"):
        assert column in header
    assert tsv_row.startswith("| tsv |") and gold_row.startswith("| gold |")
    aer = header.strip("|").split(" | ").index("AER (%)")
    assert tsv_row.strip("| ").split(" | ")[aer] == "—"
    assert float(gold_row.strip("| ").split(" | ")[aer]) >= 0
    rows = json.loads((out_dir / "compare-test.json").read_text(encoding="utf-8"))
    assert [row["run"] for row in rows] == ["tsv", "gold"]
    assert all(row["trained_steps"] == 2 and row["tokens_per_s"] > 0 for row in rows)
    for name in ("compare-test.md", "compare-test-length.png", "compare-test-length.svg"):
        assert (out_dir / name).is_file()
    # A run without an evaluation of the split: say how to make one.
    code, _, err = attnmt(capsys, "compare", runs["tsv"], runs["gold"], "--split", "dev")
    assert code == 2 and f"attnmt evaluate {runs['gold']} --split dev" in err


def test_align_offset_reads_the_links_off_a_later_step(runs, tmp_path, capsys):
    code, _, _ = attnmt(
        capsys, "evaluate", runs["gold"], "--limit", "6", "--align-offset", "1", "--out", tmp_path
    )
    assert code == 0
    alignment = json.loads((tmp_path / "test-beam1.json").read_text(encoding="utf-8"))["alignment"]
    assert alignment["attention"]["offset"] == 1
    offsets = {row["offset"]: row for row in alignment["by_offset"]}
    assert alignment["aer"] == offsets[1]["aer"]
    report = (tmp_path / "test-beam1.md").read_text(encoding="utf-8")
    assert "weights of step t+1 for target word t" in report
    code, _, err = attnmt(capsys, "plot", runs["gold"], "--align-offset", "1")
    assert code == 2 and "leave it out" in err


def test_swapped_run_translates_english_to_greek_and_scores_turned_links(runs, gold, capsys):
    cfg = load_config(runs["gold-swap"] / "config.yaml")
    test = prepare(cfg.data).test[:6]
    verses = [gold[ex.id] for ex in test]
    assert [ex.src for ex in test] == [" ".join(v.tgt) for v in verses]  # English first
    assert [ex.tgt for ex in test] == [" ".join(v.src) for v in verses]
    code, _, _ = attnmt(capsys, "evaluate", runs["gold-swap"], "--limit", "6")
    assert code == 0
    alignment = _result(runs["gold-swap"])["alignment"]
    assert alignment["swapped"] and alignment["sentences"] == 6
    turned = [v.transposed() for v in verses]
    diagonal = alignment_scores(
        [diagonal_alignment(len(v.src), len(v.tgt)) for v in turned], [v.links for v in turned]
    )
    assert alignment["diagonal"]["aer"] == pytest.approx(diagonal["aer"], abs=1e-4)
    # One link per Greek (target) word, each to an English (source) word.
    predicted = read_pharaoh(runs["gold-swap"] / "eval" / alignment["file"])
    for links, verse in zip(predicted, verses, strict=True):
        assert all(i < len(verse.tgt) and j < len(verse.src) for i, j in links)
        assert sorted(j for _, j in links) == list(range(len(verse.src)))
    report = (runs["gold-swap"] / "eval" / "test-beam1.md").read_text(encoding="utf-8")
    assert "Gold English→Greek links" in report


def test_symmetrized_attention_of_both_directions(runs, gold, capsys, tmp_path):
    from attnmt.alignment.links import SYMMETRIZATIONS, symmetrize

    assert attnmt(capsys, "evaluate", runs["gold-swap"], "--limit", "6", "--out", tmp_path)[0] == 0
    code, out, _ = attnmt(
        capsys, "evaluate", runs["gold"], "--limit", "6", "--symmetrize-with", runs["gold-swap"]
    )
    assert code == 0 and "grow-diag-final-and" in out
    both = _result(runs["gold"])["alignment"]["symmetrized"]
    assert both["sentences"] == 6 and both["other_run"] == str(runs["gold-swap"])
    # The same figures from the two directions' own link files, the reverse turned round.
    forward = read_pharaoh(runs["gold"] / "eval" / "test-beam1.align")
    reverse = [{(j, i) for i, j in links} for links in read_pharaoh(tmp_path / "test-beam1.align")]
    cfg = load_config(runs["gold"] / "config.yaml")
    sure = [gold[ex.id].links for ex in prepare(cfg.data).test[:6]]
    for key, links in (("one_direction", forward), ("other_direction", reverse)):
        assert both[key]["aer"] == pytest.approx(alignment_scores(links, sure)["aer"], abs=1e-4)
    for method in SYMMETRIZATIONS:
        made = [symmetrize(f, r, method) for f, r in zip(forward, reverse, strict=True)]
        assert both[method]["aer"] == pytest.approx(alignment_scores(made, sure)["aer"], abs=1e-4)
    assert both["intersection"]["precision"] >= both["union"]["precision"]
    assert both["union"]["recall"] >= both["intersection"]["recall"]
    report = (runs["gold"] / "eval" / "test-beam1.md").read_text(encoding="utf-8")
    assert "| grow-diag-final-and |" in report and "the other direction" in report


def test_symmetrize_with_refuses_the_same_direction_and_other_corpora(runs, capsys):
    code, _, err = attnmt(capsys, "evaluate", runs["gold"], "--symmetrize-with", runs["gold-tf"])
    assert code == 2 and "other way" in err and "data.swap=true" in err
    code, _, err = attnmt(capsys, "evaluate", runs["tsv"], "--symmetrize-with", runs["gold-swap"])
    assert code == 2 and "gold alignments" in err
    code, _, err = attnmt(
        capsys, "evaluate", runs["gold-plain"], "--symmetrize-with", runs["gold-swap"]
    )
    assert code == 2 and "no attention" in err
