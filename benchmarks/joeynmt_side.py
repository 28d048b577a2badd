"""The JoeyNMT 2.3 side of `make bench`: the same data, architecture and machine as attnmt.

JoeyNMT runs in its own venv (`benchmarks/.venv-joeynmt`, made by `ensure_venv`) and is
reached only through subprocesses: `python -m joeynmt train` for training and
`joey_driver.py` for timed decoding. Nothing here imports joeynmt.

    python = ensure_venv()
    data = write_joey_data(prepared.directory, Path("benchmarks/work/joey-data"))
    config = joey_config("transformer", data, Path("benchmarks/work/joey-tf/model"),
                         batch_tokens=1536, seed=1, validation_freq=500, max_updates=3000)
    run = train(python, config, Path("benchmarks/work/joey-tf"), minutes=20)
    out = decode(python, Path(config["model_dir"]), data["test_src"], beam=5)

Where JoeyNMT cannot do exactly what attnmt does, the closest setting is used and the
difference is written in `DIFFERENCES` (the suite prints it).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import sentencepiece as spm
import yaml

HERE = Path(__file__).resolve().parent
JOEY_VENV = HERE / ".venv-joeynmt"
DRIVER = HERE / "joey_driver.py"
JOEYNMT_VERSION = "2.3.0"
TORCH_VERSION = "2.13.0"  # the local CPU wheel; the project's own venv has the same
STAMP = ".installed"

# attnmt's defaults that JoeyNMT is set to match (attnmt.data.batching, inference.search,
# configs/*.yaml: train.valid_sentences).
DECODE_BATCH_TOKENS = 4000
BEAM_ALPHA = 0.6
VALID_SENTENCES = 200
MIN_MAX_LENGTH = 100  # JoeyNMT's training length filter, in subwords (raised to the longest)

# JoeyNMT's vocabulary puts its specials first in this fixed order (joeynmt.vocabulary);
# the names are those of attnmt's sentencepiece model (ids PAD=0, UNK=1, BOS=2, EOS=3).
SPECIALS = {
    "unk_token": "<unk>",
    "unk_id": 0,
    "pad_token": "<pad>",
    "pad_id": 1,
    "bos_token": "<s>",
    "bos_id": 2,
    "eos_token": "</s>",
    "eos_id": 3,
}

DIFFERENCES = [
    # data and batching
    "token batches: JoeyNMT counts a sentence as max(source+1, target+1) subwords like "
    "attnmt, but closes a batch at the first sentence that brings sentences x longest to "
    ">= batch_size (so a batch may exceed the budget by one sentence; attnmt stays <=)",
    "token batches: JoeyNMT does not bucket by length (random order, ~45% padding on this "
    "corpus against attnmt's ~2%), so the same budget holds fewer real target tokens: at "
    "1,536 about 850 per update against attnmt's 1,424; compare per target token, not per "
    "step",
    "JoeyNMT tokenizes with sentencepiece on the fly in its data loader (twice per epoch: "
    "batch sampler and collate); attnmt encodes once when preparing the data",
    "vocabulary: the same 8,000 sentencepiece pieces; JoeyNMT's ids swap PAD and UNK "
    "(UNK=0, PAD=1, BOS=2, EOS=3 against attnmt's PAD=0, UNK=1)",
    "validation: first 200 dev verses as attnmt, but BLEU against the one reference "
    "(Segond) where attnmt uses all three (Segond, Ostervald, Darby): rescore decode() "
    "output with the suite's own sacrebleu call to compare",
    # optimisation
    "constant learning rate (rnnsearch): scheduling 'exponential' with decrease_factor 1.0 "
    "(JoeyNMT 2.3 rejects no scheduler, 'plateau' breaks on torch 2.13 and "
    "'warmupexponentialdecay' is never given its optimizer)",
    "noam (transformer): learning_rate_factor 0.32 = 0.001 * sqrt(400) * sqrt(256) gives "
    "attnmt's peak 0.001 at step 400; JoeyNMT sets each rate after the update, so update "
    "k runs at rate(k-1) (update 1 at learning_rate = rate(1))",
    "loss normalised by target tokens (normalization: tokens), as attnmt; JoeyNMT's label "
    "smoothing spreads 0.1 over V-2 words (not V) and is a KL loss, so its transformer "
    "dev_ppl is exp(smoothed loss), not the plain perplexity attnmt reports",
    # architectures
    "rnnsearch: JoeyNMT's 'bahdanau' decoder is not RNNsearch's: it updates the GRU from "
    "the previous word only (input_feeding false; no context in the cell), queries "
    "attention with the new state s_i (not s_{i-1}), and predicts from "
    "tanh(W[s_i; c_i]) (no maxout deep output reading E y_{i-1})",
    "rnnsearch: separate source and target embeddings and output layer in both toolkits; "
    "attnmt's 8,516,928 parameters hold a maxout readout and the context in the GRU input "
    "that JoeyNMT's decoder does not have (its count is in the results)",
    "rnnsearch: bridge s_0 = tanh(W [->h_S; <-h_1]) (both directions; attnmt: <-h_1 only)",
    "rnnsearch: dropout 0.2 on embeddings (emb) and on [s_i; c_i] (hidden_dropout); "
    "attnmt: on embeddings and outputs",
    "init: rnnsearch: U(-0.1, 0.1) weights in both (attnmt: model.init=uniform, set by the "
    "benchmark; its configs start from Bahdanau's N(0, 0.01) and orthogonal recurrent "
    "matrices), but JoeyNMT draws embeddings from N(0, 0.1) and zeroes biases where attnmt "
    "draws those uniformly too; JoeyNMT's default Xavier init saturates its bias-free "
    "tanh(W[s; c]) output within 20 updates and never leaves the unigram plateau (dev ppl "
    "500); transformer as attnmt: Xavier-uniform weights, N(0, 256^-0.5) embeddings scaled "
    "by sqrt(256), zero biases",
    "transformer: pre-norm with a final LayerNorm in both stacks (JoeyNMT layer_norm: pre); "
    "7,578,624 parameters in both toolkits",
    # decoding
    "decoding: output limit 1.5 x the batch's longest source (JoeyNMT) against "
    "2 x each source + 5 (attnmt); beam uses the same GNMT length penalty, alpha 0.6",
    "decoding (transformer): JoeyNMT re-runs the decoder over the whole prefix at every "
    "step (no key/value cache); attnmt caches each layer's keys and values",
    "decoding batches: JoeyNMT keeps file order (no length sorting); the budget is "
    "4,000 B x S tokens divided by the beam width, as attnmt's",
]


# --------------------------------------------------------------------------------------
# The venv
# --------------------------------------------------------------------------------------


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"pip install {' '.join(args)} failed in JoeyNMT's venv: {tail}")


def ensure_venv(venv: Path = JOEY_VENV) -> Path:
    """Create JoeyNMT's own venv if missing and return its python.

    torch==2.13.0 goes in first (the local CPU wheel: an unpinned torch would pull
    gigabytes of CUDA packages), then joeynmt==2.3.0 with sentencepiece<0.2 and
    importlib_metadata (joeynmt 2.3 needs both with torch 2.13). A stamp file makes a
    second call free; a failed install raises RuntimeError.
    """
    venv = Path(venv)
    python = venv / "bin" / "python"
    stamp = venv / STAMP
    if stamp.is_file() and python.exists():
        return python
    if not python.exists():
        done = subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"could not create JoeyNMT's venv at {venv}: {done.stderr}")
    _pip(python, f"torch=={TORCH_VERSION}")
    version = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not version.startswith(TORCH_VERSION) or "+cpu" not in version:
        raise RuntimeError(f"JoeyNMT's venv got torch {version!r}, not {TORCH_VERSION}+cpu")
    _pip(python, f"joeynmt=={JOEYNMT_VERSION}", "sentencepiece<0.2", "importlib_metadata")
    stamp.write_text(f"joeynmt=={JOEYNMT_VERSION} torch=={version}\n", encoding="utf-8")
    return python


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------


def vocab_pieces(model_file: Path) -> list[str]:
    """The sentencepiece pieces after attnmt's four specials (ids 4.., in id order)."""
    processor = spm.SentencePieceProcessor(model_file=str(model_file))
    specials = [processor.id_to_piece(i) for i in range(4)]
    if specials != ["<pad>", "<unk>", "<s>", "</s>"]:
        raise ValueError(f"{model_file}: expected <pad> <unk> <s> </s> first, got {specials}")
    return [processor.id_to_piece(i) for i in range(4, processor.get_piece_size())]


