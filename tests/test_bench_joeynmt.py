"""The JoeyNMT side of `make bench` (benchmarks/joeynmt_side.py): its configs, vocabulary
and log parsing without JoeyNMT (the log fixtures are lines JoeyNMT 2.3 wrote), and one
tiny real training and decoding where JoeyNMT's venv (benchmarks/.venv-joeynmt) exists."""

from __future__ import annotations

import importlib.util
import math
from datetime import datetime
from pathlib import Path

import pytest
import sentencepiece as spm
import yaml

from attnmt.config import load_config
from attnmt.data import prepare
from conftest import mixed_corpus

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
_spec = importlib.util.spec_from_file_location("joeynmt_side", BENCH / "joeynmt_side.py")
js = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(js)

# From a train.log of `joey_config("transformer", ...)` stopped by SIGINT in a validation
# (paths shortened; the model summary's continuation lines are as JoeyNMT writes them).
LOG = """\
2026-11-24 13:56:22,801 - INFO - joeynmt.model - Total params: 7578624
2026-11-24 13:56:22,802 - INFO - joeynmt.prediction - Model(
\tencoder=TransformerEncoder(num_layers=3, num_heads=4, alpha=1.0, layer_norm="pre"),
)
2026-11-24 13:56:24,323 - INFO - joeynmt.builders - Adam(lr=2.5e-06, weight_decay=0.0, betas=[0.9, 0.999])
2026-11-24 13:56:24,323 - INFO - joeynmt.builders - NoamScheduler(warmup=400, factor=0.32, hidden_size=256)
2026-11-24 13:56:24,323 - INFO - joeynmt.training - EPOCH 1
2026-11-24 13:56:59,434 - INFO - joeynmt.training - Epoch   1, Step:       20, Batch Loss:     7.551968, Batch Acc: 0.001700, Tokens per Sec:      502, Lr: 0.000050
2026-11-24 13:56:59,435 - INFO - joeynmt.prediction - Predicting 50 example(s)... (Greedy decoding with min_output_length=1, max_output_length=-1, return_prob='none', generate_unk=True, repetition_penalty=-1, no_repeat_ngram_size=-1)
2026-11-24 13:57:38,950 - INFO - joeynmt.prediction - Generation took 39.5142[sec].
2026-11-24 13:57:38,970 - INFO - joeynmt.metrics - nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0
2026-11-24 13:57:38,970 - INFO - joeynmt.prediction - Evaluation result (greedy): bleu:   0.03, loss:   7.48, ppl: 1768.00, acc:   0.02, 0.0135[sec]
2026-11-24 13:57:38,980 - INFO - joeynmt.training - Hooray! New best validation result [bleu]!
2026-11-24 13:57:39,351 - INFO - joeynmt.training - Checkpoint saved in /w/model/20.ckpt.
2026-11-24 13:58:18,208 - INFO - joeynmt.training - Epoch   1, Step:       40, Batch Loss:     6.750235, Batch Acc: 0.041302, Tokens per Sec:      399, Lr: 0.000100
2026-11-24 13:58:18,210 - INFO - joeynmt.prediction - Predicting 50 example(s)... (Greedy decoding with min_output_length=1, max_output_length=-1, return_prob='none', generate_unk=True, repetition_penalty=-1, no_repeat_ngram_size=-1)
2026-11-24 13:58:19,750 - INFO - joeynmt.training - Interrupt at epoch 1, step 40.
2026-11-24 13:58:19,884 - INFO - joeynmt.training - Checkpoint saved in /w/model/40.ckpt.
"""  # noqa: E501

