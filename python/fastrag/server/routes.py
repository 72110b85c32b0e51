"""The routes, grouped in routers: the page and reading (``/``, ``/healthz``, ``/span``), search
(``/search``, ``/search_dataset``), answers (``/answer``) and indexing (``/index``).

Each route gets its checked parameters from its request model (:func:`fastrag.server.schemas.parsed`)
and the application's :class:`~fastrag.server.services.Services`, confines paths, and hands the work to a
thread: searches run concurrently in the thread pool (the native core releases the GIL), generation runs
on the model's own worker, one at a time.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from fastrag.answering.answer import GeneratedAnswer
from fastrag.answering.prompt import NO_SOURCES_ANSWER
from fastrag.config import CHUNK_TARGET_SIZE
from fastrag.evaluation.search_dataset import search_dataset
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.reading import FileRefused
from fastrag.indexing.sources import repository_name
from fastrag.retrieval.retriever import hits_to_sources
from fastrag.schemas import MinimalSource
from fastrag.server import schemas
from fastrag.server.errors import ApiError
from fastrag.server.live import Live
from fastrag.server.responses import answer_events, answer_payload, json_response, stream, stream_fixed
from fastrag.server.results import encode
from fastrag.server.schemas import (
    AnswerRequest,
    IndexRequest,
    SearchDatasetRequest,
    SearchRequest,
    SpanRequest,
    parsed,
)
from fastrag.server.services import Services, services
from fastrag.server.texts import span_text

#: The page and its assets (packaged with the Python sources).
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

App = Annotated[Services, Depends(services)]
SearchArgs = Annotated[SearchRequest, Depends(parsed(SearchRequest))]
AnswerArgs = Annotated[AnswerRequest, Depends(parsed(AnswerRequest))]
IndexArgs = Annotated[IndexRequest, Depends(parsed(IndexRequest))]
SearchDatasetArgs = Annotated[SearchDatasetRequest, Depends(parsed(SearchDatasetRequest))]
SpanArgs = Annotated[SpanRequest, Depends(parsed(SpanRequest))]

reading = APIRouter()
searching = APIRouter()
answering = APIRouter()
indexing = APIRouter()
#: Every router, as the application includes them.
ROUTERS = (reading, searching, answering, indexing)


@reading.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", headers={"cache-control": "no-cache"})


@reading.get("/healthz", response_model=schemas.Health)
async def healthz(s: App) -> dict[str, Any]:
    """Liveness, the live index and the model's state; paths relative to the project (the route is open
    without the token: it tells nothing of the machine's folders)."""
    error: str | None = None
    try:
        live = await run_in_threadpool(s.results.current)
    except ApiError as exc:
        live, error = None, str(exc)

    def relative(text: str | None) -> str | None:
        return None if text is None else s.shown(text)

    return {
        "status": "ok",
        "generation": live.generation if live else None,
        "repository": repository_name(live.retriever.index.manifest) if live else None,
        "files": len(live.paths) if live else 0,
        "chunks": len(live.retriever.index.chunks) if live else 0,
        "vectors": bool(live and live.retriever.index.has_vectors),
        "vectors_state": vectors_state(s.index_dir, live) if live else None,
        "index_error": relative(error),
        "model": relative(s.answerer.name),
        "model_note": relative(s.answerer.note),
        "model_loaded": s.answerer.loaded,
        "cache_entries": len(s.results.cache),
        "cache_hits": s.results.cache.hits,
        "cache_misses": s.results.cache.misses,
    }


def vectors_state(index_dir: Path, live: Live) -> str:
    """The live generation's vectors: ``lexical``, ``pending``, ``building`` or ``ready``
    (:func:`~fastrag.indexing.vector_stage.vector_status`)."""
    from fastrag.indexing.vector_stage import vector_status

    return str(vector_status(index_dir, live.generation, live.retriever.index.manifest)["state"])