def write_vocab(pieces: list[str], path: Path) -> Path:
    """JoeyNMT's vocabulary file: one token a line (JoeyNMT prepends its own specials)."""
    bad = [p for p in pieces if not p or any(c.isspace() for c in p) or p in _special_names()]
    if bad:
        raise ValueError(f"pieces JoeyNMT cannot read from a vocabulary file: {bad[:5]}")
    path.write_text("".join(p + "\n" for p in pieces), encoding="utf-8")
    return path


def _special_names() -> set[str]:
    return {v for k, v in SPECIALS.items() if k.endswith("_token")}


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def write_joey_data(
    prepared_dir: Path, out_dir: Path, *, valid_sentences: int | None = VALID_SENTENCES
) -> dict:
    """Write what JoeyNMT reads, from an attnmt prepared-data cache folder.

    `out_dir` gets train/dev/test .src/.tgt (JoeyNMT's plain format: PREFIX.LANG with the
    languages named "src" and "tgt"), dev cut to its first `valid_sentences` lines as
    attnmt validates, `vocab.txt` (the sentencepiece pieces after the specials, in id
    order, so both toolkits see the same subwords) and a copy of the sentencepiece model.
    Returns the paths, and `longest`: the longest training sentence in subwords.
    """
    prepared_dir, out_dir = Path(prepared_dir).resolve(), Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    model = prepared_dir / "vocab" / "joint.model"
    if not model.is_file():
        raise FileNotFoundError(f"{prepared_dir} has no vocab/joint.model (run attnmt prepare)")
    for split in ("train", "dev", "test"):
        for side in ("src", "tgt"):
            lines = _lines(prepared_dir / f"{split}.{side}")
            if split == "dev" and valid_sentences:
                lines = lines[:valid_sentences]
            if any(not line.strip() for line in lines):
                raise ValueError(f"{prepared_dir / f'{split}.{side}'} has an empty line")
            (out_dir / f"{split}.{side}").write_text(
                "".join(line + "\n" for line in lines), encoding="utf-8"
            )
    spm_model = out_dir / "joint.model"
    shutil.copyfile(model, spm_model)
    vocab = write_vocab(vocab_pieces(model), out_dir / "vocab.txt")
    processor = spm.SentencePieceProcessor(model_file=str(model))
    longest = max(
        len(ids)
        for side in ("src", "tgt")
        for ids in processor.encode(_lines(out_dir / f"train.{side}"))
    )
    return {
        "dir": out_dir,
        "train": out_dir / "train",
        "dev": out_dir / "dev",
        "test": out_dir / "test",
        "test_src": out_dir / "test.src",
        "test_tgt": out_dir / "test.tgt",
        "vocab": vocab,
        "spm_model": spm_model,
        "longest": longest,
    }


