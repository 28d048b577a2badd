"""Strict conversion from YAML to the config dataclasses and back, dotted overrides,
loading and saving."""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin

import yaml

from attnmt.config.checks import SECTION_CHECKS, TORCH_FREE_CHECKS
from attnmt.config.messages import shown
from attnmt.config.sections import Config
from attnmt.errors import ConfigError

T = TypeVar("T")
Checks = Mapping[type, Callable[[Any], None]]  # section type -> its check


# --------------------------------------------------------------------------------------
# Strict conversion from plain dicts (YAML) to dataclasses, and back.
# --------------------------------------------------------------------------------------


def _suggest(name: str, options: list[str], where: str = "") -> str:
    close = difflib.get_close_matches(name, options, n=1)
    prefix = f"{where}." if where else ""
    hint = f" (did you mean '{prefix}{close[0]}'?)" if close else ""
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


def _convert(value: Any, tp: Any, where: str, checks: Checks = SECTION_CHECKS) -> Any:
    """Check `value` against the annotation `tp`, converting where it is lossless."""
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping of keys, got {shown(value)}")
        return from_dict(tp, value, where, checks=checks)
    if origin is Literal:
        if value not in get_args(tp):
            raise ConfigError(f"{where} must be {_type_name(tp)}, got {shown(value)}")
        return value
    if origin in (typing.Union, types.UnionType):
        for option in get_args(tp):
            try:
                return _convert(value, option, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where} must be {_type_name(tp)}, got {shown(value)}")
    if origin is list:
        if not isinstance(value, list):
            value = [value] if isinstance(value, str | int | float) else value
        if not isinstance(value, list):
            raise ConfigError(f"{where} must be {_type_name(tp)}, got {shown(value)}")
        (item_type,) = get_args(tp)
        return [_convert(v, item_type, f"{where}[{i}]") for i, v in enumerate(value)]
    if tp is type(None):
        if value is not None:
            raise ConfigError(f"{where} must be null, got {shown(value)}")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {shown(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, got {shown(value)}")
        if not -(2**63) <= value < 2**63:  # what numpy, torch and seeds take
            raise ConfigError(f"{where} must be an integer of at most 64 bits, got {shown(value)}")
        return value
    if tp is float:
        if isinstance(value, str):
            # YAML 1.1 reads 1e-4 (no dot) as a string: take it as the number it spells.
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number):
                return number
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where} must be a number, got {shown(value)}")
        try:
            number = float(value)
        except OverflowError:  # an integer past the largest float
            number = math.inf
        if not math.isfinite(number):  # YAML's .nan and .inf too
            raise ConfigError(f"{where} must be a finite number, got {shown(value)}")
        return number
    if tp is str:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ConfigError(f"{where} must be a string, got {shown(value)}")
        return str(value)
    return value


def from_dict(
    cls: type[T],
    values: dict[str, Any],
    where: str = "",
    *,
    checks: Checks = SECTION_CHECKS,
) -> T:
    """Build dataclass `cls` from `values`, refusing unknown keys, wrong types and values.

    A section (`DataConfig`, `ModelConfig`, `TrainConfig`) is then checked by `check`, so
    a bad name or number fails here, before any data is prepared (`checks`: the check of
    each section type, `TORCH_FREE_CHECKS` for `load_config(..., torch=False)`).
    """
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    kwargs = {}
    for key, value in values.items():
        full = f"{where}.{key}" if where else str(key)
        if key not in hints:
            raise ConfigError(f"unknown key {shown(full)}{_suggest(str(key), names, where)}")
        kwargs[key] = _convert(value, hints[key], full, checks)
    built = cls(**kwargs)
    if cls in checks:
        checks[cls](built)
    return built


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
            f"override {shown(override)} is not of the form section.key=value "
            "(e.g. --set model.hidden_size=512)"
        )
    dotted, raw = override.split("=", 1)
    parts = dotted.strip().split(".")
    value: Any = raw.strip()
    if value not in ("", "-"):  # "-": standard input (YAML would read a list)
        try:
            value = yaml.safe_load(raw)
        except (yaml.YAMLError, ValueError, RecursionError):  # not YAML: the text itself
            value = raw
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {shown(override)}: {shown(part)} is not a section")
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


def _yaml_error(path: Path, text: str, err: yaml.YAMLError) -> str:
    """One line naming the file, line and column, and what PyYAML found there."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None)
    if mark is not None and problem:
        where = f"at line {mark.line + 1}, column {mark.column + 1}"
        context, start = getattr(err, "context", None), getattr(err, "context_mark", None)
        if context and start is not None and start.line != mark.line:
            problem += f" ({context} from line {start.line + 1})"
    else:  # a reader error: a character YAML does not allow, at `position`
        position = getattr(err, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else None
        where = f"at line {line}" if line else "somewhere"
        problem = str(err).splitlines()[0]
    problem = problem if len(problem) <= 200 else problem[:200] + "..."  # a long tag or alias
    return (
        f"config file '{path}' is not valid YAML {where}: {problem}; check the indentation, "
        "quotes and brackets there"
    )


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    *,
    torch: bool = True,
) -> Config:
    """Read a YAML experiment file (or the defaults if `path` is None) and apply overrides.

    `torch=False` checks everything that can be checked without importing torch
    (`TORCH_FREE_CHECKS`): `attnmt data` prepares a corpus without it, and the commands
    that build a model check the rest (the attention, the device) when they load the file.
    """
    tree: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if path.is_dir():
            own = path / "config.yaml"
            hint = f" (this run's own is {own})" if own.is_file() else ""
            raise ConfigError(
                f"'{path}' is a directory; CONFIG is a YAML file such as "
                f"configs/quickstart.yaml{hint}"
            )
        if not path.is_file():
            raise ConfigError(f"config file '{path}' does not exist; pass a YAML file path")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ConfigError(
                f"config file '{path}' is not UTF-8 text (byte {err.start}); save it as UTF-8"
            ) from None
        except OSError as err:
            raise ConfigError(f"config file '{path}' cannot be read ({err.strerror})") from None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(_yaml_error(path, text, err)) from None
        except ValueError as err:  # a date or number YAML parses but Python cannot hold
            raise ConfigError(
                f"config file '{path}' holds a value YAML cannot read ({shown(str(err))}); "
                "check its dates and numbers"
            ) from None
        except RecursionError:
            raise ConfigError(
                f"config file '{path}' nests brackets or indents deeper than YAML can read; "
                "a config is sections of keys: check its brackets"
            ) from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file '{path}' must hold a mapping of sections")
        tree = loaded
    for override in overrides or []:
        apply_override(tree, override)
    return from_dict(Config, tree, checks=SECTION_CHECKS if torch else TORCH_FREE_CHECKS)


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved config as YAML (atomically: temp file, then rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")
    tmp.replace(path)
