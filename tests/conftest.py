"""Tiny trained runs shared by the `attnmt serve` tests (trained once per run of the suite,
on use, and shared by its xdist workers), and a switch to run the suite as another kind
of CPU would (tests/README.md)."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

# One process per core: pytest-xdist runs a worker on each core, and each torch process (a
# worker, or an `attnmt` command it starts) would otherwise run as many intra-op threads
# as there are cores, so the cores' threads outnumber them and spin against each other
# (a 100-step training ran 3.3x slower inside the suite than alone). The workers' share of
# the cores, in the environment before torch is loaded, so their commands inherit it.
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // _workers))

import torch
from filelock import FileLock

from attnmt import devices
from attnmt.config import load_config
from attnmt.training import train

# `train.precision: auto` follows the CPU's bf16 support as PyTorch's CPUID checks and the
# kernel's flags report it (attnmt.devices.bf16_kind), not the kernels PyTorch runs:
# ATTNMT_TEST_BF16_KIND makes this process report the support of another kind of CPU,
# beside ATEN_CPU_CAPABILITY / ONEDNN_MAX_CPU_ISA / MKL_ENABLE_INSTRUCTIONS, which pick the
# kernels (tests/README.md). Subprocesses a test starts still see the real CPU.
PRETEND_BF16 = {"amx": (True, True), "avx512_bf16": (False, True), "none": (False, False)}
BF16_FLAGS = frozenset({"amx_bf16", "amx_tile", "amx_int8", "avx512_bf16"})


def pretend_bf16_kind() -> None:
    """Report the bf16 support ATTNMT_TEST_BF16_KIND names (amx, avx512_bf16, none)."""
    name = os.environ.get("ATTNMT_TEST_BF16_KIND")
    if not name:
        return
    if name not in PRETEND_BF16:
        raise pytest.UsageError(f"ATTNMT_TEST_BF16_KIND must be one of {', '.join(PRETEND_BF16)}")
    amx, avx512_bf16 = PRETEND_BF16[name]
    flags = devices.cpu_flags() - BF16_FLAGS
    flags |= {"amx_bf16", "amx_tile"} if amx else set()
    flags |= {"avx512_bf16"} if avx512_bf16 else set()
    # test_devices.py monkeypatches these three with facts of its own, and gets these back.
    torch.cpu._is_amx_tile_supported = lambda: amx
    torch.cpu._is_avx512_bf16_supported = lambda: avx512_bf16
    devices.cpu_flags = lambda: frozenset(flags)


def pytest_configure(config):
    pretend_bf16_kind()


CONFIGS = Path(__file__).resolve().parents[1] / "configs"

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "café", "naïve"]
WORDS += ["Ελληνικά", "λόγος", "Привет", "мир", "שלום", "עולם", "مرحبا", "بالعالم", "🙂", "🚀"]
TINY = [
    "data.batch_tokens=128",
    "model.embed_size=8",
    "model.hidden_size=16",
    "train.validate_every=1000",
    "train.valid_sentences=4",
    "train.log_every=1000",
    # The same path on every CPU: `auto` trains the Transformer in bf16 on an Intel Xeon with
    # AMX or an AMD EPYC Zen 4 and RNNsearch in bf16 on the Zen 4 only, so what these runs
    # learn (words written, gradients' curvature) would hang on the CPU (tests/README.md).
    "train.precision=fp32",
]


def mixed_corpus(root) -> Path:
    """`root/corpus.tsv`: 40 pairs of 1-7 words of WORDS, each target the source reversed."""
    rng = random.Random(0)
    rows = []
    for _ in range(40):
        source = [rng.choice(WORDS) for _ in range(rng.randint(1, 7))]
        rows.append(f"{' '.join(source)}\t{' '.join(reversed(source))}")
    corpus = root / "corpus.tsv"
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return corpus


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder `build` fills once for the whole run of the suite: under pytest-xdist the
    first worker to ask builds it (holding a file lock) and the others wait, then read it,
    instead of each training its own copy. `.done` marks a finished build; a half-built
    folder (a worker killed mid-way) is built again."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    target = root / name
    with FileLock(f"{target}.lock"):
        if not (target / ".done").exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            build(target)
            (target / ".done").touch()
    return target


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory):
    """name -> run directory: "rnn" (RNNsearch on a mixed-script TSV corpus, 80 steps),
    "tf" (a 2-layer, 2-head Transformer, the same corpus) and "plain" (RNNencdec, no
    attention). Built once for the run (`built_once`): tests read them, and write their
    own outputs elsewhere (an ensemble's report beside its first run is the one exception,
    under a name of its own)."""
    models = {
        "rnn": ["train.lr=0.02", "train.max_steps=80"],
        "tf": [
            *("model.name=transformer", "model.heads=2", "model.layers=2", "model.ff_size=32"),
            "train.max_steps=4",
        ],
        "plain": ["model.name=rnnencdec", "train.max_steps=2"],
    }
    root = built_once(tmp_path_factory, "served", lambda root: _train_tiny_runs(root, models))
    return {name: root / name for name in models}


@pytest.fixture(scope="session")
def tiny_exports(tiny_runs, tmp_path_factory):
    """name -> the ONNX export (fp32) of each of `tiny_runs`, made once for the run."""

    def export(root: Path) -> None:
        from attnmt.decoding.runs import load_run  # torch.onnx and onnx: on use
        from attnmt.export.onnx import export_onnx

        for name, run in tiny_runs.items():
            export_onnx(load_run(run), root / name)

    root = built_once(tmp_path_factory, "exports", export)
    return {name: root / name for name in tiny_runs}


def _train_tiny_runs(root: Path, models: dict[str, list[str]]) -> None:
    corpus = mixed_corpus(root)
    data = [
        f"data.cache_dir={root / 'cache'}",
        "data.corpus=tsv",
        "data.drop_held_out=false",
        "data.vocab_size=120",
    ]
    data += [f"data.{split}_path={corpus}" for split in ("train", "dev", "test")]
    for name, overrides in models.items():
        config = load_config(None, [*TINY, *data, *overrides, f"train.run_dir={root / name}"])
        train(config, progress=False)


# The shipped image configs, shrunk: 16 training canvases and 8 dev (and 8 test) canvases,
# narrow layers, 2 steps; one dev canvas validated (an untrained reader runs to its limit).
TINY_IMAGES = [
    "data.synthetic_train_size=16",
    "data.synthetic_dev_size=8",
    "model.hidden_size=16",
    "model.embed_size=8",
    "train.max_steps=2",
    *("train.log_every=1000", "train.validate_every=1000", "train.checkpoint_every=1000"),
    *("train.valid_sentences=1", "train.valid_examples=0"),
    "train.precision=fp32",  # as TINY: `auto` picks bf16 for these on some CPUs only
]


@pytest.fixture(scope="session")
def tiny_image_runs(tmp_path_factory):
    """name -> run directory of image runs, each a shipped config trained 2 tiny steps:
    "soft" and "hard" (Show-Attend-Tell on 24x64 digit strings), "plain" (Show-Tell, no
    attention) and "glimpses" (Mnih's glimpses on 40x40 cluttered digits). Built once for
    the run (`built_once`)."""
    configs = {
        "soft": "captions-soft",
        "hard": "captions-hard",
        "plain": "captions-plain",
        "glimpses": "glimpses",
    }
    root = built_once(tmp_path_factory, "served-images", lambda root: _train_images(root, configs))
    return {name: root / name for name in configs}


def _train_images(root: Path, configs: dict[str, str]) -> None:
    for name, config in configs.items():
        height, width = (40, 40) if config == "glimpses" else (24, 64)
        overrides = [
            *TINY_IMAGES,
            f"data.batch_tokens={8 * (height * width + 1)}",  # 8 canvases a batch
            f"data.cache_dir={root / 'cache'}",
            f"train.run_dir={root / name}",
        ]
        train(load_config(CONFIGS / f"{config}.yaml", overrides), progress=False)