# --------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------


def _logging_freq(validation_freq: int, most: int = 50) -> int:
    """JoeyNMT needs logging_freq <= validation_freq and dividing it: the largest <= most."""
    return max(d for d in range(1, min(most, validation_freq) + 1) if validation_freq % d == 0)


def _model(arch: str) -> dict:
    if arch == "rnnsearch":
        embeddings = {"embedding_dim": 256, "scale": False, "dropout": 0.2}
        return {
            # attnmt's RNNsearch has separate source and target embeddings and its own
            # output layer (the recurrent models never tie), so JoeyNMT's does too.
            "tied_embeddings": False,
            "tied_softmax": False,
            # Uniform(-0.1, 0.1) weights (OpenNMT's and Nematus's classic RNN init) and
            # N(0, 0.1) embeddings (JoeyNMT's example RNN configs). JoeyNMT's default
            # Xavier init never learns here: its output layer has no bias and Xavier
            # entries of about 0.02 over 8,000 words, so reaching the unigram logits
            # drives every unit of tanh(W[s; c]) to +-1 within 20 updates (mean
            # |pre-activation| 9 at step 20, 12 at step 700), the gradients behind it
            # vanish and dev ppl stays at 500 (the unigram) for 700+ steps, with
            # lr 1e-3, 3e-4 or 1e-4, input feeding or not, clipping or not; so did
            # attnmt's N(0, 0.01). With this init the same run leaves the plateau by
            # step 100 (2026-11-24).
            "initializer": "uniform",
            "init_weight": 0.1,
            "embed_initializer": "normal",
            "embed_init_weight": 0.1,
            "bias_initializer": "zeros",
            "init_rnn_orthogonal": False,
            "encoder": {
                "type": "recurrent",
                "rnn_type": "gru",
                "bidirectional": True,
                "hidden_size": 256,
                "num_layers": 1,
                "dropout": 0.2,
                "embeddings": embeddings,
            },
            "decoder": {
                "type": "recurrent",
                "rnn_type": "gru",
                "hidden_size": 256,
                "num_layers": 1,
                "attention": "bahdanau",
                "input_feeding": False,
                "init_hidden": "bridge",
                "dropout": 0.2,
                "hidden_dropout": 0.2,
                "embeddings": dict(embeddings),
            },
        }
    if arch == "transformer":

        def stack() -> dict:
            return {
                "type": "transformer",
                "num_layers": 3,
                "num_heads": 4,
                "hidden_size": 256,
                "ff_size": 1024,
                "dropout": 0.1,
                "layer_norm": "pre",
                "activation": "relu",
                "embeddings": {"embedding_dim": 256, "scale": True, "dropout": 0.1},
            }

        return {
            "tied_embeddings": True,
            "tied_softmax": True,
            "initializer": "xavier_uniform",
            "embed_initializer": "normal",
            "embed_init_weight": 256**-0.5,
            "bias_initializer": "zeros",
            "encoder": stack(),
            "decoder": stack(),
        }
    raise ValueError(f"unknown arch {arch!r}; valid: rnnsearch, transformer")


