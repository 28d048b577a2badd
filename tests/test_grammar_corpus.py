"""`data.corpus: grammar`: the grammar lab prepared like any corpus (a word-level vocabulary,
the token store, gold links and causes in files), and `attnmt evaluate` scoring the
attention against its sure and possible links, by phenomenon."""

from __future__ import annotations

import json

import pytest

from attnmt.alignment.links import alignment_scores
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.config.checks import GRAMMAR_PAIRS
from attnmt.data import grammar, grammar_lexicon
from attnmt.data.alignments import parse_pharaoh
from attnmt.data.grammar_corpus import grammar_pairs
from attnmt.data.preparation import prepare
from attnmt.errors import ConfigError
from attnmt.explain.measures import cause_links
from attnmt.training import train

SMALL = [
    "data.corpus=grammar",
    "data.synthetic_train_size=300",
    "data.synthetic_dev_size=12",
    "data.grammar_train_words=[2, 8]",
    "data.grammar_dev_words=[2, 8]",
    "data.grammar_test_words=[10, 14]",
]


def test_the_config_names_the_pairs_the_generator_makes():
    assert GRAMMAR_PAIRS == grammar_lexicon.PAIRS


def test_bad_grammar_keys_are_refused_in_one_sentence():
    with pytest.raises(ConfigError, match=r"data\.grammar_pair.*en-fr"):
        load_config(None, ["data.corpus=grammar", "data.grammar_pair=en-xx"])
    with pytest.raises(ConfigError, match="grammar_test_words must be"):
        load_config(None, ["data.corpus=grammar", "data.grammar_test_words=[9, 3]"])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    cache = tmp_path_factory.mktemp("grammar-cache")
    cfg = load_config(None, [*SMALL, f"data.cache_dir={cache}"])
    return cfg, prepare(cfg.data)


def test_prepared_like_any_corpus_with_its_gold_in_files(prepared):
    cfg, data = prepared
    pairs = grammar_pairs(cfg.data)
    assert [len(data.split(n)) for n in ("train", "dev", "test")] == [300, 12, 12]
    # one token a word, both languages in one vocabulary: ids decode to the very words
    first = data.test[0]
    assert first.src == " ".join(pairs["test"][0].src)
    assert data.vocab.src is data.vocab.tgt
    assert len(first.src_ids) == len(first.src.split())
    # the test split is longer than anything in training
    longest_train = max(len(ex.src.split()) for ex in data.train)
    assert longest_train <= 8 < 10 <= min(len(ex.src.split()) for ex in data.test)
    gold = data.directory / "gold"
    for split in ("train", "dev", "test", "all"):
        chosen = pairs[split] if split != "all" else [p for n in pairs for p in pairs[n]]
        sure = (gold / f"{split}.sure").read_text(encoding="utf-8").splitlines()
        possible = (gold / f"{split}.possible").read_text(encoding="utf-8").splitlines()
        causes = (gold / f"{split}.causes.jsonl").read_text(encoding="utf-8").splitlines()
        src = (gold / f"{split}.src").read_text(encoding="utf-8").splitlines()
        assert len(sure) == len(possible) == len(causes) == len(src) == len(chosen)
        for line_s, line_p, line_c, text, pair in zip(
            sure, possible, causes, src, chosen, strict=True
        ):
            assert parse_pharaoh(line_s) == set(pair.sure)
            assert set(pair.sure) <= parse_pharaoh(line_p) == set(pair.possible)
            record = json.loads(line_c)
            assert [set(c) for c in record["causes"]] == [set(c) for c in pair.causes]
            assert len(record["phenomena"]) == len(pair.tgt) and text == " ".join(pair.src)
    assert data.stats["gold_links"]["test"] == sum(len(p.sure) for p in pairs["test"])


