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