def _schedule(arch: str) -> dict:
    if arch == "transformer":
        lr, warmup, d_model = 0.001, 400, 256
        factor = lr * math.sqrt(warmup) * math.sqrt(d_model)  # peak lr at step `warmup`
        return {
            "scheduling": "noam",
            "learning_rate_factor": factor,
            "learning_rate_warmup": warmup,
            # the optimizer's rate before the first scheduler step: noam's rate(1)
            "learning_rate": factor * d_model**-0.5 * warmup**-1.5,
            "label_smoothing": 0.1,
        }
    return {
        "scheduling": "exponential",  # gamma 1.0 per epoch: constant
        "decrease_factor": 1.0,
        "learning_rate": 0.001,
        "label_smoothing": 0.0,
    }


def joey_config(
    arch: str,
    data: dict,
    model_dir: Path,
    *,
    batch_tokens: int,
    seed: int,
    validation_freq: int,
    max_updates: int | None,
    epochs: int = 1000,
    beam: int = 5,
) -> dict:
    """JoeyNMT 2.3's YAML config (a dict) for `arch` "rnnsearch" or "transformer",
    matching attnmt's configs/rnnsearch.yaml and configs/transformer.yaml (`DIFFERENCES`
    says where it cannot). `data` is what `write_joey_data` returned."""
    model = _model(arch)
    max_length = max(MIN_MAX_LENGTH, int(data.get("longest", 0)))

    def side(lang: str) -> dict:
        return {
            "lang": lang,
            "level": "bpe",
            "lowercase": False,
            "normalize": False,
            "max_length": max_length,
            "voc_file": str(data["vocab"]),
            "tokenizer_type": "sentencepiece",
            "tokenizer_cfg": {"model_file": str(data["spm_model"])},
        }

    training = {
        "optimizer": "adam",
        "adam_betas": [0.9, 0.999],
        **_schedule(arch),
        "learning_rate_min": 1.0e-9,  # JoeyNMT stops training below this rate
        "weight_decay": 0.0,
        "clip_grad_norm": 1.0,
        "loss": "crossentropy",
        "normalization": "tokens",
        "batch_size": batch_tokens,
        "batch_type": "token",
        "batch_multiplier": 1,
        "shuffle": True,
        "epochs": epochs,
        "validation_freq": validation_freq,
        "logging_freq": _logging_freq(validation_freq),
        "early_stopping_metric": "bleu",
        "keep_best_ckpts": 2,
        "overwrite": True,
        "print_valid_sents": [],  # no example sentences, so no attention plots either
    }
    if max_updates is not None:
        training["updates"] = max_updates
    return {
        "name": f"joeynmt-{arch}",
        "joeynmt_version": JOEYNMT_VERSION,
        "model_dir": str(model_dir),
        "use_cuda": False,
        "fp16": False,
        "random_seed": seed,
        "num_workers": 0,
        "data": {
            "train": str(data["train"]),
            "dev": str(data["dev"]),
            "dataset_type": "plain",
            "src": side("src"),
            "trg": side("tgt"),
            "special_symbols": dict(SPECIALS),
        },
        "testing": {
            "n_best": 1,
            "beam_size": beam,
            "beam_alpha": BEAM_ALPHA,
            "batch_size": DECODE_BATCH_TOKENS,
            "batch_type": "token",
            "eval_metrics": ["bleu"],
            "sacrebleu_cfg": {"tokenize": "13a"},
        },
        "training": training,
        "model": model,
    }


