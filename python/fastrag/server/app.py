"""The HTTP API and the page: :func:`create_app` wires the routes to the live index and the model.

Routes parse and check their parameters (:mod:`fastrag.server.params`), confine paths
(:mod:`fastrag.server.safety`) and hand the work to a thread: searches run concurrently in the thread
pool (the native core releases the GIL), generation runs on the model's own worker, one at a time.
Every error is JSON ``{"error": "..."}`` with a 4xx or 5xx status; a bug is logged on the server and
answered with a generic 500, never with a stack trace.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from fastrag.config import CHUNK_TARGET_SIZE, DEFAULT_INDEX_DIR, DEFAULT_REPO_PATH, DEFAULT_SEARCH_RESULTS_DIR
from fastrag.errors import UserError
from fastrag.index import IndexParams, build_index
from fastrag.models import MinimalSource
from fastrag.prompt import NO_SOURCES_ANSWER
from fastrag.search import search_dataset, to_sources
from fastrag.server import schema
from fastrag.server.answers import Answer, Answerer
from fastrag.server.auth import Access
from fastrag.server.errors import ApiError, status_of
from fastrag.server.live import LiveIndex
from fastrag.server.params import AnswerArgs, IndexArgs, SearchArgs, SearchDatasetArgs, SpanArgs, read_params
from fastrag.server.results import CACHE_SIZE, SearchResults, encode
from fastrag.server.safety import MAX_BODY_BYTES, Confinement, Guard
from fastrag.server.texts import SourceTexts

logger = logging.getLogger("fastrag.server")

#: The page and its assets (packaged with the Python sources).
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"


@dataclass
class Services:
    """What the routes work with; kept on ``app.state.fastrag`` (tests look at it)."""

    root: Path
    index_dir: Path
    models_dir: Path
    confinement: Confinement
    live: LiveIndex
    texts: SourceTexts
    results: SearchResults
    answerer: Answerer
    building: threading.Lock


def create_app(
    index_dir: Path = DEFAULT_INDEX_DIR,
    data_dir: Path = Path("data"),
    model: str | None = None,
    *,
    models_dir: Path | None = None,
    allowed_hosts: Sequence[str] | None = None,
    access: Access | None = None,
    cache_size: int = CACHE_SIZE,
    max_body: int = MAX_BODY_BYTES,
) -> FastAPI:
    """The application serving the index in ``index_dir`` and the model ``model`` (``None``: the default).

    Paths given to the API must lie in ``data_dir``; they are relative to its parent, the project root
    (as result paths such as ``data/raw/vllm-0.10.1/README.md`` are). ``models_dir`` defaults to
    ``data_dir/models``; ``allowed_hosts`` restricts the ``Host`` header, ``access`` asks for a token
    (see :class:`Guard` and :mod:`fastrag.server.auth`).
    """
    data = Path(os.path.abspath(data_dir))
    root = data.parent
    index = Path(os.path.abspath(index_dir))
    models = Path(os.path.abspath(models_dir)) if models_dir is not None else data / "models"
    live = LiveIndex(index, models)
    texts = SourceTexts(root)

    def corpus_roots() -> list[Path]:  # of the generation in memory: checking paths never loads an index
        current = live.loaded
        return [current.corpus_root] if current is not None and current.corpus_root is not None else []

    services = Services(
        root=root,
        index_dir=index,
        models_dir=models,
        confinement=Confinement(root, data, corpus_roots),
        live=live,
        texts=texts,
        results=SearchResults(live, texts, cache_size),
        answerer=Answerer(model, models, texts),
        building=threading.Lock(),
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        services.answerer.close()

    app = FastAPI(
        title="fastrag",
        summary="Retrieval-augmented generation over a codebase: search, answers with citations, indexing.",
        version="0.1.0",
        docs_url=None,  # Swagger UI and ReDoc load from a CDN: the page must work offline
        redoc_url=None,
        openapi_url="/openapi.json",
        lifespan=lifespan,
    )
    app.state.fastrag = services
    app.add_middleware(Guard, max_body=max_body, allowed_hosts=allowed_hosts, access=access)
    _errors(app)
    _routes(app, services)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    return app


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _errors(app: FastAPI) -> None:
    @app.exception_handler(UserError)
    async def user_error(_: Request, exc: UserError) -> JSONResponse:
        return _error(status_of(exc), str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request refused"
        return _error(exc.status_code, message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        return _error(400, str(first.get("msg", "invalid request")))

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        logger.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal server error")


def _json(body: bytes, headers: dict[str, str] | None = None) -> Response:
    return Response(body, media_type="application/json", headers=headers)


def _routes(app: FastAPI, s: Services) -> None:
    default_repo = s.confinement.display(s.root / DEFAULT_REPO_PATH)
    default_save = s.confinement.display(s.root / DEFAULT_SEARCH_RESULTS_DIR)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"cache-control": "no-cache"})

    @app.get("/healthz", response_model=schema.Health)
    async def healthz() -> dict[str, Any]:
        """Liveness, the live index and the model's state."""
        error: str | None = None
        try:
            live = await run_in_threadpool(s.results.current)
        except ApiError as exc:
            live, error = None, str(exc)
        return {
            "status": "ok",
            "generation": live.generation if live else None,
            "files": len(live.paths) if live else 0,
            "chunks": len(live.retriever.index.chunks) if live else 0,
            "vectors": bool(live and live.retriever.index.has_vectors),
            "index_error": error,
            "model": s.answerer.name,
            "model_loaded": s.answerer.loaded,
            "cache_entries": len(s.results.cache),
            "cache_hits": s.results.cache.hits,
            "cache_misses": s.results.cache.misses,
        }

    async def search(request: Request) -> Response:
        """The k spans that best answer ``query`` (``X-Cache: hit`` when served from the LRU cache)."""
        args = SearchArgs.parse(await read_params(request, SearchArgs.FIELDS))
        body, cached = await run_in_threadpool(s.results.search, args.query, args.k, args.mode)
        return _json(body, {"x-cache": "hit" if cached else "miss"})

    search_responses: dict[int | str, dict[str, Any]] = {200: {"model": schema.SearchResponse}, **schema.ERRORS}
    app.add_api_route(
        "/search", search, methods=["GET"], operation_id="search_get", responses=search_responses,
        openapi_extra=schema.query_doc(schema.SearchRequest),
    )  # fmt: skip
    app.add_api_route(
        "/search", search, methods=["POST"], operation_id="search_post", responses=search_responses,
        openapi_extra=schema.body_doc(schema.SearchRequest),
    )  # fmt: skip

    @app.post(
        "/answer",
        responses={200: {"model": schema.AnswerResponse, "content": {"text/event-stream": {}}}, **schema.ERRORS},
        openapi_extra=schema.body_doc(schema.AnswerRequest),
    )
    async def answer(request: Request) -> Response:
        """Retrieve, then answer with citations; ``stream=true`` sends server-sent events."""
        args = AnswerArgs.parse(await read_params(request, AnswerArgs.FIELDS))
        sources: list[MinimalSource] = []
        if args.k > 0:
            hits = await run_in_threadpool(lambda: s.results.current().search(args.query, args.k, args.mode))
            sources = to_sources(hits)
        if not sources:
            fixed = _answer_payload(args.query, NO_SOURCES_ANSWER, sources, None, None)
            return _stream_fixed(fixed) if args.stream else JSONResponse(fixed)
        if not args.stream:
            done: Answer = await asyncio.wrap_future(s.answerer.generate(args.query, sources, args.max_new_tokens))
            return JSONResponse(_answer_payload(args.query, done.answer, sources, done, s.answerer.name))
        await asyncio.wrap_future(s.answerer.ensure_loaded())  # a missing model is a 503, not a broken stream
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def push(item: str | None) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone (shutdown): nobody is listening
                pass

        future = s.answerer.generate(args.query, sources, args.max_new_tokens, push)
        future.add_done_callback(lambda _: push(None))
        return _stream(_events(queue, future, args.query, sources, s.answerer.name))

    @app.post(
        "/index",
        responses={200: {"model": schema.IndexResponse}, 409: {"model": schema.ErrorResponse}, **schema.ERRORS},
        openapi_extra=schema.body_doc(schema.IndexRequest),
    )
    async def index(request: Request) -> Response:
        """Build (or update) the index into a new generation; searches keep the old one until it is published."""
        args = IndexArgs.parse(await read_params(request, IndexArgs.FIELDS), default_repo)
        repo = s.confinement.check("repo_path", args.repo_path)
        if not s.building.acquire(blocking=False):
            raise ApiError(409, "an index build is already running")
        try:
            report = await run_in_threadpool(
                build_index,
                repo,
                s.index_dir,
                IndexParams(
                    max_chunk_size=args.max_chunk_size,
                    target_size=min(CHUNK_TARGET_SIZE, args.max_chunk_size),
                    embed=args.vectors,
                ),
                display_root=s.confinement.display(repo),
                progress=False,
                models_dir=s.models_dir,
            )
        finally:
            s.building.release()
        await run_in_threadpool(s.results.current)  # load the new generation now, not on the next search
        return JSONResponse(
            {
                "files": report.files,
                "chunks": report.chunks,
                "seconds": round(report.seconds, 3),
                "up_to_date": report.up_to_date,
                "generation": report.path.name if report.path is not None else None,
                "chunked": report.chunked,
                "reused": report.reused,
                "removed": report.removed,
                "skipped": len(report.skipped),
                "vectors": report.vectors,
            }
        )

    @app.post(
        "/search_dataset",
        responses={200: {"model": schema.SearchDatasetResponse}, **schema.ERRORS},
        openapi_extra=schema.body_doc(schema.SearchDatasetRequest),
    )
    async def search_dataset_route(request: Request) -> Response:
        """Search every question of a dataset and save the results file (atomically)."""
        args = SearchDatasetArgs.parse(await read_params(request, SearchDatasetArgs.FIELDS), default_save)
        dataset = s.confinement.check("dataset_path", args.dataset_path)
        save = s.confinement.check("save_directory", args.save_directory)
        started = time.perf_counter()
        target, count = await run_in_threadpool(
            search_dataset, dataset, args.k, save, s.index_dir, progress=False, mode=args.mode
        )
        return JSONResponse(
            {
                "saved_to": s.confinement.display(target),
                "questions": count,
                "k": args.k,
                "mode": args.mode,
                "seconds": round(time.perf_counter() - started, 3),
            }
        )

    @app.get(
        "/span",
        responses={200: {"model": schema.SpanResponse}, 404: {"model": schema.ErrorResponse}, **schema.ERRORS},
        openapi_extra=schema.query_doc(schema.SpanRequest),
    )
    async def span(request: Request) -> Response:
        """The text and line range of ``path[start:end]``, for a file of the live index only."""
        args = SpanArgs.parse(await read_params(request, SpanArgs.FIELDS))
        path = s.confinement.check("path", args.path)
        live = await run_in_threadpool(s.results.current)
        name = s.confinement.display(path)
        if name not in live.paths:
            raise ApiError(404, f"{args.path} is not a file of the index")
        found = await run_in_threadpool(s.texts.get, name)
        if found is None:
            raise ApiError(404, f"{name} cannot be read")
        if args.end > len(found.text):
            raise UserError(f"end {args.end} is past the end of {name} ({len(found.text)} characters)")
        first, last = found.lines(args.start, args.end)
        return _json(
            encode(
                {
                    "file_path": name,
                    "start": args.start,
                    "end": args.end,
                    "first_line": first,
                    "last_line": last,
                    "text": found.text[args.start : args.end],
                }
            )
        )