def test_evaluate_scores_the_attention_against_sure_and_possible_links(prepared, tmp_path, capsys):
    cfg, _ = prepared
    run = tmp_path / "run"
    overrides = [
        *SMALL,
        f"data.cache_dir={cfg.data.cache_dir}",
        "data.batch_tokens=200",
        *("model.embed_size=8", "model.hidden_size=8", "train.max_steps=3"),
        *("train.validate_every=3", "train.valid_sentences=2", "train.precision=fp32"),
        f"train.run_dir={run}",
    ]
    train(load_config(None, overrides), progress=False)
    assert main(["evaluate", str(run), "--limit", "5", "--explain", "attention"]) == 0
    capsys.readouterr()
    (result,) = [json.loads(p.read_text()) for p in (run / "eval").glob("test-*.json")]
    alignment = result["alignment"]
    assert alignment["sentences"] == 5 and sum(alignment["skipped"].values()) == 0
    pairs = grammar_pairs(cfg.data)["test"][:5]
    # the counts are those of the lab's links, possible ones included (P ⊇ S)
    assert alignment["sure"] == sum(len(p.sure) for p in pairs)
    assert alignment["possible"] == sum(len(p.possible) for p in pairs)
    predicted = [parse_pharaoh(line) for line in
                 (run / "eval" / alignment["file"]).read_text().splitlines()]  # fmt: skip
    want = alignment_scores(predicted, [p.sure for p in pairs], [p.possible for p in pairs])
    assert alignment["aer"] == pytest.approx(want["aer"], abs=1e-4)
    rows = alignment["by_phenomenon"]
    assert {"crossing", "not crossing", "plain"} <= set(rows)
    assert rows["crossing"]["sure"] + rows["not crossing"]["sure"] == alignment["sure"]
    for row in rows.values():
        assert 0.0 <= row["precision"] <= 1.0 and 0.0 <= row["recall"] <= 1.0
    # the explanations are scored against the causes, not the links: the attention read
    # as an explanation gives the same links as above, scored against other gold
    explained = result["explanations"]
    assert explained["gold"] == "causes"
    causes = [cause_links(p, len(p.src)) for p in pairs]
    assert any(c != set(p.sure) for c, p in zip(causes, pairs, strict=True))
    want = alignment_scores(predicted, causes)
    assert explained["methods"]["attention"]["aer"] == pytest.approx(100 * want["aer"], abs=0.01)
    # the Python face measures the same, from the same function
    import attnmt

    scores = attnmt.evaluate(run, limit=5, explain="attention", device="cpu")
    assert scores.alignment["aer"] == alignment["aer"]
    measured = {k: v for k, v in scores.explanations["methods"]["attention"].items()
                if k != "ms_per_sentence"}  # fmt: skip
    assert measured.items() <= explained["methods"]["attention"].items()  # all but the time
    assert "| attention |" in scores.explanations_table()
    # the lab's refinements: an untrained model translates nothing exactly, so nothing is
    # scored where it responds; occlusion by another word of the slot is measured anyway
    probed = explained["where_output_changes"]
    assert probed["words"] <= probed["target_words"] and probed["sentences"] <= 5
    assert set(explained["by_replacement"]) >= {"attention", "random"}
    assert "deletion AUC, replacement" in scores.explanations_table()


