"""The HTTP API and the page: :func:`create_app` builds the application around one :class:`Services`.

The routes live in :mod:`fastrag.server.routes` (parameters checked by the request models of
:mod:`fastrag.server.schemas`, paths confined by :mod:`fastrag.server.safety`). Every error is JSON
``{"error": "..."}`` with a 4xx or 5xx status; a bug is logged on the server and answered with a
generic 500, never with a stack trace.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from fastrag.config import DEFAULT_INDEX_DIR, version
from fastrag.errors import UserError
from fastrag.server.answers import Answerer
from fastrag.server.auth import Access
from fastrag.server.errors import status_of
from fastrag.server.live import LiveIndex
from fastrag.server.responses import error_response, logger
from fastrag.server.results import CACHE_SIZE, SearchResults
from fastrag.server.routes import ROUTERS, STATIC_DIR
from fastrag.server.safety import MAX_BODY_BYTES, Confinement, Guard
from fastrag.server.services import Services
from fastrag.server.texts import SourceTexts
from fastrag.workspace import models_dir_of


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
    ``data_dir/models`` in fastrag's checkout, else the user's cache (:func:`~fastrag.workspace.models_dir_of`);
    ``allowed_hosts`` restricts the ``Host`` header, ``access`` asks for a token (see :class:`Guard` and
    :mod:`fastrag.server.auth`).
    """
    data = Path(os.path.abspath(data_dir))
    root = data.parent
    index = Path(os.path.abspath(index_dir))
    models = Path(os.path.abspath(models_dir)) if models_dir is not None else models_dir_of(root)
    live = LiveIndex(index, models)
    texts = SourceTexts(live.read)
    services = Services(
        root=root,
        index_dir=index,
        models_dir=models,
        confinement=Confinement(root, data, live.corpus_roots),
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
        version=version(),
        docs_url=None,  # Swagger UI and ReDoc load from a CDN: the page must work offline
        redoc_url=None,
        openapi_url="/openapi.json",
        lifespan=lifespan,
    )
    app.state.fastrag = services
    app.add_middleware(Guard, max_body=max_body, allowed_hosts=allowed_hosts, access=access)
    _errors(app, services)
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    return app


def _errors(app: FastAPI, services: Services) -> None:
    @app.exception_handler(UserError)
    async def user_error(_: Request, exc: UserError) -> JSONResponse:
        return error_response(status_of(exc), services.shown(str(exc)))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request refused"
        return error_response(exc.status_code, message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        return error_response(400, str(first.get("msg", "invalid request")))

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        logger.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, "internal server error")