# --------------------------------------------------------------------------------------
# Logs
# --------------------------------------------------------------------------------------

_STAMP_RE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - (\w+) - ([\w.]+) - (.*)$")
_PARAMS_RE = re.compile(r"^Total params: (\d+)")
_STEP_RE = re.compile(
    r"Epoch\s+(\d+), Step:\s+(\d+), Batch Loss:\s+([\d.eE+-]+|nan|inf), "
    r"Batch Acc: ([\d.eE+-]+|nan), Tokens per Sec:\s+(\d+), Lr: ([\d.eE+-]+)"
)
# a line that belongs to training, not to the validation block before it
_TRAINING_RE = re.compile(r"^(Epoch\s+\d+, (Step|total)|EPOCH \d+|Interrupt at|Training ended)")


def parse_log(text: str) -> list[dict]:
    """JoeyNMT's train.log as records {time (datetime), level, logger, message}.

    A message that spans lines (the model summary) keeps its first line only: lines
    without a timestamp are skipped.
    """
    records: list[dict] = []
    for line in text.splitlines():
        match = _STAMP_RE.match(line)
        if match:
            stamp, level, name, message = match.groups()
            records.append(
                {
                    "time": datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f"),
                    "level": level,
                    "logger": name,
                    "message": message,
                }
            )
    return records


def parse_steps(records: list[dict]) -> list[dict]:
    """The training-progress lines: {step, loss, acc, tokens_per_s, lr, time}."""
    out = []
    for r in records:
        match = _STEP_RE.search(r["message"])
        if match:
            out.append(
                {
                    "epoch": int(match.group(1)),
                    "step": int(match.group(2)),
                    "loss": float(match.group(3)),
                    "acc": float(match.group(4)),
                    "tokens_per_s": float(match.group(5)),
                    "lr": float(match.group(6)),
                    "time": r["time"],
                }
            )
    return out


def validation_windows(records: list[dict]) -> list[tuple[datetime, datetime]]:
    """(start, end) of each validation: from its "Predicting ..." line to the last line
    before training resumes (scoring, checkpoint, example sentences included)."""
    windows = []
    start = last = None
    for r in records:
        msg = r["message"]
        if start is not None and _TRAINING_RE.match(msg):
            # interrupted in the middle of a validation: it lasted until the interrupt
            stopped = msg.startswith(("Interrupt at", "Training ended"))
            windows.append((start, r["time"] if stopped else last))
            start = None
        if msg.startswith("Predicting ") and "example(s)" in msg:
            if start is not None:
                windows.append((start, last))
            start = r["time"]
        last = r["time"]
    if start is not None:
        windows.append((start, last))
    return windows