def _answer_payload(
    question: str, text: str, sources: list[MinimalSource], done: Answer | None, model: str | None
) -> dict[str, Any]:
    return {
        "question": question,
        "answer": text,
        "sources": [src.model_dump(mode="json") for src in sources],
        "cited": [
            {
                "file_path": e.source.file_path,
                "first_character_index": e.start,
                "last_character_index": e.end,
                "citation": e.citation,
            }
            for e in (done.cited if done is not None else [])
        ],
        "model": model,
        "prompt_tokens": done.prompt_tokens if done is not None else 0,
        "seconds": round(done.seconds, 3) if done is not None else 0.0,
    }


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; ``data`` is sent as JSON (a text piece is a JSON string: newlines stay escaped)."""
    head = f"event: {event}\n" if event else ""
    return head.encode() + b"data: " + encode(data) + b"\n\n"


def _stream(events: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        events, media_type="text/event-stream", headers={"cache-control": "no-cache", "x-accel-buffering": "no"}
    )


def _stream_fixed(payload: dict[str, Any]) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        yield sse(payload["answer"])
        yield sse(payload, "sources")
        yield sse({}, "done")

    return _stream(events())


async def _events(
    queue: asyncio.Queue[str | None], future: Future[Any], question: str, sources: list[MinimalSource], model: str
) -> AsyncIterator[bytes]:
    """Text pieces as they come (``data:``), then ``event: sources`` with the whole answer, then ``event: done``.

    A failure after the stream started becomes ``event: error`` with ``{"error": ...}``.
    """
    while (piece := await queue.get()) is not None:
        yield sse(piece)
    try:
        done: Answer = future.result()
    except UserError as exc:
        yield sse({"error": str(exc)}, "error")
        return
    except Exception as exc:  # a bug: logged here, never sent
        logger.error("internal error while generating", exc_info=exc)
        yield sse({"error": "internal server error"}, "error")
        return
    yield sse(_answer_payload(question, done.answer, sources, done, model), "sources")
    yield sse({}, "done")