# The end of a tiny run that reached `training.updates` (validation_freq 3, updates 6).
LOG_UPDATES = """\
2026-11-24 14:04:12,688 - INFO - joeynmt.training - EPOCH 1
2026-11-24 14:04:12,747 - INFO - joeynmt.training - Epoch   1, Step:        3, Batch Loss:     3.546079, Batch Acc: 0.005464, Tokens per Sec:     3438, Lr: 0.000030
2026-11-24 14:04:12,747 - INFO - joeynmt.prediction - Predicting 8 example(s)... (Greedy decoding with min_output_length=1, max_output_length=-1, return_prob='none', generate_unk=True, repetition_penalty=-1, no_repeat_ngram_size=-1)
2026-11-24 14:04:12,788 - INFO - joeynmt.prediction - Generation took 0.0405[sec].
2026-11-24 14:04:12,795 - INFO - joeynmt.prediction - Evaluation result (greedy): bleu:   0.89, loss:   3.58, ppl:  35.81, acc:   0.02, 0.0062[sec]
2026-11-24 14:04:12,795 - INFO - joeynmt.training - Hooray! New best validation result [bleu]!
2026-11-24 14:04:12,812 - INFO - joeynmt.training - Checkpoint saved in /tmp/tinyjoey/transformer/model/3.ckpt.
2026-11-24 14:04:12,832 - INFO - joeynmt.training - Epoch   1, total training loss: 14.23, num. of seqs: 40, num. of tokens: 244, 0.0722[sec]
2026-11-24 14:04:12,833 - INFO - joeynmt.training - EPOCH 2
2026-11-24 14:04:12,864 - INFO - joeynmt.training - Epoch   2, Step:        6, Batch Loss:     3.539443, Batch Acc: 0.015385, Tokens per Sec:     4355, Lr: 0.000060
2026-11-24 14:04:12,864 - INFO - joeynmt.prediction - Predicting 8 example(s)... (Greedy decoding with min_output_length=1, max_output_length=-1, return_prob='none', generate_unk=True, repetition_penalty=-1, no_repeat_ngram_size=-1)
2026-11-24 14:04:12,890 - INFO - joeynmt.prediction - Generation took 0.0255[sec].
2026-11-24 14:04:12,891 - INFO - joeynmt.prediction - Evaluation result (greedy): bleu:   0.89, loss:   3.58, ppl:  35.71, acc:   0.02, 0.0008[sec]
2026-11-24 14:04:12,893 - INFO - joeynmt.training - Training ended since maximum num. of updates 6 was reached.
2026-11-24 14:04:12,893 - INFO - joeynmt.training - Best validation result (greedy) at step        3:   0.89 bleu.
2026-11-24 14:04:12,905 - INFO - joeynmt.training - Checkpoint saved in /tmp/tinyjoey/transformer/model/6.ckpt.
2026-11-24 14:04:12,906 - INFO - joeynmt.training - Skipping test after training.
"""  # noqa: E501

# validations.txt of an rnnsearch run (tab-separated; "*" marks a new best).
VALIDATIONS = (
    "Steps: 20\tloss: 6.34530\tacc: 0.07555\tppl: 569.81049\tbleu: 0.02708\tLR: 0.00100000\t*\n"
    "Steps: 40\tloss: 6.43320\tacc: 0.07555\tppl: 622.15928\tbleu: 0.02708\tLR: 0.00100000\t\n"
)


def _at(clock: str) -> datetime:
    return datetime.strptime(f"2026-11-24 {clock}", "%Y-%m-%d %H:%M:%S,%f")


# --------------------------------------------------------------------------------------
# Logs
# --------------------------------------------------------------------------------------


def test_parse_log_and_steps():
    records = js.parse_log(LOG)
    assert len(records) == 16  # the summary's continuation lines are skipped
    assert records[0]["logger"] == "joeynmt.model" and records[0]["level"] == "INFO"
    steps = js.parse_steps(records)
    assert [s["step"] for s in steps] == [20, 40]
    assert [s["tokens_per_s"] for s in steps] == [502.0, 399.0]
    assert steps[0]["loss"] == pytest.approx(7.551968) and steps[1]["lr"] == pytest.approx(1e-4)
    assert steps[1]["time"] == _at("13:58:18,208")


def test_validation_windows_and_training_seconds():
    records = js.parse_log(LOG)
    windows = js.validation_windows(records)
    assert windows == [
        (_at("13:56:59,435"), _at("13:57:39,351")),  # ends with the checkpoint it saved
        (_at("13:58:18,210"), _at("13:58:19,750")),  # cut short by the interrupt
    ]
    seconds = js.training_seconds(records)
    assert seconds["total_s"] == pytest.approx(115.427)
    assert seconds["valid_s"] == pytest.approx(39.916 + 1.540)
    assert seconds["train_s"] == pytest.approx(115.427 - 39.916 - 1.540)


