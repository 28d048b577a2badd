"""The FastAPI application of `attnmt serve` (docs/serving.md).

    decoders = {"quickstart": RunDecoder("quickstart", load_run("runs/quickstart"), settings)}
    app = create_app(decoders, settings)        # then uvicorn.run(app, ...)

Routes: `GET /` (the attention explorer page), `GET /api/health`, `GET /api/models`,
`GET /api/model?model=NAME`, `POST /api/translate` and `POST /api/score` (runs that read
text: translate, or score given translations by forced decoding), `POST /api/read`
and `GET /api/examples?model=NAME` (runs that read images); FastAPI's own `/openapi.json`
and `/docs`. Every error is JSON `{"detail": "one sentence"}` with its status: 401 (API
key), 404 (no such model), 413 (body, line count or compute budget over the limit), 422
(malformed JSON, a field of the wrong type or unknown, input the run does not read, an
explanation method that does not fit the run), 503 with Retry-After (queue full), 504
(waited too long). No route reads or writes a file a client names: the page is read
once, at start.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import secrets
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Annotated, Any

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from attnmt.data.images import canvas_text
from attnmt.errors import UserError
from attnmt.serve.body import BodyLimit, unreadable
from attnmt.serve.decoding import RunDecoder, Settings
from attnmt.serve.schemas import (
    ErrorBody,
    ExampleList,
    Health,
    ModelInfo,
    ModelList,
    QueueState,
    ReadRequest,
    ReadResponse,
    ScoreRequest,
    ScoreResponse,
    StreamRequest,
    TranslateRequest,
    TranslateResponse,
)
from attnmt.serve.stream import EventStream, StreamSink, stream_responses
from attnmt.serve.validation import MAX_EXAMPLES, clean_line, size_problem
from attnmt.serve.worker import ClientGoneError, ModelWorker, Options, QueueFullError
from attnmt.service import Request as Asked  # a decoding request; `Request` is HTTP's
from attnmt.views.html import inline_assets

API_KEY_ENV = "ATTNMT_API_KEY"
# The two ways to send the key (module level: FastAPI reads the annotations that use them).
BEARER = HTTPBearer(auto_error=False, description="the server's --api-key")
KEY_HEADER = APIKeyHeader(name="X-API-Key", auto_error=False)


class FieldError(BaseModel):
    field: str
    message: str


class InvalidBody(BaseModel):
    detail: str
    # Only a body that fails validation lists its fields; a refusal by the run (text to an
    # image run, an explanation that does not fit) is the one sentence alone.
    errors: list[FieldError] = Field(default_factory=list)


ERRORS = {
    401: {"model": ErrorBody, "description": "the API key is missing or wrong"},
    404: {"model": ErrorBody, "description": "no served model has that name"},
    413: {
        "model": ErrorBody,
        "description": "the body, the number of lines, or the work asked for (search steps, "
        "explanation passes: GET /api/model's limits) is over the limit",
    },
    422: {
        "model": InvalidBody,
        "description": "malformed JSON, a field wrong or unknown, input the run does not read, "
        "or an explanation method the run does not take",
    },
    503: {"model": ErrorBody, "description": "the queue is full: retry after Retry-After s"},
    504: {"model": ErrorBody, "description": "the request waited longer than the timeout"},
}


def explorer_page() -> str:
    """The explorer page as served at `/`: explorer.html with the heatmap and the tree
    inlined, as notebooks show them (attnmt.views). `attnmt export --format web` writes it
    as a static site's index.html (attnmt.export.web.static_page)."""
    page = files("attnmt.serve").joinpath("explorer.html").read_text(encoding="utf-8")
    return inline_assets(page)


