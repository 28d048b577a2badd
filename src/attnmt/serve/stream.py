"""A translation streamed as it is decoded: Server-Sent Events over a POST.

`POST /api/translate/stream` opens a job (`ModelWorker.open`) whose options carry a
`StreamSink`. The decoding thread puts one event per search step into the sink (the new
nodes of the recorded search, `attnmt.serve.decoding.step_event`); the answer's coroutine
(`StreamSink.events`) sends them in order, then the final answer. The events, in order:

    event: start   data: {"model", "beam", "source", "source_pieces", "truncated"}
    event: step    data: {"depth", "nodes": [...]}        one per decoding step
    event: done    data: the answer of POST /api/translate (its `search` included)
    event: error   data: {"detail": "one sentence"}         instead of done

Leaving stops the work: when the client closes the connection (or a page calls
`AbortController.abort()`), the generator is closed or finds the client gone, cancels its
job, and the search stops at its next step (`attnmt.cancel`), freeing the worker. Past the
server's timeout the job is abandoned the same way and an error event says so. A
streamed job never shares a batch (its sink makes its options unique).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from attnmt.errors import UserError

_END = object()  # put when the job's future settles: no event comes after it
POLL_SECONDS = 0.25  # how often a quiet stream checks whether its client is still there


def event(kind: str, data: Any) -> str:
    """One Server-Sent Event: its type and its data as one line of JSON."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class StreamSink:
    """Events from the decoding thread to the coroutine that sends them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue = asyncio.Queue()

    def put(self, kind: str, data: Any) -> None:
        """Queue an event (from any thread; in order of the calls)."""
        with contextlib.suppress(RuntimeError):  # a closed loop: the server is stopping
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (kind, data))

    async def events(
        self,
        worker,
        job,
        answer: Callable[[list[Any]], Any],
        disconnected: Callable[[], Awaitable[bool]] | None = None,
    ) -> AsyncIterator[str]:
        """The stream of `job`: its events as they come, then `answer(results)` as "done"
        (or an "error"); the job is cancelled if the stream ends before it does."""
        # The worker settles the future with call_soon_threadsafe after the thread's last
        # put, so the end marker comes after every step event.
        job.future.add_done_callback(lambda _: self.queue.put_nowait((_END, None)))
        checked = time.monotonic()
        try:
            while True:
                now = time.monotonic()
                left = job.deadline - now
                if left <= 0:
                    yield event("error", {"detail": "the request took longer than the timeout"})
                    return
                # Every POLL_SECONDS, busy or not: a server may drop what is sent to a
                # client that has gone without telling the sender (uvicorn does).
                if disconnected is not None and now - checked >= POLL_SECONDS:
                    checked = now
                    if await disconnected():
                        return  # nobody reads on: the finally below stops the work
                try:
                    kind, data = await asyncio.wait_for(
                        self.queue.get(), timeout=min(left, POLL_SECONDS)
                    )
                except TimeoutError:
                    continue
                if kind is not _END:
                    yield event(kind, data)
                    continue
                if job.future.cancelled():
                    return
                error = job.future.exception()
                if error is not None:
                    detail = str(error) if isinstance(error, UserError) else repr(error)
                    yield event("error", {"detail": detail})
                    return
                yield event("done", answer(job.future.result()).model_dump(mode="json"))
                return
        finally:
            if not job.future.done():  # the client left, or the time ran out
                job.future.cancel()
                worker.cancel(job)