@reading.get(
    "/span",
    responses={200: {"model": schemas.SpanResponse}, 404: {"model": schemas.ErrorResponse}, **schemas.ERRORS},
    openapi_extra=schemas.query_doc(SpanRequest),
)
async def span(s: App, args: SpanArgs) -> Response:
    """The text and line range of ``path[start:end]``, for a file of the live index only.

    ``path`` is a result's ``file_path`` (read where the index recorded its repository), or a path
    inside ``data/`` naming one.
    """
    live = await run_in_threadpool(s.results.current)
    indexed = isinstance(args.path, str) and args.path in live.paths
    name = args.path if indexed else s.confinement.display(s.confinement.check("path", args.path))
    if name not in live.paths:
        raise ApiError(404, f"{args.path} is not a file of the index")
    try:
        text, first, last = await run_in_threadpool(span_text, s.texts, name, args.start, args.end)
    except FileRefused as exc:  # swapped for a link, a FIFO, another content since it was indexed
        raise ApiError(409, str(exc)) from None
    return json_response(
        encode(
            {
                "file_path": name,
                "start": args.start,
                "end": args.end,
                "first_line": first,
                "last_line": last,
                "text": text,
            }
        )
    )


async def search(s: App, args: SearchArgs) -> Response:
    """The k spans that best answer ``query`` (``X-Cache: hit`` when served from the LRU cache)."""
    body, cached = await run_in_threadpool(s.results.search, args.query, args.k, args.mode, args.search_filter())
    return json_response(body, {"x-cache": "hit" if cached else "miss"})


_SEARCH_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"model": schemas.SearchResponse}, **schemas.ERRORS}
searching.add_api_route(
    "/search", search, methods=["GET"], operation_id="search_get", responses=_SEARCH_RESPONSES,
    openapi_extra=schemas.query_doc(SearchRequest),
)  # fmt: skip
searching.add_api_route(
    "/search", search, methods=["POST"], operation_id="search_post", responses=_SEARCH_RESPONSES,
    openapi_extra=schemas.body_doc(SearchRequest),
)  # fmt: skip


@searching.post(
    "/search_dataset",
    responses={200: {"model": schemas.SearchDatasetResponse}, **schemas.ERRORS},
    openapi_extra=schemas.body_doc(SearchDatasetRequest),
)
async def search_dataset_route(s: App, args: SearchDatasetArgs) -> Response:
    """Search every question of a dataset and save the results file (atomically)."""
    dataset = s.confinement.check("dataset_path", args.dataset_path)
    save = s.confinement.check("save_directory", args.save_directory)
    started = time.perf_counter()
    target, count = await run_in_threadpool(
        search_dataset,
        dataset,
        args.k,
        save,
        s.index_dir,
        progress=False,
        mode=args.mode,
        search_filter=args.search_filter(),
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


@answering.post(
    "/answer",
    responses={200: {"model": schemas.AnswerResponse, "content": {"text/event-stream": {}}}, **schemas.ERRORS},
    openapi_extra=schemas.body_doc(AnswerRequest),
)
async def answer(s: App, args: AnswerArgs) -> Response:
    """Retrieve, then answer with citations; ``stream=true`` sends server-sent events."""
    sources: list[MinimalSource] = []
    if args.k > 0:
        hits = await run_in_threadpool(lambda: s.results.current().search(args.query, args.k, args.mode))
        sources = hits_to_sources(hits)
    if not sources:
        fixed = answer_payload(args.query, NO_SOURCES_ANSWER, sources, None, None)
        return stream_fixed(fixed) if args.stream else JSONResponse(fixed)
    if not args.stream:
        done: GeneratedAnswer = await asyncio.wrap_future(s.answerer.generate(args.query, sources, args.max_new_tokens))
        return JSONResponse(answer_payload(args.query, done.answer, sources, done, s.answerer.name))
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
    return stream(answer_events(queue, future, args.query, sources, s.answerer.name))


@indexing.post(
    "/index",
    responses={200: {"model": schemas.IndexResponse}, 409: {"model": schemas.ErrorResponse}, **schemas.ERRORS},
    openapi_extra=schemas.body_doc(IndexRequest),
)
async def index(s: App, args: IndexArgs) -> Response:
    """Build (or update) the index into a new generation; searches keep the old one until it is published."""
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
            "vectors_skipped": report.vectors_skipped,
            "lexical_generation": report.lexical_path.name if report.lexical_path is not None else None,
            "lexical_seconds": round(report.lexical_seconds, 3),
        }
    )
