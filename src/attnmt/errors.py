"""Errors a user can act on.

`UserError` carries one sentence: what is wrong, where, and how to fix it. The CLI prints
it without a traceback and exits with status 2. Library code raises it (or a subclass) for
bad input from outside the program: files, configs, names on the command line. Programming
errors (wrong tensor shapes passed by code) stay `ValueError`/`TypeError`.
"""


class UserError(Exception):
    """Bad input from a user: the message is shown as-is, then the program exits 2."""


class ConfigError(UserError):
    """A configuration file or override is wrong (unknown key, bad type, bad value)."""


class DataError(UserError):
    """An input data file is wrong (missing, bad encoding, malformed line)."""


class CheckpointError(UserError):
    """A checkpoint or run directory is missing, damaged or not ours."""


# A module a command could not import -> the extra of pyproject.toml that installs it. A
# plain `pip install attnmt` is the runtime (decoding an ONNX export, without torch);
# tests/test_install.py checks each module here belongs to its extra.
EXTRAS = {
    "torch": "train",
    "safetensors": "train",
    "sacrebleu": "train",
    "sklearn": "train",
    "fastapi": "serve",
    "uvicorn": "serve",
    "onnx": "onnx",
    "onnxscript": "onnx",
    "ctranslate2": "export",
}


def missing_extra(error: ModuleNotFoundError) -> UserError | None:
    """The sentence for a module that one of attnmt's extras installs, else None (a missing
    module of any other kind is a bug or a broken install, and keeps its traceback)."""
    module = (error.name or "").split(".")[0]
    if module not in EXTRAS:
        return None
    extra = EXTRAS[module]
    return UserError(
        f"{module} is not installed (a plain install of attnmt decodes ONNX exports only): "
        f"pip install 'attnmt[{extra}]'"
    )
