"""Cooperative cancellation: long work that stops when nobody waits for it any more.

A decoding search checks between steps and an explanation between its chunks whether the
work should go on; the server says when it should not (the client disconnected, or the
request's deadline passed). The check is one cheap call, `checkpoint()`, that does nothing
unless the calling thread is inside `stop_when(...)`:

    with stop_when(lambda: job.abandoned):      # in the server's worker thread
        translator.translate(lines)              # raises Cancelled once abandoned

The predicate is thread-local, so a worker thread's cancellation never reaches another
thread's work, and code outside any `stop_when` (the CLI, the notebooks, the tests) runs
exactly as before at the cost of one attribute read per step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_local = threading.local()


class Cancelled(Exception):  # noqa: N818 (an outcome, like asyncio.CancelledError without its clash)
    """The work was abandoned (its client left or its deadline passed) and stopped early."""


@contextmanager
def stop_when(should_stop: Callable[[], bool]) -> Iterator[None]:
    """Inside the block, `checkpoint()` on this thread raises `Cancelled` once
    `should_stop()` is true. Blocks nest; the innermost predicate applies."""
    outer = getattr(_local, "should_stop", None)
    _local.should_stop = should_stop
    try:
        yield
    finally:
        _local.should_stop = outer


def checkpoint() -> None:
    """Raise `Cancelled` if this thread's work has been abandoned (see `stop_when`)."""
    should_stop = getattr(_local, "should_stop", None)
    if should_stop is not None and should_stop():
        raise Cancelled
