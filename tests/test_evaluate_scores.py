"""`attnmt evaluate`'s BLEU and chrF recomputed with sacrebleu alone from the files it writes
(the translations and one file per reference stream), on a corpus with a second reference
for some sentences only."""

from __future__ import annotations

import json
import random

import pytest
import sacrebleu

from attnmt.cli import main
from attnmt.config import load_config
from attnmt.training import train
from conftest import TINY, WORDS


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    rng = random.Random(1)
    rows = []
    for i in range(48):
        words = [rng.choice(WORDS[:10]) for _ in range(rng.randint(2, 6))]
        second = f"\t{' '.join(reversed(words))}" if i % 3 == 0 else ""  # some: 2 references
        rows.append(f"{' '.join(words)}\t{' '.join(words)}{second}")
    corpus = root / "corpus.tsv"
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    overrides = [*TINY, f"data.cache_dir={root / 'cache'}", "data.corpus=tsv"]
    overrides += [f"data.{s}_path={corpus}" for s in ("train", "dev", "test")]
    overrides += ["data.drop_held_out=false", "data.vocab_size=40", "train.lr=0.02"]
    overrides += ["train.max_steps=120", f"train.run_dir={root / 'run'}"]
    train(load_config(None, overrides), progress=False)
    assert main(["evaluate", str(root / "run"), "--limit", "30"]) == 0
    return root / "run" / "eval"


def test_bleu_and_chrf_are_sacrebleu_s_on_the_written_files(evaluated):
    result = json.loads((evaluated / "test-beam1.json").read_text(encoding="utf-8"))
    hypotheses = (evaluated / "test-beam1.txt").read_text(encoding="utf-8").splitlines()
    streams = [
        [line or None for line in path.read_text(encoding="utf-8").splitlines()]
        for path in sorted(evaluated.glob("test-beam1.ref*.txt"))
    ]
    assert len(streams) == 2 and len(hypotheses) == 30
    assert all(len(stream) == 30 for stream in streams)
    assert streams[1].count(None) == 20  # the second reference of every third sentence only
    bleu = sacrebleu.metrics.BLEU(tokenize=result["bleu_tokenizer"])
    bleu = bleu.corpus_score(hypotheses, streams)
    chrf = sacrebleu.metrics.CHRF().corpus_score(hypotheses, streams)
    # A model that writes words, so the comparisons below are not of zeros: 120 fp32 steps
    # (conftest.TINY) gave BLEU 7.3-16.6 and chrF 24-34 for train.seed 1-3 (Intel Xeon, AMX).
    assert result["bleu"] > 0 and result["chrf"] > 0
    assert result["bleu"] == pytest.approx(bleu.score, abs=0.005)
    assert result["chrf"] == pytest.approx(chrf.score, abs=0.005)
    assert result["references"] == 2
