"""One model, many clients: a bounded queue in front of a single decoding thread.

Each served run has a `ModelWorker`. Requests become `Job`s in its queue; one thread takes
the oldest job together with the waiting jobs that decode the same way (beam size, with or
without alignments and weights, the explanation method), up to `batch_lines` lines, and
translates them as one batch, so concurrent clients share batches instead of running the
model on top of each other. Memory stays bounded: at most `capacity` jobs wait (`submit`
raises `QueueFullError` past that, which the app answers with 503 and Retry-After), and a
job whose client left or timed out is taken out of the queue (`cancel`), freeing its place.

Work nobody waits for stops: each batch is decoded inside `attnmt.cancel.stop_when`, so
the search and the explanations (which call `checkpoint()` between their steps and
chunks) raise `Cancelled` once *every* job of the batch is abandoned (its client left, or
its deadline passed); a batch shared with a live client goes on. The thread then counts
the batch in `cancelled` and takes the next job.

    worker = ModelWorker("quickstart", decode, capacity=64)   # decode(lines, options)
    worker.start()
    result = await worker.run(lines, options, timeout=60.0)  # from an event loop
    worker.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from attnmt.cancel import Cancelled, stop_when
from attnmt.service import Request


class QueueFullError(Exception):
    """The worker's queue holds `capacity` jobs already."""


class ClientGoneError(Exception):
    """The client disconnected while its job waited."""


@dataclass(frozen=True)
class Options:
    """How a job's lines are decoded; jobs with equal options share a batch. `request`:
    the service's (`attnmt.service.Request`: the search, what to show, the explanation);
    `task`: "translate" (lines are sentences, or image texts) or "score" (lines are
    (source, target) pairs)."""

    request: Request = field(default_factory=Request)
    task: str = "translate"
    # A streamed job's `StreamSink`: compared by identity, so it never shares a batch.
    sink: Any = None

    @property
    def beam(self) -> int:
        return self.request.beam

    @property
    def explain(self) -> str | None:
        """The request's explanation method (the server takes one), or None."""
        return self.request.explain[0] if self.request.explain else None

    @property
    def ig_steps(self) -> int:
        return self.request.ig_steps


@dataclass(eq=False)
class Job:
    lines: list[Any]
    options: Options
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    deadline: float = math.inf  # time.monotonic() past which nobody waits for the result

    @property
    def abandoned(self) -> bool:
        """Nobody waits for the result: the future is settled or cancelled (the client
        left, or `run` gave up), or the deadline has passed. Read from the worker thread."""
        return self.future.done() or time.monotonic() >= self.deadline

    def deliver(self, results: list[Any] | None, error: BaseException | None = None) -> None:
        """Hand the outcome to the waiting coroutine (from the worker thread)."""

        def settle() -> None:
            if self.future.done():  # cancelled meanwhile: nobody is waiting
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(results)

        with contextlib.suppress(RuntimeError):  # a closed loop: the server is stopping
            self.loop.call_soon_threadsafe(settle)


Decode = Callable[[Sequence[Any], Options], list[Any]]


class ModelWorker:
    """A decoding thread with a bounded queue of jobs (see the module docstring)."""

    def __init__(
        self, name: str, decode: Decode, *, capacity: int = 64, batch_lines: int = 64
    ) -> None:
        if capacity < 1 or batch_lines < 1:
            raise ValueError("capacity and batch_lines must be at least 1")
        self.name = name
        self.decode = decode
        self.capacity = capacity
        self.batch_lines = batch_lines
        self._queue: deque[Job] = deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.batches = 0  # batches decoded, and the jobs in them (for the load figures)
        self.jobs_done = 0
        self.cancelled = 0  # batches stopped part-way: every one of their jobs abandoned
        self.seconds_per_job = 0.1  # a moving average, for Retry-After

    @property
    def waiting(self) -> int:
        with self._ready:
            return len(self._queue)

    def start(self) -> None:
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(
                target=self._serve, name=f"attnmt-{self.name}", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the batch in progress; jobs still queued are failed."""
        with self._ready:
            self._stopping = True
            left = list(self._queue)
            self._queue.clear()
            self._ready.notify_all()
        for job in left:
            job.deliver(None, RuntimeError("the server is stopping"))
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def submit(self, job: Job) -> None:
        with self._ready:
            if self._stopping:
                raise RuntimeError("the server is stopping")
            if len(self._queue) >= self.capacity:
                raise QueueFullError(self.name)
            self._queue.append(job)
            self._ready.notify()

    def cancel(self, job: Job) -> None:
        """Take a job out of the queue if it is still waiting (its client is gone)."""
        # ValueError: already taken by the thread; its result will be dropped.
        with self._ready, contextlib.suppress(ValueError):
            self._queue.remove(job)

    async def run(
        self, lines: list[Any], options: Options, *, timeout: float, disconnected=None
    ) -> list[Any]:
        """Queue `lines`, wait for their results. Raises `QueueFullError`, `TimeoutError`, or
        `ClientGoneError` when `disconnected()` (an async callable) says the client left;
        in each case (and on cancellation) the job no longer holds a place in the queue,
        and its decoding stops at the next checkpoint unless it shares a batch with a
        client still waiting (the job's deadline is `timeout` from now)."""
        job = self.open(lines, options, timeout=timeout)
        return await self.wait(job, disconnected=disconnected)

    def open(self, lines: list[Any], options: Options, *, timeout: float) -> Job:
        """Queue `lines` (raises `QueueFullError`) and return their job, to `wait` for;
        a streamed answer opens its job before it starts answering."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        job = Job(list(lines), options, loop.create_future(), loop, deadline)
        self.submit(job)
        return job

    async def wait(self, job: Job, *, disconnected=None) -> list[Any]:
        """The results of an opened job (see `run`)."""
        deadline = job.deadline
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                done, _ = await asyncio.wait({job.future}, timeout=min(left, 0.25))
                if done:
                    return job.future.result()
                if disconnected is not None and await disconnected():
                    raise ClientGoneError
        finally:
            if not job.future.done():
                job.future.cancel()
                self.cancel(job)

    # --- the thread -----------------------------------------------------------------------

    def _take(self) -> list[Job] | None:
        """The oldest job and the waiting ones with its options (None: stopping)."""
        with self._ready:
            while not self._queue and not self._stopping:
                self._ready.wait()
            if self._stopping:
                return None
            first = self._queue.popleft()
            batch, lines = [first], len(first.lines)
            for job in list(self._queue):
                if job.options == first.options and lines + len(job.lines) <= self.batch_lines:
                    self._queue.remove(job)
                    batch.append(job)
                    lines += len(job.lines)
            return batch

    def _serve(self) -> None:
        while (batch := self._take()) is not None:
            batch = [job for job in batch if not job.abandoned]
            if not batch:
                continue
            lines = [line for job in batch for line in job.lines]
            started = time.perf_counter()
            try:
                with stop_when(lambda batch=batch: all(job.abandoned for job in batch)):
                    results = self.decode(lines, batch[0].options)
            except Cancelled:  # nobody waits: no result to deliver, on to the next job
                self.cancelled += 1
                continue
            except Exception as err:  # reported to each waiting client
                for job in batch:
                    job.deliver(None, err)
                continue
            start = 0
            for job in batch:
                job.deliver(results[start : start + len(job.lines)])
                start += len(job.lines)
            self.batches += 1
            self.jobs_done += len(batch)
            seconds = (time.perf_counter() - started) / len(batch)
            self.seconds_per_job = 0.8 * self.seconds_per_job + 0.2 * seconds