def test_run_that_reached_its_updates():
    records = js.parse_log(LOG_UPDATES)
    assert [(s["epoch"], s["step"]) for s in js.parse_steps(records)] == [(1, 3), (2, 6)]
    assert js.validation_windows(records) == [
        (_at("14:04:12,747"), _at("14:04:12,812")),  # the epoch's summary line is training's
        (_at("14:04:12,864"), _at("14:04:12,893")),  # up to "Training ended"
    ]
    seconds = js.training_seconds(records)
    assert seconds["total_s"] == pytest.approx(0.205)
    assert seconds["train_s"] == pytest.approx(0.205 - 0.065 - 0.029)


def test_training_seconds_without_training():
    assert js.training_seconds(js.parse_log(LOG.splitlines()[0]))["train_s"] == 0.0


def test_parse_validations():
    rows = js.parse_validations(VALIDATIONS)
    assert rows == [
        {"best": True, "steps": 20, "loss": 6.3453, "acc": 0.07555, "ppl": 569.81049,
         "bleu": 0.02708, "lr": 0.001},
        {"best": False, "steps": 40, "loss": 6.4332, "acc": 0.07555, "ppl": 622.15928,
         "bleu": 0.02708, "lr": 0.001},
    ]  # fmt: skip


# --------------------------------------------------------------------------------------
# Configs
# --------------------------------------------------------------------------------------

DATA = {
    "train": Path("/d/train"),
    "dev": Path("/d/dev"),
    "vocab": Path("/d/vocab.txt"),
    "spm_model": Path("/d/joint.model"),
    "longest": 90,
}


def _config(arch: str, **overrides) -> dict:
    options = {"batch_tokens": 1536, "seed": 7, "validation_freq": 500, "max_updates": 3000}
    return js.joey_config(arch, DATA, Path("/w/model"), **{**options, **overrides})


def test_rnnsearch_config():
    cfg = _config("rnnsearch")
    model = cfg["model"]
    enc, dec = model["encoder"], model["decoder"]
    assert not model["tied_embeddings"] and not model["tied_softmax"]  # as attnmt's RNNs
    assert enc["type"] == "recurrent" and enc["rnn_type"] == "gru" and enc["bidirectional"]
    assert enc["hidden_size"] == 256 and enc["num_layers"] == 1
    assert enc["embeddings"]["embedding_dim"] == 256 and enc["embeddings"]["dropout"] == 0.2
    assert dec["type"] == "recurrent" and dec["rnn_type"] == "gru" and dec["hidden_size"] == 256
    assert dec["attention"] == "bahdanau" and dec["input_feeding"] is False
    assert dec["init_hidden"] == "bridge" and dec["dropout"] == 0.2
    assert dec["embeddings"]["embedding_dim"] == 256
    # JoeyNMT's default Xavier init saturates its bias-free output path and never learns
    # on this corpus (joeynmt_side._model): the init that does
    assert (model["initializer"], model["init_weight"]) == ("uniform", 0.1)
    assert (model["embed_initializer"], model["embed_init_weight"]) == ("normal", 0.1)
    train = cfg["training"]
    assert train["optimizer"] == "adam" and train["learning_rate"] == 0.001
    # constant: JoeyNMT 2.3 rejects no scheduler, and "plateau" breaks with torch 2.13
    assert train["scheduling"] == "exponential" and train["decrease_factor"] == 1.0
    assert train["clip_grad_norm"] == 1.0 and train["label_smoothing"] == 0.0


def test_transformer_config():
    cfg = _config("transformer")
    model = cfg["model"]
    assert model["tied_embeddings"] and model["tied_softmax"]
    for stack in (model["encoder"], model["decoder"]):
        assert stack["type"] == "transformer" and stack["layer_norm"] == "pre"
        assert (stack["num_layers"], stack["num_heads"]) == (3, 4)
        assert (stack["hidden_size"], stack["ff_size"], stack["dropout"]) == (256, 1024, 0.1)
        assert stack["embeddings"]["embedding_dim"] == 256 and stack["embeddings"]["scale"]
    train = cfg["training"]
    assert train["scheduling"] == "noam" and train["learning_rate_warmup"] == 400
    assert train["label_smoothing"] == 0.1 and train["clip_grad_norm"] == 1.0

    def noam(step: int) -> float:  # joeynmt.builders.NoamScheduler
        upper = min(step**-0.5, step * train["learning_rate_warmup"] ** -1.5)
        return train["learning_rate_factor"] * 256**-0.5 * upper

    assert noam(400) == pytest.approx(0.001)  # attnmt's peak, at the end of warm-up
    assert train["learning_rate"] == pytest.approx(noam(1))
    assert train["learning_rate_min"] < noam(1)  # JoeyNMT stops below learning_rate_min