def create_app(decoders: dict[str, RunDecoder], settings: Settings) -> FastAPI:
    """The application serving `decoders` (name -> run), the first one by default."""
    if not decoders:
        raise ValueError("create_app needs at least one run to serve")
    workers = {
        name: ModelWorker(
            name, decoder, capacity=settings.queue_size, batch_lines=settings.batch_lines
        )
        for name, decoder in decoders.items()
    }
    infos = {name: decoder.info() for name, decoder in decoders.items()}
    page = explorer_page()

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        for worker in workers.values():
            worker.start()
        try:
            yield
        finally:
            for worker in workers.values():
                worker.stop()

    app = FastAPI(
        title="attnmt",
        summary="Translate with trained attnmt runs and see their attention",
        lifespan=lifespan,
    )
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.state.workers = workers

    @app.exception_handler(RequestValidationError)
    async def invalid_body(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            FieldError(
                field=".".join(str(p) for p in e["loc"] if p != "body") or "body",
                message=e["msg"].removeprefix("Value error, "),  # our validators' sentences
            )
            for e in exc.errors()
        ]
        detail = "; ".join(f"{e.field}: {e.message}" for e in errors)
        return JSONResponse(InvalidBody(detail=detail, errors=errors).model_dump(), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # FastAPI answers a body that json.loads raises on with other than a JSONDecodeError
        # 400 "There was an error parsing the body": malformed JSON too, so 422 with why.
        if exc.status_code == 400 and exc.__cause__ is not None:
            message = unreadable(exc.__cause__)
            errors = [FieldError(field="body", message=message)]
            answer = InvalidBody(detail=f"body: {message}", errors=errors)
            return JSONResponse(answer.model_dump(), status_code=422)
        return await http_exception_handler(request, exc)

    def authorised(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
        key: Annotated[str | None, Depends(KEY_HEADER)],
    ) -> None:
        if settings.api_key is None:
            return
        given = key if key is not None else (credentials.credentials if credentials else "")
        if not secrets.compare_digest(given.encode(), settings.api_key.encode()):
            raise HTTPException(
                401,
                "this server needs its API key: send 'Authorization: Bearer KEY' or "
                "'X-API-Key: KEY'",
                headers={"WWW-Authenticate": "Bearer"},
            )

    # Without a key nothing is asked for, so the published schema names no security scheme
    # and no 401 (a client generated from it would otherwise send a key for nothing).
    keyed = settings.api_key is not None
    api = [Depends(authorised)] if keyed else []
    responses = ERRORS if keyed else {code: r for code, r in ERRORS.items() if code != 401}

    def decoder_named(name: str | None) -> str:
        if name is None:
            return next(iter(decoders))
        if name not in decoders:
            served = ", ".join(decoders)
            raise HTTPException(404, f"no model named {name!r} is served; served: {served}")
        return name

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def explorer() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/api/health", response_model=Health, dependencies=api, responses=responses)
    async def health() -> Health:
        return Health(
            status="ok",
            models={
                name: QueueState(waiting=w.waiting, capacity=w.capacity, cancelled=w.cancelled)
                for name, w in workers.items()
            },
        )

    @app.get("/api/models", response_model=ModelList, dependencies=api, responses=responses)
    async def models() -> ModelList:
        return ModelList(models=list(infos.values()))

    @app.get("/api/model", response_model=ModelInfo, dependencies=api, responses=responses)
    async def model(
        name: Annotated[
            str | None, Query(alias="model", description="a served run; the first if left out")
        ] = None,
    ) -> ModelInfo:
        return infos[decoder_named(name)]

    def explaining(decoder: RunDecoder, body) -> dict[str, Any]:
        """The request's explanation options (none without `explain`); a method that is
        unknown or does not fit the run is refused with the library's sentence."""
        if body.explain is None:
            return {}
        try:
            decoder.check_explain(body.explain)
        except UserError as err:
            raise HTTPException(422, str(err)) from None
        # Other methods take no steps: their requests share batches whatever they send.
        steps = body.ig_steps if body.explain == "integrated-gradients" else Asked.ig_steps
        return {"explain": (body.explain,), "ig_steps": steps}

    def no_attention(name: str, what: str) -> HTTPException:
        methods = decoders[name].explain_methods
        instead = (
            f"leave them out, or ask for an explanation that needs none (explain: one of "
            f"{', '.join(methods)})"
            if methods
            else "leave them out"  # an export explains nothing
        )
        return HTTPException(
            422,
            f"model {name!r} ({infos[name].model}) has no attention, so it has no {what}; "
            + instead,
        )

    def too_many(count: int, what: str) -> None:
        if count > settings.max_lines:
            raise HTTPException(
                413,
                f"the request has {count:,} {what}; this server takes at most "
                f"{settings.max_lines:,} per request (--max-lines)",
            )

    def queue_full(name: str) -> HTTPException:
        worker = workers[name]
        retry = max(1, min(60, math.ceil(worker.waiting * worker.seconds_per_job)))
        return HTTPException(
            503,
            f"model {name!r} has {worker.capacity} requests waiting already "
            f"(--queue-size); retry in {retry} s",
            headers={"Retry-After": str(retry)},
        )

    async def decode(name: str, lines: list[str], options: Options, request: Request):
        """The worker's results for `lines`, or None when the client has left; the queue's
        refusals become their HTTP errors."""
        worker = workers[name]
        if problem := decoders[name].over_budget(lines, options):
            raise HTTPException(413, problem)
        try:  # the job's deadline is the timeout: past it, its decoding stops (as on leaving)
            return await worker.run(
                lines, options, timeout=settings.timeout, disconnected=request.is_disconnected
            )
        except QueueFullError:
            raise queue_full(name) from None
        except TimeoutError:
            raise HTTPException(
                504,
                f"the request waited more than {settings.timeout:g} s (--timeout); send less "
                "at once, or retry when the server is less busy",
            ) from None
        except ClientGoneError:  # nobody reads this answer
            return None
        except UserError as err:
            raise HTTPException(422, str(err)) from None

    @app.post(
        "/api/translate", response_model=TranslateResponse, dependencies=api, responses=responses
    )
    async def translate(body: TranslateRequest, request: Request) -> TranslateResponse | Response:
        name, lines, options = translate_checks(body)
        results = await decode(name, lines, options, request)
        if results is None:
            return Response(status_code=499)
        for number, result in enumerate(results, start=1):  # a shared batch counts on
            result.line = number
        return TranslateResponse(model=name, beam=options.beam, translations=results)

    def translate_checks(body: TranslateRequest | StreamRequest) -> tuple[str, list[str], Options]:
        """The served run, the lines and the options of a translation request; what the
        run cannot do is refused (HTTPException) before anything is queued."""
        name = decoder_named(body.model)
        decoder = decoders[name]
        if decoder.images is not None:
            image = infos[name].image
            raise HTTPException(
                422,
                f"model {name!r} ({infos[name].model}) reads images, not text; send them to "
                f"POST /api/read as 'image': {image.height} rows of {image.width} grey levels "
                "0..16",
            )
        lines = [body.text] if body.text is not None else list(getattr(body, "lines", None) or [])
        too_many(len(lines), "lines")
        explained = explaining(decoder, body) if isinstance(body, TranslateRequest) else {}
        drawable = decoder.has_attention or bool(explained)
        if not drawable and (body.alignments or body.weights):
            raise no_attention(name, "'alignments' or 'weights'")
        return name, lines, translate_options(body, drawable, explained)

    def translate_options(
        body: TranslateRequest | StreamRequest, drawable: bool, explained
    ) -> Options:
        prefix = body.prefix
        if isinstance(prefix, str):
            prefix, error = clean_line(prefix, settings.max_line_chars)
            if error is not None:
                raise HTTPException(422, f"prefix: {error}")
            prefix = prefix or None
        elif prefix is not None:
            prefix = tuple(prefix) or None
        asked = Asked(
            beam=body.beam if body.beam is not None else settings.beam,
            alpha=body.alpha,
            n_best=body.n_best,
            links=drawable if body.alignments is None else body.alignments,
            maps="every" if body.weights else None,
            search=body.search,
            prefix=prefix,
            alternatives=body.alternatives,
            min_alternative_prob=body.min_alternative_prob,
            **explained,
        )
        return Options(checked(asked))

    def checked(asked: Asked) -> Asked:
        """The request, or its one sentence as a 422 (the checks are the service's)."""
        try:
            return asked.check()
        except UserError as err:
            raise HTTPException(422, str(err)) from None

    @app.post(
        "/api/translate/stream",
        response_class=EventStream,
        dependencies=api,
        responses=stream_responses(responses),
    )
    async def translate_stream(body: StreamRequest, request: Request) -> Response:
        """One sentence (`text`) translated step by step, each step sent as it is decoded.
        Refusals (404, 413, 422, 503) come before the stream, as HTTP statuses; leaving
        (closing the connection, `AbortController.abort()` in a page) stops the decoding."""
        name, lines, options = translate_checks(body)
        decoder, worker = decoders[name], workers[name]
        start = {"model": name, "beam": options.beam, **decoder.source_of(lines[0])}
        sink = StreamSink(asyncio.get_running_loop(), start)
        asked = dataclasses.replace(options.request, search=True)
        options = dataclasses.replace(options, request=asked, sink=sink)
        if problem := decoder.over_budget(lines, options):
            raise HTTPException(413, problem)
        try:
            job = worker.open(lines, options, timeout=settings.timeout)
        except QueueFullError:
            raise queue_full(name) from None
        return EventStream(
            sink.events(
                worker,
                job,
                lambda results: TranslateResponse(
                    model=name, beam=options.beam, translations=results
                ),
                disconnected=request.is_disconnected,
            ),
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @app.post("/api/score", response_model=ScoreResponse, dependencies=api, responses=responses)
    async def score(body: ScoreRequest, request: Request) -> ScoreResponse | Response:
        name = decoder_named(body.model)
        decoder = decoders[name]
        if decoder.images is not None:
            raise HTTPException(
                422, f"model {name!r} ({infos[name].model}) reads images; /api/score scores text"
            )
        pairs = [body.pair] if body.pair is not None else list(body.pairs or [])
        too_many(len(pairs), "pairs")
        explained = explaining(decoder, body)
        if not (decoder.has_attention or explained) and (body.alignments or body.weights):
            raise no_attention(name, "'alignments' or 'weights'")
        asked = Asked(links=body.alignments, maps="every" if body.weights else None, **explained)
        options = Options(checked(asked), task="score")
        lines = [(pair.source, pair.target) for pair in pairs]
        results = await decode(name, lines, options, request)
        if results is None:
            return Response(status_code=499)
        for number, result in enumerate(results, start=1):  # a shared batch counts on
            result.line = number
        return ScoreResponse(model=name, scores=results)

    @app.post("/api/read", response_model=ReadResponse, dependencies=api, responses=responses)
    async def read(body: ReadRequest, request: Request) -> ReadResponse | Response:
        name = decoder_named(body.model)
        decoder = decoders[name]
        if decoder.images is None:
            raise HTTPException(
                422,
                f"model {name!r} ({infos[name].model}) reads text, not images; send sentences "
                "to POST /api/translate",
            )
        images = [body.image] if body.image is not None else list(body.images or [])
        too_many(len(images), "images")
        if problem := size_problem(images, decoder.images.height, decoder.images.width):
            raise HTTPException(422, problem)
        explained = explaining(decoder, body)
        drawable = decoder.has_attention or bool(explained)
        if body.weights and not drawable:
            raise no_attention(name, "maps of where it looked ('weights')")
        beam = body.beam if body.beam is not None else settings.beam
        weights = drawable if body.weights is None else body.weights
        texts = [canvas_text(np.asarray(image, dtype=np.int64)) for image in images]
        asked = Asked(beam=beam, links=False, maps="every" if weights else None, **explained)
        options = Options(checked(asked))
        results = await decode(name, texts, options, request)
        if results is None:
            return Response(status_code=499)
        for number, result in enumerate(results, start=1):
            result.image = number
        return ReadResponse(model=name, beam=beam, readings=results)

    @app.get("/api/examples", response_model=ExampleList, dependencies=api, responses=responses)
    def examples(  # a plain def: FastAPI runs it in a thread (the first call makes canvases)
        name: Annotated[
            str | None, Query(alias="model", description="a served run; the first if left out")
        ] = None,
        n: Annotated[int, Query(ge=1, le=MAX_EXAMPLES, description="how many canvases")] = 4,
        start: Annotated[int, Query(ge=0, description="the 0-based index of the first")] = 0,
    ) -> ExampleList:
        name = decoder_named(name)
        run = decoders[name].images
        if run is None:
            raise HTTPException(
                422,
                f"model {name!r} ({infos[name].model}) reads text; examples are the test "
                "canvases of a run that reads images",
            )
        total, chosen = run.examples(start, n)
        if start >= total:
            raise HTTPException(
                422, f"start={start} is past the last of the {total} test canvases ({total - 1})"
            )
        return ExampleList(model=name, split="test", total=total, examples=chosen)

    return app
