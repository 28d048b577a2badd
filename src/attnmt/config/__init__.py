"""Configuration: typed dataclasses loaded from YAML, with dotted command-line overrides.

An experiment is one YAML file with three sections, `data`, `model` and `train`, each a
dataclass below. Loading is strict: an unknown key fails at load time naming the key, where
it was, and the valid keys (with a "did you mean" where one is close); a value of the wrong
type fails naming the expected type; a value that cannot work (an unknown model, attention,
corpus, device, Bible version or book; a size below 1, a dropout of 1) fails naming the key
and the nearest valid values (`check`), before any data is prepared. The resolved config
(defaults filled in, overrides applied) is what gets saved into every run directory and
checkpoint.

    cfg = load_config("configs/quickstart.yaml", overrides=["model.hidden_size=512"])
    save_config(cfg, run_dir / "config.yaml")

Only the CLI and `attnmt.training.loop` read configuration; every other module takes plain
arguments.
"""

from attnmt.config.checks import (
    CORPORA,
    IMAGE_CORPORA,
    attention_options,
    check,
    check_data,
    check_model,
    check_train,
)
from attnmt.config.families import (
    ATTENTIONAL_RNNS,
    FAMILIES,
    IMAGE_MODELS,
    KEY_WIDTHS,
    MODELS,
    Family,
    family,
)
from attnmt.config.loading import (
    add_override_argument,
    apply_override,
    from_dict,
    load_config,
    save_config,
    to_dict,
)
from attnmt.config.sections import Config, DataConfig, ModelConfig, TrainConfig

__all__ = [
    "ATTENTIONAL_RNNS",
    "CORPORA",
    "FAMILIES",
    "IMAGE_CORPORA",
    "IMAGE_MODELS",
    "KEY_WIDTHS",
    "MODELS",
    "Config",
    "DataConfig",
    "Family",
    "ModelConfig",
    "TrainConfig",
    "add_override_argument",
    "apply_override",
    "attention_options",
    "check",
    "check_data",
    "check_model",
    "check_train",
    "family",
    "from_dict",
    "load_config",
    "save_config",
    "to_dict",
]