def test_shared_config_fields():
    cfg = _config("rnnsearch", validation_freq=20, max_updates=None, beam=1)
    train, data, testing = cfg["training"], cfg["data"], cfg["testing"]
    assert cfg["use_cuda"] is False and cfg["random_seed"] == 7 and cfg["model_dir"] == "/w/model"
    assert train["batch_type"] == "token" and train["batch_size"] == 1536
    assert train["validation_freq"] == 20 and train["logging_freq"] == 20
    assert "updates" not in train and train["epochs"] == 1000
    assert train["early_stopping_metric"] == "bleu" and 0 < train["keep_best_ckpts"] <= 3
    assert testing["eval_metrics"] == ["bleu"] and testing["beam_size"] == 1
    assert data["train"] == "/d/train" and data["dev"] == "/d/dev"
    for side, lang in ((data["src"], "src"), (data["trg"], "tgt")):
        assert side["lang"] == lang and side["level"] == "bpe" and side["lowercase"] is False
        assert side["tokenizer_type"] == "sentencepiece" and side["max_length"] == 100
        assert side["tokenizer_cfg"]["model_file"] == "/d/joint.model"
        assert side["voc_file"] == "/d/vocab.txt"
    specials = data["special_symbols"]
    assert (specials["unk_id"], specials["pad_id"], specials["bos_id"], specials["eos_id"]) == (
        0, 1, 2, 3,
    )  # fmt: skip
    assert _config("rnnsearch")["training"]["updates"] == 3000
    assert _config("rnnsearch", validation_freq=500)["training"]["logging_freq"] == 50
    assert _config("transformer", validation_freq=7)["training"]["logging_freq"] == 7
    assert yaml.safe_load(yaml.safe_dump(cfg)) == cfg  # plain YAML values only


def test_config_longest_sentence_is_kept():
    cfg = js.joey_config(
        "transformer", {**DATA, "longest": 130}, Path("/w/m"), batch_tokens=64, seed=1,
        validation_freq=10, max_updates=10,
    )  # fmt: skip
    assert cfg["data"]["src"]["max_length"] == cfg["data"]["trg"]["max_length"] == 130


def test_unknown_arch():
    with pytest.raises(ValueError, match="rnnsearch, transformer"):
        _config("luong")


def test_logging_freq_divides_validation_freq():
    for freq in (1, 7, 20, 50, 97, 100, 120, 500, 1000):
        logging = js._logging_freq(freq)
        assert logging <= min(freq, 50) and freq % logging == 0


def test_train_refuses_a_model_dir_that_would_empty_work(tmp_path):
    config = {"model_dir": str(tmp_path)}
    with pytest.raises(ValueError, match="must not be"):
        js.train(Path("/nonexistent/python"), config, tmp_path)


def test_ensure_venv_is_free_once_stamped(tmp_path):
    python = tmp_path / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    (tmp_path / js.STAMP).write_text("ok\n")
    assert js.ensure_venv(tmp_path) == python


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """An attnmt prepared-data folder of a 40-pair TSV corpus (120 sentencepiece pieces)."""
    root = tmp_path_factory.mktemp("joey-prepared")
    corpus = mixed_corpus(root)
    overrides = [
        f"data.cache_dir={root / 'cache'}",
        "data.corpus=tsv",
        "data.drop_held_out=false",
        "data.vocab_size=120",
    ]
    overrides += [f"data.{split}_path={corpus}" for split in ("train", "dev", "test")]
    return prepare(load_config(None, overrides).data).directory


