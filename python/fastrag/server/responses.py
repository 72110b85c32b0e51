"""Response bodies: JSON errors and documents, the answer payload, server-sent event streams."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import Future
from typing import Any

from fastapi.responses import JSONResponse, Response, StreamingResponse

from fastrag.answering.answer import GeneratedAnswer
from fastrag.errors import UserError
from fastrag.schemas import MinimalSource
from fastrag.server.results import encode

logger = logging.getLogger("fastrag.server")


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """Every error: ``{"error": message}`` with its status."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def json_response(body: bytes, headers: dict[str, str] | None = None) -> Response:
    """A JSON document already encoded (:func:`~fastrag.server.results.encode`)."""
    return Response(body, media_type="application/json", headers=headers)


def answer_payload(
    question: str, text: str, sources: list[MinimalSource], done: GeneratedAnswer | None, model: str | None
) -> dict[str, Any]:
    """The body of ``POST /answer`` (and of the stream's ``sources`` event)."""
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


def stream(events: AsyncIterator[bytes]) -> StreamingResponse:
    """A server-sent event stream, never buffered on the way."""
    return StreamingResponse(
        events, media_type="text/event-stream", headers={"cache-control": "no-cache", "x-accel-buffering": "no"}
    )


def stream_fixed(payload: dict[str, Any]) -> StreamingResponse:
    """The stream of an answer known at once (no source: the fixed answer)."""

    async def events() -> AsyncIterator[bytes]:
        yield sse(payload["answer"])
        yield sse(payload, "sources")
        yield sse({}, "done")

    return stream(events())


async def answer_events(
    queue: asyncio.Queue[str | None], future: Future[Any], question: str, sources: list[MinimalSource], model: str
) -> AsyncIterator[bytes]:
    """Text pieces as they come (``data:``), then ``event: sources`` with the whole answer, then ``event: done``.

    A failure after the stream started becomes ``event: error`` with ``{"error": ...}``.
    """
    while (piece := await queue.get()) is not None:
        yield sse(piece)
    try:
        done: GeneratedAnswer = future.result()
    except UserError as exc:
        yield sse({"error": str(exc)}, "error")
        return
    except Exception as exc:  # a bug: logged here, never sent
        logger.error("internal error while generating", exc_info=exc)
        yield sse({"error": "internal server error"}, "error")
        return
    yield sse(answer_payload(question, done.answer, sources, done, model), "sources")
    yield sse({}, "done")