def parse_validations(text: str) -> list[dict]:
    """JoeyNMT's validations.txt: one dict per line ("Steps: 20\\tloss: 3.1\\t...\\t*")."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        row: dict = {"best": line.rstrip().endswith("*")}
        for field in line.split("\t"):
            if ":" not in field:
                continue
            key, value = (part.strip() for part in field.split(":", 1))
            key = key.lower()
            row[key] = int(value) if key == "steps" else float(value)
        out.append(row)
    return out


def training_seconds(records: list[dict]) -> dict:
    """Wall seconds from the first epoch's start to the end of training, and the part of
    it spent validating (JoeyNMT's own tokens/s leaves validation out too)."""
    start = next((r["time"] for r in records if r["message"].startswith("EPOCH ")), None)
    if start is None:
        return {"train_s": 0.0, "valid_s": 0.0, "total_s": 0.0}
    end = records[-1]["time"]
    for r in records:
        if r["message"].startswith(("Interrupt at", "Training ended")):
            end = r["time"]
    valid = sum(
        (b - a).total_seconds() for a, b in validation_windows(records) if start <= a <= end
    )
    total = (end - start).total_seconds()
    return {"train_s": max(0.0, total - valid), "valid_s": valid, "total_s": total}


# --------------------------------------------------------------------------------------
# Training and decoding
# --------------------------------------------------------------------------------------


def _env(threads: int) -> dict:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
    )
    return env


def _checkpoint_stats(python: Path, ckpt: Path, threads: int) -> dict:
    done = subprocess.run(
        [str(python), str(DRIVER), "stats", str(ckpt)],
        capture_output=True,
        text=True,
        env=_env(threads),
    )
    if done.returncode != 0:
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def train(
    python: Path,
    config: dict,
    work: Path,
    *,
    minutes: float | None = None,
    threads: int = 2,
) -> dict:
    """Train with `python -m joeynmt train` (no test pass afterwards).

    The config goes to `work/config.yaml`; JoeyNMT writes its model_dir (which must not be
    `work` or above it: JoeyNMT empties it first). With `minutes`, training gets SIGINT
    after that much wall clock, which JoeyNMT catches to save a last checkpoint; it also
    ends by itself at `training.updates`.

    Returns wall_s (the whole subprocess), steps, total_tokens (target tokens with EOS,
    from the last checkpoint), tokens_per_s (JoeyNMT's log: the mean of its "Tokens per
    Sec" lines, validation left out) and tokens_per_s_computed (total_tokens over the
    training wall seconds less validations, from the log's timestamps), with
    tokens_per_s_source saying which is which; curve (one point per validation: seconds
    since the subprocess started and train_seconds since the first epoch began, less
    earlier validations, both when the validation began; step; dev_ppl; dev_bleu, BLEU
    on the one reference); params; best_checkpoint; the log and model paths.
    """
    work = Path(work).resolve()
    model_dir = Path(config["model_dir"]).resolve()
    if model_dir == work or model_dir in work.parents:
        raise ValueError(
            f"model_dir {model_dir} must not be {work} or contain it (JoeyNMT empties it)"
        )
    work.mkdir(parents=True, exist_ok=True)
    config = dict(config, model_dir=str(model_dir))
    config_path = work / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    out_path = work / "joeynmt-train.out"
    command = [str(python), "-m", "joeynmt", "train", str(config_path), "--skip-test"]
    interrupted = False
    with out_path.open("w", encoding="utf-8") as out:
        started_at = datetime.now()
        started = time.monotonic()
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(threads),
            cwd=work,
            # A job started in the background of a shell inherits SIGINT ignored, and a
            # Python started so never raises KeyboardInterrupt: JoeyNMT would not stop.
            preexec_fn=_default_sigint,
        )
        try:
            while proc.poll() is None:
                if minutes is not None and time.monotonic() - started >= 60.0 * minutes:
                    interrupted = True
                    proc.send_signal(signal.SIGINT)  # JoeyNMT saves a checkpoint and exits
                    try:
                        proc.wait(timeout=300)
                    except subprocess.TimeoutExpired:
                        proc.terminate()
                        try:
                            proc.wait(timeout=30)
                        except subprocess.TimeoutExpired:
                            proc.kill()
                            proc.wait()
                    break
                time.sleep(0.5)
        finally:
            if proc.poll() is None:  # our caller was interrupted: do not leave it running
                proc.kill()
                proc.wait()
        wall_s = time.monotonic() - started
    log_path = model_dir / "train.log"
    if not log_path.is_file():
        tail = " | ".join(out_path.read_text(encoding="utf-8").strip().splitlines()[-3:])
        raise RuntimeError(f"JoeyNMT training wrote no log (exit {proc.returncode}): {tail}")
    records = parse_log(log_path.read_text(encoding="utf-8"))
    if proc.returncode != 0 and not interrupted:
        tail = " | ".join(out_path.read_text(encoding="utf-8").strip().splitlines()[-3:])
        raise RuntimeError(f"JoeyNMT training failed (exit {proc.returncode}): {tail}")
    steps_log = parse_steps(records)
    valid_file = model_dir / "validations.txt"
    validations = (
        parse_validations(valid_file.read_text(encoding="utf-8")) if valid_file.is_file() else []
    )
    windows = validation_windows(records)
    first_epoch = next((r["time"] for r in records if r["message"].startswith("EPOCH ")), None)
    curve, validating = [], 0.0
    for row, (at, until) in zip(validations, windows, strict=False):
        curve.append(
            {
                "seconds": round((at - started_at).total_seconds(), 2),
                "train_seconds": round((at - first_epoch).total_seconds() - validating, 2),
                "step": row["steps"],
                "dev_ppl": row.get("ppl"),
                "dev_bleu": row.get("bleu"),
            }
        )
        validating += (until - at).total_seconds()
    latest = model_dir / "latest.ckpt"
    counters = _checkpoint_stats(python, latest, threads) if latest.exists() else {}
    steps = counters.get("steps") or max(
        [s["step"] for s in steps_log] + [v["steps"] for v in validations] + [0]
    )
    seconds = training_seconds(records)
    tokens = counters.get("total_tokens")
    rates = [s["tokens_per_s"] for s in steps_log]
    params = next((int(m.group(1)) for r in records if (m := _PARAMS_RE.match(r["message"]))), None)
    best = model_dir / "best.ckpt"
    best_checkpoint = next((p.resolve() for p in (best, latest) if p.exists()), None)
    return {
        "wall_s": round(wall_s, 2),
        "steps": steps,
        "total_tokens": tokens,
        "train_s": round(seconds["train_s"], 2),
        "valid_s": round(seconds["valid_s"], 2),
        "tokens_per_s": round(sum(rates) / len(rates), 1) if rates else None,
        "tokens_per_s_computed": (
            round(tokens / seconds["train_s"], 1) if tokens and seconds["train_s"] else None
        ),
        "tokens_per_s_source": (
            "tokens_per_s: mean of JoeyNMT's 'Tokens per Sec' log lines (target tokens "
            "incl. EOS, validation excluded); tokens_per_s_computed: the last checkpoint's "
            "total target tokens / (first epoch start to end of training, less validations, "
            "from log timestamps)"
        ),
        "params": params,
        "interrupted": interrupted,
        "curve": curve,
        "best_checkpoint": best_checkpoint,
        "model_dir": model_dir,
        "log": log_path,
        "threads": threads,
    }