def test_align_runs_eflomal_on_the_gold_files_with_sure_and_possible_links(
    prepared, tmp_path, capsys
):
    pytest.importorskip("eflomal", reason="eflomal is installed by `make setup`")
    from attnmt.data.alignments import read_pharaoh

    cfg, data = prepared
    gold = data.directory / "gold"
    pairs = [p for split in grammar_pairs(cfg.data).values() for p in split]
    out = tmp_path / "align"
    files = ["--src", str(gold / "all.src"), "--tgt", str(gold / "all.tgt")]
    both = ["--gold", str(gold / "all.sure"), "--possible", str(gold / "all.possible")]
    assert main(["align", *files, *both, "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    scores = report["scores"]["all"]["grow-diag-final-and"]
    found = read_pharaoh(out / "grow-diag-final-and.align")
    want = alignment_scores(found, [p.sure for p in pairs], [p.possible for p in pairs])
    assert scores["aer"] == pytest.approx(want["aer"], abs=1e-4)
    assert scores["possible"] == sum(len(p.possible) for p in pairs) > scores["sure"]
    # the two files the wrong way round: refused in one sentence, nothing written
    capsys.readouterr()
    swapped = ["--gold", str(gold / "all.possible"), "--possible", str(gold / "all.sure")]
    assert main(["align", *files, *swapped, "--out", str(tmp_path / "x")]) == 2
    assert "the possible links include the sure ones" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def _probed(model_output):
    """model_probes on lab sentences with a stand-in for the model: `model_output(tgt,
    first)` gives its words for a source whose generator target is `tgt`, `first` the
    target of the sentence before any substitution."""
    from types import SimpleNamespace

    from attnmt.alignment.links import SideWords
    from attnmt.data.synthetic import SymbolVocab
    from attnmt.explain import measures

    pairs = grammar.generate("en-fr", 30, seed=5, min_words=4, max_words=12)
    written = {}  # source text -> (its target, the unsubstituted sentence's target)
    for n, p in enumerate(pairs):  # seeded by the sentence's index, as model_probes draws them
        written[" ".join(p.src)] = (p.tgt, p.tgt)
        for sub in grammar.substitutions(p, seed=n):
            written[" ".join(sub.src)] = (sub.tgt, p.tgt)
    words = sorted({w for text, (tgt, _) in written.items() for w in [*text.split(), *tgt]})
    vocab = SimpleNamespace(src=SymbolVocab(words), tgt=SymbolVocab(words))

    def translate_ids(model, sources, decode, **_):
        texts = [" ".join(vocab.src.itos[i] for i in ids) for ids in sources]
        return [SimpleNamespace(text=" ".join(model_output(*written[t]))) for t in texts]

    def side(ws):
        return SideWords(list(range(len(ws))), list(ws))

    items = [
        measures.Item(vocab.src.encode(" ".join(p.src)), [], side(p.src), side(p.tgt),
                      cause_links(p, len(p.src)), p)
        for p in pairs
    ]  # fmt: skip
    loaded = SimpleNamespace(vocab=vocab, model=None)
    original = measures.translate_ids
    measures.translate_ids = translate_ids
    try:
        return pairs, items, measures.model_probes(loaded, items, limit=100)
    finally:
        measures.translate_ids = original


def test_probes_score_only_the_words_the_model_changes():
    from attnmt.explain.measures import _where_output_changes

    # a model that writes what the generator writes: every word its causes change responds
    pairs, items, probes = _probed(lambda tgt, first: list(tgt))
    for n, (p, probe) in enumerate(zip(pairs, probes, strict=True)):
        want = {j for s in grammar.substitutions(p, seed=n)
                for j, (a, b) in enumerate(zip(p.tgt, s.tgt, strict=True))
                if a != b and set(s.positions) & p.causes[j]}  # fmt: skip
        assert probe.responsive == want
        assert all(probe.replacement[i] != p.src[i] for i in probe.replacement)
    assert sum(len(p.responsive) for p in probes) > 30
    exact = _where_output_changes([item.links for item in items], items, probes)
    assert exact["aer"] == 0.0  # the causes themselves, scored where the model responds
    # a model that writes its first sentence whatever is substituted: nothing responds,
    # so nothing is scored (the plain AER against the causes would still score it all)
    _, _, deaf = _probed(lambda tgt, first: list(first))
    assert all(p.responsive == set() for p in deaf)
    assert _where_output_changes([item.links for item in items], items, deaf) is None
    # a model that gets a sentence wrong has nothing scored there, whatever its length
    _, _, wrong = _probed(lambda tgt, first: ["x", *tgt[1:]])
    assert all(p.responsive is None for p in wrong)
    _, _, longer = _probed(lambda tgt, first: [*tgt, "x", "x"])
    assert all(p.responsive is None for p in longer)
