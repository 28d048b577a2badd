"""A translation streamed as it is decoded: Server-Sent Events over a POST.

`POST /api/translate/stream` makes a `StreamSink` holding the `start` event, then opens a
job (`ModelWorker.open`) whose options carry the sink. The decoding thread is the only
producer of the sink's queue: one `step` per search step (the new nodes of the recorded
search, `step_event`), then the job's future settles, which puts the end marker. The
answer's coroutine (`StreamSink.events`) sends `start` itself before it reads the queue, so
the order is a guarantee, not a timing: `start`, the steps in the order the thread made
them, then exactly one `done` or `error`, however the thread and the event loop interleave.
The events, in order:

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

from fastapi.responses import StreamingResponse

from attnmt.decoding.records import node_record
from attnmt.errors import UserError

_END = object()  # put when the job's future settles: no event comes after it
POLL_SECONDS = 0.25  # how often a quiet stream checks whether its client is still there


def event(kind: str, data: Any) -> str:
    """One Server-Sent Event: its type and its data as one line of JSON."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class StreamSink:
    """Events from the decoding thread to the coroutine that sends them; `start`, the first
    event, is held by the sink and sent before anything the thread puts."""

    def __init__(self, loop: asyncio.AbstractEventLoop, start: dict[str, Any]) -> None:
        self.loop = loop
        self.start = start
        self.queue: asyncio.Queue = asyncio.Queue()

    def put(self, kind: str, data: Any) -> None:
        """Queue an event from the decoding thread (in order of its calls: each is one
        `call_soon_threadsafe`, which the loop runs first in, first out)."""
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
            yield event("start", self.start)
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


class EventStream(StreamingResponse):
    """Server-Sent Events (`attnmt.serve.stream`)."""

    media_type = "text/event-stream"


# One Server-Sent Event as a client parses it (OpenAPI 3.2's itemSchema for event streams).
SSE_EVENT = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["start", "step", "done", "error"]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
    "required": ["event", "data"],
}


def stream_responses(responses: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The stream route's documented answers: events on 200, the refusals as JSON (with
    the stream's media type as the route's, FastAPI would file them under it)."""
    out: dict[int, dict[str, Any]] = {
        200: {
            "description": "Server-Sent Events: 'start' (the source subwords), one 'step' per "
            "decoding step (the search's new nodes, as in 'search'), then 'done' (the answer "
            "of POST /api/translate, search included) or 'error' ({detail})",
            # Each event (itemSchema), and the stream as a whole, for tools without 3.2's.
            "content": {
                "text/event-stream": {
                    "schema": {"type": "array", "items": SSE_EVENT},
                    "itemSchema": SSE_EVENT,
                }
            },
        }
    }
    for code, answer in responses.items():
        ref = f"#/components/schemas/{answer['model'].__name__}"
        out[code] = {
            "description": answer["description"],
            "content": {"application/json": {"schema": {"$ref": ref}}},
        }
    return out


def step_event(translator, nodes) -> dict[str, Any]:
    """A streamed step: the nodes the search made (`attnmt.decoding.search.Node`) as
    JSON-ready data, the same as the final answer's `search.nodes` but for `best` and
    `rank`, which only the end of the search knows."""
    records = [node_record(n, translator.vocab.tgt, translator.choice) for n in nodes]
    return {"depth": max((n["depth"] for n in records), default=0), "nodes": records}