def decode(
    python: Path,
    model_dir: Path,
    src_file: Path,
    *,
    beam: int,
    threads: int = 2,
    batch_size: int = DECODE_BATCH_TOKENS,
    checkpoint: Path | None = None,
) -> dict:
    """Translate `src_file` with a trained JoeyNMT model (greedy when beam == 1, else beam
    search of that width, GNMT length penalty 0.6), timing decoding only (model load
    excluded) through joey_driver.py.

    `batch_size` is a token budget, sentences x (longest source + 1), divided by the beam
    width as attnmt divides its own. Returns sentences, seconds, sentences_per_s,
    hypotheses (detokenized, one per input line) and load_s.
    """
    model_dir, src_file = Path(model_dir).resolve(), Path(src_file).resolve()
    out = model_dir / f"decode-beam{beam}.json"
    command = [
        str(python),
        str(DRIVER),
        "decode",
        "--model-dir",
        str(model_dir),
        "--src",
        str(src_file),
        "--beam",
        str(beam),
        "--batch-size",
        str(max(1, batch_size // max(1, beam))),
        "--batch-type",
        "token",
        "--threads",
        str(threads),
        "--out",
        str(out),
    ]
    if checkpoint is not None:
        command += ["--ckpt", str(Path(checkpoint).resolve())]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(threads))
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"JoeyNMT decoding failed (exit {done.returncode}): {tail}")
    result = json.loads(out.read_text(encoding="utf-8"))
    result["sentences_per_s"] = round(result["sentences"] / max(result["seconds"], 1e-9), 2)
    return result