def test_write_joey_data(prepared, tmp_path):
    data = js.write_joey_data(prepared, tmp_path / "joey", valid_sentences=5)
    processor = spm.SentencePieceProcessor(model_file=str(prepared / "vocab" / "joint.model"))
    pieces = data["vocab"].read_text(encoding="utf-8").splitlines()
    # JoeyNMT prepends <unk> <pad> <s> </s>: then piece i of attnmt is JoeyNMT's token i
    assert pieces == [processor.id_to_piece(i) for i in range(4, processor.get_piece_size())]
    assert not {"<unk>", "<pad>", "<s>", "</s>"} & set(pieces)
    for split in ("train", "test"):
        for side in ("src", "tgt"):
            written = (tmp_path / "joey" / f"{split}.{side}").read_text(encoding="utf-8")
            assert written == (prepared / f"{split}.{side}").read_text(encoding="utf-8")
    dev = (prepared / "dev.src").read_text(encoding="utf-8").splitlines()
    assert data["dev"].with_suffix(".src").read_text(encoding="utf-8").splitlines() == dev[:5]
    assert data["train"] == tmp_path / "joey" / "train" and data["test_src"].is_file()
    assert data["spm_model"].read_bytes() == (prepared / "vocab" / "joint.model").read_bytes()
    train = (prepared / "train.src").read_text(encoding="utf-8").splitlines()
    train += (prepared / "train.tgt").read_text(encoding="utf-8").splitlines()
    assert data["longest"] == max(len(ids) for ids in processor.encode(train))


def test_write_vocab_refuses_unreadable_pieces(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        js.write_vocab(["▁a", "b c"], tmp_path / "vocab.txt")
    with pytest.raises(ValueError, match="cannot read"):
        js.write_vocab(["▁a", "<unk>"], tmp_path / "vocab.txt")


# --------------------------------------------------------------------------------------
# The real thing, where JoeyNMT's venv was made (python -c "... ensure_venv()")
# --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(
    not (js.JOEY_VENV / js.STAMP).is_file(),
    reason="JoeyNMT's venv is not there (benchmarks/joeynmt_side.py: ensure_venv())",
)
def test_joeynmt_trains_and_decodes(prepared, tmp_path):
    python = js.ensure_venv()
    data = js.write_joey_data(prepared, tmp_path / "data", valid_sentences=8)
    model_dir = tmp_path / "run" / "model"
    config = js.joey_config(
        "rnnsearch", data, model_dir, batch_tokens=96, seed=1, validation_freq=3, max_updates=6
    )
    for stack in ("encoder", "decoder"):  # a tiny model: seconds, not minutes
        config["model"][stack]["hidden_size"] = 16
        config["model"][stack]["embeddings"]["embedding_dim"] = 16
    run = js.train(python, config, tmp_path / "run", threads=1)
    assert run["steps"] == 6 and not run["interrupted"]
    assert [point["step"] for point in run["curve"]] == [3, 6]
    assert all(p["dev_ppl"] > 1 and 0 <= p["dev_bleu"] <= 100 for p in run["curve"])
    assert 0 < run["curve"][0]["seconds"] < run["curve"][1]["seconds"] < run["wall_s"]
    assert 0 <= run["curve"][0]["train_seconds"] <= run["curve"][1]["train_seconds"]
    assert run["total_tokens"] > 6 and run["tokens_per_s"] > 0 and run["tokens_per_s_computed"] > 0
    assert run["params"] > 0 and run["best_checkpoint"].is_file()
    assert (model_dir / "trg_vocab.txt").read_text(encoding="utf-8").splitlines()[4:] == (
        data["vocab"].read_text(encoding="utf-8").splitlines()
    )
    lines = data["test_src"].read_text(encoding="utf-8").splitlines()[:6]
    source = tmp_path / "six.src"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for beam in (1, 3):
        out = js.decode(python, model_dir, source, beam=beam, threads=1)
        assert out["sentences"] == 6 and len(out["hypotheses"]) == 6
        assert all(isinstance(h, str) and h for h in out["hypotheses"])
        assert out["seconds"] > 0 and math.isclose(
            out["sentences_per_s"], 6 / out["seconds"], rel_tol=0.01
        )
        assert out["beam"] == beam
    # A wall-clock budget: SIGINT, which JoeyNMT answers with a last checkpoint.
    config = dict(config, training=dict(config["training"], validation_freq=100_000))
    del config["training"]["updates"]
    config["training"]["logging_freq"] = 50
    config["model_dir"] = str(tmp_path / "timed" / "model")
    run = js.train(python, config, tmp_path / "timed", minutes=0.25, threads=1)
    assert run["interrupted"] and run["steps"] > 0 and run["curve"] == []
    assert run["best_checkpoint"] == (tmp_path / "timed" / "model" / f"{run['steps']}.ckpt")
    assert 15 <= run["wall_s"] < 60
