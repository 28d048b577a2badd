"""Opening a user's files for the streaming preparation (`attnmt.data.streaming`): plain,
`.gz` or standard input ("-"), read as lines of bytes. A file that cannot be opened or read
(missing, a directory, not readable, a .gz damaged anywhere: a bad header, bad data, cut
short, a wrong CRC; a disk error) is one `DataError` naming the file and, once reading has
begun, the line."""

from __future__ import annotations

import gzip
import sys
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from attnmt.errors import DataError

BOM = "\ufeff".encode()
# What reading a damaged .gz raises (a bad header or CRC: OSError; cut short: EOFError; bad
# compressed data: zlib.error); a disk error is an OSError too.
GZIP_ERRORS = (OSError, EOFError, zlib.error)


def display(path: str) -> str:
    """A path as messages name it ("<stdin>" for "-")."""
    return "<stdin>" if path == "-" else path


def open_binary(path: str) -> BinaryIO:
    """A file (or standard input for "-") as bytes, `.gz` decompressed; a DataError naming
    the file when it cannot be opened."""
    if path == "-":
        return sys.stdin.buffer
    opener = gzip.open if path.endswith(".gz") else open
    try:
        handle = opener(path, "rb")  # the caller closes it
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; check the path and the file name.") from None
    except IsADirectoryError:
        raise DataError(f"{path} is a directory; give the path of a text file.") from None
    except PermissionError:
        raise DataError(f"{path}: permission denied; make the file readable.") from None
    except OSError as err:
        raise DataError(
            f"{path}: cannot be read ({err.strerror or err}); check the file."
        ) from None
    if isinstance(handle, gzip.GzipFile):
        try:
            handle.peek(1)  # a file that is not gzip fails here, not in the middle
        except GZIP_ERRORS as err:
            handle.close()
            raise DataError(unreadable(path, err, 1)) from None
    return handle  # type: ignore[return-value]


def unreadable(path: str, err: BaseException, line: int) -> str:
    """The sentence for a file that fails while it is read, at `line`."""
    if path.endswith(".gz"):
        return (
            f"{path}: not a readable gzip file at line {line:,} ({err}); check the file "
            "(`gzip -t` tests it)."
        )
    reason = err.strerror if isinstance(err, OSError) and err.strerror else err
    return f"{display(path)}: cannot be read at line {line:,} ({reason}); check the file."


def guarded(handle: BinaryIO, path: str) -> Iterator[bytes]:
    """The lines of `handle`; a failure in the middle (`unreadable`) is a DataError naming
    the file and the line."""
    number = 0
    try:
        for number, line in enumerate(handle, start=1):  # noqa: B007 (read in `except`)
            yield line
    except GZIP_ERRORS as err:
        raise DataError(unreadable(path, err, number + 1)) from None
