"""The request body: at most `--max-body-bytes` of it is ever read (`BodyLimit`, ASGI
middleware), and a body that is not JSON gets one sentence saying why (`unreadable`)."""

from __future__ import annotations

import sys

from fastapi.responses import JSONResponse


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is answered 413 unread.

    The declared Content-Length is checked first; a body without one (chunked) is counted
    as it arrives, so at most `limit` bytes are ever held.
    """

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send, f"the request body is {int(declared):,} bytes")
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left before the body ended
                return
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._refuse(send, f"the request body is over {self.limit:,} bytes")
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send, what: str) -> None:
        detail = f"{what}; this server takes at most {self.limit:,} bytes (--max-body-bytes)"
        response = JSONResponse({"detail": detail}, status_code=413)
        await response({"type": "http"}, None, send)


def unreadable(err: BaseException) -> str:
    """Why json.loads could not read a request body, as one sentence (what, how to fix)."""
    if isinstance(err, UnicodeDecodeError):
        return (
            f"the body is not UTF-8 (byte 0x{err.object[err.start]:02X} at offset {err.start}); "
            "send JSON encoded as UTF-8"
        )
    if isinstance(err, RecursionError):
        return "the JSON is nested too deeply to read; send the object /openapi.json describes"
    if isinstance(err, ValueError) and "digits" in str(err):
        most = sys.get_int_max_str_digits()
        return f"the JSON holds a number of over {most:,} digits; no field takes one so large"
    return f"the body is not JSON ({type(err).__name__}); send the object /openapi.json describes"
